// base/log_budget.cpp — see log_budget.hpp.
#include "base/log_budget.hpp"

#include <utility>

namespace phoenix::base {

std::optional<std::uint64_t> log_budget::pass(clock::time_point now) {
  if (!window_start_ || now - *window_start_ >= window_ || now < *window_start_) {
    window_start_ = now;
    used_ = 0;
  }
  if (used_ >= burst_) {
    ++held_back_;
    return std::nullopt;
  }
  ++used_;
  return std::exchange(held_back_, 0);
}

}  // namespace phoenix::base
