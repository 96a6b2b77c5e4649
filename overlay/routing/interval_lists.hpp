// overlay/routing/interval_lists.hpp — lists of intervals as the routing table keeps them: sorted by lo,
// disjoint, none empty.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "overlay/routing/route_table.hpp"

namespace phoenix::overlay {

// Sorted, with empty intervals dropped and overlapping or adjacent ones merged.
inline std::vector<route_interval> normalised(std::vector<route_interval> v) {
  std::erase_if(v, [](const route_interval& i) { return i.lo >= i.hi; });
  std::sort(v.begin(), v.end(), [](const route_interval& a, const route_interval& b) { return a.lo < b.lo; });
  std::vector<route_interval> out;
  for (const auto& i : v) {
    if (!out.empty() && i.lo <= out.back().hi) {
      out.back().hi = std::max(out.back().hi, i.hi);  // overlapping or adjacent: one interval
    } else {
      out.push_back(i);
    }
  }
  return out;
}

// The parts two sorted, disjoint interval lists have in common.
inline std::vector<route_interval> common(const std::vector<route_interval>& a,
                                          const std::vector<route_interval>& b) {
  std::vector<route_interval> out;
  for (auto i = a.begin(), j = b.begin(); i != a.end() && j != b.end();) {
    const std::uint64_t lo = std::max(i->lo, j->lo), hi = std::min(i->hi, j->hi);
    if (lo < hi) out.push_back({lo, hi});
    (i->hi < j->hi ? i : j)++;
  }
  return out;
}

// Whether `a` has anything in common with the sorted, disjoint list `b`: O(|a| log |b|), so that checking many
// short lists against one long one does not walk the long one each time.
inline bool overlap(const std::vector<route_interval>& a, const std::vector<route_interval>& b) {
  for (const auto& i : a) {
    const auto j = std::upper_bound(b.begin(), b.end(), i.lo,
                                    [](std::uint64_t v, const route_interval& x) { return v < x.hi; });
    if (j != b.end() && j->lo < i.hi) return true;
  }
  return false;
}

}  // namespace phoenix::overlay
