// ssh:// links end to end: phoenix::Nodes in one process, linked through a real OpenSSH server on 127.0.0.1
// (tests/support/sshd.hpp) by libssh2 direct-tcpip channels.
#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <phoenix/config.hpp>
#include <phoenix/node.hpp>
#include <thread>

#include "overlay/transports/address.hpp"
#include "support/log_capture.hpp"
#include "support/nodes.hpp"
#include "support/sshd.hpp"
#include "support/temp_dir.hpp"

using namespace std::chrono_literals;
using phoenix::Interval;
using phoenix::Node;
using phoenix::test::log_capture;
using phoenix::test::payload_of;
using phoenix::test::wait_for;

namespace {

constexpr std::uint64_t L = 1000;

// A gateway (sshd) and what a node needs to use it.
struct gateway {
  phoenix::test::temp_dir dir;
  std::string key = dir.make_key();
  phoenix::test::sshd server{dir};
  std::string known_hosts = (dir / "known_hosts").string();

  gateway() { REQUIRE_MESSAGE(server.ok(), server.error()); }

  void trust_host_key() { std::ofstream(known_hosts) << server.known_hosts_line(); }

  phoenix::Config config(const std::string& name, const std::string& policy = "strict") const {
    auto c = phoenix::test::node_config(name, key, L);
    c.ssh_identity = server.client_key().string();
    c.ssh_known_hosts = known_hosts;
    c.ssh_host_key_policy = policy;
    return c;
  }
  // ssh:// through this gateway to a node's TCP endpoint.
  std::string url_to(const Node& n) const {
    const auto a = phoenix::overlay::parse_address(n.local_port());
    REQUIRE(a);
    return server.url_to(a->host, a->port);
  }
};

void start(Node& n, Interval own) {
  REQUIRE_FALSE(n.initialize("tcp://127.0.0.1:0"));
  REQUIRE_FALSE(n.assume(own));
}

// count messages "0".."count-1" with `tag` to v; then expects them at `at`, each once, in order.
void send_numbers(Node& from, std::uint64_t v, int tag, int count) {
  for (int i = 0; i < count; ++i) {
    const std::string text = std::to_string(i);
    REQUIRE_FALSE(from.send(v, tag, text.data(), text.size()));
  }
}
void expect_numbers(Node& at, int tag, int count) {
  for (int i = 0; i < count; ++i) {
    auto m = at.recv_for(tag, 20s);
    REQUIRE_MESSAGE(m, "message " << i << " of " << count << " missing");
    REQUIRE(payload_of(*m) == std::to_string(i));
  }
  CHECK_FALSE(at.recv_for(tag, 200ms));  // nothing twice
}

bool has_link_up(const Node& n, const std::string& address) {
  for (const auto& l : n.routing_snapshot().links)
    if (l.address == address && l.state == "up") return true;
  return false;
}

}  // namespace

TEST_CASE("ssh: links through one gateway share a session and carry messages both ways, once, in order") {
  gateway gw;
  gw.trust_host_key();
  log_capture log;
  Node a{gw.config("a")}, b{gw.config("b")}, c{gw.config("c")};
  start(a, {0, 100});
  start(b, {200, 300});
  start(c, {100, 200});
  const std::string to_a = gw.url_to(a), to_c = gw.url_to(c);
  REQUIRE_FALSE(b.add_port(to_a));
  REQUIRE_FALSE(b.add_port(to_c));
  REQUIRE(wait_for([&] { return has_link_up(b, to_a) && has_link_up(b, to_c); }, 20s));

  send_numbers(b, 50, 1, 300);
  send_numbers(b, 150, 2, 300);
  send_numbers(a, 250, 3, 300);
  send_numbers(c, 250, 4, 300);
  expect_numbers(a, 1, 300);
  expect_numbers(c, 2, 300);
  expect_numbers(b, 3, 300);
  expect_numbers(b, 4, 300);
  // Both links are channels of one SSH connection: the server forked one process for it.
  CHECK(wait_for([&] { return gw.server.sessions().size() == 1; }, 5s));
  CHECK(log.find("[warning]").empty());
}

TEST_CASE("ssh: an unknown host key is refused under strict, and recorded under accept-new") {
  gateway gw;  // known_hosts does not exist yet
  log_capture log;
  const std::string fp = phoenix::test::ssh_fingerprint(gw.server.host_key_pub());
  REQUIRE(fp.rfind("SHA256:", 0) == 0);
  Node a{gw.config("a")};
  start(a, {0, 100});
  {
    Node b{gw.config("b", "strict")};
    start(b, {200, 300});
    REQUIRE_FALSE(b.add_port(gw.url_to(a)));  // dials in the background
    REQUIRE(wait_for([&] { return !log.find("is not in").empty(); }, 10s));
    const std::string line = log.find("is not in");
    CHECK(line.find("[warning]") != std::string::npos);
    CHECK(line.find(gw.server.host_name()) != std::string::npos);
    CHECK(line.find(fp) != std::string::npos);
    CHECK(line.find("refused") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(gw.known_hosts));
    REQUIRE_FALSE(b.send(50, 1, "x", 1));
    CHECK_FALSE(a.recv_for(1, 500ms));
  }
  {
    Node b{gw.config("b2", "accept-new")};
    start(b, {200, 300});
    REQUIRE_FALSE(b.add_port(gw.url_to(a)));
    send_numbers(b, 50, 2, 10);
    expect_numbers(a, 2, 10);
    const std::string file = phoenix::test::read_text(gw.known_hosts);
    CHECK(file.find(gw.server.known_hosts_line()) != std::string::npos);
  }
  {
    // What accept-new wrote is what a strict node then accepts.
    Node b{gw.config("b3", "strict")};
    start(b, {200, 300});
    REQUIRE_FALSE(b.add_port(gw.url_to(a)));
    send_numbers(b, 50, 3, 10);
    expect_numbers(a, 3, 10);
  }
}

