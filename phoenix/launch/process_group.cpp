// bench/process_group.cpp — see process_group.hpp.
#include "phoenix/launch/process_group.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <system_error>
#include <thread>

namespace phoenix::launch {
namespace {

volatile sig_atomic_t g_interrupted = 0;

void on_interrupt(int) { g_interrupted = 1; }

[[noreturn]] void throw_errno(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Milliseconds left until `deadline`, for poll(): never negative, rounded up so we do not spin at the end.
int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1'000'000));
}

// In the child, before anything else: die with the parent, and take the default signal actions back. SIGPIPE
// is ignored: a write to a closed pipe or socket is an error the writer handles, not a reason to die.
void detach_from_parent_handlers(pid_t parent) {
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(1);  // parent already gone
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGPIPE, SIG_IGN);
}

}  // namespace

void report_line(int report_fd, std::string_view line) {
  std::string text(line);
  text += '\n';
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(report_fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("write to the report pipe");
    done += static_cast<std::size_t>(n);
  }
}

bool stop_requested(int control_fd, std::chrono::milliseconds timeout) {
  pollfd p{control_fd, POLLIN, 0};
  int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (n <= 0) return false;  // timeout, or EINTR: not a stop
  char byte;
  return ::read(control_fd, &byte, 1) <= 0;  // the parent never writes: readable means closed
}

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: poll() in next_event must return EINTR
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

bool interrupted() { return g_interrupted != 0; }

ProcessGroup::~ProcessGroup() {
  for (auto& c : children_) {
    kill_and_reap(c);
    close_fd(c.control_fd);
    close_fd(c.report_fd);
  }
}

std::size_t ProcessGroup::spawn(std::string name, const Body& body) {
  int control[2];
  int report[2];
  if (::pipe2(control, O_CLOEXEC) != 0) throw_errno("pipe");
  if (::pipe2(report, O_CLOEXEC) != 0) {
    ::close(control[0]);
    ::close(control[1]);
    throw_errno("pipe");
  }
  std::fflush(nullptr);  // else the child would inherit, and later repeat, unflushed stdio buffers
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    detach_from_parent_handlers(parent);
    ::close(control[1]);
    ::close(report[0]);
    run_child(name, body, ChildPipes{control[0], report[1]});
  }
  int fork_errno = errno;
  ::close(control[0]);
  ::close(report[1]);
  if (pid < 0) {
    ::close(control[1]);
    ::close(report[0]);
    throw std::system_error(fork_errno, std::generic_category(), "fork");
  }
  children_.push_back(Child{pid, std::move(name), control[1], report[0], {}, false, false, 0});
  return children_.size() - 1;
}

// The child's whole life. Its siblings' pipe ends are closed first: a child holding a sibling's control pipe
// open would keep that sibling from ever seeing its end of file. _exit, not exit: the parent's objects (and
// their destructors, such as the key file's removal) belong to the parent.
void ProcessGroup::run_child(const std::string& name, const Body& body, const ChildPipes& pipes) {
  for (auto& c : children_) {
    ::close(c.control_fd);
    ::close(c.report_fd);
  }
  int status = 1;
  try {
    status = body(pipes);
  } catch (const std::exception& e) {
    try {
      report_line(pipes.report_fd, "ERROR " + name + ": " + e.what());
    } catch (...) {
    }
  } catch (...) {
  }
  std::fflush(nullptr);
  ::_exit(status);
}

std::optional<ChildEvent> ProcessGroup::buffered_event() {
  for (std::size_t i = 0; i < children_.size(); ++i) {
    auto& c = children_[i];
    if (auto nl = c.buffer.find('\n'); nl != std::string::npos) {
      ChildEvent ev{i, c.buffer.substr(0, nl), false};
      c.buffer.erase(0, nl + 1);
      return ev;
    }
    if (c.eof_pending) {
      c.eof_pending = false;
      return ChildEvent{i, std::move(c.buffer), true};
    }
  }
  return std::nullopt;
}

void ProcessGroup::read_report(std::size_t child) {
  auto& c = children_[child];
  char buf[4096];
  ssize_t n = ::read(c.report_fd, buf, sizeof buf);
  if (n < 0 && errno == EINTR) return;
  if (n <= 0) {
    close_fd(c.report_fd);
    c.eof_pending = true;
    return;
  }
  c.buffer.append(buf, static_cast<std::size_t>(n));
}

std::optional<ChildEvent> ProcessGroup::next_event(Clock::time_point deadline) {
  while (!interrupted()) {
    if (auto ev = buffered_event()) return ev;
    std::vector<pollfd> fds;
    std::vector<std::size_t> owners;
    for (std::size_t i = 0; i < children_.size(); ++i) {
      if (children_[i].report_fd < 0) continue;
      fds.push_back(pollfd{children_[i].report_fd, POLLIN, 0});
      owners.push_back(i);
    }
    int timeout = remaining_ms(deadline);
    if (fds.empty() || timeout == 0) return std::nullopt;
    int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0 && errno != EINTR) throw_errno("poll");
    for (std::size_t k = 0; n > 0 && k < fds.size(); ++k) {
      if (fds[k].revents != 0) read_report(owners[k]);
    }
  }
  return std::nullopt;
}

bool ProcessGroup::signal(std::size_t child, int sig) {
  Child& c = children_.at(child);
  return !try_reap(c) && ::kill(c.pid, sig) == 0;
}

bool ProcessGroup::try_reap(Child& c) {
  if (c.reaped) return true;
  pid_t r = ::waitpid(c.pid, &c.status, WNOHANG);
  if (r == c.pid || (r < 0 && errno == ECHILD)) c.reaped = true;
  return c.reaped;
}

void ProcessGroup::kill_and_reap(Child& c) {
  if (c.reaped) return;
  ::kill(c.pid, SIGKILL);
  while (::waitpid(c.pid, &c.status, 0) < 0 && errno == EINTR) {
  }
  c.reaped = true;
}

void ProcessGroup::stop(std::size_t child) { close_fd(children_[child].control_fd); }

bool ProcessGroup::stop_all(std::chrono::milliseconds grace) {
  for (auto& c : children_) close_fd(c.control_fd);
  auto deadline = Clock::now() + grace;
  auto all_reaped = [&] {
    return std::all_of(children_.begin(), children_.end(), [&](Child& c) { return try_reap(c); });
  };
  while (!all_reaped() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  bool clean = true;
  for (auto& c : children_) {
    if (!c.reaped) {
      std::fprintf(stderr, "bench: %s did not stop within %lld ms; killing pid %d\n", c.name.c_str(),
                   static_cast<long long>(grace.count()), static_cast<int>(c.pid));
      kill_and_reap(c);
      clean = false;
      continue;
    }
    if (!WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0) {
      std::fprintf(stderr, "bench: %s (pid %d) ended with %s %d\n", c.name.c_str(), static_cast<int>(c.pid),
                   WIFEXITED(c.status) ? "status" : "signal",
                   WIFEXITED(c.status) ? WEXITSTATUS(c.status) : WTERMSIG(c.status));
      clean = false;
    }
  }
  return clean;
}

}  // namespace phoenix::launch
