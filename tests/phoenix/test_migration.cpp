// Migration in the runtime: join, leave and rebalancing between phoenix::Nodes in one process, with application
// state moving through the state handlers and messages to the moving virtual nodes arriving exactly once.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

using namespace std::chrono_literals;
using phoenix::Interval;
using phoenix::Node;
using phoenix::test::wait_for;

namespace {

using phoenix::test::L;

// An application whose state is one 64-bit counter per virtual node it assumes; pack and unpack move the
// counters of an interval. Every message to vnode v adds its 8-byte value to counter v.
struct counter_app {
  std::mutex mu;
  std::map<std::uint64_t, std::uint64_t> counters;
  std::size_t pad_bytes = 0;  // extra state per pack, to make transfers large
  int packs = 0;
  int unpacks = 0;
  bool refuse_pack = false;

  void install(Node& n) {
    REQUIRE_FALSE(
        n.set_state_handlers([this](Interval s) { return pack(s); },
                             [this](Interval s, std::span<const std::byte> d) { return unpack(s, d); }));
  }

  std::optional<phoenix::Bytes> pack(Interval s) {
    std::lock_guard lock(mu);
    if (refuse_pack) return std::nullopt;
    ++packs;
    std::vector<std::uint64_t> words;
    for (auto it = counters.lower_bound(s.lo); it != counters.end() && it->first < s.hi;) {
      words.push_back(it->first);
      words.push_back(it->second);
      it = counters.erase(it);
    }
    phoenix::Bytes b(words.size() * 8 + 8 + pad_bytes);
    const std::uint64_t n = words.size();
    std::memcpy(b.data(), &n, 8);
    if (n) std::memcpy(b.data() + 8, words.data(), n * 8);
    for (std::size_t i = 0; i < pad_bytes; ++i) b[8 + n * 8 + i] = static_cast<std::byte>(i * 31 + 7);
    return b;
  }

  bool unpack(Interval s, std::span<const std::byte> d) {
    std::lock_guard lock(mu);
    ++unpacks;
    std::uint64_t n = 0;
    std::memcpy(&n, d.data(), 8);
    REQUIRE(d.size() == 8 + n * 8 + pad_bytes);
    for (std::size_t i = 0; i < pad_bytes; ++i) {
      if (d[8 + n * 8 + i] != static_cast<std::byte>(i * 31 + 7)) return false;
    }
    for (std::uint64_t i = 0; i < n; i += 2) {
      std::uint64_t v = 0, c = 0;
      std::memcpy(&v, d.data() + 8 + i * 8, 8);
      std::memcpy(&c, d.data() + 16 + i * 8, 8);
      REQUIRE(s.contains(v));
      counters[v] = c;
    }
    return true;
  }

  void apply(const phoenix::Message& m) {
    std::uint64_t x = 0;
    REQUIRE(m.size() == 8);
    std::memcpy(&x, m.data(), 8);
    std::lock_guard lock(mu);
    counters[m.dest()] += x;
  }
};

void send_value(Node& from, std::uint64_t v, std::uint64_t x) {
  std::error_code ec;
  for (int i = 0; i < 1000 && (ec = from.send(v, 1, &x, sizeof x)).value() == PH_EAGAIN; ++i)
    std::this_thread::sleep_for(1ms);
  REQUIRE_FALSE(ec);
}

struct cluster {
  phoenix::test::temp_dir dir;
  std::string key = dir.make_key();
  std::vector<std::unique_ptr<Node>> nodes;
  std::vector<std::unique_ptr<counter_app>> apps;

  Node& add(const std::string& name) {
    nodes.push_back(std::make_unique<Node>(phoenix::test::node_config(name, key, L)));
    apps.push_back(std::make_unique<counter_app>());
    Node& n = *nodes.back();
    REQUIRE_FALSE(n.initialize("tcp://127.0.0.1:0"));
    if (nodes.size() > 1) REQUIRE_FALSE(n.add_port(nodes.front()->local_port()));
    apps.back()->install(n);
    return n;
  }
};

// Runs node i's application loop: receive and apply messages until stop.
std::thread serve(cluster& c, std::size_t i, std::atomic<bool>& stop) {
  return std::thread([&c, i, &stop] {
    while (!stop) {
      if (auto m = c.nodes[i]->recv_for(1, 20ms)) c.apps[i]->apply(*m);
    }
  });
}

}  // namespace

