// Crashes, as separate processes on 127.0.0.1: an owner SIGKILLed while it assumes an interval. The survivor
// reports the interval as orphaned; under orphan_policy "adopt" it assumes it, its application is told by the
// adoption handler before any message for it arrives, and a message that waited for the interval is
// delivered; under "wait" the interval stays nobody's.
#include <doctest/doctest.h>

#include <atomic>
#include <csignal>
#include <sstream>
#include <string>

#include <phoenix/config.hpp>
#include <phoenix/node.hpp>

#include "phoenix/launch/process_group.hpp"
#include "support/temp_dir.hpp"

using namespace std::chrono_literals;
using phoenix::Interval;
using phoenix::launch::ChildPipes;
using phoenix::launch::Clock;
using phoenix::launch::ProcessGroup;

namespace {

constexpr std::uint64_t L = 1000;
constexpr std::uint64_t waiting_vnode = 700;  // in the victim's interval [500, 1000)

phoenix::Config member_config(const std::string& name, const std::string& key, const std::string& policy) {
  phoenix::Config c;
  c.name = name;
  c.space_size = L;
  c.cluster_key_file = key;
  c.retry_interval_ms = 30;
  c.orphan_after_ms = 300;
  c.orphan_policy = policy;
  return c;
}

std::string text(const Interval& s) { return std::to_string(s.lo) + " " + std::to_string(s.hi); }

// The victim: assumes [500, 1000) and waits to be killed.
int run_victim(const std::string& key, const std::string& peer, const ChildPipes& pipes) {
  phoenix::Node node(member_config("victim", key, "wait"));
  if (node.initialize("tcp://127.0.0.1:0") || node.add_port(peer) || node.assume({500, L})) return 1;
  phoenix::launch::report_line(pipes.report_fd, "VICTIM " + std::to_string(node.resource_name()));
  while (!phoenix::launch::stop_requested(pipes.control_fd, 50ms)) {
  }
  node.finalize();
  return 0;
}

// The survivor: assumes [0, 500); once the victim's interval is orphaned, sends a message to it and receives
// for a while, reporting what its adoption handler and its receive calls saw, in order.
int run_survivor(const std::string& key, const std::string& policy, const ChildPipes& pipes) {
  phoenix::Node node(member_config("survivor", key, policy));
  if (node.initialize("tcp://127.0.0.1:0") || node.assume({0, 500})) return 1;
  std::atomic<bool> told{false};
  if (node.set_adoption_handler([&](Interval s, phoenix::vp_t owner) {
        phoenix::launch::report_line(pipes.report_fd, "ADOPTED " + text(s) + " " + std::to_string(owner));
        told = true;
      }))
    return 1;
  phoenix::launch::report_line(pipes.report_fd, "PORT " + node.local_port());
  auto deadline = Clock::now() + 30s;
  bool sees_victim = false;
  while (!sees_victim && Clock::now() < deadline) {
    for (const auto& r : node.routing_snapshot().routes)
      sees_victim |= r.intervals == std::vector<Interval>{{500, L}};
    (void)node.recv_for(1, 20ms);
  }
  if (!sees_victim) return 1;
  phoenix::launch::report_line(pipes.report_fd, "SEES VICTIM");
  std::vector<phoenix::OrphanedInterval> orphaned;
  while (orphaned.empty() && Clock::now() < deadline) {
    (void)node.recv_for(1, 20ms);
    orphaned = node.orphaned();
  }
  for (const auto& o : orphaned)
    phoenix::launch::report_line(pipes.report_fd, "ORPHANED " + text(o.span) + " " + std::to_string(o.owner));
  if (node.send(waiting_vnode, 1, "waited", 6)) return 1;
  deadline = Clock::now() + (policy == "adopt" ? 10s : 2s);
  while (Clock::now() < deadline) {
    auto m = node.recv_for(1, 50ms);
    if (!m) continue;
    phoenix::launch::report_line(pipes.report_fd, std::string("GOT ") + std::to_string(m->dest()) +
                                                      (told ? " after the handler" : " before the handler"));
    break;
  }
  std::ostringstream assumed;
  assumed << "ASSUMED";
  for (const auto& s : node.assumed()) assumed << " " << text(s);
  phoenix::launch::report_line(pipes.report_fd, assumed.str());
  while (!phoenix::launch::stop_requested(pipes.control_fd, 50ms)) {
  }
  node.finalize();
  return 0;
}

// Runs the survivor and the victim, kills the victim once the survivor sees its interval, and returns what
// the survivor reported.
std::vector<std::string> crash_and_watch(const std::string& policy) {
  phoenix::test::temp_dir dir;
  const std::string key = dir.make_key();
  ProcessGroup group;
  const std::size_t survivor =
      group.spawn("survivor", [&](const ChildPipes& p) { return run_survivor(key, policy, p); });
  std::optional<std::size_t> victim;
  std::string victim_name;
  std::vector<std::string> lines;
  const auto deadline = Clock::now() + 60s;
  while (Clock::now() < deadline) {
    const auto ev = group.next_event(deadline);
    if (!ev) break;
    if (ev->eof) {
      if (ev->child == survivor) break;  // it ended before its report was complete
      continue;                          // the victim, killed
    }
    const std::string& line = ev->line;
    MESSAGE(group.name(ev->child) << ": " << line);
    if (line.rfind("PORT ", 0) == 0) {
      const std::string port = line.substr(5);
      victim = group.spawn("victim", [&, port](const ChildPipes& p) { return run_victim(key, port, p); });
    } else if (line.rfind("VICTIM ", 0) == 0) {
      victim_name = line.substr(7);
    } else if (line == "SEES VICTIM") {
      REQUIRE(victim);
      REQUIRE(group.signal(*victim, SIGKILL));
    } else {
      lines.push_back(line);
      if (line.rfind("ASSUMED", 0) == 0) break;
    }
  }
  CHECK_FALSE(victim_name.empty());
  for (auto& l : lines) {  // the victim's resource name, by name
    if (const auto at = l.find(victim_name); !victim_name.empty() && at != std::string::npos)
      l.replace(at, victim_name.size(), "VICTIM");
  }
  group.stop_all(10s);
  return lines;
}

}  // namespace

TEST_CASE("crash: an owner killed with SIGKILL is reported as orphaned, and adopt gives its interval to the node below, told before any message") {
  const auto lines = crash_and_watch("adopt");
  CHECK(lines == std::vector<std::string>{"ORPHANED 500 1000 VICTIM", "ADOPTED 500 1000 VICTIM",
                                          "GOT 700 after the handler", "ASSUMED 0 1000"});
}

TEST_CASE("crash: under orphan_policy wait, an orphaned interval stays nobody's and its messages wait") {
  const auto lines = crash_and_watch("wait");
  CHECK(lines == std::vector<std::string>{"ORPHANED 500 1000 VICTIM", "ASSUMED 0 500"});
}
