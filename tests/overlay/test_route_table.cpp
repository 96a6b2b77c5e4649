// Tests of overlay/routing/route_table: unit tests of each rule, then whole networks in
// tests/overlay/route_sim.hpp. Over 600 lines as one file: every case is one rule of one table, read best
// beside the others.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "overlay/routing/route_table.hpp"
#include "tests/overlay/route_sim.hpp"

using namespace phoenix::overlay;
using namespace std::chrono_literals;

namespace {

const time_point t0{std::chrono::hours(1)};
constexpr node_id me = 50, a = 2, b = 3, c = 4, s = 9, s2 = 10;

route_entry entry(node_id source, std::uint64_t seqno, std::uint16_t metric,
                  std::vector<route_interval> iv = {}) {
  return {source, seqno, metric, std::move(iv)};
}
route_update update(std::vector<route_entry> entries) { return {false, std::move(entries)}; }
// The summary a neighbour that advertised exactly `entries` sends (route_sync.cpp).
route_summary summary_of(const std::vector<route_entry>& entries, bool ends_dump = false) {
  route_summary sum{0, static_cast<std::uint32_t>(entries.size()), ends_dump};
  for (const auto& e : entries) sum.digest ^= route_table::entry_digest(e);
  return sum;
}

// The unit tests below look at each triggered update as it becomes due: no gap between two (trigger_gap, which
// the simulated networks keep, has a test of its own).
route_params unbatched() {
  route_params p;
  p.trigger_gap = {};
  return p;
}

// Time passes for t as the overlay's timer makes it pass: woken at least every second (a table woken less
// often than once per summary period takes the gap for time asleep, route_sync.cpp).
void idle(route_table& t, time_point from, time_point to) {
  for (time_point x = from + 1s; x < to; x += 1s) t.expire(x);
  t.expire(to);
}

// A table with the given neighbours up and the resulting triggered update and dumps already sent.
route_table make_table(std::initializer_list<node_id> neighbours, route_params p = unbatched()) {
  route_table t(me, p, t0);
  for (node_id n : neighbours) t.neighbour_up(n, t0);
  (void)t.collect_output(t0);
  return t;
}

std::optional<route_entry> find_entry(const std::optional<route_update>& u, node_id source) {
  if (!u) return std::nullopt;
  for (const auto& e : u->entries) {
    if (e.source == source) return e;
  }
  return std::nullopt;
}

route_table::route_view view_of(const route_table& t, node_id destination) {
  for (const auto& r : t.routes()) {
    if (r.destination == destination) return r;
  }
  FAIL("no route entry for " << destination);
  return {};
}

}  // namespace

TEST_CASE("route_table: newer seqno wins over fewer hops") {
  auto t = make_table({a, b});
  t.on_update(a, update({entry(s, 10, 1)}), t0);
  CHECK(t.next_hop(s) == a);
  t.on_update(b, update({entry(s, 12, 5)}), t0);
  CHECK(t.next_hop(s) == b);
  CHECK(view_of(t, s).metric == 6);
  CHECK(view_of(t, s).seqno == 12);
  t.on_update(a, update({entry(s, 10, 0)}), t0);  // older, even if shorter: ignored
  CHECK(t.next_hop(s) == b);
}

TEST_CASE("route_table: equal seqno, fewer hops wins, ties keep the current next hop") {
  auto t = make_table({a, b});
  t.on_update(a, update({entry(s, 10, 3)}), t0);
  CHECK(t.next_hop(s) == a);
  CHECK(view_of(t, s).metric == 4);
  t.on_update(b, update({entry(s, 10, 1)}), t0);
  CHECK(t.next_hop(s) == b);
  CHECK(view_of(t, s).metric == 2);
  t.on_update(a, update({entry(s, 10, 1)}), t0);  // now a tie: stay with b although a has the lower id
  CHECK(t.next_hop(s) == b);
}

TEST_CASE("route_table: metric saturates at infinity") {
  auto t = make_table({a});
  t.on_update(a, update({entry(s, 10, infinite_metric - 1)}), t0);  // finite there, infinite here
  CHECK_FALSE(t.is_reachable(s));
  t.on_update(a, update({entry(s, 10, infinite_metric - 2)}), t0);
  CHECK(view_of(t, s).metric == infinite_metric - 1);
}

TEST_CASE("route_table: a non-feasible route is rejected (same seqno, metric not below FD)") {
  auto t = make_table({a, b});
  t.on_update(a, update({entry(s, 10, 1)}), t0);
  t.on_update(b, update({entry(s, 10, 2)}), t0);
  CHECK(t.next_hop(s) == a);

  SUBCASE("after advertising (10, 2), b's (10, 2) is not feasible") {
    REQUIRE(find_entry(t.collect_triggered(t0), s) == entry(s, 10, 2));  // FD(s) = (10, 2)
    t.neighbour_down(a, t0 + 1s);
    CHECK_FALSE(t.is_reachable(s));
    CHECK(t.next_hop(s) == std::nullopt);
  }
  SUBCASE("the same loss before anything was advertised: no FD, b is feasible") {
    t.neighbour_down(a, t0 + 1s);
    CHECK(t.next_hop(s) == b);
  }
  SUBCASE("a strictly smaller advertised metric is feasible") {
    (void)t.collect_triggered(t0);
    t.on_update(b, update({entry(s, 10, 1)}), t0);
    t.neighbour_down(a, t0 + 1s);
    CHECK(t.next_hop(s) == b);
  }
  SUBCASE("the selected neighbour's own metric increase makes its route unfeasible too") {
    (void)t.collect_triggered(t0);
    t.on_update(a, update({entry(s, 10, 4)}), t0 + 1s);
    CHECK_FALSE(t.is_reachable(s));
    CHECK(find_entry(t.collect_triggered(t0 + 1s), s) == entry(s, 10, infinite_metric));
  }
  SUBCASE("a newer seqno is feasible whatever its metric") {
    (void)t.collect_triggered(t0);
    t.on_update(b, update({entry(s, 12, 7)}), t0);
    t.neighbour_down(a, t0 + 1s);
    CHECK(t.next_hop(s) == b);
  }
}

TEST_CASE("route_table: neighbour_down retracts at once, at the seqno it had, and asks for a new seqno") {
  auto t = make_table({a, b, c});
  t.on_update(a, update({entry(s, 10, 1, {{5, 6}})}), t0);
  REQUIRE(t.collect_triggered(t0).has_value());
  const auto g = t.generation();

  SUBCASE("nobody else knows a route: retraction, no request") {
    t.neighbour_down(a, t0 + 1s);
    CHECK_FALSE(t.is_reachable(s));
    CHECK(t.generation() > g);
    CHECK(t.next_deadline() == t0 + 1s);
    // The retraction carries what s was last known to hold.
    CHECK(t.collect_triggered(t0 + 1s) == update({entry(s, 10, infinite_metric, {{5, 6}})}));
    CHECK(view_of(t, s).seqno == 10);
    CHECK(view_of(t, s).metric == infinite_metric);
    CHECK(t.collect_requests(t0 + 1s).empty());
    CHECK(t.owner_of(5) == std::nullopt);
  }
  SUBCASE("b has the best route we cannot use: b (only) is asked for seqno 11") {
    t.on_update(b, update({entry(s, 10, 3)}), t0);
    t.on_update(c, update({entry(s, 10, 5)}), t0);
    t.neighbour_down(a, t0 + 1s);
    CHECK(find_entry(t.collect_triggered(t0 + 1s), s) == entry(s, 10, infinite_metric, {{5, 6}}));
    using req = std::pair<node_id, route_request>;
    // Not at once: b's route may be one b's next retraction takes back (request_delay).
    CHECK(t.collect_requests(t0 + 1s).empty());
    CHECK(t.next_deadline() == t0 + 1050ms);
    CHECK(t.collect_requests(t0 + 1050ms) == std::vector<req>{{b, {s, 11, route_table::request_hop_limit}}});
    // b repeats its stale route (a dump): that changes nothing; the resend comes two holdoffs after the first.
    t.on_update(b, update({entry(s, 10, 3)}), t0 + 1100ms);
    CHECK(t.collect_requests(t0 + 1100ms).empty());
    CHECK(t.next_deadline() == t0 + 1450ms);
    CHECK(t.collect_requests(t0 + 1450ms) == std::vector<req>{{b, {s, 11, route_table::request_hop_limit}}});
    CHECK_FALSE(t.is_reachable(s));
    // The source's newer seqno makes b's route feasible.
    t.on_update(b, update({entry(s, 12, 3)}), t0 + 2s);
    CHECK(t.next_hop(s) == b);
    CHECK(find_entry(t.collect_triggered(t0 + 2s), s) == entry(s, 12, 4));
    t.on_update(b, update({entry(s, 12, 3)}), t0 + 3s);
    CHECK(t.collect_requests(t0 + 3s).empty());
    CHECK_FALSE(t.has_pending_output());
  }
  SUBCASE("no answer: asked again after 2, 4, 8, ... holdoffs, at most 12.8 s apart, and when b says more") {
    t.on_update(b, update({entry(s, 10, 3)}), t0);
    t.neighbour_down(a, t0 + 1s);
    using req = std::pair<node_id, route_request>;
    const std::vector<req> ask{{b, {s, 11, route_table::request_hop_limit}}};
    REQUIRE(t.collect_triggered(t0 + 1s).has_value());  // the retraction
    time_point at = t0 + 1050ms;                         // after request_delay
    CHECK(t.collect_requests(at) == ask);
    CHECK(t.max_request_backoff() == 12800ms);  // 64 holdoffs: more than the 10 s interval
    for (const auto wait : {400ms, 800ms, 1600ms, 3200ms, 6400ms, 12800ms, 12800ms}) {
      CHECK(t.next_deadline() <= at + wait);
      CHECK(t.collect_requests(at + wait - 1ms).empty());
      at += wait;
      t.on_summary(b, summary_of({entry(s, 10, 3)}), at);  // b is alive, and says nothing new
      CHECK(t.collect_requests(at) == ask);
    }
    t.on_update(b, update({entry(s, 10, 2)}), at + 500ms);  // b says something new: asked again at once
    CHECK(t.collect_requests(at + 550ms - 1ms).empty());       // (after request_delay)
    CHECK(t.collect_requests(at + 550ms) == ask);
    CHECK(t.collect_requests(at + 950ms - 1ms).empty());  // and the backoff starts over
    CHECK(t.collect_requests(at + 950ms) == ask);
  }
  SUBCASE("b retracts its route within the request delay: nobody is asked") {
    t.on_update(b, update({entry(s, 10, 3)}), t0);
    t.neighbour_down(a, t0 + 1s);
    t.on_update(b, update({entry(s, 10, infinite_metric)}), t0 + 1010ms);
    CHECK(t.collect_requests(t0 + 1050ms).empty());
  }
  SUBCASE("b's route at the same seqno but below the feasibility distance (10, 2) is used at once") {
    t.on_update(b, update({entry(s, 10, 3)}), t0);
    t.neighbour_down(a, t0 + 1s);
    CHECK_FALSE(t.is_reachable(s));
    t.on_update(b, update({entry(s, 10, 1)}), t0 + 2s);
    CHECK(t.next_hop(s) == b);
  }
  SUBCASE("a feasible alternative: switch, no retraction; same metric so nothing to trigger") {
    t.on_update(b, update({entry(s, 10, 1, {{5, 6}})}), t0);
    t.neighbour_down(a, t0 + 1s);
    CHECK(t.next_hop(s) == b);
    CHECK(t.generation() > g);
    CHECK(t.collect_triggered(t0 + 1s) == std::nullopt);
  }
}

