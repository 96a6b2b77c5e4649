// overlay/routing/route_table.hpp — the overlay's routing table: distance vector with Babel's feasibility
// condition, retractions and seqno requests (RFC 8966 2.4, 3.5, 3.7-3.8), DSDV's settling delay (Perkins &
// Bhagwat, SIGCOMM'94).
//
// Every node originates one source (itself): its resource name plus the intervals of the virtual node space
// it assumes, stamped with a destination sequence number only it increments (by 2: even seqnos). For every
// other source the table keeps what each neighbour last advertised, selects one route (newest seqno, then
// fewest hops, among feasible routes only) and decides what to advertise and when. A route lost without a
// feasible alternative is retracted without a new seqno, so only the nodes that routed through it lose it;
// one with an alternative that is not feasible asks the source for a newer seqno (a seqno request). With
// route_params::split_horizon, a route is advertised to its own next hop as a retraction (poisoned reverse).
//
// Contract:
//  - Pure and deterministic: no I/O, no clock reads, no threads. Every call that depends on time takes `now`;
//    the caller owns timing and must pass non-decreasing times. The summary period's jitter comes from a
//    generator seeded by the node's id.
//  - Single-threaded: one owner calls everything; const members may run concurrently only with each other,
//    except owner_of() and lost_owners(), which may repaint the owner index.
//  - Expected failures are values; nothing here throws except std::bad_alloc.
//  - Loop freedom (RFC 8966 2.4): a node only selects a route whose advertised (seqno, metric) is strictly
//    better than the feasibility distance of what it has itself advertised; it counts everything returned by
//    collect_triggered()/full_dump() as advertised. That holds even if frames are lost or reordered; the
//    caller must still send those updates to every neighbour that is up, or routes will not converge.
//  - Neighbours are assumed to run with the same route_params: how long a neighbour's route is held without
//    being refreshed derives from full_dump_interval (see route_hold_time()).
//  - Seqno 0 is never valid (own seqnos start at 2). Seqnos are compared as plain integers, not modulo
//    (RFC 8966 3.2.1): nothing honest comes near max_plausible_seqno, which bounds every seqno accepted, so
//    none wraps.
//  - Input is hostile (route_input.cpp): every update and request is checked against bounds and windows and
//    rate limits before it touches the table; what was ignored is counted in input_stats().
//
// Summaries instead of periodic dumps (route_sync.cpp): links are reliable and ordered, so a neighbour already
// holds everything this node advertised. Every full_dump_interval (jittered) a node sends each neighbour a
// summary, a digest of its advertised entries; a neighbour whose copy differs asks for the whole table (a
// dump request) and gets it, ended by a summary that drops whatever the dump did not name. A new neighbour gets
// the whole table at once. Whatever a neighbour sends holds every route it gave, as a dump's repeats did.
//
// Driving it (what the overlay does on every event and on its timer):
//     table.on_update(...) / on_request(...) / on_summary(...) / neighbour_up(...) / ...
//     table.expire(now);                          // first: a timed-out route may trigger a retraction
//     for (auto& m : table.collect_output(now))   // in order: to m.to, or to every neighbour that is up
//       send m.what;
//     re-arm the timer at table.next_deadline();  // now strictly in the future
//   and whenever generation() changed, re-examine messages waiting for a route or an owner.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <phoenix/interval.hpp>
#include <set>
#include <utility>
#include <variant>
#include <vector>

#include "overlay/routing/owner_index.hpp"

