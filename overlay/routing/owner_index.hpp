// overlay/routing/owner_index.hpp — which node owns each virtual node: every node claims intervals of the
// virtual node space, and where claims overlap (stale intervals while a migration's news spreads, or a hostile
// node's) the owner is the claimant that comes first in precedence order: this node (self), then ascending
// node_id.
//
// Claims are normally disjoint, and then each claimed interval is one slot of a sorted map: a node whose claim
// changes removes and adds only its own slots, O(log n) each, and a lookup is O(log n). Overlaps need every
// claim at once to resolve, so a change that makes claims overlap, and every change while they overlap, leaves
// the index stale: the owner repaints it from all claims (repaint(), O(n log n)) before it next looks up,
// and it is incremental again once a repaint finds no overlap. Memory is one slot per claimed interval in both
// modes; keeping the claimants of every piece instead let overlapping claims cost pieces × claimants.
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
  // [lo, hi) is owned (or, given to repaint(), claimed) by owner.
  struct slot {
    std::uint64_t lo = 0, hi = 0;
    node_id owner = 0;
    friend bool operator==(const slot&, const slot&) = default;
  };

  explicit owner_index(node_id self) : self_(self) {}

  // owner's claim changes from `before` (exactly what it claimed) to `after`; both sorted and disjoint, empty
  // intervals ignored. May leave the index stale().
  void change(node_id owner, const std::vector<route_interval>& before,
              const std::vector<route_interval>& after);
  // Until repaint(), the answers below are not to be trusted.
  bool stale() const { return stale_; }
  // Rebuilds the index from every claim there is (any order; empty intervals ignored).
  void repaint(std::vector<slot> claims);

  std::optional<node_id> owner_of(std::uint64_t vnode) const;
  // The parts of `intervals` (sorted, disjoint) that nobody owns.
  std::vector<route_interval> unowned(const std::vector<route_interval>& intervals) const;
  // Who owns what, sorted by lo: contiguous slots of one owner are one slot.
  std::vector<slot> slots() const;
  std::size_t slot_count() const { return slots_.size(); }

 private:
  struct piece {
    std::uint64_t hi = 0;
    node_id owner = 0;
  };
  bool precedes(node_id a, node_id b) const { return a != b && b != self_ && (a == self_ || a < b); }

  node_id self_;
  std::map<std::uint64_t, piece> slots_;  // lo -> piece; disjoint
  bool stale_ = false;
  bool painted_ = false;  // the last repaint resolved overlaps: slots are not the claims themselves
};

}  // namespace phoenix::overlay
