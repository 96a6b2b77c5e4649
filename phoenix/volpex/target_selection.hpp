// target_selection.hpp — which replica of a sending rank a receiver replica pulls from (paper 004, section 3;
// paper 002, section 3, "replica selection module").
//
// A receive pulls its message from ONE replica of the sending rank. The choice trades two goals (paper 004,
// section 3): contact the "fastest" replica, yet not slow the fastest down by making it serve every laggard —
// "determine a replica which is 'close' to the execution state of the receiver process". One target_selector
// per (receiver replica, sending rank): events in, a choice out. Time is passed in as durations, never read.
//
// The communicator calls choose() before every request and after every event; when the answer differs from the
// replica it is waiting on, it re-issues the request there, abandoning the old one (paper 004, section 3,
// "Timeout Based": a late answer from the abandoned replica goes to the unexpected queue and is purged).
//
//   policy     target at the start               what moves it                                 004, sec. 3
//   ---------  --------------------------------  --------------------------------------------  -------------
//   team       replica (self mod K)              its death only: next alive, cyclically        "team based"
//   timeout    as team                           its death; or waiting >= timeout for it:      "Timeout Based"
//                                                next alive cyclically, kept from then on
//   timestamp  as team                           its death (as team); its latest lagging mine  "Virtual Time
//                                                by > threshold: the alive replica known       Stamp Based"
//                                                ahead of mine closest to mine (none known:
//                                                next alive); its latest leading mine by >
//                                                threshold: an alive replica known at or
//                                                ahead of mine and closer to mine, the
//                                                closest
//   network    round robin over the alive        answers: after probe_messages timed answers   "Network
//              replicas, from (self mod K)       from each alive replica, the one with the     Performance
//                                                lowest predicted time for the average size;   Based"
//                                                after reevaluate_every more, round robin
//                                                again; waiting >= timeout for a replica:
//                                                that wait is its measure (see below)
//   hybrid     as team until every alive         its death: next alive in ping order; lag:     "Hybrid"
//              replica has a ping round trip,    the lowest-ping alive replica known ahead
//              then the lowest ping              of mine (none known: next in ping order);
//                                                lead: as timestamp
//
// Decisions the paper leaves open, made here:
//   - Cyclic order is by replica index over every replica known (0..K-1 and late ones added); "next alive after
//     j" tries the others first and j itself last, so a lone survivor is never abandoned for nothing.
//   - timestamp and hybrid apply their rule only to an answer or "not yet" from the current target: others'
//     latest values are remembered (the last one each reported) but are lower bounds by the time they are used,
//     so they choose where to go, never whether to leave. Exactly `threshold` apart does not switch.
//   - Timestamps compared must count on one scale: those of one stream when the receiver pulls one tag from the
//     rank, else per-pair counts over all tags (paper 002's "messages exchanged between pairs of processes").
//   - hybrid also applies the lead rule: the paper's second step is that "if a process is lagging far behind
//     the sender process it changes its target to the slower one" (the receiver spares the fast replica).
//     The ping order is applied once, when the last alive replica's ping is in (the pairwise step of init);
//     later pings only reorder the fallbacks. Replicas without a ping rank after those with one, by index.
//   - network estimator, per replica over one round's timed answers (bytes b_i after round trip r_i):
//       latency   L = min r_i (the quickest answer is closest to pure latency);
//       per byte  P = sum(r_i - L) / sum(b_i) (what answers took beyond L per byte carried: the inverse
//                 bandwidth, dominated by the large answers; 0 if none carried bytes);
//       predicted time for the running average answer size s over the selector's life: L + s * P.
//     Lowest predicted wins, ties to the first in cyclic order from (self mod K). Answers from any replica
//     count as samples; the round robin moves on after each answer from the target. A target that dies is
//     replaced by the best measured alive replica (or, mid-round, the next one still to measure). As the paper
//     notes, a slow replica slows every receive it serves during a round; bounded here by the timeout: past
//     it, the wait counts as all of that replica's samples of the round (a lower bound on its time) and the
//     round goes on. A chosen target that makes the receiver wait past the timeout starts a new round the
//     same way: replicas that slow down after being measured (a machine that gets loaded) are left at once.
//   - Death is what the owner concluded from a missing route (liveness.hpp), and a route can come back: on_back
//     makes the replica alive again. It becomes the target when there was none, and team goes back to its
//     replica (self mod K); the other policies take it into account at their next decision (network: when it
//     next measures). add_replica of a replica already known does nothing; a restarted replica comes back
//     under a new index.
//
// Single-threaded: the owner serialises every call. No I/O, no clock.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "phoenix/volpex/sender_log.hpp"

