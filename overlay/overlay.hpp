// overlay.hpp — one node's part of the overlay network (Phoenix paper, section 5).
//
// The overlay keeps links to the endpoints it was given (ph_add_port) and to whoever connects to it, runs
// DSDV with Babel's feasibility condition over them, and moves packets hop by hop towards the node that
// assumes their destination. This class is the facade that wires four parts, each a class of its own:
//   - link_manager.hpp: listening, dialling and redialling, which connection is a neighbour's link;
//   - routing_driver.hpp: the route table on the I/O context, the intervals this node assumes;
//   - forwarder.hpp: delivery here, the next hop, packets that wait for a route (never dropped);
//   - departure.hpp: a finalizing node's way out (leaving, drained, goodbye).
// It receives every connection's events (connection_owner) and hands each to the part it concerns.
//
// Threads: everything runs on the node's I/O context, by whichever thread holds the node's progress token.
// Only try_reserve() may be called from any thread. Nothing blocks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <asio.hpp>

#include "base/interval_set.hpp"
#include "overlay/departure.hpp"
#include "overlay/forwarder.hpp"
#include "overlay/link_manager.hpp"
#include "overlay/overlay_config.hpp"
#include "overlay/packet.hpp"
#include "overlay/routing/route_table.hpp"
#include "overlay/routing_driver.hpp"

namespace phoenix::overlay {

// What introspection returns (the shell's `routes` and `links`).
struct overlay_view {
  node_id self = 0;
  std::uint64_t seqno = 0;
  std::vector<base::interval> assumed;
  std::vector<route_table::route_view> routes;
  std::vector<link_view> links;
  std::uint64_t waiting_messages = 0;
  std::uint64_t waiting_bytes = 0;
  std::vector<std::uint64_t> waiting_for;  // distinct destinations of waiting packets, the first few
  std::uint64_t links_lost = 0;
  std::uint64_t frames_rejected = 0;  // connections closed for a frame that failed authentication
  std::uint64_t out_of_hops = 0;  // packets that used up their hop budget here (held, then re-routed)
  route_input_stats routing_ignored;  // routing input the table ignored, by reason (route_input.cpp)
  std::uint64_t accept_failures = 0;     // accept() calls that failed (descriptors or memory ran out)
  std::uint64_t handshakes_refused = 0;  // accepted connections closed at once: over a handshake cap
  std::uint64_t neighbour_records = 0;     // resource names this node keeps a link session for
  std::uint64_t neighbours_forgotten = 0;  // records of unused neighbours forgotten (expired, or to make room)
  std::uint64_t neighbours_refused = 0;    // links from new names closed with max_neighbours records kept
  // Owners unreachable for orphan_after or longer that went holding intervals nobody owns now: crashed, or cut
  // off (route_table::lost_owners).
  struct lost_owner {
    node_id source = 0;
    std::vector<base::interval> intervals;
    std::chrono::milliseconds lost_for{0};
  };
  std::vector<lost_owner> lost_owners;
};

class overlay final : public connection_owner {
 public:
  using deliver_fn = std::function<void(packet&&)>;

  overlay(asio::io_context& io, overlay_config config, node_id self, deliver_fn deliver);
  ~overlay() override;
  overlay(const overlay&) = delete;
  overlay& operator=(const overlay&) = delete;

  node_id self() const { return self_; }
  const overlay_config& config() const { return config_; }

  // Endpoints. listen() binds now and returns the bound address; add_port() dials in the background and
  // redials at the retry interval for as long as the node runs. With loopback_only, both refuse any other
  // address with std::errc::permission_denied and an error that says how to make a cluster key.
  std::error_code listen(const std::string& address, std::string& bound, std::string* error = nullptr) {
    return links_.listen(address, bound, error);
  }
  std::error_code add_port(const std::string& address, std::string* error = nullptr) {
    return links_.add_port(address, error);
  }

