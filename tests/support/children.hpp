// Child processes of a test: programs forked and exec'd with their own environment, stdin as a control pipe
// (closing it means "stop now"), stdout read line by line, stderr to a log file shown when a check fails.
// Every child still running at the end is killed by its PID and reaped, whatever happened.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace phoenix::test {

using namespace std::chrono_literals;

inline bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

// One node process: its stdin is the control pipe (closing it means "stop now"), its stdout the report lines,
// its stderr a log file shown when a check fails.
struct Child {
  std::string name;
  pid_t pid = -1;
  int control_fd = -1;  // write end of its stdin
  int report_fd = -1;   // read end of its stdout
  std::string buffer;
  std::vector<std::string> lines;
  bool eof = false;
  bool reaped = false;
  int status = 0;
  std::filesystem::path log;

  std::optional<std::string> line(std::string_view prefix) const {
    for (const auto& l : lines) {
      if (starts_with(l, prefix)) return l;
    }
    return std::nullopt;
  }
  bool has(std::string_view prefix) const { return line(prefix).has_value(); }
  bool contains(std::string_view text) const {
    for (const auto& l : lines) {
      if (l.find(text) != std::string::npos) return true;
    }
    return false;
  }
};

// The children of the test, killed by PID and reaped at the end whatever happened.
class Children {
 public:
  Children() = default;
  Children(const Children&) = delete;
  Children& operator=(const Children&) = delete;
  ~Children() {
    for (auto& c : children_) {
      if (!c->reaped && c->pid > 0) {
        ::kill(c->pid, SIGKILL);
        while (::waitpid(c->pid, &c->status, 0) < 0 && errno == EINTR) {
        }
      }
      if (c->control_fd >= 0) ::close(c->control_fd);
      if (c->report_fd >= 0) ::close(c->report_fd);
    }
  }

  // Forks and execs `program args...` with the parent's environment minus every PHOENIX_* and PHSH_*
  // variable, plus `env`. Everything the child needs is prepared before the fork: the test process has
  // threads, so the child calls only async-signal-safe functions until execve.
  Child& spawn(const std::string& name, const std::string& program, const std::vector<std::string>& args,
               const std::vector<std::string>& env, const std::filesystem::path& log) {
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) {
      if (!starts_with(*e, "PHOENIX_") && !starts_with(*e, "PHSH_")) env_strings.emplace_back(*e);
    }
    if (const char* level = std::getenv("PHOENIX_LOG_LEVEL"))
      env_strings.push_back(std::string("PHOENIX_LOG_LEVEL=") + level);
    env_strings.insert(env_strings.end(), env.begin(), env.end());
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_strings{program};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    const std::string log_path = log.string();

    int control[2], report[2];
    REQUIRE(::pipe2(control, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(report, O_CLOEXEC) == 0);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(127);
      sigset_t none;
      ::sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      const int err = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (::dup2(control[0], STDIN_FILENO) < 0 || ::dup2(report[1], STDOUT_FILENO) < 0 || err < 0 ||
          ::dup2(err, STDERR_FILENO) < 0)
        ::_exit(127);
      ::syscall(SYS_close_range, 3U, ~0U, 0U);  // the test node's sockets, the other children's pipes
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(control[0]);
    ::close(report[1]);
    if (pid < 0) {
      ::close(control[1]);
      ::close(report[0]);
      FAIL("fork failed: " << std::strerror(errno));
    }
    auto c = std::make_unique<Child>();
    c->name = name;
    c->pid = pid;
    c->control_fd = control[1];
    c->report_fd = report[0];
    c->log = log;
    children_.push_back(std::move(c));
    return *children_.back();
  }

  // Reads what the children write for up to `wait` (less once something came).
  void pump(std::chrono::milliseconds wait) {
    std::vector<pollfd> fds;
    std::vector<Child*> owners;
    for (auto& c : children_) {
      if (c->report_fd < 0) continue;
      fds.push_back(pollfd{c->report_fd, POLLIN, 0});
      owners.push_back(c.get());
    }
    if (fds.empty()) {
      std::this_thread::sleep_for(wait);
      return;
    }
    if (::poll(fds.data(), fds.size(), static_cast<int>(wait.count())) <= 0) return;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Child& c = *owners[i];
      char buf[4096];
      const ssize_t n = ::read(c.report_fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(c.report_fd);
        c.report_fd = -1;
        c.eof = true;
        if (!c.buffer.empty()) c.lines.push_back(std::exchange(c.buffer, {}));
        continue;
      }
      c.buffer.append(buf, static_cast<std::size_t>(n));
      for (auto nl = c.buffer.find('\n'); nl != std::string::npos; nl = c.buffer.find('\n')) {
        c.lines.push_back(c.buffer.substr(0, nl));
        c.buffer.erase(0, nl + 1);
      }
    }
  }

  // Pumps until `done()` or the timeout; returns done().
  template <class Done>
  bool wait_until(Done done, std::chrono::milliseconds timeout) {
    const auto give_up = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
      if (std::chrono::steady_clock::now() >= give_up) return done();
      pump(50ms);
    }
    return true;
  }

  // A line of `c` that starts with `prefix`, waiting for it up to the timeout (or until c's stdout closes).
  std::optional<std::string> wait_line(Child& c, std::string_view prefix, std::chrono::milliseconds timeout) {
    wait_until([&] { return c.has(prefix) || c.eof; }, timeout);
    return c.line(prefix);
  }

  // Waits for `c` to exit (its stdout read to the end); true with c.status set.
  bool wait_exit(Child& c, std::chrono::milliseconds timeout) {
    return wait_until(
        [&] {
          if (!c.reaped && ::waitpid(c.pid, &c.status, WNOHANG) == c.pid) c.reaped = true;
          return c.reaped && c.eof;
        },
        timeout);
  }

  // Everything the children said, for failure messages.
  std::string transcript() const {
    std::ostringstream out;
    for (const auto& c : children_) {
      out << "--- " << c->name << " (pid " << c->pid << ") stdout:\n";
      for (const auto& l : c->lines) out << "  " << l << "\n";
      std::ifstream err(c->log);
      std::vector<std::string> tail;
      for (std::string l; std::getline(err, l);) {
        tail.push_back(l);
        if (tail.size() > 30) tail.erase(tail.begin());
      }
      out << "--- " << c->name << " stderr (last lines):\n";
      for (const auto& l : tail) out << "  " << l << "\n";
    }
    return out.str();
  }

 private:
  std::vector<std::unique_ptr<Child>> children_;
};

}  // namespace phoenix::test
