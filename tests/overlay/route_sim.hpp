// tests/overlay/route_sim.hpp — a deterministic in-process network of route_tables, for tests.
//
// N tables wired as an undirected graph. Every frame goes through the real wire codec and a FIFO per directed
// link with its own latency (plus jitter that never reorders), on a simulated clock; events are processed
// strictly in (time, sequence) order, so a run is a pure function of the seed. Cutting a link calls
// neighbour_down on both ends and loses the frames in flight on it, as a closed connection would.
//
// Invariant watch, after every single event (delivery, timer, link change) and after each end of a cut: every
// next hop that changed since the last check is followed towards its destination; the first loop, self next
// hop or next hop that is not a live neighbour is recorded, and so is a route lost that the test said must be
// kept (must_keep_routes). A new loop must contain a changed next hop, and a
// table whose generation() did not move has unchanged next hops, so this sees every state a full scan would.
// loop_violation() is the full scan, for tests to call at any time.
//
// Options: lossy links (loop freedom must not depend on delivery; summaries that no longer match bring dumps).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "overlay/routing/route_message.hpp"
#include "overlay/routing/route_table.hpp"

namespace phoenix::overlay::sim {

using namespace std::chrono_literals;

struct sim_options {
  route_params params{};
  std::size_t max_payload = 600;  // small, so that full dumps of bigger nets are split
  std::uint64_t seed = 1;
  unsigned loss_per_mille = 0;  // frames dropped at random (still FIFO for the rest); 0 for reliable links
  // Each directed link's latency is drawn once from [latency_min, latency_min + latency_spread).
  std::chrono::microseconds latency_min{500}, latency_spread{4500};
  // The invariant watch after every event: O(N) per event whose table changed, too slow for rings of 1,000
  // (a run then checks convergence_violation() and loop_violation() at its end only).
  bool watch = true;
};

class route_sim {
 public:
  static constexpr std::uint64_t vnodes_per_node = 1000;

  route_sim(std::size_t n, sim_options opt) : opt_(opt), rng_(opt.seed), adj_(n), wake_at_(n) {
    for (std::size_t i = 0; i < n; ++i) {
      index_[id(i)] = i;
      tables_.emplace_back(id(i), opt_.params, now_);
      // Two intervals per node, to exercise multi-interval entries: [1000i, 1000i+500) and [1000i+700, +800).
      tables_[i].set_local_intervals(intervals_of(i), now_);
    }
    for (std::size_t i = 0; i < n; ++i) pump(i);
  }

  // Sparse, non-contiguous ids so that nothing can confuse an index with a node_id.
  static node_id id(std::size_t i) { return 0x5eed'0000'0000ull + 17 * i + 3; }
  static std::vector<route_interval> intervals_of(std::size_t i) {
    const std::uint64_t b = vnodes_per_node * i;
    return {{b, b + 500}, {b + 700, b + 800}};
  }
  std::size_t size() const { return tables_.size(); }
  route_table& table(std::size_t i) { return tables_[i]; }
  const route_table& table(std::size_t i) const { return tables_[i]; }
  time_point now() const { return now_; }
  const std::string& first_violation() const { return violation_; }
  void set_loss(unsigned per_mille) { opt_.loss_per_mille = per_mille; }
  std::uint64_t deliveries() const { return deliveries_; }
  std::uint64_t checks() const { return checks_; }
  struct statistics {  // what the tables asked to send (before fan-out to neighbours and splitting)
    std::uint64_t updates = 0, full_dumps = 0, entries = 0, retractions = 0, requests = 0;
    std::uint64_t requests_forwarded = 0, summaries = 0, dump_requests = 0;
  };
  const statistics& stats() const { return stats_; }
  bool linked(std::size_t a, std::size_t b) const { return adj_[a].contains(b); }
  // From now on, a route of keep[x][d] = true that x loses (no next hop towards d) is a violation, seen
  // after every event like a loop.
  void must_keep_routes(std::vector<std::vector<bool>> keep) { keep_ = std::move(keep); }
  // From now on, loops towards d are not violations: a test that forges a route (a lie no correct table
  // tells, which can make one) checks the repair, and convergence_violation() the end state.
  void tolerate_loops_towards(std::size_t d) { tolerated_ = d; }
  // Sends what table i has to send now: after a test changed it directly.
  void pump_now(std::size_t i) {
    pump(i);
    watch(false, "pump");
  }
  // The nodes the next hops lead through from x to d (x first, d last), or empty if they do not get there.
  std::vector<std::size_t> route_walk(std::size_t x, std::size_t d) const {
    std::vector<std::size_t> walk{x};
    while (x != d && walk.size() <= size()) {
      const std::int64_t hop = next_index(x, d);
      if (hop < 0) return {};
      walk.push_back(x = static_cast<std::size_t>(hop));
    }
    return x == d ? walk : std::vector<std::size_t>{};
  }

