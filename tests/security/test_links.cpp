// Attacks on links between real overlays over TCP on 127.0.0.1 (docs/security.md, "Links"): a relay
// without the key, frames forged, replayed, reordered or taken from another connection, a key holder claiming
// a neighbour's resource name, and a node without a key on a non-loopback address.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include <thread>

#include "overlay/links/cluster_key.hpp"
#include "overlay/links/handshake.hpp"
#include "overlay/overlay.hpp"
#include "security/tamper_proxy.hpp"

using namespace phoenix::overlay;
namespace base = phoenix::base;
using namespace std::chrono_literals;
using phoenix::test::splicing_relay;
using phoenix::test::tamper_proxy;

namespace {

constexpr std::uint64_t L = 1000;
constexpr std::uint64_t vnode = 5;  // assumed by y

std::vector<std::byte> test_key() {
  const std::string_view text = "security test cluster key 0123456789abcdef";
  const auto b = std::as_bytes(std::span(text));
  return {b.begin(), b.end()};
}

struct node {
  std::deque<packet> received;
  std::unique_ptr<overlay> ov;
  std::string endpoint;
};

// Overlays over TCP on 127.0.0.1, in one io_context driven by the test thread.
struct tcp_net {
  asio::io_context io;
  std::vector<std::unique_ptr<node>> nodes;

  node& add(const std::string& name, node_id self, protection_mode mode = protection_mode::integrity) {
    auto n = std::make_unique<node>();
    overlay_config c;
    c.name = name;
    c.space_size = L;
    c.cluster_key = test_key();
    c.link_protection = mode;
    c.retry_interval = 100ms;
    auto* raw = n.get();
    n->ov = std::make_unique<overlay>(io, c, self, [raw](packet&& p) { raw->received.push_back(std::move(p)); });
    REQUIRE_FALSE(n->ov->listen("tcp://127.0.0.1:0", n->endpoint));
    nodes.push_back(std::move(n));
    return *nodes.back();
  }

  bool run_until(const std::function<bool()>& cond, std::chrono::milliseconds limit = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!cond() && std::chrono::steady_clock::now() < deadline) io.run_for(2ms);
    return cond();
  }
};

std::uint16_t port_of(const std::string& endpoint) {
  return static_cast<std::uint16_t>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
}

packet numbered(std::uint32_t i, std::size_t body_bytes = 64) {
  packet p;
  p.dest = vnode;
  p.source = 1;
  p.tag = 7;
  p.hops_left = 64;
  p.body.resize(body_bytes);
  for (std::size_t k = 0; k < p.body.size(); ++k) p.body[k] = static_cast<std::byte>((i * 31 + k) & 0xFF);
  std::memcpy(p.body.data(), &i, sizeof i);
  return p;
}

// Every numbered packet arrived once, in order, with the body it was sent with.
void check_delivered_intact(const std::deque<packet>& inbox, std::uint32_t count, std::size_t body_bytes = 64) {
  std::string order;
  for (const auto& p : inbox) {
    std::uint32_t i = 0;
    std::memcpy(&i, p.body.data(), sizeof i);
    order += std::to_string(i) + " ";
  }
  INFO("arrival order: ", order);
  REQUIRE(inbox.size() == count);
  for (std::uint32_t i = 0; i < count; ++i) {
    CAPTURE(i);
    const packet expected = numbered(i, body_bytes);
    REQUIRE(inbox[i].body.size() == expected.body.size());
    CHECK(std::memcmp(inbox[i].body.data(), expected.body.data(), expected.body.size()) == 0);
  }
}

// x sends `count` packets to y's virtual node, a few per turn of the event loop, so that the link carries many
// frames while the attack runs.
void stream(tcp_net& net, node& x, node& y, std::uint32_t count, std::size_t body_bytes = 64) {
  std::uint32_t sent = 0;
  REQUIRE(net.run_until([&] {
    for (int k = 0; k < 4 && sent < count; ++k) x.ov->route_in_transit(numbered(sent++, body_bytes));
    return sent == count && y.received.size() >= count;
  }, 30s));
  net.io.run_for(50ms);  // anything extra (a duplicate) would arrive now
}

void link_up(tcp_net& net, node& x, node& y) {
  REQUIRE(y.ov->assume({vnode, vnode + 1}) == base::interval_set::result::ok);
  REQUIRE(net.run_until([&] { return x.ov->owner_of(vnode) == y.ov->self(); }));
}

}  // namespace

