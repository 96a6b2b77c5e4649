// Tests of phoenix/orphan_adoption.hpp: which orphaned interval a node adopts.
#include <doctest/doctest.h>

#include "phoenix/orphan_adoption.hpp"

using namespace phoenix;
using namespace std::chrono_literals;

namespace {

OrphanedInterval orphan(vp_t lo, vp_t hi, std::chrono::milliseconds lost_for) { return {{lo, hi}, 77, lost_for}; }
const auto nobody = [](vp_t) { return false; };
const auto everyone = [](vp_t) { return true; };

}  // namespace

TEST_CASE("orphan adoption: the node whose interval ends where the orphan begins adopts it, after the wait") {
  const std::vector<Interval> mine{{0, 100}};
  CHECK_FALSE(adoption_for(mine, {orphan(100, 200, 5s)}, 10s, everyone));
  const auto got = adoption_for(mine, {orphan(300, 400, 20s), orphan(100, 200, 10s)}, 10s, everyone);
  REQUIRE(got);
  CHECK(got->span == Interval{100, 200});
  CHECK(got->owner == 77);
}

TEST_CASE("orphan adoption: the node above adopts after twice the wait if nobody's interval ends below the orphan, after four times if the node below did not") {
  const std::vector<Interval> mine{{200, 300}};
  CHECK_FALSE(adoption_for(mine, {orphan(100, 200, 30s)}, 10s, everyone));  // the node below adopts
  CHECK(adoption_for(mine, {orphan(100, 200, 40s)}, 10s, everyone));  // it does not know the orphan
  CHECK_FALSE(adoption_for(mine, {orphan(100, 200, 15s)}, 10s, nobody));    // it may not be known here yet
  CHECK(adoption_for(mine, {orphan(100, 200, 20s)}, 10s, nobody));
  CHECK(adoption_for({{50, 60}}, {orphan(0, 50, 20s)}, 10s, everyone));  // nothing lies below 0
}

TEST_CASE("orphan adoption: a node that assumes nothing, or several intervals, adopts nothing") {
  CHECK_FALSE(adoption_for({}, {orphan(0, 50, 1h)}, 10s, nobody));
  CHECK_FALSE(adoption_for({{0, 10}, {20, 30}}, {orphan(10, 20, 1h)}, 10s, nobody));
  CHECK_FALSE(adoption_for({{0, 10}}, {orphan(11, 20, 1h)}, 10s, nobody));  // not adjacent
}

TEST_CASE("orphan adoption: what a node gave to a taker that crashed is adopted by that node, at once where it lies below it, after four times the wait where it lies above it or assumes nothing") {
  const std::vector<Interval> given{{100, 200}};
  // The taker's record merges what it advertised, [200, 300), with what it was given: only the latter is taken.
  CHECK_FALSE(adoption_for({}, {orphan(100, 300, 39s)}, 10s, everyone, given));  // a node below may know it
  const auto got = adoption_for({}, {orphan(100, 300, 40s)}, 10s, everyone, given);
  REQUIRE(got);
  CHECK(got->span == Interval{100, 200});
  CHECK(got->owner == 77);
  CHECK_FALSE(adoption_for({}, {orphan(200, 300, 1h)}, 10s, everyone, given));  // another node took it
  CHECK_FALSE(adoption_for({{0, 100}}, {orphan(100, 300, 9s)}, 10s, everyone, given));  // not reported yet
  CHECK(adoption_for({{0, 100}}, {orphan(100, 300, 10s)}, 10s, everyone, given)->span == Interval{100, 200});
  CHECK_FALSE(adoption_for({{200, 250}}, {orphan(50, 200, 39s)}, 10s, everyone, given));
  CHECK(adoption_for({{200, 250}}, {orphan(50, 200, 40s)}, 10s, everyone, given)->span == Interval{100, 200});
  CHECK_FALSE(adoption_for({{0, 50}}, {orphan(100, 300, 1h)}, 10s, everyone, given));  // not adjacent
  CHECK_FALSE(adoption_for({{0, 10}, {20, 30}}, {orphan(100, 300, 1h)}, 10s, everyone, given));
  CHECK_FALSE(adoption_for({}, {orphan(100, 300, 1h)}, 10s, everyone));  // not given by this node
}
