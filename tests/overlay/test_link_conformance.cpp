// What every overlay link must do, whatever carries it: each case runs over a connected pair of overlays for
// every transport (tests/overlay/link_pair.hpp). A new transport gets the whole suite by one more fixture in
// the type list below.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <span>
#include <string_view>

#include "overlay/link_pair.hpp"
#include "support/log_capture.hpp"

using namespace std::chrono_literals;
namespace overlay = phoenix::overlay;
using phoenix::overlay::packet;
using phoenix::test::local_pair;
using phoenix::test::log_capture;
using phoenix::test::numbered;
using phoenix::test::numbered_mismatch;
using phoenix::test::pair_end;
using phoenix::test::pair_options;
using phoenix::test::ssh_pair;
using phoenix::test::tcp_pair;

TYPE_TO_STRING(local_pair);
TYPE_TO_STRING(tcp_pair);
TYPE_TO_STRING(ssh_pair);

#define LINK_TRANSPORTS local_pair, tcp_pair, ssh_pair

namespace {

// Long enough for several redials (every 50 ms) to be refused or for a duplicate to arrive; only where no event
// can be waited for, since what is checked is that nothing happens.
constexpr auto quiet_period = 250ms;

// `from` sends numbered(dest, 0..count-1), a few per turn of the event loop, until `to` received them all.
template <class Pair>
void stream(Pair& p, pair_end& from, pair_end& to, std::uint64_t dest, std::uint32_t count) {
  std::uint32_t sent = 0;
  REQUIRE(p.run_until(
      [&] {
        for (int k = 0; k < 4 && sent < count; ++k) from.ov->route_in_transit(numbered(dest, sent++));
        return sent == count && to.received.size() >= count;
      },
      30s));
}

}  // namespace

TEST_CASE_TEMPLATE("link conformance: a peer with another cluster key is refused, and no message crosses", Pair,
                   LINK_TRANSPORTS) {
  log_capture log;
  const auto other = std::as_bytes(std::span(std::string_view("another cluster's key, 0123456789abcdef")));
  pair_options o;
  o.key_b.assign(other.begin(), other.end());
  Pair p(o);
  REQUIRE(p.run_until([&] { return !log.find("cluster key mismatch").empty(); }));
  p.a.ov->route_in_transit(numbered(p.vnode_b, 0));
  p.b.ov->route_in_transit(numbered(p.vnode_a, 0));
  p.io.run_for(quiet_period);  // and so are redials, on the transports that redial
  CHECK_FALSE(p.a.has_link("up"));
  CHECK_FALSE(p.b.has_link("up"));
  CHECK_FALSE(p.a.ov->can_reach(p.b.ov->self()));
  CHECK(p.b.received.empty());
  CHECK(p.a.received.empty());
  CHECK(p.a.view().waiting_messages == 1);  // kept by the sender, not lost
  CHECK(p.b.view().waiting_messages == 1);
}

// Both directions stream while the link is cut three times, each cut at a different point of the stream.
TEST_CASE_TEMPLATE("link conformance: messages arrive exactly once and in order across repeated link cuts",
                   Pair, LINK_TRANSPORTS) {
  Pair p;
  REQUIRE(p.link_up());
  constexpr std::uint32_t count = 3000;
  constexpr std::uint64_t cuts = 3;
  std::uint32_t to_b = 0, to_a = 0;
  std::uint64_t cut = 0;
  const auto done = [&] { return p.b.received.size() >= count && p.a.received.size() >= count; };
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    for (int k = 0; k < 4 && to_b < count; ++k) p.a.ov->route_in_transit(numbered(p.vnode_b, to_b++));
    for (int k = 0; k < 4 && to_a < count; ++k) p.b.ov->route_in_transit(numbered(p.vnode_a, to_a++));
    if (cut < cuts && p.b.received.size() >= (cut + 1) * count / (cuts + 1)) {
      p.cut();
      ++cut;
    }
    p.io.run_for(1ms);
  }
  p.io.run_for(quiet_period);  // anything sent twice would arrive now
  CHECK(cut == cuts);
  CHECK(numbered_mismatch(p.b.received, p.vnode_b, count) == "");
  CHECK(numbered_mismatch(p.a.received, p.vnode_a, count) == "");
  CHECK(p.a.view().links_lost >= cuts);  // each cut broke a working connection
  CHECK(p.b.view().links_lost >= cuts);
  CHECK(p.is_up());
}