TEST_CASE("security: a frame altered, replayed, reordered or taken from another connection closes only its "
          "connection, and every message arrives once, intact and in order") {
  auto attack = tamper_proxy::attack::flip_body_byte;
  SUBCASE("a bit of a data frame's body flipped on the path") { attack = tamper_proxy::attack::flip_body_byte; }
  SUBCASE("a data frame replayed") { attack = tamper_proxy::attack::replay; }
  SUBCASE("two data frames swapped") { attack = tamper_proxy::attack::reorder; }
  SUBCASE("a frame from an earlier connection of the same two nodes") { attack = tamper_proxy::attack::foreign; }
  std::size_t body_bytes = 64;
  SUBCASE("a bit of a large body, read in place and checked as it arrives, flipped on the path") {
    attack = tamper_proxy::attack::flip_body_byte;
    body_bytes = 300 * 1024;
  }
  tcp_net net;
  node& x = net.add("x", L + 1);
  node& y = net.add("y", L + 2);
  tamper_proxy proxy(port_of(y.endpoint), attack);
  REQUIRE_FALSE(x.ov->add_port("tcp://127.0.0.1:" + std::to_string(proxy.port())));
  link_up(net, x, y);
  const std::uint32_t count = body_bytes > 64 ? 40 : 300;
  stream(net, x, y, count, body_bytes);
  CHECK(proxy.attacked());
  CHECK(proxy.connections() >= 2);         // the tampered connection was closed, and x came back
  CHECK(y.ov->view().frames_rejected == 1);  // by the frame's tag, not by chance
  check_delivered_intact(y.received, count, body_bytes);
}

TEST_CASE("security: a relay without the key that splices connections to two nodes is refused, and their "
          "link stays up with nothing lost") {
  tcp_net net;
  node& x = net.add("x", L + 1);
  node& y = net.add("y", L + 2);
  REQUIRE_FALSE(x.ov->add_port(y.endpoint));
  link_up(net, x, y);
  const auto lost_before = x.ov->view().links_lost + y.ov->view().links_lost;
  std::uint32_t sent = 0;
  auto send_some = [&] {
    for (int k = 0; k < 2 && sent < 400; ++k) x.ov->route_in_transit(numbered(sent++));
  };
  {
    splicing_relay relay(port_of(x.endpoint), port_of(y.endpoint));
    REQUIRE(net.run_until([&] {
      send_some();
      return relay.done();
    }));
    // Each node sent its HELLO and then refused: neither sent an AUTH the relay could pass on.
    CHECK(relay.from_x() == std::vector<std::uint8_t>{1, 3});
    CHECK(relay.from_y() == std::vector<std::uint8_t>{1, 3});
  }
  REQUIRE(net.run_until([&] {
    send_some();
    return sent == 400 && y.received.size() >= 400;
  }));
  net.io.run_for(50ms);
  CHECK(x.ov->view().links_lost + y.ov->view().links_lost == lost_before);
  check_delivered_intact(y.received, 400);
}

TEST_CASE("security: a key holder claiming a neighbour's resource name does not displace the working link") {
  tcp_net net;
  node& x = net.add("x", L + 1);
  node& y = net.add("y", L + 2);
  REQUIRE_FALSE(y.ov->add_port(x.endpoint));  // y dials: a second connection dialled as "y" would replace it
  link_up(net, x, y);
  node& impostor = net.add("impostor", y.ov->self());
  REQUIRE_FALSE(impostor.ov->add_port(x.endpoint));
  std::uint32_t sent = 0;
  REQUIRE(net.run_until([&] {
    for (int k = 0; k < 2 && sent < 300; ++k) x.ov->route_in_transit(numbered(sent++));
    return sent == 300 && y.received.size() >= 300;
  }));
  net.io.run_for(300ms);  // the impostor redials every 100 ms
  CHECK(impostor.received.empty());
  CHECK(x.ov->view().links_lost == 0);
  CHECK(y.ov->view().links_lost == 0);
  check_delivered_intact(y.received, 300);
}