  void link(std::size_t a, std::size_t b) {
    if (a == b || linked(a, b)) return;
    adj_[a].insert(b);
    adj_[b].insert(a);
    ++epoch_[edge(a, b)];
    for (auto [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
      latency_[{x, y}] = opt_.latency_min + std::chrono::microseconds(rng_() % opt_.latency_spread.count());
      tables_[x].neighbour_up(id(y), now_);
    }
    pump(a);
    pump(b);
    watch(false, "link");
  }

  void cut(std::size_t a, std::size_t b) {
    if (!linked(a, b)) return;
    ++epoch_[edge(a, b)];  // frames in flight on the old connection are lost
    // One end notices first; the state in between must be loop-free too (the other end still points here,
    // which is a dead end, not a loop: adjacency is kept per direction for that reason).
    for (auto [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
      adj_[x].erase(y);
      tables_[x].neighbour_down(id(y), now_);
      watch(true, "cut");
    }
    pump(a);
    pump(b);
    watch(false, "cut");
  }

  // Runs until nothing is in flight and no table has output pending; false if max elapses first.
  bool run_until_quiet(std::chrono::milliseconds max) {
    const time_point end = now_ + max;
    while (!quiet()) {
      if (events_.empty() || events_.begin()->first.first > end) {
        now_ = std::max(now_, end);
        return false;
      }
      step();
      if (!violation_.empty()) return false;
    }
    return true;
  }

  void run_for(std::chrono::milliseconds d) {
    const time_point end = now_ + d;
    while (!events_.empty() && events_.begin()->first.first <= end && violation_.empty()) step();
    now_ = std::max(now_, end);
  }

  // "" if every next-hop walk ends at its destination or at a node without a route; else what went wrong.
  std::string loop_violation() const {
    const std::size_t n = size();
    for (std::size_t d = 0; d < n; ++d) {
      std::vector<std::uint8_t> mark(n, 0);  // 0 unseen, 1 on the current walk, 2 known to end well
      for (std::size_t start = 0; start < n; ++start) {
        std::vector<std::size_t> walk;
        std::size_t x = start;
        std::string bad;
        while (x != d && mark[x] != 2) {
          if (mark[x] == 1) {
            bad = "loop";
            break;
          }
          mark[x] = 1;
          walk.push_back(x);
          const auto nh = tables_[x].next_hop(id(d));
          if (!nh) break;
          auto it = index_.find(*nh);
          if (it == index_.end() || it->second == x) {
            bad = "next hop is self or unknown";
            break;
          }
          if (!linked(x, it->second)) {
            bad = "next hop is not a live neighbour";
            break;
          }
          x = it->second;
        }
        if (!bad.empty()) {
          std::string path;
          for (std::size_t w : walk) path += std::to_string(w) + " -> ";
          return bad + " towards node " + std::to_string(d) + ": " + path + std::to_string(x);
        }
        for (std::size_t w : walk) mark[w] = 2;
      }
    }
    return {};
  }

  // "" if routes match the graph: connected pairs reach each other along next hops with a metric equal to the
  // hops walked (and >= the shortest path), other pairs are unreachable, and owner_of agrees everywhere.
  // The metric checks hold only once quiet (a settling advertisement may be pending otherwise).
  std::string convergence_violation(bool check_metrics = true) const {
    const std::size_t n = size();
    std::string v = loop_violation();
    if (!v.empty()) return v;
    for (std::size_t i = 0; i < n; ++i) {
      const auto dist = distances_from(i);
      std::map<node_id, std::uint16_t> metric;
      for (const auto& r : tables_[i].routes()) metric[r.destination] = r.metric;
      for (std::size_t j = 0; j < n; ++j) {
        const std::string pair = " (" + std::to_string(i) + " -> " + std::to_string(j) + ")";
        const bool connected = dist[j] >= 0;
        if (j != i && tables_[i].is_reachable(id(j)) != connected) return "reachability mismatch" + pair;
        auto owned_right = [&](std::uint64_t vnode) {
          const auto o = tables_[i].owner_of(vnode);
          return connected ? o.has_value() && *o == id(j) : !o.has_value();
        };
        for (const auto& iv : intervals_of(j)) {
          if (!owned_right(iv.lo) || !owned_right(iv.hi - 1)) return "owner_of mismatch" + pair;
        }
        if (tables_[i].owner_of(vnodes_per_node * j + 600)) return "owner_of outside every interval" + pair;
        if (j == i || !connected || !check_metrics) continue;
        int hops = 0;
        for (std::size_t x = i; x != j; ++hops) x = index_.at(*tables_[x].next_hop(id(j)));
        if (metric.at(id(j)) != hops) return "metric differs from hops walked" + pair;
        if (hops < dist[j]) return "shorter than the shortest path" + pair;
      }
    }
    return {};
  }

 private:
  enum class kind { update, request, summary, dump_request, wake };
  struct event {
    kind what;
    std::size_t from, to;
    std::uint64_t epoch;
    std::vector<std::byte> bytes;
  };

  static std::pair<std::size_t, std::size_t> edge(std::size_t a, std::size_t b) {
    return {std::min(a, b), std::max(a, b)};
  }

  bool quiet() const {
    if (in_flight_ != 0) return false;
    for (const auto& t : tables_) {
      if (t.has_pending_output() || t.summary_due(now_)) return false;
    }
    return true;
  }

  std::vector<int> distances_from(std::size_t i) const {
    std::vector<int> dist(size(), -1);
    std::queue<std::size_t> q;
    dist[i] = 0;
    q.push(i);
    while (!q.empty()) {
      const std::size_t x = q.front();
      q.pop();
      for (std::size_t y : adj_[x]) {
        if (dist[y] < 0) {
          dist[y] = dist[x] + 1;
          q.push(y);
        }
      }
    }
    return dist;
  }

  void send(std::size_t from, std::size_t to, kind what, std::vector<std::byte> bytes) {
    if (opt_.loss_per_mille != 0 && rng_() % 1000 < opt_.loss_per_mille) return;
    // FIFO per directed link: jitter never lets a frame overtake the previous one.
    time_point at = now_ + latency_.at({from, to}) + std::chrono::microseconds(rng_() % 300);
    time_point& last = last_delivery_[{from, to}];
    at = std::max(at, last);
    last = at;
    ++in_flight_;
    events_.emplace(std::pair{at, next_seq_++},
                    event{what, from, to, epoch_[edge(from, to)], std::move(bytes)});
  }

  // To one neighbour, or to all of them (as links_.send_to_all does: to those that are up).
  void send_to(std::size_t from, const std::optional<node_id>& to, kind what,
               const std::vector<std::vector<std::byte>>& payloads, const std::vector<node_id>& except = {}) {
    std::vector<std::size_t> targets;
    if (to) {
      const std::size_t t = index_.at(*to);
      if (!linked(from, t)) return;  // a table may address a link the sim just cut: like a closed connection
      targets.push_back(t);
    } else {
      for (std::size_t t : adj_[from])
        if (std::find(except.begin(), except.end(), id(t)) == except.end()) targets.push_back(t);
    }
    for (std::size_t t : targets) {
      for (const auto& p : payloads) send(from, t, what, p);
    }
  }

  void pump(std::size_t i) {
    route_table& t = tables_[i];
    t.expire(now_);  // first: dropping stale routes may trigger a retraction or a request
    for (route_message& m : t.collect_output(now_)) {
      if (const auto* u = std::get_if<route_update>(&m.what)) {
        ++stats_.updates;
        stats_.full_dumps += u->full_dump;
        for (const auto& e : u->entries) ++(e.metric == infinite_metric ? stats_.retractions : stats_.entries);
        auto payloads = encode_update(*u, opt_.max_payload);
        if (payloads.empty()) violation_ = "encode_update failed";
        send_to(i, m.to, kind::update, payloads, m.except);
      } else if (const auto* r = std::get_if<route_request>(&m.what)) {
        if (!m.to || !index_.contains(*m.to) || !linked(i, index_.at(*m.to)))
          violation_ = "request to a non-neighbour";
        send_to(i, m.to, kind::request, {encode_request(*r)});
        ++stats_.requests;
      } else if (const auto* sum = std::get_if<route_summary>(&m.what)) {
        ++stats_.summaries;
        send_to(i, m.to, kind::summary, {encode_summary(*sum)});
      } else {
        ++stats_.dump_requests;
        send_to(i, m.to, kind::dump_request, {{}});
      }
    }
    const time_point at = t.next_deadline();
    if (at <= now_) {  // everything due was just serviced: a deadline not in the future would spin forever
      violation_ = "next_deadline() not in the future after servicing every output";
      return;
    }
    if (wake_at_[i] <= now_ || at < wake_at_[i]) {
      wake_at_[i] = at;
      events_.emplace(std::pair{at, next_seq_++}, event{kind::wake, i, i, 0, {}});
    }
  }

  void step() {
    auto node = events_.extract(events_.begin());
    const time_point at = node.key().first;
    event& ev = node.mapped();
    now_ = std::max(now_, at);
    if (ev.what == kind::wake) {
      if (at != wake_at_[ev.to]) return;  // superseded by an earlier wake-up
      pump(ev.to);
      watch(false, "wake");
      return;
    }
    --in_flight_;
    if (!linked(ev.from, ev.to) || epoch_[edge(ev.from, ev.to)] != ev.epoch) return;  // lost with its link
    ++deliveries_;
    std::string err;
    route_table& t = tables_[ev.to];
    if (ev.what == kind::update) {
      auto u = decode_update(ev.bytes, &err);
      if (!u) {
        violation_ = "decode_update: " + err;
      } else {
        t.on_update(id(ev.from), *u, now_);
      }
    } else if (ev.what == kind::summary) {
      auto sum = decode_summary(ev.bytes, &err);
      if (!sum) {
        violation_ = "decode_summary: " + err;
      } else {
        t.on_summary(id(ev.from), *sum, now_);
      }
    } else if (ev.what == kind::dump_request) {
      if (!decode_dump_request(ev.bytes, &err)) {
        violation_ = "decode_dump_request: " + err;
      } else {
        t.on_dump_request(id(ev.from), now_);
      }
    } else {
      auto r = decode_request(ev.bytes, &err);
      if (!r) {
        violation_ = "decode_request: " + err;
      } else if (auto act = t.on_request(id(ev.from), *r, now_);
                 act.kind == route_table::request_action::forward) {
        const std::size_t to = index_.at(act.forward_to);
        if (!linked(ev.to, to) || to == ev.from) {
          violation_ = "request forwarded to a non-neighbour or back";
        } else {
          send(ev.to, to, kind::request, encode_request(act.forwarded));
          ++stats_.requests_forwarded;
        }
      }
    }
    pump(ev.to);
    watch(false, "delivery");
  }

  // The invariant watch. A new loop or bad hop must involve a next hop that changed, and a table whose
  // generation() did not move has the same next hops as before; so only the changed (node, destination)
  // pairs are walked, over a snapshot of every next hop. `always` (used while a link is half cut, when
  // adjacency changed under unchanged next hops) re-checks everything.
  void watch(bool always, const char* what) {
    if (!opt_.watch) return;
    const std::size_t n = size();
    if (snapshot_.empty()) {
      snapshot_.assign(n, std::vector<std::int64_t>(n, -1));
      seen_generation_.assign(n, ~std::uint64_t{0});
    }
    std::vector<std::pair<std::size_t, std::size_t>> changed;
    for (std::size_t x = 0; x < n; ++x) {
      if (tables_[x].generation() == seen_generation_[x] && !always) continue;
      seen_generation_[x] = tables_[x].generation();
      for (std::size_t d = 0; d < n; ++d) {
        const std::int64_t hop = next_index(x, d);
        if (hop != snapshot_[x][d] || always) changed.emplace_back(x, d);
        snapshot_[x][d] = hop;
      }
    }
    if (changed.empty()) return;
    ++checks_;
    if (!violation_.empty()) return;
    for (auto [x, d] : changed) {
      if (tolerated_ == d) continue;
      if (!keep_.empty() && keep_[x][d] && snapshot_[x][d] == -1) {
        violation_ =
            std::string("after ") + what + ": " + std::to_string(x) + " lost its route to " + std::to_string(d);
        return;
      }
      std::string path = std::to_string(x);
      std::size_t at = x;
      for (std::size_t steps = 0; at != d; ++steps) {
        const std::int64_t hop = snapshot_[at][d];
        if (hop == -1) break;  // no route: a dead end, fine
        if (hop == -2 || !linked(at, static_cast<std::size_t>(hop))) {
          violation_ = std::string("after ") + what +
                       ": next hop is self, unknown or not a live neighbour towards " + std::to_string(d) +
                       ": " + path;
          return;
        }
        at = static_cast<std::size_t>(hop);
        path += " -> " + std::to_string(at);
        if (steps > n) {
          violation_ = std::string("after ") + what + ": loop towards " + std::to_string(d) + ": " + path;
          return;
        }
      }
    }
  }

  // next_hop(x -> d) as an index; -1 for none, -2 for self or a stranger.
  std::int64_t next_index(std::size_t x, std::size_t d) const {
    const auto nh = tables_[x].next_hop(id(d));
    if (!nh) return -1;
    auto it = index_.find(*nh);
    if (it == index_.end() || it->second == x) return -2;
    return static_cast<std::int64_t>(it->second);
  }

  sim_options opt_;
  std::mt19937_64 rng_;  // only its raw output is used: identical sequences on every standard library
  time_point now_{std::chrono::hours(1)};
  std::vector<route_table> tables_;
  std::map<node_id, std::size_t> index_;
  std::vector<std::set<std::size_t>> adj_;
  std::map<std::pair<std::size_t, std::size_t>, std::uint64_t> epoch_;
  std::map<std::pair<std::size_t, std::size_t>, std::chrono::microseconds> latency_;
  std::map<std::pair<std::size_t, std::size_t>, time_point> last_delivery_;
  std::map<std::pair<time_point, std::uint64_t>, event> events_;  // in (time, sequence) order
  std::vector<time_point> wake_at_;
  std::uint64_t next_seq_ = 0, in_flight_ = 0, deliveries_ = 0, checks_ = 0;
  std::vector<std::vector<std::int64_t>> snapshot_;  // next hop indices as last checked
  std::vector<std::uint64_t> seen_generation_;
  std::vector<std::vector<bool>> keep_;   // must_keep_routes
  std::optional<std::size_t> tolerated_;  // tolerate_loops_towards
  std::string violation_;
  statistics stats_;
};

// --- topologies -------------------------------------------------------------------------------------------

using edge_list = std::vector<std::pair<std::size_t, std::size_t>>;

inline edge_list line_edges(std::size_t n) {
  edge_list e;
  for (std::size_t i = 0; i + 1 < n; ++i) e.emplace_back(i, i + 1);
  return e;
}
inline edge_list ring_edges(std::size_t n) {
  edge_list e = line_edges(n);
  e.emplace_back(n - 1, 0);
  return e;
}
inline edge_list star_edges(std::size_t n) {
  edge_list e;
  for (std::size_t i = 1; i < n; ++i) e.emplace_back(0, i);
  return e;
}
// Connected, every degree <= `degree` and most exactly it: a ring plus random chords from a fixed seed.
inline edge_list random_edges(std::size_t n, std::size_t degree, std::uint64_t seed) {
  edge_list e = ring_edges(n);
  std::vector<std::size_t> deg(n, 2);
  std::set<std::pair<std::size_t, std::size_t>> have;
  for (auto [a, b] : e) have.insert({std::min(a, b), std::max(a, b)});
  std::mt19937_64 rng(seed);
  for (int tries = 0; tries < 100 * static_cast<int>(n); ++tries) {
    const std::size_t a = rng() % n, b = rng() % n;
    if (a == b || deg[a] >= degree || deg[b] >= degree || !have.insert({std::min(a, b), std::max(a, b)}).second)
      continue;
    e.emplace_back(a, b);
    ++deg[a];
    ++deg[b];
  }
  return e;
}

inline void wire(route_sim& s, const edge_list& edges) {
  for (auto [a, b] : edges) s.link(a, b);
}

}  // namespace phoenix::overlay::sim