  // Messages. An application's packet first reserves its bytes against max_waiting_bytes (any thread, so
  // ph_send can refuse with PH_EAGAIN before handing the packet to the I/O context), then send() takes it
  // and sets its origin and hop budget. route_in_transit() takes a packet that was already on its way (put
  // back by ph_release, read from a log, or arriving from a neighbour) and delivers, forwards or holds it.
  bool try_reserve(std::uint64_t bytes) { return forwarder_.try_reserve(bytes); }
  void send(packet p) { forwarder_.send(std::move(p)); }  // precondition: try_reserve(p.footprint()) succeeded
  // The runtime's own packets (migration and control messages, bounded by their protocols): sent past the
  // bound. `reliable` ones to a resource name are numbered end to end, like an application's (a migration reply
  // lost with a relay that crashed would leave its partner locked for good); those to a virtual node never are
  // (forwarder::send).
  enum class delivery { hop_by_hop, reliable };
  void send_unbounded(packet p, delivery d = delivery::hop_by_hop) {
    forwarder_.account(static_cast<std::int64_t>(p.footprint()));
    const bool numbered = d == delivery::reliable && p.dest >= config_.space_size;
    forwarder_.send(std::move(p), numbered);
  }
  void route_in_transit(packet p) { forwarder_.route_in_transit(std::move(p)); }
  // A packet from an earlier incarnation's log: like route_in_transit, but what that incarnation sent and kept
  // is kept here again until its owner acknowledges it (forwarder::route_logged).
  void route_logged(packet p) { forwarder_.route_logged(std::move(p)); }

  // Mapping: the intervals of [0, L) this node assumes.
  base::interval_set::result assume(base::interval s) { return routing_.assume(s); }
  base::interval_set::result release(base::interval s, bool in_transit = false) {
    return routing_.release(s, in_transit);
  }
  void transit_over(base::interval s) { routing_.transit_over(s); }
  void hold_in_transit(base::interval s) { routing_.hold_in_transit(s); }
  bool assumes(std::uint64_t vnode) const { return routing_.assumed().contains(vnode); }
  const base::interval_set& assumed() const { return routing_.assumed(); }

  // Leaving: tell every neighbour `leaving` (links keep being accepted and redialled, so that one that breaks
  // now comes back and its session delivers what it holds); each stops routing through this
  // node, re-routes what it had not yet sent here, and answers `leaving_ack`, after which nothing more arrives
  // from it. Once every neighbour answered and everything this node holds was forwarded and acknowledged
  // (the caller waits for is_drained() with a deadline), say goodbye to every neighbour and close. So a
  // finalizing node drops nothing it was forwarding for others (docs/overlay.md, "Leaving").
  void begin_shutdown() { departure_.begin_shutdown(); }
  // Every neighbour answered leaving, nothing waits for a route and everything was acknowledged. With
  // wait_for_resource_names false, packets for resource names hold nothing back when they wait for a route or
  // sit on a link that is down: after a grace, a leaver stops waiting for incarnations that crashed (resource
  // names are never reused, so no later node can take them). Packets for virtual nodes always count.
  bool is_drained(bool wait_for_resource_names = true) const {
    return departure_.is_drained(wait_for_resource_names);
  }
  // Then say goodbye: the final ack, after which this node takes no data. Every neighbour must answer
  // goodbye_ack (the caller waits for is_farewelled() with a deadline): one whose link broke, before this node
  // began leaving or since, is redialled or accepted again and told again, because a neighbour that never hears
  // the final ack keeps what it sent here for an incarnation that will not come back. Only a neighbour whose
  // link has stayed down for `presumed_crashed_after` since this node began saying goodbye (a cut link is
  // redialled sooner) is not waited for.
  void say_goodbye() { departure_.say_goodbye(); }
  bool is_farewelled(std::chrono::steady_clock::duration presumed_crashed_after) const {
    return departure_.is_farewelled(presumed_crashed_after);
  }
  // Then stop accepting and dialling, and wait for is_quiet() before closing.
  void stop_linking() { links_.stop_linking(); }
  bool is_quiet() const { return links_.is_quiet(); }  // nothing left to write on any link
  // Waiting packets, any still unacknowledged by a neighbour, and this node's own that no owner acknowledged.
  std::vector<packet> take_undelivered() { return departure_.take_undelivered(); }