TEST_CASE("ssh: a changed host key is refused, naming the host and both fingerprints") {
  gateway gw;
  REQUIRE(phoenix::test::make_ssh_key(gw.dir / "other_ed25519"));
  std::ofstream(gw.known_hosts) << "# another key for the same host:port\n"
                                << gw.server.known_hosts_line(gw.dir / "other_ed25519.pub");
  const std::string presented = phoenix::test::ssh_fingerprint(gw.server.host_key_pub());
  const std::string known = phoenix::test::ssh_fingerprint(gw.dir / "other_ed25519.pub");
  for (const std::string policy : {"strict", "accept-new"}) {
    CAPTURE(policy);
    log_capture log;
    Node a{gw.config("a")}, b{gw.config("b", policy)};
    start(a, {0, 100});
    start(b, {200, 300});
    REQUIRE_FALSE(b.add_port(gw.url_to(a)));
    REQUIRE(wait_for([&] { return !log.find("CHANGED").empty(); }, 10s));
    const std::string line = log.find("CHANGED");
    CHECK(line.find("[warning]") != std::string::npos);
    CHECK(line.find(gw.server.host_name()) != std::string::npos);
    CHECK(line.find(presented) != std::string::npos);
    CHECK(line.find(known) != std::string::npos);
    REQUIRE_FALSE(b.send(50, 1, "x", 1));
    CHECK_FALSE(a.recv_for(1, 500ms));
  }
  CHECK(
      phoenix::test::read_text(gw.known_hosts).find(phoenix::test::public_key_text(gw.server.host_key_pub())) ==
      std::string::npos);
}

TEST_CASE("ssh: killing the server process of the tunnel mid-stream loses and duplicates nothing") {
  gateway gw;
  gw.trust_host_key();
  Node a{gw.config("a")}, b{gw.config("b")};
  start(a, {0, 100});
  start(b, {200, 300});
  const std::string to_a = gw.url_to(a);
  REQUIRE_FALSE(b.add_port(to_a));
  REQUIRE(wait_for([&] { return has_link_up(b, to_a); }, 20s));
  REQUIRE(wait_for([&] { return gw.server.sessions().size() == 1; }, 5s));
  const pid_t first = gw.server.sessions().front();

  constexpr int count = 3000;
  std::thread sender([&] {
    for (int i = 0; i < count; ++i) {
      const std::string text = std::to_string(i);
      for (int tries = 0; tries < 10000 && b.send(50, 7, text.data(), text.size()).value() == PH_EAGAIN;
           ++tries)
        std::this_thread::sleep_for(1ms);
      if (i % 10 == 0) std::this_thread::sleep_for(1ms);  // a stream over a few seconds
    }
  });
  int next = 0;
  bool killed = false;
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  while (next < count && std::chrono::steady_clock::now() < deadline) {
    auto m = a.recv_for(7, 1s);
    if (!m) continue;
    REQUIRE(payload_of(*m) == std::to_string(next));
    ++next;
    if (next == 1000 && !killed) {
      CHECK(gw.server.kill_sessions() >= 1);
      killed = true;
    }
  }
  sender.join();
  CHECK(killed);
  CHECK(next == count);
  CHECK_FALSE(a.recv_for(7, 300ms));
  CHECK(b.routing_snapshot().links_lost >= 1);
  // The tunnel is back, on a new server process.
  CHECK(wait_for([&] { return has_link_up(b, to_a); }, 20s));
  const auto now = gw.server.sessions();
  CHECK((now.size() == 1 && now.front() != first));
}

TEST_CASE("ssh: an unreachable gateway is retried quietly and the node keeps serving") {
  gateway gw;
  gw.trust_host_key();
  log_capture log;
  Node a{gw.config("a")}, b{gw.config("b")};
  start(a, {0, 100});
  start(b, {200, 300});
  std::uint16_t closed_port = 0;
  {
    asio::io_context io;
    asio::ip::tcp::acceptor probe(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    closed_port = probe.local_endpoint().port();
  }
  const std::string nowhere =
      "ssh://" + phoenix::test::current_user() + "@127.0.0.1:" + std::to_string(closed_port) + "/127.0.0.1:9";
  REQUIRE_FALSE(b.add_port(nowhere));
  REQUIRE_FALSE(b.add_port(a.local_port()));
  send_numbers(b, 50, 1, 100);
  expect_numbers(a, 1, 100);
  std::this_thread::sleep_for(1s);  // twenty retries at 50 ms
  send_numbers(a, 250, 2, 100);
  expect_numbers(b, 2, 100);
  CHECK(log.find(std::to_string(closed_port)).empty());  // nothing at warn or above
}
