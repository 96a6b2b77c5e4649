// Attacks on routing by a node holding the cluster key: three overlays in one io_context, linked in-process
// (same framing and handshake as TCP). The victim V and an honest node H are linked; the attacker A is linked to
// both and forges route updates for V's name (docs/security.md, "Routing input").
#include <doctest/doctest.h>

#include <chrono>
#include <deque>
#include <functional>
#include <limits>
#include <memory>

#include "overlay/links/cluster_key.hpp"
#include "overlay/overlay.hpp"

using namespace phoenix::overlay;
namespace base = phoenix::base;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t L = 1000;
constexpr std::uint64_t victim_vnode = 5;

struct triangle {
  asio::io_context io;
  std::deque<packet> victim_inbox;
  std::unique_ptr<overlay> victim, honest, attacker;

  triangle() {
    victim = make("victim", L + 1, [this](packet&& p) { victim_inbox.push_back(std::move(p)); });
    honest = make("honest", L + 2, [](packet&&) {});
    attacker = make("attacker", L + 3, [](packet&&) {});
    victim->connect_local(*honest);
    attacker->connect_local(*honest);
    attacker->connect_local(*victim);
    REQUIRE(victim->assume({0, 10}) == base::interval_set::result::ok);
    REQUIRE(run_until([&] { return honest->owner_of(victim_vnode) == victim->self() && honest_route_to_victim(); }));
  }
  std::unique_ptr<overlay> make(const char* name, node_id id, overlay::deliver_fn deliver) {
    overlay_config c;
    c.name = name;
    c.space_size = L;
    c.cluster_key = development_key();
    return std::make_unique<overlay>(io, c, id, std::move(deliver));
  }
  bool run_until(const std::function<bool()>& cond, std::chrono::milliseconds limit = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!cond() && std::chrono::steady_clock::now() < deadline) io.run_for(2ms);
    return cond();
  }
  // H routes to V over their direct link (not through A).
  bool honest_route_to_victim() const {
    for (const auto& r : honest->view().routes)
      if (r.destination == victim->self()) return r.metric == 1 && r.next_hop == victim->self();
    return false;
  }
  std::uint64_t honest_seqno_of_victim() const {
    for (const auto& r : honest->view().routes)
      if (r.destination == victim->self()) return r.seqno;
    return 0;
  }
  // A packet from H for V's virtual node reaches V.
  bool delivers_from_honest() {
    packet p;
    p.dest = victim_vnode;
    p.source = honest->self();
    p.tag = 3;
    p.hops_left = 64;
    p.body.resize(4);
    const auto before = victim_inbox.size();
    honest->route_in_transit(std::move(p));
    return run_until([&] { return victim_inbox.size() > before; });
  }
  // A forges V's route: the name, a seqno, one hop, and V's intervals and then some.
  void forge(std::uint64_t seqno) {
    attacker->send_forged_update({false, {route_entry{victim->self(), seqno, 1, {{0, 100}}}}});
  }
};

}  // namespace

TEST_CASE("security: a key holder advertising another node's name at seqno 2^64-1 changes no route to it") {
  triangle net;
  const auto seqno_before = net.honest_seqno_of_victim();
  net.forge(std::numeric_limits<std::uint64_t>::max());
  // Both have heard the forgery once it is counted, or once it moved H's route.
  net.run_until([&] {
    return !net.honest_route_to_victim() || (net.honest->view().routing_ignored.seqno_absurd >= 1 &&
                                             net.victim->view().routing_ignored.seqno_absurd >= 1);
  });
  CHECK(net.honest_route_to_victim());
  CHECK(net.honest_seqno_of_victim() < max_plausible_seqno);
  CHECK(net.victim->view().seqno == seqno_before);

  net.attacker->drop_links();  // the attacker leaves: V must be reachable at once, not after source expiry
  REQUIRE(net.run_until([&] { return !net.honest->can_reach(net.attacker->self()); }));
  CHECK(net.honest->can_reach(net.victim->self()));
  CHECK(net.delivers_from_honest());
  CHECK(net.honest->view().routing_ignored.seqno_absurd >= 1);
  CHECK(net.victim->view().routing_ignored.seqno_absurd >= 1);
}

TEST_CASE("security: a key holder's claim on another node's name within the window is outbid, and stays so") {
  triangle net;
  const auto seen = net.honest_seqno_of_victim();
  net.forge(seen + (std::uint64_t{1} << 16));  // the furthest H accepts
  // V hears the claim (from A and from H) and raises its seqno past it; H routes to V directly again.
  REQUIRE(net.run_until([&] { return net.victim->view().seqno > seen + (std::uint64_t{1} << 16); }));
  REQUIRE(net.run_until([&] { return net.honest_route_to_victim(); }));
  CHECK(net.victim->view().routing_ignored.own_name_claims >= 1);
  CHECK(net.delivers_from_honest());

  net.attacker->drop_links();
  REQUIRE(net.run_until([&] { return !net.honest->can_reach(net.attacker->self()); }));
  CHECK(net.honest_route_to_victim());
  CHECK(net.delivers_from_honest());
}
