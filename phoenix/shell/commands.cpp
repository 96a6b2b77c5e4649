// phoenix/shell/commands.cpp — the commands of phsh (command_line.hpp lists them), as Session members: each
// either does what it says or throws CommandError with one line saying why not.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <set>

#include "phoenix/shell/line_editor.hpp"
#include "phoenix/shell/node_launch.hpp"
#include "phoenix/shell/session.hpp"

namespace phoenix::shell {
namespace {

constexpr double default_timeout_s = 60;
constexpr auto control_timeout = std::chrono::milliseconds(5000);
constexpr auto result_grace = std::chrono::seconds(5);  // wait: how long nodes may run on after a result

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// The last `n` lines of a file ("" if it cannot be read).
std::string tail(const std::filesystem::path& file, int n) {
  std::ifstream in(file);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(std::move(line));
    if (lines.size() > static_cast<std::size_t>(n)) lines.pop_front();
  }
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

}  // namespace

std::string Session::run(const Command& c) {
  take_interrupt();  // a Ctrl-C typed before the command does not abort it
  try {
    read_events(std::chrono::milliseconds(0));
    dispatch(c);
    read_events(std::chrono::milliseconds(0));
    return {};
  } catch (const CommandError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return c.name + ": " + e.what();
  }
}

void Session::dispatch(const Command& c) {
  const std::string& n = c.name;
  if (n == "spawn") return spawn(c);
  if (n == "leave") return leave(c);
  if (n == "suspend") return suspend(c);
  if (n == "resume") return resume(c);
  if (n == "kill") return kill(c);
  if (n == "nodes") return show_nodes();
  if (n == "routes") return show_routes(c.nodes.at(0));
  if (n == "links") return show_links();
  if (n == "map") return show_map();
  if (n == "dot") return write_dot(c);
  if (n == "watch") return watch(c.seconds);
  if (n == "wait") return wait(c.timeout);
  if (n == "log") return show_log(c.nodes.at(0), c.lines);
  if (n == "sleep") return sleep(c.seconds);
  if (n == "help") return print(help_text(c.topic));
  throw CommandError("unknown command '" + n + "' (try help)");
}

// --- starting, leaving, suspending, resuming, killing --------------------------------------------------------

void Session::spawn(const Command& c) {
  std::string app_path = std::getenv("PHSH_APP_PATH") ? std::getenv("PHSH_APP_PATH") : "";
  if (const std::string installed = installed_apps_dir(); !installed.empty())
    app_path += (app_path.empty() ? "" : ":") + installed;
  const auto program = resolve_app(c.app, app_path.empty() ? nullptr : app_path.c_str(), std::getenv("PATH"));
  if (!program) throw CommandError("spawn: " + c.app + ": not found");
  const double timeout_s = c.timeout.value_or(default_timeout_s);
  bool first = overlay_is_empty();
  // Joined to a running overlay with --connect: its routes may not have arrived yet, and a second node
  // assuming all of [0, L) would be a disaster. Give them a moment.
  if (first && !options_.connect.empty()) first = !wait_until([&] { return !overlay_is_empty(); }, 5.0);
  if (c.replicas > 0) return spawn_replicas(c, *program, first, timeout_s);
  std::vector<std::size_t> started;
  for (int k = 0; k < c.count; ++k) {
    NodeRecord r;
    r.name = next_name();
    r.app = *program;
    r.args = c.args;
    r.host = placement_host(c.host, k, 0, 0);
    r.via = c.via;
    records_.push_back(std::move(r));
    const std::size_t index = records_.size() - 1;
    launch(index, first ? "first" : "join", c.port ? c.port + k : 0);
    first = false;
    started.push_back(index);
    await_port(index, timeout_s);  // the next one links to this one too
  }
  await_joined(started, timeout_s);
}

// -n Volpex processes of --replicas K each (phoenix/volpex.h): plain processes of the overlay that assume
// nothing and call the dataspace served by the nodes already there. Replica r of every process is started
// before replica r + 1 of any, so a computation starts with one replica of each as early as possible.
void Session::spawn_replicas(const Command& c, const std::string& program, bool overlay_empty,
                             double timeout_s) {
  if (overlay_empty)
    throw CommandError("spawn --replicas: no node serves the dataspace yet (spawn volpex_server first)");
  std::vector<std::size_t> started;
  const std::size_t spawn = replica_spawns_++;
  for (int replica = 0; replica < c.replicas; ++replica) {
    for (int process = 0; process < c.count; ++process) {
      NodeRecord r;
      r.name = next_name();
      r.replica_of = NodeRecord::ReplicaOf{spawn, process, replica};
      r.app = program;
      r.args = c.args;
      r.host = placement_host(c.host, process, replica, c.replicas);
      r.via = c.via;
      r.extra_env = {"VOLPEX_PROC_ID=" + std::to_string(process), "VOLPEX_NUM_PROCS=" + std::to_string(c.count),
                     "VOLPEX_REPLICA=" + std::to_string(replica),
                     "VOLPEX_REPLICAS=" + std::to_string(c.replicas)};
      records_.push_back(std::move(r));
      const std::size_t index = records_.size() - 1;
      launch(index, "replica", c.port ? c.port + static_cast<int>(started.size()) : 0);
      started.push_back(index);
      await_port(index, timeout_s);
    }
  }
  await_joined(started, timeout_s);
}

void Session::leave(const Command& c) {
  for (const auto& name : c.nodes) {
    if (!find(name) && discovered_.count(name)) {
      control(name, "leave", control_timeout);
      print(name + ": leave requested (not started by this shell: not waiting for it)\n");
      continue;
    }
    request_exit(record(name), "leave", NodeState::leaving, NodeState::left,
                 c.timeout.value_or(default_timeout_s));
  }
}

void Session::suspend(const Command& c) {
  NodeRecord& r = record(c.nodes.at(0));
  r.suspend_file = suspend_file_for(r);
  request_exit(r, "suspend " + r.suspend_file, NodeState::suspending, NodeState::suspended,
               c.timeout.value_or(default_timeout_s));
}

// Sends a leave or suspend request and waits until the node has done it and its process has exited, or
// reported an error trying.
void Session::request_exit(NodeRecord& r, const std::string& request, NodeState doing, NodeState done,
                           double timeout_s) {
  if (!alive(r)) throw CommandError(r.name + ": not running (" + state_text(r) + ")");
  const std::size_t errors = r.errors;
  control(r.name, request, control_timeout);
  r.state = doing;
  if (options_.interactive)
    print(r.name + ": " + request + " requested (waiting up to " + seconds_text(timeout_s) + " s)\n");
  if (!wait_until([&] { return !alive(r) || r.errors > errors; }, timeout_s))
    throw CommandError(r.name + ": did not " +
                       (r.state == done ? "exit" : request.substr(0, request.find(' '))) + " in " +
                       seconds_text(timeout_s) + " s");
  if (r.errors > errors) throw CommandError(r.name + ": " + r.error);
  if (r.state == NodeState::finished) throw CommandError(r.name + ": the computation ended first (finished)");
  if (r.state != done)
    throw CommandError(r.name + ": " + describe_wait_status(*r.wait_status) + " without reporting " +
                       (done == NodeState::left ? "LEFT" : "SUSPENDED"));
}

void Session::resume(const Command& c) {
  const std::string& name = c.nodes.at(0);
  NodeRecord& r = record(name);
  if (r.state != NodeState::suspended || alive(r))
    throw CommandError(name + ": not suspended (" + state_text(r) + ")");
  if (!c.host.empty()) r.host = c.host == "local" ? "" : c.host;
  if (!c.via.empty()) r.via = c.via;
  if (r.host.empty() && !std::filesystem::exists(r.suspend_file))
    throw CommandError(name + ": its suspend file " + r.suspend_file + " is not on this host");
  const std::size_t index = static_cast<std::size_t>(&r - records_.data());
  const double timeout_s = c.timeout.value_or(default_timeout_s);
  launch(index, "resume", c.port);
  await_port(index, timeout_s);
  await_joined({index}, timeout_s);
}

void Session::kill(const Command& c) {
  const std::string& name = c.nodes.at(0);
  if (!find(name) && discovered_.count(name)) {
    try {
      control(name, "kill", std::chrono::milliseconds(1000));
    } catch (const CommandError&) {  // it died before answering: as expected
    }
    print(name + ": kill requested (not started by this shell)\n");
    return;
  }
  NodeRecord& r = record(name);
  if (!alive(r)) throw CommandError(name + ": not running (" + state_text(r) + ")");
  kill_record(r);
  event(name + " killed");
}

void Session::kill_record(NodeRecord& r) {
  r.state = NodeState::killed;
  try {
    control(r.name, "kill", std::chrono::milliseconds(1000));  // no answer is the usual answer
  } catch (const CommandError&) {
  }
  if (!wait_until([&] { return !alive(r); }, 2.0)) {
    if (!r.host.empty() && r.remote_pid > 0) {  // the node's PID on its host, from its status
      auto argv = options_.ssh_command;
      argv.insert(argv.end(), {r.host, "kill -9 " + std::to_string(r.remote_pid)});
      run_command(argv, std::chrono::seconds(10));
    }
    spawner_.signal(r.process, SIGKILL);  // the node, or for --host the ssh that runs it
    if (!wait_until([&] { return !alive(r); }, 5.0))
      throw CommandError(r.name + ": still running after SIGKILL");
  }
}

// --- views ---------------------------------------------------------------------------------------------------

void Session::show_nodes() { print(nodes_table(views(observe()))); }

void Session::show_routes(const std::string& name) {
  std::string text = control(name, "routes", control_timeout);
  observe();  // for the names of the resource numbers
  std::string legend;
  std::set<std::string> seen;
  auto add = [&](vp_t resource) {
    const std::string n = name_of(resource);
    if (n[0] != '#' && seen.insert(n).second)
      legend += (legend.empty() ? "" : ", ") + n + " = " + std::to_string(resource);
  };
  add(node_->resource_name());
  for (const auto& r : records_)
    if (r.resource) add(r.resource);
  for (const auto& [n, resource] : discovered_) add(resource);
  print(text + (text.empty() || text.back() == '\n' ? "" : "\n") + "  resource names: " + legend + "\n");
}

void Session::show_links() { print(links_text(link_views(observe()))); }

void Session::show_map() { print(map_bar(node_->space_size(), views(observe()))); }

void Session::write_dot(const Command& c) {
  const auto observed = observe();
  const std::string text = dot_text(views(observed), link_views(observed));
  std::filesystem::path dot_file = c.file, png_file;
  if (c.png) {
    png_file = dot_file;
    png_file.replace_extension(".png");
    if (dot_file == png_file) dot_file.replace_extension(".dot");
  }
  {
    std::ofstream out(dot_file, std::ios::trunc);
    out << text;
    if (!out) throw CommandError("dot: cannot write " + dot_file.string());
  }
  if (!c.png) {
    print("dot: wrote " + dot_file.string() + "\n");
    return;
  }
  std::string output;
  const auto status = run_command({"dot", "-Tpng", "-o", png_file.string(), dot_file.string()},
                                  std::chrono::seconds(60), &output);
  if (!status) throw CommandError("dot: cannot run Graphviz's dot (apt-get install graphviz): " + output);
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0)
    throw CommandError("dot -Tpng " + describe_wait_status(*status) + ": " + output);
  print("dot: wrote " + dot_file.string() + " and " + png_file.string() + "\n");
}

