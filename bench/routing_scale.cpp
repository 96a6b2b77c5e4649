// bench/routing_scale.cpp — routing_scale: how the overlay's routing (DSDV with Babel's feasibility condition,
// overlay/routing/route_table.hpp) scales with the number of nodes. README.md, section "routing_scale", says
// what each figure means and how it grows. Over 600 lines as one file: one program, its topologies,
// measurements and table, each case forked from the same harness.
//
// N overlays live in one process on one io_context driven by one thread, linked by connect_local (the real
// framing and handshake over local socket pairs) as a line, a ring or a random 4-regular graph. Per case:
//   (a) converge_ms: from the moment every link is created until every node reaches every other node's resource
//       name and resolves one vnode of every node's interval to its owner;
//   (c) routing_Bps_per_node: routing bytes sent per node per second at rest, over a window of whole full-dump
//       intervals after convergence;
//   (d) rss_KiB_per_node: resident set growth from before the nodes exist to after the rest window, over N;
//   (e) hop_ms: how fast news travels: node 0 releases half its interval, and the time until every node has
//       heard, over node 0's eccentricity (the hops to the farthest node);
//   (b) cut_converge_ms: one link cut (line: the middle one; ring: the closing one; random: one whose removal
//       keeps the graph connected) until the routes are right again (line: each half marks the other
//       unreachable); with it wrong_pairs_peak, the most ordered pairs not routed right at any sample after
//       the cut, and collateral_pairs, the most of them among pairs no shortest path of which used the cut link
//       (those lose their route only if a cut's news reaches nodes it does not concern). Samples are full counts
//       of the N x N pairs, at most one per 200 ms and spaced so that counting takes at most a twentieth of the
//       time.
// Each case runs in a forked child so that its RSS starts from a clean heap (glibc keeps freed memory, which
// would hide the next case's growth) and a hung case can be bounded by a timer.
//
// Usage: routing_scale [--sizes 100,300,1000] [--topologies line,ring,random] [--quick]
//                      [--dump-interval-ms 1000] [--timeout-s 120]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <asio.hpp>

#include "overlay/links/cluster_key.hpp"
#include "overlay/overlay.hpp"

