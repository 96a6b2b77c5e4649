// What a replica concludes from the routes to another (liveness.hpp): suspected, then given up, and back when
// a route returns at any point — the two steps at exactly their thresholds, each reported once.
#include <doctest/doctest.h>

#include <chrono>

#include "phoenix/volpex/liveness.hpp"

using namespace phoenix::volpex;
using namespace std::chrono_literals;
using change = liveness::change;

namespace {

const liveness_timing timing{1000ms, 10000ms};
const liveness::clock::time_point t0{};

}  // namespace

TEST_CASE("liveness: suspected at suspect_after, given up at give_up_after, each said once") {
  liveness l;
  CHECK(l.observe(true, t0, timing) == change::none);
  CHECK(l.observe(false, t0 + 1s, timing) == change::none);  // the route is missing from here on
  CHECK(l.observe(false, t0 + 1999ms, timing) == change::none);
  CHECK_FALSE(l.suspected());
  CHECK(l.observe(false, t0 + 2s, timing) == change::suspected);
  CHECK(l.suspected());
  CHECK_FALSE(l.given_up());
  CHECK(l.observe(false, t0 + 5s, timing) == change::none);
  CHECK(l.observe(false, t0 + 10999ms, timing) == change::none);
  CHECK(l.observe(false, t0 + 11s, timing) == change::given_up);
  CHECK(l.given_up());
  CHECK(l.suspected());
  CHECK(l.observe(false, t0 + 60s, timing) == change::none);
}

TEST_CASE("liveness: a route that comes back clears suspicion and giving up, and the count starts afresh") {
  liveness l;
  CHECK(l.observe(false, t0, timing) == change::none);
  CHECK(l.observe(false, t0 + 1s, timing) == change::suspected);
  CHECK(l.observe(true, t0 + 3s, timing) == change::back);
  CHECK_FALSE(l.suspected());
  CHECK(l.observe(true, t0 + 4s, timing) == change::none);    // back only once
  CHECK(l.observe(false, t0 + 20s, timing) == change::none);  // missing anew: 20 s is the new start
  CHECK(l.observe(false, t0 + 29s, timing) == change::suspected);
  CHECK(l.observe(false, t0 + 30s, timing) == change::given_up);
  CHECK(l.observe(true, t0 + 31s, timing) == change::back);
  CHECK_FALSE(l.given_up());
}

TEST_CASE("liveness: a first look long after the route went jumps straight to given up") {
  liveness l;
  CHECK(l.observe(false, t0, timing) == change::none);
  CHECK(l.observe(false, t0 + 12s, timing) == change::given_up);  // both thresholds passed since the last look
  CHECK(l.suspected());
  CHECK(l.given_up());
}