TEST_CASE("route_table: with split horizon a route goes to its next hop as a retraction, and a new next hop is news") {
  route_params p = unbatched();
  p.split_horizon = true;
  auto t = make_table({a, b, c}, p);
  t.on_update(a, update({entry(s, 10, 1, {{5, 6}})}), t0);
  t.on_update(b, update({entry(s, 10, 1, {{5, 6}})}), t0);
  auto out = t.collect_output(t0);
  REQUIRE(out.size() == 2);
  CHECK(out[0] == route_message{a, update({entry(s, 10, infinite_metric, {{5, 6}})})});
  CHECK(out[1] == route_message{std::nullopt, update({entry(s, 10, 2, {{5, 6}})}), {a}});
  // Each neighbour's summary is ours with what it heard swapped in.
  const std::vector<route_entry> heard_by_a{entry(me, 2, 0), entry(s, 10, infinite_metric, {{5, 6}})};
  const std::vector<route_entry> heard_by_c{entry(me, 2, 0), entry(s, 10, 2, {{5, 6}})};
  CHECK(t.summary(a, false) == summary_of(heard_by_a));
  CHECK(t.summary(c, false) == summary_of(heard_by_c));
  // a goes: b, at the same metric, is the new next hop, and must now hear the route as a retraction.
  t.neighbour_down(a, t0 + 1s);
  out = t.collect_output(t0 + 1s);
  REQUIRE(out.size() == 2);
  CHECK(out[0] == route_message{b, update({entry(s, 10, infinite_metric, {{5, 6}})})});
  CHECK(out[1] == route_message{std::nullopt, update({entry(s, 10, 2, {{5, 6}})}), {b}});
  CHECK(t.summary(c, false) == summary_of(heard_by_c));
  // A dump to b names the route as b heard it.
  t.on_dump_request(b, t0 + 10s);
  out = t.collect_output(t0 + 10s);
  REQUIRE(out.size() >= 2);
  CHECK(std::get<route_update>(out[0].what) ==
        route_update{true, {entry(me, 2, 0), entry(s, 10, infinite_metric, {{5, 6}})}});
  CHECK(std::get<route_summary>(out[1].what) == summary_of(heard_by_a, true));
}

TEST_CASE("route_table: a route lost before it was ever advertised is not retracted") {
  auto t = make_table({a});
  t.on_update(a, update({entry(s, 10, 1)}), t0);
  CHECK(t.has_pending_output());
  t.neighbour_down(a, t0);  // before collect_triggered: nobody can be routing through us
  CHECK_FALSE(t.is_reachable(s));
  CHECK(t.collect_triggered(t0) == std::nullopt);
  CHECK(find_entry(t.full_dump(t0), s) == entry(s, 10, infinite_metric));  // the full dump still tells
}

TEST_CASE("route_table: a neighbour's retraction takes only the route through that neighbour") {
  auto t = make_table({a, b});
  t.on_update(a, update({entry(s, 10, 1, {{0, 10}})}), t0);
  (void)t.collect_triggered(t0);
  // b lost its route (even at a newer seqno): ours never went through b, and stays.
  t.on_update(b, update({entry(s, 12, infinite_metric)}), t0 + 1s);
  CHECK(t.next_hop(s) == a);
  CHECK(t.collect_triggered(t0 + 1s) == std::nullopt);
  // Our next hop's retraction does take it; what we pass on is the newest news of s (b's withdrawal at 12).
  t.on_update(a, update({entry(s, 10, infinite_metric, {{0, 10}})}), t0 + 2s);
  CHECK_FALSE(t.is_reachable(s));
  CHECK(t.collect_triggered(t0 + 2s) == update({entry(s, 12, infinite_metric)}));
  // A route at the seqno we advertised and below its metric is feasible again.
  t.on_update(a, update({entry(s, 10, 0 + 1, {{0, 10}})}), t0 + 3s);
  CHECK(t.next_hop(s) == a);
  CHECK(view_of(t, s).metric == 2);
}

TEST_CASE("route_table: changes within trigger_gap of the last triggered update go out as one, the own entry at once") {
  const route_params p;  // trigger_gap 5 ms
  REQUIRE(p.trigger_gap == 5ms);
  auto t = make_table({a, b}, p);  // its last triggered update went at t0
  t.on_update(a, update({entry(s, 10, 1)}), t0 + 1ms);
  CHECK(t.collect_triggered(t0 + 1ms) == std::nullopt);
  t.on_update(b, update({entry(s2, 10, 1)}), t0 + 2ms);
  CHECK(t.next_deadline() == t0 + 5ms);
  CHECK(t.collect_triggered(t0 + 4ms) == std::nullopt);
  CHECK(t.collect_triggered(t0 + 5ms) == update({entry(s, 10, 2), entry(s2, 10, 2)}));
  // A change of its own goes at once, and takes what is due along.
  t.on_update(a, update({entry(c, 10, 1)}), t0 + 6ms);
  CHECK(t.collect_triggered(t0 + 6ms) == std::nullopt);
  t.set_local_intervals({{0, 10}}, t0 + 7ms);
  CHECK(t.next_deadline() == t0 + 7ms);
  CHECK(t.collect_triggered(t0 + 7ms) == update({entry(c, 10, 2), entry(me, t.own_seqno(), 0, {{0, 10}})}));
  CHECK_FALSE(t.has_pending_output());
}

TEST_CASE("route_table: interval changes are triggered, seqno-only changes go out with the next summary") {
  auto t = make_table({a});  // full_dump_interval 10 s
  t.on_update(a, update({entry(s, 10, 1, {{0, 10}})}), t0);
  CHECK(t.collect_triggered(t0) == update({entry(s, 10, 2, {{0, 10}})}));

  t.on_update(a, update({entry(s, 12, 1, {{0, 10}})}), t0 + 1s);
  CHECK(t.collect_triggered(t0 + 1s) == std::nullopt);
  CHECK_FALSE(t.has_pending_output());  // background news, as a periodic dump's was
  const time_point summary = t.next_deadline();  // the next periodic summary: it goes out with that
  CHECK(summary >= t0 + 7500ms);
  CHECK(t.summary_due(summary));
  CHECK(t.collect_triggered(summary) == std::nullopt);
  CHECK(t.collect_triggered(summary, true) == update({entry(s, 12, 2, {{0, 10}})}));

  const time_point later = summary + 1s;
  t.on_update(a, update({entry(s, 14, 1, {{0, 20}})}), later);
  CHECK(t.collect_triggered(later) == update({entry(s, 14, 2, {{0, 20}})}));
  t.on_update(a, update({entry(s, 16, 3, {{0, 20}})}), later + 1s);  // metric and seqno: triggered too
  CHECK(t.collect_triggered(later + 1s) == update({entry(s, 16, 4, {{0, 20}})}));
}

TEST_CASE("route_table: own interval changes bump the seqno and are triggered at once") {
  auto t = make_table({a});
  const auto seq = t.own_seqno();
  const auto g = t.generation();
  t.set_local_intervals({{30, 40}, {0, 10}, {10, 20}, {50, 50}}, t0 + 1s);
  CHECK(t.own_seqno() == seq + 2);
  CHECK(t.local_intervals() == std::vector<route_interval>{{0, 20}, {30, 40}});  // normalised
  CHECK(t.generation() > g);
  CHECK(t.collect_triggered(t0 + 1s) == update({entry(me, seq + 2, 0, {{0, 20}, {30, 40}})}));
  CHECK(t.owner_of(15) == me);
  CHECK(t.owner_of(25) == std::nullopt);
}

TEST_CASE("route_table: a newer seqno of ourselves raises ours above it, a retraction of us at ours or an echo does not") {
  auto t = make_table({a});
  const std::uint64_t own = t.own_seqno();
  REQUIRE(own % 2 == 0);
  t.on_update(a, update({entry(me, own, 1)}), t0);  // a's route to us: nothing to do
  CHECK(t.own_seqno() == own);
  CHECK(t.collect_triggered(t0) == std::nullopt);
  t.on_update(a, update({entry(me, own, infinite_metric)}), t0);  // a lost its route to us...
  CHECK(t.own_seqno() == own);
  CHECK(t.collect_triggered(t0) == update({entry(me, own, 0)}));  // ...so we tell it again, no new seqno
  t.on_update(a, update({entry(me, own + 1, infinite_metric)}), t0 + 1s);
  CHECK(t.own_seqno() == own + 2);
  CHECK(t.collect_triggered(t0 + 1s) == update({entry(me, own + 2, 0)}));
  t.on_update(a, update({entry(me, own + 10, 3)}), t0 + 3s);
  CHECK(t.own_seqno() == own + 12);
  CHECK(t.next_hop(me) == std::nullopt);
  CHECK(t.routes().empty());
}

TEST_CASE("route_table: settling delays a worse newer route's advertisement but not its use") {
  auto t = make_table({a, b});
  t.on_update(a, update({entry(s, 10, 1)}), t0);
  REQUIRE(t.collect_triggered(t0).has_value());
  CHECK(t.settling_time(s) == 0ns);

  // Seqno 12 first arrives over a long path; with no history the settling time is 0: advertised at once.
  const time_point t1 = t0 + 1s;
  t.on_update(b, update({entry(s, 12, 4)}), t1);
  CHECK(t.next_hop(s) == b);
  CHECK(t.collect_triggered(t1) == update({entry(s, 12, 5)}));
  // Its best copy comes 100 ms later.
  t.on_update(a, update({entry(s, 12, 1)}), t1 + 100ms);
  CHECK(t.collect_triggered(t1 + 100ms) == update({entry(s, 12, 2)}));

  // Seqno 14 arrives: the 100 ms sample enters the EWMA (weight 1/4): 25 ms, settling 2 x 25 ms.
  const time_point t2 = t0 + 2s;
  t.on_update(b, update({entry(s, 14, 4)}), t2);
  CHECK(t.settling_time(s) == 50ms);
  CHECK(t.next_hop(s) == b);  // used at once
  CHECK(view_of(t, s).metric == 5);
  CHECK(t.collect_triggered(t2) == std::nullopt);  // but not advertised yet
  CHECK(t.next_deadline() == t2 + 50ms);
  CHECK(t.collect_triggered(t2 + 49ms) == std::nullopt);

  SUBCASE("nothing better comes: the worse route is advertised once settled") {
    CHECK(t.collect_triggered(t2 + 50ms) == update({entry(s, 14, 5)}));
  }
  SUBCASE("the better copy comes within the settling time: the fluctuation never goes out") {
    t.on_update(a, update({entry(s, 14, 1)}), t2 + 20ms);
    CHECK(t.next_hop(s) == a);
    CHECK(t.collect_triggered(t2 + 20ms) == std::nullopt);  // metric 2, as last advertised: seqno-only news
    CHECK(t.collect_triggered(t2 + 50ms) == std::nullopt);  // goes out with the next summary
    CHECK(find_entry(t.full_dump(t2 + 1s), s) == entry(s, 14, 2));
  }
  SUBCASE("re-selecting the same worse route does not cut the settling short") {
    t.on_update(b, update({entry(s, 14, 4)}), t2 + 10ms);
    CHECK(t.collect_triggered(t2 + 10ms) == std::nullopt);
    CHECK(t.next_deadline() == t2 + 50ms);
  }
  SUBCASE("unreachability is never delayed") {
    t.neighbour_down(a, t2 + 5ms);  // a's (12, 1) would still be feasible: drop it first
    CHECK(t.collect_triggered(t2 + 5ms) == std::nullopt);
    t.neighbour_down(b, t2 + 10ms);
    CHECK(t.collect_triggered(t2 + 10ms) == update({entry(s, 14, infinite_metric)}));
  }
}

TEST_CASE("route_table: settling time is capped by max_settling_time") {
  route_params p = unbatched();
  p.max_settling_time = 30ms;
  auto t = make_table({a, b}, p);
  t.on_update(b, update({entry(s, 10, 4)}), t0);
  t.on_update(a, update({entry(s, 10, 1)}), t0 + 1s);  // a 1 s gap between first and best
  t.on_update(b, update({entry(s, 12, 4)}), t0 + 2s);
  CHECK(t.settling_time(s) == 30ms);
}