namespace {

namespace ov = phoenix::overlay;
namespace base = phoenix::base;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::uint64_t k_seed = 0x70686f656e6978;         // the random graph's; fixed so that runs compare
constexpr std::uint64_t k_vnodes_per_node = 1024;          // each node assumes an interval of this many vnodes
constexpr steady::duration k_min_slice = milliseconds(2);  // io time between two convergence checks ...
constexpr steady::duration k_max_slice = milliseconds(100);  // ... and its cap, the worst timing resolution
constexpr int k_rest_dumps = 3;                              // the rest window, in full-dump intervals
constexpr int k_settle_dumps = 1;                            // wait this long after convergence first
constexpr steady::duration k_progress_every = std::chrono::seconds(10);
constexpr steady::duration k_sample_every = milliseconds(200);  // the shortest gap between two wrong-pair counts
// Checking and counting freeze every node: each takes at most 1 / (k_quiet_factor + 1) of a phase, so that the
// figures are the nodes' work and little of the benchmark's own.
constexpr int k_quiet_factor = 19;

struct options {
  std::vector<std::size_t> sizes{100, 300, 1000};
  std::vector<std::string> topologies{"line", "ring", "random"};
  milliseconds dump_interval{1000};
  bool split_horizon = false;
  std::chrono::seconds timeout{120};  // per phase
};

// --- graphs -------------------------------------------------------------------------------------------------

struct edge {
  std::size_t a = 0, b = 0;
};

struct graph {
  std::size_t n = 0;
  std::vector<edge> edges;
  std::size_t cut = 0;  // index into edges of the link to cut
};

std::vector<std::vector<std::size_t>> adjacency(const graph& g, std::optional<std::size_t> skip = {}) {
  std::vector<std::vector<std::size_t>> adj(g.n);
  for (std::size_t k = 0; k < g.edges.size(); ++k) {
    if (k == skip) continue;
    adj[g.edges[k].a].push_back(g.edges[k].b);
    adj[g.edges[k].b].push_back(g.edges[k].a);
  }
  return adj;
}

// Hop distances from `from`; unreachable nodes stay at SIZE_MAX.
std::vector<std::size_t> bfs(const std::vector<std::vector<std::size_t>>& adj, std::size_t from) {
  std::vector<std::size_t> dist(adj.size(), SIZE_MAX);
  std::deque<std::size_t> queue{from};
  dist[from] = 0;
  while (!queue.empty()) {
    const auto v = queue.front();
    queue.pop_front();
    for (const auto w : adj[v]) {
      if (dist[w] != SIZE_MAX) continue;
      dist[w] = dist[v] + 1;
      queue.push_back(w);
    }
  }
  return dist;
}

// Ordered pairs (i * n + j, i != j) no shortest path of which uses the link `e`: a cut of it concerns them not.
std::vector<bool> pairs_not_using(const graph& g, edge e) {
  const auto adj = adjacency(g);
  std::vector<std::vector<std::size_t>> dist(g.n);
  for (std::size_t v = 0; v < g.n; ++v) dist[v] = bfs(adj, v);
  std::vector<bool> out(g.n * g.n, false);
  for (std::size_t i = 0; i < g.n; ++i) {
    for (std::size_t j = 0; j < g.n; ++j) {
      const auto d = dist[i][j];
      const bool uses = d != SIZE_MAX && ((dist[i][e.a] != SIZE_MAX && dist[i][e.a] + 1 + dist[e.b][j] == d) ||
                                          (dist[i][e.b] != SIZE_MAX && dist[i][e.b] + 1 + dist[e.a][j] == d));
      out[i * g.n + j] = i != j && !uses;
    }
  }
  return out;
}

bool connected_without(const graph& g, std::size_t skip) {
  const auto dist = bfs(adjacency(g, skip), 0);
  return std::none_of(dist.begin(), dist.end(), [](std::size_t d) { return d == SIZE_MAX; });
}

std::size_t diameter(const graph& g) {
  const auto adj = adjacency(g);
  std::size_t d = 0;
  for (std::size_t v = 0; v < g.n; ++v) {
    const auto dist = bfs(adj, v);
    d = std::max(d, *std::max_element(dist.begin(), dist.end()));
  }
  return d;
}

graph line_graph(std::size_t n) {
  graph g{n, {}, 0};
  for (std::size_t i = 0; i + 1 < n; ++i) g.edges.push_back({i, i + 1});
  g.cut = n / 2 - 1;  // (n/2 - 1, n/2): halves [0, n/2) and [n/2, n)
  return g;
}

graph ring_graph(std::size_t n) {
  graph g = line_graph(n);
  g.edges.push_back({n - 1, 0});
  g.cut = g.edges.size() - 1;
  return g;
}

// Fisher-Yates on the raw mt19937_64 output, not std::shuffle: the standard leaves its algorithm (and that of
// the distributions) to the library, and the graph must be the same everywhere for a given seed.
std::vector<std::size_t> permutation(std::size_t n, std::mt19937_64& rng) {
  std::vector<std::size_t> p(n);
  std::iota(p.begin(), p.end(), std::size_t{0});
  for (std::size_t i = n - 1; i > 0; --i) std::swap(p[i], p[rng() % (i + 1)]);
  return p;
}

// A random 4-regular graph: the ring plus a second, random Hamiltonian cycle that shares no edge with it
// (redrawn until it does not). Such unions are contiguous to uniform random 4-regular graphs (Kim & Wormald
// 2001), so they are expanders with diameter O(log N); the ring keeps them connected after any single cut.
graph random_graph(std::size_t n) {
  std::mt19937_64 rng(k_seed);
  const graph ring = ring_graph(n);
  std::set<std::pair<std::size_t, std::size_t>> taken;
  const auto key = [](std::size_t a, std::size_t b) { return std::pair{std::min(a, b), std::max(a, b)}; };
  for (const auto& e : ring.edges) taken.insert(key(e.a, e.b));
  for (;;) {
    const auto p = permutation(n, rng);
    graph g = ring;
    bool clash = false;
    for (std::size_t i = 0; i < n && !clash; ++i) {
      const edge e{p[i], p[(i + 1) % n]};
      clash = taken.contains(key(e.a, e.b));
      g.edges.push_back(e);
    }
    if (clash) continue;
    // Cut one of the random cycle's links, chosen by the same generator, provided the rest stays connected.
    do {
      g.cut = ring.edges.size() + rng() % n;
    } while (!connected_without(g, g.cut));
    return g;
  }
}

graph make_graph(std::string_view topology, std::size_t n) {  // topology: checked by the command line
  if (topology == "line") return line_graph(n);
  if (topology == "ring") return ring_graph(n);
  return random_graph(n);
}

// --- the nodes ----------------------------------------------------------------------------------------------

class network {
 public:
  network(asio::io_context& io, std::size_t n, milliseconds dump_interval, bool split_horizon) : n_(n) {
    nodes_.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      ov::overlay_config c;
      c.name = "n" + std::to_string(i);
      c.space_size = space_size();
      c.cluster_key = ov::development_key();
      c.full_dump_interval = dump_interval;
      c.split_horizon = split_horizon;
      nodes_.push_back(std::make_unique<ov::overlay>(io, std::move(c), name(i), [](ov::packet&&) {}));
      nodes_.back()->assume(base::interval{i * k_vnodes_per_node, (i + 1) * k_vnodes_per_node});
    }
  }

