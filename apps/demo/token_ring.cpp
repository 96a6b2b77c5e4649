// phoenix_demo — a token walks through every virtual node of [0, L) while one node joins late.
//
// Node processes n0 .. n{N-2} start in a line (each links only to the one before it) and each assumes an
// equal share of [0, L); the last share belongs to nobody yet. A token starts at virtual node 0; whoever
// assumes the virtual node the token is sent to prints it and sends it on to the next one. When the token
// reaches the unassumed share it waits in the overlay — nothing is lost — until the late node n{N-1} starts,
// links to the end of the line, assumes that share, and receives it. After --laps rounds every node stops.
//
// Usage: phoenix_demo [--nodes N] [--space L] [--laps K] [--late-ms MS] [--step-ms MS]
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>

#include <phoenix/config.hpp>
#include <phoenix/node.hpp>

#include "phoenix/launch/key_file.hpp"
#include "phoenix/launch/process_group.hpp"

namespace {

using namespace std::chrono_literals;
using phoenix::launch::ChildPipes;
using phoenix::launch::Clock;
using phoenix::launch::ProcessGroup;

constexpr int token_tag = 1;
constexpr int done_tag = 2;

struct options {
  int nodes = 4;
  std::uint64_t space = 32;
  int laps = 3;
  int late_ms = 1500;
  int step_ms = 25;
};

struct token {
  std::uint64_t lap = 0;
  std::uint64_t visits = 0;
};

void usage(const char* argv0) {
  std::printf(
      "usage: %s [--nodes N] [--space L] [--laps K] [--late-ms MS] [--step-ms MS]\n"
      "  A token visits every virtual node of [0, L), K times, across N node processes on 127.0.0.1;\n"
      "  the last node joins MS milliseconds late, and the token waits for it.\n",
      argv0);
}

bool parse_int(const char* text, long long lo, long long hi, long long& out) {
  const char* end = text + std::strlen(text);
  const auto [p, ec] = std::from_chars(text, end, out);
  return ec == std::errc() && p == end && out >= lo && out <= hi;
}

bool parse(int argc, char** argv, options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage(argv[0]);
      std::exit(0);
    }
    long long v = 0;
    if (i + 1 >= argc) return false;
    const char* val = argv[++i];
    if (a == "--nodes" && parse_int(val, 2, 16, v)) o.nodes = static_cast<int>(v);
    else if (a == "--space" && parse_int(val, 2, 1 << 20, v)) o.space = static_cast<std::uint64_t>(v);
    else if (a == "--laps" && parse_int(val, 1, 1000, v)) o.laps = static_cast<int>(v);
    else if (a == "--late-ms" && parse_int(val, 0, 600000, v)) o.late_ms = static_cast<int>(v);
    else if (a == "--step-ms" && parse_int(val, 0, 10000, v)) o.step_ms = static_cast<int>(v);
    else return false;
  }
  return o.space >= static_cast<std::uint64_t>(o.nodes);
}

phoenix::Interval share(const options& o, int i) {
  return phoenix::share_part(o.space, {static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(o.nodes)});
}

