// overlay.hpp — one node's part of the overlay network (Phoenix paper, section 5).
//
// The overlay keeps links to the endpoints it was given (ph_add_port) and to whoever connects to it, runs
// DSDV with Babel's feasibility condition over them (route_table.hpp), and moves packets hop by hop towards
// the node that assumes their destination:
//   - a packet for a virtual node this node assumes, or for its resource name, is delivered locally;
//   - otherwise it goes to the next hop towards the owner, through that neighbour's reliable link_session;
//   - a packet with no route yet (nobody assumes the virtual node, or the route is not known yet), or one
//     that ran out of hops, waits here and is sent as soon as the routing table changes — never dropped.
//
// Threads: everything runs on the node's I/O context, by whichever thread holds the node's progress token.
// Only try_reserve() may be called from any thread. Nothing blocks.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include <asio.hpp>

#include "overlay/transports/address.hpp"
#include "overlay/links/connection.hpp"
#include "base/interval_set.hpp"
#include "overlay/links/link_session.hpp"
#include "base/log_budget.hpp"
#include "overlay/links/listener.hpp"
#include "overlay/packet.hpp"
#include "overlay/routing/route_table.hpp"
#include "overlay/transports/ssh_session.hpp"
#include "overlay/transports/transport.hpp"
#include "overlay/forwarding/waiting_room.hpp"

namespace phoenix::overlay {

struct overlay_config {
  std::string name;
  std::uint64_t space_size = std::uint64_t{1} << 62;
  std::vector<std::byte> cluster_key;
  // The key is public (no key was configured): listen and dial on loopback addresses only.
  bool loopback_only = false;
  // What protects frames after the handshake (frame_protection.hpp); a link takes the stronger of both ends'.
  protection_mode link_protection = protection_mode::integrity;
  std::chrono::milliseconds retry_interval{1000};
  std::uint64_t max_waiting_bytes = 256ull << 20;
  // Packets from one neighbour that wait here for a route, at most (then its acks are held back: its window
  // fills and it holds the rest itself; nothing is dropped). See docs/security.md, "Resources".
  std::uint64_t max_waiting_per_neighbour_bytes = 16ull << 20;
  std::uint64_t max_message_bytes = 64ull << 20;
  std::uint64_t link_window_bytes = 8ull << 20;  // announced to each neighbour; it sends at most this unacked
  bool fault_ignore_peer_window = false;         // fault injection (tests): send beyond neighbours' windows
  std::chrono::milliseconds full_dump_interval{10000};
  std::uint8_t hop_limit = 64;
  // A packet that used up its hops is tried again after this with a fresh budget, unless the routes change
  // first (overlay::hold_out_of_hops). Long against a loopback hop, short against what a loop costs.
  std::chrono::milliseconds hop_retry{100};
  ssh_options ssh;  // ssh:// links: identity, known_hosts, host key policy, keepalives
  admission_limits admission;  // accepted connections: handshakes in progress, accept() backoff
  // A record per resource name this node linked with (its link session, about 2 KB). One whose link is down
  // and that never carried a data packet either way is forgotten after neighbour_expiry; at max_neighbours a
  // link from a new name first makes room by forgetting such a record, and is closed if there is none.
  std::size_t max_neighbours = 4096;
  std::chrono::milliseconds neighbour_expiry{60000};
};

// What introspection returns (the shell's `routes` and `links`).
struct link_view {
  node_id peer = 0;
  std::string peer_name;
  std::string address;
  std::string state;
  bool outbound = false;
  std::uint64_t unacked = 0;
  std::uint64_t bytes_queued = 0;
  bool acks_held = false;  // too much of what it sent waits here for a route: it gets no acks until released
};
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
  std::error_code listen(const std::string& address, std::string& bound, std::string* error = nullptr);
  std::error_code add_port(const std::string& address, std::string* error = nullptr);

  // Messages. An application's packet first reserves its bytes against max_waiting_bytes (any thread, so
  // ph_send can refuse with PH_EAGAIN before handing the packet to the I/O context), then send() takes it
  // and sets its origin and hop budget. route_in_transit() takes a packet that was already on its way (put
  // back by ph_release, read from a log, or arriving from a neighbour) and delivers, forwards or holds it.
  bool try_reserve(std::uint64_t bytes);
  void send(packet p);  // precondition: try_reserve(p.footprint()) succeeded
  // The runtime's own packets (migration messages, bounded by their protocol): sent past the bound.
  void send_unbounded(packet p);
  void route_in_transit(packet p);