TEST_CASE("route_table: owner_of with several sources, overlaps and unreachable sources") {
  auto t = make_table({a, b, c});
  t.set_local_intervals({{0, 10}}, t0);
  t.on_update(a, update({entry(20, 10, 1, {{10, 20}, {30, 40}})}), t0);
  t.on_update(b, update({entry(30, 10, 1, {{20, 30}})}), t0);
  CHECK(t.owner_of(0) == me);
  CHECK(t.owner_of(9) == me);
  CHECK(t.owner_of(10) == node_id{20});
  CHECK(t.owner_of(19) == node_id{20});
  CHECK(t.owner_of(20) == node_id{30});
  CHECK(t.owner_of(29) == node_id{30});
  CHECK(t.owner_of(30) == node_id{20});
  CHECK(t.owner_of(39) == node_id{20});
  CHECK(t.owner_of(40) == std::nullopt);
  CHECK(t.owner_of(~std::uint64_t{0}) == std::nullopt);

  // Stale overlaps: self first, then the lowest node_id.
  const auto g = t.generation();
  t.on_update(c, update({entry(5, 10, 1, {{15, 25}}), entry(7, 10, 1, {{5, 12}})}), t0);
  CHECK(t.generation() > g);
  CHECK(t.owner_of(5) == me);
  CHECK(t.owner_of(9) == me);
  CHECK(t.owner_of(10) == node_id{7});
  CHECK(t.owner_of(11) == node_id{7});
  CHECK(t.owner_of(12) == node_id{20});
  CHECK(t.owner_of(15) == node_id{5});
  CHECK(t.owner_of(24) == node_id{5});
  CHECK(t.owner_of(25) == node_id{30});

  // Only reachable sources count.
  t.neighbour_down(b, t0 + 1s);
  CHECK(t.owner_of(27) == std::nullopt);
  CHECK(t.owner_of(24) == node_id{5});
  t.neighbour_down(c, t0 + 1s);
  CHECK(t.owner_of(15) == node_id{20});
  CHECK(t.owner_of(24) == std::nullopt);

  // A seqno-only change touches neither routes nor the index.
  const auto g2 = t.generation();
  t.on_update(a, update({entry(20, 12, 1, {{10, 20}, {30, 40}})}), t0 + 2s);
  CHECK(t.generation() == g2);
}

TEST_CASE("route_table: unreachable sources expire, reachable ones do not") {
  route_params p = unbatched();
  p.expiry = 60s;
  p.full_dump_interval = 10s;  // routes held 35 s, so sources are kept at least 45 s
  auto t = make_table({a, b}, p);
  CHECK(t.route_hold_time() == 35s);
  CHECK(t.source_expiry() == 60s);
  const route_update b_dump =
      update({entry(s2, 10, 1), entry(77, 13, infinite_metric)});  // 77: only a retraction
  t.on_update(a, update({entry(s, 10, 1)}), t0);
  t.on_update(b, b_dump, t0);
  (void)t.collect_triggered(t0);
  t.neighbour_down(a, t0 + 1s);
  (void)t.collect_triggered(t0 + 1s);
  for (time_point at : {t0 + 20s, t0 + 40s}) {  // b's summaries keep its routes alive
    t.on_summary(b, summary_of(b_dump.entries), at);
    t.expire(at);
  }
  t.expire(t0 + 59s);
  CHECK(t.routes().size() == 3);
  t.expire(t0 + 60s);  // 77 has been unreachable since t0
  CHECK(t.routes().size() == 2);
  t.expire(t0 + 60s + 999ms);
  CHECK(t.routes().size() == 2);
  t.expire(t0 + 61s);  // s, unreachable since t0 + 1 s
  REQUIRE(t.routes().size() == 1);
  CHECK(t.routes()[0].destination == s2);
  CHECK(t.is_reachable(s2));
  CHECK_FALSE(find_entry(t.full_dump(t0 + 61s), s).has_value());
}

TEST_CASE("route_table: a source forgotten while a neighbour has a route it could use comes back with that neighbour's next dump") {
  route_params p = unbatched();
  p.expiry = 60s;
  p.full_dump_interval = 10s;
  auto t = make_table({a, b}, p);
  const route_update b_says = update({entry(s, 10, 3)});  // not feasible here after a's (10, 1)
  t.on_update(a, update({entry(s, 10, 1)}), t0);
  t.on_update(b, b_says, t0);
  (void)t.collect_triggered(t0);  // advertised: the feasibility distance is (10, 2)
  t.neighbour_down(a, t0 + 1s);
  REQUIRE_FALSE(t.is_reachable(s));
  for (time_point at = t0 + 1s; at <= t0 + 61s; at += 1s) {  // no answer comes; b stays alive, says the same
    if (at.time_since_epoch() % 20s == 0s) t.on_summary(b, summary_of(b_says.entries), at);
    t.expire(at);
    (void)t.collect_triggered(at);
    (void)t.collect_requests(at);
  }
  CHECK(t.unreachable_since(s) == time_point::min());  // forgotten at 61 s, and b's route with it
  t.on_summary(b, summary_of(b_says.entries), t0 + 62s);
  CHECK(t.collect_dump_requests(t0 + 62s) == std::vector<node_id>{b});  // the sums differ by b's route
  t.on_update(b, route_update{true, b_says.entries}, t0 + 63s);           // b's dump
  t.on_summary(b, summary_of(b_says.entries, true), t0 + 63s);
  CHECK(t.next_hop(s) == b);  // no feasibility distance to fail now
  CHECK(t.sync_stats().summaries_differed == 1);
}

TEST_CASE("route_table: a route too long to use keeps nothing alive: no requests for it and no dump for it once forgotten") {
  route_params p = unbatched();
  p.expiry = 60s;
  p.full_dump_interval = 10s;
  auto t = make_table({a}, p);
  const route_update a_says = update({entry(s, 10, infinite_metric - 1)});  // one more hop is infinite
  t.on_update(a, a_says, t0);
  REQUIRE_FALSE(t.is_reachable(s));
  std::size_t asked = 0;
  for (time_point at = t0 + 1s; at < t0 + 200s; at += 1s) {
    if (at.time_since_epoch() % 10s == 0s) t.on_summary(a, summary_of(a_says.entries), at);
    t.expire(at);
    (void)t.collect_triggered(at);
    asked += t.collect_requests(at).size();
    CHECK(t.collect_dump_requests(at).empty());
  }
  CHECK(asked == 0);
  CHECK(t.unreachable_since(s) == time_point::min());  // forgotten, and a's route counted as a ghost
}

TEST_CASE("route_table: sources are kept past the hold time of the routes we advertised for them") {
  route_params p = unbatched();
  p.expiry = 1s;  // too short to be safe: forgetting FD while a neighbour may still hold our finite route
  p.full_dump_interval = 10s;
  auto t = make_table({a}, p);
  CHECK(t.source_expiry() == 45s);
  t.on_update(a, update({entry(s, 10, 1)}), t0);
  (void)t.collect_triggered(t0);
  t.neighbour_down(a, t0);
  t.expire(t0 + 45s - 1ms);
  CHECK(t.routes().size() == 1);
  t.expire(t0 + 45s);
  CHECK(t.routes().empty());
}

TEST_CASE("route_table: the routes of a neighbour that says nothing for the hold time are dropped") {
  route_params p = unbatched();
  p.full_dump_interval = 10s;  // hold time 35 s
  auto t = make_table({a, b}, p);
  t.on_update(a, update({entry(s, 10, 1)}), t0);
  t.on_update(b, update({entry(s, 10, 2)}), t0);
  (void)t.collect_triggered(t0);  // FD(s) = (10, 2): b's route is not feasible
  idle(t, t0, t0 + 20s);
  t.on_summary(b, summary_of({entry(s, 10, 2)}), t0 + 20s);  // b speaks, a falls silent
  idle(t, t0 + 20s, t0 + 35s - 1ms);
  CHECK(t.next_hop(s) == a);
  t.expire(t0 + 35s);
  CHECK_FALSE(t.is_reachable(s));  // like a broken link: retracted at once
  CHECK(t.collect_triggered(t0 + 35s) == update({entry(s, 10, infinite_metric)}));
  using req = std::pair<node_id, route_request>;
  CHECK(t.collect_requests(t0 + 35s + 50ms) == std::vector<req>{{b, {s, 11, route_table::request_hop_limit}}});
  idle(t, t0 + 35s, t0 + 55s);  // b fell silent too: nobody to ask any more
  t.on_update(b, update({entry(s, 10, 2)}), t0 + 56s);
  t.neighbour_down(b, t0 + 57s);
  CHECK(t.collect_requests(t0 + 57s).empty());
}

TEST_CASE("route_table: a summary that matches what a neighbour sent asks for nothing, one that differs asks for a dump") {
  route_params p = unbatched();
  p.full_dump_interval = 10s;  // hold time 35 s, at most one dump request per 5 s
  auto t = make_table({a, b}, p);
  const std::vector<route_entry> sent{entry(s, 10, 1), entry(me, 2, 1)};  // its route to us counts too
  t.on_update(a, update(sent), t0);
  idle(t, t0, t0 + 30s);
  t.on_summary(a, summary_of(sent), t0 + 30s);
  CHECK(t.collect_dump_requests(t0 + 30s).empty());
  idle(t, t0 + 30s, t0 + 60s);
  CHECK(t.next_hop(s) == a);  // held until 65 s
  auto other = summary_of(sent);
  other.entries += 1;  // the same digest, one entry more: differs
  t.on_summary(a, other, t0 + 61s);
  CHECK(t.collect_dump_requests(t0 + 61s) == std::vector<node_id>{a});
  t.on_summary(a, other, t0 + 62s);  // within half an interval of the last request: no second one
  CHECK(t.collect_dump_requests(t0 + 62s).empty());
  t.on_summary(a, other, t0 + 66s);
  CHECK(t.collect_dump_requests(t0 + 66s) == std::vector<node_id>{a});
  CHECK(t.sync_stats().summaries_differed == 3);
  CHECK(t.sync_stats().dump_requests_sent == 2);
  idle(t, t0 + 66s, t0 + 100s);
  CHECK(t.next_hop(s) == a);  // a summary that differs still says a is alive: held until 101 s
  t.expire(t0 + 101s);
  CHECK_FALSE(t.is_reachable(s));
  CHECK(t.sync_stats().holds_expired == 2);  // a, and b, silent since t0
}

TEST_CASE("route_table: the summary that ends a dump drops what the dump did not name, and holds the rest") {
  route_params p = unbatched();
  p.full_dump_interval = 10s;
  auto t = make_table({a, b}, p);
  t.on_update(a, update({entry(s, 10, 1), entry(s2, 10, 1, {{5, 6}}), entry(me, 2, 1)}), t0);
  REQUIRE(t.is_reachable(s2));
  // a forgot s2 and we missed its forget: its dump names the rest.
  const route_update dump{true, {entry(me, 2, 1), entry(s, 10, 1)}};
  t.on_update(a, dump, t0 + 20s);
  CHECK(t.is_reachable(s2));  // not yet: more of the dump may follow
  t.on_summary(a, summary_of(dump.entries, true), t0 + 20s);
  CHECK_FALSE(t.is_reachable(s2));
  CHECK(t.next_hop(s) == a);
  t.expire(t0 + 54s);
  CHECK(t.next_hop(s) == a);  // held from the dump's end
  // A dump whose sums differ from ours (an entry refused here) still holds, and asks for nothing.
  t.on_update(a, dump, t0 + 50s);
  t.on_summary(a, route_summary{12345, 7, true}, t0 + 50s);
  CHECK(t.collect_dump_requests(t0 + 50s).empty());
  t.expire(t0 + 84s);
  CHECK(t.next_hop(s) == a);
}

TEST_CASE("route_table: a neighbour whose link was replaced without a break seen here gets a dump again") {
  auto t = make_table({a, b});
  t.neighbour_up(a, t0 + 5s);  // already up: the other end saw the old link break and dialled again
  const auto out = t.collect_output(t0 + 5s);
  REQUIRE(out.size() >= 2);
  CHECK(out[0].to == a);
  CHECK(std::get<route_update>(out[0].what).full_dump);
  CHECK(std::get<route_summary>(out[1].what).ends_dump);
}

