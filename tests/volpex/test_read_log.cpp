// The read log of a dataspace shard: served by call name, forgotten after every replica, spilled to disk and
// read back when full, split for migration.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "phoenix/volpex/read_log.hpp"
#include "support/volpex_objects.hpp"

using namespace phoenix;
using namespace phoenix::volpex;
using phoenix::volpex::test::as_text;
using phoenix::volpex::test::text;

TEST_CASE("read log: a replica is served what the first instance received, and only that call's entry") {
  read_log log({.capacity = 8, .replicas = 0, .spill_dir = {}});
  log.add({1, 5}, 10, text("five"), 100);
  log.add({1, 6}, 10, text("six"), 100);
  log.add({2, 5}, 20, text("other process"), 200);
  const auto got = log.serve({1, 5}, 101);
  REQUIRE(got);
  CHECK(as_text(*got) == "five");
  CHECK(as_text(*log.serve({2, 5}, 201)) == "other process");
  CHECK_FALSE(log.serve({1, 7}, 101));  // never logged
  CHECK_FALSE(log.serve({3, 5}, 101));
}

TEST_CASE("read log: an entry is forgotten once every replica of its process was served, not before") {
  read_log log({.capacity = 8, .replicas = 3, .spill_dir = {}});
  log.add({1, 1}, 0, text("x"), 100);  // served to the first replica
  REQUIRE(log.serve({1, 1}, 101));
  REQUIRE(log.serve({1, 1}, 101));  // the same replica again counts once
  CHECK(log.contains({1, 1}));
  REQUIRE(log.serve({1, 1}, 102));  // the third distinct replica
  CHECK_FALSE(log.contains({1, 1}));
  CHECK(log.statistics().forgotten == 1);
  SUBCASE("with one replica per process nothing is kept at all") {
    read_log single({.capacity = 8, .replicas = 1, .spill_dir = {}});
    single.add({1, 1}, 0, text("x"), 100);
    CHECK_FALSE(single.contains({1, 1}));
  }
}

TEST_CASE("read log: when full, the older half goes to disk and is read back from there, byte for byte") {
  const auto dir = std::filesystem::temp_directory_path();
  read_log log({.capacity = 10, .replicas = 0, .spill_dir = dir});
  for (std::uint64_t n = 1; n <= 25; ++n)
    log.add({7, n}, n, text("entry " + std::to_string(n) + std::string(n * 100, 'x')), 1);
  const auto s = log.statistics();
  CHECK(s.spills >= 2);
  CHECK(s.in_memory <= 10);
  CHECK(s.in_memory + s.spilled == 25);
  for (std::uint64_t n = 1; n <= 25; ++n) {
    const auto got = log.serve({7, n}, 2);
    REQUIRE_MESSAGE(got, "entry " << n);
    CHECK(as_text(*got) == "entry " + std::to_string(n) + std::string(n * 100, 'x'));
  }
  CHECK(log.statistics().read_back == s.spilled);
  CHECK(log.statistics().spill_bytes > 0);
}

TEST_CASE("read log: spilled entries too are forgotten after the last replica") {
  read_log log({.capacity = 4, .replicas = 2, .spill_dir = {}});
  for (std::uint64_t n = 1; n <= 6; ++n) log.add({1, n}, 0, text(std::to_string(n)), 100);
  REQUIRE(log.statistics().spilled > 0);
  for (std::uint64_t n = 1; n <= 6; ++n) CHECK(as_text(*log.serve({1, n}, 101)) == std::to_string(n));
  const auto s = log.statistics();
  CHECK(s.in_memory == 0);
  CHECK(s.spilled == 0);
  CHECK(s.forgotten == 6);
}

TEST_CASE("read log: memory stays bounded when entries are forgotten out of order") {
  read_log log({.capacity = 4, .replicas = 2, .spill_dir = {}});
  // Every other entry is finished at once; the rest stay. Never more than `capacity` in memory.
  for (std::uint64_t n = 1; n <= 1000; ++n) {
    log.add({1, n}, 0, text("e"), 100);
    if (n % 2 == 0) REQUIRE(log.serve({1, n}, 101));
    CHECK(log.statistics().in_memory <= 4);
  }
  CHECK(log.statistics().in_memory + log.statistics().spilled == 500);
}

TEST_CASE(
    "read log: extract takes the entries of an interval of virtual nodes, spilled or not, and insert adds "
    "them") {
  read_log from({.capacity = 4, .replicas = 3, .spill_dir = {}});
  for (std::uint64_t n = 1; n <= 10; ++n) from.add({1, n}, n * 10, text(std::to_string(n)), 100);
  REQUIRE(from.serve({1, 3}, 101));   // served twice so far: one more replica to go
  auto moved = from.extract(30, 70);  // vnodes 30, 40, 50, 60: entries 3..6
  REQUIRE(moved.size() == 4);
  for (std::uint64_t n = 1; n <= 10; ++n) CHECK(from.contains({1, n}) == (n < 3 || n > 6));
  read_log to({.capacity = 4, .replicas = 3, .spill_dir = {}});
  to.insert(std::move(moved));
  for (std::uint64_t n = 3; n <= 6; ++n) CHECK(as_text(*to.serve({1, n}, 102)) == std::to_string(n));
  CHECK_FALSE(to.contains({1, 3}));  // its third replica now: the count travelled with it
  CHECK(to.contains({1, 4}));
}