void Session::watch(double seconds) {
  RawTerminal terminal;
  if (!terminal.ok() && seconds <= 0) throw CommandError("watch: needs a terminal, or --for SECONDS");
  const bool redraw = terminal.ok();
  std::deque<std::string> recent;  // event lines, shown under the views
  auto saved = print_event_;
  print_event_ = [&](const std::string& line) {
    if (!redraw) return print(line + "\n");
    recent.push_back(line);
    if (recent.size() > 5) recent.pop_front();
  };
  struct Restore {
    std::function<void(const std::string&)>& target;
    std::function<void(const std::string&)> saved;
    ~Restore() { target = saved; }
  } restore{print_event_, saved};
  const auto until = seconds > 0 ? std::chrono::steady_clock::now() +
                                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                           std::chrono::duration<double>(seconds))
                                 : std::chrono::steady_clock::time_point::max();
  while (true) {
    const auto all = views(observe());
    std::string frame = nodes_table(all) + "\n" + map_bar(node_->space_size(), all);
    if (redraw) {
      for (const auto& e : recent) frame += e + "\n";
      frame = "\033[H\033[2J" + frame + "\n(press any key to stop)\n";
    } else {
      frame += "\n";
    }
    print(frame);
    const auto next = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (std::chrono::steady_clock::now() < std::min(next, until)) {
      if (take_interrupt()) return;
      bool key = false;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(std::min(next, until) -
                                                                              std::chrono::steady_clock::now());
      read_events(std::max(left, std::chrono::milliseconds(0)), redraw ? STDIN_FILENO : -1, &key);
      if (key) {
        char ch;
        [[maybe_unused]] const auto n = ::read(STDIN_FILENO, &ch, 1);
        return;
      }
    }
    if (std::chrono::steady_clock::now() >= until) return;
  }
}

