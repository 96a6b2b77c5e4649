// base/interval_set.cpp — see interval_set.hpp.
#include "base/interval_set.hpp"

#include <algorithm>
#include <iterator>

namespace phoenix::base {

bool is_adjacent(interval a, interval b) { return !a.empty() && !b.empty() && (a.hi == b.lo || b.hi == a.lo); }

bool overlaps(interval a, interval b) { return !a.empty() && !b.empty() && a.lo < b.hi && b.lo < a.hi; }

const char* to_string(interval_set::result r) {
  switch (r) {
    case interval_set::result::ok:
      return "ok";
    case interval_set::result::empty_interval:
      return "empty_interval";
    case interval_set::result::overlap:
      return "overlap";
    case interval_set::result::not_contained:
      return "not_contained";
  }
  return "unknown";
}

interval_set::map_type::const_iterator interval_set::find_containing(std::uint64_t v) const {
  // The only candidate is the last interval starting at or before v.
  auto after = by_lo_.upper_bound(v);
  if (after == by_lo_.begin()) return by_lo_.end();
  auto it = std::prev(after);
  return v < it->second ? it : by_lo_.end();
}

interval_set::result interval_set::add(interval s) {
  if (s.empty()) return result::empty_interval;
  if (intersects(s)) return result::overlap;
  std::uint64_t lo = s.lo;
  std::uint64_t hi = s.hi;
  // Merge with a neighbour that ends exactly at s.lo and one that starts exactly at s.hi, keeping the
  // representation canonical (no two adjacent intervals).
  auto next = by_lo_.lower_bound(s.hi);  // no interval starts inside s, so this is the first one after it
  if (next != by_lo_.end() && next->first == hi) {
    hi = next->second;
    next = by_lo_.erase(next);
  }
  if (next != by_lo_.begin()) {
    auto prev = std::prev(next);
    if (prev->second == lo) {
      lo = prev->first;
      by_lo_.erase(prev);
    }
  }
  by_lo_.emplace_hint(next, lo, hi);
  total_size_ += s.size();
  return result::ok;
}

interval_set::result interval_set::remove(interval s) {
  if (s.empty()) return result::empty_interval;
  // The set is canonical, so all of s is present only if one stored interval covers it.
  auto it = find_containing(s.lo);
  if (it == by_lo_.end() || it->second < s.hi) return result::not_contained;
  const interval held{it->first, it->second};
  auto hint = by_lo_.erase(it);
  if (s.hi < held.hi) hint = by_lo_.emplace_hint(hint, s.hi, held.hi);
  if (held.lo < s.lo) by_lo_.emplace_hint(hint, held.lo, s.lo);
  total_size_ -= s.size();
  return result::ok;
}

bool interval_set::contains(std::uint64_t v) const { return find_containing(v) != by_lo_.end(); }

bool interval_set::contains(interval s) const {
  if (s.empty()) return true;
  auto it = find_containing(s.lo);
  return it != by_lo_.end() && s.hi <= it->second;
}

bool interval_set::intersects(interval s) const {
  if (s.empty()) return false;
  // Either an interval starts inside s, or the one starting before s.lo reaches past it.
  auto it = by_lo_.lower_bound(s.lo);
  if (it != by_lo_.end() && it->first < s.hi) return true;
  return it != by_lo_.begin() && std::prev(it)->second > s.lo;
}

std::vector<interval> interval_set::intervals() const {
  std::vector<interval> out;
  out.reserve(by_lo_.size());
  for (const auto& [lo, hi] : by_lo_) out.push_back({lo, hi});
  return out;
}

interval_set interval_set::intersection(interval s) const {
  interval_set out;
  if (s.empty()) return out;
  auto it = by_lo_.upper_bound(s.lo);
  if (it != by_lo_.begin()) --it;  // the interval starting at or before s.lo may reach into s
  for (; it != by_lo_.end() && it->first < s.hi; ++it) {
    const interval part{std::max(it->first, s.lo), std::min(it->second, s.hi)};
    if (part.empty()) continue;
    // Parts are sorted and, coming from a canonical set, never adjacent: append directly.
    out.by_lo_.emplace_hint(out.by_lo_.end(), part.lo, part.hi);
    out.total_size_ += part.size();
  }
  return out;
}

}  // namespace phoenix::base
