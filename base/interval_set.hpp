// base/interval_set.hpp — sets of virtual nodes as half-open intervals [lo, hi) with u64 endpoints.
//
// Contract:
//  * An interval with lo >= hi is empty. With u64 endpoints the largest representable member is 2^64 - 2;
//    the space [0, L) always fits because L is itself a u64.
//  * interval_set keeps its intervals sorted, disjoint and non-adjacent (adjacent ones are merged), so two sets
//    holding the same virtual nodes compare equal and list the same intervals. Lookups and updates are
//    O(log n) in the number of intervals; intervals() and intersection() are linear in their output.
//  * add() and remove() are all-or-nothing: a refused update returns the reason and leaves the set unchanged.
//    An empty interval is refused by both (it is almost certainly a caller's bug). As queries, an empty
//    interval is contained in every set and intersects none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <phoenix/interval.hpp>
#include <vector>

namespace phoenix::base {

using interval = Interval;  // <phoenix/interval.hpp>

// a ends where b begins or b ends where a begins; both non-empty.
bool is_adjacent(interval a, interval b);
// They share at least one value (so false if either is empty).
bool overlaps(interval a, interval b);

class interval_set {
 public:
  enum class result { ok, empty_interval, overlap, not_contained };

  interval_set() = default;

  result add(interval s);     // overlap: some value of s is already present
  result remove(interval s);  // not_contained: some value of s is absent; may split an interval in two

  bool contains(std::uint64_t v) const;
  bool contains(interval s) const;  // every value of s is present
  bool intersects(interval s) const;

  std::vector<interval> intervals() const;  // sorted by lo
  std::size_t count() const { return by_lo_.size(); }
  bool empty() const { return by_lo_.empty(); }
  std::uint64_t total_size() const { return total_size_; }  // cannot overflow: members are < 2^64 - 1

  // The parts of s present in this set (used when releasing: which of s do we hold).
  interval_set intersection(interval s) const;

  friend bool operator==(const interval_set&, const interval_set&) = default;

 private:
  using map_type = std::map<std::uint64_t, std::uint64_t>;  // lo -> hi
  // The stored interval containing v, or end().
  map_type::const_iterator find_containing(std::uint64_t v) const;

  map_type by_lo_;
  std::uint64_t total_size_ = 0;
};

const char* to_string(interval_set::result r);

}  // namespace phoenix::base
