// overlay/routing/owner_index.cpp — the segment map of owner_index.hpp: claims added and removed one interval
// at a time, segments split at the interval's ends and merged again once their claimants are changed.
#include "overlay/routing/owner_index.hpp"

#include <algorithm>
#include <iterator>

namespace phoenix::overlay {

bool owner_index::precedes(node_id a, node_id b) const {
  if (a == b || b == self_) return false;
  return a == self_ || a < b;
}

void owner_index::split_at(std::uint64_t at) {
  auto it = segments_.upper_bound(at);
  if (it == segments_.begin()) return;
  --it;
  if (it->first < at && at < it->second.hi) {
    segments_.emplace_hint(std::next(it), at, segment{it->second.hi, it->second.claimants});
    it->second.hi = at;
  }
}

// Only the boundaries at lo, at hi and between them can have changed; every other one still separates
// segments that differ or are not contiguous.
void owner_index::coalesce(std::uint64_t lo, std::uint64_t hi) {
  auto it = segments_.lower_bound(lo);
  if (it != segments_.begin()) --it;
  while (it != segments_.end()) {
    const auto next = std::next(it);
    if (next == segments_.end() || next->first > hi) break;
    if (it->second.hi == next->first && it->second.claimants == next->second.claimants) {
      it->second.hi = next->second.hi;
      segments_.erase(next);
    } else {
      it = next;
    }
  }
}

void owner_index::add(node_id owner, const std::vector<route_interval>& intervals) {
  const auto by_precedence = [this](node_id a, node_id b) { return precedes(a, b); };
  for (const auto& i : intervals) {
    if (i.empty()) continue;
    split_at(i.lo);
    split_at(i.hi);
    // Every segment that starts in [i.lo, i.hi) now ends by i.hi: gaps between them get a segment of their own.
    std::uint64_t cur = i.lo;
    auto it = segments_.lower_bound(cur);
    while (cur < i.hi) {
      if (it == segments_.end() || it->first > cur) {
        const std::uint64_t gap_end = it == segments_.end() ? i.hi : std::min(i.hi, it->first);
        segments_.emplace_hint(it, cur, segment{gap_end, {owner}});
        cur = gap_end;
      } else {
        auto& c = it->second.claimants;
        const auto pos = std::lower_bound(c.begin(), c.end(), owner, by_precedence);
        if (pos == c.end() || *pos != owner) c.insert(pos, owner);
        cur = it->second.hi;
        ++it;
      }
    }
    coalesce(i.lo, i.hi);
  }
}

void owner_index::remove(node_id owner, const std::vector<route_interval>& intervals) {
  for (const auto& i : intervals) {
    if (i.empty()) continue;
    split_at(i.lo);
    split_at(i.hi);
    for (auto it = segments_.lower_bound(i.lo); it != segments_.end() && it->first < i.hi;) {
      auto& c = it->second.claimants;
      if (const auto pos = std::find(c.begin(), c.end(), owner); pos != c.end()) c.erase(pos);
      it = c.empty() ? segments_.erase(it) : std::next(it);
    }
    coalesce(i.lo, i.hi);
  }
}

void owner_index::replace(node_id owner, const std::vector<route_interval>& before,
                          const std::vector<route_interval>& after) {
  remove(owner, before);
  add(owner, after);
}

std::optional<node_id> owner_index::owner_of(std::uint64_t vnode) const {
  auto it = segments_.upper_bound(vnode);
  if (it == segments_.begin()) return std::nullopt;
  --it;
  if (vnode >= it->second.hi) return std::nullopt;
  return it->second.claimants.front();
}

std::vector<route_interval> owner_index::unowned(const std::vector<route_interval>& intervals) const {
  std::vector<route_interval> out;
  for (const auto& i : intervals) {
    std::uint64_t lo = i.lo;
    auto it = segments_.upper_bound(lo);
    if (it != segments_.begin() && std::prev(it)->second.hi > lo) --it;
    for (; it != segments_.end() && it->first < i.hi && lo < i.hi; ++it) {
      if (it->first > lo) out.push_back({lo, it->first});
      lo = std::max(lo, it->second.hi);
    }
    if (lo < i.hi) out.push_back({lo, i.hi});
  }
  return out;
}

std::vector<owner_index::slot> owner_index::slots() const {
  std::vector<slot> out;
  for (const auto& [lo, s] : segments_) {
    const node_id owner = s.claimants.front();
    if (!out.empty() && out.back().hi == lo && out.back().owner == owner) {
      out.back().hi = s.hi;
    } else {
      out.push_back({lo, s.hi, owner});
    }
  }
  return out;
}

}  // namespace phoenix::overlay
