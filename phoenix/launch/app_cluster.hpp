// phoenix/launch/app_cluster.hpp — runs one application on local node processes that join and leave while it
// runs.
//
// The launcher forks node processes on 127.0.0.1 (phoenix/launch/process_group.hpp). The first assumes the whole
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

#include "phoenix/launch/process_group.hpp"
#include "phoenix/launch/run_control.hpp"

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

// What a node process gets: how to make its node, and its line to the launcher (or to the shell phsh, which
// starts a node process as a program: phoenix/launch/spawned_node.hpp).
class NodeProcess {
 public:
  // How the node enters the run: it assumes all of [0, L) and starts the computation (first), obtains an
  // interval with ph_join (join), or takes back the intervals and state a suspended incarnation wrote to a file
  // (resume: initialize with that file as log_in; they return when the application sets its state handlers).
  enum class Role { first, join, resume };

  // The launcher's node process: first when it has no peers; connect_node links to the peers with add_port.
  NodeProcess(const ChildPipes& pipes, Config config, std::vector<std::string> peers, int index);
  // A node process started by the shell: the peers are config.peers, which the node links to itself when it
  // initializes. resume_file is used with Role::resume only.
  NodeProcess(const ChildPipes& pipes, Config config, Role role, std::string resume_file);
  const Config& config() const { return config_; }
  // Ports of the nodes present when this one started; empty for the launcher's first node, which assumes
  // [0, L).
  const std::vector<std::string>& peers() const { return peers_; }
  // True when the Config already names the peers (Node::initialize links to them): connect_node adds none.
  bool peers_in_config() const { return peers_in_config_; }
  int index() const { return index_; }
  Role role() const { return role_; }
  bool first() const { return role_ == Role::first; }
  bool resuming() const { return role_ == Role::resume; }
  const std::string& resume_file() const { return resume_file_; }

  // The node this process runs (connect_node attaches it): the reports below set its status for the shell
  // ("running" once joined, "left", "finished").
  void attach(Node& node) { node_ = &node; }

  void report_port(const std::string& port);
  void report_joined(std::uint64_t lo, std::uint64_t hi);
  void report_units(std::uint64_t total);  // cumulative units done by this process
  void report_left();                      // after a successful leave: assumes nothing any more
  void report_suspended();  // after a successful suspend: "SUSPENDED <file>"; the node is finalized
  void report_finished();   // the run ended here (or it was stopped): exiting is expected
  void report_result(const std::string& text);
  void report(const std::string& line);        // a remark, shown by the launcher
  void report_error(const std::string& what);  // the run fails (shown as "ERROR <node>: what")
  bool stop_requested() const;
  // The launcher sent SIGUSR1, or the shell sent "leave" (taken by take_control_requests).
  bool leave_requested() const;
  // The file the node is suspended (or being suspended) to: the last request handed to the run loop.
  const std::string& suspend_file() const { return suspend_file_; }
  // Takes the requests the shell sent to the node (Node::take_control_request) and records them: a leave for
  // leave_requested(), a suspend for the run hooks. Called by the run hooks' tick and while joining.
  void take_control_requests(Node& node);
  // Hooks for the application's run loop: leave when the launcher or the shell says so, suspend when the shell
  // says so; each tick reports units(), takes the node's control requests and turns stop() true once the
  // launcher (or the shell) asks the process to stop.
  RunHooks run_hooks(Node& node, std::function<std::uint64_t()> units);

 private:
  ChildPipes pipes_;
  Config config_;
  std::vector<std::string> peers_;
  bool peers_in_config_ = false;
  int index_ = 0;
  Role role_ = Role::join;
  std::string resume_file_;
  Node* node_ = nullptr;
  bool leave_asked_ = false;
  std::optional<std::string> suspend_request_;  // not yet handed to the run loop
  std::string suspend_file_;
};

// The application's node process: make a phoenix::Node from config(), connect_node, then either assume
// everything (first()) or join_run; set the state handlers before join_run (a resumed node gets its intervals
// back then); run, calling report_units now and then; on leave_requested() leave and return 0; on a suspend
// report_suspended and return 0 without finalizing again; the node that learns the result calls report_result.
// Returns the exit status.
using NodeBody = std::function<int(NodeProcess&)>;

// The start every application's node process shares. connect_node: initialize `node` on config().listen
// (tcp://127.0.0.1:0 for the launcher), with the resume file as log_in when resuming, attach it, report_port,
// add_port every peer unless the Config names them. join_run (for a node that is not first()): ph_join until
// the node assumes an interval, then report_joined; a resuming node does not join but waits (bounded) until it
// assumes its restored intervals again. Both return false after report_error. A node still joining when the
// run ends exits the process there (status 0): it holds nothing of the run, and finalize would wait for its
// join's answer from nodes that have gone.
bool connect_node(NodeProcess& process, Node& node);
bool join_run(NodeProcess& process, Node& node);
// How every application's node enters the virtual node space: the first() node assumes all of [0, L), reports
// it joined and runs `start` (the computation begins there); any other join_run()s. false after report_error.
bool enter_space(NodeProcess& process, Node& node, const std::function<void()>& start = {});

struct ClusterOutcome {
  bool ok = false;
  std::string result;  // the text of the RESULT line
  std::uint64_t units = 0;
  double seconds = 0;  // from the first node's start to the result
  int joins = 0, leaves = 0;
};

ClusterOutcome run_cluster(const ClusterOptions& options, const NodeBody& body);

}  // namespace phoenix::launch