TEST_CASE("route_table: a source this node forgot stays in a neighbour's sums until the neighbour forgets it too") {
  route_params p = unbatched();
  p.expiry = 60s;
  p.full_dump_interval = 10s;
  auto t = make_table({a, b}, p);
  const route_entry s_gone = entry(s, 10, infinite_metric, {{5, 6}});
  t.on_update(b, update({s_gone, entry(s2, 10, 1)}), t0);  // b knows s only as lost
  for (time_point at = t0; at < t0 + 60s; at += 20s) {     // b's summaries meanwhile
    idle(t, at, at + 20s);
    t.on_summary(b, summary_of({s_gone, entry(s2, 10, 1)}), at + 20s);
  }
  idle(t, t0 + 60s, t0 + 61s);  // this node forgets s
  CHECK(t.unreachable_since(s) == time_point::min());  // forgotten here
  t.on_summary(b, summary_of({s_gone, entry(s2, 10, 1)}), t0 + 61s);  // b has not forgotten it yet
  CHECK(t.collect_dump_requests(t0 + 61s).empty());
  t.on_update(b, update({forget_entry(s)}), t0 + 62s);  // now it has
  t.on_summary(b, summary_of({entry(s2, 10, 1)}), t0 + 62s);
  CHECK(t.collect_dump_requests(t0 + 62s).empty());
  CHECK(t.sync_stats().summaries_differed == 0);
}

TEST_CASE("route_table: the end of a dump is acted on at most twice per interval, and what a dump left different asks for nothing") {
  route_params p = unbatched();
  p.full_dump_interval = 10s;
  auto t = make_table({a, b}, p);
  const std::vector<route_entry> all{entry(me, 2, 1), entry(s, 10, 1), entry(s2, 10, 1)};
  t.on_update(a, route_update{true, all}, t0 + 1s);
  t.on_summary(a, summary_of(all, true), t0 + 1s);
  REQUIRE(t.next_hop(s) == a);
  // A hostile neighbour's empty dumps, one after another: the first within half an interval walks nothing.
  t.on_update(a, route_update{true, {}}, t0 + 2s);
  t.on_summary(a, summary_of({}, true), t0 + 2s);
  CHECK(t.next_hop(s) == a);
  // A dump with an entry this node refuses (metric 0 for another source) leaves the sums different.
  const std::vector<route_entry> with_lie{entry(me, 2, 1), entry(s, 10, 1), entry(s2, 10, 1), entry(77, 4, 0)};
  t.on_update(a, route_update{true, with_lie}, t0 + 7s);
  t.on_summary(a, summary_of(with_lie, true), t0 + 7s);
  t.on_summary(a, summary_of(with_lie), t0 + 17s);  // the same difference: no request
  CHECK(t.collect_dump_requests(t0 + 17s).empty());
  t.on_summary(a, summary_of(with_lie), t0 + 90s);  // eight intervals on: asked again
  CHECK(t.collect_dump_requests(t0 + 90s) == std::vector<node_id>{a});
}

TEST_CASE("route_table: dump requests are answered by one dump per interval, later ones wait") {
  route_params p = unbatched();
  p.full_dump_interval = 10s;
  auto t = make_table({a, b}, p);  // a and b had their dumps at t0
  t.on_dump_request(a, t0 + 1s);
  CHECK(t.collect_dumps(t0 + 1s).empty());
  CHECK(t.next_deadline() <= t0 + 10s);
  CHECK(t.collect_dumps(t0 + 10s - 1ms).empty());
  CHECK(t.collect_dumps(t0 + 10s) == std::vector<node_id>{a});
  t.on_dump_request(a, t0 + 20s);
  t.on_dump_request(a, t0 + 20s);  // a second one at once: the same dump
  t.on_dump_request(c, t0 + 20s);  // not a neighbour: nothing
  const auto out = t.collect_output(t0 + 20s);
  REQUIRE(out.size() >= 2);
  CHECK(out[0].to == a);
  CHECK(std::get<route_update>(out[0].what).full_dump);
  CHECK(out[1].to == a);
  CHECK(std::get<route_summary>(out[1].what).ends_dump);
  CHECK(t.collect_dumps(t0 + 30s).empty());
}

TEST_CASE("route_table: a forgotten source goes out as a forget entry, and a receiver drops what its sender said") {
  route_params p = unbatched();
  p.expiry = 60s;
  p.full_dump_interval = 10s;
  auto t = make_table({a, b}, p);
  t.on_update(a, update({entry(s, 10, 1)}), t0);
  (void)t.collect_triggered(t0);
  const auto with_s = t.summary(b, false);
  t.neighbour_down(a, t0 + 1s);
  REQUIRE(t.collect_triggered(t0 + 1s) == update({entry(s, 10, infinite_metric)}));
  t.expire(t0 + 61s);
  CHECK(t.collect_triggered(t0 + 61s) == update({forget_entry(s)}));
  const auto without_s = t.summary(b, false);
  CHECK(without_s.entries == with_s.entries - 1);
  CHECK(without_s.digest == route_table::entry_digest(entry(me, 2, 0)));
  // The receiving side: b's forget takes b's route away, and b's sums still match ours.
  auto r = make_table({b}, p);
  r.on_update(b, update({entry(s, 10, 1), entry(s2, 10, 1)}), t0);
  REQUIRE(r.next_hop(s) == b);
  r.on_update(b, update({forget_entry(s), forget_entry(77)}), t0 + 1s);  // 77: never heard of, nothing
  CHECK_FALSE(r.is_reachable(s));
  r.on_summary(b, summary_of({entry(s2, 10, 1)}), t0 + 2s);
  CHECK(r.collect_dump_requests(t0 + 2s).empty());
}

TEST_CASE("route_table: on_request bumps, satisfies or forwards") {
  auto t = make_table({a, b, c});
  t.on_update(a, update({entry(s, 10, 1)}), t0);
  (void)t.collect_triggered(t0);
  using kind = route_table::request_action::kind_t;

  SUBCASE("for ourselves: seqno raised to the next even value, never further") {
    const auto own = t.own_seqno();
    auto act = t.on_request(b, {me, own + 1, 64}, t0);
    CHECK(act.kind == kind::bumped_own);
    CHECK(t.own_seqno() == own + 2);
    CHECK(t.collect_triggered(t0) == update({entry(me, own + 2, 0)}));
    act = t.on_request(b, {me, own + 2, 64}, t0 + 200ms);  // already satisfied: re-advertised, not bumped
    CHECK(t.own_seqno() == own + 2);
    CHECK(t.collect_triggered(t0 + 200ms) == update({entry(me, own + 2, 0)}));
    // More than the next seqno is no honest request (a walk of the seqno, a window at a time): ignored.
    act = t.on_request(b, {me, own + 6, 64}, t0 + 400ms);
    CHECK(act.kind == kind::none);
    CHECK(t.own_seqno() == own + 2);
    CHECK(t.input_stats().seqno_out_of_window == 1);
    CHECK(t.on_request(b, {me, own + 4, 64}, t0 + 600ms).kind == kind::bumped_own);
    CHECK(t.own_seqno() == own + 4);
  }
  SUBCASE("a hop limit above ours is forwarded as ours, less one") {
    const auto act = t.on_request(b, {s, 12, 0xFFFF}, t0);
    CHECK(act.kind == kind::forward);
    CHECK(act.forwarded.hop_limit == route_table::request_hop_limit - 1);
  }
  SUBCASE("we hold the seqno asked for: re-advertise, do not forward") {
    auto act = t.on_request(b, {s, 10, 64}, t0);
    CHECK(act.kind == kind::none);
    t.on_update(a, update({entry(s, 10, 1)}), t0);  // unchanged: must not cancel the requested re-advertisement
    CHECK(t.collect_triggered(t0) == update({entry(s, 10, 2)}));
  }
  SUBCASE("newer seqno wanted: forward to the next hop with one hop less, once per holdoff, even if newer") {
    auto act = t.on_request(b, {s, 12, 64}, t0);
    CHECK(act.kind == kind::forward);
    CHECK(act.forward_to == a);
    CHECK(act.forwarded == route_request{s, 12, 63});
    CHECK(t.on_request(c, {s, 12, 64}, t0 + 10ms).kind == kind::none);      // duplicate
    CHECK(t.on_request(c, {s, 14, 64}, t0 + 10ms).kind == kind::none);      // a newer wish: rate-limited
    CHECK(t.input_stats().requests_limited == 2);
    CHECK(t.on_request(c, {s, 14, 64}, t0 + 200ms).kind == kind::forward);  // after the holdoff
  }
  SUBCASE("a request for no more than one this node forwarded, unanswered and recent, is redundant") {
    REQUIRE(t.on_request(b, {s, 11, 64}, t0).kind == kind::forward);  // one above the newest seen, as honest ones ask
    CHECK(t.on_request(c, {s, 11, 64}, t0 + 300ms).kind == kind::none);  // past the holdoff: its answer is due
    CHECK(t.on_request(c, {s, 11, 64}, t0 + 6300ms).kind == kind::none);
    CHECK(t.input_stats().requests_limited == 2);
    CHECK(t.on_request(c, {s, 11, 64}, t0 + 6400ms).kind == kind::forward);  // the window (answers come at
                                                                              // once here: 32 holdoffs) ended
  }
  SUBCASE("answers that come late widen the window, to 64 holdoffs at most, and the asker's resends with it") {
    CHECK(t.request_window() == 6400ms);
    CHECK(t.max_request_backoff() == 12800ms);
    std::uint64_t seqno = 10;
    time_point at = t0;
    for (int k = 0; k < 30; ++k, at += 20s) {  // each answered 10 s after it was forwarded, once
      REQUIRE(t.on_request(b, {s, seqno + 1, 64}, at).kind == kind::forward);
      seqno += 2;
      t.on_update(a, update({entry(s, seqno, 1)}), at + 10s);
    }
    CHECK(t.answer_delay() > 9s);
    CHECK(t.request_window() == 12800ms);
    CHECK(t.max_request_backoff() == 25600ms);
    REQUIRE(t.on_request(b, {s, seqno + 1, 64}, at).kind == kind::forward);
    CHECK(t.on_request(c, {s, seqno + 1, 64}, at + 12700ms).kind == kind::none);  // in the wider window
    const auto delay = t.answer_delay();
    CHECK(t.on_request(c, {s, seqno + 1, 64}, at + 12800ms).kind == kind::forward);
    t.on_update(a, update({entry(s, seqno + 2, 1)}), at + 13s);  // answers one of two copies: no sample
    CHECK(t.answer_delay() == delay);
  }
  SUBCASE("an answer later than two resend gaps is no sample, and a sample counts 12.8 s at most") {
    REQUIRE(t.on_request(b, {s, 11, 64}, t0).kind == kind::forward);  // lost beyond a: never answered
    t.on_update(a, update({entry(s, 12, 1)}), t0 + 1h);                // the source's seqno, as news
    CHECK(t.answer_delay() == 0s);
    REQUIRE(t.on_request(b, {s, 13, 64}, t0 + 1h + 1s).kind == kind::forward);
    t.on_update(a, update({entry(s, 14, 1)}), t0 + 1h + 1s + 20s);  // within two gaps (25.6 s)
    CHECK(t.answer_delay() == 1600ms);                               // 12.8 s / 8
  }
  SUBCASE("answers that come at once narrow it again, to 32 holdoffs at least") {
    std::uint64_t seqno = 10;
    for (int k = 0; k < 40; ++k) {
      const time_point at = t0 + k * 20s;
      REQUIRE(t.on_request(b, {s, seqno + 1, 64}, at).kind == kind::forward);
      seqno += 2;
      t.on_update(a, update({entry(s, seqno, 1)}), at + (k < 15 ? 10s : 10ms));
    }
    CHECK(t.answer_delay() < 1s);
    CHECK(t.request_window() == 6400ms);
  }
  SUBCASE("a request whose hop limit runs out sooner makes no other redundant") {
    REQUIRE(t.on_request(b, {s, 11, 2}, t0).kind == kind::forward);  // goes one hop further, no more
    CHECK(t.on_request(c, {s, 11, 64}, t0 + 300ms).kind == kind::forward);
    CHECK(t.on_request(b, {s, 11, 50}, t0 + 600ms).kind == kind::none);  // the last one goes further
  }
  SUBCASE("a request forwarded over a link that went down makes no other redundant") {
    t.on_update(c, update({entry(s, 10, 3)}), t0);
    REQUIRE(t.on_request(b, {s, 11, 64}, t0).kind == kind::forward);  // to a, the next hop
    t.neighbour_down(a, t0 + 100ms);                                  // c's route is not feasible: no next hop
    const auto act = t.on_request(b, {s, 11, 64}, t0 + 300ms);
    CHECK(act.kind == kind::forward);
    CHECK(act.forward_to == c);
  }
  SUBCASE("a request forwarded over a link that was replaced makes no other redundant") {
    REQUIRE(t.on_request(b, {s, 11, 64}, t0).kind == kind::forward);  // to a
    t.neighbour_up(a, t0 + 100ms);                                    // a's link replaced: queued frames lost
    const auto act = t.on_request(c, {s, 11, 64}, t0 + 300ms);
    CHECK(act.kind == kind::forward);
    CHECK(act.forward_to == a);
  }
  SUBCASE("a request the source cannot grant holds back no answer to a real one") {
    REQUIRE(t.on_request(b, {s, 1010, 64}, t0).kind == kind::forward);  // never answered
    REQUIRE(t.on_request(c, {s, 11, 64}, t0 + 300ms).kind == kind::forward);
    t.on_update(a, update({entry(s, 12, 1)}), t0 + 400ms);
    CHECK(t.collect_triggered(t0 + 400ms) == update({entry(s, 12, 2)}));  // at once, not with the summary
  }
  SUBCASE("a request for more than the source could grant is forwarded, but makes no other redundant") {
    REQUIRE(t.on_request(b, {s, 20, 64}, t0).kind == kind::forward);  // newest seen is 10: nobody honest asks 20
    CHECK(t.on_request(c, {s, 11, 64}, t0 + 300ms).kind == kind::forward);
  }
  SUBCASE("the answer to a forwarded request goes on at once, though only the seqno changed") {
    REQUIRE(t.on_request(b, {s, 12, 64}, t0).kind == kind::forward);
    t.on_update(a, update({entry(s, 11, 1)}), t0 + 5ms);  // newer, but not what was asked for
    CHECK(t.collect_triggered(t0 + 5ms) == std::nullopt);
    t.on_update(a, update({entry(s, 12, 1)}), t0 + 10ms);
    CHECK(t.collect_triggered(t0 + 10ms) == update({entry(s, 12, 2)}));
    t.on_update(a, update({entry(s, 14, 1)}), t0 + 20ms);  // answered: later seqnos wait for the dump again
    CHECK(t.collect_triggered(t0 + 20ms) == std::nullopt);
  }
  SUBCASE("without a request, a newer seqno at the same metric waits for the full dump") {
    t.on_update(a, update({entry(s, 12, 1)}), t0 + 10ms);
    CHECK(t.collect_triggered(t0 + 10ms) == std::nullopt);
  }
  SUBCASE("not forwarded back to the asker, past the hop limit, or for unknown sources") {
    CHECK(t.on_request(a, {s, 12, 64}, t0).kind == kind::none);
    CHECK(t.on_request(b, {s, 12, 1}, t0).kind == kind::none);
    CHECK(t.on_request(b, {s, 12, 0}, t0).kind == kind::none);
    CHECK(t.on_request(b, {12345, 12, 64}, t0).kind == kind::none);
    CHECK(t.on_request(99, {s, 12, 64}, t0).kind == kind::none);  // not a neighbour
    CHECK(t.collect_triggered(t0) == std::nullopt);
  }
  SUBCASE("unreachable here: forwarded to the neighbour with the best finite route") {
    t.on_update(c, update({entry(s, 10, 3)}), t0);  // unfeasible
    t.on_update(b, update({entry(s, 10, 5)}), t0);  // unfeasible, longer
    t.neighbour_down(a, t0 + 1s);
    REQUIRE_FALSE(t.is_reachable(s));
    auto act = t.on_request(b, {s, 12, 64}, t0 + 1s);
    CHECK(act.kind == kind::forward);
    CHECK(act.forward_to == c);
  }
}