namespace phoenix::volpex {

// The enumerator `timestamp` names the policy after the paper; it is scoped (selection::timestamp), so it hides
// nothing a reader could confuse, but GCC's -Wshadow flags it against the type volpex::timestamp.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
enum class selection : std::uint8_t { team, timeout, timestamp, network, hybrid };
#pragma GCC diagnostic pop
const char* to_string(selection s);
std::optional<selection> parse_selection(std::string_view text);  // "team", "timeout", "timestamp", ...

struct selection_options {
  selection policy = selection::team;
  // timeout: abandon a target after waiting this long; network: a wait this long is that replica's measure.
  std::chrono::nanoseconds timeout = std::chrono::milliseconds(500);
  timestamp threshold = 16;     // timestamp, hybrid: how far a target may lag or lead before switching
  unsigned probe_messages = 4;  // network: answers timed per replica before choosing (at least 1)
  std::uint64_t reevaluate_every = 1000;  // network: answers after which to measure again (0: never)
};

class target_selector {
 public:
  target_selector(selection_options o, replica_index self, unsigned source_replicas);

  // The replica to ask for the next message, never a dead one; nullopt when every known replica is dead.
  std::optional<replica_index> choose() const;
  void add_replica(replica_index j);  // a late replica of the sending rank became known
  void on_dead(replica_index j);
  // A replica taken for dead is reachable again: it can be chosen again, and team goes back to its own.
  void on_back(replica_index j);
  bool alive(replica_index j) const;  // false for a replica never known
  // An answer came from `from`: `bytes` of body after `round_trip`; `their_latest` is the latest timestamp
  // `from` had on the stream, `mine` the one asked for.
  void on_answer(replica_index from, std::size_t bytes, std::chrono::nanoseconds round_trip,
                 timestamp their_latest, timestamp mine);
  // `from` answered "not yet": it lags (their_latest < mine).
  void on_not_yet(replica_index from, timestamp their_latest, timestamp mine);
  // Still waiting for `target` after `waited`; the comm calls this periodically while it waits.
  void on_waiting(replica_index target, std::chrono::nanoseconds waited);
  // Hybrid: a ping round trip measured when first contacting the rank (the pairwise step in init).
  void on_ping(replica_index from, std::chrono::nanoseconds round_trip);
  std::uint64_t switches() const;  // times choose()'s answer changed, for benchmarks

 private:
  struct sample {
    std::size_t bytes = 0;
    std::chrono::nanoseconds round_trip{};
  };
  struct replica {
    bool alive = true;
    std::optional<timestamp> latest;               // the last it reported (timestamp, hybrid)
    std::optional<std::chrono::nanoseconds> ping;  // the least measured (hybrid)
    std::vector<sample> samples;                   // this round's timed answers (network)
  };

  void set_target(std::optional<replica_index> j);
  std::vector<replica_index> cyclic_after(replica_index j) const;
  std::vector<replica_index> ping_order() const;
  std::vector<replica_index> others_after(replica_index j) const;
  std::optional<replica_index> next_alive_after(replica_index j) const;
  bool ping_before(replica_index a, replica_index b) const;

  void apply_lag_rule(timestamp their_latest, timestamp mine);
  void apply_lead_rule(timestamp their_latest, timestamp mine);
  void apply_ping_order_when_complete();

  void network_answer(replica_index from, std::size_t bytes, std::chrono::nanoseconds round_trip);
  void network_death(replica_index j);
  void network_censored(replica_index j, std::chrono::nanoseconds waited);
  void start_round();
  bool round_complete() const;
  void finish_round();
  std::optional<replica_index> next_to_measure_after(replica_index j) const;
  std::optional<replica_index> best_measured() const;
  static double predicted_ns(const std::vector<sample>& samples, double size);

  selection_options options_;
  replica_index self_;
  unsigned source_replicas_;
  std::map<replica_index, replica> replicas_;  // every replica known, by index
  std::optional<replica_index> target_;        // alive, or nullopt when none is
  std::uint64_t switches_ = 0;
  // network
  bool measuring_ = true;
  std::uint64_t answers_since_choice_ = 0;
  std::uint64_t answers_ = 0, answer_bytes_ = 0;  // over the selector's life, for the average size
  // hybrid
  bool ping_order_applied_ = false;
};

}  // namespace phoenix::volpex
