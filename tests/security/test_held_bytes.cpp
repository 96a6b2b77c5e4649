// What a key holder can make a node hold after the handshake (docs/security.md, "Resources"): packets for a
// destination nobody routes to, and messages with a tag nothing can receive.
#include <doctest/doctest.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include <phoenix/node.hpp>

#include "overlay/links/cluster_key.hpp"
#include "overlay/overlay.hpp"
#include "phoenix/service_messages.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

using namespace std::chrono_literals;
namespace ov = phoenix::overlay;
namespace base = phoenix::base;

namespace {

constexpr std::uint64_t space = 1000;
constexpr std::uint64_t unclaimed = 500;  // a virtual node nobody assumes until the test says so
constexpr std::size_t body_bytes = 64 * 1024;

struct member {
  std::deque<ov::packet> received;
  std::unique_ptr<ov::overlay> ov;
  std::string endpoint;
};

struct tcp_line {
  asio::io_context io;
  std::vector<std::unique_ptr<member>> members;

  member& add(const std::string& name, ov::node_id self, bool ignores_windows = false) {
    auto m = std::make_unique<member>();
    ov::overlay_config c;
    c.name = name;
    c.space_size = space;
    c.cluster_key = ov::development_key();
    c.link_window_bytes = ignores_windows ? 1ull << 30 : 1 << 20;
    c.fault_ignore_peer_window = ignores_windows;
    c.max_waiting_per_neighbour_bytes = 2 << 20;
    auto* raw = m.get();
    m->ov = std::make_unique<ov::overlay>(io, c, self, [raw](ov::packet&& p) { raw->received.push_back(std::move(p)); });
    REQUIRE_FALSE(m->ov->listen("tcp://127.0.0.1:0", m->endpoint));
    members.push_back(std::move(m));
    return *members.back();
  }
  bool run_until(const std::function<bool()>& cond, std::chrono::milliseconds limit = 20s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!cond() && std::chrono::steady_clock::now() < deadline) io.run_for(2ms);
    return cond();
  }
};

ov::packet numbered(std::uint32_t i) {
  ov::packet p;
  p.dest = unclaimed;
  p.source = 1;
  p.tag = 1;
  p.hops_left = 64;
  p.body.resize(body_bytes);
  std::memset(p.body.data(), static_cast<int>(i & 0xFF), p.body.size());
  std::memcpy(p.body.data(), &i, sizeof i);
  return p;
}

const ov::link_view* link_to(const ov::overlay_view& v, ov::node_id peer) {
  for (const auto& l : v.links)
    if (l.peer == peer) return &l;
  return nullptr;
}

}  // namespace

TEST_CASE("resources: a key holder's flood for a destination nobody routes to waits at the sender, not here, and "
          "all of it arrives once someone assumes the destination") {
  tcp_line net;
  member& attacker = net.add("attacker", space + 1);
  member& victim = net.add("victim", space + 2);
  member& owner = net.add("owner", space + 3);
  REQUIRE_FALSE(attacker.ov->add_port(victim.endpoint));
  REQUIRE_FALSE(owner.ov->add_port(victim.endpoint));
  REQUIRE(net.run_until([&] {
    return attacker.ov->can_reach(victim.ov->self()) && owner.ov->can_reach(victim.ov->self()) &&
           victim.ov->can_reach(owner.ov->self());
  }));

  // 25 MiB for a virtual node nobody assumes, pushed at the victim whatever the routes say.
  constexpr std::uint32_t count = 400;
  for (std::uint32_t i = 0; i < count; ++i) attacker.ov->send_forged(victim.ov->self(), numbered(i));
  net.run_until([] { return false; }, 1500ms);
  const auto v = victim.ov->view();
  const std::uint64_t bound = (2u << 20) + (1u << 20) + 2 * ov::packet::footprint_of(body_bytes);  // + a window
  MESSAGE("waiting at the victim: " << v.waiting_bytes << " bytes in " << v.waiting_messages << " messages");
  CHECK(v.waiting_bytes <= bound);
  REQUIRE(link_to(v, attacker.ov->self()));
  CHECK(link_to(v, attacker.ov->self())->acks_held);
  const auto a = attacker.ov->view();
  REQUIRE(link_to(a, victim.ov->self()));
  CHECK(link_to(a, victim.ov->self())->bytes_queued >= (count * body_bytes) - bound);  // the rest waits there

  // Nothing was dropped: once the owner assumes the destination, everything arrives, once and in order.
  REQUIRE(owner.ov->assume({unclaimed, unclaimed + 1}) == base::interval_set::result::ok);
  REQUIRE(net.run_until([&] { return owner.received.size() >= count; }, 30s));
  net.io.run_for(50ms);
  REQUIRE(owner.received.size() == count);
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint32_t got = 0;
    std::memcpy(&got, owner.received[i].body.data(), sizeof got);
    CHECK(got == i);
  }
  CHECK_FALSE(link_to(victim.ov->view(), attacker.ov->self())->acks_held);
}