namespace phoenix::overlay {

using node_id = std::uint64_t;
using time_point = std::chrono::steady_clock::time_point;
constexpr std::uint16_t infinite_metric = 0xFFFF;

using route_interval = Interval;  // <phoenix/interval.hpp>

// One destination as carried in an update. metric is the sender's own metric (its hop count to source).
struct route_entry {
  node_id source = 0;
  std::uint64_t seqno = 0;
  std::uint16_t metric = 0;
  // The source's intervals (sorted, disjoint); in a retraction, those it was last known to hold, so that a
  // node that withdrew them before it left is not taken for a lost owner where only the retraction arrives.
  std::vector<route_interval> intervals;
  // What the source released to a taker not yet heard to assume it (sorted, disjoint): never routed to, but
  // part of the source's record should it be lost (lost_owners), so that a giver that crashes with an interval
  // on its way leaves it reported, not nobody's and unknown.
  std::vector<route_interval> in_transit{};
  friend bool operator==(const route_entry&, const route_entry&) = default;
};

struct route_update {
  bool full_dump = false;  // informational for the receiver: updates may be split, so absence means nothing
  std::vector<route_entry> entries;
  friend bool operator==(const route_update&, const route_update&) = default;
};

// An entry with seqno 0 (never a valid seqno) and no intervals is a forget: its sender no longer knows the
// source (it expired there), so its receivers drop what the sender last said of it.
inline route_entry forget_entry(node_id source) { return {source, 0, infinite_metric, {}, {}}; }
inline bool is_forget(const route_entry& e) { return e.seqno == 0; }

// A digest of every entry its sender has advertised and not forgotten (the XOR of route_table::entry_digest
// over them) and their number. ends_dump: the last message of a full dump to this neighbour, whose receiver
// drops whatever the dump did not name.
struct route_summary {
  std::uint64_t digest = 0;
  std::uint32_t entries = 0;
  bool ends_dump = false;
  friend bool operator==(const route_summary&, const route_summary&) = default;
};

// "Please send me your whole table": a summary did not match.
struct route_dump_request {
  friend bool operator==(const route_dump_request&, const route_dump_request&) = default;
};

// RFC 8966 3.8.1: "please advertise `source` with a seqno >= `seqno`".
struct route_request {
  node_id source = 0;
  std::uint64_t seqno = 0;
  std::uint16_t hop_limit = 0;
  friend bool operator==(const route_request&, const route_request&) = default;
};

struct route_params {
  // The period of summaries (and the base of hold times): see route_sync.cpp.
  std::chrono::milliseconds full_dump_interval{10000};
  std::chrono::milliseconds max_settling_time{200};  // cap on DSDV settling delay
  // A neighbour's routes are held at least this long after it last said anything (route_hold_time()). The
  // hold only has to notice a neighbour hung with its link open (a closed link takes its routes at once), and a
  // short interval, chosen for fast news, must not make a node drop a neighbour that is merely busy: 1,000
  // nodes on one thread at a 1 s interval left frames unread for over 3.5 s while the tables converged.
  std::chrono::milliseconds min_route_hold{30000};
  std::chrono::milliseconds expiry{60000};         // an unreachable source is forgotten after this (but see
                                                   // route_table::source_expiry())
  std::chrono::milliseconds request_holdoff{200};  // min gap between two seqno requests for one source
  // A first request waits this long: a neighbour's finite route may be one its next retraction takes back (the
  // retraction wave of a cut passes each node one hop behind the other), and only nodes next to a real route
  // should ask.
  std::chrono::milliseconds request_delay{50};
  // Min gap between two triggered updates (RFC 8966 3.7.2: triggered updates may be buffered briefly): what
  // changes within it goes out as one update. A cut's news reaches a node as a stream of frames, and one update
  // per frame received tripled the frames of a 1,000-node ring (route_sim). The own entry is never held back.
  std::chrono::milliseconds trigger_gap{5};
  // Split horizon with poisoned reverse (route_sync.cpp). Off by default: it spared requests in route_sim, but
  // made the one-thread 1,000-node ring repair a cut more slowly (bench/README.md, "Summaries"), for reasons
  // not yet known.
  bool split_horizon = false;
  // How far an update's or a request's seqno may lie beyond the newest one seen for a known source
  // (route_input.cpp argues the value); beyond it the input is ignored.
  std::uint64_t seqno_window = std::uint64_t{1} << 16;
  // Min gap between two raises of the own seqno answering updates that name this node at a newer seqno (another
  // node claiming its name): the first raise is immediate, later ones are merged into one at the gap's end.
  std::chrono::milliseconds own_raise_holdoff{200};
  // Seqno requests acted on (answered or forwarded), all sources together: a token bucket. A cut can make every
  // node on one side ask for half the others' seqnos at once, each request forwarded along a path of up to half
  // the network: at 200 a second, a ring of 200 lost most of the requests that mattered on the way.
  std::uint32_t requests_per_second = 2000;
  std::uint32_t request_burst = 1000;
  // Memory a neighbour can make this node hold: known sources, and intervals held over all neighbour routes.
  std::size_t max_sources = std::size_t{1} << 16;
  std::size_t max_held_intervals = std::size_t{1} << 20;
};

// Seqnos above this are absurd and ignored: 2^47 raises, even at 1000 a second, take 4,000 years. Odd, so that
// a request for one above the highest even seqno (max_plausible_seqno - 1) is still plausible.
inline constexpr std::uint64_t max_plausible_seqno = (std::uint64_t{1} << 48) - 1;

// Routing input ignored, by reason (route_input.cpp). Cumulative; never reset.
struct route_input_stats {
  std::uint64_t seqno_absurd = 0;         // above max_plausible_seqno (updates and requests)
  std::uint64_t seqno_out_of_window = 0;  // beyond seqno_window ahead of the newest seen (updates and requests)
  std::uint64_t metric_absurd = 0;        // metric 0 for a source other than the sender
  std::uint64_t sources_over_limit = 0;   // a new source past max_sources
  std::uint64_t intervals_over_limit = 0;  // an entry whose intervals would pass max_held_intervals
  std::uint64_t requests_limited = 0;      // seqno requests past the per-source holdoff or the total rate, or
                                           // redundant (one for as much is unanswered: route_input.cpp)
  std::uint64_t own_name_claims = 0;       // updates naming this node at a seqno above its own
  std::uint64_t own_raises_deferred = 0;   // of those, answered by a raise merged at own_raise_holdoff's end
  friend bool operator==(const route_input_stats&, const route_input_stats&) = default;
};

// One message the table wants sent (collect_output): to one neighbour, or to every neighbour that is up.
struct route_message {
  std::optional<node_id> to;  // nullopt: every neighbour that is up, but those in `except` (sorted)
  std::variant<route_update, route_summary, route_request, route_dump_request> what;
  std::vector<node_id> except{};
  friend bool operator==(const route_message&, const route_message&) = default;
};

// What keeping neighbours in step cost (route_sync.cpp). Cumulative; never reset.
struct route_sync_stats {
  std::uint64_t dumps_sent = 0;
  std::uint64_t dump_requests_sent = 0;
  std::uint64_t summaries_differed = 0;  // periodic summaries that did not match what this node holds
  std::uint64_t holds_expired = 0;       // neighbours whose routes all went: nothing from them for a hold time
  friend bool operator==(const route_sync_stats&, const route_sync_stats&) = default;
};

class route_table {
 public:
  // How far a seqno request travels: beyond it, a path is repaired by full dumps and hold times only.
  static constexpr std::uint16_t request_hop_limit = 1024;
  // The longest wait between two resends of an unanswered seqno request (collect_requests).
  // Twice the longest request window, so that a resend passes every window its last copy set, and at least
  // the dump interval. 12.8 s to 25.6 s at the default holdoff.
  std::chrono::nanoseconds max_request_backoff() const {
    return std::max<std::chrono::nanoseconds>(params_.full_dump_interval, request_window() * 2);
  }
  // How long a request this node sent or forwarded makes later ones for as much redundant (on_request): twice
  // the time its answers took (answer_delay()), at least 32 holdoffs (6.4 s) and at most 64 (12.8 s).
  std::chrono::nanoseconds request_window() const {
    return std::clamp<std::chrono::nanoseconds>(answer_delay_ * 2, params_.request_holdoff * 32,
                                                params_.request_holdoff * 64);
  }
  // Smoothed time from a request sent or forwarded once to the update that answered it (1/8 gain, as TCP's
  // SRTT; a request sent again is not sampled, as Karn's rule says).
  std::chrono::nanoseconds answer_delay() const { return answer_delay_; }

