// The chaos test (tests/cluster/chaos.hpp): 8 node processes forwarding messages while intervals migrate, links
// break, one process leaves for good and another leaves and comes back. A fixed seed and a bounded time in the
// suite; scripts/chaos-soak.sh runs it longer with other seeds (PHOENIX_CHAOS_SEED, PHOENIX_CHAOS_SECONDS).
#include <doctest/doctest.h>

#include <cstdlib>
#include <iostream>

#include "chaos.hpp"

namespace {
std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// What every chaos run must show, whatever else it did.
void check_clean(const phoenix::test::chaos::result& r) {
  for (const auto& e : r.errors) MESSAGE(e);
  if (!r.events.empty()) MESSAGE(r.events);
  CHECK(r.errors.empty());
  CHECK(r.left);
  CHECK(r.rejoined);
  CHECK(r.suspended);
  CHECK(r.resumed);
  CHECK(r.receipts == r.expected);
  CHECK(r.duplicates == 0);
  CHECK(r.missing == 0);
  CHECK(r.counter_mismatches == 0);
  CHECK(r.overlaps == 0);
  CHECK(r.covered);
}

phoenix::test::chaos::spec spec_from_environment(std::uint64_t default_seed, std::uint64_t default_seconds) {
  phoenix::test::chaos::spec s;
  s.seed = env_number("PHOENIX_CHAOS_SEED", default_seed);
  s.chaos_for = std::chrono::seconds(env_number("PHOENIX_CHAOS_SECONDS", default_seconds));
  s.messages = static_cast<int>(env_number("PHOENIX_CHAOS_MESSAGES", 25));
  s.deadline = std::chrono::seconds(150) + std::chrono::duration_cast<std::chrono::seconds>(s.chaos_for);
  return s;
}

}  // namespace

TEST_CASE("chaos: migrations, link cuts, a leave, a join and a temporary leave lose and duplicate nothing") {
  const auto s = spec_from_environment(1, 6);
  const auto r =
      phoenix::test::chaos::run(s, [](const std::string& line) { std::cerr << "chaos: " << line << '\n'; });
  MESSAGE("seed " << s.seed << ": " << r.receipts << " receipts of " << r.expected << ", " << r.migrations
                  << " migrations, " << r.cuts << " link cuts, " << r.ownership_events << " ownership changes, "
                  << r.out_of_hops << " packets out of hops");
  check_clean(r);
  CHECK(r.migrations > 10);  // the intervals really moved
}

TEST_CASE(
    "chaos: processes stopped (SIGSTOP) while holding a migration lock delay but never deadlock the others") {
  auto s = spec_from_environment(2, 8);
  s.pauses = 2;  // per process
  const auto r =
      phoenix::test::chaos::run(s, [](const std::string& line) { std::cerr << "pause: " << line << '\n'; });
  MESSAGE("seed " << s.seed << ": " << r.paused_holding_lock << " stops of 1.5 s while holding a lock, "
                  << r.receipts << " receipts, " << r.migrations << " migrations, " << r.out_of_hops
                  << " packets out of hops");
  check_clean(r);
  CHECK(r.paused_holding_lock >= 4);
}
