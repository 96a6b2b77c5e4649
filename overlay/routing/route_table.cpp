// overlay/routing/route_table.cpp — DSDV with Babel's feasibility condition. See route_table.hpp for the
// contract.
//
// Why this is loop-free (RFC 8966 2.4): order (seqno, metric) pairs so that a newer seqno, or the same seqno
// with a smaller metric, is "smaller". Each node keeps FD = the smallest pair it has advertised for a source
// (it only ever shrinks) and selects only routes whose advertised pair is strictly smaller than FD. If x routes
// via y, then FD(y) <= (what y advertised to x) < FD(x); FDs strictly shrink along any next-hop chain, so a
// chain cannot come back to where it started, even while updates are in flight.
#include "overlay/routing/route_table.hpp"

#include <algorithm>
#include <iterator>
#include <limits>

#include "overlay/routing/seqno.hpp"

namespace phoenix::overlay {
namespace {

using seqno::next_even_above;

// Hop count through a neighbour that advertised m; saturates at infinity.
constexpr std::uint16_t local_metric(std::uint16_t m) {
  return m >= infinite_metric - 1 ? infinite_metric : static_cast<std::uint16_t>(m + 1);
}

// DSDV settling: EWMA weight of a new first-to-best arrival sample (1/4, like a smoothed RTT).
constexpr int settling_ewma_divisor = 4;

std::vector<route_interval> normalised(std::vector<route_interval> v) {
  std::erase_if(v, [](const route_interval& i) { return i.lo >= i.hi; });
  std::sort(v.begin(), v.end(), [](const route_interval& a, const route_interval& b) { return a.lo < b.lo; });
  std::vector<route_interval> out;
  for (const auto& i : v) {
    if (!out.empty() && i.lo <= out.back().hi) {
      out.back().hi = std::max(out.back().hi, i.hi);  // overlapping or adjacent: one interval
    } else {
      out.push_back(i);
    }
  }
  return out;
}

// The parts two sorted, disjoint interval lists have in common.
std::vector<route_interval> common(const std::vector<route_interval>& a, const std::vector<route_interval>& b) {
  std::vector<route_interval> out;
  for (auto i = a.begin(), j = b.begin(); i != a.end() && j != b.end();) {
    const std::uint64_t lo = std::max(i->lo, j->lo), hi = std::min(i->hi, j->hi);
    if (lo < hi) out.push_back({lo, hi});
    (i->hi < j->hi ? i : j)++;
  }
  return out;
}

}  // namespace

route_table::route_table(node_id self, route_params params, time_point now)
    : self_(self),
      params_(params),
      jitter_state_(self),
      request_tokens_(params.request_burst),
      request_tokens_at_(now) {
  next_full_dump_ = next_dump_after(now);
}

// RFC 8966 appendix B: periodic updates are jittered, so that nodes that started or were linked together do not
// send their dumps in the same instant for ever. splitmix64 (Steele, Lea, Flood 2014): deterministic per node.
time_point route_table::next_dump_after(time_point now) {
  std::uint64_t z = (jitter_state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const auto interval = std::chrono::duration_cast<std::chrono::nanoseconds>(params_.full_dump_interval);
  const auto span = interval.count() / 2;  // 3/4 + [0, 1/2) of the interval
  return now + interval * 3 / 4 + std::chrono::nanoseconds(span > 0 ? static_cast<std::int64_t>(z % span) : 0);
}

// ---------------------------------------------------------------------------------------------------------
// Route choice, in layers: feasibility, candidate filter, best pick, switch decision.

// RFC 8966 3.5.1: a retraction is always feasible; a finite route is feasible iff strictly better than the
// feasibility distance. The advertised metric (not ours, one hop more) is compared, as in Babel.
bool route_table::route_feasible(const source_state& s, const neighbour_route& r) {
  if (r.metric == infinite_metric || !s.fd) return true;  // no FD: we never advertised a finite route
  return r.seqno > s.fd->seqno || (r.seqno == s.fd->seqno && r.metric < s.fd->metric);
}

const route_table::neighbour_route* route_table::newest_retraction_route(const source_state& s) {
  const neighbour_route* newest = nullptr;
  for (const auto& [n, r] : s.via) {
    if (r.metric == infinite_metric && (!newest || r.seqno > newest->seqno)) newest = &r;
  }
  return newest;
}

// Babel: any finite, feasible route. A neighbour's retraction says nothing of the routes the
// others advertise: only nodes whose selected route went through the lost link lose it.
bool route_table::route_is_candidate(const source_state& s, const neighbour_route& r) {
  if (local_metric(r.metric) == infinite_metric) return false;  // a retraction, or too long to count
  return route_feasible(s, r);
}

// Rule 1: newest seqno, then fewest hops; ties keep the current next hop (no flapping), then the lowest id.
std::optional<node_id> route_table::best_route(const source_state& s) {
  const neighbour_route* best = nullptr;
  node_id best_n = 0;
  for (const auto& [n, r] : s.via) {
    if (!route_is_candidate(s, r)) continue;
    const bool better =
        !best || r.seqno > best->seqno ||
        (r.seqno == best->seqno && (r.metric < best->metric || (r.metric == best->metric && s.next_hop == n)));
    if (better) {
      best = &r;
      best_n = n;
    }
  }
  if (!best) return std::nullopt;
  return best_n;
}

void route_table::select_route(node_id source, source_state& s, time_point now) {
  selection next;
  if (auto n = best_route(s)) {
    const neighbour_route& r = s.via.at(*n);
    next = {n, r.seqno, local_metric(r.metric), r.intervals, r.in_transit};
  } else {
    // Unreachable: retracted with the seqno it had (as in Babel, a retraction raises no seqno, so it
    // does not override the finite routes of nodes that never went through the lost link). The intervals last
    // known of the source go with it, from the newest news of it: a retraction newer than what this node
    // selected carries a withdrawal this node may have missed.
    const neighbour_route* newest = newest_retraction_route(s);
    if (newest && newest->seqno > s.seqno) {
      next.seqno = newest->seqno;
      next.intervals = newest->intervals;
      next.in_transit = newest->in_transit;
    } else {
      next.seqno = s.seqno;
      next.intervals = s.intervals;
      next.in_transit = s.in_transit;
    }
  }
  apply_selection(source, s, std::move(next), now);
}

// The switch decision: what changed, what to advertise and when.
void route_table::apply_selection(node_id source, source_state& s, selection next, time_point now) {
  const bool was_reachable = s.next_hop.has_value();
  const bool reachable = next.next_hop.has_value();
  const bool intervals_changed = next.intervals != s.intervals;
  const bool transit_changed = next.in_transit != s.in_transit;
  if (was_reachable != reachable || s.next_hop != next.next_hop) routes_changed_ = true;
  if (was_reachable != reachable || (reachable && intervals_changed)) index_stale_ = routes_changed_ = true;

  // Rule 7: only reachability, metric or interval changes are worth a triggered update; seqno-only news
  // waits for the next full dump. Compared with what was last advertised, not with the previous selection.
  // What is in transit travels with the intervals: a giver's release and its transit are one piece of news.
  // A retraction's intervals are news too: they decide what its receivers record as lost.
  if (intervals_changed || transit_changed) s.intervals_unadvertised = true;
  const bool news = next.metric != s.advertised_metric || s.intervals_unadvertised;
  // DSDV settling: a newer seqno that arrived over a worse path first is used at once but advertised later,
  // so that the better path carrying the same seqno (likely just behind) does not cause a second wave. Judged
  // against what neighbours last heard, so re-selecting the same route does not cut the delay short. An
  // interval change is news the overlay needs now, so it is never held back.
  const bool settle = reachable && s.advertised_metric != infinite_metric && next.seqno > s.advertised_seqno &&
                      next.metric > s.advertised_metric && !s.intervals_unadvertised;

  // What a source that became unreachable held, by the newest news of it: a node that withdrew its intervals
  // before it left (a suspend) is not a lost owner, even where only the retraction brought the withdrawal.
  if (!reachable && (was_reachable || intervals_changed || transit_changed)) {
    std::vector<route_interval> all = next.intervals;
    all.insert(all.end(), next.in_transit.begin(), next.in_transit.end());
    all = normalised(std::move(all));
    if (was_reachable) {
      if (all.empty()) {
        drop_lost(source);
      } else {
        note_lost(source, all, now);
      }
    } else {
      shrink_lost(source, all);
    }
  }
  if (reachable) drop_lost(source);
  s.next_hop = next.next_hop;
  s.seqno = next.seqno;
  s.metric = next.metric;
  s.intervals = std::move(next.intervals);
  s.in_transit = std::move(next.in_transit);

  // RFC 8966 3.8.1.2: a seqno request this node sent or forwarded is satisfied: the answer goes on at once,
  // towards whoever asked, even though only the seqno changed.
  if (reachable && s.requested_seqno != 0 && s.seqno >= s.requested_seqno) {
    s.requested_seqno = 0;
    s.trigger_pinned = true;
    schedule_trigger(source, now);
  } else if (news) {
    schedule_trigger(source, settle ? now + settling_time(source) : now);
  } else if (s.trigger_due && !s.trigger_pinned) {
    set_timer(trigger_queue_, s.trigger_due, source, std::nullopt);  // settled back to what was advertised
  }
  if (reachable) {
    set_timer(expiry_queue_, s.expiry_due, source, std::nullopt);
    set_timer(request_queue_, s.request_due, source, std::nullopt);
    return;
  }
  if (was_reachable || !s.expiry_due) {
    s.unreachable_since = now;
    set_timer(expiry_queue_, s.expiry_due, source, now + source_expiry());
  }
  schedule_request(source, s, now);
}

// ---------------------------------------------------------------------------------------------------------
// Local events

void route_table::set_local_intervals(std::vector<route_interval> intervals, time_point now,
                                      std::vector<route_interval> in_transit) {
  own_intervals_ = normalised(std::move(intervals));
  own_transit_ = normalised(std::move(in_transit));
  own_seqno_ = next_even_above(own_seqno_);
  schedule_trigger(self_, now);
  index_stale_ = routes_changed_ = true;
  finish_mutation();
}

void route_table::neighbour_up(node_id n, time_point now) {
  if (n == self_) return;
  if (neighbours_.insert(n).second && neighbours_.size() == 1) alone_at_ = now;
  // No new seqno: routes through the new link that are not feasible here or elsewhere are made so by seqno
  // requests, where they are wanted, not by a seqno wave through the whole network. The own entry goes out
  // at once (the next collect_triggered), ahead of the full dump: what the caller sends after it (a leaver's
  // `leaving`) comes after this node's news of itself.
  schedule_trigger(self_, now);
  next_full_dump_ = std::min(next_full_dump_, now);  // DSDV: a new neighbour needs the whole table
}

void route_table::neighbour_down(node_id n, time_point now) {
  if (!neighbours_.erase(n)) return;
  if (neighbours_.empty()) alone_at_ = now;
  for (auto& [source, s] : sources_) {
    if (!s.via.contains(n)) continue;
    drop_route(source, s, n);
    select_route(source, s, now);
  }
  finish_mutation();
}

// ---------------------------------------------------------------------------------------------------------
// Input from neighbours: route_input.cpp

// Towards the source: our next hop; when we have none, the neighbour advertising the best finite route
// (RFC 8966 3.8.1.2 allows any neighbour that may lead there). Never back to the asker.
std::optional<node_id> route_table::request_target(const source_state& s, node_id from) {
  if (s.next_hop) return *s.next_hop != from ? s.next_hop : std::nullopt;
  std::optional<node_id> best;
  const neighbour_route* best_r = nullptr;
  for (const auto& [n, r] : s.via) {
    if (n == from || r.metric == infinite_metric) continue;
    if (!best_r || r.seqno > best_r->seqno || (r.seqno == best_r->seqno && r.metric < best_r->metric)) {
      best = n;
      best_r = &r;
    }
  }
  return best;
}

// ---------------------------------------------------------------------------------------------------------
// Queries

std::optional<node_id> route_table::next_hop(node_id destination) const {
  auto it = sources_.find(destination);
  if (it == sources_.end()) return std::nullopt;
  return it->second.next_hop;
}

bool route_table::is_reachable(node_id destination) const { return next_hop(destination).has_value(); }

std::optional<time_point> route_table::unreachable_since(node_id destination) const {
  if (destination == self_ || is_reachable(destination)) return std::nullopt;
  const auto it = sources_.find(destination);
  return it == sources_.end() ? time_point::min() : it->second.unreachable_since;
}

std::optional<node_id> route_table::owner_of(std::uint64_t vnode) const {
  if (index_stale_) rebuild_owner_index();
  auto it = std::upper_bound(owner_index_.begin(), owner_index_.end(), vnode,
                             [](std::uint64_t v, const owner_slot& slot) { return v < slot.lo; });
  if (it == owner_index_.begin()) return std::nullopt;
  --it;
  if (vnode >= it->hi) return std::nullopt;
  return it->owner;
}

std::chrono::nanoseconds route_table::settling_time(node_id source) const {
  auto it = sources_.find(source);
  if (it == sources_.end()) return std::chrono::nanoseconds{0};
  return std::min<std::chrono::nanoseconds>(2 * it->second.settling_avg, params_.max_settling_time);
}

std::vector<route_table::route_view> route_table::routes() const {
  std::vector<route_view> out;
  out.reserve(sources_.size());
  for (const auto& [source, s] : sources_) {
    out.push_back({source, s.next_hop.value_or(0), s.seqno, s.metric,
                   s.next_hop ? s.intervals : std::vector<route_interval>{}});
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Output

route_entry route_table::advertise(node_id source) {
  if (source == self_) return {self_, own_seqno_, 0, own_intervals_, own_transit_};
  source_state& s = sources_.at(source);
  // RFC 8966 3.7.3: retractions leave FD alone. They carry what the source was last known to hold.
  if (!s.next_hop) return {source, s.seqno, infinite_metric, s.intervals, s.in_transit};
  // RFC 8966 3.7.3: a newer seqno resets the feasibility distance, the same one keeps the minimum metric.
  if (!s.fd || s.seqno > s.fd->seqno) {
    s.fd = feasibility_distance{s.seqno, s.metric};
  } else if (s.seqno == s.fd->seqno) {
    s.fd->metric = std::min(s.fd->metric, s.metric);
  }
  return {source, s.seqno, s.metric, s.intervals, s.in_transit};
}

void route_table::note_heard_by_all(source_state& s) {
  s.advertised_seqno = s.seqno;
  s.advertised_metric = s.metric;
  s.intervals_unadvertised = false;
  s.trigger_pinned = false;
}

time_point route_table::next_trigger() const {
  if (trigger_queue_.empty()) return time_point::max();
  const time_point gated = std::max(trigger_queue_.begin()->first, last_triggered_ + params_.trigger_gap);
  return own_trigger_due_ ? std::min(gated, *own_trigger_due_) : gated;  // the own entry is never held back
}

std::optional<route_update> route_table::collect_triggered(time_point now) {
  if (next_trigger() > now) return std::nullopt;
  last_triggered_ = now;
  std::vector<node_id> due;
  while (!trigger_queue_.empty() && trigger_queue_.begin()->first <= now) {
    const node_id source = trigger_queue_.begin()->second;
    trigger_queue_.erase(trigger_queue_.begin());
    trigger_slot(source).reset();
    due.push_back(source);
  }
  if (due.empty()) return std::nullopt;
  std::sort(due.begin(), due.end());
  route_update u;
  for (node_id source : due) {
    u.entries.push_back(advertise(source));
    if (source != self_) note_heard_by_all(sources_.at(source));
  }
  return u;
}

// DSDV gives every periodic dump a fresh seqno of the node's own. We do not: with reliable links a route only
// changes when something happens, and each such event that needs one already bumps the seqno (intervals,
// seqno request, a claim on the own name). A bump per dump would make every node re-select routes network-wide every
// interval (newest seqno first), a steady churn of triggered updates that the settling delay only damps.
route_update route_table::full_dump(time_point now) {
  route_update u{true, {}};
  u.entries.reserve(sources_.size() + 1);
  u.entries.push_back(advertise(self_));
  for (auto& [source, s] : sources_) {
    u.entries.push_back(advertise(source));
    // A dump may go to a new neighbour only: pending triggers stay pending (and pinned) for the others, who
    // at worst hear an entry twice. Without one, everybody already holds what the dump says.
    if (s.trigger_due) {
      s.trigger_pinned = true;
    } else {
      note_heard_by_all(s);
    }
  }
  next_full_dump_ = next_dump_after(now);
  return u;
}

std::vector<std::pair<node_id, route_request>> route_table::collect_requests(time_point now) {
  std::vector<std::pair<node_id, route_request>> out;
  while (!request_queue_.empty() && request_queue_.begin()->first <= now) {
    const node_id source = request_queue_.begin()->second;
    request_queue_.erase(request_queue_.begin());
    source_state& s = sources_.at(source);
    s.request_due.reset();
    if (s.next_hop) continue;
    // RFC 8966 3.8.1.1: ask the neighbour with the best finite route we cannot use for a seqno newer than
    // the one we hold; the source's answer makes that route feasible and newest again. One neighbour per
    // round: the request travels on towards the source, so asking every neighbour only multiplies it.
    const auto to = request_target(s, self_);
    if (!to) continue;
    // One above the feasibility distance's seqno, as Babel asks: it came from a route the source gave, where
    // s.seqno may be a newer retraction's, which anyone can claim, and the source grants no more than its next.
    const std::uint64_t wanted = std::min((s.fd ? s.fd->seqno : s.seqno) + 1, max_plausible_seqno);
    out.emplace_back(*to, route_request{source, wanted, request_hop_limit});
    s.requested_seqno = std::max(s.requested_seqno, wanted);
    s.requested_at = now;
    s.last_request = now;
    // RFC 8966 3.8.2.1: sent again a few times if no answer comes (a request, or its answer, can be dropped
    // by a rate limit on the way), after 2, 4 and 8 holdoffs; a neighbour repeating its route starts over.
    if (s.request_resends < max_request_resends) {
      ++s.request_resends;
      set_timer(request_queue_, s.request_due, source, now + params_.request_holdoff * (1 << s.request_resends));
    }
  }
  return out;
}

time_point route_table::next_deadline() const {
  time_point t = std::min(next_full_dump_, next_trigger());
  for (const timer_queue* q : {&request_queue_, &expiry_queue_}) {
    if (!q->empty()) t = std::min(t, q->begin()->first);
  }
  if (!hold_queue_.empty()) t = std::min(t, std::get<0>(*hold_queue_.begin()));
  if (own_raise_due_) t = std::min(t, *own_raise_due_);
  return t;
}

void route_table::expire(time_point now) {
  if (own_raise_due_ && *own_raise_due_ <= now) apply_own_raise(now);
  std::vector<node_id> touched;
  while (!hold_queue_.empty() && std::get<0>(*hold_queue_.begin()) <= now) {
    const auto [queued, source, neighbour] = *hold_queue_.begin();
    source_state& s = sources_.at(source);
    neighbour_route& r = s.via.at(neighbour);
    if (r.held_until > now) {  // refreshed since it was queued (store_route): queued again, for its new time
      hold_queue_.erase(hold_queue_.begin());
      r.queued_until = r.held_until;
      hold_queue_.emplace(r.queued_until, source, neighbour);
      continue;
    }
    drop_route(source, s, neighbour);
    touched.push_back(source);
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (node_id source : touched) select_route(source, sources_.at(source), now);  // like a broken link
  while (!expiry_queue_.empty() && expiry_queue_.begin()->first <= now) {
    forget(sources_.find(expiry_queue_.begin()->second));
  }
  finish_mutation();
}

// ---------------------------------------------------------------------------------------------------------
// Owners that went away

void route_table::note_lost(node_id source, const std::vector<route_interval>& intervals, time_point now,
                            std::vector<route_interval> given) {
  drop_lost(source);
  if (intervals.size() > params_.max_held_intervals) return;
  while (!lost_.empty() &&
         (lost_.size() >= params_.max_sources || lost_intervals_ + intervals.size() > params_.max_held_intervals))
    drop_lost(lost_by_age_.begin()->second);
  lost_[source] = lost_owner{source, intervals, now, common(intervals, normalised(std::move(given)))};
  lost_by_age_.emplace(now, source);
  lost_intervals_ += intervals.size();
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

// The parts of `intervals` (sorted, disjoint) that no slot of the owner index covers.
std::vector<route_interval> route_table::unowned(const std::vector<route_interval>& intervals) const {
  if (index_stale_) rebuild_owner_index();
  std::vector<route_interval> out;
  for (const auto& i : intervals) {
    std::uint64_t lo = i.lo;
    auto it = std::upper_bound(owner_index_.begin(), owner_index_.end(), lo,
                               [](std::uint64_t v, const owner_slot& slot) { return v < slot.lo; });
    if (it != owner_index_.begin() && std::prev(it)->hi > lo) --it;
    for (; it != owner_index_.end() && it->lo < i.hi && lo < i.hi; ++it) {
      if (it->lo > lo) out.push_back({lo, it->lo});
      lo = std::max(lo, it->hi);
    }
    if (lo < i.hi) out.push_back({lo, i.hi});
  }
  return out;
}

std::vector<route_table::lost_owner> route_table::lost_owners(time_point now, std::chrono::nanoseconds after) const {
  std::vector<lost_owner> out;
  for (const auto& [source, record] : lost_) {
    const auto since = std::max(record.since, alone_at_);
    if (now - since < after) continue;
    auto left = unowned(record.intervals);
    if (!left.empty()) out.push_back(lost_owner{source, std::move(left), since, {}});
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Bookkeeping

// DSDV settling statistics: for each seqno, the gap between its first arrival and its best one.
void route_table::note_arrival(source_state& s, const neighbour_route& r, time_point now) {
  if (r.metric == infinite_metric) return;
  if (r.seqno > s.arrival_seqno) {
    if (s.arrival_seqno != 0) {
      const auto sample =
          std::chrono::duration_cast<std::chrono::nanoseconds>(s.best_arrival - s.first_arrival);
      s.settling_avg += (sample - s.settling_avg) / settling_ewma_divisor;
    }
    s.arrival_seqno = r.seqno;
    s.arrival_best_metric = r.metric;
    s.first_arrival = s.best_arrival = now;
  } else if (r.seqno == s.arrival_seqno && r.metric < s.arrival_best_metric) {
    s.arrival_best_metric = r.metric;
    s.best_arrival = now;
  }
}

std::optional<time_point>& route_table::trigger_slot(node_id source) {
  return source == self_ ? own_trigger_due_ : sources_.at(source).trigger_due;
}

// Never postpones an already scheduled advertisement: under continuous churn settling must not starve it.
void route_table::schedule_trigger(node_id source, time_point due) {
  std::optional<time_point>& slot = trigger_slot(source);
  if (slot && *slot <= due) return;
  set_timer(trigger_queue_, slot, source, due);
}

// Rule 6 / RFC 8966 3.8.1.1: worth asking only if some neighbour has a finite route we cannot use now;
// at most one round of requests per source per request_holdoff.
void route_table::schedule_request(node_id source, source_state& s, time_point now) {
  const bool someone_has_a_route =
      std::any_of(s.via.begin(), s.via.end(), [](const auto& v) { return v.second.metric != infinite_metric; });
  if (!someone_has_a_route) return;
  const time_point due = std::max(now + params_.request_delay, s.last_request + params_.request_holdoff);
  if (s.request_due && *s.request_due <= due) return;
  s.request_resends = 0;
  set_timer(request_queue_, s.request_due, source, due);
}

void route_table::set_timer(timer_queue& q, std::optional<time_point>& slot, node_id source,
                            std::optional<time_point> due) {
  if (slot) q.erase({*slot, source});
  slot = due;
  if (due) q.insert({*due, source});
}

// Forgetting drops the feasibility distance too (as babeld's source GC does). That is safe because the
// source has been unreachable here for source_expiry(): every finite route we advertised for it has been
// retracted or has timed out at our neighbours, so nobody can route through us.
void route_table::forget(std::map<node_id, source_state>::iterator it) {
  source_state& s = it->second;
  for (const auto& [n, r] : s.via) {
    hold_queue_.erase({r.queued_until, it->first, n});
    held_intervals_ -= r.intervals.size() + r.in_transit.size();
  }
  set_timer(trigger_queue_, s.trigger_due, it->first, std::nullopt);
  set_timer(request_queue_, s.request_due, it->first, std::nullopt);
  set_timer(expiry_queue_, s.expiry_due, it->first, std::nullopt);
  if (s.next_hop) index_stale_ = routes_changed_ = true;
  sources_.erase(it);
}

void route_table::drop_route(node_id source, source_state& s, node_id neighbour) {
  auto it = s.via.find(neighbour);
  hold_queue_.erase({it->second.queued_until, source, neighbour});
  held_intervals_ -= it->second.intervals.size() + it->second.in_transit.size();
  s.via.erase(it);
}

// Called at the end of every mutating entry point: one generation step per call that changed anything.
// What another node owns of a lost owner's record is no longer the lost owner's, for good: adopted (should the
// adopter give part of it away, the part on its way is nobody's for a while), or given away by the lost owner
// before it went though its last advertisement still named it (should the taker leave on a temporary leave,
// its interval is nobody's on purpose). The record ends once nothing is left.
void route_table::finish_mutation() {
  if (routes_changed_) {
    ++generation_;
    std::vector<node_id> owned;
    for (auto& [source, record] : lost_) {
      auto left = unowned(record.intervals);
      lost_intervals_ = lost_intervals_ - record.intervals.size() + left.size();
      record.intervals = std::move(left);
      if (record.intervals.empty()) owned.push_back(source);
    }
    for (node_id source : owned) drop_lost(source);
  }
  routes_changed_ = false;
}

// Rule 9: rebuilt only when a reachable source's intervals or the set of reachable sources changed, and only
// once something looks a virtual node up, into a sorted vector searched in O(log n). Normally intervals are
// disjoint and a sort is all it takes. Stale overlaps (a migration in flight) resolve deterministically: sources
// are painted in precedence order (self, then ascending node_id) and each only fills what is still free.
void route_table::rebuild_owner_index() const {
  index_stale_ = false;
  std::vector<owner_slot> by_precedence;
  for (const auto& iv : own_intervals_) by_precedence.push_back({iv.lo, iv.hi, self_});
  for (const auto& [source, s] : sources_) {
    if (!s.next_hop) continue;
    for (const auto& iv : s.intervals) {
      if (iv.lo < iv.hi) by_precedence.push_back({iv.lo, iv.hi, source});
    }
  }
  owner_index_ = by_precedence;
  auto by_lo = [](const owner_slot& x, const owner_slot& y) { return x.lo < y.lo; };
  std::sort(owner_index_.begin(), owner_index_.end(), by_lo);
  const bool overlap =
      std::adjacent_find(owner_index_.begin(), owner_index_.end(),
                         [](const auto& x, const auto& y) { return y.lo < x.hi; }) != owner_index_.end();
  if (!overlap) return;

  std::map<std::uint64_t, owner_slot> painted;  // lo -> slot
  for (const owner_slot& want : by_precedence) {
    std::uint64_t cur = want.lo;
    auto it = painted.upper_bound(cur);
    if (it != painted.begin() && std::prev(it)->second.hi > cur) cur = std::prev(it)->second.hi;
    while (cur < want.hi) {
      it = painted.lower_bound(cur);  // first slot at or after cur; nothing covers cur itself
      const std::uint64_t gap_end = it == painted.end() ? want.hi : std::min(want.hi, it->first);
      if (cur < gap_end) painted.emplace_hint(it, cur, owner_slot{cur, gap_end, want.owner});
      if (it == painted.end()) break;
      cur = it->second.hi;
    }
  }
  owner_index_.clear();
  for (const auto& [lo, slot] : painted) owner_index_.push_back(slot);
}

}  // namespace phoenix::overlay