TEST_CASE("migration: a fresh node joins with half an interval and its state, leaving hands it back") {
  cluster c;
  Node& a = c.add("a");
  REQUIRE_FALSE(a.assume({0, L}));
  for (std::uint64_t v = 0; v < L; v += 10) c.apps[0]->counters[v] = v * 3;
  Node& b = c.add("b");
  std::atomic<bool> stop{false};
  auto serving_a = serve(c, 0, stop);

  REQUIRE_FALSE(b.join(10s));
  CHECK(b.assumed() == std::vector<Interval>{{500, 1000}});
  CHECK(a.assumed() == std::vector<Interval>{{0, 500}});
  {
    std::lock_guard lock(c.apps[1]->mu);
    CHECK(c.apps[1]->counters.size() == 50);
    CHECK(c.apps[1]->counters[990] == 2970);
  }
  CHECK(c.apps[0]->counters.size() == 50);
  CHECK(b.join(100ms).value() == PH_ESTATE);  // b assumes something now

  // Messages to b's half reach b: through a, which forwards them once the routes moved.
  send_value(a, 700, 5);
  auto m = b.recv_for(1, 5s);
  REQUIRE(m);
  CHECK(m->dest() == 700);

  auto serving_b = std::thread([&] {
    while (!stop) b.poll(), std::this_thread::sleep_for(1ms);
  });
  REQUIRE_FALSE(b.leave(10s));
  stop = true;
  serving_a.join();
  serving_b.join();
  CHECK(b.assumed().empty());
  CHECK(a.assumed() == std::vector<Interval>{{0, 1000}});
  CHECK(c.apps[0]->counters.size() == 100);
  CHECK(c.apps[0]->counters[990] == 2970);
  CHECK(c.apps[0]->packs == 1);
  CHECK(c.apps[0]->unpacks == 1);
  CHECK(a.leave(1s).value() == PH_ESTATE);  // a assumes all of [0, L): nobody to give to
}

// spin-models BUG_CLOSE_WHILE_BUSY: leave() returned at once on an empty interval while the node's own take
// went on, finalize closed the node, and the take gave it an interval as it finalized. Deterministic: a's give
// step (its pack) runs only on a's application thread, so while that thread is away b's take cannot end.
TEST_CASE("migration: leave waits for the node's own take still under way and gives away what it brought") {
  cluster c;
  Node& a = c.add("a");
  REQUIRE_FALSE(a.assume({0, L}));
  Node& b = c.add("b");
  {
    std::atomic<bool> stop{false};
    auto serving_a = serve(c, 0, stop);
    REQUIRE_FALSE(b.join(10s));
    REQUIRE_FALSE(b.migrate(Node::MigrationAction::give_all, Node::Side::below, 0, 10s));  // b empties itself
    stop = true;
    serving_a.join();
  }
  REQUIRE(b.assumed().empty());
  // A take whose call gives up at once; its attempt goes on, and holds until a's application packs.
  CHECK(b.migrate(Node::MigrationAction::take_half, Node::Side::below, 0, 0ms).value() == PH_ETIMEDOUT);
  // The interval is empty, but the take may still bring one: leave does not report the node gone.
  CHECK(b.leave(100ms).value() == PH_ETIMEDOUT);
  std::atomic<bool> stop{false};
  auto serving_a = serve(c, 0, stop);
  REQUIRE_FALSE(b.leave(10s));  // the take ends, bringing half of [0, L), which b gives back
  CHECK(b.assumed().empty());
  REQUIRE_FALSE(b.finalize());
  stop = true;
  serving_a.join();
  CHECK(a.assumed() == std::vector<Interval>{{0, L}});
}

