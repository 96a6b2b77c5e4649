// overlay/routing/route_sync.cpp — how two neighbours keep the same view of what each advertised: summaries,
// dump requests and dumps, instead of DSDV's and Babel's periodic full dumps.
//
// Babel sends every route again every interval because its packets may be lost; phoenix's links deliver every
// frame once and in order while the link is up, and a link that breaks takes every route through it (both ends
// call neighbour_down). So a neighbour already holds whatever this node advertised, and repeating it costs
// (N + 1) entries per neighbour per interval, which on 1,000 nodes at a 1 s interval is more work than one
// core can do for all of them (bench/README.md, "routing_scale"). What is kept of periodic updates:
//  - Every full_dump_interval (jittered) a node sends each neighbour a summary: the XOR of entry_digest over
//    every entry it has advertised (its own, and the last entry of every source it knows), and their number.
//    Pending triggered entries go out first, so that every neighbour holds what the summary sums up.
//  - The receiver keeps the same sum over what it holds from that neighbour. If the two differ (a bug, an entry
//    this node refused, a source it forgot that the neighbour still advertises), it asks for a dump.
//  - Whatever a neighbour sends (a summary, an update, a request) holds all its routes for another
//    route_hold_time(): what its routes say is kept right by the sums, so the hold only has to notice a
//    neighbour that stopped talking with its link still open. Holding them only on a summary that matched
//    let a process too busy to read its sockets in time (1,000 nodes on one thread) drop a quarter of its
//    neighbours' routes while they converged, and the churn never settled.
//  - A dump (to a new neighbour, or to one that asked) is every entry, then a summary marked ends_dump: its
//    receiver drops whatever the dump did not name and holds the rest.
//  - A source forgotten (source_expiry) is announced with a forget entry, so that neighbours drop what this
//    node said of it and the sums stay equal.
// A neighbour that says nothing for the hold time loses its routes, as one that stopped sending dumps did.
// What one peer can make this node do: one dump per interval (a request sooner waits), one dump request
// per half interval of its own, two walks of the table per interval at the ends of its dumps, and no state
// beyond what its updates already bound (its ghosts: at most max_sources).
#include <algorithm>

#include "base/splitmix.hpp"
#include "overlay/routing/route_table.hpp"

