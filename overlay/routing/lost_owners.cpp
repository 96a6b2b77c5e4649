// overlay/routing/lost_owners.cpp — owners that went away holding intervals (route_table::lost_owners): the
// records of sources lost while they advertised intervals, kept until another node owns what they held.
#include <algorithm>
#include <iterator>

#include "overlay/routing/interval_lists.hpp"
#include "overlay/routing/route_table.hpp"

namespace phoenix::overlay {

void route_table::note_lost(node_id source, const std::vector<route_interval>& intervals, time_point now,
                            std::vector<route_interval> given) {
  drop_lost(source);
  if (intervals.size() > params_.max_held_intervals) return;
  while (!lost_.empty() && (lost_.size() >= params_.max_sources ||
                            lost_intervals_ + intervals.size() > params_.max_held_intervals))
    drop_lost(lost_by_age_.begin()->second);
  lost_[source] = lost_owner{source, intervals, now, common(intervals, normalised(std::move(given)))};
  lost_by_age_.emplace(now, source);
  lost_intervals_ += intervals.size();
  recheck_lost_.insert(recheck_lost_.end(), intervals.begin(), intervals.end());  // owned already, in part?
}

// One more interval in the taker's record (made if there is none), given by this node.
void route_table::note_lost_in_transit(node_id source, route_interval i, time_point since) {
  if (source == self_ || i.empty() || is_reachable(source)) return;
  std::vector<route_interval> all{i}, given{i};
  if (const auto it = lost_.find(source); it != lost_.end()) {
    all.insert(all.end(), it->second.intervals.begin(), it->second.intervals.end());
    given.insert(given.end(), it->second.given.begin(), it->second.given.end());
    since = std::min(since, it->second.since);
  }
  note_lost(source, normalised(std::move(all)), since, std::move(given));
  finish_mutation();
}

// Newer news of a lost source: its record keeps only what that news names too (a record never grows: what
// it lost was adopted or given away for good), and what this node gave it, which no news can name; news that
// names nothing (a withdrawal: it was alive, and left) ends the record.
void route_table::shrink_lost(node_id source, const std::vector<route_interval>& intervals) {
  const auto it = lost_.find(source);
  if (it == lost_.end()) return;
  if (intervals.empty()) return drop_lost(source);
  it->second.given = common(it->second.given, it->second.intervals);
  auto left = normalised([&] {
    auto both = common(it->second.intervals, intervals);
    both.insert(both.end(), it->second.given.begin(), it->second.given.end());
    return both;
  }());
  if (left.empty()) return drop_lost(source);
  lost_intervals_ = lost_intervals_ - it->second.intervals.size() + left.size();
  it->second.intervals = std::move(left);
}

void route_table::drop_lost(node_id source) {
  const auto it = lost_.find(source);
  if (it == lost_.end()) return;
  lost_intervals_ -= it->second.intervals.size();
  lost_by_age_.erase({it->second.since, source});
  lost_.erase(it);
}

std::vector<route_table::lost_owner> route_table::lost_owners(time_point now,
                                                              std::chrono::nanoseconds after) const {
  std::vector<lost_owner> out;
  for (const auto& [source, record] : lost_) {
    const auto since = std::max(record.since, alone_at_);
    if (now - since < after) continue;
    auto left = owners().unowned(record.intervals);
    if (!left.empty()) out.push_back(lost_owner{source, std::move(left), since, {}});
  }
  return out;
}

}  // namespace phoenix::overlay
