// bench/pingpong.cpp — phoenix_pingpong: ping-pong latency, bandwidth and message rate over phoenix, with
// every node in a process of its own. The figures and their method match bench/mpi_pingpong.c (the Open MPI
// anchor), so that the two divide; README.md says what each one measures.
//
// This file is the launcher. It forks the nodes of one layout (line.cpp: A - B or A - R1 - R2 - B; star.cpp:
// four senders around a receiver) before any phoenix::Node exists in it, hands each child's bound endpoint to
// the next child that dials it, prints the RESULT lines the measuring child reports, and stops, reaps or kills
// every child (process_group.hpp).
//
// Usage: phoenix_pingpong [--hops 1|3] [--reps N] [--test latency|bandwidth|rate|rate4|all[,...]]
//                         [--protection integrity|off] [--quick]
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include "bench_node.hpp"
#include "phoenix/launch/process_group.hpp"

namespace {

using namespace phoenix::bench;

constexpr std::chrono::seconds k_port_timeout{10};  // a child to bind its endpoint
constexpr std::chrono::seconds k_stop_grace{5};     // children to finalize once told to stop
constexpr int k_max_hops = 8;
constexpr int k_max_reps = 101;

// Reads the children's lines until `child` reports `keyword` (PORT or DONE) and returns the rest of that line.
// RESULT and '#' lines go to stdout on the way. An ERROR line, a child's early exit, the deadline or an
// interrupt ends the run by exception (the ProcessGroup then kills every child).
std::string await_line(ProcessGroup& group, std::size_t child, std::string_view keyword,
                       Clock::time_point deadline) {
  for (;;) {
    auto ev = group.next_event(deadline);
    if (!ev) {
      throw std::runtime_error(interrupted() ? std::string("interrupted")
                                             : "timed out waiting for " + group.name(child) + " (" +
                                                   std::string(keyword) + ")");
    }
    const std::string& line = ev->line;
    if (ev->eof) throw std::runtime_error(group.name(ev->child) + " exited early");
    if (line.starts_with("ERROR ")) throw std::runtime_error(line.substr(6));
    if (line.starts_with("RESULT ") || line.starts_with("# ")) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    } else if (ev->child == child && line.starts_with(keyword)) {
      return line.size() > keyword.size() ? line.substr(keyword.size() + 1) : std::string();
    } else {
      throw std::runtime_error("unexpected line from " + group.name(ev->child) + ": " + line);
    }
  }
}

std::string await_port(ProcessGroup& group, std::size_t child) {
  return await_line(group, child, "PORT", Clock::now() + k_port_timeout);
}

bool run_line(const Settings& s) {
  ProcessGroup group;
  auto deadline = Clock::now() + s.run_timeout();
  auto a = group.spawn("a", [&](const ChildPipes& p) { return line_a_main(s, p); });
  std::string left = await_port(group, a);
  for (int r = 1; r < s.hops; ++r) {
    std::string name = node_name('r', r);
    auto relay = group.spawn(name, [&](const ChildPipes& p) { return line_relay_main(s, p, name, left); });
    left = await_port(group, relay);
  }
  auto b = group.spawn("b", [&](const ChildPipes& p) { return line_b_main(s, p, left); });
  await_port(group, b);
  await_line(group, a, "DONE", deadline);
  return group.stop_all(k_stop_grace);
}

bool run_star(const Settings& s) {
  ProcessGroup group;
  auto deadline = Clock::now() + s.run_timeout();
  auto receiver = group.spawn("recv", [&](const ChildPipes& p) { return star_receiver_main(s, p); });
  std::string hub = await_port(group, receiver);
  for (std::uint64_t i = 0; i < k_star_senders; ++i) {
    auto sender =
        group.spawn(node_name('s', i + 1), [&](const ChildPipes& p) { return star_sender_main(s, p, i, hub); });
    await_port(group, sender);
  }
  await_line(group, receiver, "DONE", deadline);
  return group.stop_all(k_stop_grace);
}

// Runs one layout; any failure is printed and turned into `false`, after every child has been reaped.
template <class Layout>
bool run_guarded(const char* what, Layout layout) {
  try {
    if (layout()) return true;
    std::fprintf(stderr, "pingpong: FAILED: %s: a node did not exit cleanly\n", what);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pingpong: FAILED: %s: %s\n", what, e.what());
  }
  return false;
}

// A fresh cluster key for this run: 32 random bytes, mode 0600, removed when the launcher ends.
class KeyFile {
 public:
  KeyFile() {
    std::string path = (std::filesystem::temp_directory_path() / "phoenix-bench-key-XXXXXX").string();
    int fd = ::mkstemp(path.data());  // creates the file with mode 0600
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "mkstemp " + path);
    path_ = path;
    std::array<unsigned char, 32> key{};
    bool ok = ::getrandom(key.data(), key.size(), 0) == static_cast<ssize_t>(key.size()) &&
              ::fchmod(fd, S_IRUSR | S_IWUSR) == 0 &&
              ::write(fd, key.data(), key.size()) == static_cast<ssize_t>(key.size());
    ::close(fd);
    if (!ok) throw std::runtime_error("cannot write the cluster key file " + path_);
  }
  ~KeyFile() { ::unlink(path_.c_str()); }
  KeyFile(const KeyFile&) = delete;
  KeyFile& operator=(const KeyFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// --- command line -------------------------------------------------------------------------------------------

bool parse_int(std::string_view text, int lo, int hi, int& out) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < lo || value > hi) return false;
  out = value;
  return true;
}

bool parse_tests(std::string_view list, Settings& s) {
  s.latency = s.bandwidth = s.rate = s.rate4 = false;
  while (!list.empty()) {
    auto comma = list.find(',');
    auto name = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (name == "all")
      s.latency = s.bandwidth = s.rate = s.rate4 = true;
    else if (name == "latency")
      s.latency = true;
    else if (name == "bandwidth")
      s.bandwidth = true;
    else if (name == "rate")
      s.rate = true;
    else if (name == "rate4")
      s.rate4 = true;
    else
      return false;
  }
  return true;
}

bool parse_args(int argc, char** argv, Settings& s) {
  parse_tests("all", s);
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--quick") {
      s.quick = true;
      continue;
    }
    if (i + 1 == argc) return false;
    const char* value = argv[++i];
    bool ok = arg == "--hops"   ? parse_int(value, 1, k_max_hops, s.hops)
              : arg == "--reps" ? parse_int(value, 1, k_max_reps, s.reps)
              : arg == "--test" ? parse_tests(value, s)
              : arg == "--protection"
                  ? (s.protection = value, s.protection == "integrity" || s.protection == "off")
                  : false;
    if (!ok) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  if (!parse_args(argc, argv, s)) {
    std::fprintf(
        stderr,
        "usage: %s [--hops 1|3] [--reps N] [--test latency|bandwidth|rate|rate4|all[,...]] "
        "[--protection integrity|off] [--quick]\n",
        argv[0]);
    return 2;
  }
  install_interrupt_handlers();
  bool ok = true;
  try {
    KeyFile key;
    s.key_file = key.path();
    if (s.latency || s.bandwidth || s.rate) ok = run_guarded(s.system().c_str(), [&] { return run_line(s); });
    if (s.rate4 && !interrupted()) ok = run_guarded("phoenix-rate4", [&] { return run_star(s); }) && ok;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pingpong: FAILED: %s\n", e.what());
    ok = false;
  }
  return ok ? 0 : 1;
}
