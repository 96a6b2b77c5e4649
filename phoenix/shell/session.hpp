// phoenix/shell/session.hpp — one phsh session: the shell's own phoenix::Node (a member of the overlay that
// assumes no virtual nodes), the node processes it started with what they reported, and the commands.
//
// The shell talks to nodes only through Node::control (phoenix/include/phoenix/node.hpp, "Remote control"):
// the same messages over the same overlay as the application's, so it reaches every node the overlay reaches,
// through SSH gateways and NATs alike. Which nodes exist it learns from its own routing table (every route
// destination but itself is a node) and their "status" replies; which processes it started, from their
// stdout (reports.hpp). Nothing it does can lose a message: leave and suspend are requests the application
// carries out with ph_leave / ph_suspend, and kill is a crash the overlay is built to survive.
//
// Threads: one thread uses a Session. Commands block until done or until their bound (each says which);
// Ctrl-C (SIGINT) aborts the command running, never the shell.
#pragma once

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <phoenix/config.hpp>
#include <phoenix/node.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "phoenix/shell/command_line.hpp"
#include "phoenix/shell/reports.hpp"
#include "phoenix/shell/spawner.hpp"
#include "phoenix/shell/views.hpp"

namespace phoenix::shell {

// SIGINT sets a flag (the command running checks it and stops); SIGTERM and SIGHUP too, and are remembered.
// SIGPIPE is ignored. Installed without SA_RESTART, so that a blocking poll returns.
void install_signal_handlers();
bool take_interrupt();     // true once per SIGINT/SIGTERM/SIGHUP, clearing it
int termination_signal();  // SIGTERM or SIGHUP if one came, else 0

// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread while it lives (threads it starts inherit that).
class SignalsBlocked {
 public:
  SignalsBlocked();
  ~SignalsBlocked();
  SignalsBlocked(const SignalsBlocked&) = delete;
  SignalsBlocked& operator=(const SignalsBlocked&) = delete;

 private:
  sigset_t saved_{};
};

// A failed command: one line, without the "phsh: " prefix.
class CommandError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SessionOptions {
  Config config;                         // the shell's node: name, listen, key file, L, ...
  std::vector<std::string> connect;      // further peers (--connect)
  std::filesystem::path run_dir;         // output, error and suspend files of local nodes
  std::vector<std::string> ssh_command;  // ssh and its options, as words
  bool interactive = false;              // progress lines while waiting; watch may redraw the screen
};

enum class NodeState {
  starting,    // started, no PORT line yet
  joining,     // PORT seen, no JOINED yet
  running,     // JOINED seen
  leaving,     // "leave" sent
  left,        // LEFT seen
  suspending,  // "suspend" sent
  suspended,   // SUSPENDED seen
  finished,    // FINISHED seen
  killed,      // "kill" sent (or killed by its PID)
  exited,      // the process ended otherwise (see wait_status)
  failed,      // it reported ERROR
};

// A node process this session started (its latest incarnation: resume reuses the record).
struct NodeRecord {
  std::string name;
  std::string app;                // the program, resolved
  std::vector<std::string> args;  // its arguments
  std::string host;               // [USER@]HOST for ssh, "" for this host
  std::string via;                // ssh://GATEWAY its peers are reached through, or ""
  std::size_t process = 0;        // the Spawner's index of the current process
  std::string endpoint;           // from its PORT line, wildcard host replaced
  std::vector<Interval> joined;   // from its JOINED line
  std::uint64_t units = 0;        // from its UNITS lines
  NodeState state = NodeState::starting;
  std::optional<int> wait_status;  // once the process has exited
  std::string error;               // its last ERROR line
  std::size_t errors = 0;          // how many ERROR lines it wrote
  std::vector<std::string> results;
  std::string suspend_file;
  vp_t resource = 0;  // its resource name, once a status reply named it
  vp_t exited_resource = 0;  // the resource name of its last incarnation that exited (for orphaned intervals)
  long remote_pid = 0;
  bool stop_sent = false;              // wait closed its stdin, or stopped it as a lagging replica
  std::vector<std::string> extra_env;  // VOLPEX_* of a Volpex replica (spawn --replicas)
  // A Volpex replica: which spawn --replicas started it (its count in Session::replica_spawns_), its process
  // and replica numbers; completed once it reported COMPLETED (its computation is done).
  struct ReplicaOf {
    std::size_t spawn = 0;
    int process = 0, replica = 0;
  };
  std::optional<ReplicaOf> replica_of;
  bool completed = false;
};

class Session {
 public:
  // Starts the shell's node. Throws std::runtime_error with one line if it cannot.
  explicit Session(SessionOptions options);
  ~Session();  // kills and reaps node processes still attached (quit detaches or stops them first)
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs one command (not quit: see quit()). Returns "" when it succeeded, else one line saying why not
  // (without the "phsh: " prefix).
  std::string run(const Command& command);

