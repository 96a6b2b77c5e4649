// overlay/routing/route_input.cpp — what a neighbour tells the routing table: updates and seqno requests,
// checked first.
//
// A neighbour holds the cluster key, but that does not make what it says true. Before anything reaches the
// table, each entry and request passes these checks; what fails one is ignored (never the whole frame: the
// decoder already rejected malformed ones) and counted in route_input_stats:
//  - A seqno above max_plausible_seqno is absurd. Own seqnos saturate below it, so no honest one gets there.
//  - A seqno more than seqno_window ahead of the newest seen for a known source is ignored. Without the window
//    one update at 2^48 - 2 would poison a name for good: its owner could not outbid it (the newest seqno
//    wins). The window is 2^16: a source raises its seqno by 2 per event (interval change, answered request, a
//    claim on its name), and each raise reaches a node within an interval per hop (seqno-only news goes out
//    with the next summary, route_table.cpp, as DSDV's periodic dumps carried it) or the node forgets the
//    source after source_expiry() (60 s) unreachable, after which any plausible seqno is accepted again.
//    Answered requests raise it at most once per request_holdoff: 2^15 raises take 6,500 s, more than 650 hops
//    at a 10 s interval, and interval changes that often are far beyond anything honest. A key holder can still
//    walk a seqno up by the window per update; reaching max_plausible_seqno takes 2^32 accepted updates. Seqnos
//    are compared as plain integers rather than modulo 2^64 (RFC 8966 3.2.1): with the cap nothing wraps, and a
//    modular comparison would make half the space "newer" than any seqno, which is what the window is there to
//    refuse.
//  - Metric 0 is the source speaking of itself (RFC 8966 3.7.1): from anyone else it is a lie.
//  - New sources past max_sources and intervals past max_held_intervals would grow memory without bound.
//  - An update naming this node is never a route to it; a seqno above its own and within the window of it is
//    answered by raising the own seqno past it, at most once per own_raise_holdoff (later claims merge into one
//    raise at its end), so that the real route supersedes whatever the neighbours accepted and a flood of
//    claims costs one update. A claim beyond the window is ignored: following it would put the node's own
//    updates beyond its neighbours' windows, and make it unreachable.
//  - Seqno requests (RFC 8966 3.8.1.2) are acted on at most once per request_holdoff per source and at
//    requests_per_second overall, and only within the window of the newest seqno seen; one for this node only
//    up to its next seqno, and forwarded with a hop limit of at most request_hop_limit.
#include <algorithm>
#include <chrono>

#include "overlay/routing/route_table.hpp"
#include "overlay/routing/seqno.hpp"

