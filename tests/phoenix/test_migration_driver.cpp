// The migration driver between two nodes joined by a test network that delivers packets in the order a test
// chooses: the state stream must survive the reorderings the overlay allows (docs/overlay.md, "Order").
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <deque>
#include <map>
#include <set>
#include <tuple>

#include "migration/message.hpp"
#include "overlay/delivery/stream_codec.hpp"
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
  // The end-to-end streams' states that came with the intervals assumed (each release gives one that names
  // the releasing node and the interval).
  std::vector<phoenix::overlay::stream_state> streams;
  std::unique_ptr<migration_driver> driver;
  bool pack_fails = false;
  std::uint64_t extra_streams = 0;  // more end-to-end streams its releases give, as from many senders
};

struct sent {
  std::uint64_t dest;
  phoenix::overlay::packet pkt;
  migration::kind what;
};

struct test_net {
  std::deque<sent> in_flight;
  std::map<std::uint64_t, test_node*> by_name;
  std::set<std::uint64_t> unreachable;  // resource names the nodes have no route to
  migration_driver::lease_config leases{std::chrono::milliseconds(3000), std::chrono::milliseconds(10'000)};

  std::unique_ptr<test_node> make(std::uint64_t name, Interval owns, std::size_t state_bytes) {
    auto n = std::make_unique<test_node>();
    test_node* self = n.get();
    migration_driver::node_ops ops;
    ops.send = [this, name](phoenix::overlay::packet p) {
      p.source = name;  // as the overlay's send does
      const auto m = migration::decode(p.body);
      REQUIRE(m);
      in_flight.push_back({p.dest, std::move(p), m->what});
    };
    ops.release = [self, name](Interval i) {
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
      std::vector<phoenix::overlay::stream_state> streams{{name, i.lo, i.hi}};
      for (std::uint64_t k = 0; k < self->extra_streams; ++k) streams.push_back({name + 1 + k, i.lo, k});
      return phoenix::overlay::encode_states(streams);
    };
    ops.assume = [self](Interval i, std::span<const std::byte> streams) {
      self->assumed.push_back(i);
      if (streams.empty()) return;  // a decline's or an adoption's
      const auto states = phoenix::overlay::decode_states(streams);
      REQUIRE(states);
      self->streams.insert(self->streams.end(), states->begin(), states->end());
    };
    ops.reachable = [this](std::uint64_t to) { return !unreachable.count(to); };
    n->driver =
        std::make_unique<migration_driver>("n" + std::to_string(name), name, space, std::move(ops), leases);
    n->assumed.push_back(owns);
    n->driver->protocol().set_interval(owns);
    // pack: state_bytes bytes of a pattern that depends on the interval, so the taker can tell what it got.
    n->driver->set_handlers(
        [state_bytes, self](Interval i) -> std::optional<Bytes> {
          if (self->pack_fails) return std::nullopt;
          return pattern(state_bytes, i.lo);
        },
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

// A giver assuming [0, 100) and a taker assuming [100, 200), which begins a take half from below.
std::pair<std::unique_ptr<test_node>, std::unique_ptr<test_node>> take_half_below(test_net& net,
                                                                                   std::size_t state_bytes) {
  auto giver = net.make(5000, {0, 100}, state_bytes);
  auto taker = net.make(6000, {100, 200}, state_bytes);
  REQUIRE(taker->progress.call(
      [&] { return taker->driver->begin({migration::plan::action::take_half, migration::side::below}); }));
  return {std::move(giver), std::move(taker)};
}

}  // namespace

TEST_CASE("migration driver: state chunks that overtake their state_begin are kept, and the interval arrives") {
  // Three chunks and a short last one; state_begin held back until every chunk was delivered.
  const std::size_t bytes = 2 * migration_driver::chunk_bytes + 1000;
  test_net net;
  std::unique_ptr<test_node> giver, taker;
  std::tie(giver, taker) = take_half_below(net, bytes);

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
  // The streams' state came with it, apart from the application's bytes.
  CHECK(taker->streams == std::vector<phoenix::overlay::stream_state>{{giver->driver->protocol().self(), 50, 100}});
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

TEST_CASE("migration driver: a streams' part longer than a chunk follows the state intact, across chunk bounds") {
  // The application's bytes end inside the third chunk; the streams' part fills that chunk's rest and three
  // more, the last one short.
  const std::size_t bytes = 2 * migration_driver::chunk_bytes + 1000;
  test_net net;
  std::unique_ptr<test_node> giver, taker;
  std::tie(giver, taker) = take_half_below(net, bytes);
  giver->extra_streams = 40'000;
  net.run([](const sent&) { return false; });

  REQUIRE(taker->unpacked.size() == 1);
  CHECK(taker->unpacked[0] == pattern(bytes, 50));
  const std::uint64_t self = giver->driver->protocol().self();
  std::vector<phoenix::overlay::stream_state> expected{{self, 50, 100}};
  for (std::uint64_t k = 0; k < 40'000; ++k) expected.push_back({self + 1 + k, 50, k});
  CHECK(taker->streams == expected);
  CHECK(phoenix::overlay::encode_states(expected).size() > 3 * migration_driver::chunk_bytes);
}

namespace {

// Delivers packets in order until `stop` says the next one should wait; each node runs its pending steps
// between deliveries. Bounded.
void deliver_until(test_net& net, const std::function<bool(const sent&)>& stop) {
  for (int round = 0; round < 1000; ++round) {
    for (auto& [name, n] : net.by_name) n->driver->run_pending(n->progress);
    if (net.in_flight.empty() || stop(net.in_flight.front())) return;
    sent s = std::move(net.in_flight.front());
    net.in_flight.pop_front();
    net.deliver(std::move(s));
  }
  FAIL("no packet to stop at within 1000 deliveries");
}

// Two ticks a lease apart: whatever is breakable on n breaks.
void expire(test_node& n, std::chrono::milliseconds lease) {
  const auto t0 = std::chrono::steady_clock::now();
  n.progress.call([&] {
    n.driver->tick(t0);
    n.driver->tick(t0 + lease);
  });
}

// The end of a transfer that moved nothing: both intervals as take_half_below left them, neither node involved.
void check_nothing_moved(test_node& giver, test_node& taker) {
  CHECK(giver.driver->protocol().current() == migration::interval{0, 100});
  CHECK(taker.driver->protocol().current() == migration::interval{100, 200});
  for (auto* n : {&giver, &taker}) n->progress.call([&] { CHECK_FALSE(n->driver->protocol().involved()); });
}

}  // namespace

// Decision 8: the taker's lease ends while the state is on its way (the giver was slow). The state is assumed
// when it comes all the same, and its done frees the giver's lock: nothing is dropped, nothing assumed twice.
TEST_CASE("migration driver: a state that comes after the taker's lease is assumed late or given back, never dropped") {
  const std::size_t bytes = 6 * migration_driver::chunk_bytes + 10;  // more than one window each way
  for (const bool taker_closes : {false, true}) {
    CAPTURE(taker_closes);
    test_net net;
    std::unique_ptr<test_node> giver, taker;
    std::tie(giver, taker) = take_half_below(net, bytes);
    // Until the giver's state is on its way: the taker has sent give_request, the giver released [50, 100).
    deliver_until(net, [](const sent& s) { return s.what == kind::state_begin; });
    REQUIRE(giver->assumed.size() == 1);
    REQUIRE(giver->assumed[0].hi == 50);
    expire(*taker, net.leases.lease);
    taker->progress.call([&] {
      CHECK_FALSE(taker->driver->protocol().locked());
      CHECK(taker->driver->protocol().last_outcome() == migration::outcome::failed);
      CHECK(taker->driver->protocol().pending() == 1);
      CHECK(taker->driver->protocol().involved());  // a state may still come: finalize waits for it
      if (taker_closes) taker->driver->protocol().close();  // it cannot take it any more: it goes back
    });
    if (taker_closes) {  // the state given back keeps a finalizing taker here until all of it is acknowledged
      deliver_until(net, [](const sent& s) { return s.what == kind::give_back; });
      taker->progress.call([&] {
        CHECK_FALSE(taker->driver->protocol().involved());
        CHECK(taker->driver->streaming());
      });
    }
    net.run([](const sent&) { return false; });
    if (!taker_closes) {
      REQUIRE(taker->unpacked.size() == 1);
      CHECK(taker->unpacked[0] == pattern(bytes, 50));
      CHECK(taker->assumed.size() == 2);
      CHECK(giver->unpacked.empty());
    } else {
      CHECK(taker->unpacked.empty());
      CHECK(taker->assumed.size() == 1);
      REQUIRE(giver->unpacked.size() == 1);
      CHECK(giver->unpacked[0] == pattern(bytes, 50));  // its own state, back
      CHECK(giver->assumed.size() == 2);               // [0, 50) and [50, 100) again
      CHECK(giver->driver->protocol().current() == migration::interval{0, 100});
    }
    for (auto* n : {giver.get(), taker.get()})
      n->progress.call([&] { CHECK_FALSE(n->driver->protocol().involved()); });
  }
}

// A taker that forgot its pending take (its giver had no route for a lease) refuses the state when it comes
// after all, and the giver takes it back from the bytes it kept: the interval is lost by neither.
TEST_CASE("migration driver: a state nobody expects any more is refused, and its giver takes it back") {
  const std::size_t bytes = migration_driver::chunk_bytes + 10;
  test_net net;
  std::unique_ptr<test_node> giver, taker;
  std::tie(giver, taker) = take_half_below(net, bytes);
  deliver_until(net, [](const sent& s) { return s.what == kind::state_begin; });
  expire(*taker, net.leases.lease);
  taker->progress.call([&] {
    REQUIRE(taker->driver->protocol().pending() == 1);
    taker->driver->protocol().forget_pending(giver->driver->protocol().self());
    CHECK_FALSE(taker->driver->protocol().involved());
  });
  net.run([](const sent&) { return false; });
  CHECK(taker->unpacked.empty());
  REQUIRE(giver->unpacked.size() == 1);
  CHECK(giver->unpacked[0] == pattern(bytes, 50));
  // The streams' state came back with it.
  CHECK(giver->streams == std::vector<phoenix::overlay::stream_state>{{giver->driver->protocol().self(), 50, 100}});
  check_nothing_moved(*giver, *taker);
}

// A lock granted to an initiator that then crashed (its give_request never comes) is free after the lease; if
// the initiator was only slow, its give_request is refused and it frees its own lock: nothing moved.
TEST_CASE("migration driver: a lock granted to a partner that stopped answering is free after the lease") {
  test_net net;
  std::unique_ptr<test_node> giver, taker;
  std::tie(giver, taker) = take_half_below(net, 100);
  deliver_until(net, [](const sent& s) { return s.what == kind::give_request; });
  giver->progress.call([&] { REQUIRE(giver->driver->protocol().locked()); });
  expire(*giver, net.leases.lease);
  giver->progress.call([&] {
    CHECK_FALSE(giver->driver->protocol().locked());
    CHECK(giver->driver->protocol().pending() == 1);
  });
  net.run([](const sent&) { return false; });  // the slow initiator's give_request: refused
  CHECK(giver->unpacked.empty());
  CHECK(taker->unpacked.empty());
  CHECK(taker->driver->protocol().last_outcome() == migration::outcome::failed);
  check_nothing_moved(*giver, *taker);
}

// After the release nothing is broken by time: only a taker unreachable for gone_after frees the giver's lock,
// and what was on its way to it is lost with it.
TEST_CASE("migration driver: a giver frees its lock once its taker has been unreachable for gone_after, not before") {
  test_net net;
  std::unique_ptr<test_node> giver, taker;
  std::tie(giver, taker) = take_half_below(net, 100);
  deliver_until(net, [](const sent& s) { return s.what == kind::state_begin; });
  net.in_flight.clear();  // the taker crashed: what was on its way is lost
  const auto t0 = std::chrono::steady_clock::now();
  giver->progress.call([&] {
    giver->driver->tick(t0);
    giver->driver->tick(t0 + 10 * net.leases.lease);  // a lease is no reason to take back what was released
    CHECK(giver->driver->protocol().locked());
  });
  net.unreachable.insert(taker->driver->protocol().self());
  giver->progress.call([&] {
    giver->driver->tick(t0 + 10 * net.leases.lease);
    giver->driver->tick(t0 + 10 * net.leases.lease + net.leases.gone_after / 2);
    CHECK(giver->driver->protocol().locked());  // unreachable, but not for long enough
    giver->driver->tick(t0 + 10 * net.leases.lease + net.leases.gone_after);
    CHECK_FALSE(giver->driver->protocol().locked());
    CHECK_FALSE(giver->driver->protocol().involved());
    CHECK(giver->driver->protocol().current() == migration::interval{0, 50});  // [50, 100) went with the taker
  });
}

// A pending take forgotten (its giver had no route for a lease) while the state was streaming: the stream is
// dropped and refused, and the giver takes the interval back once it hears of it; nobody is left waiting.
TEST_CASE("migration driver: a stream whose pending record is forgotten mid-way is refused, and its giver takes it back") {
  const std::size_t bytes = 6 * migration_driver::chunk_bytes;
  test_net net;
  std::unique_ptr<test_node> giver, taker;
  std::tie(giver, taker) = take_half_below(net, bytes);
  deliver_until(net, [](const sent& s) { return s.what == kind::state_ack; });  // part of the state is here
  const auto g = giver->driver->protocol().self();
  const auto t0 = std::chrono::steady_clock::now();
  net.unreachable.insert(g);
  taker->progress.call([&] {
    taker->driver->tick(t0);
    taker->driver->tick(t0 + net.leases.lease);  // the take's lease: a pending take
    taker->driver->tick(t0 + 2 * net.leases.lease);  // the giver unreachable for a lease: forgotten
    CHECK(taker->driver->protocol().pending() == 0);
    CHECK_FALSE(taker->driver->streaming());
  });
  net.unreachable.clear();
  net.run([](const sent&) { return false; });
  CHECK(taker->unpacked.empty());
  REQUIRE(giver->unpacked.size() == 1);
  CHECK(giver->unpacked[0] == pattern(bytes, 50));
  check_nothing_moved(*giver, *taker);
}

// The giver's pack fails after the taker forgot its pending take: the decline is answered with done all the
// same, so the giver, which took its interval back, does not wait for good.
TEST_CASE("migration driver: a decline that reaches a taker which forgot its take still frees the giver") {
  test_net net;
  std::unique_ptr<test_node> giver, taker;
  std::tie(giver, taker) = take_half_below(net, 100);
  giver->pack_fails = true;
  deliver_until(net, [](const sent& s) { return s.what == kind::state_begin; });  // the decline, on its way
  expire(*taker, net.leases.lease);
  taker->progress.call([&] {
    taker->driver->protocol().forget_pending(giver->driver->protocol().self());
    CHECK_FALSE(taker->driver->protocol().involved());
  });
  net.run([](const sent&) { return false; });
  check_nothing_moved(*giver, *taker);
}

// A chunk whose index would put it past the end of the state (the offset wraps around 2^64) is refused, as
// are duplicates; the real stream still arrives whole and intact.
TEST_CASE("migration driver: a forged chunk index outside the state is refused, and the transfer completes intact") {
  const std::size_t bytes = 2 * migration_driver::chunk_bytes;
  test_net net;
  std::unique_ptr<test_node> giver, taker;
  std::tie(giver, taker) = take_half_below(net, bytes);
  deliver_until(net, [](const sent& s) { return s.what == kind::state_chunk; });  // state_begin taken
  const auto& first = net.in_flight.front();
  auto forged = migration::decode(first.pkt.body);
  REQUIRE(forged);
  net.deliver(first);  // a duplicate of the first real chunk: counted once
  const Bytes junk(migration_driver::chunk_bytes, std::byte{0x41});
  for (const std::uint64_t index : {(1ull << 46) - 1, 2ull, ~0ull}) {
    forged->number = index;
    forged->chunk = junk;
    phoenix::overlay::packet p = first.pkt;
    p.body = migration::encode(*forged);
    net.deliver({first.dest, std::move(p), kind::state_chunk});
  }
  net.run([](const sent&) { return false; });
  REQUIRE(taker->unpacked.size() == 1);
  CHECK(taker->unpacked[0] == pattern(bytes, 50));
}

TEST_CASE("migration driver: a refuse that names no state does not take back a state on its way, so it is assumed once") {
  const std::size_t bytes = 2 * migration_driver::chunk_bytes;
  test_net net;
  std::unique_ptr<test_node> giver, taker;
  std::tie(giver, taker) = take_half_below(net, bytes);
  deliver_until(net, [](const sent& s) { return s.what == kind::state_chunk; });  // state_begin taken
  const auto& chunk = net.in_flight.front();
  const auto real = migration::decode(chunk.pkt.body);
  REQUIRE(real);
  // The lock protocol's refuse (an answer to a give_request) in the taker's name, with the attempt's number.
  migration::message refuse;
  refuse.what = kind::refuse;
  refuse.from = taker->driver->protocol().self();
  refuse.attempt = real->attempt;
  phoenix::overlay::packet p = chunk.pkt;
  p.source = refuse.from;
  p.dest = giver->driver->protocol().self();
  p.body = migration::encode(refuse);
  net.deliver({p.dest, std::move(p), kind::refuse});
  net.run([](const sent&) { return false; });
  REQUIRE(taker->unpacked.size() == 1);
  CHECK(taker->unpacked[0] == pattern(bytes, 50));
  CHECK(giver->unpacked.empty());  // not taken back: the taker assumes it alone
  giver->progress.call([&] { CHECK_FALSE(giver->driver->protocol().locked()); });
}

TEST_CASE("migration driver: each attempt's number is drawn at random, not the one after the last") {
  test_net net;
  std::unique_ptr<test_node> giver, taker;
  std::tie(giver, taker) = take_half_below(net, 100);
  const auto query_number = [&] {
    const auto q = std::find_if(net.in_flight.begin(), net.in_flight.end(),
                                [](const sent& s) { return s.what == kind::query; });
    REQUIRE(q != net.in_flight.end());
    return migration::decode(q->pkt.body)->attempt;
  };
  const std::uint64_t first = query_number();
  net.run([](const sent&) { return false; });
  REQUIRE(taker->progress.call(
      [&] { return taker->driver->begin({migration::plan::action::take_half, migration::side::below}); }));
  const std::uint64_t second = query_number();
  CHECK(first != 0);
  CHECK(second != 0);
  CHECK(second != first + 1);  // a peer that saw one attempt cannot name the next (fails 1 time in 2^63)
  CHECK(second != first);
}