  std::size_t size() const { return n_; }
  ov::overlay& node(std::size_t i) { return *nodes_[i]; }
  const ov::overlay& node(std::size_t i) const { return *nodes_[i]; }
  std::uint64_t space_size() const { return n_ * k_vnodes_per_node; }
  ov::node_id name(std::size_t i) const { return space_size() + 1 + i; }  // resource names lie above [0, L)
  std::uint64_t sample_vnode(std::size_t i) const { return i * k_vnodes_per_node + k_vnodes_per_node / 2; }

  // Node i's table is right about node j: j is reachable and owns its sample vnode.
  bool routes_right(std::size_t i, std::size_t j) const {
    if (i == j) return true;
    const auto& from = node(i);
    return from.can_reach(name(j)) && from.owner_of(sample_vnode(j)) == name(j);
  }

  // Whether node a still selects b as next hop towards any destination. A path crosses the link a-b only
  // where a forwards to b or b to a, so asking both ends covers every node's routes.
  bool routes_via(std::size_t a, std::size_t b) const {
    for (std::size_t j = 0; j < n_; ++j) {
      if (node(a).next_hop(name(j)) == name(b)) return true;
    }
    return false;
  }

  std::uint64_t routing_bytes() const {
    std::uint64_t sum = 0;
    for (const auto& nd : nodes_) sum += nd->routing_bytes_sent();
    return sum;
  }
  ov::routing_driver::traffic routing_traffic() const {
    ov::routing_driver::traffic sum;
    for (const auto& nd : nodes_) {
      const auto t = nd->routing_traffic();
      sum.bytes += t.bytes;
      sum.update_frames += t.update_frames;
      sum.requests += t.requests;
      sum.requests_limited += t.requests_limited;
      sum.sync.dumps_sent += t.sync.dumps_sent;
      sum.sync.dump_requests_sent += t.sync.dump_requests_sent;
      sum.sync.summaries_differed += t.sync.summaries_differed;
      sum.sync.holds_expired += t.sync.holds_expired;
    }
    return sum;
  }

 private:
  std::size_t n_;
  std::vector<std::unique_ptr<ov::overlay>> nodes_;
};

// --- checking without dominating -----------------------------------------------------------------------------

