// Target selection (paper 004, section 3): each policy's choices under scripted events, and the guarantees all
// of them give — never a dead replica, nullopt only when every replica is dead — also when dead replicas come
// back.
#include <doctest/doctest.h>

#include <chrono>
#include <optional>
#include <vector>

#include "phoenix/volpex/target_selection.hpp"

using namespace phoenix::volpex;
using namespace std::chrono_literals;

namespace {

selection_options with(selection policy) {
  selection_options o;
  o.policy = policy;
  return o;
}

std::optional<replica_index> at(replica_index j) { return j; }

}  // namespace

TEST_CASE("target selection: policy names parse back to the policy, and nothing else parses") {
  for (const selection s :
       {selection::team, selection::timeout, selection::timestamp, selection::network, selection::hybrid})
    CHECK(parse_selection(to_string(s)) == s);
  CHECK(std::string_view(to_string(selection::hybrid)) == "hybrid");
  CHECK_FALSE(parse_selection("Team"));
  CHECK_FALSE(parse_selection(""));
  CHECK_FALSE(parse_selection("fastest"));
}

TEST_CASE("target selection: team pulls from replica self mod K and moves only when it dies") {
  target_selector t(with(selection::team), 4, 3);
  CHECK(t.choose() == at(1));
  t.on_waiting(1, 10s);      // team ignores waiting...
  t.on_not_yet(1, 0, 1000);  // ...and lag
  t.on_answer(1, 10, 1ms, 5000, 1);
  CHECK(t.choose() == at(1));
  t.on_dead(2);  // not the target
  CHECK(t.choose() == at(1));
  CHECK(t.switches() == 0);
  t.on_dead(1);  // the next alive in cyclic order: 2 is dead, so 0
  CHECK(t.choose() == at(0));
  t.on_dead(0);
  CHECK_FALSE(t.choose());
  CHECK(t.switches() == 2);
  t.add_replica(3);  // a late replica: the only one alive
  CHECK(t.choose() == at(3));
  t.add_replica(1);  // known and dead: death is final
  CHECK_FALSE(t.alive(1));
  CHECK(t.choose() == at(3));
}

TEST_CASE("target selection: a replica back from the dead is chosen again: team returns to its own") {
  target_selector team(with(selection::team), 1, 3);
  team.on_dead(1);
  CHECK(team.choose() == at(2));
  team.on_back(0);  // alive already: nothing changes
  CHECK(team.choose() == at(2));
  team.on_back(1);
  CHECK(team.alive(1));
  CHECK(team.choose() == at(1));
  CHECK(team.switches() == 2);
  team.on_back(7);  // never known: ignored
  CHECK_FALSE(team.alive(7));

  target_selector stamp(with(selection::timestamp), 0, 2);
  stamp.on_dead(0);
  stamp.on_dead(1);
  CHECK_FALSE(stamp.choose());
  stamp.on_back(1);  // no target: the one back becomes it
  CHECK(stamp.choose() == at(1));
  stamp.on_back(0);  // a target already: timestamp keeps it
  CHECK(stamp.choose() == at(1));
}

TEST_CASE("target selection: timeout abandons the target at exactly the timeout, and keeps the next one") {
  auto o = with(selection::timeout);
  o.timeout = 500ms;
  target_selector t(o, 0, 3);
  CHECK(t.choose() == at(0));
  t.on_waiting(0, 499ms);
  CHECK(t.choose() == at(0));
  t.on_waiting(0, 500ms);
  CHECK(t.choose() == at(1));
  t.on_waiting(0, 2s);  // the abandoned one: no longer what we wait on
  CHECK(t.choose() == at(1));
  t.on_waiting(1, 100ms);  // a new wait on the new target starts from zero
  CHECK(t.choose() == at(1));
  t.on_waiting(1, 500ms);
  CHECK(t.choose() == at(2));
  t.on_dead(0);
  t.on_waiting(2, 600ms);  // cyclically after 2: 0 is dead, so 1
  CHECK(t.choose() == at(1));
  CHECK(t.switches() == 3);
  t.on_dead(2);
  t.on_waiting(1, 1s);  // the last one alive: kept
  CHECK(t.choose() == at(1));
}

TEST_CASE("target selection: timestamp switches away from a target lagging past the threshold, not within it") {
  auto o = with(selection::timestamp);
  o.threshold = 4;
  target_selector t(o, 0, 3);
  t.on_answer(1, 10, 1ms, 30, 10);  // answers from others are remembered, they move nothing
  t.on_answer(2, 10, 1ms, 21, 10);
  CHECK(t.choose() == at(0));
  t.on_not_yet(0, 16, 20);  // lags by exactly the threshold
  CHECK(t.choose() == at(0));
  t.on_not_yet(1, 0, 100);  // not the target
  t.on_answer(1, 10, 1ms, 30, 10);
  t.on_not_yet(0, 15, 20);  // lags by 5: to the replica ahead of 20 closest to it (2 at 21, not 1 at 30)
  CHECK(t.choose() == at(2));
  CHECK(t.switches() == 1);
  SUBCASE("with no replica known to be ahead, the next alive one") {
    target_selector u(o, 0, 3);
    u.on_not_yet(0, 1, 10);
    CHECK(u.choose() == at(1));
  }
}

