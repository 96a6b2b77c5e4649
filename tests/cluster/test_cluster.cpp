// Multi-process tests on 127.0.0.1: five node processes in a line and in a star, each assuming a static share
// of [0, L), every node sending to virtual nodes in every share. Every message must arrive exactly once, at
// the owner, in send order per (sender, virtual node) — also while the middle link of the line is cut again
// and again, from inside (the node drops its connections) and from outside (`ss -K` kills the sockets), and
// when one node starts only after messages to its virtual nodes were sent.
#include <doctest/doctest.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <phoenix/config.hpp>
#include <phoenix/node.hpp>

#include "phoenix/launch/process_group.hpp"
#include "support/temp_dir.hpp"

using namespace std::chrono_literals;
using phoenix::launch::ChildPipes;
using phoenix::launch::Clock;
using phoenix::launch::ProcessGroup;

namespace {

enum class topology { line, star };
enum class cut { none, inside, outside };

struct spec {
  topology topo = topology::line;
  int nodes = 5;
  std::uint64_t space = 10000;
  int messages_per_node = 500;
  cut cuts = cut::none;
  int late_node = -1;  // started only after the others have sent everything
  int pause_every = 0;  // pause 5 ms after this many messages, so that the flow lasts while links are cut
};

struct wire_message {
  std::uint32_t sender;
  std::uint32_t k;
  std::uint64_t vnode;
};

phoenix::Interval share(const spec& s, int i) {
  return phoenix::share_part(s.space, {static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(s.nodes)});
}

// The k-th destination of sender i: a spread over [0, L) that hits every share.
std::uint64_t target(const spec& s, int sender, int k) {
  return (static_cast<std::uint64_t>(k) * 7919 + static_cast<std::uint64_t>(sender) * 104729) % s.space;
}

std::uint64_t expected_for(const spec& s, int i) {
  const auto mine = share(s, i);
  std::uint64_t n = 0;
  for (int sender = 0; sender < s.nodes; ++sender)
    for (int k = 0; k < s.messages_per_node; ++k) n += mine.contains(target(s, sender, k));
  return n;
}

int middle(const spec& s) { return s.nodes / 2; }

int run_member(const spec& s, int i, const std::string& key, const std::string& peer, const ChildPipes& pipes) {
  phoenix::Config c;
  c.name = "n" + std::to_string(i);
  c.space_size = s.space;
  c.cluster_key_file = key;
  c.retry_interval_ms = 30;
  phoenix::Node node(c);
  if (node.initialize("tcp://127.0.0.1:0") || (!peer.empty() && node.add_port(peer)) || node.assume(share(s, i))) {
    phoenix::launch::report_line(pipes.report_fd, "ERROR n" + std::to_string(i) + " could not start");
    return 1;
  }
  phoenix::launch::report_line(pipes.report_fd, "PORT " + node.local_port());

  const auto deadline = Clock::now() + 90s;
  std::uint64_t eagain = 0;
  auto next_cut = Clock::now() + 100ms;
  int cuts = 0;
  auto maybe_cut = [&] {
    if (s.cuts != cut::inside || i != middle(s) || Clock::now() < next_cut) return;
    cuts += static_cast<int>(node.drop_links() > 0);
    next_cut = Clock::now() + 100ms;
  };
  for (int k = 0; k < s.messages_per_node; ++k) {
    if (s.pause_every && k % s.pause_every == s.pause_every - 1) {
      std::this_thread::sleep_for(5ms);
      maybe_cut();
    }
    const wire_message m{static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(k), target(s, i, k)};
    while (node.send(m.vnode, 1, &m, sizeof m).value() == PH_EAGAIN && Clock::now() < deadline) {
      ++eagain;
      (void)node.recv_for(99, 1ms);  // back-pressure: let the node make progress
    }
  }
  phoenix::launch::report_line(pipes.report_fd, "SENT n" + std::to_string(i));

  const auto mine = share(s, i);
  const std::uint64_t expected = expected_for(s, i);
  std::uint64_t received = 0, duplicates = 0, out_of_order = 0, misdelivered = 0;
  std::set<std::pair<std::uint32_t, std::uint32_t>> seen;
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint32_t> last;  // (sender, vnode) -> last k
  while (received < expected && Clock::now() < deadline) {
    maybe_cut();
    auto m = node.recv_for(1, 50ms);
    if (!m) continue;
    wire_message w;
    if (m->size() != sizeof w) {
      ++misdelivered;
      continue;
    }
    std::memcpy(&w, m->data(), sizeof w);
    if (w.vnode != m->dest() || !mine.contains(m->dest())) ++misdelivered;
    if (!seen.insert({w.sender, w.k}).second) {
      ++duplicates;
      continue;
    }
    ++received;
    auto [it, fresh] = last.emplace(std::make_pair(w.sender, w.vnode), w.k);
    if (!fresh) {
      if (w.k < it->second) ++out_of_order;
      it->second = w.k;
    }
  }
  std::ostringstream out;
  out << "DONE n" << i << " received " << received << " expected " << expected << " duplicates " << duplicates
      << " out_of_order " << out_of_order << " misdelivered " << misdelivered << " cuts " << cuts << " eagain "
      << eagain << " links_lost " << node.routing_snapshot().links_lost;
  phoenix::launch::report_line(pipes.report_fd, out.str());
  // Keep forwarding for the others until the test is over.
  while (!phoenix::launch::stop_requested(pipes.control_fd)) (void)node.recv_for(2, 20ms);
  node.finalize();
  return 0;
}

struct outcome {
  std::vector<std::string> done;
  int outside_cuts = 0;
  bool all_started = false;
};

// Kills the established TCP connections of the given port, from outside the processes.
int ss_kill(const std::string& port) {
  const std::string cmd = "ss -K state established '( sport = :" + port + " or dport = :" + port + " )' >/dev/null 2>&1";
  return std::system(cmd.c_str());
}

outcome run_cluster(const spec& s) {
  phoenix::test::temp_dir dir;
  const std::string key = dir.make_key();
  outcome o;
  ProcessGroup group;
  std::vector<std::string> ports(static_cast<std::size_t>(s.nodes));
  auto spawn = [&](int i) {
    std::string peer;
    if (i > 0) peer = s.topo == topology::line ? ports[static_cast<std::size_t>(i - 1)] : ports[0];
    if (s.topo == topology::line && i == s.late_node) peer = ports[static_cast<std::size_t>(i - 1)];
    group.spawn("n" + std::to_string(i), [&, i, peer](const ChildPipes& p) { return run_member(s, i, key, peer, p); });
  };
  // The late node can only be last (in a line, it links to the node before it).
  REQUIRE((s.late_node == -1 || s.late_node == s.nodes - 1));
  const int early = s.late_node == -1 ? s.nodes : s.nodes - 1;
  int started = 0, sent = 0;
  spawn(started++);
  const auto deadline = Clock::now() + 120s;
  auto next_cut = Clock::time_point::max();
  while (o.done.size() < static_cast<std::size_t>(s.nodes) && Clock::now() < deadline) {
    const auto ev = group.next_event(std::min(deadline, next_cut));
    if (!ev) {
      if (Clock::now() >= next_cut) {
        const auto& port = ports[static_cast<std::size_t>(middle(s))];
        o.outside_cuts += ss_kill(port.substr(port.rfind(':') + 1)) == 0;
        next_cut = Clock::now() + 120ms;
      }
      continue;
    }
    if (ev->eof) break;  // a member died before finishing
    const std::string& line = ev->line;
    if (line.rfind("PORT ", 0) == 0) {
      const auto port = line.substr(5);
      ports[ev->child] = port;
      if (started < early) spawn(started++);
      if (started == s.nodes) o.all_started = true;
      if (started == early && s.cuts == cut::outside && next_cut == Clock::time_point::max())
        next_cut = Clock::now() + 100ms;
    } else if (line.rfind("SENT ", 0) == 0) {
      // The late node starts once every early node sent all its messages, some of them to its share.
      if (++sent == early && s.late_node != -1) spawn(started++);
    } else if (line.rfind("DONE ", 0) == 0) {
      o.done.push_back(line);
      MESSAGE(line);
    } else {
      MESSAGE(line);
    }
  }
  // Every member finalizes at once without a log: each may wait through two resends for acknowledgements
  // that leaving relays drop (6.5 s), then for its links to drain (5 s); ASan runs were seen to need 11 s.
  CHECK(group.stop_all(30s));
  return o;
}

void check_clean(const spec& s, const outcome& o) {
  REQUIRE(o.done.size() == static_cast<std::size_t>(s.nodes));
  for (const auto& line : o.done) {
    CAPTURE(line);
    unsigned node = 0;
    unsigned long long received = 0, expected = 0, dup = 0, ooo = 0, mis = 0, cuts = 0, eagain = 0, lost = 0;
    REQUIRE(std::sscanf(line.c_str(),
                        "DONE n%u received %llu expected %llu duplicates %llu out_of_order %llu misdelivered %llu "
                        "cuts %llu eagain %llu links_lost %llu",
                        &node, &received, &expected, &dup, &ooo, &mis, &cuts, &eagain, &lost) == 9);
    CHECK(expected > 0);
    CHECK(received == expected);
    CHECK(dup == 0);
    CHECK(ooo == 0);
    CHECK(mis == 0);
    // The cuts really happened while messages flowed: the middle node saw its links break. From inside, the
    // node cuts its own links. From outside, `ss -K` runs every 120 ms until every node is done, and may find
    // the link reconnecting (nothing to kill) or come after the middle node reported (seen once: 3 runs, 3
    // "link down" lines, the last after the report, which counted 2).
    if (s.cuts == cut::inside && static_cast<int>(node) == middle(s)) CHECK(lost >= 3);
    if (s.cuts == cut::outside && static_cast<int>(node) == middle(s)) CHECK(lost >= 1);
    // Where nothing was cut, no link broke: a link failing over and over (a protocol error, a wrong ack) would
    // still deliver everything, by resending, and only this shows it.
    if (s.cuts == cut::none) CHECK(lost == 0);
    if (s.cuts == cut::inside && static_cast<int>(node) == middle(s)) CHECK(cuts >= 3);
  }
}

}  // namespace

