// phoenix/launch/app_cluster.cpp — see app_cluster.hpp.
#include "phoenix/launch/app_cluster.hpp"
#include "phoenix/launch/node_line.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "phoenix/launch/key_file.hpp"

namespace phoenix::launch {
namespace {

volatile sig_atomic_t g_leave_requested = 0;
void on_leave_signal(int) { g_leave_requested = 1; }

std::string thousands(std::uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<std::size_t>(i), ",");
  return s;
}


}  // namespace

std::vector<ScheduleStep> figure6_schedule(int max_nodes, double interval_s) {
  std::vector<ScheduleStep> steps;
  double t = 0;
  for (int n = 1; n < max_nodes; ++n) steps.push_back({t += interval_s, ScheduleStep::Action::join});
  for (int n = max_nodes; n > 1; --n) steps.push_back({t += interval_s, ScheduleStep::Action::leave});
  return steps;
}

std::optional<std::vector<ScheduleStep>> parse_schedule(const std::string& text) {
  std::vector<ScheduleStep> steps;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const auto at = item.find('@');
    if (at == std::string::npos) return std::nullopt;
    const std::string what = item.substr(0, at);
    ScheduleStep s;
    if (what == "join")
      s.action = ScheduleStep::Action::join;
    else if (what == "leave")
      s.action = ScheduleStep::Action::leave;
    else
      return std::nullopt;
    try {
      std::size_t used = 0;
      s.at_s = std::stod(item.substr(at + 1), &used);
      if (used != item.size() - at - 1 || s.at_s < 0) return std::nullopt;
    } catch (const std::exception&) {
      return std::nullopt;
    }
    steps.push_back(s);
  }
  std::stable_sort(steps.begin(), steps.end(), [](auto& a, auto& b) { return a.at_s < b.at_s; });
  return steps;
}

// --- the node process's side --------------------------------------------------------------------------------

namespace {

void install_leave_signal() {
  struct sigaction sa {};
  sa.sa_handler = on_leave_signal;
  ::sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR1, &sa, nullptr);
}

// How long a resumed node waits for the intervals of its file to be assumed again.
constexpr auto resume_wait = std::chrono::seconds(30);

}  // namespace

NodeProcess::NodeProcess(const ChildPipes& pipes, Config config, std::vector<std::string> peers, int index)
    : pipes_(pipes),
      config_(std::move(config)),
      peers_(std::move(peers)),
      index_(index),
      role_(peers_.empty() ? Role::first : Role::join) {
  install_leave_signal();
}

NodeProcess::NodeProcess(const ChildPipes& pipes, Config config, Role role, std::string resume_file)
    : pipes_(pipes),
      config_(std::move(config)),
      peers_(config_.peers),
      peers_in_config_(true),
      role_(role),
      resume_file_(role == Role::resume ? std::move(resume_file) : std::string()) {
  install_leave_signal();
}

void NodeProcess::report_port(const std::string& port) { report_line(pipes_.report_fd, port_line(port)); }
void NodeProcess::report_joined(std::uint64_t lo, std::uint64_t hi) {
  if (node_) node_->set_status("running");
  report_line(pipes_.report_fd, joined_line(lo, hi));
}
void NodeProcess::report_units(std::uint64_t total) {
  report_line(pipes_.report_fd, units_line(total));
}
void NodeProcess::report_left() {
  if (node_) node_->set_status("left");
  report_line(pipes_.report_fd, left_line);
}
void NodeProcess::report_suspended() { report_line(pipes_.report_fd, suspended_line(suspend_file_)); }
void NodeProcess::report_finished() {
  if (node_) node_->set_status("finished");
  report_line(pipes_.report_fd, finished_line);
}
void NodeProcess::report_result(const std::string& text) { report_line(pipes_.report_fd, result_line(text)); }
void NodeProcess::report(const std::string& line) { report_line(pipes_.report_fd, config_.name + ": " + line); }
void NodeProcess::report_error(const std::string& what) {
  report_line(pipes_.report_fd, error_line(config_.name, what));
}
bool NodeProcess::stop_requested() const { return launch::stop_requested(pipes_.control_fd); }
bool NodeProcess::leave_requested() const { return g_leave_requested != 0 || leave_asked_; }