TEST_CASE_TEMPLATE("link conformance: a 16 MiB body arrives intact", Pair, LINK_TRANSPORTS) {
  Pair p;
  REQUIRE(p.link_up());
  constexpr std::size_t size = 16u << 20;
  p.a.ov->route_in_transit(numbered(p.vnode_b, 0, size));
  p.a.ov->route_in_transit(numbered(p.vnode_b, 1));  // and what follows it, after it
  REQUIRE(p.run_until([&] { return p.b.received.size() >= 2; }, 30s));
  p.io.run_for(50ms);
  REQUIRE(p.b.received.size() == 2);
  const packet expected = numbered(p.vnode_b, 0, size);
  const packet& got = p.b.received.front();
  REQUIRE(got.body.size() == size);
  CHECK(std::memcmp(got.body.data(), expected.body.data(), size) == 0);
  CHECK(p.b.received.back().body.size() == numbered(p.vnode_b, 1).body.size());
  CHECK(p.a.view().links_lost == 0);
}

namespace {
// Packet i to `dest` with a body that never repeats (numbered()'s repeats every 256 bytes, which would hide
// slices of a body written in the wrong order).
packet unrepeated(std::uint64_t dest, std::uint32_t i, std::size_t size) {
  packet p = numbered(dest, i, size);
  std::uint64_t x = 0x9e3779b97f4a7c15ull * (i + 1);
  for (std::size_t k = sizeof i; k < p.body.size(); ++k) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p.body[k] = static_cast<std::byte>(x);
  }
  return p;
}
}  // namespace

// Bodies of 64 KiB and more are written in slices (overlay/links/connection.cpp): sizes on both sides of the
// threshold and of a slice's end, sent both ways at once among small messages, with frames protected and not.
TEST_CASE_TEMPLATE("link conformance: bodies around the sizes where writing switches to slices arrive intact, in order",
                   Pair, LINK_TRANSPORTS) {
  const std::array<std::size_t, 8> sizes{(64u << 10) - 1, 64u << 10, (512u << 10) - 1, 512u << 10,
                                         (512u << 10) + 1, (1u << 20) + 7, (3u << 20) + 12345, 100};
  for (const auto mode : {overlay::protection_mode::integrity, overlay::protection_mode::off}) {
    CAPTURE(overlay::to_string(mode));
    pair_options o;
    o.protection = mode;
    Pair p(o);
    REQUIRE(p.link_up());
    std::uint32_t n = 0;
    for (const std::size_t size : sizes) {
      p.a.ov->route_in_transit(unrepeated(p.vnode_b, n, size));
      p.b.ov->route_in_transit(unrepeated(p.vnode_a, n, size));
      ++n;
      p.a.ov->route_in_transit(numbered(p.vnode_b, n));
      p.b.ov->route_in_transit(numbered(p.vnode_a, n));
      ++n;
    }
    REQUIRE(p.run_until([&] { return p.a.received.size() >= n && p.b.received.size() >= n; }, 30s));
    for (pair_end* end : {&p.a, &p.b}) {
      const std::uint64_t vnode = end == &p.a ? p.vnode_a : p.vnode_b;
      REQUIRE(end->received.size() == n);
      for (std::uint32_t i = 0; i < n; ++i) {
        const packet expected = i % 2 == 0 ? unrepeated(vnode, i, sizes[i / 2]) : numbered(vnode, i);
        const packet& got = end->received[i];
        REQUIRE(got.body.size() == expected.body.size());
        CHECK(std::memcmp(got.body.data(), expected.body.data(), got.body.size()) == 0);
      }
    }
    CHECK(p.a.view().links_lost == 0);
    CHECK(p.b.view().links_lost == 0);
  }
}

