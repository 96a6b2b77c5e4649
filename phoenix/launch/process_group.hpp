// phoenix/launch/process_group.hpp — forked child processes: local node processes for the demo, tests and
// benchmarks, each with a control and a report pipe.
//
// The benchmarks run every phoenix node in a process of its own, so that nodes share no threads, allocator or
// lock, as on real machines. A ProcessGroup forks them and owns them: every child is reaped, and a child still
// running when the group is destroyed is killed by its PID (SIGKILL), so no path leaves an orphan. A child
// also dies with its parent (PR_SET_PDEATHSIG), should the parent itself be killed.
//
// Protocol: the parent never writes to the control pipe; closing it is the one signal, "stop now". The child
// writes text lines to its report pipe (each line shorter than PIPE_BUF, hence atomic).
//
// Threads: one thread of the parent uses a ProcessGroup. Fork before any phoenix::Node exists in the parent:
// a child of a multi-threaded process may only call async-signal-safe functions.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace phoenix::launch {

using Clock = std::chrono::steady_clock;

// What a child's body gets: its ends of the two pipes.
struct ChildPipes {
  int control_fd = -1;  // read end; end-of-file means "stop now"
  int report_fd = -1;   // write end; lines for the parent
};

// A line a child reported, or the end of its report pipe (the child exited or closed it).
struct ChildEvent {
  std::size_t child = 0;
  std::string line;
  bool eof = false;
};

// Child side: writes one line (a '\n' is appended). Throws std::system_error if the pipe is gone.
void report_line(int report_fd, std::string_view line);

// Child side: waits up to `timeout` for the parent to close the control pipe; true once it has.
bool stop_requested(int control_fd, std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

// Parent side: SIGINT and SIGTERM make ProcessGroup::next_event return early instead of killing the parent,
// so that the parent still kills its children and removes its temporary files.
void install_interrupt_handlers();
bool interrupted();

class ProcessGroup {
 public:
  using Body = std::function<int(const ChildPipes&)>;

  ProcessGroup() = default;
  ~ProcessGroup();  // kills and reaps every child not yet reaped
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // Forks a child that runs body and exits with its return value (an exception is reported as an
  // "ERROR <name>: ..." line, exit status 1). Returns the child's index. Throws std::system_error.
  std::size_t spawn(std::string name, const Body& body);

  // The next line from any child, or its end of file; nullopt at the deadline or on SIGINT/SIGTERM.
  std::optional<ChildEvent> next_event(Clock::time_point deadline);

  // Closes every control pipe, waits up to `grace` for the children to exit, kills the rest, reaps all.
  // True when every child exited by itself with status 0.
  bool stop_all(std::chrono::milliseconds grace);
  // Closes one child's control pipe: its stop_requested() turns true. It is reaped by stop_all or the
  // destructor.
  void stop(std::size_t child);

  const std::string& name(std::size_t child) const { return children_[child].name; }
  // Sends sig to the child unless it was reaped (until then its PID cannot belong to another process).
  // False if it was reaped or kill() failed.
  bool signal(std::size_t child, int sig);

 private:
  struct Child {
    pid_t pid = -1;
    std::string name;
    int control_fd = -1;  // parent's write end
    int report_fd = -1;   // parent's read end
    std::string buffer;   // bytes read, not yet returned as lines
    bool eof_pending = false;
    bool reaped = false;
    int status = 0;
  };

  [[noreturn]] void run_child(const std::string& name, const Body& body, const ChildPipes& pipes);
  std::optional<ChildEvent> buffered_event();
  void read_report(std::size_t child);
  bool try_reap(Child& c);
  void kill_and_reap(Child& c);

  std::vector<Child> children_;
};

}  // namespace phoenix::launch
