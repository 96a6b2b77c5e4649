// phoenix/launch/run_control.hpp — what an application's run loop shares with its node process (RunHooks), and
// the part of that loop every application repeats (RunControl): the periodic tick (progress reports, the
// launcher's stop request, the shell's control requests), leaving when told and suspending when told. A leave
// is tried for one short attempt at a time, and the application handles its messages between attempts: near the
// end of a run the message that ends it may be waiting while the neighbours have stopped and cannot take its
// interval.
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <phoenix/node.hpp>
#include <string>

namespace phoenix::launch {

struct RunHooks {
  std::function<bool()> stop;       // checked every turn: true ends the run at once
  std::function<bool()> leave_now;  // true: hand everything to a neighbour, then the run ends
  // A file: suspend the node to it (a temporary leave with its state, Node::suspend), then the run ends. Asked
  // every turn; a request is taken once (RunControl keeps the file while it retries).
  std::function<std::optional<std::string>()> suspend_to;
  // Optional: true while the node must neither leave nor suspend, because it holds something that is not part
  // of its state (the run's result, on its way to being reported; what it waits for before a run begins); the
  // requests wait until it is false.
  std::function<bool()> keep_interval;
  std::function<void()> tick;                      // called about every tick_interval
  std::function<void(const std::string&)> remark;  // optional: a line for whoever started the process
  std::function<void(const std::string&)> error;   // optional: the same, for a failure that fails the run
  std::chrono::milliseconds tick_interval{100};
};

// How a run ended: the application's own end (done), the launcher or shell stopped it, it left (assumes
// nothing), or it suspended (the node is finalized: its intervals and state are in the file).
enum class RunEnd { done, stopped, left, suspended };

class RunControl {
 public:
  using Clock = std::chrono::steady_clock;
  RunControl(Node& node, const RunHooks& hooks, std::chrono::milliseconds leave_attempt,
           std::chrono::milliseconds leave_retry, std::shared_ptr<spdlog::logger> log);

  bool stop() const { return hooks_.stop && hooks_.stop(); }
  // Once per turn of the loop: runs the tick when it is due; when told to suspend, suspends; when told to leave
  // and not waiting to try again, makes one attempt. Returns RunEnd::left once the node has left,
  // RunEnd::suspended once it has suspended, RunEnd::stopped if a suspend failed and took the node down with it
  // (reported as an error), nullopt while the run goes on.
  std::optional<RunEnd> tick_and_leave(Clock::time_point now);

 private:
  std::optional<RunEnd> try_suspend();
  void remark(const std::string& line) const;
  void error(const std::string& line) const;

  Node& node_;
  const RunHooks& hooks_;
  std::chrono::milliseconds leave_attempt_, leave_retry_;
  std::shared_ptr<spdlog::logger> log_;
  Clock::time_point last_tick_ = Clock::now();
  Clock::time_point next_leave_{};
  bool leaving_ = false;
  std::optional<std::string> suspend_file_;  // a suspend asked for and not yet done
  Clock::time_point next_suspend_{};
  int suspend_failures_ = 0;
};

}  // namespace phoenix::launch
