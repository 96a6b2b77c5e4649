// phoenix::Node end to end, several nodes in one process over loopback TCP.
#include <doctest/doctest.h>

#include <asio.hpp>
#include <spdlog/sinks/ringbuffer_sink.h>

#include <map>
#include <optional>
#include <thread>

#include <phoenix/config.hpp>
#include <phoenix/node.hpp>

#include "overlay/transports/address.hpp"
#include "overlay/links/frame.hpp"
#include "overlay/log.hpp"
#include "phoenix/message_log.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

using namespace std::chrono_literals;
using phoenix::Interval;
using phoenix::Node;

namespace {

using phoenix::test::L;

phoenix::Config base_config(const std::string& name, const std::string& key) {
  return phoenix::test::node_config(name, key, L);
}

using phoenix::test::payload_of;
using phoenix::test::wait_for;

// Sends text to v and asserts it arrives at `at`, within a deadline.
void expect_delivery(Node& from, Node& at, std::uint64_t v, const std::string& text) {
  REQUIRE_FALSE(from.send(v, 1, text.data(), text.size()));
  auto m = at.recv_for(1, 5s);
  REQUIRE(m);
  CHECK(payload_of(*m) == text);
  CHECK(m->dest() == v);
  CHECK(m->source() == from.resource_name());
}

struct log_capture {
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256);
  log_capture() { phoenix::overlay::logger()->sinks().push_back(sink); }
  ~log_capture() {
    auto& sinks = phoenix::overlay::logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  }
  bool contains(const std::string& text) const {
    for (const auto& line : sink->last_formatted())
      if (line.find(text) != std::string::npos) return true;
    return false;
  }
};

// Two nodes with one cluster key, b linked to a.
struct two_nodes {
  phoenix::test::temp_dir dir;
  std::string key = dir.make_key();
  Node a{base_config("a", key)};
  Node b{base_config("b", key)};
  two_nodes() {
    REQUIRE_FALSE(a.initialize("tcp://127.0.0.1:0"));
    REQUIRE_FALSE(b.initialize("tcp://127.0.0.1:0"));
    REQUIRE_FALSE(b.add_port(a.local_port()));
  }
};


// n messages "0" .. "n-1" from `from` to the virtual nodes [500, 1000) in turn (tag 2), one every `gap`: a
// steady stream, before, during and after whatever the test does meanwhile.
std::thread stream_numbers(Node& from, int n, std::chrono::microseconds gap) {
  return std::thread([&from, n, gap] {
    for (int i = 0; i < n; ++i) {
      const std::string text = std::to_string(i);
      while (from.send(500 + static_cast<std::uint64_t>(i % 500), 2, text.data(), text.size()).value() ==
             PH_EAGAIN)
        std::this_thread::sleep_for(1ms);
      std::this_thread::sleep_for(gap);
    }
  });
}

// Receives the n messages of stream_numbers at `at`: each exactly once, and nothing more.
void expect_numbers_once(Node& at, int n) {
  std::vector<int> seen(static_cast<std::size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    auto m = at.recv_for(2, 10s);
    REQUIRE(m);
    ++seen[static_cast<std::size_t>(std::stoi(payload_of(*m)))];
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
  CHECK_FALSE(at.recv_for(2, 200ms));
}

// Finalizes `node` to the log `log` 50 ms into a stream_numbers stream of n from `from`, and returns what the
// log holds once the stream has ended.
std::vector<phoenix::overlay::packet> finalize_amid_stream(Node& node, const std::string& log, Node& from, int n,
                                                           std::chrono::microseconds gap) {
  std::thread sender = stream_numbers(from, n, gap);
  std::this_thread::sleep_for(50ms);
  CHECK_FALSE(node.finalize(log.c_str()));
  sender.join();
  std::vector<phoenix::overlay::packet> logged;
  CHECK(phoenix::read_message_log(log, logged).empty());
  return logged;
}
}  // namespace