// All N x N pairs, walked from where the previous walk failed: a failed check stops at the first wrong pair
// (cheap while routes are still spreading) and does not re-check pairs already seen right before it has seen
// all the others. Success needs every pair right within one call. The nodes run on this thread, so the network
// is frozen during a call: success means all pairs were right at one instant.
class pair_scan {
 public:
  explicit pair_scan(std::size_t n) : n_(n) {}

  template <class Pred>
  bool all(Pred right) {
    const std::size_t total = n_ * n_;
    for (std::size_t k = 0; k < total; ++k) {
      const std::size_t p = (cursor_ + k) % total;
      if (!right(p / n_, p % n_)) {
        cursor_ = p;
        return false;
      }
    }
    return true;
  }

 private:
  std::size_t n_;
  std::size_t cursor_ = 0;
};

struct check_stats {
  steady::duration checking{};
  int checks = 0;
};

void run_io_for(asio::io_context& io, steady::duration d) {
  io.run_for(d);
  if (io.stopped()) io.restart();  // ran out of work; cannot happen while routing timers are armed
}

// Drives the io_context in slices between checks until check() holds; returns the instant it held (the state
// it saw is the state at that instant), or nothing at the deadline. Each slice lasts at least k_quiet_factor
// times the last check, so checking takes at most a twentieth of the time; the price is timing resolution
// (<= k_max_slice).
template <class Check>
std::optional<steady::time_point> run_until(asio::io_context& io, steady::duration timeout, Check check,
                                            check_stats& stats) {
  const auto deadline = steady::now() + timeout;
  for (;;) {
    const auto began = steady::now();
    const bool done = check();
    const auto cost = steady::now() - began;
    stats.checking += cost;
    ++stats.checks;
    if (done) return began;
    if (began > deadline) return std::nullopt;
    run_io_for(io, std::clamp<steady::duration>(k_quiet_factor * cost, k_min_slice, k_max_slice));
  }
}

// --- one case -----------------------------------------------------------------------------------------------

// Sent from the case's child to the parent through a pipe, hence trivially copyable.
struct case_result {
  double converge_ms = 0;
  double hop_ms = 0;
  double cut_converge_ms = 0;
  std::size_t wrong_pairs_peak = 0;
  std::size_t collateral_pairs = 0;
  double routing_bps_per_node = 0;
  double rss_kib_per_node = 0;
  std::size_t diameter = 0;
};

double ms_between(steady::time_point a, steady::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// CPU time this process used so far (user + system), ms: all nodes share one thread, so CPU over wall time
// says whether a phase was limited by the protocol's timers or by this machine simulating N nodes at once.
double cpu_ms() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto ms = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3;
  };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

long rss_bytes() {
  long pages_total = 0, pages_resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = 0;
    std::fclose(f);
  }
  return pages_resident * sysconf(_SC_PAGESIZE);
}

// What a phase waits for: a condition on every ordered pair (i, j) of nodes, and one on the network as a whole.
struct target {
  std::function<bool(std::size_t, std::size_t)> pair_right;
  std::function<bool()> also = [] { return true; };
};

// Wrong pairs counted over a phase (case_result::wrong_pairs_peak, collateral_pairs).
struct wrong_samples {
  const std::vector<bool>* unconcerned = nullptr;  // pairs_not_using(), i * n + j
  std::size_t peak = 0, collateral_peak = 0;
  int samples = 0;
};

struct failure {
  std::string what;
};

class case_runner {
 public:
  case_runner(std::string topology, const graph& g, const options& o)
      : topology_(std::move(topology)), g_(g), opt_(o) {}

