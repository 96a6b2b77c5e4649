// What the crash tests' node processes share (test_crash.cpp, test_crash_handover.cpp): their space, their
// configuration, and how they wait to see another node's interval.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <phoenix/config.hpp>
#include <phoenix/node.hpp>

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

}  // namespace phoenix::test::crash