  // Reads what node processes reported for up to `timeout` and shows the events; returns early when
  // `wake_fd` becomes readable (*woken set) or on a signal.
  void read_events(std::chrono::milliseconds timeout, int wake_fd = -1, bool* woken = nullptr);

  // quit: with stop, closes the stdin of every node process still running, waits for them (10 s) and kills
  // the rest; without, hands them to a keeper so they outlive phsh. Says what it did.
  void quit(bool stop);

  // Node names for completion: the ones started here and the ones seen in the overlay.
  std::vector<std::string> node_names() const;
  std::string endpoint() const;
  std::uint64_t space_size() const;
  const std::filesystem::path& run_dir() const { return options_.run_dir; }

  // Where event lines ("[1.2s] n1 joined: ...") go; stdout by default.
  void set_event_printer(std::function<void(const std::string&)> printer) { print_event_ = std::move(printer); }

 private:
  struct Observed {
    vp_t resource = 0;
    NodeStatus status;
  };

  // commands (commands.cpp)
  void dispatch(const Command& c);
  void spawn(const Command& c);
  void spawn_replicas(const Command& c, const std::string& program, bool overlay_empty, double timeout_s);
  void leave(const Command& c);
  void suspend(const Command& c);
  void resume(const Command& c);
  void kill(const Command& c);
  void kill_record(NodeRecord& r);  // the node crashes (SIGKILL); throws if it does not end
  void request_exit(NodeRecord& r, const std::string& request, NodeState doing, NodeState done,
                    double timeout_s);
  void show_nodes();
  void show_routes(const std::string& name);
  void show_links();
  void show_map();
  void write_dot(const Command& c);
  void watch(double seconds);
  void wait(std::optional<double> timeout_s);
  bool computation_over() const;
  bool replicas_running() const;
  std::set<std::pair<std::size_t, int>> replica_processes(bool completed_only) const;
  void show_log(const std::string& name, int lines);
  void sleep(double seconds);

  // process side (session.cpp)
  void launch(std::size_t record, const std::string& role, int port);
  void await_port(std::size_t record, double timeout_s);
  void await_joined(const std::vector<std::size_t>& records, double timeout_s);
  void check_started(const std::vector<std::size_t>& records) const;  // throws if one failed
  void on_event(const ProcessEvent& e);
  void on_line(NodeRecord& r, const std::string& line);
  void on_exit(NodeRecord& r, int status);
  bool alive(const NodeRecord& r) const;
  bool overlay_is_empty() const;
  std::string next_name();
  std::vector<std::string> peers_for(const NodeRecord& r) const;
  std::string suspend_file_for(const NodeRecord& r) const;
  std::string last_error_line(const NodeRecord& r) const;
  NodeRecord& record(const std::string& name);  // throws "unknown node"
  NodeRecord* find(const std::string& name);
  const NodeRecord* find(const std::string& name) const;
  // Pumps events until done() or the timeout (no timeout: none); false at the timeout. Throws CommandError
  // ("interrupted") on Ctrl-C.
  bool wait_until(const std::function<bool()>& done, std::optional<double> timeout_s);
  void event(const std::string& text);
  void print(const std::string& text) const;

  // overlay side (observe.cpp)
  std::vector<Observed> observe();
  vp_t resource_of(const std::string& name);
  std::string control(const std::string& name, const std::string& request, std::chrono::milliseconds timeout);
  std::vector<NodeView> views(const std::vector<Observed>& observed) const;
  std::vector<LinkView> link_views(const std::vector<Observed>& observed) const;
  std::string name_of(vp_t resource) const;
  std::string state_text(const NodeRecord& r) const;

  SessionOptions options_;
  std::unique_ptr<Node> node_;
  Spawner spawner_;
  std::vector<NodeRecord> records_;                // in the order they were started
  std::map<std::size_t, std::size_t> process_of_;  // Spawner index -> record index
  std::map<std::string, vp_t> discovered_;         // nodes seen in the overlay that this session did not start
  std::size_t replica_spawns_ = 0;                 // how many spawn --replicas ran (NodeRecord::ReplicaOf)
  std::chrono::steady_clock::time_point started_;
  int next_number_ = 1;
  std::function<void(const std::string&)> print_event_;
};

const char* to_string(NodeState s);

}  // namespace phoenix::shell
