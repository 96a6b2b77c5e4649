// tests/shell/test_phsh.cpp — the shell phsh (phoenix/shell/) run as its users run it: the real phsh binary, a
// separate process, starting real raytrace node processes on 127.0.0.1. The demo script (scripts/demo.phsh) run
// non-interactively, with every join, leave, suspend and resume and the checked result found in its output; an
// interactive session on a pseudo-terminal, driven by keystrokes (completion of commands and node names,
// history, watch ended by a key, a bad command's one error line, quit --stop); and spawn --host through a
// private OpenSSH server on 127.0.0.1 (tests/support/sshd.hpp). Every wait is bounded; phsh and everything it
// started (its session: phsh is made a session leader) is killed by PID at the end, whatever happened.
// Over 600 lines as one file: the cases share the fixtures that start phsh and its nodes and end them by PID.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "support/sshd.hpp"
#include "support/temp_dir.hpp"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Generous bounds: the machine is shared and the ASan build is several times slower.
constexpr auto key_timeout = 20s;      // the shell answering a keystroke or a quick command
constexpr auto spawn_timeout = 90s;    // nodes started and joined
constexpr auto script_timeout = 400s;  // a whole script, the nodes' computation included

const std::string source_dir = PHOENIX_SOURCE_DIR;
const std::string phsh_program = std::string(PHOENIX_BINARY_DIR) + "/phoenix/shell/phsh";
const std::string app_dir = std::string(PHOENIX_BINARY_DIR) + "/apps/raytrace";

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

std::size_t count(std::string_view text, std::string_view what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string_view::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(line);
  }
  return out;
}

// Terminal output made readable in a failure message: escape sequences and other control characters shown
// as \xNN, "\r\n" (and "\r\r\n") as a newline.
std::string printable(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto ch = static_cast<unsigned char>(text[i]);
    if (ch == '\r' && text.find_first_not_of('\r', i) != std::string_view::npos &&
        text[text.find_first_not_of('\r', i)] == '\n')
      continue;
    if (ch == '\n' || (ch >= 0x20 && ch < 0x7f)) {
      out.push_back(static_cast<char>(ch));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", ch);
      out += buf;
    }
  }
  return out;
}

// The last lines of every file of `dir` whose name ends with `suffix` (the nodes' error files), for failure
// messages.
std::string tails(const std::filesystem::path& dir, const std::string& suffix, std::size_t lines = 20) {
  std::string out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() < suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    std::vector<std::string> tail;
    std::ifstream in(e.path());
    for (std::string l; std::getline(in, l);) {
      tail.push_back(l);
      if (tail.size() > lines) tail.erase(tail.begin());
    }
    out += "--- " + e.path().string() + " (last lines):\n";
    for (const auto& l : tail) out += "  " + l + "\n";
  }
  return out;
}

