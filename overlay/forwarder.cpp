#include "overlay/forwarder.hpp"

#include "overlay/log.hpp"

namespace phoenix::overlay {

forwarder::forwarder(asio::io_context& io, const overlay_config& config, node_id self, link_manager& links,
                     const routing_driver& routing, deliver_fn deliver)
    : config_(config),
      self_(self),
      links_(links),
      routing_(routing),
      deliver_(std::move(deliver)),
      hop_retry_timer_(io) {}

forwarder::~forwarder() { hop_retry_timer_.cancel(); }

void forwarder::account(std::int64_t delta) {
  held_bytes_.fetch_add(static_cast<std::uint64_t>(delta), std::memory_order_relaxed);
}

// The bound covers everything this node holds for sending (waiting or unacknowledged by the next hop), so a
// burst of sends from application threads is refused at once, not silently dropped later.
bool forwarder::try_reserve(std::uint64_t bytes) {
  const auto before = held_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  if (before + bytes <= config_.max_waiting_bytes) return true;
  held_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  return false;
}

void forwarder::send(packet p) {
  p.source = self_;
  p.hops_left = config_.hop_limit;
  route(std::move(p));
}

void forwarder::route_in_transit(packet p) {
  account(static_cast<std::int64_t>(p.footprint()));
  route(std::move(p));
}

void forwarder::route(packet p) {
  if (routing_.is_local(p.dest)) {
    account(-static_cast<std::int64_t>(p.footprint()));
    deliver_(std::move(p));
    return;
  }
  if (p.hops_left == 0) return hold_out_of_hops(std::move(p));
  // Behind packets for the same destination that wait here: a route that came back before routes_changed() ran
  // must not let a newer packet overtake them.
  if (waiting_.holds_for(p.dest)) return hold(std::move(p));
  const auto nh = routing_.next_hop_for(p.dest);
  if (!nh) return hold(std::move(p));
  --p.hops_left;
  forward(*nh, std::move(p));
}

void forwarder::forward(node_id next_hop, packet p) {
  neighbour& nb = links_.record(next_hop);
  nb.session.enqueue(std::move(p));
  if (nb.conn) nb.conn->send_pending();
}

// A neighbour can send packets for destinations nobody routes to, and this node acknowledges what it receives
// at once: past max_waiting_per_neighbour_bytes of its packets waiting here, its acks are held back, so its
// window fills and the rest waits at the sender, bounded by its own max_waiting_bytes (an application there
// gets PH_EAGAIN). Nothing is dropped; the link carries nothing new from it until the routes change.
void forwarder::hold(packet p) {
  const node_id from = p.arrived_from;
  const std::uint64_t from_bytes = waiting_.hold(std::move(p));
  if (!from || from_bytes <= config_.max_waiting_per_neighbour_bytes) return;
  neighbour* nb = links_.find(from);
  if (!nb || nb->session.acks_held()) return;
  nb->session.hold_acks(true);
  logger()->info("{}: {} sent {} bytes that wait here for a route: holding back its acks", config_.name, nb->name,
                 from_bytes);
}

// After waiting packets were routed again: a neighbour whose packets no longer wait here beyond the bound gets
// its acks again (after the routing, so that one still over it never sees an ack go out in between).
void forwarder::release_held_acks() {
  for (auto& [id, nb] : links_.neighbours()) {
    if (!nb->session.acks_held() || waiting_.bytes_from(id) > config_.max_waiting_per_neighbour_bytes) continue;
    nb->session.hold_acks(false);
    if (nb->conn) nb->conn->send_pending();
  }
}

// The hop limit is the last guard against a loop: hold, never drop. Routes to a source are loop-free
// (route_table.hpp), but which source assumes a virtual node is every node's own view while a migration's
// updates spread, and two nodes that disagree can pass a packet back and forth until one of them learns.
// The updates that end such a loop may all have arrived at the node holding the packet, so its next routing
// change may never come: the packet is tried again after config.hop_retry whatever happens, and sooner if the
// routes change. A loop that outlasts the retry costs one budget of hops per retry, and shows in out_of_hops.
void forwarder::hold_out_of_hops(packet p) {
  ++out_of_hops_;
  logger()->debug("{}: a packet for {} from {:x} used up its hops; held for {} ms", config_.name, p.dest,
                  p.source, config_.hop_retry.count());
  hold(std::move(p));
  if (hop_retry_armed_) return;
  hop_retry_armed_ = true;
  hop_retry_timer_.expires_after(config_.hop_retry);
  hop_retry_timer_.async_wait([this](std::error_code ec) {
    if (ec) return;
    hop_retry_armed_ = false;
    routes_changed();
  });
}

// Waiting packets go out in the order they came, each either sent or held again behind the ones before it.
void forwarder::routes_changed() {
  if (waiting_.empty()) return;
  for (auto& p : waiting_.take_all()) {
    if (p.hops_left == 0) p.hops_left = config_.hop_limit;
    route(std::move(p));
  }
  release_held_acks();
}

}  // namespace phoenix::overlay