TEST_CASE("node: two nodes exchange messages through their virtual nodes, in order, exactly once") {
  two_nodes t;
  Node& a = t.a;
  Node& b = t.b;
  CHECK(a.resource_name() >= L);
  CHECK(b.resource_name() >= L);
  CHECK(a.resource_name() != b.resource_name());
  REQUIRE_FALSE(a.assume({0, 500}));
  REQUIRE_FALSE(b.assume({500, 1000}));

  expect_delivery(a, b, 777, "hello b");
  expect_delivery(b, a, 3, "hello a");
  expect_delivery(a, a, 10, "to myself");

  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    const std::string s = std::to_string(i);
    REQUIRE_FALSE(a.send(500 + static_cast<std::uint64_t>(i % 500), 2, s.data(), s.size()));
  }
  std::map<std::uint64_t, int> last;  // per virtual node: the last number seen, to check send order
  for (int i = 0; i < n; ++i) {
    auto m = b.recv_for(2, 5s);
    REQUIRE(m);
    const int k = std::stoi(payload_of(*m));
    CHECK(m->dest() == 500 + static_cast<std::uint64_t>(k % 500));
    auto [it, fresh] = last.emplace(m->dest(), k);
    if (!fresh) {
      CHECK(k > it->second);
      it->second = k;
    }
  }
  CHECK_FALSE(b.try_recv(2));
}

TEST_CASE("node: an application that only polls with try_recv between pieces of work still gets its messages") {
  // A thread that enters the API more often than the background thread's linger time keeps that thread away;
  // try_recv must then drive the links itself (here: b's handshake with a, then the message).
  two_nodes t;
  REQUIRE_FALSE(t.a.assume({0, 500}));
  REQUIRE_FALSE(t.b.assume({500, 1000}));
  REQUIRE_FALSE(t.a.send(600, 4, "polled", 6));
  std::optional<phoenix::Message> got;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!got && std::chrono::steady_clock::now() < deadline) {
    got = t.b.try_recv(4);
    const auto work_end = std::chrono::steady_clock::now() + 100us;  // computing, shorter than the linger time
    while (std::chrono::steady_clock::now() < work_end) {
    }
  }
  REQUIRE(got);
  CHECK(payload_of(*got) == "polled");
}

// One thread ping-pongs (its waits spin, reading the link directly); another waits meanwhile without spinning,
// for a message over the same link that comes only after the ping-pong ended. The spinning thread lets the
// waiting one in and out of the token on every round, and leaves the link read directly when it is done: the
// waiting thread must give it back to the event loop before it blocks again, or it never sees its message.
TEST_CASE("node: a thread blocked in recv gets a message over a link that another thread read directly") {
  two_nodes t;
  Node& a = t.a;
  Node& b = t.b;
  REQUIRE_FALSE(a.assume({0, 1}));
  REQUIRE_FALSE(b.assume({1, 2}));
  expect_delivery(a, b, 1, "route b");
  expect_delivery(b, a, 0, "route a");

  constexpr int rounds = 200;
  std::thread echo([&b] {
    for (int i = 0; i < rounds; ++i) {
      auto m = b.recv_for(1, 5s);
      if (!m) return;
      const std::string text = payload_of(*m);
      if (b.send(0, 1, text.data(), text.size())) return;
    }
  });
  std::optional<phoenix::Message> late;
  std::thread waiter([&a, &late] { late = a.recv_for(3, 10s); });
  std::this_thread::sleep_for(50ms);  // the waiter is past its spin and blocks in the event loop

  int answered = 0;
  for (int i = 0; i < rounds; ++i) {
    const std::string text = std::to_string(i);
    REQUIRE_FALSE(a.send(1, 1, text.data(), text.size()));
    const auto m = a.recv_for(1, 5s);
    if (m && payload_of(*m) == text) ++answered;
  }
  echo.join();
  CHECK(answered == rounds);

  const std::string text = "after the ping-pong";
  REQUIRE_FALSE(b.send(0, 3, text.data(), text.size()));
  waiter.join();
  REQUIRE(late);
  CHECK(payload_of(*late) == text);
}

