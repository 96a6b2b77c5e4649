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

#include "base/splitmix.hpp"
#include "overlay/routing/interval_lists.hpp"
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

}  // namespace

route_table::route_table(node_id self, route_params params, time_point now)
    : self_(self),
      params_(params),
      owners_(self),
      jitter_state_(self),
      request_tokens_(params.request_burst),
      request_tokens_at_(now) {
  next_summary_ = next_summary_after(now);
}

// RFC 8966 appendix B: periodic updates are jittered, so that nodes that started or were linked together do not
// send their summaries in the same instant for ever. splitmix64 (Steele, Lea, Flood 2014): deterministic per
// node.
time_point route_table::next_summary_after(time_point now) {
  const std::uint64_t z = base::splitmix64_mix(jitter_state_ += 0x9e3779b97f4a7c15ull);
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
  if (was_reachable != reachable || (reachable && intervals_changed)) {
    routes_changed_ = true;
    static const std::vector<route_interval> none;
    claims_changed(source, was_reachable ? s.intervals : none, reachable ? next.intervals : none);
  }

  // Rule 7: only reachability, metric or interval changes are worth a triggered update at once; seqno-only news
  // goes out with the next periodic summary, as DSDV's next periodic dump would have carried it: it must
  // spread, or nodes far away would fall behind the source's seqno by more than seqno_window. Compared with
  // what was last advertised, not with the previous selection.
  // What is in transit travels with the intervals: a giver's release and its transit are one piece of news.
  // A retraction's intervals are news too: they decide what its receivers record as lost.
  if (intervals_changed || transit_changed) s.intervals_unadvertised = true;
  // A new next hop is news too: the old one heard our route as a retraction (split horizon) and may use it
  // now, the new one must hear it as one.
  const bool news = next.metric != s.advertised_metric || s.intervals_unadvertised ||
                    (reachable && params_.split_horizon && next.next_hop != s.advertised_via);
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
    // An answer to a request older than two resend gaps is no sample (an old request answered by chance, or
    // by a peer choosing when); samples count up to the longest window.
    if (const auto took = now - s.requested_at;
        s.requested_copies == 1 && took > std::chrono::nanoseconds{0} && took <= max_request_backoff() * 2) {
      const auto sample = std::min<std::chrono::nanoseconds>(took, params_.request_holdoff * 64);
      answer_delay_ += (sample - answer_delay_) / 8;
    }
    s.requested_seqno = 0;
    s.requested_copies = 0;
    s.trigger_pinned = true;
    schedule_trigger(source, now);
  } else if (news) {
    schedule_trigger(source, settle ? now + settling_time(source) : now);
  } else if (reachable && s.seqno != s.advertised_seqno) {
    if (s.trigger_due && !s.trigger_pinned) set_timer(trigger_queue_, s.trigger_due, source, std::nullopt);
    seqno_news_.insert(source);  // goes out with the next summary (collect_triggered with `all`)
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
  note_time(now);
  auto claimed = normalised(std::move(intervals));
  claims_changed(self_, own_intervals_, claimed);
  own_intervals_ = std::move(claimed);
  own_transit_ = normalised(std::move(in_transit));
  own_seqno_ = next_even_above(own_seqno_);
  schedule_trigger(self_, now);
  routes_changed_ = true;
  finish_mutation();
}

void route_table::neighbour_up(node_id n, time_point now) {
  note_time(now);
  if (n == self_) return;
  const auto [it, added] = neighbours_.try_emplace(n);
  if (added && neighbours_.size() == 1) alone_at_ = now;
  // No new seqno: routes through the new link that are not feasible here or elsewhere are made so by seqno
  // requests, where they are wanted, not by a seqno wave through the whole network. The own entry goes out
  // at once (the next collect_triggered), and the whole table to the new neighbour; the neighbour's own dump
  // is on its way, so no dump request for a while. A neighbour already up whose link was replaced (the other
  // end saw it break first, this end did not) is treated alike: frames queued on the old link may be lost.
  schedule_trigger(self_, now);
  if (!added) {
    for (auto& [source, s] : sources_) {
      if (s.requested_via == n) s.requested_via.reset();  // a request sent on the old link may be lost with it
    }
  }
  neighbour_state& ns = it->second;
  ns.dump_due = now;
  ns.dumped_at = time_point::min();
  ns.asked_at = now;
  ns.in_dump = false;
  ns.dump_ended_at = time_point::min();
  ns.held_until = now + route_hold_time();
}