// While y's link is down, x keeps what y did not acknowledge, to resend it. A key holder that connects as y and
// claims in its AUTH to have received far more than x ever sent must not make x free those packets.
TEST_CASE("security: a connection that claims to have received more than was sent is closed, and nothing is "
          "freed") {
  tcp_net net;
  node& x = net.add("x", L + 1);
  node& y = net.add("y", L + 2);
  tamper_proxy proxy(port_of(y.endpoint), tamper_proxy::attack::none);
  REQUIRE_FALSE(x.ov->add_port("tcp://127.0.0.1:" + std::to_string(proxy.port())));
  link_up(net, x, y);
  proxy.swallow(true);  // x writes ten packets that never reach y
  for (std::uint32_t i = 0; i < 10; ++i) x.ov->route_in_transit(numbered(i));
  REQUIRE(net.run_until([&] {
    const auto v = x.ov->view();
    return !v.links.empty() && v.links.front().unacked == 10;
  }));
  REQUIRE(x.ov->drop_link(y.ov->self()));

  std::atomic<bool> refused{false};  // written by the impostor thread
  std::thread impostor([&] {
    const int fd = phoenix::test::loopback_connect(port_of(x.endpoint));
    if (fd < 0) return;
    handshake hs(test_key(), L, y.ov->self(), "y", link_role::dialler, protection_mode::integrity);
    const auto hello = make_control_frame(frame_type::hello, hs.hello_payload());
    phoenix::test::send_all(fd, hello.data(), hello.size());
    phoenix::test::frame_splitter in;
    const auto theirs = phoenix::test::read_frame(fd, in, 5s);
    if (theirs && !hs.on_hello(std::span(*theirs).subspan(frame_header_bytes))) {
      const auto auth = make_control_frame(frame_type::auth, hs.auth_payload(1000));  // x sent 10
      phoenix::test::send_all(fd, auth.data(), auth.size());
      while (phoenix::test::read_frame(fd, in, 2s)) {}  // x's AUTH, until x closes the connection
      refused = true;
    }
    ::close(fd);
  });
  net.run_until([&] { return refused.load(); });
  impostor.join();
  REQUIRE(refused.load());
  // The ten packets are still x's to deliver: through the proxy again, y gets every one.
  proxy.swallow(false);
  REQUIRE(net.run_until([&] { return y.received.size() >= 10; }));
  net.io.run_for(50ms);
  check_delivered_intact(y.received, 10);
}

TEST_CASE("security: a link is protected unless both ends turn protection off") {
  struct want {
    protection_mode x, y;
    bool tagged;
  };
  for (const auto& w : {want{protection_mode::off, protection_mode::off, false},
                        want{protection_mode::off, protection_mode::integrity, true},
                        want{protection_mode::integrity, protection_mode::integrity, true}}) {
    tcp_net net;
    node& x = net.add("x", L + 1, w.x);
    node& y = net.add("y", L + 2, w.y);
    tamper_proxy proxy(port_of(y.endpoint), tamper_proxy::attack::flip_body_byte);
    REQUIRE_FALSE(x.ov->add_port("tcp://127.0.0.1:" + std::to_string(proxy.port())));
    link_up(net, x, y);
    stream(net, x, y, 20);
    REQUIRE(proxy.attacked());
    // Unprotected, the flipped bit reaches the application: that is what "off" costs.
    CHECK(y.ov->view().frames_rejected == (w.tagged ? 1u : 0u));
    const packet fifth = numbered(4);
    const bool altered = std::memcmp(y.received.at(4).body.data(), fifth.body.data(), fifth.body.size()) != 0;
    CHECK(altered == !w.tagged);
  }
}

TEST_CASE("security: without a cluster key a node links on loopback only, and says how to make a key") {
  asio::io_context io;
  overlay_config c;
  c.name = "keyless";
  c.space_size = L;
  c.cluster_key = development_key();
  c.loopback_only = true;
  overlay ov(io, c, L + 1, [](packet&&) {});
  std::string bound, error;
  CHECK(ov.listen("tcp://0.0.0.0:0", bound, &error) == std::errc::permission_denied);
  CHECK(error.find("head -c 32 /dev/urandom") != std::string::npos);
  error.clear();
  // Refused before any packet is sent: nothing leaves for 192.0.2.1 (TEST-NET-1).
  CHECK(ov.add_port("tcp://192.0.2.1:9", &error) == std::errc::permission_denied);
  CHECK(error.find("cluster_key_file") != std::string::npos);
  CHECK(ov.add_port("ssh://gateway.example/127.0.0.1:9", &error) == std::errc::permission_denied);
  CHECK_FALSE(ov.listen("tcp://127.0.0.1:0", bound, &error));
  CHECK_FALSE(ov.add_port("tcp://localhost:9", &error));
  CHECK_FALSE(ov.add_port("tcp://[::1]:9", &error));
}
