// Tests of overlay/routing/owner_index: a few claims by hand, then random claims, removals and replacements
// checked after every step against painting the claims in precedence order from scratch.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "overlay/routing/owner_index.hpp"

using namespace phoenix::overlay;
using slot = owner_index::slot;

namespace doctest {
template <>
struct StringMaker<std::vector<slot>> {
  static String convert(const std::vector<slot>& v) {
    std::ostringstream out;
    for (const auto& s : v) out << "[" << s.lo << ", " << s.hi << ")=" << s.owner << " ";
    return out.str().c_str();
  }
};
template <>
struct StringMaker<std::vector<route_interval>> {
  static String convert(const std::vector<route_interval>& v) {
    std::ostringstream out;
    for (const auto& i : v) out << "[" << i.lo << ", " << i.hi << ") ";
    return out.str().c_str();
  }
};
}  // namespace doctest

namespace {

constexpr std::uint64_t top = std::numeric_limits<std::uint64_t>::max();

std::optional<node_id> nobody() { return std::nullopt; }

// What the index should hold: every node's claim, painted in precedence order, each filling what is free.
struct painting {
  node_id self;
  std::map<node_id, std::vector<route_interval>> claims;

  std::vector<node_id> by_precedence() const {
    std::vector<node_id> out;
    if (claims.contains(self)) out.push_back(self);
    for (const auto& [n, iv] : claims) {
      if (n != self) out.push_back(n);
    }
    return out;
  }

  // Every interval end, so that each piece between two consecutive cuts is claimed whole or not at all.
  std::vector<std::uint64_t> cuts(const std::vector<route_interval>& more = {}) const {
    std::set<std::uint64_t> c;
    for (const auto& [n, ivs] : claims) {
      for (const auto& i : ivs) {
        if (!i.empty()) c.insert({i.lo, i.hi});
      }
    }
    for (const auto& i : more) {
      if (!i.empty()) c.insert({i.lo, i.hi});
    }
    return {c.begin(), c.end()};
  }

  static bool claims_piece(const std::vector<route_interval>& ivs, std::uint64_t lo, std::uint64_t hi) {
    return std::any_of(ivs.begin(), ivs.end(),
                       [&](const route_interval& i) { return i.lo <= lo && hi <= i.hi; });
  }

  // Sources in precedence order, each filling only the pieces still free.
  std::vector<slot> slots() const {
    const auto c = cuts();
    std::vector<std::optional<node_id>> painted(c.empty() ? 0 : c.size() - 1);
    for (node_id n : by_precedence()) {
      for (std::size_t p = 0; p < painted.size(); ++p) {
        if (!painted[p] && claims_piece(claims.at(n), c[p], c[p + 1])) painted[p] = n;
      }
    }
    std::vector<slot> out;
    for (std::size_t p = 0; p < painted.size(); ++p) {
      if (!painted[p]) continue;
      if (!out.empty() && out.back().hi == c[p] && out.back().owner == *painted[p]) {
        out.back().hi = c[p + 1];
      } else {
        out.push_back({c[p], c[p + 1], *painted[p]});
      }
    }
    return out;
  }

  // The number of maximal runs of contiguous pieces with the same claimants: what a map that never
  // fragments holds.
  std::size_t segments() const {
    const auto c = cuts();
    std::size_t n = 0;
    std::optional<std::set<node_id>> prev;
    for (std::size_t p = 0; p + 1 < c.size(); ++p) {
      std::set<node_id> who;
      for (const auto& [owner, ivs] : claims) {
        if (claims_piece(ivs, c[p], c[p + 1])) who.insert(owner);
      }
      if (!who.empty() && who != prev) ++n;
      prev = who.empty() ? std::nullopt : std::optional(who);
    }
    return n;
  }

  std::optional<node_id> owner_of(std::uint64_t v) const {
    for (node_id n : by_precedence()) {
      for (const auto& i : claims.at(n)) {
        if (i.contains(v)) return n;
      }
    }
    return std::nullopt;
  }