void NodeProcess::take_control_requests(Node& node) {
  for (;;) {
    auto r = node.take_control_request();
    switch (r.kind) {
      case Node::ControlRequest::Kind::none:
        return;
      case Node::ControlRequest::Kind::leave:
        leave_asked_ = true;
        break;
      case Node::ControlRequest::Kind::suspend:
        suspend_request_ = std::move(r.file);  // a later request replaces one not yet acted on
        break;
    }
  }
}

RunHooks NodeProcess::run_hooks(Node& node, std::function<std::uint64_t()> units) {
  auto stop = std::make_shared<bool>(false);
  RunHooks h;
  h.stop = [stop] { return *stop; };
  h.leave_now = [this] { return leave_requested(); };
  h.suspend_to = [this]() -> std::optional<std::string> {
    if (!suspend_request_) return std::nullopt;
    suspend_file_ = std::move(*suspend_request_);
    suspend_request_.reset();
    return suspend_file_;
  };
  h.tick = [this, &node, stop, units = std::move(units)] {
    report_units(units());
    take_control_requests(node);
    *stop = stop_requested();
  };
  h.remark = [this](const std::string& line) { report(line); };
  h.error = [this](const std::string& line) { report_error(line); };
  return h;
}

bool connect_node(NodeProcess& process, Node& node) {
  const char* log_in = process.resuming() ? process.resume_file().c_str() : nullptr;
  if (auto ec = node.initialize(process.config().listen, log_in)) {
    process.report_error("initialize" + (log_in ? " from " + process.resume_file() : std::string()) + ": " +
                         ec.message());
    return false;
  }
  process.attach(node);
  node.set_status(process.resuming() ? "resuming" : process.first() ? "starting" : "joining");
  process.report_port(node.local_port());
  if (process.peers_in_config()) return true;
  for (const auto& peer : process.peers()) {
    if (auto ec = node.add_port(peer)) {
      process.report_error("add_port " + peer + ": " + ec.message());
      return false;
    }
  }
  return true;
}

namespace {

// A resumed node: its intervals come back when the application sets its state handlers (before join_run), at
// once or after a few steps of the node; wait for them, handling nothing else.
bool await_restored(NodeProcess& process, Node& node) {
  const auto give_up = Clock::now() + resume_wait;
  while (node.assumed().empty()) {
    if (process.stop_requested()) {
      // Stopped before the state came back: nothing of the run was taken, and the file still holds it all.
      process.report_finished();
      std::_Exit(0);
    }
    if (Clock::now() >= give_up) {
      process.report_error("resumed from " + process.resume_file() + " but assumes nothing after " +
                           std::to_string(resume_wait.count()) + " s (are the state handlers set?)");
      return false;
    }
    node.poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto mine = node.assumed();
  process.report_joined(mine.front().lo, mine.front().hi);
  return true;
}

}  // namespace

bool join_run(NodeProcess& process, Node& node) {
  if (process.resuming()) return await_restored(process, node);
  while (node.assumed().empty()) {
    if (process.stop_requested()) {
      process.report_finished();
      std::_Exit(0);
    }
    // A leave or suspend asked for meanwhile waits until the node has an interval: the run loop then acts on
    // it (a join attempt may still complete after its timeout, so the node cannot simply go).
    process.take_control_requests(node);
    const auto ec = node.join(std::chrono::milliseconds(250));  // short: the run's end is noticed soon
    if (ec && ec != make_error_code(PH_ETIMEDOUT) && ec != make_error_code(PH_EBUSY)) {
      process.report_error("join: " + ec.message());
      return false;
    }
  }
  const auto mine = node.assumed();
  process.report_joined(mine.front().lo, mine.front().hi);
  return true;
}

bool enter_space(NodeProcess& process, Node& node, const std::function<void()>& start) {
  if (!process.first()) return join_run(process, node);
  if (auto ec = node.assume({0, node.space_size()})) {
    process.report_error("assume: " + ec.message());
    return false;
  }
  process.report_joined(0, node.space_size());
  if (start) start();
  return true;
}

// --- the launcher's side ------------------------------------------------------------------------------------

namespace {

struct NodeSlot {
  std::string port;
  bool joined = false;   // assumes an interval
  bool leaving = false;  // told to leave
  bool left = false;     // said so, or exited
  bool exited = false;
  bool finished = false;  // its run ended: it may exit before the result reaches the launcher
  std::uint64_t units = 0;
};

class Launcher {
 public:
  Launcher(const ClusterOptions& o, const NodeBody& body) : o_(o), body_(body) {}