  case_result run() {
    case_result r;
    r.diameter = diameter(g_);
    const long rss_before = rss_bytes();
    asio::io_context io{1};
    network net(io, g_.n, opt_.dump_interval, opt_.split_horizon);
    r.converge_ms = converge(io, net);
    r.routing_bps_per_node = rest_rate(io, net);
    r.rss_kib_per_node = static_cast<double>(rss_bytes() - rss_before) / static_cast<double>(g_.n) / 1024.0;
    r.hop_ms = news_travel(io, net);
    const auto unconcerned = pairs_not_using(g_, g_.edges[g_.cut]);
    wrong_samples samples{&unconcerned};
    r.cut_converge_ms = cut_and_converge(io, net, samples);
    r.wrong_pairs_peak = samples.peak;
    r.collateral_pairs = samples.collateral_peak;
    remark("cut: " + std::to_string(samples.samples) + " counts of wrong pairs; peak " +
           std::to_string(samples.peak) + ", of them unconcerned by the cut " + std::to_string(samples.collateral_peak));
    return r;
  }

 private:
  double converge(asio::io_context& io, network& net) {
    for (const auto& e : g_.edges) net.node(e.a).connect_local(net.node(e.b));
    const auto start = steady::now();
    const auto done =
        wait("converge", io, net, {[&](std::size_t i, std::size_t j) { return net.routes_right(i, j); }});
    return ms_between(start, done);
  }

  // Whole full-dump intervals, so that every node dumps the same number of times in the window; after a
  // settling wait, so that late improvements (shorter paths found after reachability) are not counted as rest.
  double rest_rate(asio::io_context& io, network& net) {
    run_io_for(io, k_settle_dumps * opt_.dump_interval);
    const auto bytes0 = net.routing_bytes();
    const auto t0 = steady::now();
    const double cpu0 = cpu_ms();
    run_io_for(io, k_rest_dumps * opt_.dump_interval);
    const double wall_ms = ms_between(t0, steady::now());
    const double per_node = static_cast<double>(net.routing_bytes() - bytes0) / static_cast<double>(net.size());
    remark("rest: cpu " + percent(cpu_ms() - cpu0, wall_ms) + " of " +
           std::to_string(static_cast<long>(wall_ms)) + " ms; " +
           std::to_string(static_cast<long>(per_node / k_rest_dumps)) +
           " routing bytes per node per full-dump interval");
    const auto wrong = count_wrong(net, [&](std::size_t i, std::size_t j) { return net.routes_right(i, j); });
    if (wrong)
      remark(std::to_string(wrong) + " ordered pairs were not routed right at the end of the rest window");
    return per_node / (wall_ms / 1000.0);
  }

  // Node 0 releases the upper half of its interval (a triggered update, as a migration's give makes): the time
  // until every node has heard, over node 0's eccentricity. Then it assumes it again, and that is heard too.
  double news_travel(asio::io_context& io, network& net) {
    const auto ecc = std::max<std::size_t>(1, [&] {
      const auto dist = bfs(adjacency(g_), 0);
      return *std::max_element(dist.begin(), dist.end());
    }());
    const base::interval half{k_vnodes_per_node / 2, k_vnodes_per_node};
    const std::uint64_t probe = net.sample_vnode(0);  // in that half
    if (net.node(0).release(half) != base::interval_set::result::ok) throw failure{"node 0 could not release"};
    const auto start = steady::now();
    const auto done = wait("news", io, net, {[&](std::size_t i, std::size_t) {
                             return i == 0 || !net.node(i).owner_of(probe).has_value();
                           }});
    if (net.node(0).assume(half) != base::interval_set::result::ok) throw failure{"node 0 could not assume"};
    wait("news back", io, net, {[&](std::size_t i, std::size_t) { return net.node(i).owner_of(probe) == net.name(0); }});
    const double ms = ms_between(start, done);
    remark("news: " + std::to_string(static_cast<long>(ms)) + " ms to " + std::to_string(ecc) + " hops");
    return ms / static_cast<double>(ecc);
  }