namespace phoenix::overlay {

// ---------------------------------------------------------------------------------------------------------
// Checks

// The newest seqno this node has seen for the source, selected, retracted or held by any neighbour.
std::uint64_t route_table::newest_seen(const source_state& s) {
  std::uint64_t newest = s.seqno;
  for (const auto& [n, r] : s.via) newest = std::max(newest, r.seqno);
  return newest;
}

// newest <= max_plausible_seqno, so newest + window cannot wrap for any window below 2^63.
bool route_table::seqno_acceptable(std::uint64_t newest, std::uint64_t seqno) {
  if (seqno == 0 || seqno > max_plausible_seqno) {
    ++stats_.seqno_absurd;
    return false;
  }
  if (seqno > newest && seqno - newest > params_.seqno_window) {
    ++stats_.seqno_out_of_window;
    return false;
  }
  return true;
}

bool route_table::entry_acceptable(node_id from, const route_entry& e) {
  const auto it = sources_.find(e.source);
  if (it == sources_.end()) {
    if (e.seqno == 0 || e.seqno > max_plausible_seqno) {
      ++stats_.seqno_absurd;
      return false;
    }
    if (sources_.size() >= params_.max_sources) {
      ++stats_.sources_over_limit;
      return false;
    }
  } else if (!seqno_acceptable(newest_seen(it->second), e.seqno)) {
    return false;
  }
  if (e.metric == 0 && e.source != from) {
    ++stats_.metric_absurd;
    return false;
  }
  std::size_t replaced = 0;
  if (it != sources_.end()) {
    if (auto r = it->second.via.find(from); r != it->second.via.end())
      replaced = r->second.intervals.size() + r->second.in_transit.size();
  }
  if (held_intervals_ - replaced + e.intervals.size() + e.in_transit.size() > params_.max_held_intervals) {
    ++stats_.intervals_over_limit;
    return false;
  }
  return true;
}

// One request per source per request_holdoff, and a token bucket over all of them.
bool route_table::request_allowed(std::optional<time_point>& acted_at, time_point now) {
  if (acted_at && now < *acted_at + params_.request_holdoff) {
    ++stats_.requests_limited;
    return false;
  }
  const double elapsed_s = std::chrono::duration<double>(now - request_tokens_at_).count();
  request_tokens_ =
      std::min<double>(params_.request_burst, request_tokens_ + elapsed_s * params_.requests_per_second);
  request_tokens_at_ = now;
  if (request_tokens_ < 1) {
    ++stats_.requests_limited;
    return false;
  }
  request_tokens_ -= 1;
  acted_at = now;
  return true;
}

// ---------------------------------------------------------------------------------------------------------
// Updates

void route_table::on_update(node_id from, const route_update& u, time_point now) {
  note_time(now);
  const auto nit = from == self_ ? neighbours_.end() : neighbours_.find(from);
  if (nit == neighbours_.end()) return;
  neighbour_state& ns = nit->second;
  ns.held_until = now + route_hold_time();  // it is alive (route_sync.cpp)
  if (u.full_dump && !ns.in_dump) {         // the first part of a dump: what it does not name goes at its end
    ns.in_dump = true;
    ++ns.dump;
  }
  std::vector<node_id> touched;
  for (const route_entry& e : u.entries) {
    if (e.source != self_) drop_ghost(ns, e.source);  // it says something new of a source this node forgot
    if (is_forget(e)) {
      // `from` forgot the source: what it said of it goes. (A forget is no route, so none of the checks.)
      if (e.source == self_) {
        note_heard(ns, ns.self_digest, ns.self_dump, 0);
      } else if (const auto it = sources_.find(e.source);
                 it != sources_.end() && it->second.via.contains(from)) {
        drop_route(it->second, from);
        touched.push_back(e.source);
      }
      continue;
    }
    if (e.source == self_) {
      note_heard(ns, ns.self_digest, ns.self_dump, entry_digest(e));
      note_about_self(e, now);
      continue;
    }
    if (!entry_acceptable(from, e)) continue;
    if (store_route(from, e, now)) touched.push_back(e.source);
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (node_id source : touched) select_route(source, sources_.at(source), now);
  finish_mutation();
}

// False if `e` only repeats what `from` last said (a dump repeats every route): it counts as named by the dump,
// and nothing the selection depends on changed.
bool route_table::store_route(node_id from, const route_entry& e, time_point now) {
  const auto [sit, created] = sources_.try_emplace(e.source);
  source_state& s = sit->second;
  // Forgotten here and heard of again before the forget went out: its neighbours get the forget and then
  // what we say of it now, in that order (collect_triggered), so their copy of our entries stays ours.
  if (created && forgotten_.contains(e.source)) {
    s.trigger_pinned = true;
    schedule_trigger(e.source, now);
  }
  neighbour_state& ns = neighbours_.at(from);
  // Replaced in place: a route changes with every update a neighbour sends, and erasing and inserting it cost
  // an allocation and a rebalance each time.
  auto it = s.via.find(from);
  if (it != s.via.end() && it->second.seqno == e.seqno && it->second.metric == e.metric &&
      it->second.intervals == e.intervals && it->second.in_transit == e.in_transit) {
    it->second.dump = ns.dump;  // a repeat (in a dump) restarts no request backoff: nothing changed
    return false;
  }
  // A retraction's intervals are what the source was last known to hold (select_route). Copied before anything
  // changes: an allocation that fails leaves the table as it was.
  std::vector<route_interval> intervals = e.intervals, in_transit = e.in_transit;
  if (it == s.via.end()) {
    it = s.via.try_emplace(from).first;
  } else {
    held_intervals_ -= it->second.intervals.size() + it->second.in_transit.size();
  }
  neighbour_route& r = it->second;
  r.seqno = e.seqno;
  r.metric = e.metric;
  r.intervals = std::move(intervals);
  r.in_transit = std::move(in_transit);
  note_heard(ns, r.digest, r.dump, entry_digest(e));
  note_arrival(s, r, now);
  held_intervals_ += r.intervals.size() + r.in_transit.size();
  return true;
}

// Someone holds a seqno for us newer than ours (another node claiming our name, or a bug): outbid it. A
// retraction of us at our seqno or older is a neighbour that lost its route to us: we re-advertise, without a
// raise (a seqno request brings one where a route is not feasible). An echo of our seqno with a finite metric
// is just a neighbour's route to us, not news. Within the window of our own seqno: whatever our neighbours
// accepted must be outbid, or they hold it until they forget the name. Beyond it, a claim is ignored, as our
// neighbours ignore it.
void route_table::note_about_self(const route_entry& e, time_point now) {
  if (e.seqno == 0 || e.seqno > max_plausible_seqno) {
    ++stats_.seqno_absurd;
    return;
  }
  // Beyond the window of our own seqno, no neighbour can have taken the claim (their newest seen for us is
  // about ours), and following it would put our own updates beyond their windows: ignore it.
  if (e.seqno > own_seqno_ && e.seqno - own_seqno_ > params_.seqno_window) {
    ++stats_.seqno_out_of_window;
    return;
  }
  if (e.seqno > own_seqno_) {
    ++stats_.own_name_claims;
    raise_own_seqno_past(e.seqno, now);
  } else if (e.metric == infinite_metric) {
    schedule_trigger(self_, now);
  }
}

// The first raise is immediate; claims within own_raise_holdoff of it merge into one raise at its end
// (expire() applies it), so a flood of claims costs one update per holdoff, not one per claim.
void route_table::raise_own_seqno_past(std::uint64_t seqno, time_point now) {
  own_claim_ = std::max(own_claim_, seqno);
  if (!own_raise_due_ && own_raised_at_ && now < *own_raised_at_ + params_.own_raise_holdoff) {
    own_raise_due_ = *own_raised_at_ + params_.own_raise_holdoff;
  }
  if (own_raise_due_) {
    ++stats_.own_raises_deferred;
    return;
  }
  apply_own_raise(now);
}

// A raise goes at most half the window at a time: neighbours that never heard the claim know about our old
// seqno, and must still take the new one. A claim further ahead is outbid in steps, one per holdoff.
void route_table::apply_own_raise(time_point now) {
  const std::uint64_t target = seqno::next_even_above(own_claim_);
  const std::uint64_t step = seqno::even_at_least(own_seqno_ + params_.seqno_window / 2);
  if (target > step) {
    own_seqno_ = step;
    own_raise_due_ = now + params_.own_raise_holdoff;  // the rest at the next holdoff; own_claim_ stays
  } else {
    own_seqno_ = std::max(own_seqno_, target);
    own_claim_ = 0;
    own_raise_due_.reset();
  }
  own_raised_at_ = now;
  schedule_trigger(self_, now);
}

// ---------------------------------------------------------------------------------------------------------
// Seqno requests

route_table::request_action route_table::on_request(node_id from, const route_request& r, time_point now) {
  note_time(now);
  request_action act;
  const auto nit = from == self_ ? neighbours_.end() : neighbours_.find(from);
  if (nit == neighbours_.end()) return act;
  nit->second.held_until = now + route_hold_time();  // it is alive (route_sync.cpp)
  if (r.hop_limit == 0) return act;
  if (r.source == self_) {
    // No honest request asks for more than the next seqno: requesters ask one above what their feasibility
    // distance holds, which came from this node. Granting more lets a key holder walk the seqno a window per
    // request, and the answers, passed on at once along the request's path, outrun the nodes beside it, which
    // hear the new seqno only in dumps, beyond their window: the name is unreachable for them until forgotten.
    if (r.seqno > seqno::next_even_above(own_seqno_)) {
      ++stats_.seqno_out_of_window;
      return act;
    }
    if (!seqno_acceptable(own_seqno_, r.seqno) || !request_allowed(own_request_acted_at_, now)) return act;
    // RFC 8966 3.8.1.2: the source answers by making its seqno at least the one asked for.
    own_seqno_ = std::max(own_seqno_, seqno::even_at_least(r.seqno));
    schedule_trigger(self_, now);
    act.kind = request_action::bumped_own;
    return act;
  }
  auto it = sources_.find(r.source);
  if (it == sources_.end()) return act;
  source_state& s = it->second;
  if (!seqno_acceptable(newest_seen(s), r.seqno)) return act;
  if (s.next_hop && s.seqno >= r.seqno) {
    if (!request_allowed(s.request_acted_at, now)) return act;
    s.trigger_pinned = true;
    schedule_trigger(r.source, now);  // RFC 8966 3.8.1.2: we can satisfy it: re-advertise, don't forward
    return act;
  }
  if (r.hop_limit <= 1) return act;
  // RFC 8966 3.8.1.2: a request is redundant while one for as much that this node sent or forwarded is
  // unanswered and recent (request_window()); its answer goes on at once to every neighbour, this asker too.
  // Where retractions come late (slow links, a node behind on its input), every node of a cut's far side asks,
  // along routes as stale as its own: forwarding each multiplied them. An asker sends at 0, 2, 6, 14 and 30
  // holdoffs (collect_requests), and a request across hundreds of slow hops is answered seconds later: a
  // window of 8 holdoffs let its third copy and every later one cross the whole path again. Links lose nothing
  // while up, so what the window delays is recovery from a request dropped beyond here by a rate limit or a
  // route that changed: the asker's resends are spaced up to twice the window, so a later one passes. The
  // window grows with the answers' delay: a fixed 32 holdoffs let answers later than that on a one-thread
  // ring of 1,000 bring each asker's sixth send across the path again. Only a copy that went where this one
  // would go, and at least as far, counts: a request with a hop limit too short to reach the source must not
  // silence real ones, and one whose next hop went away or changed is not on its way.
  const auto to = request_target(s, from);
  const std::uint16_t hops = static_cast<std::uint16_t>(std::min(r.hop_limit, request_hop_limit) - 1);
  if (s.requested_seqno >= r.seqno && now < s.requested_at + request_window() &&
      to && to == s.requested_via && hops <= s.requested_hops) {
    ++stats_.requests_limited;
    return act;
  }
  // RFC 8966 3.8.1.2: don't forward a duplicate of a request we recently forwarded (the holdoff does that).
  if (!to || !request_allowed(s.request_acted_at, now)) return act;
  // Its answer goes back at once (apply_selection). The lowest seqno asked is kept, not the highest: one for
  // more than the source grants is never answered, and it must not hold the answers to real requests back.
  s.requested_seqno = s.requested_seqno == 0 ? r.seqno : std::min(s.requested_seqno, r.seqno);
  // Only a request an honest node could send (one above a seqno the source gave) makes others redundant: one
  // for more than the source grants, renewed before it lapses, would silence every real request on its path.
  if (r.seqno <= newest_seen(s) + 1) {
    s.requested_at = now;
    s.requested_via = *to;
    s.requested_hops = hops;
    s.requested_copies = static_cast<std::uint8_t>(std::min(s.requested_copies + 1, 2));
  }
  act.kind = request_action::forward;
  act.forward_to = *to;
  // A hop limit above ours is taken as ours: a request must not outlive what this node would give its own.
  act.forwarded = {r.source, r.seqno, hops};
  return act;
}

}  // namespace phoenix::overlay
