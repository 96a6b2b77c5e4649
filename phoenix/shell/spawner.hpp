// phoenix/shell/spawner.hpp — the node processes phsh starts: local programs, or ssh running one on another
// host. Each gets a pipe as stdin (phsh never writes to it; closing it means "stop now"), a pipe as stdout that
// phsh reads line by line (every line is also appended to a log file), and a file as stderr (appended to).
//
// Processes are started with posix_spawn (phsh has a phoenix::Node and so several threads: no plain fork), in
// a process group of their own, so that a Ctrl-C at phsh's terminal stops the command running, not the nodes.
// A process is reaped as soon as it has exited (by its PID, never wait(-1)), so none stays a zombie; the
// destructor kills (SIGKILL) and reaps every process still running unless they were handed to a keeper
// (detach).
//
// Threads: one thread uses a Spawner. Nothing here throws except start().
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace phoenix::shell {

struct LaunchSpec {
  std::vector<std::string> argv;         // argv[0]: a path, or a name looked up in PATH
  std::vector<std::string> environment;  // NAME=value, replacing or adding to phsh's own environment
  std::filesystem::path stdout_log;      // every stdout line is appended here
  std::filesystem::path stderr_file;     // the process's stderr, appended to
};

struct ProcessEvent {
  std::size_t process = 0;
  enum class Kind { line, exit } kind = Kind::line;
  std::string line;  // line: without its '\n'
  int status = 0;    // exit: the wait status (WIFEXITED / WIFSIGNALED)
};

// "exited 0", "exited 3", "killed by SIGKILL".
std::string describe_wait_status(int status);

class Spawner {
 public:
  Spawner() = default;
  ~Spawner();
  Spawner(const Spawner&) = delete;
  Spawner& operator=(const Spawner&) = delete;

  // Starts a process; returns its index. Throws std::system_error naming what failed (a program that cannot
  // be executed: "cannot run PATH: ...").
  std::size_t start(const LaunchSpec& spec);

  // Waits up to `timeout` for output or exits and returns them (lines before the exit of their process).
  // Returns early, possibly with nothing, on a signal (EINTR) or when `wake_fd` (if >= 0) is readable, which
  // sets *woken.
  std::vector<ProcessEvent> poll(std::chrono::milliseconds timeout, int wake_fd = -1, bool* woken = nullptr);

  bool running(std::size_t process) const;
  pid_t pid(std::size_t process) const;
  // Closes the process's stdin: "stop now".
  void close_stdin(std::size_t process);
  // Sends `sig` to the process unless it was reaped (until then its PID is its own). False if not sent.
  bool signal(std::size_t process, int sig);
  std::size_t running_count() const;

  // Hands every running process to a keeper process that holds their stdin open and goes on appending their
  // stdout to its log file until they exit, so that they outlive phsh. Returns the indices handed over.
  // Afterwards phsh no longer sees their output and does not kill them.
  std::vector<std::size_t> detach();

 private:
  struct Child {
    pid_t pid = -1;
    int stdin_fd = -1;   // write end
    int stdout_fd = -1;  // read end
    int log_fd = -1;     // stdout_log, append
    std::string buffer;  // bytes read, not yet a whole line
    bool reaped = false;
    bool detached = false;
  };

  void read_output(std::size_t index, std::vector<ProcessEvent>& events, bool drain);
  void emit_line(std::size_t index, std::string line, std::vector<ProcessEvent>& events);
  void reap_exited(std::vector<ProcessEvent>& events);
  void close_fds(Child& c);

  std::vector<Child> children_;
};

// Runs `argv` to completion (stdin /dev/null, stdout and stderr into *output if given, else discarded) and
// returns its wait status; kills it after `timeout`. nullopt, with *output saying why, if it could not start.
std::optional<int> run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                               std::string* output = nullptr);

}  // namespace phoenix::shell