  // Mapping: the intervals of [0, L) this node assumes.
  base::interval_set::result assume(base::interval s);
  base::interval_set::result release(base::interval s);
  bool assumes(std::uint64_t vnode) const { return own_.contains(vnode); }
  const base::interval_set& assumed() const { return own_; }

  // Leaving: tell every neighbour `leaving` (links keep being accepted and redialled, so that one that breaks
  // now comes back and its session delivers what it holds); each stops routing through this
  // node, re-routes what it had not yet sent here, and answers `leaving_ack`, after which nothing more arrives
  // from it. Once every neighbour answered and everything this node holds was forwarded and acknowledged
  // (the caller waits for is_drained() with a deadline), say goodbye to every neighbour and close. So a
  // finalizing node drops nothing it was forwarding for others (docs/overlay.md, "Leaving").
  void begin_shutdown();
  // Every neighbour answered leaving, nothing waits for a route and everything was acknowledged. With
  // wait_for_resource_names false, packets for resource names hold nothing back when they wait for a route or
  // sit on a link that is down: after a grace, a leaver stops waiting for incarnations that crashed (resource
  // names are never reused, so no later node can take them). Packets for virtual nodes always count.
  bool is_drained(bool wait_for_resource_names = true) const;
  // Then say goodbye: the final ack, after which this node takes no data. Every neighbour must answer
  // goodbye_ack (the caller waits for is_farewelled() with a deadline): one whose link broke, before this node
  // began leaving or since, is redialled or accepted again and told again, because a neighbour that never hears
  // the final ack keeps what it sent here for an incarnation that will not come back. Only a neighbour whose
  // link has stayed down for `presumed_crashed_after` since this node began saying goodbye (a cut link is
  // redialled sooner) is not waited for.
  void say_goodbye();
  bool is_farewelled(std::chrono::steady_clock::duration presumed_crashed_after) const;
  // Then stop accepting and dialling, and wait for is_quiet() before closing.
  void stop_linking();
  bool is_quiet() const;    // nothing left to write on any link
  std::vector<packet> take_undelivered();  // waiting packets and any still unacknowledged by a neighbour

  // Fault injection: send u to every neighbour as if this node's table had produced it, as a hostile node
  // holding the cluster key could (tests/security).
  void send_forged_update(const route_update& u) { send_update(u); }
  // Fault injection: hand p to the link to neighbour next_hop whatever the routes say, as a hostile node could.
  void send_forged(node_id next_hop, packet p) { forward(next_hop, std::move(p)); }
  std::size_t drop_links();  // fault injection: close every link's connection as a network failure would
  bool drop_link(node_id peer);  // the same for the link to one neighbour

  // An in-process link with the same framing and handshake, over a connected local socket pair: for
  // simulations of many nodes in one process (bench/routing_scale). Both overlays must share io_context.
  void connect_local(overlay& other);
  std::uint64_t routing_bytes_sent() const { return routing_bytes_sent_; }

  // Direct reads while an application thread spins for a message (connection::begin_direct): the link that
  // brought the last data frame is read directly until end_direct_reads(); every other link, and that one
  // again afterwards, through the event loop. begin returns false when there is no such link; read_direct
  // returns connection::direct_reads_stopped once that link went back to the event loop.
  bool begin_direct_reads();
  std::size_t read_direct();
  void end_direct_reads();

  // What this node's routing table says now (cheap; for tests and convergence measurements).
  bool can_reach(node_id destination) const { return table_.is_reachable(destination); }
  std::optional<node_id> owner_of(std::uint64_t vnode) const { return table_.owner_of(vnode); }
  overlay_view view() const;

  // connection_owner
  link_resume resume_for(node_id peer) override;
  void on_connection_up(const std::shared_ptr<connection>& c) override;
  void on_connection_down(const std::shared_ptr<connection>& c, const std::string& reason) override;
  void on_data(connection& c, const data_head& head, phoenix::Bytes body) override;
  void on_freed(connection& c, std::uint64_t bytes) override;
  void on_control(connection& c, frame_type type, std::span<const std::byte> payload) override;

