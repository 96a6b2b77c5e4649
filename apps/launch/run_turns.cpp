// apps/launch/run_turns.cpp — see run_turns.hpp.
#include "apps/launch/run_turns.hpp"

namespace phoenix::launch {

RunTurns::RunTurns(Node& node, const RunHooks& hooks, std::chrono::milliseconds leave_attempt,
                   std::chrono::milliseconds leave_retry, std::shared_ptr<spdlog::logger> log)
    : node_(node),
      hooks_(hooks),
      leave_attempt_(leave_attempt),
      leave_retry_(leave_retry),
      log_(std::move(log)) {}

bool RunTurns::tick_and_leave(Clock::time_point now) {
  if (hooks_.tick && now - last_tick_ >= hooks_.tick_interval) {
    hooks_.tick();
    last_tick_ = now;
  }
  if (!hooks_.leave_now || now < next_leave_ || !hooks_.leave_now()) return false;
  const auto ec = node_.leave(leave_attempt_);
  if (!ec) return true;
  log_->info("leaving failed ({}); handling messages, then trying again", ec.message());
  next_leave_ = Clock::now() + leave_retry_;
  return false;
}

}  // namespace phoenix::launch
