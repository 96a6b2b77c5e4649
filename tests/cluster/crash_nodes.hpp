// What the crash tests' node processes share (test_crash.cpp, test_crash_handover.cpp, test_crash_transit.cpp):
// their space, their configuration, and how they wait to see another node's interval.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <phoenix/config.hpp>
#include <phoenix/node.hpp>

#include "phoenix/launch/process_group.hpp"

namespace phoenix::test::crash {

inline constexpr std::uint64_t L = 1000;

// Fast redials, and an owner gone for 300 ms reported orphaned; `policy` is orphan_policy.
inline phoenix::Config member_config(const std::string& name, const std::string& key, const std::string& policy) {
  phoenix::Config c;
  c.name = name;
  c.space_size = L;
  c.cluster_key_file = key;
  c.retry_interval_ms = 30;
  c.orphan_after_ms = 300;
  c.orphan_policy = policy;
  return c;
}

// Whether a route names exactly s as its destination's intervals.
inline bool sees_interval(phoenix::Node& node, phoenix::Interval s) {
  for (const auto& r : node.routing_snapshot().routes)
    if (r.intervals == std::vector<phoenix::Interval>{s}) return true;
  return false;
}

// A child's last steps: reports `line`, waits until the test stops it, finalizes. Returns its exit status.
inline int report_then_finalize(phoenix::Node& node, const phoenix::launch::ChildPipes& pipes,
                                const std::string& line) {
  phoenix::launch::report_line(pipes.report_fd, line);
  while (!phoenix::launch::stop_requested(pipes.control_fd, std::chrono::milliseconds(50))) {
  }
  node.finalize();
  return 0;
}

// "ASSUMES [lo, hi) ...": what the node assumes.
inline std::string assumes_line(phoenix::Node& node) {
  std::string line = "ASSUMES";
  for (const auto& i : node.assumed()) line += " [" + std::to_string(i.lo) + ", " + std::to_string(i.hi) + ")";
  return line;
}

// A child process's function, made once the first child reported its address.
using child_body = std::function<int(const phoenix::launch::ChildPipes&)>;
struct later_child {
  std::string name;
  std::function<child_body(const std::string&)> make;  // from the rest of the first child's "PORT <rest>" line
};

// Spawns `first`; once it reports "PORT <rest>", spawns each of `later` in order; returns the first line of the
// last of them that begins with `want` (empty if none within 60 s), then stops them all.
inline std::string first_then_later(const std::string& first_name, const child_body& first,
                                    const std::vector<later_child>& later, const std::string& want) {
  using phoenix::launch::Clock;
  phoenix::launch::ProcessGroup group;
  const std::size_t one = group.spawn(first_name, first);
  std::optional<std::size_t> last;
  std::string got;
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (got.empty() && Clock::now() < until) {
    const auto ev = group.next_event(until);
    if (!ev) break;
    if (ev->eof) continue;
    MESSAGE(group.name(ev->child) << ": " << ev->line);
    if (ev->child == one && ev->line.rfind("PORT ", 0) == 0) {
      for (const auto& l : later) last = group.spawn(l.name, l.make(ev->line.substr(5)));
    } else if (last && ev->child == *last && ev->line.rfind(want, 0) == 0) {
      got = ev->line;
    }
  }
  group.stop_all(std::chrono::seconds(10));
  return got;
}

}  // namespace phoenix::test::crash