TEST_CASE("cluster: 5 nodes in a line, every message exactly once, at its owner, in order") {
  spec s;
  s.topo = topology::line;
  check_clean(s, run_cluster(s));
}

TEST_CASE("cluster: 5 nodes in a star, every message exactly once, at its owner, in order") {
  spec s;
  s.topo = topology::star;
  check_clean(s, run_cluster(s));
}

TEST_CASE("cluster: a node that starts after messages were sent to its virtual nodes receives them all") {
  spec s;
  s.topo = topology::line;
  s.late_node = 4;
  const auto o = run_cluster(s);
  CHECK(o.all_started);
  check_clean(s, o);
}

TEST_CASE("cluster: cutting the middle link of the line from inside, again and again, loses nothing") {
  spec s;
  s.topo = topology::line;
  s.messages_per_node = 2000;  // 10,000 messages in all
  s.pause_every = 10;
  s.cuts = cut::inside;
  check_clean(s, run_cluster(s));
}

TEST_CASE("cluster: killing the middle link's sockets from outside with ss -K loses nothing") {
  if (std::system("ss -K state established '( dport = :1 )' >/dev/null 2>&1") != 0) {
    std::puts("SS-K-SKIPPED: `ss -K` does not work here (needs root and a kernel with INET_DIAG_DESTROY)");
    std::fflush(stdout);
    return;
  }
  spec s;
  s.topo = topology::line;
  s.messages_per_node = 2000;
  s.pause_every = 10;
  s.cuts = cut::outside;
  const auto o = run_cluster(s);
  check_clean(s, o);
  MESSAGE("ss -K runs: " << o.outside_cuts);
}
