// overlay/forwarder.hpp — a node's packets: the bound on what it holds, delivery here, forwarding to the next
// hop through that neighbour's link session, and packets held while no route or no hop budget lets them go on
// (forwarding/waiting_room.hpp; docs/overlay.md, "Waiting messages and back-pressure").
//
// A packet for a virtual node this node assumes, or for its resource name, is delivered here; otherwise it goes
// to the next hop towards the owner; one with no route yet, or that ran out of hops, waits and is sent as soon
// as the routes change (routes_changed()), never dropped. Runs on the node's I/O context; only try_reserve() and
// account() may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <asio.hpp>

#include "base/log_budget.hpp"
#include "overlay/delivery/receive_streams.hpp"
#include "overlay/delivery/send_streams.hpp"
#include "overlay/forwarding/waiting_room.hpp"
#include "overlay/link_manager.hpp"
#include "overlay/overlay_config.hpp"
#include "overlay/packet.hpp"
#include "overlay/routing_driver.hpp"

namespace phoenix::overlay {

class forwarder {
 public:
  using deliver_fn = std::function<void(packet&&)>;

  forwarder(asio::io_context& io, const overlay_config& config, node_id self, link_manager& links,
            const routing_driver& routing, deliver_fn deliver);
  ~forwarder();
  forwarder(const forwarder&) = delete;
  forwarder& operator=(const forwarder&) = delete;

  // The bound covers everything this node holds for sending (waiting or unacknowledged by the next hop):
  // try_reserve() before an application's packet is handed over; account() as bytes come and go.
  bool try_reserve(std::uint64_t bytes);
  void account(std::int64_t delta);

  // From this node: origin, hop budget and (unless `numbered` is false) end-to-end numbers set here; its bytes
  // were reserved, and stay so until its owner acknowledges it. The runtime's own packets to virtual nodes
  // (migration queries) go unnumbered: a log drops them (a numbered packet whose predecessor was dropped would
  // wait for it for good). Its migration replies to a resource name go numbered (overlay::send_unbounded).
  void send(packet p, bool numbered = true);
  void route_in_transit(packet p);  // already on its way (from a neighbour, a log, ph_release): counted now
  // Delivers, forwards or holds. The caller has counted p's bytes.
  void route(packet p);
  // Hands p to the link to next_hop whatever the routes say (and as a hostile node could).
  void forward(node_id next_hop, packet p);
  // The routes changed: what waits is routed again, in the order it came.
  void routes_changed();

  // End-to-end delivery (docs/overlay.md). Packets of this node's that a first hop acknowledged (link_session::
  // take_departed), their bytes already counted out: kept until their owners acknowledge them. Called after
  // anything that acknowledges packets on a session (an ack, a resume, a goodbye).
  void keep_departed(link_session& session);
  void departed(std::vector<packet>& packets);  // moved from
  // Every acknowledgement this node owes goes now (a node about to leave).
  void flush_acks();
  // A link went down: if it stays down for end_to_end_resend, copies of this node's packets it did not
  // acknowledge go another way (link_session::copy_stranded): its peer may have crashed.
  void link_lost();
  // The streams to [lo, hi) leave with the interval, with the packets held for it before their predecessors.
  std::pair<std::vector<stream_state>, std::vector<packet>> take_streams(std::uint64_t lo, std::uint64_t hi);
  void adopt_streams(const std::vector<stream_state>& states);
  // Every packet this node keeps goes out again within end_to_end_resend, however far it backed off (a node
  // about to leave waits that long for its owners' acknowledgements).
  void send_all_again();
  // What this node (and earlier incarnations, see route_logged) sent that no owner acknowledged yet (for the
  // finalize log; the streams stay numbered).
  std::vector<packet> take_unacknowledged();
  // A packet from the log of an earlier incarnation, counted now: its own packets kept again (docs/overlay.md).
  void route_logged(packet p);
  // Streams of packets kept here (this node's, and earlier incarnations') whose destination satisfies pred.
  std::size_t count_unacknowledged(const std::function<bool(std::uint64_t)>& pred) const;
  const receive_streams& received() const { return received_; }
  std::uint64_t duplicates_dropped() const { return duplicates_; }