namespace phoenix::overlay {

using base::splitmix64_mix;

// Part of the protocol: both ends compute it, so it must not change without a new protocol version.
std::uint64_t route_table::entry_digest(const route_entry& e) {
  std::uint64_t h = splitmix64_mix(e.source ^ 0x70686f656e6978ull);
  auto add = [&h](std::uint64_t v) { h = splitmix64_mix(h ^ v) + 0x9e3779b97f4a7c15ull; };
  add(e.seqno);
  add(e.metric);
  add(e.intervals.size());
  for (const auto& i : e.intervals) {
    add(i.lo);
    add(i.hi);
  }
  add(e.in_transit.size());
  for (const auto& i : e.in_transit) {
    add(i.lo);
    add(i.hi);
  }
  return h == 0 ? 1 : h;  // 0 means "nothing"
}

// Our sums: the entry now advertised for a slot replaces what the slot held.
void route_table::note_advertised(std::uint64_t& digest, const route_entry& e) {
  const std::uint64_t d = entry_digest(e);
  if (digest == 0) ++advertised_;
  digest_ ^= digest ^ d;
  digest = d;
}

// A neighbour's sums: `d` (0: nothing) replaces what one of its slots held, heard in its current dump.
void route_table::note_heard(neighbour_state& ns, std::uint64_t& digest, std::uint32_t& dump, std::uint64_t d) {
  if (digest == 0 && d != 0) ++ns.entries;
  if (digest != 0 && d == 0) --ns.entries;
  ns.digest ^= digest ^ d;
  digest = d;
  dump = ns.dump;
}

// Time this node did not run is not its neighbours' silence: their frames waited unread meanwhile (a process
// stopped and resumed, or one thread serving many nodes that fell behind: routing_scale freezes all of them
// while it checks). The table asks to be woken at least once per summary period, so a longer gap between two
// calls is time asleep, and every hold moves on by it.
void route_table::note_time(time_point now) {
  const auto awake = params_.full_dump_interval * 5 / 4 + params_.trigger_gap;
  if (last_now_ != time_point::min() && now - last_now_ > awake) {
    for (auto& [n, ns] : neighbours_)
      if (ns.held_until != time_point::max()) ns.held_until += now - last_now_ - awake;
  }
  last_now_ = std::max(last_now_, now);
}

// Split horizon with poisoned reverse (route_params::split_horizon; RFC 8966 3.7.4 allows split horizon on
// links known to be symmetric, as a phoenix link is): a route goes to its own next hop as a retraction.
// Without it, a node routing through a neighbour offers that neighbour a finite route back; when the neighbour
// loses its own, it takes that stale route for an alternative, and where retractions come after the request
// timers every node behind a cut asks along routes as stale as its own.
void route_table::note_advertised_via(source_state& s, const route_entry& e, std::optional<node_id> via) {
  if (via == e.source) via.reset();  // a neighbour's own entry: it knows better, and would re-announce itself
  s.advertised_via = via;
  s.poison_digest = 0;
  if (!via) return;
  route_entry poison = e;
  poison.metric = infinite_metric;
  s.poison_digest = entry_digest(poison);
  if (const auto it = neighbours_.find(*via); it != neighbours_.end())
    it->second.poison_correction ^= s.digest ^ s.poison_digest;
}

void route_table::unnote_advertised_via(source_state& s) {
  if (s.advertised_via) {
    if (const auto it = neighbours_.find(*s.advertised_via); it != neighbours_.end())
      it->second.poison_correction ^= s.digest ^ s.poison_digest;
  }
  s.advertised_via.reset();
  s.poison_digest = 0;
}

route_update route_table::as_heard_by(const route_update& u, node_id n) const {
  route_update out = u;
  for (auto& e : out.entries) {
    if (e.source == self_ || is_forget(e)) continue;
    const auto it = sources_.find(e.source);
    if (it != sources_.end() && it->second.advertised_via == n) e.metric = infinite_metric;
  }
  return out;
}

route_summary route_table::summary(node_id to, bool ends_dump) const {
  const auto it = neighbours_.find(to);
  const std::uint64_t correction = it == neighbours_.end() ? 0 : it->second.poison_correction;
  return {digest_ ^ correction, advertised_, ends_dump};
}

void route_table::periodic_summary(time_point now) { next_summary_ = next_summary_after(now); }

void route_table::on_summary(node_id from, const route_summary& sum, time_point now) {
  note_time(now);
  const auto it = from == self_ ? neighbours_.end() : neighbours_.find(from);
  if (it == neighbours_.end()) return;
  neighbour_state& ns = it->second;
  ns.held_until = now + route_hold_time();
  const std::uint64_t digest_delta = sum.digest ^ ns.digest;
  const std::int64_t entries_delta = std::int64_t{sum.entries} - std::int64_t{ns.entries};
  if (sum.ends_dump) {
    // All it has, as far as this node takes it, even if the sums differ (entries refused here): asking again
    // would only bring the same dump, so that difference is remembered. Dropping what the dump did not name
    // walks every source: at most twice per interval, whatever a peer sends (honest dumps come once).
    if (ns.in_dump && now >= ns.dump_ended_at + dump_holdoff() / 2) {
      drop_neighbour_routes(from, now, true);
      ns.dump_ended_at = now;
      ns.known_digest_delta = sum.digest ^ ns.digest;
      ns.known_entries_delta = std::int64_t{sum.entries} - std::int64_t{ns.entries};
    }
    ns.in_dump = false;
    return;
  }
  // Trusted for eight intervals: a link that lost frames (it cannot, while up, but a table cannot know) is
  // repaired then at the latest; refused entries cost one dump per eight intervals, not one per interval.
  if (digest_delta == ns.known_digest_delta && entries_delta == ns.known_entries_delta &&
      (digest_delta == 0 || now < ns.dump_ended_at + params_.full_dump_interval * 8))
    return;
  ++sync_stats_.summaries_differed;
  if (now >= ns.asked_at + dump_request_holdoff()) ns.ask = true;
}

void route_table::on_dump_request(node_id from, time_point now) {
  note_time(now);
  const auto it = from == self_ ? neighbours_.end() : neighbours_.find(from);
  if (it == neighbours_.end()) return;
  neighbour_state& ns = it->second;
  ns.held_until = now + route_hold_time();
  const time_point due = std::max(now, ns.dumped_at + dump_holdoff());
  if (!ns.dump_due || due < *ns.dump_due) ns.dump_due = due;
}

std::vector<node_id> route_table::collect_dumps(time_point now) {
  std::vector<node_id> out;
  for (auto& [n, ns] : neighbours_) {
    if (!ns.dump_due || *ns.dump_due > now) continue;
    ns.dump_due.reset();
    ns.dumped_at = now;
    ++sync_stats_.dumps_sent;
    out.push_back(n);
  }
  return out;
}

std::vector<node_id> route_table::collect_dump_requests(time_point now) {
  std::vector<node_id> out;
  for (auto& [n, ns] : neighbours_) {
    if (!ns.ask) continue;
    ns.ask = false;
    ns.asked_at = now;
    ++sync_stats_.dump_requests_sent;
    out.push_back(n);
  }
  return out;
}

void route_table::drop_ghost(neighbour_state& ns, node_id source) {
  const auto it = ns.ghosts.find(source);
  if (it == ns.ghosts.end()) return;
  note_heard(ns, it->second.digest, it->second.dump, 0);
  ns.ghosts.erase(it);
}

// Routes of neighbour n go, as if its link broke: all of them, or (at the end of its dump) those the dump did
// not name; its entry naming this node, and its ghosts, likewise.
void route_table::drop_neighbour_routes(node_id n, time_point now, bool unnamed_in_dump_only) {
  neighbour_state& ns = neighbours_.at(n);
  if (ns.self_digest != 0 && (!unnamed_in_dump_only || ns.self_dump != ns.dump))
    note_heard(ns, ns.self_digest, ns.self_dump, 0);
  for (auto g = ns.ghosts.begin(); g != ns.ghosts.end();) {
    if (unnamed_in_dump_only && g->second.dump == ns.dump) {
      ++g;
      continue;
    }
    note_heard(ns, g->second.digest, g->second.dump, 0);
    g = ns.ghosts.erase(g);
  }
  for (auto& [source, s] : sources_) {
    if (!unnamed_in_dump_only && s.requested_via == n) s.requested_via.reset();  // that copy is lost
    const auto r = s.via.find(n);
    if (r == s.via.end() || (unnamed_in_dump_only && r->second.dump == ns.dump)) continue;
    drop_route(s, n);
    select_route(source, s, now);
  }
  finish_mutation();
}

std::vector<route_message> route_table::collect_output(time_point now) {
  note_time(now);
  std::vector<route_message> out;
  for (node_id n : collect_dumps(now)) {
    out.push_back({n, full_dump(now, n)});
    out.push_back({n, summary(n, true)});
  }
  const bool periodic = summary_due(now);
  if (auto u = collect_triggered(now, periodic)) {
    // Each next hop of an entry hears that entry as a retraction; everyone else the update as it is.
    std::vector<node_id> vias;
    for (const auto& e : u->entries) {
      const auto it = e.source == self_ ? sources_.end() : sources_.find(e.source);
      if (it != sources_.end() && it->second.advertised_via && neighbours_.contains(*it->second.advertised_via))
        vias.push_back(*it->second.advertised_via);
    }
    std::sort(vias.begin(), vias.end());
    vias.erase(std::unique(vias.begin(), vias.end()), vias.end());
    for (node_id n : vias) out.push_back({n, as_heard_by(*u, n)});
    out.push_back({std::nullopt, std::move(*u), std::move(vias)});
  }
  if (periodic) {
    periodic_summary(now);
    for (const auto& [n, ns] : neighbours_) out.push_back({n, summary(n, false)});
  }
  for (node_id n : collect_dump_requests(now)) out.push_back({n, route_dump_request{}});
  for (auto& [n, r] : collect_requests(now)) out.push_back({n, r});
  return out;
}

bool route_table::has_pending_output() const {
  if (!trigger_queue_.empty() || !request_queue_.empty() || !forgotten_.empty()) return true;
  return std::any_of(neighbours_.begin(), neighbours_.end(),
                     [](const auto& n) { return n.second.ask || n.second.dump_due.has_value(); });
}

std::vector<node_id> route_table::neighbours() const {
  std::vector<node_id> out;
  out.reserve(neighbours_.size());
  for (const auto& [n, ns] : neighbours_) out.push_back(n);
  return out;
}

}  // namespace phoenix::overlay
