// apps/launch/run_turns.hpp — what an application's run loop shares with its node process (RunHooks), and the
// part of that loop every application repeats (RunTurns): the periodic tick (progress reports, the launcher's
// stop request) and leaving when told. A leave is tried for one short attempt at a time, and the application
// handles its messages between attempts: near the end of a run the message that ends it may be waiting while
// the neighbours have stopped and cannot take its interval.
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <functional>
#include <memory>
#include <phoenix/node.hpp>

namespace phoenix::launch {

struct RunHooks {
  std::function<bool()> stop;       // checked every turn: true ends the run at once
  std::function<bool()> leave_now;  // true: hand everything to a neighbour, then the run ends
  std::function<void()> tick;       // called about every tick_interval
  std::chrono::milliseconds tick_interval{100};
};

enum class RunEnd { done, stopped, left };

class RunTurns {
 public:
  using Clock = std::chrono::steady_clock;
  RunTurns(Node& node, const RunHooks& hooks, std::chrono::milliseconds leave_attempt,
           std::chrono::milliseconds leave_retry, std::shared_ptr<spdlog::logger> log);

  bool stop() const { return hooks_.stop && hooks_.stop(); }
  // Once per turn of the loop: runs the tick when it is due and, when told to leave and not waiting to try
  // again, makes one attempt. True once the node has left.
  bool tick_and_leave(Clock::time_point now);

 private:
  Node& node_;
  const RunHooks& hooks_;
  std::chrono::milliseconds leave_attempt_, leave_retry_;
  std::shared_ptr<spdlog::logger> log_;
  Clock::time_point last_tick_ = Clock::now();
  Clock::time_point next_leave_{};
};

}  // namespace phoenix::launch