TEST_CASE("route_table: a seqno 2^64-1 for a known source is ignored and the real route stays") {
  auto t = make_table({a, b});
  t.on_update(a, update({entry(s, 10, 1, {{0, 10}})}), t0);
  t.on_update(b, update({entry(s, ~std::uint64_t{0}, 1, {{0, 100}})}), t0);
  CHECK(t.next_hop(s) == a);
  CHECK(view_of(t, s).seqno == 10);
  CHECK(t.owner_of(50) == std::nullopt);
  CHECK(t.input_stats().seqno_absurd == 1);
  t.neighbour_down(a, t0 + 1s);  // the only real route breaks: nothing of b's claim was kept to fall back on
  CHECK_FALSE(t.is_reachable(s));
  CHECK(view_of(t, s).seqno == 10);
}

TEST_CASE("route_table: a seqno beyond the window of the newest seen is ignored, one within it is followed") {
  route_params p = unbatched();
  p.seqno_window = 1000;
  auto t = make_table({a, b}, p);
  t.on_update(a, update({entry(s, 10, 1)}), t0);
  t.on_update(b, update({entry(s, 1012, 1)}), t0);  // 1002 ahead
  CHECK(t.next_hop(s) == a);
  CHECK(t.input_stats().seqno_out_of_window == 1);
  t.on_update(b, update({entry(s, 1010, 1)}), t0);  // exactly the window
  CHECK(t.next_hop(s) == b);
  CHECK(view_of(t, s).seqno == 1010);
  // An unknown source has nothing to compare with: any plausible seqno is taken, an absurd one is not.
  t.on_update(a, update({entry(s2, max_plausible_seqno - 1, 1)}), t0);
  CHECK(t.is_reachable(s2));
  t.on_update(a, update({entry(12345, max_plausible_seqno + 1, 1)}), t0);
  CHECK_FALSE(t.is_reachable(12345));
  CHECK(t.input_stats().seqno_absurd == 1);
}

TEST_CASE("route_table: its own name advertised by another is no route, and the own seqno rises once per holdoff") {
  auto t = make_table({a, b});
  const auto own = t.own_seqno();
  for (std::uint64_t i = 1; i <= 100; ++i) t.on_update(b, update({entry(me, own + 2 * i, 1)}), t0);
  CHECK(t.next_hop(me) == std::nullopt);
  CHECK(t.routes().empty());
  // Past the first claim at once; the second (own + 4) is then an echo; the other 98 are held off.
  CHECK(t.own_seqno() == own + 4);
  CHECK(t.collect_triggered(t0) == update({entry(me, own + 4, 0)}));
  CHECK(t.input_stats().own_name_claims == 99);
  CHECK(t.input_stats().own_raises_deferred == 98);
  CHECK(t.next_deadline() == t0 + 200ms);
  t.expire(t0 + 199ms);
  CHECK(t.own_seqno() == own + 4);
  t.expire(t0 + 200ms);  // one raise past the highest claim
  CHECK(t.own_seqno() == own + 202);
  CHECK(t.collect_triggered(t0 + 200ms) == update({entry(me, own + 202, 0)}));
  // An absurd claim is not followed: the own seqno must stay where the neighbours still accept it.
  t.on_update(b, update({entry(me, ~std::uint64_t{0}, 0)}), t0 + 1s);
  t.expire(t0 + 2s);
  CHECK(t.own_seqno() == own + 202);
  CHECK(t.input_stats().seqno_absurd == 1);
}

// One plausible claim near the cap, followed, would put the node's own seqno beyond every neighbour's window:
// they would ignore its updates until they forget it, and then nobody could ever outbid a claim at the cap.
TEST_CASE("route_table: a claim on its own name beyond the window of its own seqno is not followed") {
  auto t = make_table({a, b});
  const auto own = t.own_seqno();
  t.on_update(b, update({entry(me, max_plausible_seqno - 2, 1)}), t0);
  t.expire(t0 + 1s);
  CHECK(t.own_seqno() == own);
  CHECK(t.input_stats().seqno_out_of_window == 1);
  CHECK(t.input_stats().own_name_claims == 0);
  // Within the window it is outbid, in steps of at most half the window: neighbours that never heard the claim
  // know only the old seqno, and must still take each step.
  const auto window = route_params{}.seqno_window;
  t.on_update(b, update({entry(me, own + window, 1)}), t0 + 2s);
  CHECK(t.own_seqno() == own + window / 2);
  CHECK(t.next_deadline() <= t0 + 2s + 200ms);
  t.expire(t0 + 2s + 200ms);
  CHECK(t.own_seqno() == own + window);
  t.expire(t0 + 2s + 400ms);
  CHECK(t.own_seqno() == own + window + 2);  // past the claim
  CHECK(t.input_stats().own_name_claims == 1);
}

TEST_CASE("route_table: another node's claim on an interval this node assumes never moves its owner away") {
  auto t = make_table({a});
  t.set_local_intervals({{100, 200}}, t0);
  t.on_update(a, update({entry(a, 10, 0, {{0, 1000}})}), t0);  // a has the lowest id of all
  CHECK(t.owner_of(150) == me);
  CHECK(t.owner_of(50) == a);
  CHECK(t.owner_of(250) == a);
}

TEST_CASE("route_table: a metric of 0 for a source other than the sender is ignored") {
  auto t = make_table({a});
  t.on_update(a, update({entry(s, 10, 0)}), t0);
  CHECK_FALSE(t.is_reachable(s));
  CHECK(t.input_stats().metric_absurd == 1);
  t.on_update(a, update({entry(a, 10, 0)}), t0);
  CHECK(t.is_reachable(a));
}

TEST_CASE("route_table: new sources past max_sources and intervals past max_held_intervals are ignored") {
  route_params p = unbatched();
  p.max_sources = 3;
  p.max_held_intervals = 4;
  auto t = make_table({a, b}, p);
  t.on_update(a, update({entry(10, 10, 1, {{0, 1}, {2, 3}}), entry(11, 10, 1), entry(12, 10, 1),
                         entry(13, 10, 1)}),
              t0);
  CHECK(t.routes().size() == 3);
  CHECK_FALSE(t.is_reachable(13));
  CHECK(t.input_stats().sources_over_limit == 1);
  t.on_update(b, update({entry(10, 10, 1, {{0, 1}, {2, 3}, {4, 5}})}), t0);  // 2 + 3 > 4
  CHECK(t.input_stats().intervals_over_limit == 1);
  t.on_update(a, update({entry(10, 12, 1, {{0, 1}, {2, 3}, {4, 5}, {6, 7}})}), t0);  // replaces a's 2: fits
  CHECK(view_of(t, 10).intervals.size() == 4);
  CHECK(t.input_stats().intervals_over_limit == 1);
  t.neighbour_down(a, t0 + 1s);  // a's routes are gone, and so is what they held
  t.on_update(b, update({entry(10, 14, 1, {{0, 1}, {2, 3}, {4, 5}})}), t0 + 1s);
  CHECK(view_of(t, 10).intervals.size() == 3);
}

TEST_CASE("route_table: seqno requests are acted on once per holdoff per source and at a bounded total rate") {
  route_params p = unbatched();
  p.requests_per_second = 10;
  p.request_burst = 5;
  auto t = make_table({a, b}, p);
  using kind = route_table::request_action::kind_t;
  const auto own = t.own_seqno();
  int bumped = 0;
  for (int i = 1; i <= 100; ++i) {
    bumped += t.on_request(b, {me, own + 1, 64}, t0).kind == kind::bumped_own;
  }
  CHECK(bumped == 1);
  CHECK(t.own_seqno() == own + 2);
  CHECK(t.input_stats().requests_limited == 99);
  // A seqno far beyond the own one is not granted: one request must not spend the seqno space.
  CHECK(t.on_request(b, {me, own + (1u << 20), 64}, t0 + 1s).kind == kind::none);
  CHECK(t.own_seqno() == own + 2);
  CHECK(t.input_stats().seqno_out_of_window == 1);

  // Many sources at once: the burst, then the rate.
  for (node_id src = 100; src < 120; ++src) t.on_update(a, update({entry(src, 10, 1)}), t0);
  int forwarded = 0;
  for (node_id src = 100; src < 120; ++src) {
    forwarded += t.on_request(b, {src, 12, 64}, t0 + 2s).kind == kind::forward;
  }
  CHECK(forwarded == 5);  // the burst (refilled since the own request)...
  forwarded = 0;
  for (node_id src = 100; src < 120; ++src) {
    forwarded += t.on_request(b, {src, 12, 64}, t0 + 2s + 300ms).kind == kind::forward;
  }
  CHECK(forwarded == 3);  // ...and 300 ms at 10 a second
}

