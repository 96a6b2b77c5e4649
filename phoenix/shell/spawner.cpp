// phoenix/shell/spawner.cpp — see spawner.hpp.
#include "phoenix/shell/spawner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <system_error>
#include <thread>
#include <utility>

extern char** environ;

namespace phoenix::shell {
namespace {

using Clock = std::chrono::steady_clock;

// phsh's environment with `overrides` (NAME=value) replacing or adding variables.
std::vector<std::string> merged_environment(const std::vector<std::string>& overrides) {
  std::map<std::string, std::string> vars;
  std::vector<std::string> order;
  auto put = [&](const std::string& entry) {
    const auto eq = entry.find('=');
    const std::string name = entry.substr(0, eq);
    if (vars.find(name) == vars.end()) order.push_back(name);
    vars[name] = entry;
  };
  for (char** e = environ; e && *e; ++e) put(*e);
  for (const auto& o : overrides) put(o);
  std::vector<std::string> out;
  for (const auto& name : order) out.push_back(vars[name]);
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Owns what posix_spawn needs and frees it on every path.
struct SpawnSetup {
  posix_spawn_file_actions_t actions{};
  posix_spawnattr_t attr{};
  SpawnSetup() {
    ::posix_spawn_file_actions_init(&actions);
    ::posix_spawnattr_init(&attr);
    sigset_t defaults, empty;
    ::sigemptyset(&defaults);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT, SIGCHLD}) ::sigaddset(&defaults, sig);
    ::sigemptyset(&empty);
    ::posix_spawnattr_setsigdefault(&attr, &defaults);  // phsh ignores SIGPIPE; its children must not
    ::posix_spawnattr_setsigmask(&attr, &empty);
    ::posix_spawnattr_setpgroup(&attr, 0);  // their own process group: Ctrl-C at phsh does not reach them
    ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  }
  ~SpawnSetup() {
    ::posix_spawn_file_actions_destroy(&actions);
    ::posix_spawnattr_destroy(&attr);
  }
};

pid_t spawn(std::vector<std::string> argv, const std::vector<std::string>& environment, SpawnSetup& setup) {
  auto env = merged_environment(environment);
  auto c_argv = c_strings(argv);
  auto c_env = c_strings(env);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, c_argv[0], &setup.actions, &setup.attr, c_argv.data(), c_env.data());
  if (rc != 0) throw std::system_error(rc, std::generic_category(), "cannot run " + argv[0]);
  return pid;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

// The keeper's loop, in a forked child of a multi-threaded process: async-signal-safe calls only (poll, read,
// write, close, _exit), over arrays allocated before the fork.
[[noreturn]] void run_keeper(pollfd* fds, const int* logs, const int* stdins, std::size_t count,
                             const std::vector<int>& open_fds) {
  ::setsid();
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, SIG_DFL);  // phsh's handlers would only set a flag
  // Keep only the pipes and logs: phsh's sockets must close with phsh, or its links would seem alive.
  for (const int fd : open_fds) {
    bool keep = fd <= 2;
    for (std::size_t i = 0; i < count && !keep; ++i) keep = fd == fds[i].fd || fd == logs[i] || fd == stdins[i];
    if (!keep) ::close(fd);
  }
  std::size_t open = count;
  char buf[4096];
  while (open > 0) {
    if (::poll(fds, count, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (std::size_t i = 0; i < count; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        if (logs[i] >= 0) write_all(logs[i], buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        if (stdins[i] >= 0) ::close(stdins[i]);  // its stdout ended: the process is gone or going
        --open;
      }
    }
  }
  ::_exit(0);
}

}  // namespace

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = ::sigabbrev_np(WTERMSIG(status));
    return std::string("killed by ") +
           (name ? "SIG" + std::string(name) : "signal " + std::to_string(WTERMSIG(status)));
  }
  return "status " + std::to_string(status);
}

