#include "phoenix/orphan_adoption.hpp"

#include <algorithm>

namespace phoenix {

std::optional<OrphanedInterval> adoption_for(const std::vector<Interval>& mine,
                                             const std::vector<OrphanedInterval>& orphans,
                                             std::chrono::milliseconds after,
                                             const std::function<bool(vp_t)>& owned,
                                             const std::vector<Interval>& given_lost) {
  if (mine.size() > 1) return std::nullopt;
  const bool empty = mine.empty() || mine[0].empty();
  for (const auto& o : orphans) {
    if (o.lost_for < after) continue;
    for (const auto& g : given_lost) {
      const Interval part{std::max(o.span.lo, g.lo), std::min(o.span.hi, g.hi)};
      if (part.lo >= part.hi) continue;
      // Below the part, this node goes first, as for any orphan. Above it, or assuming nothing, it waits four
      // times as long: the taker may have been heard assuming the part before it crashed, by a node below it,
      // which then adopts it by the rules below.
      const bool below = !empty && part.lo == mine[0].hi;
      const bool last_resort = empty || part.hi == mine[0].lo;
      if (below || (last_resort && o.lost_for >= 4 * after)) return OrphanedInterval{part, o.owner, o.lost_for};
    }
  }
  if (empty) return std::nullopt;
  const Interval i = mine[0];
  for (const auto& o : orphans)  // from below first: the lower neighbour adopts
    if (o.span.lo == i.hi && o.lost_for >= after) return o;
  for (const auto& o : orphans)
    if (o.span.hi == i.lo && (o.lost_for >= 4 * after ||
                              (o.lost_for >= 2 * after && (o.span.lo == 0 || !owned(o.span.lo - 1)))))
      return o;
  return std::nullopt;
}

}  // namespace phoenix