TEST_CASE("route_table: ignores updates from itself, from non-neighbours and routes through itself") {
  auto t = make_table({a});
  const auto g = t.generation();
  t.on_update(me, update({entry(s, 10, 1)}), t0);
  t.on_update(b, update({entry(s, 10, 1)}), t0);  // b is not up
  CHECK(t.routes().empty());
  CHECK(t.generation() == g);
  t.on_update(a, update({entry(s, 10, 1)}), t0);
  t.neighbour_down(a, t0);
  t.on_update(a, update({entry(s, 12, 1)}), t0);  // a late frame from a dead link
  CHECK_FALSE(t.is_reachable(s));
  t.neighbour_up(me, t0);
  CHECK(t.neighbours().empty());
}

TEST_CASE("route_table: full dumps carry everything and keep the own seqno, summaries restart the period, jittered") {
  route_params p = unbatched();
  p.full_dump_interval = 10s;
  auto t = make_table({a, b}, p);
  // The first period: 3/4 to 5/4 of the interval.
  (void)t.collect_output(t0);
  const time_point first = t.next_deadline();
  CHECK(first >= t0 + 7500ms);
  CHECK(first < t0 + 12500ms);
  CHECK_FALSE(t.summary_due(first - 1ms));
  CHECK(t.summary_due(first));

  t.set_local_intervals({{0, 5}}, t0);
  t.on_update(a, update({entry(s, 10, 1, {{5, 6}})}), t0);
  t.on_update(b, update({entry(s2, 10, 1)}), t0);
  t.neighbour_down(b, t0 + 1s);  // s2 unreachable, still at seqno 10
  CHECK(t.has_pending_output());
  const auto own = t.own_seqno();
  const route_update dump = t.full_dump(t0 + 1s);
  CHECK(t.own_seqno() == own);  // no bump: nothing changed (see full_dump)
  CHECK(dump == route_update{true,
                             {entry(me, own, 0, {{0, 5}}), entry(s, 10, 2, {{5, 6}}),
                              entry(s2, 10, infinite_metric)}});
  // The dump went to one neighbour: what it said that the others had not heard goes to everyone.
  CHECK(t.collect_triggered(t0 + 1s) ==
        update({entry(s, 10, 2, {{5, 6}}), entry(s2, 10, infinite_metric), entry(me, own, 0, {{0, 5}})}));
  CHECK_FALSE(t.summary_due(t0 + 1s));
  t.periodic_summary(first);
  const auto sum = t.summary(c, false);
  CHECK(sum.entries == 3);
  CHECK_FALSE(sum.ends_dump);
  const time_point second = t.next_deadline();
  CHECK(second >= first + 7500ms);
  CHECK(second < first + 12500ms);

  t.neighbour_up(c, first + 2s);  // a new neighbour gets everything at once, without a new seqno
  CHECK(t.own_seqno() == own);
  CHECK(t.next_deadline() == first + 2s);
  const auto out = t.collect_output(first + 2s);
  REQUIRE(out.size() >= 2);
  CHECK(out[0].to == c);
  CHECK(std::get<route_update>(out[0].what) == dump);
  CHECK(out[1] == route_message{c, route_summary{sum.digest, 3, true}});
}

TEST_CASE("route_table: summary periods are spread over 3/4 to 5/4 of the interval, differently per node") {
  route_params p = unbatched();
  p.full_dump_interval = 1s;
  std::set<std::int64_t> firsts;
  std::chrono::nanoseconds lo = 10s, hi = 0s, sum = 0s;
  constexpr int nodes = 200;
  for (node_id n = 1; n <= nodes; ++n) {
    route_table t(n, p, t0);
    const auto d = t.next_deadline() - t0;
    firsts.insert(d.count());
    time_point now = t0;
    for (int i = 0; i < 20; ++i) {  // and every later period of one node
      now = t.next_deadline();
      t.periodic_summary(now);
      const auto period = t.next_deadline() - now;
      lo = std::min<std::chrono::nanoseconds>(lo, period);
      hi = std::max<std::chrono::nanoseconds>(hi, period);
      sum += period;
    }
  }
  CHECK(firsts.size() == nodes);  // no two nodes start in step
  CHECK(lo >= 750ms);
  CHECK(hi < 1250ms);
  CHECK(hi - lo > 400ms);  // spread over most of the range
  const auto mean = sum / (nodes * 20);
  CHECK(mean > 950ms);  // on average one interval: no more routing traffic than without jitter
  CHECK(mean < 1050ms);
}

TEST_CASE("route_table: a change undone before it went out is not sent, unless a full dump told someone") {
  auto t = make_table({a, b});
  t.on_update(a, update({entry(s, 10, 1)}), t0);
  REQUIRE(t.collect_triggered(t0) == update({entry(s, 10, 2)}));
  t.on_update(a, update({entry(s, 12, 3)}), t0 + 1s);  // metric 4: pending
  CHECK(t.has_pending_output());
  SUBCASE("undone: nothing to send") {
    t.on_update(a, update({entry(s, 12, 1)}), t0 + 1s);  // metric 2 again, as advertised
    CHECK(t.collect_triggered(t0 + 1s) == std::nullopt);
  }
  SUBCASE("a full dump (to a new neighbour, say) went out in between: the others must hear the final state") {
    t.neighbour_up(c, t0 + 1s);
    CHECK(find_entry(t.full_dump(t0 + 1s), s) == entry(s, 12, 4));
    t.on_update(a, update({entry(s, 12, 1)}), t0 + 1s);
    CHECK(find_entry(t.collect_triggered(t0 + 1s), s) == entry(s, 12, 2));
  }
  SUBCASE("...even when the state returns to exactly what that dump said") {
    t.neighbour_up(c, t0 + 1s);
    CHECK(find_entry(t.full_dump(t0 + 1s), s) == entry(s, 12, 4));  // c hears 4, a and b still have 2
    t.on_update(a, update({entry(s, 12, 2)}), t0 + 1s);             // 3
    t.on_update(a, update({entry(s, 12, 3)}), t0 + 1s);             // 4 again
    CHECK(find_entry(t.collect_triggered(t0 + 1s), s) == entry(s, 12, 4));
  }
}

TEST_CASE("route_table: generation moves with next hops and reachability only") {
  auto t = make_table({a, b});
  auto g = t.generation();
  t.on_update(a, update({entry(s, 10, 2)}), t0);
  CHECK(t.generation() == ++g);
  t.on_update(a, update({entry(s, 12, 2)}), t0);  // seqno only
  CHECK(t.generation() == g);
  t.on_update(b, update({entry(s, 12, 1)}), t0);  // next hop moves
  CHECK(t.generation() == ++g);
  t.on_update(b, update({entry(s, 12, infinite_metric)}), t0);  // back to a (same seqno, still feasible)
  CHECK(t.next_hop(s) == a);
  CHECK(t.generation() == ++g);
}

// ---------------------------------------------------------------------------------------------------------
// Whole networks. Every test runs the harness's loop watch after every event that moved a next hop.

namespace {

using namespace phoenix::overlay::sim;

void converge(route_sim& sim) {
  CHECK(sim.run_until_quiet(20s));
  REQUIRE_MESSAGE(sim.first_violation().empty(), sim.first_violation());
  REQUIRE_MESSAGE(sim.convergence_violation().empty(), sim.convergence_violation());
}

}  // namespace

TEST_CASE("route_table: sim: the loop watch does catch a forged loop") {
  route_sim sim(3, {});
  sim.link(0, 1);
  converge(sim);
  const node_id far = route_sim::id(2);  // isolated: nobody has a route
  // Lies no correct table would tell: each claims a route to `far` the other accepts.
  sim.table(0).on_update(route_sim::id(1), update({entry(far, 100, 1)}), sim.now());
  sim.table(1).on_update(route_sim::id(0), update({entry(far, 100, 1)}), sim.now());
  CHECK(sim.loop_violation().find("loop") != std::string::npos);
  CHECK_FALSE(sim.convergence_violation().empty());
}

TEST_CASE("route_table: sim: converges on lines, rings, stars and random graphs") {
  struct shape {
    const char* name;
    std::size_t n;
    edge_list edges;
  };
  for (const auto& sh :
       {shape{"line 5", 5, line_edges(5)}, shape{"line 20", 20, line_edges(20)},
        shape{"ring 5", 5, ring_edges(5)}, shape{"ring 20", 20, ring_edges(20)},
        shape{"star 20", 20, star_edges(20)}, shape{"random 50", 50, random_edges(50, 4, 7)}}) {
    CAPTURE(sh.name);
    route_sim sim(sh.n, {});
    wire(sim, sh.edges);
    converge(sim);
    CHECK(sim.deliveries() > 0);
  }
}

TEST_CASE("route_table: sim: a ring re-converges around a cut, then heals") {
  route_sim sim(20, {});
  wire(sim, ring_edges(20));
  converge(sim);
  sim.cut(0, 1);
  converge(sim);  // every pair still reachable, the long way round
  CHECK(sim.table(0).next_hop(route_sim::id(1)) == route_sim::id(19));
  sim.link(0, 1);
  converge(sim);
  CHECK(sim.table(0).next_hop(route_sim::id(1)) == route_sim::id(1));
}

TEST_CASE("route_table: sim: a cut in a ring of 20 takes no route that did not go through it, and the rest come back the other way within a round trip") {
  route_sim sim(20, {});  // full dumps every 10 s: what follows must not wait for one
  wire(sim, ring_edges(20));
  converge(sim);
  const std::size_t n = sim.size(), cut_a = 0, cut_b = 1;
  std::vector<std::vector<bool>> keep(n, std::vector<bool>(n, false));
  std::size_t kept = 0, through = 0;
  for (std::size_t x = 0; x < n; ++x) {
    for (std::size_t d = 0; d < n; ++d) {
      if (x == d) continue;
      const auto walk = sim.route_walk(x, d);
      REQUIRE(walk.size() >= 2);
      bool uses_cut = false;
      for (std::size_t i = 0; i + 1 < walk.size(); ++i) {
        uses_cut |= (walk[i] == cut_a && walk[i + 1] == cut_b) || (walk[i] == cut_b && walk[i + 1] == cut_a);
      }
      keep[x][d] = !uses_cut;
      ++(uses_cut ? through : kept);
    }
  }
  REQUIRE(through > 0);
  sim.must_keep_routes(keep);
  const time_point cut_at = sim.now();
  sim.cut(cut_a, cut_b);
  REQUIRE(sim.run_until_quiet(2s));  // seqno requests and their answers, no full dump
  REQUIRE_MESSAGE(sim.first_violation().empty(), sim.first_violation());
  REQUIRE_MESSAGE(sim.convergence_violation().empty(), sim.convergence_violation());
  MESSAGE(kept << " routes kept through the cut, " << through << " rerouted; quiet after "
                << std::chrono::duration_cast<std::chrono::milliseconds>(sim.now() - cut_at).count() << " ms, "
                << sim.stats().requests << " seqno requests");
  CHECK(sim.table(cut_a).next_hop(route_sim::id(cut_b)) == route_sim::id(n - 1));
}

TEST_CASE("route_table: sim: a cut in a ring of 200 is repaired by seqno requests before the next full dump") {
  // Full dumps every 10 s. Loop freedom through a cut is watched after every event in the ring of 20 above; here
  // the watch took 1 s of the run's 2.6 (13 times as long under ASan), and the end state is checked whole.
  route_sim sim(200, {.watch = false});
  wire(sim, ring_edges(200));
  REQUIRE(sim.run_until_quiet(60s));
  const time_point at = sim.now();
  const auto asked = sim.stats().requests;
  sim.cut(0, 199);
  // Every node on one side loses its route to half of the other side at once, and asks: the requests that reach
  // the sources must not be crowded out on the way by the rate limit.
  REQUIRE(sim.run_until_quiet(5s));
  REQUIRE_MESSAGE(sim.convergence_violation().empty(), sim.convergence_violation());
  MESSAGE("quiet after " << std::chrono::duration_cast<std::chrono::milliseconds>(sim.now() - at).count()
                         << " ms, " << sim.stats().requests - asked << " seqno requests sent");
}