  ClusterOutcome run() {
    install_interrupt_handlers();
    dir_ = std::filesystem::temp_directory_path() / (o_.app + "-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    key_ = write_cluster_key(dir_ / "cluster.key");
    if (!o_.trace_file.empty()) {
      trace_.open(o_.trace_file);
      if (!trace_) say("cannot write the trace file " + o_.trace_file);
      trace_ << "time_s,nodes,units_per_s,units_total\n";
    }
    start_ = Clock::now();
    pending_joins_ = o_.nodes;
    pending_leaves_ = 0;
    ClusterOutcome out = loop();
    const bool clean = group_.stop_all(std::chrono::seconds(15));
    if (!clean) say("a node process did not exit cleanly");
    out.ok = out.ok && clean && !failed_;
    out.units = total_units();
    out.joins = joins_;
    out.leaves = leaves_;
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    return out;
  }

 private:
  double now_s() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  void say(const std::string& line) {
    std::printf("[%8.2fs] %s\n", now_s(), line.c_str());
    std::fflush(stdout);
  }
  std::uint64_t total_units() const {
    std::uint64_t t = 0;
    for (const auto& n : nodes_) t += n.units;
    return t;
  }
  int present() const {
    return static_cast<int>(
        std::count_if(nodes_.begin(), nodes_.end(), [](auto& n) { return n.joined && !n.left; }));
  }
  bool joining() const {
    return std::any_of(nodes_.begin(), nodes_.end(), [](auto& n) { return !n.joined && !n.left; });
  }

  void spawn_node() {
    const int index = static_cast<int>(nodes_.size());
    std::vector<std::string> peers;
    for (const auto& n : nodes_) {
      if (n.joined && !n.left && !n.leaving && !n.port.empty()) peers.push_back(n.port);
    }
    Config c;
    c.name = o_.app + std::to_string(index);
    c.space_size = o_.space;
    c.cluster_key_file = key_;
    c.retry_interval_ms = 100;
    if (const char* level = std::getenv("PHOENIX_LOG_LEVEL")) c.log_level = level;
    nodes_.emplace_back();
    const NodeBody& body = body_;
    group_.spawn(c.name, [c, peers, index, &body](const ChildPipes& p) {
      NodeProcess np(p, c, peers, index);
      return body(np);
    });
    if (index > 0) say(c.name + " starts and joins");
  }

  // Tells the oldest present node to leave; false (nothing done) while only one node would stay.
  bool leave_one() {
    if (present() - leaving_count() <= 1) return false;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      auto& n = nodes_[i];
      if (!n.joined || n.left || n.leaving) continue;
      n.leaving = true;
      say(o_.app + std::to_string(i) + " is told to leave");
      group_.signal(i, SIGUSR1);
      return true;
    }
    return false;
  }
  int leaving_count() const {
    return static_cast<int>(
        std::count_if(nodes_.begin(), nodes_.end(), [](auto& n) { return n.leaving && !n.left; }));
  }

  void on_line(std::size_t i, const std::string& line) {
    auto& n = nodes_[i];
    const std::string name = o_.app + std::to_string(i);
    const NodeLine l = parse_node_line(line);
    switch (l.kind) {
      case NodeLine::Kind::port:
        n.port = l.text;
        break;
      case NodeLine::Kind::joined:
        n.joined = true;
        if (i > 0) ++joins_;
        say(name + " assumes [" + std::to_string(l.interval.lo) + ", " + std::to_string(l.interval.hi) + "); " +
            std::to_string(present()) + " nodes present");
        break;
      case NodeLine::Kind::units:
        n.units = l.units;
        break;
      case NodeLine::Kind::left:
        n.left = true;
        ++leaves_;
        say(name + " has left; " + std::to_string(present()) + " nodes present");
        break;
      case NodeLine::Kind::finished:
        n.finished = true;
        break;
      case NodeLine::Kind::result:
        result_ = l.text;
        result_at_ = now_s();
        break;
      case NodeLine::Kind::error:
        failed_ = true;
        say(line);
        break;
      default:
        say(line);
        break;
    }
  }

