// phoenix/launch/run_control.cpp — see run_control.hpp.
#include "phoenix/launch/run_control.hpp"

namespace phoenix::launch {

RunControl::RunControl(Node& node, const RunHooks& hooks, std::chrono::milliseconds leave_attempt,
                   std::chrono::milliseconds leave_retry, std::shared_ptr<spdlog::logger> log)
    : node_(node),
      hooks_(hooks),
      leave_attempt_(leave_attempt),
      leave_retry_(leave_retry),
      log_(std::move(log)) {}

void RunControl::remark(const std::string& line) const {
  log_->info("{}", line);
  if (hooks_.remark) hooks_.remark(line);
}

void RunControl::error(const std::string& line) const {
  log_->error("{}", line);
  if (hooks_.error) hooks_.error(line);
}

std::optional<RunEnd> RunControl::tick_and_leave(Clock::time_point now) {
  if (hooks_.tick && now - last_tick_ >= hooks_.tick_interval) {
    hooks_.tick();
    last_tick_ = now;
  }
  if (hooks_.keep_interval && hooks_.keep_interval()) return std::nullopt;
  if (!suspend_file_ && hooks_.suspend_to) suspend_file_ = hooks_.suspend_to();
  if (suspend_file_ && now >= next_suspend_) return try_suspend();
  if (!hooks_.leave_now || now < next_leave_ || !hooks_.leave_now()) return std::nullopt;
  if (!leaving_) {
    node_.set_status("leaving");
    leaving_ = true;
  }
  const auto ec = node_.leave(leave_attempt_);
  if (!ec) return RunEnd::left;
  log_->info("leaving failed ({}); handling messages, then trying again", ec.message());
  next_leave_ = Clock::now() + leave_retry_;
  return std::nullopt;
}

// Node::suspend either finalizes the node with everything in the file, or leaves it running with nothing lost
// (PH_ESTATE: pack could not give a state right now; PH_ETIMEDOUT: a migration did not end in time): then the
// application handles its messages and the suspend is tried again. A request it refuses (PH_EINVAL) is dropped
// and the node runs on, as if it had not been asked; a failure that takes the node down fails the run.
std::optional<RunEnd> RunControl::try_suspend() {
  const std::string file = *suspend_file_;
  node_.set_status("suspending");
  const auto ec = node_.suspend(file.c_str());
  if (!ec) return RunEnd::suspended;
  if (!node_.running()) {
    error("suspend to " + file + " failed and the node stopped: " + ec.message());
    return RunEnd::stopped;
  }
  node_.set_status(leaving_ ? "leaving" : "running");
  if (ec == make_error_code(PH_EINVAL)) {
    remark("suspend to " + file + " refused (" + ec.message() + "); the node runs on");
    suspend_file_.reset();
    suspend_failures_ = 0;
    return std::nullopt;
  }
  if (suspend_failures_++ == 0)
    remark("suspend to " + file + " must wait (" + ec.message() + "); trying again");
  next_suspend_ = Clock::now() + leave_retry_;
  return std::nullopt;
}

}  // namespace phoenix::launch