  // End-to-end delivery (docs/overlay.md): the state of the streams to an interval's virtual nodes leaves with
  // it (ph_release, a migration's give, a log) and comes with it (adopt_streams).
  // Packets held for s before their predecessors go on to the next owner.
  std::vector<stream_state> take_streams(base::interval s) {
    auto [states, held] = forwarder_.take_streams(s.lo, s.hi);
    for (auto& p : held) forwarder_.route_in_transit(std::move(p));
    return std::move(states);
  }
  // Streams of packets this node sent that their owners (of a virtual node, or a resource name's incarnation)
  // have not acknowledged yet.
  // (Streams to resource names that no route reaches are not counted: an incarnation that is gone never
  // acknowledges, and its name is never reused.)
  std::size_t unacknowledged() const {
    return forwarder_.count_unacknowledged([this](std::uint64_t dest) {
      return dest < config_.space_size || reachable(dest);
    });
  }
  // What those streams keep goes out again within end_to_end_resend (a node about to leave waits for them).
  void send_unacknowledged_again() { forwarder_.send_all_again(); }
  // Of those, the streams whose owner a route reaches (an owner away or crashed will not acknowledge before it
  // comes back).
  std::size_t unacknowledged_reachable() const {
    return forwarder_.count_unacknowledged([this](std::uint64_t dest) { return reachable(dest); });
  }
  // The last instant this node had no link up at all (now, while it has none).
  std::chrono::steady_clock::time_point alone_at() const {
    return routing_.table().alone_at(std::chrono::steady_clock::now());
  }
  // Every stream, for a log; the packets held go to `held`.
  std::vector<stream_state> take_all_streams(std::vector<packet>& held) {
    // Streams to this incarnation's resource name end with it.
    auto [states, h] = forwarder_.take_streams(0, config_.space_size);
    for (auto& p : h) held.push_back(std::move(p));
    return std::move(states);
  }
  void adopt_streams(const std::vector<stream_state>& states) { forwarder_.adopt_streams(states); }

  // Fault injection: send u to every neighbour as if this node's table had produced it, as a hostile node
  // holding the cluster key could (tests/security).
  void send_forged_update(const route_update& u) { routing_.send_update(u); }
  // Fault injection: hand p to the link to neighbour next_hop whatever the routes say, as a hostile node could.
  void send_forged(node_id next_hop, packet p) { forwarder_.forward(next_hop, std::move(p)); }
  // Fault injection: close every link's connection as a network failure would, or the link to one neighbour.
  std::size_t drop_links() { return links_.drop_links(); }
  bool drop_link(node_id peer) { return links_.drop_link(peer); }

  // An in-process link with the same framing and handshake, over a connected local socket pair: for
  // simulations of many nodes in one process (bench/routing_scale). Both overlays must share io_context.
  void connect_local(overlay& other) { links_.connect_local(other.links_); }
  std::uint64_t routing_bytes_sent() const { return routing_.bytes_sent(); }
  routing_driver::traffic routing_traffic() const { return routing_.traffic_sent(); }

  // Direct reads while an application thread spins for a message (connection::begin_direct): the link that
  // brought the last data frame is read directly until end_direct_reads(); every other link, and that one
  // again afterwards, through the event loop. begin returns false when there is no such link; read_direct
  // returns connection::direct_reads_stopped once that link went back to the event loop.
  bool begin_direct_reads() { return links_.begin_direct_reads(); }
  std::size_t read_direct() { return links_.read_direct(); }
  void end_direct_reads() { links_.end_direct_reads(); }

  // What this node's routing table says now (cheap; for tests and convergence measurements).
  bool can_reach(node_id destination) const { return routing_.table().is_reachable(destination); }
  std::optional<node_id> next_hop(node_id destination) const { return routing_.table().next_hop(destination); }
  std::optional<node_id> owner_of(std::uint64_t vnode) const { return routing_.table().owner_of(vnode); }
  overlay_view view() const;
  // view().lost_owners alone; with `all`, also the records not yet orphan_after old.
  std::vector<overlay_view::lost_owner> orphaned(bool all = false) const;
  void note_lost_in_transit(node_id taker, base::interval given,
                            std::chrono::steady_clock::duration unreachable_for) {
    routing_.note_lost_in_transit(taker, given, unreachable_for);
  }

  // connection_owner
  link_resume resume_for(node_id peer) override;
  void on_connection_up(const std::shared_ptr<connection>& c) override;
  void on_connection_down(const std::shared_ptr<connection>& c, const std::string& reason) override;
  void on_data(connection& c, const data_head& head, phoenix::Bytes body) override;
  void on_freed(connection& c, std::uint64_t bytes) override;
  void on_control(connection& c, frame_type type, std::span<const std::byte> payload) override;
  void on_frames_done(connection& c) override;

 private:
  node_id self_;
  bool reachable(std::uint64_t dest) const {  // delivered here, or a route goes there
    return routing_.is_local(dest) || routing_.next_hop_for(dest).has_value();
  }
  overlay_config config_;
  link_manager links_;
  routing_driver routing_;
  bool routing_input_ = false;  // a routing frame arrived since the output was last collected (on_frames_done)
  forwarder forwarder_;
  departure departure_;
};

}  // namespace phoenix::overlay