void route_table::neighbour_down(node_id n, time_point now) {
  note_time(now);
  if (!neighbours_.erase(n)) return;
  if (neighbours_.empty()) alone_at_ = now;
  for (auto& [source, s] : sources_) {
    if (s.advertised_via == n) s.advertised_via.reset();  // its poison correction went with it
    if (s.requested_via == n) s.requested_via.reset();    // a request sent that way went with it
    if (!s.via.contains(n)) continue;
    drop_route(s, n);
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
    if (n == from || local_metric(r.metric) == infinite_metric) continue;
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
  return owners().owner_of(vnode);
}

// Only a claim added can make part of a lost owner's record someone's: finish_mutation looks there.
void route_table::claims_changed(node_id owner, const std::vector<route_interval>& before,
                                 const std::vector<route_interval>& after) {
  owners_.change(owner, before, after);
  recheck_lost_.insert(recheck_lost_.end(), after.begin(), after.end());
}

const owner_index& route_table::owners() const {
  if (!owners_.stale()) return owners_;
  std::vector<owner_index::slot> claims;
  for (const auto& iv : own_intervals_) claims.push_back({iv.lo, iv.hi, self_});
  for (const auto& [source, s] : sources_) {
    if (!s.next_hop) continue;
    for (const auto& iv : s.intervals) claims.push_back({iv.lo, iv.hi, source});
  }
  owners_.repaint(std::move(claims));
  return owners_;
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
  if (source == self_) {
    route_entry e{self_, own_seqno_, 0, own_intervals_, own_transit_};
    note_advertised(own_digest_, e);
    return e;
  }
  source_state& s = sources_.at(source);
  unnote_advertised_via(s);
  seqno_news_.erase(source);  // goes out now
  // RFC 8966 3.7.3: retractions leave FD alone. They carry what the source was last known to hold.
  if (!s.next_hop) {
    route_entry e{source, s.seqno, infinite_metric, s.intervals, s.in_transit};
    note_advertised(s.digest, e);
    return e;
  }
  // RFC 8966 3.7.3: a newer seqno resets the feasibility distance, the same one keeps the minimum metric.
  if (!s.fd || s.seqno > s.fd->seqno) {
    s.fd = feasibility_distance{s.seqno, s.metric};
  } else if (s.seqno == s.fd->seqno) {
    s.fd->metric = std::min(s.fd->metric, s.metric);
  }
  route_entry e{source, s.seqno, s.metric, s.intervals, s.in_transit};
  note_advertised(s.digest, e);
  note_advertised_via(s, e, params_.split_horizon ? s.next_hop : std::nullopt);
  return e;
}

void route_table::note_heard_by_all(source_state& s) {
  s.advertised_seqno = s.seqno;
  s.advertised_metric = s.metric;
  s.intervals_unadvertised = false;
  s.trigger_pinned = false;
}

time_point route_table::next_trigger() const {
  if (trigger_queue_.empty() && forgotten_.empty()) return time_point::max();
  const time_point first = forgotten_.empty() ? trigger_queue_.begin()->first : time_point::min();
  const time_point gated = std::max(first, last_triggered_ + params_.trigger_gap);
  return own_trigger_due_ ? std::min(gated, *own_trigger_due_) : gated;  // the own entry is never held back
}

std::optional<route_update> route_table::collect_triggered(time_point now, bool all) {
  if (!all && next_trigger() > now) return std::nullopt;
  if (trigger_queue_.empty() && forgotten_.empty() && (!all || seqno_news_.empty())) return std::nullopt;
  last_triggered_ = now;
  route_update u;
  // Forgets first: a source forgotten and heard of again since goes out after its forget (store_route).
  for (node_id source : forgotten_) u.entries.push_back(forget_entry(source));
  forgotten_.clear();
  std::vector<node_id> due;
  if (all) {
    due.assign(seqno_news_.begin(), seqno_news_.end());
    seqno_news_.clear();
  }
  while (!trigger_queue_.empty() && (all || trigger_queue_.begin()->first <= now)) {
    const node_id source = trigger_queue_.begin()->second;
    trigger_queue_.erase(trigger_queue_.begin());
    trigger_slot(source).reset();
    due.push_back(source);
  }
  if (due.empty() && u.entries.empty()) return std::nullopt;
  std::sort(due.begin(), due.end());
  due.erase(std::unique(due.begin(), due.end()), due.end());
  for (node_id source : due) {
    u.entries.push_back(advertise(source));
    if (source != self_) note_heard_by_all(sources_.at(source));
  }
  return u;
}

// DSDV gives every periodic dump a fresh seqno of the node's own. We do not: with reliable links a route only
// changes when something happens, and each such event that needs one already bumps the seqno (intervals,
// seqno request, a claim on the own name). A bump per dump would make every node re-select routes network-wide
// every interval (newest seqno first), a steady churn of triggered updates that the settling delay only damps.
route_update route_table::full_dump(time_point now, std::optional<node_id> to) {
  route_update u{true, {}};
  u.entries.reserve(sources_.size() + 1);
  const std::uint64_t own_before = own_digest_;
  u.entries.push_back(advertise(self_));
  if (own_digest_ != own_before) schedule_trigger(self_, now);
  for (auto& [source, s] : sources_) {
    const std::uint64_t before = s.digest;
    const std::optional<node_id> via_before = s.advertised_via;
    u.entries.push_back(advertise(source));
    if (to && s.advertised_via == to) u.entries.back().metric = infinite_metric;  // split horizon
    // A dump goes to one neighbour: what it says that the others have not heard goes to them too (pinned), so
    // that everyone holds what the next summary sums up. What they all heard already needs nothing.
    if (s.digest != before || s.advertised_via != via_before) {
      s.trigger_pinned = true;
      schedule_trigger(source, now);
    } else if (!s.trigger_due) {
      note_heard_by_all(s);
    }
  }
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
    s.requested_seqno = s.requested_seqno == 0 ? wanted : std::min(s.requested_seqno, wanted);
    s.requested_at = now;
    s.requested_via = *to;
    s.requested_hops = request_hop_limit;
    s.requested_copies = static_cast<std::uint8_t>(std::min(s.requested_copies + 1, 2));
    s.last_request = now;
    // RFC 8966 3.8.2.1: sent again if no answer comes (a request, or its answer, can be dropped by a rate limit
    // on the way), after 2, 4, 8, ... holdoffs, at most max_request_backoff() apart, while a neighbour still
    // has a route we cannot use (as each periodic dump's repeat of that route once asked again); a neighbour
    // advertising a new one starts over. The backoff matters: a request crossing 500 hops of a process behind
    // on its input is answered seconds later, and resent every second each copy crossed the 500 hops again.
    s.request_resends = std::min(s.request_resends + 1, 16);
    set_timer(request_queue_, s.request_due, source,
              now + std::min<std::chrono::nanoseconds>(params_.request_holdoff * (1 << s.request_resends),
                                                       max_request_backoff()));
  }
  return out;
}