TEST_CASE("node: send(Bytes&&) hands the buffer over without a copy, refused, it leaves the buffer alone") {
  two_nodes t;
  REQUIRE_FALSE(t.a.assume({0, 500}));
  REQUIRE_FALSE(t.b.assume({500, 1000}));
  phoenix::Bytes body(3 << 20);
  for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<std::byte>(i * 7);
  const phoenix::Bytes expected = body;

  // A tag below zero is refused: the caller still holds every byte.
  CHECK(t.a.send(600, -1, std::move(body)).value() == PH_EINVAL);
  REQUIRE(body == expected);

  // Sent to itself the very buffer comes back: no copy on the way.
  const std::byte* where = body.data();
  REQUIRE_FALSE(t.a.send(7, 3, std::move(body)));
  auto self = t.a.recv_for(3, 5s);
  REQUIRE(self);
  CHECK(self->data() == where);

  // Echoed through b by take_body(), it arrives intact.
  REQUIRE_FALSE(t.a.send(600, 4, std::move(*self).take_body()));
  auto at_b = t.b.recv_for(4, 5s);
  REQUIRE(at_b);
  REQUIRE_FALSE(t.b.send(8, 5, std::move(*at_b).take_body()));
  auto back = t.a.recv_for(5, 5s);
  REQUIRE(back);
  CHECK(back->size() == expected.size());
  CHECK(std::equal(back->data(), back->data() + back->size(), expected.begin()));
}

TEST_CASE("node: a message to a virtual node nobody assumes waits until someone does") {
  two_nodes t;
  Node& a = t.a;
  Node& b = t.b;
  REQUIRE_FALSE(a.send(42, 1, "early", 5));
  REQUIRE_FALSE(a.recv_for(1, 200ms));
  CHECK(wait_for([&] { return a.routing_snapshot().waiting_messages == 1; }));
  REQUIRE_FALSE(b.assume({40, 50}));
  auto m = b.recv_for(1, 5s);
  REQUIRE(m);
  CHECK(payload_of(*m) == "early");
}

TEST_CASE("node: ph_release sends messages queued locally on to the next owner") {
  two_nodes t;
  Node& a = t.a;
  Node& b = t.b;
  REQUIRE_FALSE(a.assume({0, 100}));
  for (int i = 0; i < 10; ++i) REQUIRE_FALSE(b.send(static_cast<std::uint64_t>(i), 5, &i, sizeof i));
  // Let all ten arrive in a's inbox without receiving them: b may hold them a while for lack of a route to a,
  // and an empty link says nothing then. a's own status counts what its inbox holds.
  auto queued_at_a = [&] {
    const auto reply = a.control(a.resource_name(), "status", 2s);
    if (!reply || !reply->ok) return -1;
    const auto at = reply->text.find("\nqueued=");
    return at == std::string::npos ? -1 : std::stoi(reply->text.substr(at + 8));
  };
  const bool all_at_a = wait_for([&] { return queued_at_a() == 10; });
  INFO(phoenix::describe(b.routing_snapshot()));
  INFO(phoenix::describe(a.routing_snapshot()));
  REQUIRE(all_at_a);
  REQUIRE(b.routing_snapshot().waiting_messages == 0);  // none is still at b: b delivers only what a passes on
  REQUIRE_FALSE(a.release({0, 100}));
  REQUIRE_FALSE(b.assume({0, 100}));
  for (int i = 0; i < 10; ++i) {
    auto m = b.recv_for(5, 5s);
    REQUIRE(m);
    int k = -1;
    std::memcpy(&k, m->data(), sizeof k);
    CHECK(k == i);
  }
  CHECK_FALSE(a.try_recv(5));
}

TEST_CASE("node: finalize logs undelivered messages and a new incarnation delivers them") {
  phoenix::test::temp_dir dir;
  const auto key = dir.make_key();
  const auto log = (dir / "a.log").string();
  Node a(base_config("a", key));
  REQUIRE_FALSE(a.initialize("tcp://127.0.0.1:0"));
  REQUIRE_FALSE(a.assume({0, 10}));
  for (int i = 0; i < 3; ++i) REQUIRE_FALSE(a.send(static_cast<std::uint64_t>(i), 1, &i, sizeof i));
  REQUIRE_FALSE(a.finalize(log.c_str()));
  CHECK_FALSE(a.running());

  Node again(base_config("a2", key));
  REQUIRE_FALSE(again.initialize("tcp://127.0.0.1:0", log.c_str()));
  CHECK_FALSE(again.recv_for(1, 100ms));  // not assumed yet: they wait
  REQUIRE_FALSE(again.assume({0, 10}));
  for (int i = 0; i < 3; ++i) {
    auto m = again.recv_for(1, 5s);
    REQUIRE(m);
    CHECK(m->dest() == static_cast<std::uint64_t>(i));
  }
}