// A node that joined as the computation ended may never hear that it did (its interval came after the
// "done" passed through it): once the computation is over, nodes still running after a grace are told to stop,
// as the local launcher does (phoenix/launch/app_cluster.hpp). Volpex replicas are not told: a replica that has
// not completed by then only lags behind its twins, whose work is the computation's (VolpexMPI ends a job once
// one replica of every rank is done); it is stopped like `phsh kill` does, and that is no failure. A replica
// that completed and still serves laggards from its sender log ends by itself (volpex_finalize is bounded),
// and the nodes that serve the dataspace are told to stop only once no replica runs: at once then, since nobody
// is left for them to serve.
void Session::wait(std::optional<double> timeout_s) {
  auto running = [&] {
    return std::count_if(records_.begin(), records_.end(), [&](const NodeRecord& r) { return alive(r); });
  };
  const std::string grace_text = seconds_text(std::chrono::duration<double>(result_grace).count());
  std::optional<std::chrono::steady_clock::time_point> stop_at;
  auto done = [&] {
    if (running() == 0) return true;
    const auto now = std::chrono::steady_clock::now();
    if (!stop_at && computation_over()) stop_at = now + result_grace;
    const bool replicas = replicas_running();
    const bool replicas_ended = replica_spawns_ > 0 && !replicas;
    if (stop_at && (now >= *stop_at || replicas_ended)) {
      for (auto& r : records_) {
        if (!alive(r) || r.stop_sent || !r.results.empty()) continue;  // the result's node may be checking it
        if (r.replica_of) {
          if (r.completed) continue;
          r.stop_sent = true;
          print(r.name + ": replica " + std::to_string(r.replica_of->replica) + " of process " +
                std::to_string(r.replica_of->process) + " still running " + grace_text +
                " s after every process completed: stopped, as a lagging replica\n");
          kill_record(r);
        } else if (!replicas) {
          print(r.name + (replicas_ended
                              ? std::string(": every replica ended: told to stop\n")
                              : ": still running " + grace_text + " s after the result: told to stop\n"));
          spawner_.close_stdin(r.process);
          r.stop_sent = true;
        }
      }
    }
    return false;
  };
  if (!wait_until(done, timeout_s))
    throw CommandError("wait: " + std::to_string(running()) +
                       (running() == 1 ? " node process" : " node processes") + " still running after " +
                       seconds_text(*timeout_s) + " s");
  // A replica that failed (it fell behind a log, say) is what replication is for: no problem as long as
  // another replica of its process completed.
  const auto completed = replica_processes(true);
  std::vector<std::string> problems;
  std::size_t results = 0, replicas_failed = 0;
  for (const auto& r : records_) {
    results += r.results.size();
    if (r.state == NodeState::killed) continue;  // killed on purpose
    std::string problem;
    if (!r.error.empty())
      problem = r.name + " reported an error: " + r.error;
    else if (r.wait_status && !(WIFEXITED(*r.wait_status) && WEXITSTATUS(*r.wait_status) == 0))
      problem = r.name + " " + describe_wait_status(*r.wait_status);
    if (problem.empty()) continue;
    if (r.replica_of && completed.contains({r.replica_of->spawn, r.replica_of->process}))
      ++replicas_failed;
    else
      problems.push_back(problem);
  }
  if (!problems.empty()) {
    std::string more = problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more)" : "";
    throw CommandError("wait: " + problems.front() + more);
  }
  std::string tolerated;
  if (replicas_failed > 0)
    tolerated = "; " + std::to_string(replicas_failed) +
                (replicas_failed == 1 ? " replica failed" : " replicas failed") +
                ", and another replica of its process completed";
  print("wait: every node process has exited (" + std::to_string(records_.size()) + "); " +
        std::to_string(results) + (results == 1 ? " result" : " results") + tolerated + "\n");
}

