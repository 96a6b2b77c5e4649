// liveness.hpp — what one replica concludes about another from the routes to it.
//
// A replica that dies loses its routes as soon as its neighbours' links to it break, but routes also go for a
// while when a node in between stalls: a hub that does not run for half a minute (a starved or paused process,
// a host that stalls on memory) lets every route through it expire, and they come back as soon as it runs
// again. So a missing route is taken in two steps:
//   - suspected after `suspect_after` without one: the selection asks another replica, so a receive waits for
//     a dead target no longer than that;
//   - given up after `give_up_after` without one: only then does a receiver report the source unreachable,
//     or a sender stop keeping its log for the receiver.
// A route that comes back clears both: the replica is back, and taken as alive again. A replica not
// registered in the directory yet counts as without a route.
//
// No clock and no I/O: the owner says what it sees and when.
#pragma once

#include <chrono>
#include <optional>

namespace phoenix::volpex {

struct liveness_timing {
  std::chrono::milliseconds suspect_after{1000};
  std::chrono::milliseconds give_up_after{10000};
};

class liveness {
 public:
  using clock = std::chrono::steady_clock;
  enum class change { none, suspected, given_up, back };

  // What the owner saw at `now`: a route to the replica, or none. Returns the step this took, if any.
  change observe(bool reachable, clock::time_point now, const liveness_timing& t) {
    if (reachable) {
      missing_since_.reset();
      const bool was_down = suspected_;
      suspected_ = given_up_ = false;
      return was_down ? change::back : change::none;
    }
    if (!missing_since_) missing_since_ = now;
    const auto missing = now - *missing_since_;
    if (!given_up_ && missing >= t.give_up_after) {
      given_up_ = suspected_ = true;
      return change::given_up;
    }
    if (!suspected_ && missing >= t.suspect_after) {
      suspected_ = true;
      return change::suspected;
    }
    return change::none;
  }

  bool suspected() const { return suspected_; }  // given up implies suspected
  bool given_up() const { return given_up_; }

 private:
  std::optional<clock::time_point> missing_since_;
  bool suspected_ = false;
  bool given_up_ = false;
};

}  // namespace phoenix::volpex