time_point route_table::next_deadline() const {
  time_point t = std::min(next_summary_, next_trigger());
  for (const timer_queue* q : {&request_queue_, &expiry_queue_}) {
    if (!q->empty()) t = std::min(t, q->begin()->first);
  }
  for (const auto& [n, ns] : neighbours_) {
    t = std::min(t, ns.held_until);
    if (ns.dump_due) t = std::min(t, *ns.dump_due);
  }
  if (own_raise_due_) t = std::min(t, *own_raise_due_);
  return t;
}

void route_table::expire(time_point now) {
  note_time(now);
  if (own_raise_due_ && *own_raise_due_ <= now) apply_own_raise(now);
  for (auto& [n, ns] : neighbours_) {
    if (ns.held_until > now) continue;
    // It said nothing for a hold time: its routes go as with a broken link (the link stays, and its next
    // summary, not matching, brings a dump).
    ns.held_until = time_point::max();  // nothing left to hold until it speaks again
    ++sync_stats_.holds_expired;
    drop_neighbour_routes(n, now, false);
  }
  while (!expiry_queue_.empty() && expiry_queue_.begin()->first <= now) {
    forget(sources_.find(expiry_queue_.begin()->second));
  }
  finish_mutation();
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

// A route this node could use if it were feasible (metric short enough to count).
bool route_table::someone_has_a_route(const source_state& s) {
  return std::any_of(s.via.begin(), s.via.end(),
                     [](const auto& v) { return local_metric(v.second.metric) != infinite_metric; });
}

// Rule 6 / RFC 8966 3.8.1.1: worth asking only if some neighbour has a finite route we cannot use now;
// at most one round of requests per source per request_holdoff.
void route_table::schedule_request(node_id source, source_state& s, time_point now) {
  if (!someone_has_a_route(s)) return;
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
  unnote_advertised_via(s);
  // What each neighbour said of it stays counted in that neighbour's sums (a ghost) until the neighbour forgets
  // it too: otherwise the sums would differ for the moment between two expiries, the dump that fixes that
  // would bring the source back as a retraction, and nodes that forget at different times would keep bringing
  // each other's dead sources back.
  // A route this node could use is no ghost: the source is alive, and that route was refused only by the
  // feasibility distance forgotten now (its answer lost, or not come). Dropped from the neighbour's sums, it
  // makes the next summary differ, and the dump that brings it back starts the source afresh.
  while (!s.via.empty()) {
    const auto first = s.via.begin();
    const auto ns = neighbours_.find(first->first);
    if (ns != neighbours_.end() && ns->second.ghosts.size() < params_.max_sources &&
        local_metric(first->second.metric) == infinite_metric) {
      ns->second.ghosts[it->first] = {first->second.digest, first->second.dump};
      first->second.digest = 0;  // counted by the ghost now: drop_route leaves the sums as they are
    }
    drop_route(s, first->first);
  }
  // Its neighbours drop what we said of it (the forget entry), and our summaries no longer count it.
  if (s.digest != 0) {
    digest_ ^= s.digest;
    --advertised_;
    forgotten_.insert(it->first);
  }
  set_timer(trigger_queue_, s.trigger_due, it->first, std::nullopt);
  seqno_news_.erase(it->first);
  set_timer(request_queue_, s.request_due, it->first, std::nullopt);
  set_timer(expiry_queue_, s.expiry_due, it->first, std::nullopt);
  if (s.next_hop) {
    routes_changed_ = true;
    claims_changed(it->first, s.intervals, {});
  }
  sources_.erase(it);
}

void route_table::drop_route(source_state& s, node_id neighbour) {
  auto it = s.via.find(neighbour);
  if (auto ns = neighbours_.find(neighbour); ns != neighbours_.end()) {
    std::uint32_t unused = 0;
    note_heard(ns->second, it->second.digest, unused, 0);
  }
  held_intervals_ -= it->second.intervals.size() + it->second.in_transit.size();
  s.via.erase(it);
}

// Called at the end of every mutating entry point: one generation step per call that changed anything.
// What another node owns of a lost owner's record is no longer the lost owner's, for good: adopted (should the
// adopter give part of it away, the part on its way is nobody's for a while), or given away by the lost owner
// before it went though its last advertisement still named it (should the taker leave on a temporary leave,
// its interval is nobody's on purpose). The record ends once nothing is left.
void route_table::finish_mutation() {
  if (routes_changed_) ++generation_;
  routes_changed_ = false;
  if (recheck_lost_.empty()) return;
  const auto changed = normalised(std::move(recheck_lost_));
  recheck_lost_.clear();
  std::vector<node_id> owned;
  for (auto& [source, record] : lost_) {
    if (!overlap(record.intervals, changed)) continue;
    auto left = owners().unowned(record.intervals);
    lost_intervals_ = lost_intervals_ - record.intervals.size() + left.size();
    record.intervals = std::move(left);
    if (record.intervals.empty()) owned.push_back(source);
  }
  for (node_id source : owned) drop_lost(source);
}

}  // namespace phoenix::overlay