  route_table(node_id self, route_params params, time_point now);

  node_id self() const { return self_; }
  std::uint64_t own_seqno() const { return own_seqno_; }
  const std::vector<route_interval>& local_intervals() const { return own_intervals_; }

  // --- local events ---
  // Replaces this node's intervals (normalised: sorted, merged, empty ones dropped); bumps own seqno, triggers.
  void set_local_intervals(std::vector<route_interval> intervals, time_point now,
                           std::vector<route_interval> in_transit = {});
  // Triggers the own entry and owes the new neighbour a full dump at once, so that it learns the whole table
  // (no new seqno: see route_table.cpp).
  void neighbour_up(node_id n, time_point now);
  // Drops routes via n. A source that still has a feasible route switches to it (triggered only if the metric
  // changes); one that has none becomes unreachable and, if we had advertised a route for it, is retracted at
  // once, at the seqno it had; a seqno request is queued if some neighbour holds a route we cannot use.
  void neighbour_down(node_id n, time_point now);

  // --- input from a neighbour (already authenticated and decoded, but hostile: route_input.cpp) ---
  // Ignored if `from` is self or not a neighbour that is up (a late frame from a dead link must not
  // resurrect routes through it). Entries failing a check are ignored one by one and counted.
  // An entry naming this node is never a route: if its seqno is above the own one (another node claiming this
  // name), the own seqno is raised past it, at most once per own_raise_holdoff.
  // A forget entry drops what `from` last said of its source.
  void on_update(node_id from, const route_update& u, time_point now);
  // A neighbour's summary (route_sync.cpp). If it differs from what this node holds from `from` (by more than
  // what `from`'s last dump left), a dump request goes to `from` (at most one per half interval). One that ends
  // a dump drops every route the dump did not name. Like everything `from` sends, it holds all of `from`'s
  // routes for route_hold_time() more.
  void on_summary(node_id from, const route_summary& s, time_point now);
  // `from` asks for the whole table: a dump goes to it, at most one per interval (later ones wait).
  void on_dump_request(node_id from, time_point now);

