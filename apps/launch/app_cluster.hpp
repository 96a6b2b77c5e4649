// apps/launch/app_cluster.hpp — runs one application on local node processes that join and leave while it runs.
//
// The launcher forks node processes on 127.0.0.1 (apps/launch/process_group.hpp). The first assumes the whole
// virtual node space; every later one links to every node present and obtains an interval with ph_join. At the
// times of the schedule a further node joins, or one present node (the oldest first: it holds virtual node 0
// and the most state) is told to leave — SIGUSR1, upon which the application hands everything to a neighbour
// with ph_leave and exits; a leave waits while only one node is present (the next may still be joining). Joins
// happen one at a time, in order. Node processes report their progress in the application's unit (tasks, rows,
// flops); the launcher prints the rate each second with the number of nodes present, and with a trace file
// writes the same as CSV (time_s,nodes,units_per_s,units_total), from which scripts/figure6.sh draws the
// paper's Figure 6.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <phoenix/config.hpp>
#include <phoenix/node.hpp>
#include <string>
#include <vector>

#include "apps/launch/process_group.hpp"
#include "apps/launch/run_turns.hpp"

namespace phoenix::launch {

struct ScheduleStep {
  double at_s = 0;  // seconds after the first node started
  enum class Action { join, leave } action = Action::join;
};

// Start on one node, add one every interval_s up to max_nodes, then remove them one at a time (paper, Figure
// 6).
std::vector<ScheduleStep> figure6_schedule(int max_nodes, double interval_s);
// "join@2,join@4,leave@8": an action and a time in seconds per step. nullopt if it does not parse.
std::optional<std::vector<ScheduleStep>> parse_schedule(const std::string& text);

struct ClusterOptions {
  std::string app = "app";  // names the nodes and the temporary directory
  int nodes = 2;            // present from the start
  std::vector<ScheduleStep> schedule;
  std::string unit = "units";
  std::string trace_file;   // empty: no trace
  double timeout_s = 3600;  // the run fails if no result came by then
  std::uint64_t space = std::uint64_t{1} << 40;
  bool quiet = false;  // no per-second progress lines
};

// What a node process gets: how to make its node, and its line to the launcher.
class NodeProcess {
 public:
  NodeProcess(const ChildPipes& pipes, Config config, std::vector<std::string> peers, int index);
  const Config& config() const { return config_; }
  // Ports of the nodes present when this one started; empty for the first node, which assumes [0, L).
  const std::vector<std::string>& peers() const { return peers_; }
  int index() const { return index_; }
  bool first() const { return peers_.empty(); }

  void report_port(const std::string& port);
  void report_joined(std::uint64_t lo, std::uint64_t hi);
  void report_units(std::uint64_t total);  // cumulative units done by this process
  void report_left();                      // after a successful leave: assumes nothing any more
  void report_finished();                  // the run ended here (or it was stopped): exiting is expected
  void report_result(const std::string& text);
  void report(const std::string& line);        // a remark, shown by the launcher
  void report_error(const std::string& what);  // the run fails (shown as "ERROR <node>: what")
  bool stop_requested() const;
  bool leave_requested() const;  // the launcher sent SIGUSR1
  // Hooks for the application's run loop: leave when the launcher says so; each tick reports units() and
  // turns stop() true once the launcher asks the process to stop.
  RunHooks run_hooks(std::function<std::uint64_t()> units);

 private:
  ChildPipes pipes_;
  Config config_;
  std::vector<std::string> peers_;
  int index_ = 0;
};

// The application's node process: make a phoenix::Node from config(), initialize it on tcp://127.0.0.1:0,
// report_port, link to peers(), then either assume everything (first()) or join and report_joined; run, calling
// report_units now and then; on leave_requested() leave and return 0; the node that learns the result calls
// report_result. Returns the exit status.
using NodeBody = std::function<int(NodeProcess&)>;

// The start every application's node process shares. connect_node: initialize `node` on tcp://127.0.0.1:0,
// report_port, add_port every peer. join_run (for a node that is not first()): ph_join until the node assumes
// an interval, then report_joined. Both return false after report_error. A node still joining when the run
// ends exits the process there (status 0): it holds nothing of the run, and finalize would wait for its join's
// answer from nodes that have gone.
bool connect_node(NodeProcess& process, Node& node);
bool join_run(NodeProcess& process, Node& node);

struct ClusterOutcome {
  bool ok = false;
  std::string result;  // the text of the RESULT line
  std::uint64_t units = 0;
  double seconds = 0;  // from the first node's start to the result
  int joins = 0, leaves = 0;
};

ClusterOutcome run_cluster(const ClusterOptions& options, const NodeBody& body);

}  // namespace phoenix::launch
