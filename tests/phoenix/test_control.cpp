// The remote control service (phoenix/control.hpp) and suspend with state, several nodes in one process over
// loopback TCP: what the shell (phsh) relies on.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <mutex>
#include <phoenix/node.hpp>

#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

using namespace std::chrono_literals;
using phoenix::Interval;
using phoenix::Node;

namespace {

using phoenix::test::L;

// The value of a key in a `status` reply ("" if absent).
std::string field(const std::string& status, const std::string& key) {
  const auto at = status.find(key + "=");
  if (at == std::string::npos || (at > 0 && status[at - 1] != '\n')) return "";
  const auto start = at + key.size() + 1;
  return status.substr(start, status.find('\n', start) - start);
}

// A node configuration that holds the controller's private key (it may sign) and its public key (it obeys).
phoenix::Config controlled_config(const std::string& name, const std::string& key,
                                  const phoenix::test::temp_dir::controller_keys& controller) {
  auto c = phoenix::test::node_config(name, key, L);
  c.controller_key_file = controller.private_file;
  c.control_key_file = controller.public_file;
  return c;
}

// Two linked nodes; b assumes [0, L). Both hold the controller's keys: a may control b.
struct pair_of_nodes {
  phoenix::test::temp_dir dir;
  std::string key = dir.make_key();
  phoenix::test::temp_dir::controller_keys controller = dir.make_controller_keys();
  Node a{controlled_config("a", key, controller)};
  Node b{controlled_config("b", key, controller)};
  pair_of_nodes() {
    REQUIRE_FALSE(a.initialize("tcp://127.0.0.1:0"));
    REQUIRE_FALSE(b.initialize("tcp://127.0.0.1:0"));
    REQUIRE_FALSE(b.add_port(a.local_port()));
    REQUIRE_FALSE(b.assume({0, L}));
    REQUIRE(phoenix::test::wait_for([&] {
      a.poll();
      return !a.routing_snapshot().routes.empty() && a.control(b.resource_name(), "status", 100ms).has_value();
    }));
  }
};

// An application's state: one number per virtual node it holds.
struct counters {
  std::mutex mu;
  std::map<std::uint64_t, std::uint64_t> value;
  int packs = 0, unpacks = 0;
  std::optional<phoenix::Bytes> pack(Interval s) {
    std::lock_guard lock(mu);
    ++packs;
    phoenix::Bytes out;
    for (auto it = value.lower_bound(s.lo); it != value.end() && it->first < s.hi;) {
      const std::uint64_t kv[2] = {it->first, it->second};
      const auto* p = reinterpret_cast<const std::byte*>(kv);
      out.insert(out.end(), p, p + sizeof kv);
      it = value.erase(it);
    }
    return out;
  }
  bool unpack(Interval, std::span<const std::byte> data) {
    std::lock_guard lock(mu);
    ++unpacks;
    if (data.size() % 16) return false;
    for (std::size_t i = 0; i < data.size(); i += 16) {
      std::uint64_t kv[2];
      std::memcpy(kv, data.data() + i, sizeof kv);
      value[kv[0]] = kv[1];
    }
    return true;
  }
  void set_on(Node& n) {
    REQUIRE_FALSE(
        n.set_state_handlers([this](Interval s) { return pack(s); },
                             [this](Interval s, std::span<const std::byte> d) { return unpack(s, d); }));
  }
};

}  // namespace

TEST_CASE("control: status, routes and log are answered by the node's runtime, whatever its application does") {
  pair_of_nodes n;
  for (int i = 0; i < 5; ++i) REQUIRE_FALSE(n.a.send(static_cast<std::uint64_t>(i), 1, &i, sizeof i));
  REQUIRE(phoenix::test::wait_for([&] {
    auto r = n.a.control(n.b.resource_name(), "status", 1s);
    return r && field(r->text, "queued") == "5";
  }));
  n.b.set_status("computing");
  auto status = n.a.control(n.b.resource_name(), "status", 2s);
  REQUIRE(status);
  CHECK(status->ok);
  CHECK(field(status->text, "name") == "b");
  CHECK(field(status->text, "endpoint") == n.b.local_port());
  CHECK(field(status->text, "resource") == std::to_string(n.b.resource_name()));
  CHECK(field(status->text, "assumed") == "[0,1000)");
  CHECK(field(status->text, "state") == "computing");
  CHECK(field(status->text, "received") == "0");  // queued, not yet taken by b's application
  CHECK(field(status->text, "links") == "1");
  CHECK(field(status->text, "peers") == std::to_string(n.a.resource_name()));
  CHECK_FALSE(field(status->text, "pid").empty());

  auto routes = n.a.control(n.b.resource_name(), "routes", 2s);
  REQUIRE(routes);
  CHECK(routes->text.find("node " + std::to_string(n.b.resource_name())) != std::string::npos);
  CHECK(routes->text.find("assumes [0,1000)") != std::string::npos);
  CHECK(routes->text.find("peer " + std::to_string(n.a.resource_name())) != std::string::npos);

  auto log = n.a.control(n.b.resource_name(), "log 200", 2s);
  REQUIRE(log);
  CHECK(log->text.find("b: initialized as " + std::to_string(n.b.resource_name())) != std::string::npos);

  auto mine = n.a.control(n.a.resource_name(), "status", 2s);  // a node may ask itself
  REQUIRE(mine);
  CHECK(field(mine->text, "name") == "a");
  CHECK(field(mine->text, "sent") == "5");
}

