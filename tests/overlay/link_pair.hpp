// Two overlays, A and B, linked by one transport, for the link conformance suite (test_link_conformance.cpp):
//   local_pair  an in-process link over a socket pair (overlay::connect_local);
//   tcp_pair    A dials B's listener on 127.0.0.1;
//   ssh_pair    A reaches B's listener through a private sshd on 127.0.0.1 (support/sshd.hpp).
// Both overlays run on one io_context driven by the test thread. A assumes [0, 500) of the space and B
// [500, 1000). Each fixture cuts its link the transport's own way (cut), after which the link comes back by
// itself, and says whether a tamper_proxy can stand on its path (can_tamper). A new transport is one more
// fixture with the same members, added to the suite's type list.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "overlay/links/cluster_key.hpp"
#include "overlay/overlay.hpp"
#include "security/tamper_proxy.hpp"
#include "support/sshd.hpp"
#include "support/temp_dir.hpp"

namespace phoenix::test {

struct pair_options {
  std::vector<std::byte> key_b;                                          // B's cluster key; empty: A's
  std::uint64_t window_b = overlay::overlay_config{}.link_window_bytes;  // what B accepts unacknowledged
  bool a_ignores_window = false;  // fault injection: A sends beyond the window B announced
  bool tamper = false;            // a tamper_proxy flips a bit of A's 5th data frame (fixtures with can_tamper)
  overlay::protection_mode protection = overlay::protection_mode::integrity;  // both ends'
};

struct pair_end {
  std::deque<overlay::packet> received;
  std::unique_ptr<overlay::overlay> ov;
  std::string endpoint;  // where it listens, if it does
  overlay::overlay_view view() const { return ov->view(); }
  bool has_link(const std::string& state) const {
    for (const auto& l : ov->view().links)
      if (l.state == state) return true;
    return false;
  }
};

// Packet i of a numbered stream to `dest`: its number in the first bytes of a body that depends on it.
inline overlay::packet numbered(std::uint64_t dest, std::uint32_t i, std::size_t body_bytes = 64) {
  overlay::packet p;
  p.dest = dest;
  p.source = 1;
  p.tag = 7;
  p.hops_left = 64;
  p.body.resize(std::max(body_bytes, sizeof i));
  for (std::size_t k = 0; k < p.body.size(); ++k) p.body[k] = static_cast<std::byte>((i * 31 + k) & 0xFF);
  std::memcpy(p.body.data(), &i, sizeof i);
  return p;
}

// Whether `inbox` holds exactly numbered(dest, 0..count-1, body_bytes), in order; else why not.
inline std::string numbered_mismatch(const std::deque<overlay::packet>& inbox, std::uint64_t dest,
                                     std::uint32_t count, std::size_t body_bytes = 64) {
  if (inbox.size() != count)
    return std::to_string(inbox.size()) + " packets, expected " + std::to_string(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    const overlay::packet expected = numbered(dest, i, body_bytes);
    const auto& got = inbox[i];
    if (got.dest != dest || got.body.size() != expected.body.size() ||
        std::memcmp(got.body.data(), expected.body.data(), expected.body.size()) != 0) {
      std::uint32_t n = 0;
      if (got.body.size() >= sizeof n) std::memcpy(&n, got.body.data(), sizeof n);
      return "packet " + std::to_string(i) + " is number " + std::to_string(n) + " or altered";
    }
  }
  return "";
}

class link_pair_base {
 public:
  static constexpr std::uint64_t space = 1000;
  static constexpr std::uint64_t vnode_a = 5, vnode_b = 505;  // assumed by A and by B

  asio::io_context io;
  pair_end a, b;

  explicit link_pair_base(const pair_options& o, overlay::ssh_options ssh = {}) {
    make(a, "a", space + 1, overlay::development_key(), overlay::overlay_config{}.link_window_bytes,
         o.a_ignores_window, o.protection, ssh);
    make(b, "b", space + 2, o.key_b.empty() ? overlay::development_key() : o.key_b, o.window_b, false,
         o.protection, ssh);
    REQUIRE(a.ov->assume({0, 500}) == base::interval_set::result::ok);
    REQUIRE(b.ov->assume({500, space}) == base::interval_set::result::ok);
  }

  bool run_until(const std::function<bool()>& cond,
                 std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!cond() && std::chrono::steady_clock::now() < deadline) io.run_for(std::chrono::milliseconds(2));
    return cond();
  }
  // The link is up at both ends.
  bool is_up() const { return a.has_link("up") && b.has_link("up"); }
  // The link is up and each end routes to the other's virtual node through it.
  bool routes_exchanged() const {
    return is_up() && a.ov->owner_of(vnode_b) == b.ov->self() && b.ov->owner_of(vnode_a) == a.ov->self();
  }
  bool link_up(std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    return run_until([this] { return routes_exchanged(); }, limit);
  }