Spawner::~Spawner() {
  for (auto& c : children_) {
    if (!c.reaped && !c.detached) {
      ::kill(c.pid, SIGKILL);
      while (::waitpid(c.pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      c.reaped = true;
    }
    close_fds(c);
  }
}

void Spawner::close_fds(Child& c) {
  close_fd(c.stdin_fd);
  close_fd(c.stdout_fd);
  close_fd(c.log_fd);
}

std::size_t Spawner::start(const LaunchSpec& spec) {
  if (spec.argv.empty()) throw std::system_error(EINVAL, std::generic_category(), "nothing to run");
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  if (::pipe2(out, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(in[0]);
    ::close(in[1]);
    throw std::system_error(e, std::generic_category(), "pipe");
  }
  Child c;
  c.stdin_fd = in[1];
  c.stdout_fd = out[0];
  c.log_fd = ::open(spec.stdout_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  SpawnSetup setup;
  ::posix_spawn_file_actions_adddup2(&setup.actions, in[0], 0);
  ::posix_spawn_file_actions_adddup2(&setup.actions, out[1], 1);
  ::posix_spawn_file_actions_addopen(&setup.actions, 2, spec.stderr_file.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0644);
  try {
    c.pid = spawn(spec.argv, spec.environment, setup);
  } catch (...) {
    ::close(in[0]);
    ::close(out[1]);
    close_fds(c);
    throw;
  }
  ::close(in[0]);
  ::close(out[1]);
  ::fcntl(c.stdout_fd, F_SETFL, ::fcntl(c.stdout_fd, F_GETFL) | O_NONBLOCK);
  children_.push_back(std::move(c));
  return children_.size() - 1;
}

void Spawner::emit_line(std::size_t index, std::string line, std::vector<ProcessEvent>& events) {
  Child& c = children_[index];
  if (c.log_fd >= 0) {
    line.push_back('\n');
    write_all(c.log_fd, line.data(), line.size());
    line.pop_back();
  }
  events.push_back({index, ProcessEvent::Kind::line, std::move(line), 0});
}

void Spawner::read_output(std::size_t index, std::vector<ProcessEvent>& events, bool drain) {
  Child& c = children_[index];
  char buf[4096];
  while (c.stdout_fd >= 0) {
    const ssize_t n = ::read(c.stdout_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) {
      c.buffer.append(buf, static_cast<std::size_t>(n));
      for (auto nl = c.buffer.find('\n'); nl != std::string::npos; nl = c.buffer.find('\n')) {
        emit_line(index, c.buffer.substr(0, nl), events);
        c.buffer.erase(0, nl + 1);
      }
      if (!drain && static_cast<std::size_t>(n) < sizeof buf) return;
      continue;
    }
    if (n < 0 && errno == EAGAIN && !drain) return;
    // End of file, an error, or nothing more to drain from an exited process (a grandchild may hold the pipe).
    if (!c.buffer.empty()) emit_line(index, std::exchange(c.buffer, {}), events);
    close_fd(c.stdout_fd);
  }
}

void Spawner::reap_exited(std::vector<ProcessEvent>& events) {
  for (std::size_t i = 0; i < children_.size(); ++i) {
    Child& c = children_[i];
    if (c.reaped || c.detached) continue;
    int status = 0;
    const pid_t r = ::waitpid(c.pid, &status, WNOHANG);
    if (r != c.pid) continue;
    c.reaped = true;
    read_output(i, events, true);
    close_fds(c);
    events.push_back({i, ProcessEvent::Kind::exit, {}, status});
  }
}

std::vector<ProcessEvent> Spawner::poll(std::chrono::milliseconds timeout, int wake_fd, bool* woken) {
  std::vector<ProcessEvent> events;
  if (woken) *woken = false;
  const auto deadline = Clock::now() + timeout;
  while (true) {
    reap_exited(events);
    if (!events.empty()) return events;
    std::vector<pollfd> fds;
    std::vector<std::size_t> owner;
    for (std::size_t i = 0; i < children_.size(); ++i) {
      if (children_[i].stdout_fd < 0 || children_[i].detached) continue;
      fds.push_back({children_[i].stdout_fd, POLLIN, 0});
      owner.push_back(i);
    }
    if (wake_fd >= 0) fds.push_back({wake_fd, POLLIN, 0});
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    // At most 100 ms at a time: a process that closed its stdout early is reaped by the next round.
    const int wait_ms = static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 100));
    const int n = ::poll(fds.data(), fds.size(), wait_ms);
    if (n < 0) {
      if (errno == EINTR) return events;
      throw std::system_error(errno, std::generic_category(), "poll");
    }
    for (std::size_t k = 0; k < owner.size(); ++k)
      if (fds[k].revents) read_output(owner[k], events, false);
    if (wake_fd >= 0 && fds.back().revents) {
      if (woken) *woken = true;
      return events;
    }
    if (!events.empty() || Clock::now() >= deadline) {
      reap_exited(events);
      return events;
    }
  }
}

bool Spawner::running(std::size_t process) const {
  return process < children_.size() && !children_[process].reaped && !children_[process].detached;
}

pid_t Spawner::pid(std::size_t process) const { return children_.at(process).pid; }

void Spawner::close_stdin(std::size_t process) { close_fd(children_.at(process).stdin_fd); }

bool Spawner::signal(std::size_t process, int sig) {
  const Child& c = children_.at(process);
  return !c.reaped && !c.detached && ::kill(c.pid, sig) == 0;
}

std::size_t Spawner::running_count() const {
  std::size_t n = 0;
  for (std::size_t i = 0; i < children_.size(); ++i) n += running(i) ? 1 : 0;
  return n;
}

std::vector<std::size_t> Spawner::detach() {
  std::vector<std::size_t> handed;
  std::vector<pollfd> fds;
  std::vector<int> logs, stdins;
  for (std::size_t i = 0; i < children_.size(); ++i) {
    Child& c = children_[i];
    if (!running(i)) continue;
    handed.push_back(i);
    if (c.stdout_fd >= 0) {
      if (!c.buffer.empty() && c.log_fd >= 0) write_all(c.log_fd, c.buffer.data(), c.buffer.size());
      fds.push_back({c.stdout_fd, POLLIN, 0});
      logs.push_back(c.log_fd);
      stdins.push_back(c.stdin_fd);
    }
  }
  if (handed.empty()) return handed;
  if (!fds.empty()) {
    std::vector<int> open_fds;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
      try {
        open_fds.push_back(std::stoi(entry.path().filename().string()));
      } catch (const std::exception&) {
      }
    }
    const pid_t keeper = ::fork();
    if (keeper == 0) run_keeper(fds.data(), logs.data(), stdins.data(), fds.size(), open_fds);
    // If the fork failed the processes still outlive phsh, only their stdin ends (they stop) and their
    // output is lost: nothing better to do.
  }
  for (std::size_t i : handed) {
    children_[i].detached = true;
    close_fds(children_[i]);
  }
  return handed;
}

std::optional<int> run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                               std::string* output) {
  if (argv.empty()) return std::nullopt;
  int out[2] = {-1, -1};
  if (output && ::pipe2(out, O_CLOEXEC) != 0) {
    *output = std::string("pipe: ") + std::strerror(errno);
    return std::nullopt;
  }
  SpawnSetup setup;
  ::posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  if (output) {
    ::posix_spawn_file_actions_adddup2(&setup.actions, out[1], 1);
    ::posix_spawn_file_actions_adddup2(&setup.actions, out[1], 2);
  } else {
    ::posix_spawn_file_actions_addopen(&setup.actions, 1, "/dev/null", O_WRONLY, 0);
    ::posix_spawn_file_actions_addopen(&setup.actions, 2, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid = -1;
  try {
    pid = spawn(argv, {}, setup);
  } catch (const std::system_error& e) {
    if (output) {
      ::close(out[0]);
      ::close(out[1]);
      *output = e.what();
    }
    return std::nullopt;
  }
  if (output) {
    ::close(out[1]);
    ::fcntl(out[0], F_SETFL, ::fcntl(out[0], F_GETFL) | O_NONBLOCK);
  }
  const auto deadline = Clock::now() + timeout;
  int status = 0;
  char buf[4096];
  while (true) {
    if (output && out[0] >= 0) {
      pollfd p{out[0], POLLIN, 0};
      ::poll(&p, 1, 50);
      ssize_t n;
      while ((n = ::read(out[0], buf, sizeof buf)) > 0) output->append(buf, static_cast<std::size_t>(n));
      if (n == 0) close_fd(out[0]);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (Clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
  }
  if (output && out[0] >= 0) {
    ssize_t n;
    while ((n = ::read(out[0], buf, sizeof buf)) > 0) output->append(buf, static_cast<std::size_t>(n));
    ::close(out[0]);
  }
  return status;
}

}  // namespace phoenix::shell
