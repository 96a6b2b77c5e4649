// Helpers for tests that run several phoenix::Nodes in one process over loopback TCP.
#pragma once

#include <chrono>
#include <functional>
#include <phoenix/config.hpp>
#include <phoenix/node.hpp>
#include <string>
#include <thread>

namespace phoenix::test {

// The space size of the in-process node tests.
inline constexpr std::uint64_t L = 1000;

// A node configuration for tests: space size L, the given key, a short redial interval.
inline Config node_config(const std::string& name, const std::string& key, std::uint64_t space_size) {
  Config c;
  c.name = name;
  c.space_size = space_size;
  c.cluster_key_file = key;
  c.retry_interval_ms = 50;
  return c;
}

inline std::string payload_of(const Message& m) {
  return std::string(reinterpret_cast<const char*>(m.data()), m.size());
}

// Polls cond every 10 ms until it holds or the limit passes; returns its last value.
inline bool wait_for(const std::function<bool()>& cond,
                     std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

}  // namespace phoenix::test