TEST_CASE("node: a peer with another cluster key is refused, with the reason logged on both sides") {
  phoenix::test::temp_dir dir;
  log_capture logs;
  Node a(base_config("keyed-a", dir.make_key("a.key")));
  Node b(base_config("keyed-b", dir.make_key("b.key")));
  REQUIRE_FALSE(a.initialize("tcp://127.0.0.1:0"));
  REQUIRE_FALSE(b.initialize("tcp://127.0.0.1:0"));
  REQUIRE_FALSE(a.assume({0, 10}));
  REQUIRE_FALSE(b.add_port(a.local_port()));
  // Each side verifies the other's proof of the key, so both refuse, and each says so in its own log.
  CHECK(wait_for([&] { return logs.contains("keyed-a: link") && logs.contains("keyed-b: link"); }));
  CHECK(logs.contains("cluster key mismatch"));
  REQUIRE_FALSE(b.send(1, 1, "x", 1));
  CHECK_FALSE(a.recv_for(1, 300ms));
}

TEST_CASE("node: a peer with another L is refused") {
  phoenix::test::temp_dir dir;
  const auto key = dir.make_key();
  log_capture logs;
  auto cb = base_config("other-l", key);
  cb.space_size = 2000;
  Node a(base_config("a", key));
  Node b(cb);
  REQUIRE_FALSE(a.initialize("tcp://127.0.0.1:0"));
  REQUIRE_FALSE(b.initialize("tcp://127.0.0.1:0"));
  REQUIRE_FALSE(b.add_port(a.local_port()));
  CHECK(wait_for([&] { return logs.contains("other-l: link") && logs.contains("a: link"); }));
  CHECK(logs.contains("L=2000"));
  CHECK(logs.contains("L=1000"));
}

TEST_CASE("node: every call with bad arguments returns an error") {
  phoenix::test::temp_dir dir;
  const auto key = dir.make_key();
  Node a(base_config("a", key));
  int x = 0;
  CHECK(a.send(1, 1, &x, sizeof x).value() == PH_ESTATE);
  CHECK(a.assume({0, 1}).value() == PH_ESTATE);
  CHECK(a.add_port("tcp://127.0.0.1:1").value() == PH_ESTATE);
  CHECK_FALSE(a.recv_for(1, 10ms));
  CHECK(a.initialize("nonsense").value() == PH_EADDR);
  REQUIRE_FALSE(a.initialize("tcp://127.0.0.1:0"));
  CHECK(a.initialize("tcp://127.0.0.1:0").value() == PH_ESTATE);
  CHECK(a.assume({5, 5}).value() == PH_EINVAL);
  CHECK(a.assume({5, 1}).value() == PH_EINVAL);
  CHECK(a.assume({0, L + 1}).value() == PH_EINVAL);
  REQUIRE_FALSE(a.assume({0, 10}));
  CHECK(a.assume({9, 11}).value() == PH_EOVERLAP);
  CHECK(a.release({10, 12}).value() == PH_ENOTASSUMED);
  CHECK(a.send(1, -3, &x, sizeof x).value() == PH_EINVAL);
  CHECK(a.send(1, 1, nullptr, 4).value() == PH_EINVAL);
  CHECK(a.add_port("tcp://no-port").value() == PH_EADDR);
  CHECK(a.add_port("ssh://gw/h").value() == PH_EADDR);  // ssh:// links work (tests/overlay/test_ssh.cpp)
  CHECK(a.assumed() == std::vector<Interval>{{0, 10}});
  REQUIRE_FALSE(a.finalize());
  CHECK(a.finalize().value() == PH_ESTATE);
}

TEST_CASE("node: a missing cluster key file is a clear error") {
  phoenix::test::temp_dir dir;
  Node a(base_config("a", (dir / "absent.key").string()));
  CHECK(a.initialize("tcp://127.0.0.1:0").value() == PH_EKEY);
}

