// overlay/routing/owner_index.hpp — which node owns each virtual node, kept up to date claim by claim: every
// node claims intervals of the virtual node space, and where claims overlap (a migration in flight) the owner
// is the claimant that comes first in precedence order: this node (self), then ascending node_id.
//
// A segment map: the covered space cut into segments [lo, hi), each with the set of nodes that claim all of
// it, kept in precedence order (usually one). Adding or removing an interval splits segments at its ends,
// changes the claimants of the k segments inside and merges the changed ones with equal neighbours again, in
// O(log n + k); answering who owns a virtual node is one lookup, O(log n). Rebuilding the whole answer after
// every change, as painting sources in precedence order does, costs O(n log n) each time.
//
// Pure data structure: no I/O; single-threaded, const members may run concurrently with each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <phoenix/interval.hpp>
#include <vector>

namespace phoenix::overlay {

using node_id = std::uint64_t;
using route_interval = Interval;  // <phoenix/interval.hpp>

class owner_index {
 public:
  // [lo, hi) is owned by owner.
  struct slot {
    std::uint64_t lo = 0, hi = 0;
    node_id owner = 0;
    friend bool operator==(const slot&, const slot&) = default;
  };

  explicit owner_index(node_id self) : self_(self) {}

  // owner claims each of `intervals` (sorted and disjoint; empty ones are ignored). A claim made twice counts
  // once: claimants are a set.
  void add(node_id owner, const std::vector<route_interval>& intervals);
  // owner no longer claims `intervals` (what it was added with); what it did not claim is left as it is.
  void remove(node_id owner, const std::vector<route_interval>& intervals);
  // owner's claim changes from `before` to `after`.
  void replace(node_id owner, const std::vector<route_interval>& before,
               const std::vector<route_interval>& after);
  void clear() { segments_.clear(); }

  std::optional<node_id> owner_of(std::uint64_t vnode) const;
  // The parts of `intervals` (sorted, disjoint) that nobody claims.
  std::vector<route_interval> unowned(const std::vector<route_interval>& intervals) const;
  // Who owns what, sorted by lo: contiguous slots of one owner are one slot.
  std::vector<slot> slots() const;
  std::size_t segment_count() const { return segments_.size(); }

 private:
  struct segment {
    std::uint64_t hi = 0;
    std::vector<node_id> claimants;  // never empty; in precedence order, so the owner is the first
  };
  using segment_map = std::map<std::uint64_t, segment>;  // lo -> segment; disjoint

  bool precedes(node_id a, node_id b) const;
  // Cuts the segment that contains `at` strictly inside it into [lo, at) and [at, hi).
  void split_at(std::uint64_t at);
  // Merges the segments that start in [lo, hi] with their predecessor when contiguous with equal claimants.
  void coalesce(std::uint64_t lo, std::uint64_t hi);

  node_id self_;
  segment_map segments_;
};

}  // namespace phoenix::overlay