TEST_CASE("target selection: timestamp spares a target leading past the threshold for one closer to mine") {
  auto o = with(selection::timestamp);
  o.threshold = 4;
  target_selector t(o, 0, 3);
  t.on_answer(1, 10, 1ms, 13, 10);
  t.on_answer(2, 10, 1ms, 11, 10);
  t.on_answer(0, 10, 1ms, 14, 10);  // leads by exactly the threshold
  CHECK(t.choose() == at(0));
  t.on_answer(0, 10, 1ms, 15, 10);  // leads by 5: 2 (at 11) is the closest to 10 that has it
  CHECK(t.choose() == at(2));
  SUBCASE("nobody closer that has the message: stay") {
    target_selector u(o, 0, 3);
    u.on_not_yet(1, 9, 10);           // 1 lacks message 10
    u.on_answer(2, 10, 1ms, 40, 10);  // 2 is further ahead still
    u.on_answer(0, 10, 1ms, 30, 10);
    CHECK(u.choose() == at(0));
    CHECK(u.switches() == 0);
  }
}

TEST_CASE("target selection: network measures round robin, then takes the faster replica, and measures again") {
  auto o = with(selection::network);
  o.probe_messages = 2;
  o.reevaluate_every = 3;
  target_selector t(o, 0, 2);
  std::vector<replica_index> seen;
  const auto answer = [&](std::chrono::nanoseconds rtt) {
    const replica_index from = *t.choose();
    t.on_answer(from, 1000, rtt, 1, 1);
    seen.push_back(from);
  };
  const auto rtt_before = [](replica_index j) { return j == 0 ? 10ms : 2ms; };  // 1 is faster
  for (int n = 0; n < 4; ++n) answer(rtt_before(*t.choose()));
  CHECK(seen == std::vector<replica_index>{0, 1, 0, 1});
  CHECK(t.choose() == at(1));
  for (int n = 0; n < 3; ++n) answer(2ms);  // the third starts a new round, from the current target
  CHECK(t.choose() == at(1));
  const auto rtt_after = [](replica_index j) { return j == 0 ? 1ms : 2ms; };  // now 0 is faster
  seen.clear();
  for (int n = 0; n < 4; ++n) answer(rtt_after(*t.choose()));
  CHECK(seen == std::vector<replica_index>{1, 0, 1, 0});
  CHECK(t.choose() == at(0));
  SUBCASE("the chosen target dies: the best other measured") {
    t.on_dead(0);
    CHECK(t.choose() == at(1));
  }
}

TEST_CASE("target selection: network does not wait past the timeout for a replica, measuring or chosen") {
  auto o = with(selection::network);
  o.probe_messages = 2;
  o.timeout = 500ms;
  target_selector t(o, 0, 3);
  CHECK(t.choose() == at(0));
  t.on_answer(0, 100, 2ms, 1, 1);
  CHECK(t.choose() == at(1));
  t.on_waiting(1, 499ms);  // not yet past the timeout: still measuring 1
  CHECK(t.choose() == at(1));
  t.on_waiting(1, 500ms);  // 1 lags: the wait is its measure, the round goes on
  CHECK(t.choose() == at(2));
  t.on_answer(2, 100, 3ms, 1, 1);
  CHECK(t.choose() == at(0));
  t.on_answer(0, 100, 2ms, 1, 1);
  CHECK(t.choose() == at(2));  // 2 still owes its second sample; 1 is done
  t.on_answer(2, 100, 3ms, 1, 1);
  CHECK(t.choose() == at(0));  // round complete: 0 (2 ms) before 2 (3 ms) before 1 (>= 500 ms)
  const auto switches = t.switches();
  t.on_waiting(2, 10s);  // not the target: nothing
  CHECK(t.choose() == at(0));
  CHECK(t.switches() == switches);
  t.on_waiting(0, 600ms);  // the chosen target slowed down: a new round, without waiting for it again
  CHECK(t.choose() == at(1));
  t.on_answer(1, 100, 1ms, 1, 1);
  CHECK(t.choose() == at(2));
  t.on_answer(2, 100, 3ms, 1, 1);
  t.on_answer(*t.choose(), 100, 1ms, 1, 1);
  t.on_answer(*t.choose(), 100, 3ms, 1, 1);
  CHECK(t.choose() == at(1));  // 1 (1 ms) is now the quickest; 0 ranks last (600 ms)
}

