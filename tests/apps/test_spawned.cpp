// tests/apps/test_spawned.cpp — an application's node processes started the way the shell phsh starts them
// (apps/launch/spawned_node.hpp), driven by hand: the real raytrace binary, forked and exec'd with the spawn
// protocol's environment and pipes, as a first node, a joining node and later a resumed one; a node of the test
// itself links to them and sends "suspend FILE" and "leave" over the overlay, as phsh does. Every step is
// checked on the report lines (JOINED, SUSPENDED, LEFT, RESULT, FINISHED) and the exit statuses, and the image
// that comes out equals the sequential render.
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
#include <future>
#include <memory>
#include <optional>
#include <phoenix/config.hpp>
#include <phoenix/node.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "apps/raytrace/png_image.hpp"
#include "apps/raytrace/render.hpp"
#include "apps/raytrace/scene.hpp"
#include "apps/raytrace/tile_tasks.hpp"
#include "support/temp_dir.hpp"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using namespace phoenix;
using Clock = std::chrono::steady_clock;

// Generous bounds: the ASan build is several times slower.
constexpr auto step_timeout = 60s;
constexpr auto run_timeout = 240s;

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

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
    const auto give_up = Clock::now() + timeout;
    while (!done()) {
      if (Clock::now() >= give_up) return done();
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

std::string port_of(const Child& c) {
  const auto l = c.line("PORT ");
  return l ? l->substr(5) : std::string();
}

// The resource name of the node at `port`, once the test node's link to it is up and its route known (control
// requests need the route: the link's handshake names the peer before DSDV has advertised it).
std::optional<vp_t> resource_at(Node& node, const std::string& port, std::chrono::milliseconds timeout) {
  const auto give_up = Clock::now() + timeout;
  while (Clock::now() < give_up) {
    const auto snapshot = node.routing_snapshot();
    for (const auto& l : snapshot.links) {
      if (l.address != port || l.state != "up" || l.peer == 0) continue;
      for (const auto& r : snapshot.routes) {
        if (r.destination == l.peer && r.next_hop != 0 && r.metric != 0xFFFF) return l.peer;
      }
    }
    std::this_thread::sleep_for(20ms);
  }
  return std::nullopt;
}

// The scene of the unit tests, larger and with more samples per pixel (about 6 s of sequential rendering on a
// 2-core machine), so that the run lasts long enough for a join, a suspend, a resume and a leave to happen
// before its end.
std::filesystem::path slow_scene(const std::filesystem::path& dir) {
  std::ifstream in(std::filesystem::path(PHOENIX_SOURCE_DIR) / "apps/raytrace/scenes/small.scene");
  std::ostringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  const std::string small = "width 96 height 64 samples 2 ";
  const auto at = s.find(small);
  REQUIRE(at != std::string::npos);
  s.replace(at, small.size(), "width 576 height 384 samples 16 ");
  const auto file = dir / "slow.scene";
  std::ofstream(file) << s;
  return file;
}

}  // namespace