TEST_CASE("migration: messages sent while intervals move arrive exactly once, at the owner") {
  cluster c;
  Node& a = c.add("a");
  REQUIRE_FALSE(a.assume({0, L}));
  Node& b = c.add("b");
  Node& sender = c.add("sender");
  std::atomic<bool> stop{false};
  std::vector<std::thread> servers;
  for (std::size_t i = 0; i < 2; ++i) servers.push_back(serve(c, i, stop));

  // 2,000 messages of value 1 to every fifth virtual node while b joins, then gives some back, then leaves.
  std::thread traffic([&] {
    for (int round = 0; round < 10; ++round) {
      for (std::uint64_t v = 0; v < L; v += 5) send_value(sender, v, 1);
      std::this_thread::sleep_for(5ms);
    }
  });
  REQUIRE_FALSE(b.join(10s));
  CHECK(wait_for([&] { return !b.migrate(Node::MigrationAction::give, Node::Side::below, 100, 5s); }, 10s));
  CHECK(b.assumed() == std::vector<Interval>{{600, 1000}});
  traffic.join();
  REQUIRE_FALSE(b.leave(10s));
  // Everything sent has been applied once: 10 per counter.
  CHECK(wait_for(
      [&] {
        std::lock_guard lock(c.apps[0]->mu);
        std::uint64_t sum = 0;
        for (auto& [v, n] : c.apps[0]->counters) sum += n;
        return sum == 2000;
      },
      10s));
  stop = true;
  for (auto& t : servers) t.join();
  std::lock_guard lock(c.apps[0]->mu);
  CHECK(c.apps[0]->counters.size() == 200);
  for (auto& [v, n] : c.apps[0]->counters) {
    CHECK(v % 5 == 0);
    CHECK(n == 10);
  }
  CHECK(c.apps[1]->counters.empty());
}

TEST_CASE("migration: the giver packs only after another thread finished the message it was handling") {
  cluster c;
  Node& a = c.add("a");
  REQUIRE_FALSE(a.assume({0, L}));
  Node& b = c.add("b");
  std::atomic<bool> stop{false};
  auto serving_a = serve(c, 0, stop);
  REQUIRE_FALSE(b.join(10s));
  REQUIRE(b.assumed() == std::vector<Interval>{{500, 1000}});

  // A thread of b receives a message for 700 and takes its time applying it; meanwhile b leaves.
  std::atomic<bool> holding{false};
  std::thread handler([&] {
    auto m = b.recv_for(1, 10s);
    REQUIRE(m);
    holding = true;
    std::this_thread::sleep_for(300ms);
    c.apps[1]->apply(*m);
    while (!stop) b.recv_for(1, 20ms);  // back in the node: done with that message
  });
  send_value(a, 700, 7);
  REQUIRE(wait_for([&] { return holding.load(); }, 10s));
  REQUIRE_FALSE(b.leave(10s));
  stop = true;
  handler.join();
  serving_a.join();
  CHECK(a.assumed() == std::vector<Interval>{{0, L}});
  std::lock_guard lock(c.apps[0]->mu);
  CHECK(c.apps[0]->counters[700] == 7);  // the message's effect moved with the state
  CHECK(c.apps[1]->counters.empty());
}

TEST_CASE("migration: 64 MiB of state streams in chunks while other traffic keeps flowing") {
  cluster c;
  Node& a = c.add("a");
  REQUIRE_FALSE(a.assume({0, L}));
  c.apps[0]->pad_bytes = 64u << 20;
  c.apps[0]->counters[999] = 42;
  Node& b = c.add("b");
  c.apps[1]->pad_bytes = 64u << 20;
  std::atomic<bool> stop{false};
  auto serving_a = serve(c, 0, stop);
  std::atomic<bool> joined{false};
  std::uint64_t applied_while_joining = 0;
  std::thread joiner([&] {
    CHECK_FALSE(b.join(60s));
    std::lock_guard lock(c.apps[0]->mu);
    applied_while_joining = c.apps[0]->counters[1];
    joined = true;
  });
  // Meanwhile b sends small messages to vnode 1, which stays with a.
  std::uint64_t sent = 0;
  for (; sent < 5000 && !joined; ++sent) {
    send_value(b, 1, 1);
    std::this_thread::sleep_for(1ms);
  }
  joiner.join();
  CHECK(wait_for([&] {
    std::lock_guard lock(c.apps[0]->mu);
    return c.apps[0]->counters[1] == sent;
  }));
  stop = true;
  serving_a.join();
  CHECK(joined);
  CHECK(b.assumed() == std::vector<Interval>{{500, 1000}});
  CHECK(c.apps[1]->unpacks == 1);
  CHECK(c.apps[1]->counters[999] == 42);
  MESSAGE("small messages to a applied while 64 MiB of state moved: " << applied_while_joining << " of "
                                                                      << sent);
}

