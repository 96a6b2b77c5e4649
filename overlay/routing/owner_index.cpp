// overlay/routing/owner_index.cpp — the slot map of owner_index.hpp: claims changed one interval at a time
// while they are disjoint, painted in precedence order from all of them when they are not.
#include "overlay/routing/owner_index.hpp"

#include <algorithm>
#include <iterator>

namespace phoenix::overlay {

void owner_index::change(node_id owner, const std::vector<route_interval>& before,
                         const std::vector<route_interval>& after) {
  if (stale_ || painted_) {
    stale_ = true;
    return;
  }
  for (const auto& i : before) {
    if (i.empty()) continue;
    const auto it = slots_.find(i.lo);
    if (it == slots_.end() || it->second.hi != i.hi || it->second.owner != owner) {
      stale_ = true;  // not what it claimed: the caller's bookkeeping decides, at the repaint
      return;
    }
    slots_.erase(it);
  }
  for (const auto& i : after) {
    if (i.empty()) continue;
    const auto next = slots_.lower_bound(i.lo);
    const bool overlaps = (next != slots_.end() && next->first < i.hi) ||
                          (next != slots_.begin() && std::prev(next)->second.hi > i.lo);
    if (overlaps) {
      stale_ = true;
      return;
    }
    slots_.emplace_hint(next, i.lo, piece{i.hi, owner});
  }
}

// Sources in precedence order, each filling only what is still free. Without overlaps that is the claims
// themselves, one slot each, and changes can be applied one by one again.
void owner_index::repaint(std::vector<slot> claims) {
  std::erase_if(claims, [](const slot& c) { return c.lo >= c.hi; });
  stale_ = false;
  slots_.clear();
  std::sort(claims.begin(), claims.end(), [](const slot& x, const slot& y) { return x.lo < y.lo; });
  painted_ = std::adjacent_find(claims.begin(), claims.end(),
                                [](const slot& x, const slot& y) { return y.lo < x.hi; }) != claims.end();
  if (!painted_) {
    for (const slot& c : claims) slots_.emplace_hint(slots_.end(), c.lo, piece{c.hi, c.owner});
    return;
  }
  std::stable_sort(claims.begin(), claims.end(),
                   [this](const slot& x, const slot& y) { return precedes(x.owner, y.owner); });
  for (const slot& want : claims) {
    std::uint64_t cur = want.lo;
    auto it = slots_.upper_bound(cur);
    if (it != slots_.begin() && std::prev(it)->second.hi > cur) cur = std::prev(it)->second.hi;
    while (cur < want.hi) {
      it = slots_.lower_bound(cur);  // first slot at or after cur; nothing covers cur itself
      const std::uint64_t gap_end = it == slots_.end() ? want.hi : std::min(want.hi, it->first);
      if (cur < gap_end) slots_.emplace_hint(it, cur, piece{gap_end, want.owner});
      if (it == slots_.end()) break;
      cur = it->second.hi;
    }
  }
}

std::optional<node_id> owner_index::owner_of(std::uint64_t vnode) const {
  auto it = slots_.upper_bound(vnode);
  if (it == slots_.begin()) return std::nullopt;
  --it;
  if (vnode >= it->second.hi) return std::nullopt;
  return it->second.owner;
}

std::vector<route_interval> owner_index::unowned(const std::vector<route_interval>& intervals) const {
  std::vector<route_interval> out;
  for (const auto& i : intervals) {
    std::uint64_t lo = i.lo;
    auto it = slots_.upper_bound(lo);
    if (it != slots_.begin() && std::prev(it)->second.hi > lo) --it;
    for (; it != slots_.end() && it->first < i.hi && lo < i.hi; ++it) {
      if (it->first > lo) out.push_back({lo, it->first});
      lo = std::max(lo, it->second.hi);
    }
    if (lo < i.hi) out.push_back({lo, i.hi});
  }
  return out;
}

std::vector<owner_index::slot> owner_index::slots() const {
  std::vector<slot> out;
  for (const auto& [lo, p] : slots_) {
    if (!out.empty() && out.back().hi == lo && out.back().owner == p.owner) {
      out.back().hi = p.hi;
    } else {
      out.push_back({lo, p.hi, p.owner});
    }
  }
  return out;
}

}  // namespace phoenix::overlay