  struct request_action {
    enum kind_t { none, bumped_own, forward } kind = none;
    node_id forward_to = 0;
    route_request forwarded;
  };
  // A seqno request arrived from neighbour `from` (RFC 8966 3.8.1.2). bumped_own: this node is the source;
  // its seqno is now >= r.seqno (raised to the next even value if it was below) and its entry is triggered.
  // forward: send `forwarded` to `forward_to` (our next hop, or without one the neighbour with the best route
  // we cannot use; never `from`; duplicates within request_holdoff are dropped). none: nothing to send beyond
  // what collect_triggered() returns (a request we can satisfy triggers a re-advertisement). A forwarded
  // request is remembered: the update that satisfies it is passed on at once, as one this node asked for.
  // Requests are acted on at most once per request_holdoff per source and requests_per_second in total;
  // a seqno beyond seqno_window ahead of the newest seen (the own one, for self) is ignored.
  request_action on_request(node_id from, const route_request& r, time_point now);

  // --- queries (O(log n)) ---
  std::optional<node_id> next_hop(node_id destination) const;  // nullopt if unreachable or unknown; never self
  // The reachable source (or self) whose advertised intervals contain vnode. Overlaps (stale intervals during
  // a migration) resolve to self first, then to the lowest node_id: stable across seqno bumps. The index
  // behind it (owner_index.hpp) changes claim by claim with each source's intervals and reachability.
  std::optional<node_id> owner_of(std::uint64_t vnode) const;
  bool is_reachable(node_id destination) const;
  // Since when `destination` has had no route: nullopt while it has one (or is this node); time_point::min() if
  // this node knows nothing of it (never heard of it, or forgot it after source_expiry()).
  std::optional<time_point> unreachable_since(node_id destination) const;
  // Increments whenever any next hop or reachability changes, or a reachable source's intervals (so the
  // vnode->owner index may have changed).
  std::uint64_t generation() const { return generation_; }

  // --- output ---
  // Everything due now, in the order it must be sent: dumps owed (each to its neighbour alone, ended by a
  // summary), triggered entries, the periodic summary (before it, every pending entry goes out, so that all
  // neighbours hold what it sums up), dump requests, seqno requests. The calls below are its parts.
  std::vector<route_message> collect_output(time_point now);

