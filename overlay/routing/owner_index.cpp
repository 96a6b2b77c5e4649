// overlay/routing/owner_index.cpp — the slot map of owner_index.hpp: claims changed one interval at a time
// while they are disjoint, painted in precedence order from all of them when they are not.
#include "overlay/routing/owner_index.hpp"

#include <algorithm>
#include <iterator>
#include <set>

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

// Without overlaps the claims are the slots themselves, one each, and changes can be applied one by one again.
// With them, one sweep over the claims' ends in order, the claims covering each point kept by precedence: the
// first owns the piece up to the next end. O(C log C) for C claims, however many cover one another (painting
// claim by claim over what was already painted cost the pieces under every wide claim).
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
  struct end_of_claim {
    std::uint64_t at;
    node_id owner;
  };
  std::vector<end_of_claim> ends;
  ends.reserve(claims.size());
  for (const slot& c : claims) ends.push_back({c.hi, c.owner});
  std::sort(ends.begin(), ends.end(), [](const end_of_claim& x, const end_of_claim& y) { return x.at < y.at; });
  const auto by_precedence = [this](node_id a, node_id b) { return precedes(a, b); };
  std::multiset<node_id, decltype(by_precedence)> covering(by_precedence);
  auto starts = claims.begin();
  auto stops = ends.begin();
  while (starts != claims.end() || stops != ends.end()) {
    const std::uint64_t at = starts == claims.end() ? stops->at
                             : stops == ends.end()  ? starts->lo
                                                    : std::min(starts->lo, stops->at);
    for (; stops != ends.end() && stops->at == at; ++stops) covering.erase(covering.find(stops->owner));
    for (; starts != claims.end() && starts->lo == at; ++starts) covering.insert(starts->owner);
    if (covering.empty()) continue;
    // Up to the next end of any claim (there is one: every claim covering `at` ends after it).
    std::uint64_t next = stops->at;
    if (starts != claims.end()) next = std::min(next, starts->lo);
    const node_id owner = *covering.begin();
    const auto last = slots_.empty() ? slots_.end() : std::prev(slots_.end());
    if (last != slots_.end() && last->second.hi == at && last->second.owner == owner) {
      last->second.hi = next;
    } else {
      slots_.emplace_hint(slots_.end(), at, piece{next, owner});
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