TEST_CASE("route_table: sim: behind a cut on links slower than request_delay, with split horizon only nodes next to a real route ask, and requests are not forwarded twice") {
  // Retractions come 100-150 ms a hop, after the 50 ms request timers. Without split horizon each node behind
  // the cut asked its neighbour, whose route was as stale as its own (2,789 requests); with it, that neighbour
  // advertised its route back as a retraction, and there is nobody to ask but beyond the far end.
  sim_options o;
  o.latency_min = 100ms;
  o.latency_spread = 50ms;
  o.params.split_horizon = true;
  route_sim sim(100, o);
  wire(sim, ring_edges(100));
  REQUIRE(sim.run_until_quiet(120s));
  const time_point at = sim.now();
  const auto before = sim.stats();
  sim.cut(0, 99);
  REQUIRE(sim.run_until_quiet(120s));
  REQUIRE_MESSAGE(sim.convergence_violation().empty(), sim.convergence_violation());
  const auto asked = sim.stats().requests - before.requests;
  const auto forwarded = sim.stats().requests_forwarded - before.requests_forwarded;
  MESSAGE("quiet after " << std::chrono::duration_cast<std::chrono::milliseconds>(sim.now() - at).count()
                         << " ms, " << asked << " seqno requests sent, " << forwarded << " forwarded");
  CHECK(sim.now() - at < route_params{}.expiry);  // repaired by requests, not by forgetting the sources
  CHECK(forwarded < 20000);  // 34,221 while a request asking no more than one unanswered went on again
  CHECK(asked < 1000);
}

TEST_CASE("route_table: sim: a forged route to a node at a seqno above its own is outbid within one round of messages") {
  route_sim sim(20, {});  // full dumps every 10 s: the repair must not wait for one
  wire(sim, ring_edges(20));
  converge(sim);
  // Node 1 hears from node 2 of a route to node 0 at a seqno far above node 0's own: newest seqno first, so
  // node 1 takes it, and so do the nodes it tells. Left alone, it would hold node 0's traffic on a wrong path
  // (here a loop between 1 and 2) and outrank everything node 0 says until the name expires.
  const std::size_t victim = 0, told = 1, liar = 2;
  sim.tolerate_loops_towards(victim);
  const std::uint64_t own = sim.table(victim).own_seqno();
  const time_point at = sim.now();
  sim.table(told).on_update(route_sim::id(liar),
                            update({entry(route_sim::id(victim), own + 100, 5, route_sim::intervals_of(victim))}), at);
  REQUIRE(sim.table(told).next_hop(route_sim::id(victim)) == route_sim::id(liar));
  sim.pump_now(told);
  REQUIRE(sim.run_until_quiet(1s));
  REQUIRE_MESSAGE(sim.convergence_violation().empty(), sim.convergence_violation());
  CHECK(sim.table(victim).own_seqno() > own + 100);
  MESSAGE("outbid after " << std::chrono::duration_cast<std::chrono::milliseconds>(sim.now() - at).count()
                          << " ms");
}

TEST_CASE("route_table: sim: a line partitions at a cut and comes back after neighbour_up") {
  route_sim sim(20, {});
  wire(sim, line_edges(20));
  converge(sim);
  sim.cut(9, 10);
  converge(sim);  // checks unreachability across the cut and owner_of == nullopt there
  CHECK_FALSE(sim.table(0).is_reachable(route_sim::id(19)));
  CHECK_FALSE(sim.table(0).owner_of(19 * route_sim::vnodes_per_node).has_value());
  CHECK(sim.table(0).is_reachable(route_sim::id(9)));
  sim.link(9, 10);
  converge(sim);
  CHECK(sim.table(0).is_reachable(route_sim::id(19)));
}

TEST_CASE("route_table: sim: with split horizon a line cut in two asks for no seqno, without it the far side does") {
  for (const bool split : {true, false}) {
    CAPTURE(split);
    sim_options o;
    o.params.split_horizon = split;
    o.latency_min = 60ms;  // retractions come after the request timers (as in a process behind on its input)
    o.latency_spread = 10ms;
    route_sim sim(20, o);
    wire(sim, line_edges(20));
    converge(sim);
    const auto before = sim.stats();
    sim.cut(9, 10);
    converge(sim);
    const auto asked = sim.stats().requests - before.requests;
    if (split) {
      CHECK(asked == 0);  // nobody holds a route back through the node it lost its own through
    } else {
      CHECK(asked > 0);  // each node takes its downstream neighbour's stale route for an alternative
    }
  }
}

TEST_CASE("route_table: sim: random 50-node graph survives several cuts and repairs") {
  route_sim sim(50, {});
  const edge_list edges = random_edges(50, 4, 11);
  wire(sim, edges);
  converge(sim);
  for (std::size_t k = 0; k < edges.size(); k += edges.size() / 4) sim.cut(edges[k].first, edges[k].second);
  converge(sim);
  for (std::size_t k = 0; k < edges.size(); k += edges.size() / 4) sim.link(edges[k].first, edges[k].second);
  converge(sim);
}

TEST_CASE("route_table: sim: flapping links with periodic dumps and expiry never loop") {
  sim_options opt;
  opt.params.full_dump_interval = 1s;
  opt.params.expiry = 3s;
  opt.seed = 42;
  route_sim sim(20, opt);
  const edge_list edges = random_edges(20, 4, 5);
  wire(sim, edges);
  std::mt19937_64 rng(99);
  for (int round = 0; round < 80; ++round) {
    const auto [x, y] = edges[rng() % edges.size()];
    if (sim.linked(x, y)) {
      sim.cut(x, y);
    } else {
      sim.link(x, y);
    }
    sim.run_for(std::chrono::milliseconds(rng() % 400));
    REQUIRE_MESSAGE(sim.first_violation().empty(), sim.first_violation());
  }
  for (auto [x, y] : edges) sim.link(x, y);
  converge(sim);
  MESSAGE("flap test: " << sim.deliveries() << " deliveries, " << sim.checks() << " loop checks");
}

TEST_CASE("route_table: sim: a full dump sent to the new neighbour only is enough") {
  route_sim sim(20, sim_options{});
  const edge_list edges = random_edges(20, 4, 3);
  wire(sim, edges);
  converge(sim);
  for (std::size_t k = 0; k < edges.size(); k += 5) sim.cut(edges[k].first, edges[k].second);
  converge(sim);
  for (std::size_t k = 0; k < edges.size(); k += 5) sim.link(edges[k].first, edges[k].second);
  converge(sim);
}

TEST_CASE("route_table: sim: lossy links never cause a loop, and summaries that differ bring dumps that repair what was lost") {
  sim_options opt;
  opt.params.full_dump_interval = 500ms;
  opt.params.expiry = 1s;  // raised to the safe minimum, 2.25 s: sources do get forgotten and relearnt here
  opt.loss_per_mille = 250;
  opt.seed = 7;
  route_sim sim(20, opt);
  const edge_list edges = random_edges(20, 3, 13);
  wire(sim, edges);
  std::mt19937_64 rng(3);
  for (int round = 0; round < 60; ++round) {
    const auto [x, y] = edges[rng() % edges.size()];
    if (sim.linked(x, y)) {
      sim.cut(x, y);
    } else {
      sim.link(x, y);
    }
    sim.run_for(std::chrono::milliseconds(rng() % 300));
    REQUIRE_MESSAGE(sim.first_violation().empty(), sim.first_violation());
  }
  sim.set_loss(0);
  sim.run_for(2s);  // hold time (1.75 s) for stale routes, and a few dumps for lost news
  const bool quiet = sim.run_until_quiet(20s);
  REQUIRE_MESSAGE(sim.first_violation().empty(), sim.first_violation());
  CHECK_MESSAGE(sim.convergence_violation(quiet).empty(), sim.convergence_violation(quiet));
  CHECK(sim.stats().dump_requests > 0);
}

TEST_CASE("route_table: sim: on reliable links summaries always match: no dump but those of new links") {
  sim_options opt;
  opt.params.full_dump_interval = 1s;
  route_sim sim(30, opt);
  const edge_list edges = random_edges(30, 4, 5);
  wire(sim, edges);
  converge(sim);
  for (std::size_t k = 0; k < edges.size(); k += 7) sim.cut(edges[k].first, edges[k].second);
  sim.run_for(10s);  // sources behind no cut are forgotten nowhere; every summary is checked ten times
  converge(sim);
  const auto before = sim.stats();
  sim.run_for(70s);  // long enough for unreachable sources to be forgotten (forget entries) everywhere
  converge(sim);
  CHECK(sim.stats().summaries - before.summaries >= 30 * 50);
  CHECK(sim.stats().dump_requests == 0);
  CHECK(sim.stats().full_dumps == 2 * edges.size());  // one per link end, when it came up
}

TEST_CASE("route_table: a source lost while it advertised intervals is reported once it has been gone long enough") {
  auto t = make_table({a});
  t.on_update(a, update({entry(s, 10, 1, {{0, 10}, {20, 30}}), entry(s2, 10, 1, {{10, 20}})}), t0);
  CHECK(t.lost_owners(t0, 0s).empty());
  t.on_update(a, update({entry(s, 11, infinite_metric, {{0, 10}, {20, 30}})}), t0 + 1s);  // lost (a crash, a cut)
  CHECK(t.lost_owners(t0 + 2s, 5s).empty());  // not yet
  const auto lost = t.lost_owners(t0 + 6s, 5s);
  REQUIRE(lost.size() == 1);
  CHECK(lost[0].source == s);
  CHECK(lost[0].intervals == std::vector<route_interval>{{0, 10}, {20, 30}});
  CHECK(lost[0].since == t0 + 1s);
  // It outlives the source's own entry (s2 is lost by then too: a, silent, lost its routes after the hold).
  auto sources = [&](time_point now) {
    std::vector<node_id> out;
    for (const auto& l : t.lost_owners(now, 5s)) out.push_back(l.source);
    return out;
  };
  idle(t, t0 + 1s, t0 + 1s + t.source_expiry() + 1s);
  CHECK(sources(t0 + 1h) == std::vector<node_id>{s, s2});
  // It comes back: no longer lost.
  t.on_update(a, update({entry(s, 12, 1, {{0, 10}, {20, 30}})}), t0 + 2h);
  CHECK(sources(t0 + 3h) == std::vector<node_id>{s2});
}

TEST_CASE("route_table: a loss counts from the last instant this node had no neighbour: one whose links all break does not report live sources") {
  auto t = make_table({a, b});
  t.on_update(a, update({entry(s, 10, 1, {{0, 10}})}), t0);
  t.on_update(a, update({entry(s, 11, infinite_metric, {{0, 10}})}), t0 + 1s);  // s is lost
  t.neighbour_down(b, t0 + 2s);  // one link of two: its other paths stand
  REQUIRE(t.lost_owners(t0 + 6s, 5s).size() == 1);
  t.neighbour_down(a, t0 + 7s);  // its last link: its view of who is gone is worth nothing now
  CHECK(t.lost_owners(t0 + 11s, 5s).empty());
  t.neighbour_up(a, t0 + 8s);  // back; the wait counts from here
  CHECK(t.lost_owners(t0 + 12s, 5s).empty());
  REQUIRE(t.lost_owners(t0 + 13s, 5s).size() == 1);
  CHECK(t.lost_owners(t0 + 13s, 5s)[0].since == t0 + 8s);
  t.neighbour_up(b, t0 + 14s);  // a second neighbour: it was not alone
  CHECK(t.lost_owners(t0 + 14s, 5s).size() == 1);
}

TEST_CASE("route_table: a source that withdrew its intervals before it went is not lost") {
  auto t = make_table({a});
  t.on_update(a, update({entry(s, 10, 1, {{0, 10}})}), t0);
  t.on_update(a, update({entry(s, 12, 1)}), t0 + 1s);  // a finalizing node advertises nothing, then goes
  t.on_update(a, update({entry(s, 13, infinite_metric)}), t0 + 2s);
  CHECK(t.lost_owners(t0 + 1h, 5s).empty());
}