  std::vector<route_interval> unowned(const std::vector<route_interval>& query) const {
    const auto c = cuts(query);
    std::vector<route_interval> out;
    for (const auto& q : query) {
      const std::size_t first = out.size();
      for (std::size_t p = 0; p + 1 < c.size(); ++p) {
        if (c[p] < q.lo || c[p + 1] > q.hi) continue;
        const bool claimed = std::any_of(claims.begin(), claims.end(), [&](const auto& kv) {
          return claims_piece(kv.second, c[p], c[p + 1]);
        });
        if (claimed) continue;
        if (out.size() > first && out.back().hi == c[p]) {
          out.back().hi = c[p + 1];
        } else {
          out.push_back({c[p], c[p + 1]});
        }
      }
    }
    return out;
  }
};

// A random sorted, disjoint list of up to four intervals, mostly within [0, 200), sometimes near the top of
// the space or across it, and now and then with an empty one in it.
std::vector<route_interval> random_intervals(std::mt19937_64& rng) {
  const std::size_t n = rng() % 5;
  std::set<std::uint64_t> ends;
  while (ends.size() < 2 * n) ends.insert(rng() % 8 == 0 ? top - rng() % 21 : rng() % 201);
  std::vector<route_interval> out;
  for (auto it = ends.begin(); it != ends.end(); std::advance(it, 2)) out.push_back({*it, *std::next(it)});
  if (rng() % 8 == 0) {
    const std::uint64_t at = rng() % 201;
    const auto pos = std::find_if(out.begin(), out.end(), [&](const route_interval& i) { return i.lo > at; });
    out.insert(pos, {at, at});
  }
  return out;
}

}  // namespace

TEST_CASE("owner_index: disjoint claims answer their owner and gaps answer nobody") {
  owner_index index(50);
  index.add(2, {{0, 10}, {20, 30}});
  index.add(3, {{10, 15}});
  index.add(50, {{40, 50}});
  index.add(4, {{5, 5}, {60, 60}});  // empty: nothing

  CHECK(index.owner_of(0) == 2);
  CHECK(index.owner_of(9) == 2);
  CHECK(index.owner_of(10) == 3);
  CHECK(index.owner_of(14) == 3);
  CHECK(index.owner_of(15) == nobody());
  CHECK(index.owner_of(19) == nobody());
  CHECK(index.owner_of(20) == 2);
  CHECK(index.owner_of(29) == 2);
  CHECK(index.owner_of(30) == nobody());
  CHECK(index.owner_of(45) == 50);
  CHECK(index.owner_of(50) == nobody());
  CHECK(index.owner_of(top) == nobody());
  CHECK(index.slots() == std::vector<slot>{{0, 10, 2}, {10, 15, 3}, {20, 30, 2}, {40, 50, 50}});
  CHECK(index.segment_count() == 4);
  CHECK(index.unowned({{0, 60}}) == std::vector<route_interval>{{15, 20}, {30, 40}, {50, 60}});
  CHECK(index.unowned({{0, 5}, {12, 22}}) == std::vector<route_interval>{{15, 20}});

  index.clear();
  CHECK(index.segment_count() == 0);
  CHECK(index.owner_of(0) == nobody());
}

TEST_CASE("owner_index: overlapping claims go to self first and then to the lower node_id") {
  owner_index index(50);
  index.add(7, {{0, 100}});
  index.add(3, {{20, 60}});
  index.add(50, {{40, 50}});
  CHECK(index.owner_of(10) == 7);
  CHECK(index.owner_of(25) == 3);
  CHECK(index.owner_of(45) == 50);
  CHECK(index.owner_of(55) == 3);
  CHECK(index.owner_of(70) == 7);
  CHECK(index.slots() == std::vector<slot>{{0, 20, 7}, {20, 40, 3}, {40, 50, 50}, {50, 60, 3}, {60, 100, 7}});

  SUBCASE("removing the winner exposes the next") {
    index.remove(50, {{40, 50}});
    CHECK(index.owner_of(45) == 3);
    CHECK(index.slots() == std::vector<slot>{{0, 20, 7}, {20, 60, 3}, {60, 100, 7}});
    index.remove(3, {{20, 60}});
    CHECK(index.owner_of(45) == 7);
    CHECK(index.slots() == std::vector<slot>{{0, 100, 7}});
    CHECK(index.segment_count() == 1);
  }
  SUBCASE("a replaced claim moves the winner with it") {
    index.replace(3, {{20, 60}}, {{80, 120}});
    CHECK(index.owner_of(25) == 7);
    CHECK(index.owner_of(90) == 3);
    CHECK(index.slots() == std::vector<slot>{{0, 40, 7}, {40, 50, 50}, {50, 80, 7}, {80, 120, 3}});
  }
}

