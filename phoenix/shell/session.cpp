// phoenix/shell/session.cpp — the session: its shell node, and the node processes it starts (their
// environment, what they report, their exits). Its view of the overlay is in observe.cpp, the commands in
// commands.cpp.
#include "phoenix/shell/session.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <utility>

#include "phoenix/shell/log.hpp"
#include "phoenix/shell/node_launch.hpp"

namespace phoenix::shell {
namespace {

volatile sig_atomic_t g_interrupt = 0;
volatile sig_atomic_t g_termination = 0;

void on_signal(int sig) {
  g_interrupt = 1;
  if (sig == SIGTERM || sig == SIGHUP) g_termination = sig;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  ::sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: poll returns EINTR and the command notices
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

bool take_interrupt() {
  if (!g_interrupt) return false;
  g_interrupt = 0;
  return true;
}

int termination_signal() { return g_termination; }

SignalsBlocked::SignalsBlocked() {
  sigset_t set;
  ::sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaddset(&set, sig);
  ::pthread_sigmask(SIG_BLOCK, &set, &saved_);
}

SignalsBlocked::~SignalsBlocked() { ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }

const char* to_string(NodeState s) {
  switch (s) {
    case NodeState::starting:
      return "starting";
    case NodeState::joining:
      return "joining";
    case NodeState::running:
      return "running";
    case NodeState::leaving:
      return "leaving";
    case NodeState::left:
      return "left";
    case NodeState::suspending:
      return "suspending";
    case NodeState::suspended:
      return "suspended";
    case NodeState::finished:
      return "finished";
    case NodeState::killed:
      return "killed";
    case NodeState::exited:
      return "exited";
    case NodeState::failed:
      return "failed";
  }
  return "?";
}

// --- the session ---------------------------------------------------------------------------------------------

Session::Session(SessionOptions options)
    : options_(std::move(options)), started_(std::chrono::steady_clock::now()) {
  options_.config.assume.clear();  // the shell assumes no virtual nodes
  options_.config.share.reset();
  {
    const SignalsBlocked blocked;  // the node's threads inherit the mask: Ctrl-C is for the main thread only
    node_ = std::make_unique<Node>(options_.config);
    if (auto ec = node_->initialize(options_.config.listen))
      throw std::runtime_error("cannot start the shell's node on " + options_.config.listen + ": " +
                               ec.message());
  }
  for (const auto& peer : options_.connect) {
    if (auto ec = node_->add_port(peer)) throw std::runtime_error("--connect " + peer + ": " + ec.message());
  }
  logger()->debug("phsh: node {} on {}", node_->resource_name(), node_->local_port());
}

Session::~Session() = default;

std::string Session::endpoint() const { return node_->local_port(); }
std::uint64_t Session::space_size() const { return node_->space_size(); }

std::vector<std::string> Session::node_names() const {
  std::set<std::string> names;
  for (const auto& r : records_) names.insert(r.name);
  for (const auto& [name, resource] : discovered_) names.insert(name);
  return {names.begin(), names.end()};
}

void Session::print(const std::string& text) const {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

void Session::event(const std::string& text) {
  char stamp[32];
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  std::snprintf(stamp, sizeof stamp, "[%.1fs] ", t);
  if (print_event_)
    print_event_(stamp + text);
  else
    print(stamp + text + "\n");
}

const NodeRecord* Session::find(const std::string& name) const {
  for (const auto& r : records_)
    if (r.name == name) return &r;
  return nullptr;
}

NodeRecord* Session::find(const std::string& name) {
  return const_cast<NodeRecord*>(std::as_const(*this).find(name));
}

NodeRecord& Session::record(const std::string& name) {
  if (auto* r = find(name)) return *r;
  if (discovered_.count(name))
    throw CommandError(name + ": not started by this shell (suspend and resume need its process)");
  throw CommandError("unknown node '" + name + "'");
}

bool Session::alive(const NodeRecord& r) const { return spawner_.running(r.process) && !r.wait_status; }

std::string Session::state_text(const NodeRecord& r) const {
  if (r.state == NodeState::exited && r.wait_status) {
    const int s = *r.wait_status;
    if (WIFEXITED(s)) return "exited(" + std::to_string(WEXITSTATUS(s)) + ")";
    if (WIFSIGNALED(s)) return "exited(signal " + std::to_string(WTERMSIG(s)) + ")";
  }
  return to_string(r.state);
}

std::string Session::next_name() {
  while (true) {
    std::string name = "n" + std::to_string(next_number_++);
    if (!find(name) && !discovered_.count(name)) return name;
  }
}

bool Session::overlay_is_empty() const {
  for (const auto& r : records_)
    if (alive(r)) return false;
  const auto snapshot = node_->routing_snapshot();
  for (const auto& route : snapshot.routes) {
    if (route.destination == snapshot.self || route.metric == 0xFFFF) continue;
    for (const auto& i : route.intervals)
      if (!i.empty()) return false;
  }
  return true;
}

std::vector<std::string> Session::peers_for(const NodeRecord& r) const {
  const std::string where = r.host.empty() ? "127.0.0.1" : host_name();
  std::vector<std::string> peers{with_host(node_->local_port(), where)};
  for (const auto& c : options_.connect) peers.push_back(c);
  for (const auto& other : records_)
    if (&other != &r && alive(other) && !other.endpoint.empty()) peers.push_back(other.endpoint);
  for (auto& p : peers) p = through_gateway(p, r.via);
  return peers;
}

std::string Session::suspend_file_for(const NodeRecord& r) const {
  if (r.host.empty()) return (options_.run_dir / (r.name + ".suspend")).string();
  return "/tmp/phsh-" + std::to_string(::getpid()) + "/" + r.name + ".suspend";
}

std::string Session::last_error_line(const NodeRecord& r) const {
  std::ifstream in(options_.run_dir / (r.name + ".err"));
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last;
}

// --- node processes ------------------------------------------------------------------------------------------

void Session::launch(std::size_t index, const std::string& role, int port) {
  NodeRecord& r = records_[index];
  NodeEnvironment env;
  env.name = r.name;
  env.listen = listen_endpoint(!r.host.empty(), port);
  env.peers = peers_for(r);
  env.key_file = std::filesystem::absolute(options_.config.cluster_key_file).string();
  if (!options_.config.control_key_file.empty())
    env.control_key_file = std::filesystem::absolute(options_.config.control_key_file).string();
  env.space_size = node_->space_size();
  env.role = role;
  if (role == "resume") env.resume_file = r.suspend_file;
  env.extra = r.extra_env;
  LaunchSpec spec;
  spec.stdout_log = options_.run_dir / (r.name + ".out");
  spec.stderr_file = options_.run_dir / (r.name + ".err");
  std::vector<std::string> command{r.app};
  command.insert(command.end(), r.args.begin(), r.args.end());
  if (r.host.empty()) {
    spec.argv = command;
    spec.environment = node_environment(env);
  } else {
    const std::string remote_dir = "/tmp/phsh-" + std::to_string(::getpid());
    std::error_code ec;
    const auto workdir = std::filesystem::current_path(ec);
    spec.argv = ssh_argv(options_.ssh_command, r.host, ec ? "" : workdir.string(), remote_dir,
                         node_environment(env), command);
  }
  r.endpoint.clear();
  r.joined.clear();
  r.error.clear();
  r.wait_status.reset();
  r.resource = 0;
  r.remote_pid = 0;
  r.state = NodeState::starting;
  try {
    r.process = spawner_.start(spec);
    r.stop_sent = false;
  } catch (const std::system_error& e) {
    r.state = NodeState::failed;
    r.wait_status = 127 << 8;
    throw CommandError(r.name + ": " + e.what());
  }
  process_of_[r.process] = index;
  logger()->debug("{}: started pid {} as {} ({})", r.name, spawner_.pid(r.process), role, spec.argv[0]);
}

void Session::await_port(std::size_t index, double timeout_s) {
  auto& r = records_[index];
  const bool done = wait_until([&] { return !r.endpoint.empty() || !alive(r); }, timeout_s);
  if (!r.endpoint.empty()) return;
  if (!done) {
    spawner_.close_stdin(r.process);
    spawner_.signal(r.process, SIGKILL);
    wait_until([&] { return !alive(r); }, 5);
    r.state = NodeState::failed;
    throw CommandError(r.name + ": no PORT line in " + std::to_string(static_cast<int>(timeout_s)) +
                       " s (stopped it; see " + (options_.run_dir / (r.name + ".err")).string() + ")");
  }
  std::string why = r.name + ": " + (r.wait_status ? describe_wait_status(*r.wait_status) : "ended") +
                    " before reporting its port";
  if (!r.error.empty())
    why += ": " + r.error;
  else if (auto last = last_error_line(r); !last.empty())
    why += ": " + last;
  throw CommandError(why);
}

void Session::await_joined(const std::vector<std::size_t>& indices, double timeout_s) {
  auto joined_or_gone = [&](const NodeRecord& r) {
    return !alive(r) || (r.state != NodeState::starting && r.state != NodeState::joining);
  };
  const bool done = wait_until(
      [&] {
        return std::all_of(indices.begin(), indices.end(), [&](auto i) { return joined_or_gone(records_[i]); });
      },
      timeout_s);
  for (auto i : indices) {
    const auto& r = records_[i];
    if (!done && !joined_or_gone(r))
      throw CommandError(r.name + ": not joined after " + std::to_string(static_cast<int>(timeout_s)) +
                         " s (still " + to_string(r.state) + ")");
  }
  check_started(indices);
  // Until the shell's routing table knows them too (a few DSDV updates), so that the next command sees them.
  // Not an error if it takes longer: `nodes` then says "no reply" for a moment.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    observe();
    if (std::all_of(indices.begin(), indices.end(),
                    [&](auto i) { return !alive(records_[i]) || records_[i].resource; }))
      break;
    wait_until([] { return false; }, 0.1);
  }
  check_started(indices);  // one may have failed meanwhile
}

void Session::check_started(const std::vector<std::size_t>& indices) const {
  for (auto i : indices) {
    const auto& r = records_[i];
    if (!r.error.empty()) throw CommandError(r.name + ": " + r.error);
    if (r.wait_status && !(WIFEXITED(*r.wait_status) && WEXITSTATUS(*r.wait_status) == 0)) {
      std::string why = r.name + ": " + describe_wait_status(*r.wait_status) +
                        (r.state == NodeState::exited && r.joined.empty() ? " before joining" : "");
      if (auto last = last_error_line(r); !last.empty()) why += ": " + last;
      throw CommandError(why);
    }
  }
}

bool Session::wait_until(const std::function<bool()>& done, std::optional<double> timeout_s) {
  const auto deadline = timeout_s ? std::chrono::steady_clock::now() +
                                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                            std::chrono::duration<double>(*timeout_s))
                                  : std::chrono::steady_clock::time_point::max();
  while (!done()) {
    if (take_interrupt()) throw CommandError("interrupted");
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    read_events(std::min(left, std::chrono::milliseconds(200)));
  }
  return true;
}

void Session::read_events(std::chrono::milliseconds timeout, int wake_fd, bool* woken) {
  for (const auto& e : spawner_.poll(timeout, wake_fd, woken)) on_event(e);
}

void Session::on_event(const ProcessEvent& e) {
  const auto it = process_of_.find(e.process);
  if (it == process_of_.end()) return;
  NodeRecord& r = records_[it->second];
  if (r.process != e.process) return;  // an earlier incarnation
  if (e.kind == ProcessEvent::Kind::line)
    on_line(r, e.line);
  else
    on_exit(r, e.status);
}

void Session::on_line(NodeRecord& r, const std::string& text) {
  const auto line = parse_node_line(text);
  using K = NodeLine::Kind;
  switch (line.kind) {
    case K::port:
      r.endpoint = with_host(line.text, r.host);
      if (r.state == NodeState::starting) r.state = NodeState::joining;
      break;
    case K::joined:
      r.joined = {line.interval};
      if (r.state == NodeState::starting || r.state == NodeState::joining) r.state = NodeState::running;
      event(r.name + " joined: assumes " + format_intervals(r.joined));
      break;
    case K::replica:
      if (r.state == NodeState::starting || r.state == NodeState::joining) r.state = NodeState::running;
      event(r.name + " started: " + line.text);
      break;
    case K::units:
      r.units = line.units;
      break;
    case K::left:
      r.state = NodeState::left;
      event(r.name + " left");
      break;
    case K::suspended:
      r.state = NodeState::suspended;
      if (!line.text.empty()) r.suspend_file = line.text;
      event(r.name + " suspended to " + r.suspend_file);
      break;
    case K::completed:
      r.completed = true;
      break;
    case K::finished:
      if (r.state != NodeState::left && r.state != NodeState::suspended && r.state != NodeState::killed)
        r.state = NodeState::finished;
      break;
    case K::result:
      r.results.push_back(line.text);
      event(r.name + " result: " + line.text);
      break;
    case K::error:
      r.error = line.text;
      ++r.errors;
      if (r.state != NodeState::starting) event(r.name + " error: " + line.text);  // else spawn reports it
      break;
    case K::remark:
      event(line.text);  // "NAME: text", from the application (a check, its statistics)
      break;
  }
}

void Session::on_exit(NodeRecord& r, int status) {
  r.wait_status = status;
  if (r.resource) r.exited_resource = r.resource;
  r.resource = 0;
  const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  const bool starting = r.state == NodeState::starting;  // the spawn or resume waiting for it says why
  if (r.state == NodeState::killed) return;
  if (!r.error.empty()) {
    r.state = NodeState::failed;
  } else if (!clean || (r.state != NodeState::left && r.state != NodeState::suspended &&
                        r.state != NodeState::finished)) {
    r.state = NodeState::exited;
  }
  if (!clean && !starting) {
    std::string text = r.name + " " + describe_wait_status(status);
    if (auto last = last_error_line(r); !last.empty()) text += ": " + last;
    event(text);
  }
}

}  // namespace phoenix::shell