// One node process: serve the token until told to stop.
int run_node(const options& o, int index, const std::string& key, const std::string& peer, const ChildPipes& pipes) {
  phoenix::Config c;
  c.name = "n" + std::to_string(index);
  c.space_size = o.space;
  c.cluster_key_file = key;
  c.retry_interval_ms = 100;
  phoenix::Node node(c);
  if (auto ec = node.initialize("tcp://127.0.0.1:0")) {
    phoenix::launch::report_line(pipes.report_fd, "ERROR " + c.name + ": " + ec.message());
    return 1;
  }
  if (!peer.empty() && node.add_port(peer)) return 1;
  const auto mine = share(o, index);
  if (node.assume(mine)) return 1;
  phoenix::launch::report_line(pipes.report_fd, "PORT " + node.local_port());
  phoenix::launch::report_line(pipes.report_fd, c.name + " up on " + node.local_port() + ", assumes [" +
                                                    std::to_string(mine.lo) + ", " + std::to_string(mine.hi) + ")");
  if (index == 0) {
    const token t;
    node.send(0, token_tag, &t, sizeof t);
  }
  while (!phoenix::launch::stop_requested(pipes.control_fd)) {
    auto m = node.recv_for(phoenix::any_tag, 100ms);
    if (!m) continue;
    if (m->tag() == done_tag) break;
    token t;
    if (m->size() != sizeof t) continue;
    std::memcpy(&t, m->data(), sizeof t);
    ++t.visits;
    phoenix::launch::report_line(pipes.report_fd, c.name + " has the token at vnode " + std::to_string(m->dest()) +
                                                      " (lap " + std::to_string(t.lap + 1) + ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(o.step_ms));
    std::uint64_t next = m->dest() + 1;
    if (next == o.space) {
      next = 0;
      if (++t.lap == static_cast<std::uint64_t>(o.laps)) {
        // What this node knows of the overlay at the end: its links and a route to every other node.
        std::istringstream table(phoenix::describe(node.routing_snapshot()));
        for (std::string line; std::getline(table, line);) phoenix::launch::report_line(pipes.report_fd, c.name + " | " + line);
        phoenix::launch::report_line(pipes.report_fd, "TOKEN " + std::to_string(t.visits) + " visits");
        for (int i = 0; i < o.nodes; ++i) node.send(share(o, i).lo, done_tag, nullptr, 0);
        continue;
      }
    }
    node.send(next, token_tag, &t, sizeof t);
  }
  node.finalize();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  if (!parse(argc, argv, o)) {
    usage(argv[0]);
    return 2;
  }
  phoenix::launch::install_interrupt_handlers();
  const auto dir = std::filesystem::temp_directory_path() / ("phoenix-demo-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string key = phoenix::launch::write_cluster_key(dir / "cluster.key");
  const auto start = Clock::now();
  auto say = [&](const std::string& line) {
    const double t = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("[%7.3fs] %s\n", t, line.c_str());
    std::fflush(stdout);
  };
  std::printf("phoenix demo: %d nodes, virtual nodes [0, %llu), %d laps; n%d joins after %d ms\n", o.nodes,
              static_cast<unsigned long long>(o.space), o.laps, o.nodes - 1, o.late_ms);

  int status = 1;
  {
    ProcessGroup group;
    std::vector<std::string> ports;
    auto start_node = [&](int i) {
      const std::string peer = ports.empty() ? "" : ports.back();
      group.spawn("n" + std::to_string(i), [&, i, peer](const ChildPipes& p) { return run_node(o, i, key, peer, p); });
    };
    bool failed = false;
    const auto deadline = Clock::now() + std::chrono::seconds(60) + std::chrono::milliseconds(o.late_ms);
    start_node(0);
    auto late_at = Clock::time_point::max();
    int done = 0;
    long long visits = -1;
    while (!failed && done < o.nodes) {
      const auto ev = group.next_event(std::min(deadline, late_at));
      if (!ev) {
        if (Clock::now() >= deadline || phoenix::launch::interrupted()) {
          say("timed out or interrupted; stopping every node");
          failed = true;
        } else {
          late_at = Clock::time_point::max();
          say("n" + std::to_string(o.nodes - 1) + " joins late and assumes the last share");
          start_node(o.nodes - 1);
        }
        continue;
      }
      if (ev->eof) {
        ++done;
        continue;
      }
      if (ev->line.rfind("PORT ", 0) == 0) {
        ports.push_back(ev->line.substr(5));
        const int next = static_cast<int>(ports.size());
        if (next < o.nodes - 1) start_node(next);
        else if (next == o.nodes - 1) late_at = Clock::now() + std::chrono::milliseconds(o.late_ms);
        continue;
      }
      if (ev->line.rfind("TOKEN ", 0) == 0) visits = std::stoll(ev->line.substr(6));
      if (ev->line.rfind("ERROR", 0) == 0) failed = true;
      say(ev->line);
    }
    const bool clean = group.stop_all(std::chrono::seconds(10));
    const long long expected = static_cast<long long>(o.space) * o.laps;
    if (!failed && clean && visits == expected) {
      say("the token visited all " + std::to_string(o.space) + " virtual nodes " + std::to_string(o.laps) +
          " times (" + std::to_string(visits) + " visits), nothing lost");
      status = 0;
    } else {
      say("FAILED: " + std::to_string(visits) + " visits of " + std::to_string(expected) + " expected");
    }
  }
  std::filesystem::remove_all(dir);
  return status;
}