TEST_CASE("owner_index: a claim made twice counts once and removing what is not claimed changes nothing") {
  owner_index index(50);
  index.add(2, {{0, 10}});
  index.add(2, {{0, 10}});
  index.add(3, {{0, 10}});
  const auto before = index.slots();
  index.remove(4, {{0, 100}});
  index.remove(50, {{5, 8}});
  CHECK(index.slots() == before);
  CHECK(index.segment_count() == 1);

  index.remove(2, {{0, 10}});
  CHECK(index.owner_of(0) == 3);
  index.remove(3, {{0, 10}});
  CHECK(index.owner_of(0) == nobody());
  CHECK(index.segment_count() == 0);
}

TEST_CASE("owner_index: intervals that reach the top of the space do not overflow") {
  owner_index index(50);
  index.add(2, {{top - 10, top}});
  CHECK(index.owner_of(top - 1) == 2);
  CHECK(index.owner_of(top) == nobody());
  index.add(3, {{0, top}});
  CHECK(index.owner_of(top - 1) == 2);
  CHECK(index.owner_of(top - 11) == 3);
  CHECK(index.slots() == std::vector<slot>{{0, top - 10, 3}, {top - 10, top, 2}});
  CHECK(index.unowned({{0, top}}).empty());
  index.remove(3, {{0, top}});
  CHECK(index.unowned({{0, top}}) == std::vector<route_interval>{{0, top - 10}});
  CHECK(index.slots() == std::vector<slot>{{top - 10, top, 2}});
}

// 2,000 random steps over 20 nodes, this one (10) in the middle of the others' ids so that precedence is not
// the order of ids.
TEST_CASE("owner_index: random claims removals and replacements match painting in precedence order") {
  constexpr node_id self = 10;
  owner_index index(self);
  painting ref{self, {}};
  std::mt19937_64 rng(20240611);
  auto claimed = [&](node_id n) {
    return ref.claims.contains(n) ? ref.claims.at(n) : std::vector<route_interval>{};
  };
  auto set_claim = [&](node_id n, std::vector<route_interval> iv) {
    if (iv.empty()) {
      ref.claims.erase(n);
    } else {
      ref.claims[n] = std::move(iv);
    }
  };

  for (int step = 0; step < 2000; ++step) {
    CAPTURE(step);
    const node_id n = rng() % 20;
    switch (rng() % 5) {
      case 0:  // a new claim, or the same one again
        if (ref.claims.contains(n)) {
          index.add(n, ref.claims.at(n));
        } else {
          auto iv = random_intervals(rng);
          index.add(n, iv);
          set_claim(n, iv);
        }
        break;
      case 1:
        index.remove(n, claimed(n));
        set_claim(n, {});
        break;
      case 2:
      case 3: {
        auto iv = random_intervals(rng);
        index.replace(n, claimed(n), iv);
        set_claim(n, iv);
        break;
      }
      default:  // a node that claims nothing removes something
        if (!ref.claims.contains(n)) index.remove(n, random_intervals(rng));
        break;
    }

    REQUIRE(index.slots() == ref.slots());
    REQUIRE(index.segment_count() == ref.segments());
    std::vector<std::uint64_t> probes;
    for (std::uint64_t v = 0; v <= 201; ++v) probes.push_back(v);
    for (std::uint64_t v = top - 21; v != 0; ++v) probes.push_back(v);  // up to top itself
    for (std::uint64_t v : probes) {
      if (index.owner_of(v) != ref.owner_of(v)) {
        FAIL_CHECK("owner_of(" << v << ") differs");
        break;
      }
    }
    for (int q = 0; q < 3; ++q) {
      const auto query = random_intervals(rng);
      CHECK(index.unowned(query) == ref.unowned(query));
    }
  }

  for (const auto& [n, iv] : ref.claims) index.remove(n, iv);
  CHECK(index.segment_count() == 0);
  CHECK(index.slots().empty());
}