  double cut_and_converge(asio::io_context& io, network& net, wrong_samples& samples) {
    const edge cut = g_.edges[g_.cut];
    const auto before = net.routing_traffic();
    if (!net.node(cut.a).drop_link(net.name(cut.b))) throw failure{"the link to cut was not up"};
    const auto start = steady::now();
    // What the cut made the nodes send, also when the phase times out.
    const auto tell = [&] {
      const auto t = net.routing_traffic();
      remark("cut: " + std::to_string(t.update_frames - before.update_frames) + " update frames, " +
             std::to_string(t.requests - before.requests) + " seqno requests sent or forwarded, " +
             std::to_string(t.requests_limited - before.requests_limited) + " ignored (holdoff, rate or redundant), " +
             std::to_string((t.bytes - before.bytes) / 1024) + " KiB");
    };
    try {
      const auto done =
          wait("cut", io, net, topology_ == "line" ? halves_apart(net) : rerouted(net, cut), &samples);
      tell();
      return ms_between(start, done);
    } catch (const failure&) {
      tell();
      throw;
    }
  }

  // The line cut in the middle: each half still routes within itself, and no node reaches the other half.
  static target halves_apart(const network& net) {
    const std::size_t half = net.size() / 2;
    return {[&net, half](std::size_t i, std::size_t j) {
      return (i < half) == (j < half) ? net.routes_right(i, j) : !net.node(i).can_reach(net.name(j));
    }};
  }

  // Ring or random graph: every pair routed right again, and neither end of the cut link still uses it.
  static target rerouted(const network& net, edge cut) {
    return {[&net](std::size_t i, std::size_t j) { return net.routes_right(i, j); },
            [&net, cut] { return !net.routes_via(cut.a, cut.b) && !net.routes_via(cut.b, cut.a); }};
  }

  template <class Pred>
  static std::size_t count_wrong(const network& net, Pred right) {
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < net.size(); ++i) {
      for (std::size_t j = 0; j < net.size(); ++j) wrong += !right(i, j);
    }
    return wrong;
  }

  // Runs the network until `t` holds. Long phases report every k_progress_every how many pairs are still wrong
  // (a full count, unlike the checks), so that a slow phase can be told from one that is going backwards.
  // With `samples`, the wrong pairs are also counted at the first check, then at most every k_sample_every and
  // at least k_quiet_factor times as long as the last count took apart, and once more when the phase ends.
  steady::time_point wait(const char* phase, asio::io_context& io, const network& net, const target& t,
                          wrong_samples* samples = nullptr) {
    check_stats stats;
    pair_scan scan(net.size());
    const auto began = steady::now();
    const double cpu0 = cpu_ms();
    auto next_progress = began + k_progress_every;
    auto next_sample = began;
    const auto sample = [&] {
      const auto t0 = steady::now();
      std::size_t wrong = 0, collateral = 0;
      for (std::size_t i = 0; i < net.size(); ++i) {
        for (std::size_t j = 0; j < net.size(); ++j) {
          if (t.pair_right(i, j)) continue;
          ++wrong;
          collateral += (*samples->unconcerned)[i * net.size() + j];
        }
      }
      samples->peak = std::max(samples->peak, wrong);
      samples->collateral_peak = std::max(samples->collateral_peak, collateral);
      ++samples->samples;
      const auto now = steady::now();
      next_sample = now + std::max<steady::duration>(k_sample_every, k_quiet_factor * (now - t0));
    };
    const auto done = run_until(
        io, opt_.timeout,
        [&] {
          if (samples && steady::now() >= next_sample) sample();
          if (steady::now() >= next_progress) {
            next_progress += k_progress_every;
            const auto sync = net.routing_traffic().sync;
            remark(std::string(phase) + ": after " +
                   std::to_string(static_cast<long>(ms_between(began, steady::now()))) + " ms, " +
                   std::to_string(count_wrong(net, t.pair_right)) + " ordered pairs wrong; since the start " +
                   std::to_string(sync.dumps_sent) + " dumps, " + std::to_string(sync.summaries_differed) +
                   " summaries that differed, " + std::to_string(sync.holds_expired) + " holds expired");
          }
          return scan.all(t.pair_right) && t.also();  // the cheap test first: it fails at the first wrong pair
        },
        stats);
    if (!done) {
      throw failure{std::string(phase) + ": not converged within " + std::to_string(opt_.timeout.count()) +
                    " s; " + std::to_string(count_wrong(net, t.pair_right)) + " of " +
                    std::to_string(net.size() * net.size()) + " ordered pairs wrong" +
                    (t.also() ? "" : ", and the cut link is still in use")};
    }
    if (samples) sample();
    const double wall = ms_between(began, steady::now());
    remark(
        std::string(phase) + ": " + std::to_string(stats.checks) + " checks took " +
        std::to_string(static_cast<long>(std::chrono::duration<double, std::milli>(stats.checking).count())) +
        " ms of " + std::to_string(static_cast<long>(wall)) + " ms, cpu " + percent(cpu_ms() - cpu0, wall));
    return *done;
  }

  static std::string percent(double part, double whole) {
    return std::to_string(static_cast<int>(100 * part / whole)) + "%";
  }

  void remark(const std::string& text) const {
    std::printf("# routing_scale %s %zu: %s\n", topology_.c_str(), g_.n, text.c_str());
    std::fflush(stdout);
  }

  std::string topology_;
  const graph& g_;
  const options& opt_;
};

