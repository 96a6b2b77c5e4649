// Tests of base/interval_set.hpp.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "base/interval_set.hpp"

using namespace phoenix::base;
using result = interval_set::result;

namespace {

constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

std::vector<interval> ivs(std::initializer_list<interval> list) { return list; }

}  // namespace

TEST_CASE("interval_set: interval basics") {
  CHECK(interval{5, 5}.empty());
  CHECK(interval{6, 5}.empty());
  CHECK(interval{6, 5}.size() == 0);
  CHECK(interval{0, u64_max}.size() == u64_max);
  CHECK(interval{3, 7}.contains(3));
  CHECK_FALSE(interval{3, 7}.contains(7));
  CHECK_FALSE(interval{3, 7}.contains(2));
  CHECK(interval{0, u64_max}.contains(u64_max - 1));
  CHECK_FALSE(interval{0, u64_max}.contains(u64_max));

  CHECK(is_adjacent({0, 5}, {5, 9}));
  CHECK(is_adjacent({5, 9}, {0, 5}));
  CHECK_FALSE(is_adjacent({0, 5}, {6, 9}));
  CHECK_FALSE(is_adjacent({0, 5}, {5, 5}));  // empty is adjacent to nothing
  CHECK_FALSE(is_adjacent({0, 5}, {4, 9}));

  CHECK(overlaps({0, 5}, {4, 9}));
  CHECK(overlaps({4, 9}, {0, 5}));
  CHECK(overlaps({0, 10}, {3, 4}));
  CHECK_FALSE(overlaps({0, 5}, {5, 9}));
  CHECK_FALSE(overlaps({0, 5}, {2, 2}));
  CHECK_FALSE(overlaps({3, 3}, {3, 3}));
}

TEST_CASE("interval_set: add merges adjacent intervals in any order") {
  interval_set s;
  CHECK(s.empty());
  CHECK(s.add({10, 20}) == result::ok);
  CHECK(s.add({30, 40}) == result::ok);
  CHECK(s.intervals() == ivs({{10, 20}, {30, 40}}));
  CHECK(s.add({20, 30}) == result::ok);  // bridges both
  CHECK(s.intervals() == ivs({{10, 40}}));
  CHECK(s.add({5, 10}) == result::ok);   // adjacent on the left
  CHECK(s.add({40, 41}) == result::ok);  // adjacent on the right
  CHECK(s.add({0, 2}) == result::ok);    // not adjacent
  CHECK(s.intervals() == ivs({{0, 2}, {5, 41}}));
  CHECK(s.count() == 2);
  CHECK(s.total_size() == 2 + 36);
}

TEST_CASE("interval_set: add refuses overlaps and empty intervals, unchanged") {
  interval_set s;
  REQUIRE(s.add({10, 20}) == result::ok);
  REQUIRE(s.add({30, 40}) == result::ok);
  const interval_set before = s;
  for (interval bad : {interval{19, 21}, interval{5, 11}, interval{12, 13}, interval{0, 100}, interval{10, 20},
                       interval{25, 31}, interval{39, 50}, interval{15, 35}}) {
    CAPTURE(bad.lo);
    CAPTURE(bad.hi);
    CHECK(s.add(bad) == result::overlap);
    CHECK(s == before);
  }
  CHECK(s.add({7, 7}) == result::empty_interval);
  CHECK(s.add({9, 3}) == result::empty_interval);
  CHECK(s == before);
  CHECK(s.total_size() == 20);
}

TEST_CASE("interval_set: remove splits, trims and erases") {
  interval_set s;
  REQUIRE(s.add({0, 100}) == result::ok);
  CHECK(s.remove({40, 60}) == result::ok);  // split
  CHECK(s.intervals() == ivs({{0, 40}, {60, 100}}));
  CHECK(s.remove({0, 10}) == result::ok);    // trim the left end
  CHECK(s.remove({90, 100}) == result::ok);  // trim the right end
  CHECK(s.intervals() == ivs({{10, 40}, {60, 90}}));
  CHECK(s.total_size() == 60);
  CHECK(s.remove({10, 40}) == result::ok);  // whole interval
  CHECK(s.intervals() == ivs({{60, 90}}));
  CHECK(s.remove({60, 90}) == result::ok);
  CHECK(s.empty());
  CHECK(s.total_size() == 0);
}

