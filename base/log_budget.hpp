// base/log_budget.hpp — how many lines a peer can make a node log.
//
// Anything a remote party can trigger at will (refused connections, bad requests, dropped messages) is logged
// through a budget: at most `burst` lines per window, the rest counted, and the next line let through says how
// many were held back. One class for every such log in the runtime (the listener, the link manager, the node's
// control plane). No I/O, no clock: the time is passed in.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace phoenix::base {

class log_budget {
 public:
  using clock = std::chrono::steady_clock;
  explicit log_budget(clock::duration window, std::uint32_t burst = 1) : window_(window), burst_(burst) {}
  // If a line may be logged now: how many were held back since the last one let through (then 0 again).
  std::optional<std::uint64_t> pass(clock::time_point now);

 private:
  clock::duration window_;
  std::uint32_t burst_;
  std::optional<clock::time_point> window_start_;
  std::uint32_t used_ = 0;
  std::uint64_t held_back_ = 0;
};

}  // namespace phoenix::base