TEST_CASE("target selection: network predicts from latency and bandwidth at the average message size") {
  auto o = with(selection::network);
  o.probe_messages = 2;
  // Replica 0: 1 ms latency, 100 ns/byte; replica 1: 5 ms latency, 10 ns/byte.
  const auto run = [&](std::size_t large) {
    target_selector t(o, 0, 2);
    const auto per_byte = [](replica_index j) { return j == 0 ? 100ns : 10ns; };
    const auto latency = [](replica_index j) { return j == 0 ? 1ms : 5ms; };
    for (const std::size_t bytes : {std::size_t{0}, std::size_t{0}, large, large}) {
      const replica_index from = *t.choose();
      t.on_answer(from, bytes, latency(from) + per_byte(from) * static_cast<long>(bytes), 1, 1);
    }
    return t.choose();
  };
  CHECK(run(1'000'000) == at(1));  // average 500 kB: bandwidth wins
  CHECK(run(1'000) == at(0));      // average 500 B: latency wins
}

TEST_CASE("target selection: hybrid takes the lowest ping once all are in, then leaves a lagging target") {
  auto o = with(selection::hybrid);
  o.threshold = 4;
  target_selector t(o, 0, 3);
  t.on_ping(2, 1ms);
  t.on_ping(1, 3ms);
  CHECK(t.choose() == at(0));  // as team until every ping is in
  t.on_ping(0, 5ms);
  CHECK(t.choose() == at(2));
  t.on_answer(1, 10, 1ms, 25, 10);
  t.on_answer(0, 10, 1ms, 21, 10);
  t.on_not_yet(2, 17, 20);  // within the threshold
  CHECK(t.choose() == at(2));
  t.on_not_yet(2, 5, 20);  // lags by 15: the lowest ping known ahead (1 at 3 ms, though 0 is closer to 20)
  CHECK(t.choose() == at(1));
  t.on_dead(1);  // next in ping order after 1: 0 (2 follows only cyclically)
  CHECK(t.choose() == at(0));
  CHECK(t.switches() == 3);
}

TEST_CASE("target selection: hybrid applies the ping order when the last unpinged replica dies") {
  target_selector t(with(selection::hybrid), 0, 3);
  t.on_ping(1, 2ms);
  t.on_ping(2, 1ms);
  CHECK(t.choose() == at(0));
  t.on_dead(0);
  CHECK(t.choose() == at(2));
}

TEST_CASE("target selection: no policy ever chooses a dead replica, and none chooses nothing while one lives") {
  for (const selection s :
       {selection::team, selection::timeout, selection::timestamp, selection::network, selection::hybrid}) {
    CAPTURE(to_string(s));
    auto o = with(s);
    o.threshold = 2;
    o.probe_messages = 1;
    o.reevaluate_every = 3;
    o.timeout = 5ms;
    target_selector t(o, 1, 4);
    std::uint64_t x = 12345;  // a fixed linear congruential sequence: the same script every run
    const auto next = [&x](std::uint64_t n) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      return (x >> 33) % n;
    };
    replica_index known = 4;
    std::vector<bool> dead(16, false);
    for (int step = 0; step < 2000; ++step) {
      const auto j = static_cast<replica_index>(next(known));
      const timestamp mine = 50;
      switch (next(8)) {
        case 0:
          if (next(4) == 0) {
            t.on_dead(j);
            dead[j] = true;
          } else if (dead[j] && next(3) == 0) {  // its route came back
            t.on_back(j);
            dead[j] = false;
          }
          break;
        case 1:
          if (known < 16 && next(8) == 0) t.add_replica(known++);
          break;
        case 2:
          t.on_answer(j, next(5000), std::chrono::microseconds(next(900) + 1), mine + next(20), mine);
          break;
        case 3:
          t.on_not_yet(j, next(mine), mine);
          break;
        case 4:
          t.on_waiting(j, std::chrono::milliseconds(next(10)));
          break;
        case 5:
          t.on_ping(j, std::chrono::microseconds(next(900) + 1));
          break;
        default:
          if (const auto c = t.choose())
            t.on_answer(*c, next(5000), std::chrono::microseconds(next(900) + 1), mine + next(20), mine);
          break;
      }
      bool any_alive = false;
      for (replica_index i = 0; i < known; ++i) {
        CHECK(t.alive(i) == !dead[i]);
        any_alive = any_alive || !dead[i];
      }
      const auto c = t.choose();
      REQUIRE(c.has_value() == any_alive);
      if (c) REQUIRE(t.alive(*c));
    }
  }
}