TEST_CASE("resources: a key holder that sends beyond the window its neighbour announced loses the connection, "
          "and what it made the neighbour hold stays bounded") {
  tcp_line net;
  member& attacker = net.add("attacker", space + 1, true);  // a 1 GiB window of its own, and the peer's ignored
  member& victim = net.add("victim", space + 2);
  REQUIRE_FALSE(attacker.ov->add_port(victim.endpoint));
  REQUIRE(net.run_until([&] { return attacker.ov->can_reach(victim.ov->self()); }));
  constexpr std::uint32_t count = 400;  // 25 MiB
  for (std::uint32_t i = 0; i < count; ++i) attacker.ov->send_forged(victim.ov->self(), numbered(i));
  std::uint64_t most_waiting = 0;
  net.run_until([&] {
    most_waiting = std::max(most_waiting, victim.ov->view().waiting_bytes);
    return false;
  }, 1500ms);
  // Past the 2 MiB bound its acks stop; past the 1 MiB window beyond the last ack, its connection closes.
  const std::uint64_t bound = (2u << 20) + (1u << 20) + 2 * ov::packet::footprint_of(body_bytes);
  MESSAGE("most waiting at the victim: " << most_waiting << " bytes; links lost " << victim.ov->view().links_lost);
  CHECK(most_waiting <= bound);
  CHECK(victim.ov->view().links_lost >= 1);
}

TEST_CASE("resources: a packet refused for the window stays with its sender, and arrives once the "
          "destination has an owner") {
  tcp_line net;
  member& sender = net.add("sender", space + 1, true);
  member& victim = net.add("victim", space + 2);
  member& owner = net.add("owner", space + 3);
  REQUIRE_FALSE(sender.ov->add_port(victim.endpoint));
  REQUIRE_FALSE(owner.ov->add_port(victim.endpoint));
  REQUIRE(net.run_until([&] {
    return sender.ov->can_reach(victim.ov->self()) && victim.ov->can_reach(owner.ov->self());
  }));
  constexpr std::uint32_t count = 100;
  for (std::uint32_t i = 0; i < count; ++i) sender.ov->send_forged(victim.ov->self(), numbered(i));
  net.run_until([] { return false; }, 1000ms);
  CHECK(victim.ov->view().links_lost >= 1);  // closed for the window at least once
  REQUIRE(owner.ov->assume({unclaimed, unclaimed + 1}) == base::interval_set::result::ok);
  REQUIRE(net.run_until([&] { return owner.received.size() >= count; }, 30s));
  net.io.run_for(100ms);
  REQUIRE(owner.received.size() == count);
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint32_t got = 0;
    std::memcpy(&got, owner.received[i].body.data(), sizeof got);
    CHECK(got == i);
  }
}

TEST_CASE("resources: messages with a tag nothing can receive are dropped and counted, not held") {
  phoenix::test::temp_dir dir;
  const std::string key = dir.make_key();
  phoenix::Node sender(phoenix::test::node_config("sender", key, space));
  auto config = phoenix::test::node_config("receiver", key, space);
  config.assume = {{0, space}};
  phoenix::Node receiver(config);
  REQUIRE_FALSE(receiver.initialize("tcp://127.0.0.1:0"));
  REQUIRE_FALSE(sender.initialize("tcp://127.0.0.1:0"));
  REQUIRE_FALSE(sender.add_port(receiver.local_port()));

  // A key holder running phoenix sends what no application or service can receive: tag INT_MIN, and the one
  // below the services'.
  constexpr int count = 50;
  for (int i = 0; i < count; ++i) {
    phoenix::Bytes body(body_bytes);
    REQUIRE(phoenix::test::wait_for([&] {
      phoenix::Bytes b = body;
      const std::int32_t tag = i % 2 ? INT_MIN : phoenix::last_service_tag - 1;
      return !phoenix::service_messages::send(sender, 5, tag, std::move(b));
    }));
  }
  REQUIRE_FALSE(sender.send(5, 1, std::as_bytes(std::span("after", 5))));
  const auto m = receiver.recv_for(1, 10s);  // arrives after all of them: the link keeps order
  REQUIRE(m);
  const auto after = receiver.control(receiver.resource_name(), "status", 5s);
  REQUIRE(after);
  CHECK(after->text.find("\nqueued=0\n") != std::string::npos);
  CHECK(after->text.find("\ndropped=" + std::to_string(count) + "\n") != std::string::npos);
}