// The processes of spawn --replicas, as (spawn, process): all, or those with a replica that reported COMPLETED.
std::set<std::pair<std::size_t, int>> Session::replica_processes(bool completed_only) const {
  std::set<std::pair<std::size_t, int>> processes;
  for (const auto& r : records_)
    if (r.replica_of && (r.completed || !completed_only))
      processes.emplace(r.replica_of->spawn, r.replica_of->process);
  return processes;
}

// Without Volpex replicas: once a node reported a result. With them: once every process of every
// spawn --replicas has a replica that completed, or once no replica runs any more (they all ended, some maybe
// failing: nothing more will come).
bool Session::computation_over() const {
  if (replica_spawns_ == 0)
    return std::any_of(records_.begin(), records_.end(),
                       [](const NodeRecord& r) { return !r.results.empty(); });
  return !replicas_running() || replica_processes(true) == replica_processes(false);
}

bool Session::replicas_running() const {
  return std::any_of(records_.begin(), records_.end(),
                     [&](const NodeRecord& r) { return r.replica_of && alive(r); });
}

void Session::show_log(const std::string& name, int lines) {
  NodeRecord* r = find(name);
  if (!r && !discovered_.count(name) && !resource_of(name)) throw CommandError("unknown node '" + name + "'");
  std::string failure;
  if (!r || alive(*r)) {
    try {
      const std::string text = control(name, "log " + std::to_string(lines), control_timeout);
      print("--- " + name + ": its last log lines ---\n" + text +
            (text.empty() || text.back() == '\n' ? "" : "\n"));
    } catch (const CommandError& e) {
      failure = e.what();
    }
  }
  if (r) {
    for (const char* ext : {".out", ".err"}) {
      const auto file = options_.run_dir / (name + ext);
      print("--- " + file.string() + " (last " + std::to_string(lines) + " lines) ---\n" + tail(file, lines));
    }
  }
  if (!failure.empty()) throw CommandError(failure);
}