TEST_CASE("node: a peer sending garbage, a truncated frame or an oversized frame is cut off, others are served") {
  two_nodes t;
  log_capture logs;
  phoenix::overlay::logger()->set_level(spdlog::level::debug);
  REQUIRE_FALSE(t.a.assume({0, 500}));
  REQUIRE_FALSE(t.b.assume({500, 1000}));
  expect_delivery(t.b, t.a, 1, "before");

  const auto addr = phoenix::overlay::parse_address(t.a.local_port());
  REQUIRE(addr);
  asio::io_context io;
  auto attack = [&](std::vector<std::byte> bytes) {
    asio::ip::tcp::socket s(io);
    s.connect({asio::ip::make_address(addr->host), addr->port});
    asio::write(s, asio::buffer(bytes));
    return s;  // kept open: the node must close it, not wait for us
  };
  std::vector<std::byte> garbage(64, std::byte{0x47});
  std::vector<std::byte> oversized(phoenix::overlay::frame_header_bytes);
  phoenix::overlay::encode_frame_header(oversized.data(), phoenix::overlay::frame_type::hello, 1u << 20);
  std::vector<std::byte> truncated(phoenix::overlay::frame_header_bytes + 10);
  phoenix::overlay::encode_frame_header(truncated.data(), phoenix::overlay::frame_type::hello, 100);
  auto s1 = attack(garbage);
  auto s2 = attack(oversized);
  {
    auto s3 = attack(truncated);  // closes with the frame incomplete
  }
  CHECK(wait_for([&] { return logs.contains("bad frame magic") && logs.contains("larger than the maximum"); }));
  // The node closed the offending connections itself (after its own HELLO, which the attacker reads first).
  auto closed_by_node = [](asio::ip::tcp::socket& s) {
    std::array<char, 4096> buf{};
    std::error_code ec;
    for (int i = 0; i < 100 && !ec; ++i) s.read_some(asio::buffer(buf), ec);
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  };
  CHECK(closed_by_node(s1));
  CHECK(closed_by_node(s2));
  expect_delivery(t.b, t.a, 2, "after");
  expect_delivery(t.a, t.b, 600, "and back");
  phoenix::overlay::logger()->set_level(spdlog::level::warn);
}

TEST_CASE("node: a relay that finalizes while traffic crosses it drops nothing, the traffic waits for a new path") {
  phoenix::test::temp_dir dir;
  const auto key = dir.make_key();
  Node a(base_config("a", key)), relay(base_config("relay", key)), b(base_config("b", key));
  REQUIRE_FALSE(relay.initialize("tcp://127.0.0.1:0"));
  REQUIRE_FALSE(a.initialize("tcp://127.0.0.1:0"));
  REQUIRE_FALSE(b.initialize("tcp://127.0.0.1:0"));
  REQUIRE_FALSE(a.add_port(relay.local_port()));
  REQUIRE_FALSE(b.add_port(relay.local_port()));
  REQUIRE_FALSE(b.assume({500, 1000}));
  expect_delivery(a, b, 900, "through the relay");

  // Messages stream from a to b through the relay while it finalizes; its log must hold none of them.
  constexpr int n = 3000;
  CHECK(finalize_amid_stream(relay, (dir / "relay.log").string(), a, n, 100us).empty());

  // A new relay gives the waiting messages a path: b receives every one, once.
  Node relay2(base_config("relay2", key));
  REQUIRE_FALSE(relay2.initialize("tcp://127.0.0.1:0"));
  REQUIRE_FALSE(a.add_port(relay2.local_port()));
  REQUIRE_FALSE(b.add_port(relay2.local_port()));
  expect_numbers_once(b, n);
}

TEST_CASE("node: a node that finalizes to a log while messages stream in: its next incarnation gets each once") {
  phoenix::test::temp_dir dir;
  const auto key = dir.make_key();
  Node a(base_config("a", key)), b(base_config("b", key));
  REQUIRE_FALSE(a.initialize("tcp://127.0.0.1:0"));
  REQUIRE_FALSE(b.initialize("tcp://127.0.0.1:0"));
  REQUIRE_FALSE(b.add_port(a.local_port()));
  REQUIRE_FALSE(b.assume({500, 1000}));
  expect_delivery(a, b, 700, "before");

  // b receives none of them: what reached it goes to its log, the rest waits at a (b's leaving tells a to
  // route nothing more to it, its goodbye how far it got: nothing may be both logged and resent).
  constexpr int n = 3000;
  const auto log = (dir / "b.log").string();
  const auto logged = finalize_amid_stream(b, log, a, n, 50us);
  MESSAGE(logged.size() << " of " << n << " messages logged by the finalized node");

  Node b2(base_config("b2", key));
  REQUIRE_FALSE(b2.initialize("tcp://127.0.0.1:0", log.c_str()));
  REQUIRE_FALSE(b2.add_port(a.local_port()));
  REQUIRE_FALSE(b2.assume({500, 1000}));
  expect_numbers_once(b2, n);
}