TEST_CASE("interval_set: remove refuses values not present, unchanged") {
  interval_set s;
  REQUIRE(s.add({10, 20}) == result::ok);
  REQUIRE(s.add({30, 40}) == result::ok);
  const interval_set before = s;
  // Spanning the gap is refused even though both ends are present: all-or-nothing.
  for (interval bad : {interval{15, 35}, interval{5, 15}, interval{19, 21}, interval{20, 30}, interval{0, 5},
                       interval{40, 41}, interval{10, 40}, interval{39, 41}}) {
    CAPTURE(bad.lo);
    CAPTURE(bad.hi);
    CHECK(s.remove(bad) == result::not_contained);
    CHECK(s == before);
  }
  CHECK(s.remove({12, 12}) == result::empty_interval);
  CHECK(s == before);
  interval_set none;
  CHECK(none.remove({0, 1}) == result::not_contained);
}

TEST_CASE("interval_set: queries") {
  interval_set s;
  REQUIRE(s.add({10, 20}) == result::ok);
  REQUIRE(s.add({30, 40}) == result::ok);
  CHECK(s.contains(10));
  CHECK(s.contains(19));
  CHECK_FALSE(s.contains(20));
  CHECK_FALSE(s.contains(9));
  CHECK_FALSE(s.contains(25));
  CHECK(s.contains(interval{12, 18}));
  CHECK(s.contains(interval{10, 20}));
  CHECK_FALSE(s.contains(interval{15, 35}));  // both ends present, the gap is not
  CHECK_FALSE(s.contains(interval{15, 21}));
  CHECK(s.contains(interval{25, 25}));  // empty: vacuously contained
  CHECK(s.intersects({15, 35}));
  CHECK(s.intersects({0, 11}));
  CHECK(s.intersects({39, 100}));
  CHECK_FALSE(s.intersects({20, 30}));
  CHECK_FALSE(s.intersects({0, 10}));
  CHECK_FALSE(s.intersects({40, 100}));
  CHECK_FALSE(s.intersects({15, 15}));
}

TEST_CASE("interval_set: intersection") {
  interval_set s;
  REQUIRE(s.add({10, 20}) == result::ok);
  REQUIRE(s.add({30, 40}) == result::ok);
  REQUIRE(s.add({50, 60}) == result::ok);
  auto part = s.intersection({15, 55});
  CHECK(part.intervals() == ivs({{15, 20}, {30, 40}, {50, 55}}));
  CHECK(part.total_size() == 5 + 10 + 5);
  CHECK(s.intersection({20, 30}).empty());
  CHECK(s.intersection({0, 100}) == s);
  CHECK(s.intersection({12, 13}).intervals() == ivs({{12, 13}}));
  CHECK(s.intersection({7, 7}).empty());
  // The result is a proper set: removing it from s works and leaves the rest.
  for (interval held : part.intervals()) REQUIRE(s.remove(held) == result::ok);
  CHECK(s.intervals() == ivs({{10, 15}, {55, 60}}));
}