void Session::sleep(double seconds) {
  wait_until([] { return false; }, seconds);
}

// --- quit ----------------------------------------------------------------------------------------------------

void Session::quit(bool stop) {
  std::vector<std::size_t> running;
  for (std::size_t i = 0; i < records_.size(); ++i)
    if (alive(records_[i])) running.push_back(i);
  std::string names;
  for (auto i : running) names += (names.empty() ? "" : " ") + records_[i].name;
  if (running.empty()) return;
  if (!stop) {
    spawner_.detach();
    print("phsh: left running: " + names + " (output goes on to " + options_.run_dir.string() + ")\n");
    return;
  }
  for (auto i : running) spawner_.close_stdin(records_[i].process);
  take_interrupt();
  try {
    wait_until(
        [&] {
          return std::none_of(running.begin(), running.end(), [&](auto i) { return alive(records_[i]); });
        },
        10.0);
  } catch (const CommandError&) {  // Ctrl-C: do not wait any longer
  }
  std::string killed;
  for (auto i : running) {
    if (!alive(records_[i])) continue;
    records_[i].state = NodeState::killed;
    spawner_.signal(records_[i].process, SIGKILL);
    killed += (killed.empty() ? "" : " ") + records_[i].name;
  }
  for (int round = 0; round < 50 && spawner_.running_count() > 0; ++round) read_events(std::chrono::milliseconds(100));
  print("phsh: stopped " + names +
        (killed.empty() ? "" : " (killed " + killed + ": they did not stop in 10 s)") + "\n");
}

}  // namespace phoenix::shell