  // Entries whose advertisement changed (reachability, metric or intervals against what was last sent) and
  // whose settling delay has passed, or nullopt; forget entries for sources forgotten since the last one come
  // first. Updates feasibility distances. A newer seqno with a worse metric than last advertised waits
  // settling_time(); a change undone before it went out is not sent. Within trigger_gap of the last update
  // returned, nothing is (unless the own entry is due). `all`: every pending entry, due or not.
  std::optional<route_update> collect_triggered(time_point now, bool all = false);
  bool summary_due(time_point now) const { return now >= next_summary_; }
  // The digest of everything advertised. periodic_summary restarts the period, jittered (RFC 8966 appendix B):
  // between 3/4 and 5/4 of full_dump_interval, so that nodes started together do not send in step.
  route_summary summary(node_id to, bool ends_dump) const;
  // Restarts the period; the summaries themselves are summary(n, false) for each neighbour n.
  void periodic_summary(time_point now);
  // Every known source incl. self and unreachable ones, for one neighbour, as that neighbour hears them (split
  // horizon: routes through it as retractions; a full dump without `to`); its receiver learns of entries the
  // others have not heard yet, which are then triggered (pinned) for all. Unlike DSDV, a dump does not bump
  // our own seqno (see route_table.cpp).
  route_update full_dump(time_point now, std::optional<node_id> to = std::nullopt);
  // Neighbours owed a dump now (new, or asked: on_dump_request); each gets full_dump() then summary(true).
  std::vector<node_id> collect_dumps(time_point now);
  std::vector<node_id> collect_dump_requests(time_point now);  // neighbours whose summary did not match
  std::vector<std::pair<node_id, route_request>> collect_requests(time_point now);  // (neighbour, request)
  time_point next_deadline() const;  // earliest time collect_output or expire has something to do
  // Drops the routes of a neighbour that said nothing for route_hold_time(), forgets sources unreachable for
  // source_expiry(); raises the own seqno if a raise was held off (own_raise_holdoff).
  void expire(time_point now);
  // RFC 8966 appendix B: a route is held for 3.5 update intervals (2.8 of the longest jittered ones), here
  // from the last frame of its neighbour, which sends at least a summary per interval; at least
  // min_route_hold. Assumes neighbours use the same full_dump_interval.
  std::chrono::nanoseconds route_hold_time() const {
    return std::max<std::chrono::nanoseconds>(params_.full_dump_interval * 7 / 2, params_.min_route_hold);
  }
  // max(params.expiry, route_hold_time() + full_dump_interval). Forgetting a source forgets its feasibility
  // distance, which is only safe once no neighbour can still hold a finite route we advertised: we retracted it
  // when we lost it, and links are reliable, so a neighbour has the retraction or lost its link to us (and its
  // routes through us with it). The margin is kept from DSDV, where routes time out instead.
  std::chrono::nanoseconds source_expiry() const {
    return std::max<std::chrono::nanoseconds>(params_.expiry, route_hold_time() + params_.full_dump_interval);
  }

  // --- owners that went away holding intervals ---
  // A source that became unreachable while it advertised intervals: a crashed node, or one cut off. (A node
  // that finalizes withdraws its intervals first, so it is not one of these.) The record outlives the source's
  // entry (source_expiry); what another node owns of it is no longer the lost source's, for good, and the
  // record goes when the source is reachable again or nothing is left; at most max_sources records and
  // max_held_intervals intervals over all of them, the oldest dropped first.
  struct lost_owner {
    node_id source = 0;
    std::vector<route_interval> intervals;  // those that no reachable source (nor this node) owned since
    time_point since{};                     // when it became unreachable
    // What this node gave it and nobody heard it assume (note_lost_in_transit): news of the source cannot
    // name that, so news that names less keeps it (shrink_lost); a withdrawal ends it with the rest.
    std::vector<route_interval> given;
  };
  // The records at least `after` old with some interval still nobody's, by source. Their age counts from the
  // later of the loss and the last instant this node had no neighbour at all: a node whose links all broke lost
  // its paths to every live node, and needs a newer sequence number from each to get them back; one whose links
  // keep breaking would otherwise report, and adopt, the intervals of live nodes. `since` is that instant.
  std::vector<lost_owner> lost_owners(time_point now, std::chrono::nanoseconds after) const;
  // A source's record holds what it advertised in transit too (route_entry::in_transit).
  // An interval this node gave to `taker`, which became unreachable at `since` before anyone heard it assume
  // the interval: recorded as the taker's, like what it advertised (only the giver knows it left). Nothing if
  // the taker is reachable, or is this node.
  void note_lost_in_transit(node_id taker, route_interval given, time_point since);