TEST_CASE("migration: a pack that fails keeps the interval where it is") {
  cluster c;
  Node& a = c.add("a");
  REQUIRE_FALSE(a.assume({0, 500}));
  Node& b = c.add("b");
  REQUIRE_FALSE(b.assume({500, L}));
  c.apps[0]->refuse_pack = true;
  std::atomic<bool> stop{false};
  auto serving_a = serve(c, 0, stop);
  // b asks for 100 of a's virtual nodes; a cannot pack them.
  std::error_code ec;
  CHECK(wait_for([&] {
    return (ec = b.migrate(Node::MigrationAction::take, Node::Side::below, 100, 5s)).value() != PH_ESTATE;
  }));
  CHECK(ec.value() == PH_EBUSY);
  CHECK(a.assumed() == std::vector<Interval>{{0, 500}});
  CHECK(b.assumed() == std::vector<Interval>{{500, 1000}});
  // Both locks are free again: the same request succeeds once a can pack.
  c.apps[0]->refuse_pack = false;
  CHECK(wait_for([&] { return !b.migrate(Node::MigrationAction::take, Node::Side::below, 100, 5s); }, 10s));
  CHECK(a.assumed() == std::vector<Interval>{{0, 400}});
  CHECK(b.assumed() == std::vector<Interval>{{400, 1000}});
  stop = true;
  serving_a.join();
}

TEST_CASE(
    "migration: assume and release are refused while a migration holds the node, bad calls fail cleanly") {
  phoenix::test::temp_dir dir;
  Node n(phoenix::test::node_config("n", dir.make_key(), L));
  CHECK(n.join(10ms).value() == PH_ESTATE);
  CHECK(n.leave(10ms).value() == PH_ESTATE);
  CHECK(n.poll() == PH_ESTATE);
  CHECK(n.set_state_handlers(nullptr, nullptr).value() == PH_EINVAL);
  REQUIRE_FALSE(n.initialize("tcp://127.0.0.1:0"));
  REQUIRE_FALSE(n.assume({0, 10}));
  REQUIRE_FALSE(n.assume({20, 30}));
  CHECK(n.join(10ms).value() == PH_ESTATE);   // assumes something
  CHECK(n.leave(10ms).value() == PH_ESTATE);  // several intervals: sits migration out
  CHECK(n.migrate(Node::MigrationAction::give, Node::Side::below, 1, 10ms).value() == PH_ESTATE);
  REQUIRE_FALSE(n.release({20, 30}));
  CHECK(n.migrate(Node::MigrationAction::give, Node::Side::below, 1, 10ms).value() == PH_ESTATE);  // below 0
  // Alone, a node that asks its upper neighbour waits for an answer nobody gives: the attempt is outstanding.
  CHECK(n.migrate(Node::MigrationAction::give, Node::Side::above, 1, 50ms).value() == PH_ETIMEDOUT);
  CHECK(n.assume({40, 50}).value() == PH_ESTATE);
  CHECK(n.release({0, 10}).value() == PH_ESTATE);
  CHECK(n.poll() == 0);
  // Once someone assumes the virtual node it asked, the attempt completes (and n may finalize at once).
  Node above(phoenix::test::node_config("above", (dir / "cluster.key").string(), L));
  REQUIRE_FALSE(above.initialize("tcp://127.0.0.1:0"));
  REQUIRE_FALSE(above.add_port(n.local_port()));
  REQUIRE_FALSE(above.assume({10, L}));
  CHECK(wait_for([&] {
    n.poll();
    above.poll();
    return n.assumed() == std::vector<Interval>{{0, 9}};
  }));
}
