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

#include <asio.hpp>

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

  void send(packet p);  // from this node: origin and hop budget set here; its bytes were reserved
  void route_in_transit(packet p);  // already on its way (from a neighbour, a log, ph_release): counted now
  // Delivers, forwards or holds. The caller has counted p's bytes.
  void route(packet p);
  // Hands p to the link to next_hop whatever the routes say (and as a hostile node could).
  void forward(node_id next_hop, packet p);
  // The routes changed: what waits is routed again, in the order it came.
  void routes_changed();

  std::uint64_t waiting_from(node_id neighbour) const { return waiting_.bytes_from(neighbour); }
  const waiting_room& waiting() const { return waiting_; }
  std::deque<packet> take_waiting() { return waiting_.take_all(); }
  std::uint64_t out_of_hops() const { return out_of_hops_; }

 private:
  void hold(packet p);
  void hold_out_of_hops(packet p);
  void release_held_acks();

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
};

}  // namespace phoenix::overlay