  // --- introspection (for the shell/tests) ---
  struct route_view {
    node_id destination;
    node_id next_hop;  // 0 (meaningless) when metric == infinite_metric, i.e. unreachable
    std::uint64_t seqno;
    std::uint16_t metric;
    std::vector<route_interval> intervals;
  };
  std::vector<route_view> routes() const;  // selected route per known destination (excluding self), by id
  std::vector<node_id> neighbours() const;
  // The last instant this node had no neighbour at all (`now` while it has none): its routes to everyone were
  // lost then, and come back only with newer sequence numbers.
  time_point alone_at(time_point now) const { return neighbours_.empty() ? now : alone_at_; }
  // Current DSDV settling delay for source: 2 x EWMA (weight 1/4, starting at 0) of the gap between the first
  // and the best arrival of each of its seqnos, capped at max_settling_time.
  std::chrono::nanoseconds settling_time(node_id source) const;
  // True while a triggered update, a forget, a dump, a dump request or a seqno request is waiting (for tests
  // and the shell).
  bool has_pending_output() const;
  // The digest of one entry as its sender and its receivers compute it (never 0).
  static std::uint64_t entry_digest(const route_entry& e);
  const route_input_stats& input_stats() const { return stats_; }
  const route_sync_stats& sync_stats() const { return sync_stats_; }

 private:
  using timer_queue = std::set<std::pair<time_point, node_id>>;

  struct neighbour_route {  // what one neighbour last advertised for a source (rule 1)
    std::uint64_t seqno = 0;
    std::uint16_t metric = infinite_metric;  // as advertised, i.e. without our hop
    std::vector<route_interval> intervals;
    std::vector<route_interval> in_transit;
    std::uint64_t digest = 0;  // entry_digest of the entry, for the neighbour's summaries
    std::uint32_t dump = 0;    // neighbour_state::dump when it was last heard
  };
  // What this node knows of each neighbour that is up (route_sync.cpp).
  struct neighbour_state {
    // The digest and number of what it advertised and this node holds (its routes, and its entry for self).
    std::uint64_t digest = 0;
    std::uint32_t entries = 0;
    std::uint64_t self_digest = 0;  // its entry naming this node (never a route), 0 if none
    std::uint32_t self_dump = 0;
    std::uint32_t dump = 0;   // counts the dumps it sent; raised at the first entry of each
    bool in_dump = false;     // its dump's entries are arriving (a full_dump update since the last summary)
    time_point held_until{};  // its routes are dropped then unless it says something first
    time_point asked_at = time_point::min();   // our last dump request to it
    bool ask = false;                          // a dump request to it is waiting (collect_dump_requests)
    std::optional<time_point> dump_due;        // a dump owed to it
    time_point dumped_at = time_point::min();  // our last dump to it
    // Our side: XOR of (digest ^ poison_digest) of every source whose route goes through it, which it heard
    // as a retraction (split horizon): its summaries are ours with these swapped.
    std::uint64_t poison_correction = 0;
    // What it said of sources this node forgot and it has not yet (route_table::forget): still in its sums.
    struct ghost {
      std::uint64_t digest = 0;
      std::uint32_t dump = 0;
    };
    std::map<node_id, ghost> ghosts;
    // A difference between its sums and ours that its last dump did not remove (entries this node refused):
    // summaries that differ by exactly this ask for nothing more.
    std::uint64_t known_digest_delta = 0;
    std::int64_t known_entries_delta = 0;
    time_point dump_ended_at = time_point::min();  // the last end of its dump that this node acted on
  };
  struct feasibility_distance {  // RFC 8966 3.5.1, with DSDV seqnos
    std::uint64_t seqno = 0;
    std::uint16_t metric = infinite_metric;
  };
  struct source_state {
    std::map<node_id, neighbour_route> via;
    // The selection. Unreachable when next_hop is empty; then metric is infinite and seqno is the one last
    // selected, or a newer retraction's (what we advertise).
    std::optional<node_id> next_hop;
    std::uint64_t seqno = 0;
    std::uint16_t metric = infinite_metric;
    std::vector<route_interval> intervals;
    std::vector<route_interval> in_transit;
    std::optional<feasibility_distance> fd;
    std::uint64_t digest = 0;  // entry_digest of what we last advertised for it (0: nothing yet)
    // Split horizon with poisoned reverse: the next hop of what we last advertised heard it as a retraction
    // (its digest poison_digest); everyone else heard `digest`.
    std::optional<node_id> advertised_via;
    std::uint64_t poison_digest = 0;
    // What all our neighbours last heard from us: triggers compare with it, so a change that is undone before
    // it went out (DSDV settling) costs nothing. Invariant: the selection differs from it (in metric or
    // intervals) only while a trigger is pending.
    std::uint64_t advertised_seqno = 0;
    std::uint16_t advertised_metric = infinite_metric;
    bool intervals_unadvertised = false;
    // The pending trigger must go out even if the selection returns to the advertised state: a seqno request
    // asked for it, or a full dump (perhaps to one new neighbour only) told someone the newer state.
    bool trigger_pinned = false;
    // The lowest seqno a request this node sent or forwarded asked for, until a selected route has it (0:
    // none): that update goes on at once (RFC 8966 3.8.1.2).
    std::uint64_t requested_seqno = 0;
    time_point requested_at{};  // when it was last sent or forwarded
    std::optional<node_id> requested_via;  // the neighbour it went to then (none once that link went down)
    std::uint16_t requested_hops = 0;       // and the hop limit it went with
    std::uint8_t requested_copies = 0;      // how often it was sent or forwarded (answer_delay samples one)
    time_point unreachable_since{};
    // DSDV settling: arrivals of the newest seqno seen, and the EWMA of first-to-best gaps.
    std::uint64_t arrival_seqno = 0;
    std::uint16_t arrival_best_metric = infinite_metric;
    time_point first_arrival{}, best_arrival{};
    std::chrono::nanoseconds settling_avg{0};
    // Pending work; mirrors of the keys in the timer queues so they can be removed.
    std::optional<time_point> trigger_due, request_due, expiry_due;
    time_point last_request = time_point::min();  // none yet
    int request_resends = 0;  // of the last request, while no answer came (collect_requests)
    // Last request for it answered or forwarded: one per request_holdoff, which also suppresses duplicates
    // of a forwarded request (RFC 8966 3.8.1.2).
    std::optional<time_point> request_acted_at;
  };
  struct selection {
    std::optional<node_id> next_hop;
    std::uint64_t seqno = 0;
    std::uint16_t metric = infinite_metric;
    std::vector<route_interval> intervals;
    std::vector<route_interval> in_transit;
  };
  // route choice, layered like babeld's route.c
  static bool route_feasible(const source_state& s, const neighbour_route& r);
  static const neighbour_route* newest_retraction_route(const source_state& s);
  static bool route_is_candidate(const source_state& s, const neighbour_route& r);
  static std::optional<node_id> best_route(const source_state& s);
  static std::optional<node_id> request_target(const source_state& s, node_id from);
  void select_route(node_id source, source_state& s, time_point now);
  void apply_selection(node_id source, source_state& s, selection next, time_point now);