TEST_CASE("control: a bad request gets an error reply, and a name nobody has is unreachable, not a timeout") {
  pair_of_nodes n;
  auto r = n.a.control(n.b.resource_name(), "reboot", 2s);
  REQUIRE(r);
  CHECK_FALSE(r->ok);
  CHECK(r->text == "unknown request 'reboot'");
  auto s = n.a.control(n.b.resource_name(), "suspend", 2s);
  REQUIRE(s);
  CHECK_FALSE(s->ok);

  std::error_code ec;
  CHECK_FALSE(n.a.control(L + 12345, "status", 5s, &ec));
  CHECK(ec == phoenix::make_error_code(PH_EUNREACH));
  CHECK(std::string(ph_strerror(PH_EUNREACH)) == "no route to that node");
}

TEST_CASE("control: leave and suspend requests wait for the application, in order, with who asked") {
  pair_of_nodes n;
  CHECK(n.b.take_control_request().kind == Node::ControlRequest::Kind::none);
  auto r1 = n.a.control(n.b.resource_name(), "leave", 2s);
  auto r2 = n.a.control(n.b.resource_name(), "suspend /tmp/somewhere.suspend", 2s);
  REQUIRE(r1);
  REQUIRE(r2);
  CHECK(r1->ok);
  CHECK(r2->ok);
  const auto q1 = n.b.take_control_request();
  CHECK(q1.kind == Node::ControlRequest::Kind::leave);
  CHECK(q1.from == n.a.resource_name());
  const auto q2 = n.b.take_control_request();
  CHECK(q2.kind == Node::ControlRequest::Kind::suspend);
  CHECK(q2.file == "/tmp/somewhere.suspend");
  CHECK(n.b.take_control_request().kind == Node::ControlRequest::Kind::none);
}

TEST_CASE(
    "suspend: the intervals and their state come back in a new incarnation, with the messages sent meanwhile") {
  pair_of_nodes n;
  counters app;
  app.set_on(n.b);
  for (std::uint64_t v = 0; v < L; v += 100) app.value[v] = v * 3 + 1;
  const auto file = (n.dir / "b.suspend").string();

  // Without state handlers a node cannot suspend; it runs on.
  {
    Node c(phoenix::test::node_config("c", n.key, L));
    REQUIRE_FALSE(c.initialize("tcp://127.0.0.1:0"));
    CHECK(c.suspend(file.c_str()) == phoenix::make_error_code(PH_ESTATE));
    CHECK(c.running());
  }
  // pack may decline: nothing moves, the node runs on and can still be suspended later.
  {
    bool decline = true;
    REQUIRE_FALSE(n.b.set_state_handlers(
        [&](Interval s) -> std::optional<phoenix::Bytes> {
          if (decline) return std::nullopt;
          return app.pack(s);
        },
        [&](Interval s, std::span<const std::byte> d) { return app.unpack(s, d); }));
    CHECK(n.b.suspend(file.c_str()) == phoenix::make_error_code(PH_ESTATE));
    CHECK(n.b.running());
    CHECK(app.value.size() == 10);
    app.set_on(n.b);
  }

  REQUIRE_FALSE(n.b.suspend(file.c_str()));
  CHECK_FALSE(n.b.running());
  CHECK(app.value.empty());  // packed: it is all in the file now
  for (int i = 0; i < 4; ++i) REQUIRE_FALSE(n.a.send(static_cast<std::uint64_t>(100 * i + 7), 2, &i, sizeof i));

  Node b2(phoenix::test::node_config("b2", n.key, L));
  REQUIRE_FALSE(b2.initialize("tcp://127.0.0.1:0", file.c_str()));
  REQUIRE_FALSE(b2.add_port(n.a.local_port()));
  CHECK(b2.assumed().empty());  // until its application takes the state up
  CHECK(b2.join(100ms) == phoenix::make_error_code(PH_ESTATE));
  app.set_on(b2);
  CHECK(b2.assumed() == std::vector<Interval>{{0, L}});
  CHECK(app.unpacks >= 1);
  REQUIRE(app.value.size() == 10);
  for (std::uint64_t v = 0; v < L; v += 100) CHECK(app.value[v] == v * 3 + 1);
  for (int i = 0; i < 4; ++i) {
    auto m = b2.recv_for(2, 5s);
    REQUIRE(m);
    int k = -1;
    std::memcpy(&k, m->data(), sizeof k);
    CHECK(m->dest() == static_cast<std::uint64_t>(100 * k + 7));
  }
}