  std::uint64_t waiting_from(node_id neighbour) const { return waiting_.bytes_from(neighbour); }
  const waiting_room& waiting() const { return waiting_; }
  std::deque<packet> take_waiting() { return waiting_.take_all(); }
  std::uint64_t out_of_hops() const { return out_of_hops_; }
  // Streams to resource names given up: their incarnation had no route through the longest backoff.
  std::uint64_t streams_given_up() const { return streams_given_up_; }

 private:
  void hold(packet p);
  void hold_out_of_hops(packet p);
  bool gone_for_good(const packet& p, std::chrono::steady_clock::time_point now) const;
  void drop_waiting(packet p);
  void release_held_acks();
  void deliver_numbered(packet p);  // to a virtual node or this resource name: in stream order, once
  void on_stream_acks(const packet& p);
  void on_stream_acks_for(const packet& p);
  bool apply_acks(send_streams& own, const std::vector<stream_ack>& acks);
  void warn_bad_acks(const packet& p);
  send_streams* own_of(node_id source);  // the packets of `source` kept here: this node's, or an earlier one's
  // f(send_streams&) on this node's and every earlier incarnation's.
  template <class F>
  void for_each_own(F f) {
    f(sent_);
    for (auto& [name, own] : inherited_) f(own);
  }
  template <class F>
  void for_each_own(F f) const {
    f(sent_);
    for (const auto& [name, own] : inherited_) f(own);
  }
  void owe_acks(node_id source, bool at_once);
  void send_acks(node_id source);
  void arm_resend();
  void owners_found();
  void rearm_resend();
  void send_stranded();

  const overlay_config& config_;
  node_id self_;
  link_manager& links_;
  const routing_driver& routing_;
  deliver_fn deliver_;
  waiting_room waiting_;
  std::atomic<std::uint64_t> held_bytes_{0};
  asio::steady_timer hop_retry_timer_;  // armed while a packet out of hops waits (see hold_out_of_hops)
  bool hop_retry_armed_ = false;
  std::uint64_t out_of_hops_ = 0;
  // Resource names that packets wait here for with no route, and since when (what the sweep judges by).
  std::unordered_map<std::uint64_t, std::chrono::steady_clock::time_point> no_route_since_;
  asio::steady_timer sweep_timer_;  // armed while anything is in no_route_since_
  bool sweep_armed_ = false;

  send_streams sent_;
  // Packets earlier incarnations of this node numbered, from their logs, by the incarnation's resource name.
  std::unordered_map<node_id, send_streams> inherited_;
  receive_streams received_;
  std::vector<packet> departed_;  // keep_departed's, kept for its capacity
  // Virtual nodes whose kept packets found nobody assuming them when due (owners_found() hastens them).
  std::unordered_set<std::uint64_t> ownerless_;
  asio::steady_timer resend_timer_;  // armed for sent_.next_due() while anything is kept
  std::optional<std::chrono::steady_clock::time_point> resend_at_;
  asio::steady_timer stranded_timer_;  // armed while a link is down, for send_stranded
  bool stranded_armed_ = false;
  asio::steady_timer ack_timer_;  // armed while acknowledgements are owed
  // False once destroyed: a wait that completed before the destructor's cancel() still runs its handler.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  bool ack_armed_ = false;
  std::chrono::steady_clock::time_point expired_at_{};
  std::uint64_t duplicates_ = 0;
  std::uint64_t streams_given_up_ = 0;
  base::log_budget stream_log_{std::chrono::seconds(10), 5};  // what a peer's numbers or acks can make it log
};

}  // namespace phoenix::overlay