  void progress_line(double t) {
    const std::uint64_t total = total_units();
    const double dt = t - last_progress_t_;
    const double rate = dt > 0 ? static_cast<double>(total - last_progress_units_) / dt : 0;
    if (!o_.quiet) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%d nodes  %14.0f %s/s  total %s", present(), rate, o_.unit.c_str(),
                    thousands(total).c_str());
      say(buf);
    }
    if (trace_) trace_ << t << ',' << present() << ',' << rate << ',' << total << '\n' << std::flush;
    last_progress_t_ = t;
    last_progress_units_ = total;
  }

  ClusterOutcome loop() {
    ClusterOutcome out;
    std::size_t next_step = 0;
    double next_progress = 1.0;
    std::optional<double> done_waiting_until;
    for (;;) {
      if (interrupted()) {
        say("interrupted; stopping every node");
        failed_ = true;
        return out;
      }
      const double t = now_s();
      if (t > o_.timeout_s) {
        say("no result after " + std::to_string(static_cast<int>(o_.timeout_s)) + " s; stopping every node");
        failed_ = true;
        return out;
      }
      while (next_step < o_.schedule.size() && o_.schedule[next_step].at_s <= t && !result_) {
        if (o_.schedule[next_step].action == ScheduleStep::Action::join)
          ++pending_joins_;
        else
          ++pending_leaves_;
        ++next_step;
      }
      // A leave waits while one node alone is present (the others may still be joining).
      if (pending_leaves_ > 0 && !result_ && leave_one()) --pending_leaves_;
      if (pending_joins_ > 0 && !joining() && !result_) {
        --pending_joins_;
        spawn_node();
      }
      if (t >= next_progress) {
        progress_line(t);
        next_progress += 1.0;
      }
      if (result_ && !done_waiting_until) {
        out.result = *result_;
        out.seconds = result_at_;
        out.ok = true;
        progress_line(t);
        say("result: " + *result_);
        done_waiting_until = t + 3.0;  // the nodes stop by themselves once they hear "done"
        // A node still joining holds nothing of the run and will not hear "done": stop it now.
        for (std::size_t i = 0; i < nodes_.size(); ++i) {
          if (!nodes_[i].joined && !nodes_[i].left) group_.stop(i);
        }
      }
      if (done_waiting_until && (t >= *done_waiting_until ||
                                 std::all_of(nodes_.begin(), nodes_.end(), [](auto& n) { return n.exited; }))) {
        return out;
      }
      const double wait = std::min({next_progress, t + 0.05, o_.timeout_s + 0.01});
      const auto deadline =
          start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait));
      auto ev = group_.next_event(deadline);
      if (!ev) continue;
      if (ev->eof) {
        auto& n = nodes_[ev->child];
        n.exited = true;
        if (!n.left && !n.finished && !result_) {
          say(o_.app + std::to_string(ev->child) + " exited unexpectedly");
          failed_ = true;
          return out;
        }
        n.left = true;
        if (!result_ && pending_joins_ == 0 &&
            std::all_of(nodes_.begin(), nodes_.end(), [](auto& m) { return m.exited; })) {
          say("every node exited, and none reported a result");
          failed_ = true;
          return out;
        }
        continue;
      }
      on_line(ev->child, ev->line);
      if (failed_) return out;
    }
  }

  const ClusterOptions& o_;
  const NodeBody& body_;
  ProcessGroup group_;
  std::filesystem::path dir_;
  std::string key_;
  std::ofstream trace_;
  Clock::time_point start_;
  std::vector<NodeSlot> nodes_;
  int pending_joins_ = 0;
  int pending_leaves_ = 0;  // scheduled leaves not yet told: one node must stay
  int joins_ = 0, leaves_ = 0;
  bool failed_ = false;
  std::optional<std::string> result_;
  double result_at_ = 0;
  double last_progress_t_ = 0;
  std::uint64_t last_progress_units_ = 0;
};

}  // namespace

ClusterOutcome run_cluster(const ClusterOptions& options, const NodeBody& body) {
  Launcher l(options, body);
  return l.run();
}

}  // namespace phoenix::launch