// B announces a small window; A (whose own window is the default 8 MiB) is given sixteen windows' worth at
// once. The measure: the most A ever had sent and unacknowledged, sampled after every handler the event loop
// runs.
TEST_CASE_TEMPLATE(
    "link conformance: a sender that outruns the receiver's window is held back at the window, "
    "and nothing is lost",
    Pair, LINK_TRANSPORTS) {
  constexpr std::uint64_t window = 256 * 1024;
  constexpr std::size_t body = 16 * 1024;
  constexpr std::uint32_t count = 256;  // 4 MiB
  const std::uint64_t footprint = packet::footprint_of(body);
  bool ignore_window = false;
  SUBCASE("a sender keeping to the window") {}
  // The control: without the window, the same measure fails (B acknowledges as fast as frames come, so it need
  // not see more than its window beyond an ack, and the link may stay up).
  SUBCASE("a sender ignoring the window (fault injection) exceeds the same measure") { ignore_window = true; }
  pair_options o;
  o.window_b = window;
  o.a_ignores_window = ignore_window;
  Pair p(o);
  REQUIRE(p.link_up());
  for (std::uint32_t i = 0; i < count; ++i) p.a.ov->route_in_transit(numbered(p.vnode_b, i, body));
  std::uint64_t peak_unacked = 0, queued_at_peak = 0;
  const auto sample = [&] {
    for (const auto& l : p.a.view().links) {
      if (l.unacked <= peak_unacked) continue;
      peak_unacked = l.unacked;
      queued_at_peak = l.bytes_queued;
    }
  };
  sample();
  const auto done = [&] {
    return p.b.received.size() >= count || (ignore_window && peak_unacked * footprint > window);
  };
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    p.io.run_one_for(2ms);
    sample();
  }
  INFO("peak unacknowledged: ", peak_unacked, " packets of ", footprint, " bytes, ", queued_at_peak,
       " bytes held then");
  if (ignore_window) {
    CHECK(peak_unacked * footprint > window);
    return;
  }
  CHECK(peak_unacked * footprint <= window);
  CHECK(peak_unacked >= 2);            // the window, not one packet at a time
  CHECK(queued_at_peak > 2 * window);  // A had far more to send, and held it
  p.io.run_for(50ms);
  CHECK(numbered_mismatch(p.b.received, p.vnode_b, count, body) == "");
  CHECK(p.a.view().links_lost == 0);  // B never saw more than its window: it closed nothing
  CHECK(p.b.view().links_lost == 0);
}

// A sends, then leaves at once as a finalizing node does (overlay.hpp, "Leaving"): B must get everything A
// sent, then hear the goodbye and forget A.
TEST_CASE_TEMPLATE(
    "link conformance: a peer that says goodbye is seen to leave, and what it sent was delivered", Pair,
    LINK_TRANSPORTS) {
  Pair p;
  REQUIRE(p.link_up());
  constexpr std::uint32_t count = 500;
  for (std::uint32_t i = 0; i < count; ++i) p.a.ov->route_in_transit(numbered(p.vnode_b, i));
  auto& a = *p.a.ov;
  a.begin_shutdown();
  REQUIRE(p.run_until([&] { return a.is_drained(); }));
  a.say_goodbye();
  REQUIRE(p.run_until([&] { return a.is_farewelled(10s); }));
  a.stop_linking();
  REQUIRE(p.run_until([&] { return a.is_quiet(); }));
  CHECK(a.drop_links() == 1);                                      // A closes
  REQUIRE(p.run_until([&] { return p.b.view().links.empty(); }));  // B forgot A, not a link down to come back
  CHECK_FALSE(p.b.ov->can_reach(a.self()));
  CHECK_FALSE(p.b.ov->owner_of(p.vnode_a).has_value());
  CHECK(numbered_mismatch(p.b.received, p.vnode_b, count) == "");
  CHECK(a.view().waiting_messages == 0);
}

// A tamper_proxy flips one bit of a data frame's body on its way to B: B rejects the frame by its tag and
// closes that connection; A comes back on a new one and resends what B did not acknowledge.
TEST_CASE_TEMPLATE(
    "link conformance: a frame altered on the path closes only its connection, and the link "
    "comes back with nothing lost or duplicated",
    Pair, LINK_TRANSPORTS) {
  if constexpr (!Pair::can_tamper) {
    // Nothing stands between the two ends of a socket pair; writing into one end would interleave with the
    // sender's frames instead of altering one. The frame check is the same code for every stream.
    MESSAGE("no path to tamper with on this transport: covered by the others");
  } else {
    pair_options o;
    o.tamper = true;
    Pair p(o);
    REQUIRE(p.link_up());
    constexpr std::uint32_t count = 300;
    stream(p, p.a, p.b, p.vnode_b, count);
    p.io.run_for(quiet_period);  // anything sent twice would arrive now
    REQUIRE(p.proxy());
    CHECK(p.proxy()->attacked());
    CHECK(p.proxy()->connections() >= 2);    // the altered connection was closed, and A came back
    CHECK(p.b.view().frames_rejected == 1);  // by the frame's tag, not by chance
    CHECK(numbered_mismatch(p.b.received, p.vnode_b, count) == "");
    CHECK(p.is_up());
  }
}
