// Tests of overlay/routing/owner_index: a few claims by hand, then random claims, removals and replacements
// checked after every step against painting the claims in precedence order from scratch, and the memory that
// overlapping claims can make it hold.
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

// As route_table does: repainted from every claim when a change left the index stale.
void repaint_if_stale(owner_index& index, const painting& ref) {
  if (!index.stale()) return;
  std::vector<slot> all;
  for (const auto& [n, ivs] : ref.claims) {
    for (const auto& i : ivs) all.push_back({i.lo, i.hi, n});
  }
  index.repaint(std::move(all));
}

// Mostly within node n's own tenth of [0, 200), so that claims are often disjoint; now and then anywhere.
std::vector<route_interval> random_claim(node_id n, std::mt19937_64& rng) {
  auto iv = random_intervals(rng);
  std::erase_if(iv, [](const route_interval& i) { return i.empty(); });  // as route_table keeps them
  if (rng() % 8 == 0) return iv;
  std::vector<route_interval> own;
  for (const auto& i : iv) {
    if (i.lo < 200 && i.hi <= 200) own.push_back({n * 10 + i.lo % 10, n * 10 + i.lo % 10 + 1});
  }
  std::sort(own.begin(), own.end(),
            [](const route_interval& a, const route_interval& b) { return a.lo < b.lo; });
  own.erase(std::unique(own.begin(), own.end(),
                        [](const route_interval& a, const route_interval& b) { return a.lo == b.lo; }),
            own.end());
  return own;
}

}  // namespace

TEST_CASE("owner_index: disjoint claims answer their owner and gaps answer nobody") {
  owner_index index(50);
  index.change(2, {}, {{0, 10}, {20, 30}});
  index.change(3, {}, {{10, 15}});
  index.change(50, {}, {{40, 50}});
  index.change(4, {}, {{5, 5}, {60, 60}});  // empty: nothing
  REQUIRE_FALSE(index.stale());

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
  CHECK(index.slot_count() == 4);
  CHECK(index.unowned({{0, 60}}) == std::vector<route_interval>{{15, 20}, {30, 40}, {50, 60}});
  CHECK(index.unowned({{0, 5}, {12, 22}}) == std::vector<route_interval>{{15, 20}});

  index.change(2, {{0, 10}, {20, 30}}, {{20, 25}});
  index.change(3, {{10, 15}}, {});
  REQUIRE_FALSE(index.stale());
  CHECK(index.slots() == std::vector<slot>{{20, 25, 2}, {40, 50, 50}});
}

TEST_CASE("owner_index: overlapping claims go to self first and then to the lower node_id") {
  owner_index index(50);
  index.change(7, {}, {{0, 100}});
  index.change(3, {}, {{20, 60}});
  CHECK(index.stale());  // an overlap: only a repaint from every claim can resolve it
  index.repaint({{0, 100, 7}, {40, 50, 50}, {20, 60, 3}});
  REQUIRE_FALSE(index.stale());
  CHECK(index.owner_of(10) == 7);
  CHECK(index.owner_of(25) == 3);
  CHECK(index.owner_of(45) == 50);
  CHECK(index.owner_of(55) == 3);
  CHECK(index.owner_of(70) == 7);
  CHECK(index.slots() == std::vector<slot>{{0, 20, 7}, {20, 40, 3}, {40, 50, 50}, {50, 60, 3}, {60, 100, 7}});

  SUBCASE("while claims overlap every change waits for a repaint") {
    index.change(50, {{40, 50}}, {});
    CHECK(index.stale());
    index.repaint({{0, 100, 7}, {20, 60, 3}});
    CHECK(index.slots() == std::vector<slot>{{0, 20, 7}, {20, 60, 3}, {60, 100, 7}});
  }
  SUBCASE("a repaint without overlaps makes changes incremental again") {
    index.repaint({{0, 20, 7}, {20, 60, 3}});
    index.change(3, {{20, 60}}, {{20, 30}});
    CHECK_FALSE(index.stale());
    CHECK(index.slots() == std::vector<slot>{{0, 20, 7}, {20, 30, 3}});
  }
}

TEST_CASE("owner_index: removing what was not claimed leaves the index to a repaint") {
  owner_index index(50);
  index.change(2, {}, {{0, 10}});
  index.change(4, {{0, 10}}, {});
  CHECK(index.stale());
  index.repaint({{0, 10, 2}});
  CHECK(index.owner_of(0) == 2);
  CHECK_FALSE(index.stale());
}

TEST_CASE("owner_index: intervals that reach the top of the space do not overflow") {
  owner_index index(50);
  index.change(2, {}, {{top - 10, top}});
  CHECK(index.owner_of(top - 1) == 2);
  CHECK(index.owner_of(top) == nobody());
  index.repaint({{top - 10, top, 2}, {0, top, 3}});
  CHECK(index.owner_of(top - 1) == 2);
  CHECK(index.owner_of(top - 11) == 3);
  CHECK(index.slots() == std::vector<slot>{{0, top - 10, 3}, {top - 10, top, 2}});
  CHECK(index.unowned({{0, top}}).empty());
  index.repaint({{top - 10, top, 2}});
  CHECK(index.unowned({{0, top}}) == std::vector<route_interval>{{0, top - 10}});
  CHECK(index.slots() == std::vector<slot>{{top - 10, top, 2}});
}

// Thousands of sources claiming the whole space over one that claims thousands of small pieces: an index that
// kept every piece's claimants held pieces x claimants; this one holds at most a slot per claimed interval.
TEST_CASE("owner_index: overlapping claims cost no more memory than the claims themselves") {
  owner_index index(1);
  std::vector<slot> claims;
  for (std::uint64_t k = 0; k < 4096; ++k) claims.push_back({2 * k, 2 * k + 1, 2});
  for (node_id n = 1000; n < 3000; ++n) claims.push_back({0, top, n});
  index.repaint(claims);
  CHECK(index.slot_count() <= 2 * claims.size() + 1);
  CHECK(index.owner_of(0) == 2);
  CHECK(index.owner_of(1) == 1000);
  CHECK(index.owner_of(top - 1) == 1000);
}

// 2,000 random steps over 20 nodes, this one (10) in the middle of the others' ids so that precedence is not
// the order of ids.
TEST_CASE("owner_index: random claims removals and replacements match painting in precedence order") {
  constexpr node_id self = 10;
  owner_index index(self);
  painting ref{self, {}};
  std::mt19937_64 rng(20240611);
  int incremental = 0, repainted = 0;

  for (int step = 0; step < 2000; ++step) {
    CAPTURE(step);
    const node_id n = rng() % 20;
    const auto before = ref.claims.contains(n) ? ref.claims.at(n) : std::vector<route_interval>{};
    auto after = rng() % 3 == 0 ? std::vector<route_interval>{} : random_claim(n, rng);
    if (after.empty()) {
      ref.claims.erase(n);
    } else {
      ref.claims[n] = after;
    }
    index.change(n, before, after);
    ++(index.stale() ? repainted : incremental);
    repaint_if_stale(index, ref);

    REQUIRE(index.slots() == ref.slots());
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
  CHECK(incremental > 0);  // both paths were taken
  CHECK(repainted > 0);
}