  // input checks (route_input.cpp)
  static std::uint64_t newest_seen(const source_state& s);
  bool entry_acceptable(node_id from, const route_entry& e);
  bool seqno_acceptable(std::uint64_t newest, std::uint64_t seqno);
  bool request_allowed(std::optional<time_point>& acted_at, time_point now);
  void raise_own_seqno_past(std::uint64_t seqno, time_point now);
  void apply_own_raise(time_point now);

  // bookkeeping
  void note_arrival(source_state& s, const neighbour_route& r, time_point now);
  bool store_route(node_id from, const route_entry& e, time_point now);
  void note_about_self(const route_entry& e, time_point now);
  std::optional<time_point>& trigger_slot(node_id source);
  void schedule_trigger(node_id source, time_point due);
  void schedule_request(node_id source, source_state& s, time_point now);
  static bool someone_has_a_route(const source_state& s);  // one it could use, were it feasible
  void set_timer(timer_queue& q, std::optional<time_point>& slot, node_id source,
                 std::optional<time_point> due);
  route_entry advertise(node_id source);  // builds the entry, records the feasibility distance and the digest
  void note_advertised(std::uint64_t& digest, const route_entry& e);
  void note_advertised_via(source_state& s, const route_entry& e, std::optional<node_id> via);
  void unnote_advertised_via(source_state& s);
  // u as neighbour n hears it: each entry whose route goes through n as a retraction.
  route_update as_heard_by(const route_update& u, node_id n) const;
  void note_time(time_point now);  // at every entry point: time asleep does not count against neighbours
  void drop_neighbour_routes(node_id n, time_point now, bool unnamed_in_dump_only);
  void note_heard(neighbour_state& ns, std::uint64_t& digest, std::uint32_t& dump, std::uint64_t d);
  static void note_heard_by_all(source_state& s);
  void forget(std::map<node_id, source_state>::iterator it);
  void drop_route(source_state& s, node_id neighbour);
  const owner_index& owners() const;  // owners_, repainted first if stale
  void claims_changed(node_id owner, const std::vector<route_interval>& before,
                      const std::vector<route_interval>& after);  // owners_ and recheck_lost_
  void finish_mutation();
  void note_lost(node_id source, const std::vector<route_interval>& intervals, time_point now,
                 std::vector<route_interval> given = {});
  void shrink_lost(node_id source, const std::vector<route_interval>& intervals);
  void drop_lost(node_id source);
  time_point next_summary_after(time_point now);  // now + 3/4 .. 5/4 of full_dump_interval
  // One dump per interval to a neighbour that asks; its requests come at most once per half interval.
  std::chrono::nanoseconds dump_holdoff() const { return params_.full_dump_interval; }
  std::chrono::nanoseconds dump_request_holdoff() const { return params_.full_dump_interval / 2; }
  void drop_ghost(neighbour_state& ns, node_id source);
  time_point next_trigger() const;  // when collect_triggered() next returns an update (max() if nothing waits)