 protected:
  void listen(pair_end& e) { REQUIRE_FALSE(e.ov->listen("tcp://127.0.0.1:0", e.endpoint)); }
  static std::uint16_t port_of(const std::string& endpoint) {
    return static_cast<std::uint16_t>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
  }
  void wait_up() {
    REQUIRE_MESSAGE(run_until([this] { return is_up(); }), "the link is not up to be cut");
  }

 private:
  void make(pair_end& e, const std::string& name, overlay::node_id self, std::vector<std::byte> key,
            std::uint64_t window, bool ignore_window, overlay::protection_mode protection,
            const overlay::ssh_options& ssh) {
    overlay::overlay_config c;
    c.name = name;
    c.space_size = space;
    c.cluster_key = std::move(key);
    c.retry_interval = std::chrono::milliseconds(50);
    c.link_window_bytes = window;
    c.fault_ignore_peer_window = ignore_window;
    c.link_protection = protection;
    c.ssh = ssh;
    auto* raw = &e;
    e.ov = std::make_unique<overlay::overlay>(
        io, c, self, [raw](overlay::packet&& p) { raw->received.push_back(std::move(p)); });
  }
};

// In process, over a socket pair. No proxy can stand between the two ends of a socket pair, and a local link
// has no dialler: cut() pairs the overlays again once B saw the old link go.
class local_pair : public link_pair_base {
 public:
  static constexpr bool can_tamper = false;
  explicit local_pair(const pair_options& o = {}) : link_pair_base(o) { a.ov->connect_local(*b.ov); }
  // Closes A's end of the socket pair.
  void cut() {
    wait_up();
    REQUIRE(a.ov->drop_link(b.ov->self()));
    REQUIRE(run_until([this] { return !b.has_link("up"); }));
    a.ov->connect_local(*b.ov);
  }
  const tamper_proxy* proxy() const { return nullptr; }
};

// A dials B over TCP, through a tamper_proxy in front of B when asked.
class tcp_pair : public link_pair_base {
 public:
  static constexpr bool can_tamper = true;
  explicit tcp_pair(const pair_options& o = {}) : link_pair_base(o) {
    listen(b);
    std::uint16_t port = port_of(b.endpoint);
    if (o.tamper) port = proxy_.emplace(port, tamper_proxy::attack::flip_body_byte).port();
    REQUIRE_FALSE(a.ov->add_port("tcp://127.0.0.1:" + std::to_string(port)));
  }
  // B closes its socket; A sees the connection end and redials.
  void cut() {
    wait_up();
    REQUIRE(b.ov->drop_link(a.ov->self()));
  }
  const tamper_proxy* proxy() const { return proxy_ ? &*proxy_ : nullptr; }

 private:
  std::optional<tamper_proxy> proxy_;
};

// The private sshd and what A needs to log in to it; a base of ssh_pair so that it exists before the overlays.
// A missing sshd fails the test, as in test_ssh.cpp.
struct ssh_gateway {
  temp_dir dir;
  sshd server{dir};
  std::string known_hosts = (dir / "known_hosts").string();

  ssh_gateway() {
    REQUIRE_MESSAGE(server.ok(), server.error());
    std::ofstream(known_hosts) << server.known_hosts_line();
  }
  overlay::ssh_options client() const {
    overlay::ssh_options o;
    o.identity_file = server.client_key().string();
    o.known_hosts = known_hosts;
    return o;
  }
};

// A dials ssh://USER@127.0.0.1:SSHD/127.0.0.1:B: a direct-tcpip channel, which the server's per-connection
// process connects to B (or to a tamper_proxy in front of B: the frames are plain there).
class ssh_pair : private ssh_gateway, public link_pair_base {
 public:
  static constexpr bool can_tamper = true;
  explicit ssh_pair(const pair_options& o = {}) : link_pair_base(o, client()) {
    listen(b);
    std::uint16_t port = port_of(b.endpoint);
    if (o.tamper) port = proxy_.emplace(port, tamper_proxy::attack::flip_body_byte).port();
    REQUIRE_FALSE(a.ov->add_port(server.url_to("127.0.0.1", port)));
  }
  // Kills the server processes that carry the tunnel: A's SSH connection and B's TCP connection both end, and
  // A redials through a new SSH connection.
  void cut() {
    wait_up();
    REQUIRE(server.kill_sessions() >= 1);
  }
  const tamper_proxy* proxy() const { return proxy_ ? &*proxy_ : nullptr; }

 private:
  std::optional<tamper_proxy> proxy_;
};

}  // namespace phoenix::test