 private:
  bool is_leaving(node_id peer) const;
  struct neighbour {
    explicit neighbour(std::uint64_t window_bytes) : session(window_bytes) {}
    link_session session;
    std::shared_ptr<connection> conn;
    // The secret of the connection that is (or last was) the link: a new connection displaces a working one
    // only if the peer proves it holds it (handshake.hpp, "session continuity").
    std::optional<secret_bytes> secret;
    std::string name;
    bool said_goodbye = false;
    bool leaving = false;       // it told us it is finalizing: not a next hop any more
    bool acked_leaving = false;         // we are finalizing, and it answered
    bool acked_goodbye = false;         // we said goodbye, and it answered
    std::chrono::steady_clock::time_point down_since{};  // when its last link went down (while it has none)
  };
  struct dialer {
    address target;
    std::string text;
    std::unique_ptr<asio::steady_timer> timer;
    std::shared_ptr<connection> conn;
    node_id peer = 0;  // learned at the first handshake
    unsigned failures = 0;
    base::log_budget refusal_log{std::chrono::minutes(1)};  // a refusal is a configuration problem: warn once a minute
  };

  void route(packet p);
  bool is_local(std::uint64_t dest) const;
  std::optional<node_id> next_hop_for(std::uint64_t dest) const;
  void forward(node_id next_hop, packet p);
  void hold(packet p);
  void hold_out_of_hops(packet p);
  void flush_waiting();
  void release_held_acks();
  void account(std::int64_t delta);

  bool refuses_address(const address& a, std::string* error) const;  // loopback_only and not loopback
  void dial(dialer& d);
  transport& transport_for(address::scheme_t scheme);
  void schedule_redial(dialer& d, unsigned intervals = 1);
  void log_link_failure(const std::string& endpoint, bool refused, unsigned failures, const std::string& reason,
                        base::log_budget& refusals);
  dialer* dialer_of(const connection& c);
  void start_connection(std::shared_ptr<connection> c);
  void end_handshake(const std::shared_ptr<connection>& c);
  void arm_memory_trim();
  bool keeps_existing(const connection& existing, const connection& incoming) const;
  bool is_unused(node_id id, const neighbour& nb) const;
  bool make_room_for_neighbour();
  void forget_unused_neighbours(std::chrono::steady_clock::time_point now);
  void refuse_displacement(const std::shared_ptr<connection>& c, const neighbour& nb);
  void drop(connection& c, const std::string& reason);

  void routing_changed();
  void arm_routing_timer();
  void on_routing_timer();
  void send_update(const route_update& u);
  void send_request(node_id to, const route_request& r);

  asio::io_context& io_;
  overlay_config config_;
  node_id self_;
  deliver_fn deliver_;
  connection_params conn_params_;
  std::unique_ptr<listener> listener_;
  std::vector<std::unique_ptr<dialer>> dialers_;
  std::set<std::shared_ptr<connection>> handshaking_;
  tcp_transport tcp_;
  ssh_transport ssh_;
  std::unordered_map<node_id, std::unique_ptr<neighbour>> neighbours_;
  node_id last_data_from_ = 0;            // the neighbour whose link brought the last data frame
  std::shared_ptr<connection> direct_;    // its connection, while read directly
  route_table table_;
  std::uint64_t seen_generation_ = 0;
  asio::steady_timer routing_timer_;
  asio::steady_timer hop_retry_timer_;  // armed while a packet out of hops waits (see hold_out_of_hops)
  bool hop_retry_armed_ = false;
  asio::steady_timer trim_timer_;  // armed while closed connections' memory waits to go back (arm_memory_trim)
  bool trim_armed_ = false;
  base::interval_set own_;
  waiting_room waiting_;
  std::uint64_t links_lost_ = 0;
  std::uint64_t frames_rejected_ = 0;
  std::uint64_t neighbours_forgotten_ = 0;
  std::uint64_t neighbours_refused_ = 0;
  std::uint64_t out_of_hops_ = 0;
  std::uint64_t routing_bytes_sent_ = 0;
  std::atomic<std::uint64_t> held_bytes_{0};
  // Warnings anyone can trigger: refused connections that came in (from any number of addresses, so one budget
  // for all of them) and connections that claimed a working link without proving they continue it.
  base::log_budget inbound_refusal_log_{std::chrono::minutes(1), 5};
  base::log_budget displacement_log_{std::chrono::minutes(1)};
  base::log_budget neighbour_limit_log_{std::chrono::minutes(1)};
  bool leaving_ = false;         // begin_shutdown: neighbours are told; links still accepted and redialled
  bool saying_goodbye_ = false;  // say_goodbye: every link that comes up hears goodbye at once
  std::chrono::steady_clock::time_point goodbye_since_{};  // when say_goodbye was called
  bool shutting_down_ = false;   // stop_linking: no more accepting or dialling
};

}  // namespace phoenix::overlay