TEST_CASE("interval_set: boundaries at 0 and 2^64-1") {
  interval_set s;
  REQUIRE(s.add({0, 1}) == result::ok);
  REQUIRE(s.add({u64_max - 1, u64_max}) == result::ok);
  CHECK(s.contains(0));
  CHECK(s.contains(u64_max - 1));
  CHECK_FALSE(s.contains(u64_max));  // not representable in a half-open u64 interval
  CHECK_FALSE(s.contains(1));
  CHECK(s.total_size() == 2);
  REQUIRE(s.add({1, u64_max - 1}) == result::ok);
  CHECK(s.intervals() == ivs({{0, u64_max}}));
  CHECK(s.total_size() == u64_max);
  CHECK(s.add({u64_max - 1, u64_max}) == result::overlap);
  CHECK(s.remove({0, u64_max}) == result::ok);
  CHECK(s.empty());
  CHECK(s.add({0, u64_max}) == result::ok);
  CHECK(s.remove({u64_max - 1, u64_max}) == result::ok);
  CHECK(s.remove({0, 1}) == result::ok);
  CHECK(s.intervals() == ivs({{1, u64_max - 1}}));
  CHECK(s.remove({u64_max - 1, u64_max}) == result::not_contained);
  CHECK(s.intersection({0, u64_max}).intervals() == ivs({{1, u64_max - 1}}));
  CHECK_FALSE(s.intersects({u64_max - 1, u64_max}));
  CHECK(s.intersects({0, 2}));
}

TEST_CASE("interval_set: to_string") {
  CHECK(std::string(to_string(result::overlap)) == "overlap");
  CHECK(std::string(to_string(result::not_contained)) == "not_contained");
}

// Model: a std::set of the members, over a small universe so that random operations collide often.
TEST_CASE("interval_set: randomized against a std::set model") {
  constexpr std::uint64_t universe = 48;
  std::mt19937_64 rng(20240607);
  for (int round = 0; round < 200; ++round) {
    interval_set s;
    std::set<std::uint64_t> model;
    for (int step = 0; step < 60; ++step) {
      std::uint64_t a = rng() % (universe + 1);
      std::uint64_t b = rng() % (universe + 1);
      if (rng() % 8 != 0 && a > b) std::swap(a, b);  // mostly proper intervals, some empty/reversed ones
      const interval iv{a, b};
      CAPTURE(round);
      CAPTURE(step);
      CAPTURE(a);
      CAPTURE(b);
      std::size_t present = 0;
      for (std::uint64_t v = a; v < b; ++v) present += model.count(v);
      const interval_set before = s;

      if (rng() % 2 == 0) {
        const result expected = iv.empty()    ? result::empty_interval
                                : present > 0 ? result::overlap
                                              : result::ok;
        REQUIRE(s.add(iv) == expected);
        if (expected == result::ok) {
          for (std::uint64_t v = a; v < b; ++v) model.insert(v);
        } else {
          REQUIRE(s == before);
        }
      } else {
        const result expected = iv.empty()            ? result::empty_interval
                                : present < iv.size() ? result::not_contained
                                                      : result::ok;
        REQUIRE(s.remove(iv) == expected);
        if (expected == result::ok) {
          for (std::uint64_t v = a; v < b; ++v) model.erase(v);
        } else {
          REQUIRE(s == before);
        }
      }

      // Membership, size and canonical form agree with the model.
      for (std::uint64_t v = 0; v <= universe; ++v) REQUIRE(s.contains(v) == (model.count(v) == 1));
      REQUIRE(s.total_size() == model.size());
      const auto list = s.intervals();
      REQUIRE(list.size() == s.count());
      for (std::size_t i = 0; i < list.size(); ++i) {
        REQUIRE_FALSE(list[i].empty());
        if (i > 0) REQUIRE(list[i - 1].hi < list[i].lo);  // sorted, disjoint and not adjacent
      }
      // Range queries on a fresh random interval.
      const std::uint64_t c = rng() % (universe + 1);
      const std::uint64_t d = c + rng() % (universe + 1 - c);
      std::size_t in = 0;
      for (std::uint64_t v = c; v < d; ++v) in += model.count(v);
      REQUIRE(s.contains(interval{c, d}) == (in == d - c));
      REQUIRE(s.intersects(interval{c, d}) == (in > 0));
      const interval_set part = s.intersection({c, d});
      REQUIRE(part.total_size() == in);
      for (std::uint64_t v = 0; v <= universe; ++v) {
        REQUIRE(part.contains(v) == (c <= v && v < d && model.count(v) == 1));
      }
    }
  }
}