TEST_CASE("route_table: a withdrawal that arrives only inside a retraction is not taken for a lost owner") {
  auto t = make_table({a, b});
  t.on_update(a, update({entry(s, 10, 1, {{0, 10}})}), t0);
  // a had s's withdrawal (seqno 12) and lost s before its triggered update left: its retraction says so.
  t.on_update(a, update({entry(s, 13, infinite_metric)}), t0 + 1s);
  CHECK_FALSE(t.is_reachable(s));
  CHECK(t.lost_owners(t0 + 1h, 5s).empty());
  // Passed on as it came, so that nodes further away learn it too.
  CHECK(find_entry(t.collect_triggered(t0 + 1s), s) == entry(s, 13, infinite_metric));
}

TEST_CASE("route_table: a newer retraction that names less shrinks the record of a lost source, and never grows it") {
  auto t = make_table({a, b});
  t.on_update(a, update({entry(s, 10, 1, {{0, 10}})}), t0);
  // a lost its link to s before s withdrew: its poison names what it knew.
  t.on_update(a, update({entry(s, 11, infinite_metric, {{0, 10}})}), t0 + 1s);
  REQUIRE(t.lost_owners(t0 + 1h, 5s).size() == 1);
  (void)t.collect_triggered(t0 + 1s);
  // b saw s give [5, 10) away and then lost it (a crash): newer news, and passed on.
  t.on_update(b, update({entry(s, 13, infinite_metric, {{0, 5}})}), t0 + 2s);
  auto lost = t.lost_owners(t0 + 1h, 5s);
  REQUIRE(lost.size() == 1);
  CHECK(lost[0].intervals == std::vector<route_interval>{{0, 5}});
  CHECK(lost[0].since == t0 + 1s);
  CHECK(find_entry(t.collect_triggered(t0 + 2s), s) == entry(s, 13, infinite_metric, {{0, 5}}));
  // Still newer news naming more does not bring back what the record lost.
  t.on_update(b, update({entry(s, 15, infinite_metric, {{0, 20}})}), t0 + 3s);
  lost = t.lost_owners(t0 + 1h, 5s);
  REQUIRE(lost.size() == 1);
  CHECK(lost[0].intervals == std::vector<route_interval>{{0, 5}});
  // Older news changes nothing.
  t.on_update(a, update({entry(s, 11, infinite_metric, {{0, 10}})}), t0 + 4s);
  CHECK(t.lost_owners(t0 + 1h, 5s)[0].intervals == std::vector<route_interval>{{0, 5}});
  // And the withdrawal, once it arrives, ends the record.
  t.on_update(b, update({entry(s, 17, infinite_metric)}), t0 + 5s);
  CHECK(t.lost_owners(t0 + 1h, 5s).empty());
}

TEST_CASE("route_table: a lost source's intervals that another node owns now are not reported, and all of them owned ends the record at once") {
  auto t = make_table({a});
  t.on_update(a, update({entry(s, 10, 1, {{0, 10}})}), t0);
  t.on_update(a, update({entry(s, 11, infinite_metric, {{0, 10}})}), t0 + 1s);
  t.on_update(a, update({entry(s2, 10, 1, {{2, 4}})}), t0 + 2s);  // s2 owns part of it
  t.set_local_intervals({{8, 12}}, t0 + 2s);                       // and so does this node
  auto lost = t.lost_owners(t0 + 1h, 5s);
  REQUIRE(lost.size() == 1);
  CHECK(lost[0].intervals == std::vector<route_interval>{{0, 2}, {4, 8}});
  t.on_update(a, update({entry(s2, 12, 1, {{0, 8}})}), t0 + 3s);
  CHECK(t.lost_owners(t0 + 1h, 5s).empty());
  // The record went with that update: what s2 gives away now is on its way, not orphaned.
  t.on_update(a, update({entry(s2, 14, 1)}), t0 + 5s);
  CHECK(t.lost_owners(t0 + 1h, 5s).empty());
}

TEST_CASE("route_table: an interval given to a taker that went before it was heard to assume it is reported as the taker's") {
  auto t = make_table({a});
  t.set_local_intervals({{0, 40}}, t0);
  t.on_update(a, update({entry(s, 10, 1, {{50, 60}}), entry(s2, 10, 1, {{70, 100}})}), t0);
  t.note_lost_in_transit(s2, {40, 50}, t0);  // reachable: it may still assume it
  CHECK(t.lost_owners(t0 + 1h, 5s).empty());
  t.on_update(a, update({entry(s, 11, infinite_metric, {{50, 60}})}), t0 + 1s);
  t.note_lost_in_transit(s, {45, 50}, t0 + 2s);  // merged with what it advertised, lost since it went
  t.note_lost_in_transit(77, {100, 110}, t0 + 2s);  // a taker that never owned anything
  const auto lost = t.lost_owners(t0 + 1s + 5s, 5s);
  REQUIRE(lost.size() == 1);
  CHECK(lost[0].source == s);
  CHECK(lost[0].intervals == std::vector<route_interval>{{45, 60}});
  const auto later = t.lost_owners(t0 + 2s + 5s, 5s);
  REQUIRE(later.size() == 2);
  CHECK(later[1].source == 77);
  CHECK(later[1].intervals == std::vector<route_interval>{{100, 110}});
}

TEST_CASE("route_table: what this node gave a lost taker stays in its record when news of the taker names less, and a withdrawal ends it") {
  auto t = make_table({a, b});
  t.on_update(a, update({entry(s, 10, 1, {{0, 30}})}), t0);
  t.on_update(a, update({entry(s, 11, infinite_metric, {{0, 30}})}), t0 + 1s);
  t.note_lost_in_transit(s, {30, 40}, t0 + 1s);  // given to s here; nobody heard s assume it
  REQUIRE(t.lost_owners(t0 + 1h, 5s).size() == 1);
  CHECK(t.lost_owners(t0 + 1h, 5s)[0].intervals == std::vector<route_interval>{{0, 40}});
  // Newer news of s, which cannot name [30, 40): what it names less of shrinks, the part given here stays.
  t.on_update(b, update({entry(s, 13, infinite_metric, {{0, 20}})}), t0 + 2s);
  REQUIRE(t.lost_owners(t0 + 1h, 5s).size() == 1);
  CHECK(t.lost_owners(t0 + 1h, 5s)[0].intervals == std::vector<route_interval>{{0, 20}, {30, 40}});
  t.on_update(b, update({entry(s, 15, infinite_metric, {{0, 10}})}), t0 + 4s);
  CHECK(t.lost_owners(t0 + 1h, 5s)[0].intervals == std::vector<route_interval>{{0, 10}, {30, 40}});
  // s withdrew everything: it was alive and left, so the record ends, the given part with it.
  t.on_update(b, update({entry(s, 17, infinite_metric)}), t0 + 5s);
  CHECK(t.lost_owners(t0 + 1h, 5s).empty());
  // Nothing for this node.
  t.note_lost_in_transit(t.self(), {60, 70}, t0 + 6s);
  CHECK(t.lost_owners(t0 + 1h, 5s).empty());
}

TEST_CASE("route_table: what a giver advertised in transit is passed on and never routed to, and is in its record once it is lost") {
  auto t = make_table({a, b});
  t.on_update(a, update({route_entry{s, 10, 1, {{0, 10}}, {{10, 20}}}}), t0);  // s gave [10, 20) away
  CHECK(t.owner_of(5) == s);
  CHECK_FALSE(t.owner_of(15).has_value());
  const auto passed = find_entry(t.collect_triggered(t0), s);
  REQUIRE(passed.has_value());
  CHECK(passed->in_transit == std::vector<route_interval>{{10, 20}});
  // The transfer is over: the news goes out on its own, though the intervals stay as they were.
  t.on_update(a, update({route_entry{s, 12, 1, {{0, 10}}, {}}}), t0 + 1s);
  const auto over = find_entry(t.collect_triggered(t0 + 1s), s);
  REQUIRE(over.has_value());
  CHECK(over->in_transit.empty());
  // Given again, and s crashes before its taker s2 is heard to assume it: the record holds it.
  t.on_update(a, update({route_entry{s, 14, 1, {{0, 10}}, {{10, 20}}}}), t0 + 2s);
  t.on_update(a, update({route_entry{s, 15, infinite_metric, {{0, 10}}, {{10, 20}}}}), t0 + 3s);
  auto lost = t.lost_owners(t0 + 9s, 5s);
  REQUIRE(lost.size() == 1);
  CHECK(lost[0].intervals == std::vector<route_interval>{{0, 20}});
  // Heard later: what the taker assumed is the taker's.
  t.on_update(b, update({entry(s2, 10, 1, {{10, 20}})}), t0 + 4s);
  lost = t.lost_owners(t0 + 9s, 5s);
  REQUIRE(lost.size() == 1);
  CHECK(lost[0].intervals == std::vector<route_interval>{{0, 10}});
}

TEST_CASE("route_table: a destination's loss is dated, an unknown one is unreachable since ever, a reachable one not at all") {
  auto t = make_table({a});
  t.on_update(a, update({entry(s, 10, 1)}), t0);
  CHECK_FALSE(t.unreachable_since(s).has_value());
  CHECK_FALSE(t.unreachable_since(me).has_value());
  CHECK(t.unreachable_since(77) == time_point::min());
  t.on_update(a, update({entry(s, 11, infinite_metric)}), t0 + 3s);
  CHECK(t.unreachable_since(s) == t0 + 3s);
}

TEST_CASE("route_table: this node advertises what it has in transit beside its intervals, and owns only the intervals") {
  auto t = make_table({a});
  t.set_local_intervals({{0, 5}}, t0, {{5, 8}});
  const auto own = find_entry(t.collect_triggered(t0), me);
  REQUIRE(own.has_value());
  CHECK(own->intervals == std::vector<route_interval>{{0, 5}});
  CHECK(own->in_transit == std::vector<route_interval>{{5, 8}});
  CHECK(t.owner_of(3) == me);
  CHECK_FALSE(t.owner_of(6).has_value());
}

TEST_CASE("route_table: what another node owned of a lost source's intervals stays out of its record when that node withdraws it") {
  auto t = make_table({a});
  // s gave [2, 4) to s2 before it went, and its last advertisement still named it.
  t.on_update(a, update({entry(s, 10, 1, {{0, 10}}), entry(s2, 10, 1, {{2, 4}})}), t0);
  t.on_update(a, update({entry(s, 11, infinite_metric, {{0, 10}})}), t0 + 1s);
  CHECK(t.lost_owners(t0 + 1h, 5s).front().intervals == std::vector<route_interval>{{0, 2}, {4, 10}});
  // s2 leaves on a temporary leave: [2, 4) is nobody's on purpose, not s's to adopt.
  t.on_update(a, update({entry(s2, 12, 1)}), t0 + 2s);
  CHECK(t.lost_owners(t0 + 1h, 5s).front().intervals == std::vector<route_interval>{{0, 2}, {4, 10}});
}

TEST_CASE("route_table: records of lost sources are bounded, the oldest dropped first") {
  route_params p = unbatched();
  p.max_sources = 3;
  auto t = make_table({a}, p);
  for (node_id src = 100; src < 103; ++src)
    t.on_update(a, update({entry(src, 10, 1, {{src, src + 1}})}), t0);
  for (node_id src = 100; src < 103; ++src)
    t.on_update(a, update({entry(src, 11, infinite_metric, {{src, src + 1}})}), t0 + std::chrono::seconds(src - 99));
  auto lost = t.lost_owners(t0 + 1h, 0s);
  CHECK(lost.size() == 3);
  // A source forgotten by now makes room for a new one; the new lost record pushes out the oldest.
  t.expire(t0 + 1h);
  t.on_update(a, update({entry(200, 10, 1, {{200, 201}})}), t0 + 1h);
  t.on_update(a, update({entry(200, 11, infinite_metric, {{200, 201}})}), t0 + 1h + 1s);
  lost = t.lost_owners(t0 + 2h, 0s);
  REQUIRE(lost.size() == 3);
  CHECK(lost[0].source == 101);
  CHECK(lost[2].source == 200);
}
