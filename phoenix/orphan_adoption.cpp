#include "phoenix/orphan_adoption.hpp"

namespace phoenix {

std::optional<OrphanedInterval> adoption_for(const std::vector<Interval>& mine,
                                             const std::vector<OrphanedInterval>& orphans,
                                             std::chrono::milliseconds after,
                                             const std::function<bool(vp_t)>& owned) {
  if (mine.size() != 1 || mine[0].empty()) return std::nullopt;
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