  node_id self_;
  route_params params_;
  std::uint64_t own_seqno_ = 2;
  std::vector<route_interval> own_intervals_;
  std::vector<route_interval> own_transit_;
  std::map<node_id, neighbour_state> neighbours_;
  std::map<node_id, source_state> sources_;      // never contains self_
  // Who owns each virtual node: own_intervals_ and the intervals of every reachable source, changed where
  // those change (apply_selection, set_local_intervals, forget); repainted from them all by owners() when
  // claims overlap.
  mutable owner_index owners_;
  // Claims added and lost records noted since the last finish_mutation(): only lost records overlapping these
  // can have become someone's (claims are added nowhere else).
  std::vector<route_interval> recheck_lost_;
  std::map<node_id, lost_owner> lost_;                    // see lost_owners(); never contains self_
  std::set<std::pair<time_point, node_id>> lost_by_age_;  // (since, source) of every record: the oldest first
  std::size_t lost_intervals_ = 0;                        // over all of lost_
  time_point alone_at_{};  // the last instant this node had no neighbour (lost_owners)
  timer_queue trigger_queue_, request_queue_, expiry_queue_;
  std::optional<time_point> own_trigger_due_;
  std::uint64_t own_digest_ = 0;  // entry_digest of the own entry last advertised
  std::uint64_t digest_ = 0;      // XOR of the digests of every entry advertised (own and sources_')
  std::uint32_t advertised_ = 0;  // how many entries that is
  std::set<node_id> forgotten_;   // sources forgotten whose forget entry has not gone out yet
  std::set<node_id> seqno_news_;  // sources whose seqno alone changed: advertised with the next summary
  time_point last_triggered_ = time_point::min();  // when collect_triggered last returned an update
  time_point next_summary_;
  time_point last_now_ = time_point::min();  // the latest `now` of any call (note_time)
  std::uint64_t jitter_state_;               // splitmix64, seeded by self_
  std::uint64_t generation_ = 0;
  bool routes_changed_ = false;  // a next hop, reachability or the index's inputs changed during this call
  // Input bounds (route_input.cpp).
  route_input_stats stats_;
  route_sync_stats sync_stats_;
  std::size_t held_intervals_ = 0;                  // over all neighbour_routes in sources_
  std::uint64_t own_claim_ = 0;                     // highest seqno claimed for us while a raise is held off
  std::optional<time_point> own_raise_due_;         // when the held-off raise happens
  std::optional<time_point> own_raised_at_;         // last raise answering a claim
  std::optional<time_point> own_request_acted_at_;  // last seqno request for us acted on
  double request_tokens_;                           // token bucket for requests_per_second
  std::chrono::nanoseconds answer_delay_{0};        // see answer_delay()
  time_point request_tokens_at_;
};

}  // namespace phoenix::overlay
