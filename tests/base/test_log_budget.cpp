// The budget every log line a peer can trigger goes through (base/log_budget.hpp).
#include <doctest/doctest.h>

#include <chrono>

#include "base/log_budget.hpp"

using namespace phoenix::base;
using namespace std::chrono_literals;

namespace {
const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
}

TEST_CASE("log budget: one line per window passes, and the next says how many were held back") {
  log_budget budget(10s);
  CHECK(budget.pass(t0) == 0u);
  CHECK_FALSE(budget.pass(t0 + 1s));
  CHECK_FALSE(budget.pass(t0 + 9s));
  CHECK(budget.pass(t0 + 10s) == 2u);
  CHECK(budget.pass(t0 + 30s) == 0u);
}

TEST_CASE("log budget: a burst per window passes, the rest are counted until the next window") {
  log_budget budget(10s, 2);
  CHECK(budget.pass(t0) == 0u);
  CHECK(budget.pass(t0 + 1ms) == 0u);
  for (int i = 0; i < 5; ++i) CHECK_FALSE(budget.pass(t0 + 2ms));
  CHECK(budget.pass(t0 + 10s + 1ms) == 5u);
  CHECK(budget.pass(t0 + 10s + 2ms) == 0u);
  CHECK_FALSE(budget.pass(t0 + 10s + 3ms));
}

TEST_CASE("log budget: a clock that goes back starts a new window rather than holding lines back for ever") {
  log_budget budget(10s);
  CHECK(budget.pass(t0) == 0u);
  CHECK_FALSE(budget.pass(t0 + 1s));
  CHECK(budget.pass(t0 - 1h) == 1u);
}
