// The migration driver between two nodes joined by a test network that delivers packets in the order a test
// chooses: the state stream must survive the reorderings the overlay allows (docs/overlay.md, "Order").
#include <doctest/doctest.h>

#include <algorithm>
#include <deque>
#include <map>

#include "migration/message.hpp"
#include "phoenix/migration_driver.hpp"
#include "phoenix/progress.hpp"

using phoenix::Bytes;
using phoenix::Interval;
using phoenix::migration_driver;
using phoenix::migration::kind;
namespace migration = phoenix::migration;

namespace {

constexpr std::uint64_t space = 1000;

Bytes pattern(std::size_t bytes, std::uint64_t lo) {
  Bytes b(bytes);
  for (std::size_t k = 0; k < b.size(); ++k) b[k] = static_cast<std::byte>((k * 131 + lo) & 0xff);
  return b;
}

// One node of the test: a driver, the intervals its application assumes, and the states it unpacked.
struct test_node {
  phoenix::progress_engine progress;
  std::vector<Interval> assumed;
  std::vector<Bytes> unpacked;
  std::unique_ptr<migration_driver> driver;
};

struct sent {
  std::uint64_t dest;
  phoenix::overlay::packet pkt;
  migration::kind what;
};

struct test_net {
  std::deque<sent> in_flight;
  std::map<std::uint64_t, test_node*> by_name;

  std::unique_ptr<test_node> make(std::uint64_t name, Interval owns, std::size_t state_bytes) {
    auto n = std::make_unique<test_node>();
    test_node* self = n.get();
    migration_driver::node_ops ops;
    ops.send = [this](phoenix::overlay::packet p) {
      const auto m = migration::decode(p.body);
      REQUIRE(m);
      in_flight.push_back({p.dest, std::move(p), m->what});
    };
    ops.release = [self](Interval i) {
      auto& a = self->assumed;
      const auto it = std::find_if(a.begin(), a.end(), [&](Interval x) { return x.lo == i.lo || x.hi == i.hi; });
      REQUIRE(it != a.end());
      if (it->lo == i.lo && it->hi == i.hi) {
        a.erase(it);
      } else if (it->lo == i.lo) {
        it->lo = i.hi;
      } else {
        it->hi = i.lo;
      }
    };
    ops.assume = [self](Interval i) { self->assumed.push_back(i); };
    n->driver = std::make_unique<migration_driver>("n" + std::to_string(name), name, space, std::move(ops));
    n->assumed.push_back(owns);
    n->driver->protocol().set_interval(owns);
    // pack: state_bytes bytes of a pattern that depends on the interval, so the taker can tell what it got.
    n->driver->set_handlers(
        [state_bytes](Interval i) -> std::optional<Bytes> { return pattern(state_bytes, i.lo); },
        [self](Interval, std::span<const std::byte> d) {
          self->unpacked.emplace_back(d.begin(), d.end());
          return true;
        });
    by_name[name] = self;
    return n;
  }

  test_node& owner(std::uint64_t dest) {
    if (dest >= space) return *by_name.at(dest);
    for (auto& [name, n] : by_name)
      for (const auto& a : n->assumed)
        if (a.lo <= dest && dest < a.hi) return *n;
    FAIL("nobody assumes " << dest);
    throw;
  }

  void deliver(sent s) {
    auto& n = owner(s.dest);
    n.progress.call([&] { n.driver->on_packet(s.pkt); });
  }

  // Delivers everything in flight, first the packets `first` picks (in their order), each node running its
  // pending application steps after every packet; bounded.
  template <class Pick>
  void run(Pick first) {
    for (int round = 0; round < 1000; ++round) {
      for (auto& [name, n] : by_name) n->driver->run_pending(n->progress);
      if (in_flight.empty()) return;
      auto it = std::find_if(in_flight.begin(), in_flight.end(), first);
      if (it == in_flight.end()) it = in_flight.begin();
      sent s = std::move(*it);
      in_flight.erase(it);
      deliver(std::move(s));
    }
    FAIL("the migration did not end within 1000 deliveries");
  }
};

}  // namespace

TEST_CASE("migration driver: state chunks that overtake their state_begin are kept, and the interval arrives") {
  // Three chunks and a short last one; state_begin held back until every chunk was delivered.
  const std::size_t bytes = 2 * migration_driver::chunk_bytes + 1000;
  test_net net;
  auto giver = net.make(5000, {0, 100}, bytes);
  auto taker = net.make(6000, {100, 200}, bytes);
  REQUIRE(taker->progress.call(
      [&] { return taker->driver->begin({migration::plan::action::take_half, migration::side::below}); }));

  bool chunks_first = false;
  SUBCASE("in order") {}
  SUBCASE("every chunk before state_begin") { chunks_first = true; }
  std::vector<kind> order;
  net.run([&](const sent& s) {
    if (!chunks_first) return false;
    const bool begin_waiting = std::any_of(net.in_flight.begin(), net.in_flight.end(),
                                           [](const sent& x) { return x.what == kind::state_begin; });
    return begin_waiting && s.what == kind::state_chunk;
  });

  CHECK(taker->assumed.size() == 2);
  REQUIRE(taker->unpacked.size() == 1);
  CHECK(taker->unpacked[0] == pattern(bytes, 50));  // take half from below: [50, 100)
  REQUIRE(giver->assumed.size() == 1);
  CHECK(giver->assumed[0].lo == 0);
  CHECK(giver->assumed[0].hi == 50);
  for (auto* n : {giver.get(), taker.get()}) {
    n->progress.call([&] {
      CHECK_FALSE(n->driver->protocol().involved());
      CHECK(n->driver->protocol().last_outcome() ==
            (n == taker.get() ? migration::outcome::moved : migration::outcome::none));
    });
  }
}