TEST_CASE("spawned raytrace: first, join, suspend, resume and leave driven over the overlay, as phsh does") {
  const std::string program = std::string(PHOENIX_BINARY_DIR) + "/apps/raytrace/raytrace";
  REQUIRE_MESSAGE(::access(program.c_str(), X_OK) == 0, program << " is not built");
  test::temp_dir dir;
  const std::string key = dir.make_key();
  const auto scene_file = slow_scene(dir.path());
  const auto png = dir / "image.png";
  const auto suspend_file = dir / "rt1.suspended";
  const std::uint64_t space = std::uint64_t{1} << 40;

  // The reference image, rendered meanwhile.
  const raytrace::Scene scene = raytrace::load_scene(scene_file);
  auto expected = std::async(std::launch::async, [&] { return raytrace::render_image(scene); });

  const std::vector<std::string> args{scene_file.string(), "-o", png.string(), "--grain", "64"};
  const auto env = [&](const std::string& name, const std::string& role, const std::string& peers) {
    std::vector<std::string> e{"PHOENIX_NAME=" + name,
                               "PHOENIX_LISTEN=tcp://127.0.0.1:0",
                               "PHOENIX_CLUSTER_KEY_FILE=" + key,
                               "PHOENIX_SPACE_SIZE=" + std::to_string(space),
                               "PHOENIX_RETRY_INTERVAL_MS=100",
                               "PHSH_ROLE=" + role};
    if (!peers.empty()) e.push_back("PHOENIX_PEERS=" + peers);
    if (role == "resume") e.push_back("PHSH_RESUME_FILE=" + suspend_file.string());
    return e;
  };

  Children children;
  INFO(children.transcript());

  // rt0 assumes everything and starts the render; rt1 links to it and joins: it obtains [L/2, L).
  Child& rt0 = children.spawn("rt0", program, args, env("rt0", "first", ""), dir / "rt0.log");
  REQUIRE(children.wait_line(rt0, "PORT ", step_timeout));
  REQUIRE(children.wait_line(rt0, "JOINED ", step_timeout) == "JOINED 0 " + std::to_string(space));
  Child& rt1 = children.spawn("rt1", program, args, env("rt1", "join", port_of(rt0)), dir / "rt1.log");
  REQUIRE(children.wait_line(rt1, "PORT ", step_timeout));
  const auto joined = children.wait_line(rt1, "JOINED ", step_timeout);
  REQUIRE(joined);
  CHECK(*joined == "JOINED " + std::to_string(space / 2) + " " + std::to_string(space));

  // The test's node: links to both, learns their resource names, and controls them as phsh would.
  Config config;
  config.name = "spawn-test";
  config.cluster_key_file = key;
  config.space_size = space;
  config.retry_interval_ms = 100;
  Node shell(config);
  REQUIRE_FALSE(shell.initialize("tcp://127.0.0.1:0"));
  REQUIRE_FALSE(shell.add_port(port_of(rt0)));
  REQUIRE_FALSE(shell.add_port(port_of(rt1)));
  const auto name0 = resource_at(shell, port_of(rt0), step_timeout);
  const auto name1 = resource_at(shell, port_of(rt1), step_timeout);
  REQUIRE(name0);
  REQUIRE(name1);
  std::error_code ec;
  const auto status = shell.control(*name0, "status", 10s, &ec);
  REQUIRE_MESSAGE(status, ec.message());
  CHECK(status->ok);
  CHECK(status->text.find("state=running") != std::string::npos);

  // rt1 suspends to a file once it has work of its own (it rendered rows of a stolen tile): SUSPENDED, exit
  // status 0. rt0 renders on meanwhile, but cannot finish without rt1's part; what is sent to rt1's virtual
  // nodes waits.
  REQUIRE(children.wait_until(
      [&] {
        for (const auto& l : rt1.lines) {
          if (starts_with(l, "UNITS ") && l != "UNITS 0") return true;
        }
        return rt1.eof;
      },
      step_timeout));
  const auto suspend = shell.control(*name1, "suspend " + suspend_file.string(), 10s, &ec);
  REQUIRE_MESSAGE(suspend, ec.message());
  CHECK(suspend->ok);
  CHECK(children.wait_line(rt1, "SUSPENDED ", step_timeout) == "SUSPENDED " + suspend_file.string());
  REQUIRE(children.wait_exit(rt1, step_timeout));
  CHECK(WIFEXITED(rt1.status));
  CHECK(WEXITSTATUS(rt1.status) == 0);
  CHECK_FALSE(rt1.has("LEFT"));
  CHECK_FALSE(rt1.has("FINISHED"));
  REQUIRE(std::filesystem::exists(suspend_file));
  REQUIRE_FALSE(rt0.has("FINISHED"));  // else the render was too short for this test

  // rt2 resumes from the file: it does not join but assumes rt1's interval again.
  Child& rt2 = children.spawn("rt2", program, args, env("rt2", "resume", port_of(rt0)), dir / "rt2.log");
  REQUIRE(children.wait_line(rt2, "PORT ", step_timeout));
  CHECK(children.wait_line(rt2, "JOINED ", step_timeout) == *joined);

  // rt0 is told to leave: everything it has goes to rt2, which finishes the render and checks it.
  const auto leave = shell.control(*name0, "leave", 10s, &ec);
  REQUIRE_MESSAGE(leave, ec.message());
  CHECK(leave->ok);
  CHECK(children.wait_line(rt0, "LEFT", step_timeout));
  REQUIRE(children.wait_exit(rt0, step_timeout));
  CHECK(WIFEXITED(rt0.status));
  CHECK(WEXITSTATUS(rt0.status) == 0);
  CHECK_FALSE(rt0.has("RESULT "));

  REQUIRE(children.wait_exit(rt2, run_timeout));
  CHECK(WIFEXITED(rt2.status));
  CHECK(WEXITSTATUS(rt2.status) == 0);
  CHECK(rt2.has("FINISHED"));
  CHECK(rt2.contains("raytrace: the parallel image is bit-identical to the sequential one"));
  CHECK_FALSE(rt2.has("ERROR"));
  CHECK_FALSE(rt0.has("ERROR"));
  CHECK_FALSE(rt1.has("ERROR"));
  const auto image = expected.get();
  CHECK(rt2.line("RESULT ") == "RESULT " + raytrace::checksum_text(image));
  REQUIRE(std::filesystem::exists(png));
  CHECK(raytrace::read_png(png).rgb == image);
  CHECK_FALSE(shell.finalize());
}