// The live processes of session `sid` (zombies left out), from /proc.
std::vector<pid_t> session_members(pid_t sid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = phoenix::test::read_text(e.path() / "stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    long ppid = 0, pgrp = 0, session = 0;
    if (!(rest >> state >> ppid >> pgrp >> session)) continue;
    if (session == sid && state != 'Z' && state != 'X') out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

// The process of session `sid` that runs replica `replica` of Volpex process `process` (phsh's spawn --replicas
// sets VOLPEX_PROC_ID and VOLPEX_REPLICA in its environment), if one runs.
std::optional<pid_t> replica_pid(pid_t sid, int process, int replica) {
  for (pid_t p : session_members(sid)) {
    // Every entry of /proc/PID/environ ends with a NUL: with one in front, each is "\0NAME=value\0".
    const std::string env = '\0' + phoenix::test::read_text("/proc/" + std::to_string(p) + "/environ");
    const auto has = [&](const std::string& entry) {
      return env.find('\0' + entry + '\0') != std::string::npos;
    };
    if (has("VOLPEX_PROC_ID=" + std::to_string(process)) && has("VOLPEX_REPLICA=" + std::to_string(replica)))
      return p;
  }
  return std::nullopt;
}

// The PID of the node process named `name` among the members of session `sid`.
std::optional<pid_t> node_pid(pid_t sid, const std::string& name) {
  for (pid_t p : session_members(sid)) {
    const std::string env = '\0' + phoenix::test::read_text("/proc/" + std::to_string(p) + "/environ");
    if (env.find(std::string("\0PHOENIX_NAME=", 14) + name + '\0') != std::string::npos) return p;
  }
  return std::nullopt;
}

// What the sequential ring prints after "RESULT " for `args` ("3 1000 3000": processes, cells, rounds).
std::string sequential_ring_result(const std::string& volpex_dir, const std::string& args) {
  FILE* f = ::popen((volpex_dir + "/ring --sequential " + args).c_str(), "r");
  REQUIRE(f);
  char buf[256] = {};
  const bool read = std::fgets(buf, sizeof buf, f) != nullptr;
  ::pclose(f);
  REQUIRE(read);
  std::string line(buf);
  const std::string prefix = "RESULT ";
  REQUIRE(line.rfind(prefix, 0) == 0);
  return line.substr(prefix.size(), line.find('\n') - prefix.size());
}

// phsh's environment: the test's without PHOENIX_* and PHSH_* variables (PHOENIX_LOG_LEVEL kept) and without
// the ones `extra` sets, then `extra` (NAME=value).
std::vector<std::string> environment(const std::vector<std::string>& extra) {
  auto overridden = [&](std::string_view entry) {
    const auto name = entry.substr(0, entry.find('=') + 1);
    for (const auto& e : extra)
      if (starts_with(e, name)) return true;
    return false;
  };
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    const std::string_view entry = *e;
    if (overridden(entry)) continue;
    if ((starts_with(entry, "PHOENIX_") || starts_with(entry, "PHSH_")) &&
        !starts_with(entry, "PHOENIX_LOG_LEVEL="))
      continue;
    out.emplace_back(entry);
  }
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

// One phsh process, started in `cwd` as the leader of a session of its own, its output read from a pipe
// (stdout and stderr, stdin /dev/null) or from the master side of a pseudo-terminal (stdin, stdout and stderr
// the slave, which is its controlling terminal). At the end, every live process of that session — phsh, the
// node processes it started, the ssh clients running remote ones — is SIGKILLed by PID and phsh reaped.
class Phsh {
 public:
  enum class Mode { pipe, terminal };

  Phsh(Mode mode, const std::vector<std::string>& args, const std::vector<std::string>& env,
       const std::string& cwd) {
    REQUIRE_MESSAGE(::access(phsh_program.c_str(), X_OK) == 0, phsh_program << " is not built");
    // Everything the child needs is prepared before the fork; the child calls only async-signal-safe
    // functions until execve.
    std::vector<std::string> argv_strings{phsh_program};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_strings = env;
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    const pid_t parent = ::getpid();

    if (mode == Mode::terminal) {
      winsize size{};
      size.ws_row = 50;
      size.ws_col = 200;  // wide enough that no command line of the test wraps
      pid_ = ::forkpty(&fd_, nullptr, nullptr, &size);
      if (pid_ == 0) exec_child(parent, cwd.c_str(), -1, argv.data(), envp.data());
      REQUIRE_MESSAGE(pid_ > 0, "forkpty failed: " << std::strerror(errno));
    } else {
      int out[2];
      REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
      pid_ = ::fork();
      if (pid_ == 0) {
        ::setsid();
        exec_child(parent, cwd.c_str(), out[1], argv.data(), envp.data());
      }
      ::close(out[1]);
      fd_ = out[0];
      REQUIRE_MESSAGE(pid_ > 0, "fork failed: " << std::strerror(errno));
    }
  }

  ~Phsh() {
    if (fd_ >= 0) ::close(fd_);
    kill_all();
  }

  Phsh(const Phsh&) = delete;
  Phsh& operator=(const Phsh&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& output() const { return output_; }
  std::size_t mark() const { return output_.size(); }

  // Keystrokes, written to the terminal.
  void send(std::string_view keys) {
    while (!keys.empty()) {
      const ssize_t n = ::write(fd_, keys.data(), keys.size());
      if (n < 0 && errno == EINTR) continue;
      REQUIRE_MESSAGE(n > 0, "writing to phsh's terminal: " << std::strerror(errno));
      keys.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  // Reads what phsh wrote until `text` appears at or after `from`, its output ends, or the timeout; returns
  // where `text` starts.
  std::optional<std::size_t> wait_for(std::string_view text, std::size_t from,
                                      std::chrono::milliseconds timeout) {
    const auto give_up = Clock::now() + timeout;
    while (true) {
      if (const auto at = output_.find(text, from); at != std::string::npos) return at;
      if (eof_ || Clock::now() >= give_up) return std::nullopt;
      read_some(100ms);
    }
  }

  // Reads its output to the end and reaps it: its wait status, or nullopt at the timeout.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
    const auto give_up = Clock::now() + timeout;
    while (!(eof_ && reaped_)) {
      if (!reaped_ && ::waitpid(pid_, &status_, WNOHANG) == pid_) reaped_ = true;
      if (eof_ && reaped_) break;
      if (Clock::now() >= give_up) return std::nullopt;
      if (eof_)
        std::this_thread::sleep_for(20ms);
      else
        read_some(100ms);
    }
    return status_;
  }

  // The processes of its session still alive: none once phsh has ended properly.
  std::vector<pid_t> leftovers() const { return session_members(pid_); }

 private:
  [[noreturn]] static void exec_child(pid_t parent, const char* cwd, int out_fd, char** argv, char** envp) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(127);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (::chdir(cwd) != 0) ::_exit(127);
    if (out_fd >= 0) {
      const int in = ::open("/dev/null", O_RDONLY);
      if (in < 0 || ::dup2(in, STDIN_FILENO) < 0 || ::dup2(out_fd, STDOUT_FILENO) < 0 ||
          ::dup2(out_fd, STDERR_FILENO) < 0)
        ::_exit(127);
    }
    ::syscall(SYS_close_range, 3U, ~0U, 0U);
    ::execve(argv[0], argv, envp);
    ::_exit(127);
  }

  void read_some(std::chrono::milliseconds wait) {
    if (eof_) return;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return;
    char buf[4096];
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {  // end of the pipe, or EIO: the terminal's slave side is closed
      eof_ = true;
      return;
    }
    output_.append(buf, static_cast<std::size_t>(n));
  }

  void kill_all() {
    if (pid_ <= 0) return;
    for (int round = 0; round < 50; ++round) {
      auto members = session_members(pid_);
      if (members.empty() && reaped_) break;
      for (pid_t p : members) ::kill(p, SIGKILL);
      if (!reaped_) {
        ::kill(pid_, SIGKILL);
        while (::waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
        }
        reaped_ = true;
      }
      std::this_thread::sleep_for(20ms);
    }
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  std::string output_;
  bool eof_ = false;
  bool reaped_ = false;
  int status_ = 0;
};

std::string describe(std::optional<int> status) {
  if (!status) return "still running at the timeout";
  if (WIFEXITED(*status)) return "exited " + std::to_string(WEXITSTATUS(*status));
  if (WIFSIGNALED(*status)) return "killed by signal " + std::to_string(WTERMSIG(*status));
  return "status " + std::to_string(*status);
}

bool exited_zero(std::optional<int> status) {
  return status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0;
}

// Where the first line containing `text` is in `lines` (lines.size() if none), from line `from` on.
std::size_t line_with(const std::vector<std::string>& lines, std::string_view text, std::size_t from = 0) {
  for (std::size_t i = from; i < lines.size(); ++i)
    if (lines[i].find(text) != std::string::npos) return i;
  return lines.size();
}

std::size_t lines_with(const std::vector<std::string>& lines, std::string_view text) {
  std::size_t n = 0;
  for (const auto& l : lines) n += l.find(text) != std::string::npos;
  return n;
}

// The nodes table's header: NAME HOST ENDPOINT ASSUMED QUEUED MSG/S STATE, columns padded.
bool is_nodes_header(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words == std::vector<std::string>{"NAME", "HOST", "ENDPOINT", "ASSUMED", "QUEUED", "MSG/S", "STATE"};
}

// The map's bar: |AAAABBBB....|, one letter per column for the node assuming most of it, '.' for nobody.
bool is_map_bar(const std::string& line) {
  return line.size() > 2 && line.front() == '|' && line.back() == '|' &&
         line.find_first_not_of(".ABCDEFGHIJKLMNOPQRSTUVWXYZ", 1) == line.size() - 1;
}

// The width and height in a PNG file's IHDR chunk, if it is one.
std::optional<std::pair<std::uint32_t, std::uint32_t>> png_size(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  unsigned char head[24] = {};
  if (!in.read(reinterpret_cast<char*>(head), sizeof head)) return std::nullopt;
  static constexpr unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (std::memcmp(head, signature, 8) != 0 || std::memcmp(head + 12, "IHDR", 4) != 0) return std::nullopt;
  auto be32 = [&](int at) {
    return std::uint32_t{head[at]} << 24 | std::uint32_t{head[at + 1]} << 16 |
           std::uint32_t{head[at + 2]} << 8 | std::uint32_t{head[at + 3]};
  };
  return std::make_pair(be32(16), be32(20));
}

}  // namespace

TEST_CASE(
    "phsh runs the demo script: 5 nodes join, one leaves, one is suspended and resumed, the image checks") {
  REQUIRE_MESSAGE(::access((app_dir + "/raytrace").c_str(), X_OK) == 0, app_dir << "/raytrace is not built");
  phoenix::test::temp_dir dir;
  const auto run_dir = dir / "run";
  const auto png = dir / "demo.png";
  Phsh phsh(Phsh::Mode::pipe, {"--run-dir", run_dir.string(), "--echo", "scripts/demo.phsh"},
            environment({"PHSH_APP_PATH=" + app_dir, "DEMO_WIDTH=960", "DEMO_HEIGHT=720", "DEMO_SAMPLES=4",
                         "DEMO_PNG=" + png.string()}),
            source_dir);
  INFO("phsh's output:\n" << phsh.output() << tails(run_dir, ".err"));
  const auto status = phsh.wait_exit(script_timeout);
  CHECK_MESSAGE(exited_zero(status), "phsh " << describe(status));
  CHECK(phsh.leftovers().empty());  // wait saw every node process exit

  const auto lines = lines_of(phsh.output());
  // Each command echoed, none failed.
  CHECK(line_with(lines, "phsh> spawn -n 2 raytrace apps/raytrace/scenes/example.scene") < lines.size());
  CHECK(line_with(lines, "phsh> wait") < lines.size());
  for (const auto& l : lines) CHECK_MESSAGE(!starts_with(l, "phsh: "), l);
  CHECK(lines_with(lines, " error: ") == 0);

  // Every join, leave, suspend and resume, in the script's order.
  for (const std::string n : {"n1", "n2", "n3", "n4", "n5"})
    CHECK(lines_with(lines, "] " + n + " joined: ") >= 1);
  CHECK(lines_with(lines, "] n2 joined: ") == 2);  // its first start, and the resume
  const auto left = line_with(lines, "] n1 left");
  const auto suspended = line_with(lines, "] n2 suspended to " + (run_dir / "n2.suspend").string());
  const auto resumed = line_with(lines, "] n2 joined: ", line_with(lines, "] n2 joined: ") + 1);
  const auto result = line_with(lines, " result: checksum ");
  CHECK(left < lines.size());
  CHECK(suspended < lines.size());
  CHECK(resumed < lines.size());
  CHECK(result < lines.size());
  CHECK(left < suspended);
  CHECK(suspended < resumed);
  CHECK(resumed < result);

  // The views: the nodes table, the map with its bar and legend (nobody's share while n2 is suspended).
  CHECK(std::count_if(lines.begin(), lines.end(), is_nodes_header) >= 1);
  CHECK(std::count_if(lines.begin(), lines.end(), is_map_bar) >= 1);
  CHECK(line_with(lines, "  A  n1  [0, ") < lines.size());
  CHECK(line_with(lines, "  .  nobody  [") < lines.size());

  // One result, checked against the sequential render, the image written, every node gone.
  CHECK(count(phsh.output(), "result: checksum") == 1);
  CHECK(line_with(lines, ": raytrace: the parallel image is bit-identical to the sequential one") <
        lines.size());
  CHECK(line_with(lines, "wait: every node process has exited") < lines.size());
  REQUIRE(std::filesystem::exists(png));
  CHECK(std::filesystem::file_size(png) > 0);
  CHECK(png_size(png) == std::make_pair(std::uint32_t{960}, std::uint32_t{720}));
}

TEST_CASE("phsh on a terminal: completion, history, watch ended by a key, a bad command, quit --stop") {
  phoenix::test::temp_dir dir;
  const auto home = dir / "home";
  const auto run_dir = dir / "run";
  std::filesystem::create_directories(home);
  Phsh phsh(Phsh::Mode::terminal, {"--run-dir", run_dir.string()},
            environment({"HOME=" + home.string(), "TERM=xterm", "PHSH_APP_PATH=" + app_dir}), source_dir);
  INFO("the terminal showed:\n" << printable(phsh.output()) << tails(run_dir, ".err"));
  const std::string prompt = "phsh> ";
  // Waits for `text` after `from`, then for the prompt after it; returns where the prompt ends.
  auto expect = [&](std::string_view text, std::size_t from, std::chrono::milliseconds timeout = key_timeout) {
    const auto at = phsh.wait_for(text, from, timeout);
    REQUIRE_MESSAGE(at, "no \"" << printable(text) << "\" on the terminal");
    const auto p = phsh.wait_for(prompt, *at + text.size(), key_timeout);
    REQUIRE_MESSAGE(p, "no prompt after \"" << printable(text) << "\"");
    return *p + prompt.size();
  };
  std::size_t mark = expect("help lists the commands", 0);

  // One small node: it joins, renders at once and finishes; the events show above the prompt.
  phsh.send("spawn raytrace apps/raytrace/scenes/small.scene --no-check -o " + (dir / "x.png").string() +
            " --width 96 --height 64\r");
  REQUIRE(phsh.wait_for("] n1 joined: assumes [0, ", mark, spawn_timeout));
  mark = expect("] n1 result: checksum ", mark, spawn_timeout);

  // (a) Completion: "no" and TAB complete to the one command starting so, "nodes"; ENTER runs it.
  phsh.send("no");
  REQUIRE(phsh.wait_for("no", mark, key_timeout));
  mark = phsh.mark();
  phsh.send("\t");
  REQUIRE(phsh.wait_for("des", mark, key_timeout));  // what completion adds to the line
  phsh.send("\r");
  const auto header = phsh.wait_for("NAME  HOST", mark, key_timeout);
  REQUIRE(header);
  CHECK(phsh.output().find("unknown command", mark) == std::string::npos);
  mark = expect("\nn1 ", *header);  // n1's row
  // ... and node names: "log n" and TAB complete to "log n1", which shows n1's output file.
  phsh.send("log n");
  REQUIRE(phsh.wait_for("log n", mark, key_timeout));
  mark = phsh.mark();
  phsh.send("\t");
  REQUIRE(phsh.wait_for("1 ", mark, key_timeout));
  phsh.send("\r");
  mark = expect((run_dir / "n1.out").string() + " (last 50 lines) ---", mark);

  // (b) History: after map, Up-arrow brings "map" back and ENTER runs it again.
  const std::string map_scale = "|\r\n 0 ";  // the bar's end and the scale's start
  phsh.send("map\r");
  mark = expect(map_scale, mark);
  phsh.send("\x1b[A");
  REQUIRE(phsh.wait_for("map", mark, key_timeout));
  phsh.send("\r");
  mark = expect(map_scale, mark);

  // (c) watch redraws until a key is pressed; the key ends it (and is not left on the next line).
  phsh.send("watch\r");
  REQUIRE(phsh.wait_for("(press any key to stop)", mark, key_timeout));
  const auto watching = phsh.mark();
  phsh.send("x");
  const auto back = phsh.wait_for(prompt, watching, key_timeout);
  REQUIRE_MESSAGE(back, "no prompt after the key that should end watch");
  mark = *back + prompt.size();
  CHECK(phsh.output().find("\x1b[2J", mark) == std::string::npos);  // no redraw after the prompt came back

  // (d) A bad command: one error line, and the shell goes on.
  phsh.send("frobnicate\r");
  mark = expect("phsh: unknown command 'frobnicate'", mark);
  phsh.send("help quit\r");
  mark = expect("--stop", mark);
  const std::string after_watch = phsh.output().substr(watching);
  CHECK(count(after_watch, "phsh: unknown command 'frobnicate'") == 1);
  CHECK(count(after_watch, "unknown command") == 1);

  // (e) quit --stop: phsh ends with status 0, nothing of its session is left, the history is saved.
  phsh.send("quit --stop\r");
  const auto status = phsh.wait_exit(key_timeout);
  CHECK_MESSAGE(exited_zero(status), "phsh " << describe(status));
  CHECK(phsh.leftovers().empty());
  const std::string history = phoenix::test::read_text(home / ".phsh_history");
  CHECK(history.find("\nnodes") != std::string::npos);  // the completed lines (libedit writes ' ' as \040)
  CHECK(history.find("\nlog\\040n1") != std::string::npos);
  CHECK(history.find("\nmap\n") != std::string::npos);
  CHECK(history.find("\nfrobnicate\n") != std::string::npos);
}

TEST_CASE(
    "phsh spawn --host: a node started over ssh through a private sshd on 127.0.0.1 joins the computation") {
  phoenix::test::temp_dir dir;
  phoenix::test::sshd server(dir);
  REQUIRE_MESSAGE(server.ok(), server.error());  // not a skip: the ssh tests need this server as well
  const auto known_hosts = dir / "known_hosts";
  std::ofstream(known_hosts) << server.known_hosts_line();
  const std::string ssh_command = "ssh -F /dev/null -p " + std::to_string(server.port()) + " -i " +
                                  server.client_key().string() +
                                  " -o IdentitiesOnly=yes -o UserKnownHostsFile=" + known_hosts.string() +
                                  " -o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=20"
                                  " -o LogLevel=ERROR";
  const std::string host = phoenix::test::current_user() + "@127.0.0.1";

  // A render of about 7 s on one node here, long enough that the node started over ssh (it joins 1-2 s after
  // the first) takes part in it even on a loaded machine; small.scene would be over in 0.1 s.
  const auto run_dir = dir / "run";
  const auto png = dir / "ssh.png";
  const std::string app_args =
      "raytrace apps/raytrace/scenes/example.scene --width 800 --height 600 --samples 4 -o " + png.string();
  const auto script = dir / "ssh.phsh";
  std::ofstream(script) << "spawn " << app_args << "\n"
                        << "spawn --host " << host << " " << app_args << "\n"
                        << "nodes\n"
                        << "wait --timeout 300\n";
  Phsh phsh(Phsh::Mode::pipe, {"--run-dir", run_dir.string(), "--ssh-command", ssh_command, script.string()},
            environment({"PHSH_APP_PATH=" + app_dir}), source_dir);
  INFO("phsh's output:\n" << phsh.output() << tails(run_dir, ".err") << "--- sshd log:\n" << server.log());
  const auto status = phsh.wait_exit(script_timeout);
  CHECK_MESSAGE(exited_zero(status), "phsh " << describe(status));
  CHECK(phsh.leftovers().empty());

  const auto lines = lines_of(phsh.output());
  for (const auto& l : lines) CHECK_MESSAGE(!starts_with(l, "phsh: "), l);
  CHECK(line_with(lines, "] n1 joined: assumes [0, ") < lines.size());
  CHECK(line_with(lines, "] n2 joined: assumes [") < lines.size());
  // The nodes table: n1 here, n2 on the ssh host, reached at 127.0.0.1 (its wildcard address replaced).
  const auto header = std::find_if(lines.begin(), lines.end(), is_nodes_header);
  REQUIRE(header != lines.end());
  const auto row = [&](const std::string& name) {
    for (auto it = header + 1; it != lines.end() && !it->empty(); ++it)
      if (starts_with(*it, name + " ")) return *it;
    return std::string();
  };
  std::istringstream n1(row("n1")), n2(row("n2"));
  std::string name, n1_host, n2_host, n2_endpoint;
  n1 >> name >> n1_host;
  n2 >> name >> n2_host >> n2_endpoint;
  CHECK(n1_host == "local");
  CHECK(n2_host == host);
  CHECK(starts_with(n2_endpoint, "tcp://127.0.0.1:"));
  CHECK(server.log().find("Accepted publickey for " + phoenix::test::current_user()) != std::string::npos);

  CHECK(count(phsh.output(), "result: checksum") == 1);
  CHECK(line_with(lines, ": raytrace: the parallel image is bit-identical to the sequential one") <
        lines.size());
  CHECK(line_with(lines, "wait: every node process has exited (2)") < lines.size());
  REQUIRE(std::filesystem::exists(png));
  CHECK(png_size(png) == std::make_pair(std::uint32_t{800}, std::uint32_t{600}));

  // The remote side's directory for suspend files (/tmp/phsh-PID on the "remote" host, here this one): empty.
  std::error_code ec;
  std::filesystem::remove("/tmp/phsh-" + std::to_string(phsh.pid()), ec);
}

TEST_CASE("phsh kill crashes a node, and dot --png draws the overlay") {
  REQUIRE_MESSAGE(::access((app_dir + "/raytrace").c_str(), X_OK) == 0, app_dir << "/raytrace is not built");
  phoenix::test::temp_dir dir;
  const auto run_dir = dir / "run";
  const auto dot = dir / "overlay.dot";
  const std::string script =
      "spawn -n 2 raytrace apps/raytrace/scenes/example.scene --width 1280 --height 960 --samples 4 --no-check "
      "-o " +
      (dir / "k.png").string() + "; dot " + dot.string() + " --png; kill n2; nodes; quit --stop";
  Phsh phsh(Phsh::Mode::pipe, {"--run-dir", run_dir.string(), "-c", script},
            environment({"PHSH_APP_PATH=" + app_dir}), source_dir);
  INFO("phsh's output:\n" << phsh.output() << tails(run_dir, ".err"));
  const auto status = phsh.wait_exit(script_timeout);
  CHECK_MESSAGE(exited_zero(status), "phsh " << describe(status));
  CHECK(phsh.leftovers().empty());  // quit --stop stopped n1; n2 was killed

  const auto lines = lines_of(phsh.output());
  const auto header = std::find_if(lines.begin(), lines.end(), is_nodes_header);
  REQUIRE(header != lines.end());
  const auto row = [&](const std::string& name) {
    const auto it = std::find_if(header, lines.end(), [&](auto& l) { return starts_with(l, name + " "); });
    return it == lines.end() ? std::string() : *it;
  };
  CHECK(row("n2").find("killed") != std::string::npos);
  CHECK(row("n1").find("running") != std::string::npos);

  // The graph: both nodes and the shell, linked to one another.
  std::ifstream in(dot);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str().rfind("graph overlay {", 0) == 0);
  CHECK(text.str().find("\"n1\" -- \"n2\"") != std::string::npos);
  CHECK(text.str().find("phsh") != std::string::npos);
  auto png = dot;
  png.replace_extension(".png");
  CHECK(png_size(png).has_value());
}

// A node SIGKILLed from outside, as a crash would: once orphan_after_ms has passed, `nodes` says it crashed
// and `map` draws what it held with '!', apart from the parts nobody assumes.
TEST_CASE("phsh nodes and map show a node killed from outside as crashed, with the intervals it held") {
  REQUIRE_MESSAGE(::access((app_dir + "/raytrace").c_str(), X_OK) == 0, app_dir << "/raytrace is not built");
  phoenix::test::temp_dir dir;
  const auto run_dir = dir / "run";
  const std::string script =
      "spawn -n 2 raytrace apps/raytrace/scenes/example.scene --width 1280 --height 960 --samples 16 --no-check "
      "-o " +
      (dir / "c.png").string() + "; nodes; sleep 3; nodes; map; quit --stop";
  const auto config = dir / "phsh.toml";  // the shell's own node presumes a node crashed after 0.5 s
  std::ofstream(config) << "orphan_after_ms = 500\nlog_level = \"error\"\n";
  Phsh phsh(Phsh::Mode::pipe, {"--run-dir", run_dir.string(), "--config", config.string(), "-c", script},
            environment({"PHSH_APP_PATH=" + app_dir}), source_dir);
  INFO("phsh's output:\n" << phsh.output() << tails(run_dir, ".err"));
  REQUIRE(phsh.wait_for("STATE", 0, script_timeout));  // the first nodes table: both joined
  const auto victim = node_pid(phsh.pid(), "n2");
  REQUIRE(victim);
  REQUIRE(::kill(*victim, SIGKILL) == 0);
  const auto status = phsh.wait_exit(script_timeout);
  CHECK_MESSAGE(exited_zero(status), "phsh " << describe(status));
  CHECK(phsh.leftovers().empty());

  const auto lines = lines_of(phsh.output());
  const auto second = std::find_if(std::find_if(lines.begin(), lines.end(), is_nodes_header) + 1, lines.end(),
                                   is_nodes_header);
  REQUIRE(second != lines.end());
  const auto row = std::find_if(second, lines.end(), [](auto& l) { return starts_with(l, "n2 "); });
  REQUIRE(row != lines.end());
  CHECK(row->find("crashed") != std::string::npos);
  CHECK(lines_with(lines, "(crashed)") == 1);  // the map's legend: "!  n2 (crashed)  [lo,hi)  share"
  const auto legend = std::find_if(second, lines.end(), [](auto& l) { return l.find("n2 (crashed)") != l.npos; });
  REQUIRE(legend != lines.end());
  CHECK(starts_with(*legend, "  !  "));
  const auto bar = std::find_if(second, lines.end(), [](auto& l) { return starts_with(l, "|"); });
  REQUIRE(bar != lines.end());
  CHECK(bar->find('!') != std::string::npos);
}

TEST_CASE("phsh spawn --replicas: a Volpex ring of 3 processes x 2 replicas survives phsh kill of a replica") {
  const std::string volpex_dir = std::string(PHOENIX_BINARY_DIR) + "/apps/volpex";
  REQUIRE_MESSAGE(::access((volpex_dir + "/ring").c_str(), X_OK) == 0, volpex_dir << "/ring is not built");
  phoenix::test::temp_dir dir;
  const auto run_dir = dir / "run";
  // n1 serves the dataspace; n2..n4 are replica 0 of processes 0..2, n5..n7 replica 1. n3 (process 1's first
  // replica) is killed while the ring runs: process 0 and 2 pull from process 1's other replica from then on.
  const std::string script =
      "spawn volpex_server --replicas 2; spawn -n 3 --replicas 2 ring 1000 3000; sleep 0.3; kill n3; wait";
  Phsh phsh(Phsh::Mode::pipe, {"--run-dir", run_dir.string(), "-c", script},
            environment({"PHSH_APP_PATH=" + volpex_dir}), source_dir);
  INFO("phsh's output:\n" << phsh.output() << tails(run_dir, ".err"));
  const auto status = phsh.wait_exit(script_timeout);
  CHECK_MESSAGE(exited_zero(status), "phsh " << describe(status));
  CHECK(phsh.leftovers().empty());
  const auto lines = lines_of(phsh.output());
  CHECK(lines_with(lines, "n2 started: replica 0 of process 0") == 1);
  CHECK(lines_with(lines, "n7 started: replica 1 of process 2") == 1);
  CHECK(lines_with(lines, "n3 killed") == 1);
  // Both replicas of process 0 report the sequential result.
  const auto expected = sequential_ring_result(volpex_dir, "3 1000 3000");
  CHECK(lines_with(lines, "n2 result: " + expected) == 1);
  CHECK(lines_with(lines, "n5 result: " + expected) == 1);
  CHECK(lines_with(lines, "wait: every node process has exited (7); 2 results") == 1);
}

// How `wait` ends a replicated computation (docs/shell.md, "Ending a computation"): once every process has a
// replica that completed. Replica 1 of process 1 is stopped (SIGSTOP) mid-run, so it lags for good: it must be
// stopped as a lagging replica, or wait would never return. Replica 1 of process 2 is killed from outside, as a
// crash would: a failure, but another replica of that process completed, so wait succeeds and says so. The
// timeout policy lets the replicas that pulled from the stopped one move on; under team, its whole team would
// lag with it (docs/volpex.md).
TEST_CASE("phsh wait: a lagging replica is stopped once every process completed, a crashed one is tolerated") {
  const std::string volpex_dir = std::string(PHOENIX_BINARY_DIR) + "/apps/volpex";
  REQUIRE_MESSAGE(::access((volpex_dir + "/ring").c_str(), X_OK) == 0, volpex_dir << "/ring is not built");
  phoenix::test::temp_dir dir;
  const auto run_dir = dir / "run";
  // n1 serves the dataspace; n2..n4 are replica 0 of processes 0..2, n5..n7 replica 1. The signals come once
  // the spawn command has completed (every replica joined), which the table of `nodes` shows: spawn fails if
  // a node it starts dies before it joined.
  const std::string script =
      "spawn volpex_server --replicas 2; spawn -n 3 --replicas 2 ring 1000 3000; nodes; wait";
  Phsh phsh(Phsh::Mode::pipe, {"--run-dir", run_dir.string(), "-c", script},
            environment({"PHSH_APP_PATH=" + volpex_dir, "VOLPEX_SELECTION=timeout"}), source_dir);
  INFO("phsh's output:\n" << phsh.output() << tails(run_dir, ".err"));
  REQUIRE(phsh.wait_for("STATE", 0, script_timeout));  // the last word of the nodes table's header
  // Every replica has joined, so its process runs.
  const auto lagging = replica_pid(phsh.pid(), 1, 1);
  const auto crashing = replica_pid(phsh.pid(), 2, 1);
  REQUIRE(lagging);
  REQUIRE(crashing);
  // At once: the ring's rounds take about a second, and on a loaded machine this thread can be held up for as
  // long, after which the replica would have completed instead of lagging.
  REQUIRE(::kill(*lagging, SIGSTOP) == 0);
  REQUIRE(::kill(*crashing, SIGKILL) == 0);
  const auto status = phsh.wait_exit(script_timeout);
  CHECK_MESSAGE(exited_zero(status), "phsh " << describe(status));
  CHECK(phsh.leftovers().empty());
  const auto lines = lines_of(phsh.output());
  CHECK(lines_with(lines,
                   "n6: replica 1 of process 1 still running 5 s after every process completed: "
                   "stopped, as a lagging replica") == 1);
  CHECK(lines_with(lines, "n1: every replica ended: told to stop") == 1);
  const auto expected = sequential_ring_result(volpex_dir, "3 1000 3000");
  CHECK(lines_with(lines, "n2 result: " + expected) == 1);
  CHECK(lines_with(lines, "n5 result: " + expected) == 1);
  CHECK(lines_with(lines,
                   "wait: every node process has exited (7); 2 results; 1 replica failed, and another "
                   "replica of its process completed") == 1);
}

TEST_CASE("phsh -c stops at the first failed command with one error line and exits 1") {
  phoenix::test::temp_dir dir;
  Phsh phsh(Phsh::Mode::pipe, {"--run-dir", (dir / "run").string(), "-c", "nodes; frobnicate now; map"},
            environment({}), source_dir);
  INFO("phsh's output:\n" << phsh.output());
  const auto status = phsh.wait_exit(60s);
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 1);
  const auto lines = lines_of(phsh.output());
  CHECK(std::count_if(lines.begin(), lines.end(), is_nodes_header) == 1);  // the first command ran
  CHECK(lines_with(lines, "phsh: unknown command 'frobnicate'") == 1);
  CHECK(std::count_if(lines.begin(), lines.end(), is_map_bar) == 0);  // the third did not
  CHECK(phsh.leftovers().empty());
}