void print_result(const std::string& topology, std::size_t n, const case_result& r) {
  std::printf(
      "RESULT routing_scale %s %zu converge_ms=%.1f cut_converge_ms=%.1f routing_Bps_per_node=%.0f "
      "rss_KiB_per_node=%.1f hop_ms=%.2f wrong_pairs_peak=%zu collateral_pairs=%zu\n",
      topology.c_str(), n, r.converge_ms, r.cut_converge_ms, r.routing_bps_per_node, r.rss_kib_per_node,
      r.hop_ms, r.wrong_pairs_peak, r.collateral_pairs);
  std::fflush(stdout);
}

void print_failure(const std::string& topology, std::size_t n, const std::string& why) {
  std::printf("routing_scale: FAILED %s %zu: %s\n", topology.c_str(), n, why.c_str());
  std::fflush(stdout);
}

// The child's side: run, print, hand the figures to the parent, exit without running the parent's destructors.
[[noreturn]] void run_child(int out_fd, const std::string& topology, const graph& g, const options& o) {
  // A backstop for a handler that never returns, which the per-phase deadlines cannot catch.
  alarm(static_cast<unsigned>(3 * o.timeout.count() + 60 + 10 * o.dump_interval.count() / 1000));
  int status = 0;
  try {
    const auto r = case_runner(topology, g, o).run();
    print_result(topology, g.n, r);
    if (write(out_fd, &r, sizeof r) != static_cast<ssize_t>(sizeof r)) status = 1;
  } catch (const failure& f) {
    print_failure(topology, g.n, f.what);
    status = 1;
  } catch (const std::exception& e) {
    print_failure(topology, g.n, e.what());
    status = 1;
  }
  std::fflush(stdout);
  _exit(status);
}

std::optional<case_result> read_result(int fd) {
  case_result r;
  std::size_t got = 0;
  auto* bytes = reinterpret_cast<char*>(&r);
  while (got < sizeof r) {
    const auto n = read(fd, bytes + got, sizeof r - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got != sizeof r) return std::nullopt;
  return r;
}

std::optional<case_result> run_case(const std::string& topology, std::size_t n, const options& o) {
  const auto g = make_graph(topology, n);
  int fds[2];
  if (pipe(fds) != 0) {
    print_failure(topology, n, std::string("pipe: ") + std::strerror(errno));
    return std::nullopt;
  }
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    run_child(fds[1], topology, g, o);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    print_failure(topology, n, std::string("fork: ") + std::strerror(errno));
    return std::nullopt;
  }
  auto r = read_result(fds[0]);
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    print_failure(topology, n, std::string("killed by signal ") + std::to_string(WTERMSIG(status)));
    return std::nullopt;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;  // the child said why
  return r;
}

// --- command line -------------------------------------------------------------------------------------------

std::vector<std::string> split(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    const auto comma = s.find(',');
    out.emplace_back(s.substr(0, comma));
    s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
  }
  return out;
}

std::optional<long> parse_number(std::string_view s) {
  long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

void usage() {
  std::fprintf(stderr,
               "usage: routing_scale [--sizes 100,300,1000] [--topologies line,ring,random] [--quick]\n"
               "                     [--dump-interval-ms 1000] [--timeout-s 120] [--split-horizon]\n"
               "  --quick: sizes 20,50 (a smoke test); sizes must be >= 5 (a 4-regular graph needs 5 nodes)\n");
}

bool apply_option(options& o, std::string_view flag, std::string_view value) {
  if (flag == "--sizes") {
    o.sizes.clear();
    for (const auto& s : split(value)) {
      const auto v = parse_number(s);
      if (!v || *v < 5) return false;
      o.sizes.push_back(static_cast<std::size_t>(*v));
    }
    return !o.sizes.empty();
  }
  if (flag == "--topologies") {
    o.topologies = split(value);
    const auto known = [](const std::string& t) { return t == "line" || t == "ring" || t == "random"; };
    return !o.topologies.empty() && std::all_of(o.topologies.begin(), o.topologies.end(), known);
  }
  const auto v = parse_number(value);
  if (!v) return false;
  if (flag == "--dump-interval-ms")
    o.dump_interval = milliseconds(*v);
  else if (flag == "--timeout-s")
    o.timeout = std::chrono::seconds(*v);
  else
    return false;
  return true;
}

std::optional<options> parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--quick") {
      o.sizes = {20, 50};
      continue;
    }
    if (flag == "--split-horizon") {  // route_params::split_horizon: routes go to their next hop as retractions
      o.split_horizon = true;
      continue;
    }
    if (i + 1 >= argc || !apply_option(o, flag, argv[i + 1])) return std::nullopt;
    ++i;
  }
  return o;
}

// 1,000 nodes of degree 4 hold 4,000 socket ends; the usual soft limit is 1,024.
void raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  lim.rlim_cur = lim.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &lim) != 0) std::perror("routing_scale: setrlimit(RLIMIT_NOFILE)");
}

struct row {
  std::string topology;
  std::size_t n = 0;
  case_result r;
};

void print_table(const std::vector<row>& rows) {
  std::printf(
      "\n| topology | N | diameter | converge ms | cut converge ms | wrong pairs peak | collateral pairs | hop ms "
      "| routing B/s per node | RSS KiB per node |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const auto& x : rows) {
    std::printf("| %s | %zu | %zu | %.1f | %.1f | %zu | %zu | %.2f | %.0f | %.1f |\n", x.topology.c_str(), x.n,
                x.r.diameter, x.r.converge_ms, x.r.cut_converge_ms, x.r.wrong_pairs_peak, x.r.collateral_pairs,
                x.r.hop_ms, x.r.routing_bps_per_node, x.r.rss_kib_per_node);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const auto opt = parse(argc, argv);
  if (!opt) {
    usage();
    return 2;
  }
  raise_fd_limit();
  std::printf(
      "# routing_scale: full_dump_interval=%lld ms, rest window=%d intervals after %d to settle, "
      "phase timeout=%lld s, seed=%#llx, split horizon %s\n",
      static_cast<long long>(opt->dump_interval.count()), k_rest_dumps, k_settle_dumps,
      static_cast<long long>(opt->timeout.count()), static_cast<unsigned long long>(k_seed),
      opt->split_horizon ? "on" : "off");
  std::vector<row> rows;
  bool failed = false;
  for (const auto& topology : opt->topologies) {
    for (const auto n : opt->sizes) {
      if (const auto r = run_case(topology, n, *opt)) {
        rows.push_back({topology, n, *r});
      } else {
        failed = true;
      }
    }
  }
  print_table(rows);
  return failed ? 1 : 0;
}
