// overlay_forwarding.cpp — the overlay's messages: the bound on waiting bytes, delivery to this node,
// forwarding to the next hop, and packets held while no route or no hop budget lets them go on (overlay.hpp;
// docs/overlay.md, "Waiting messages and back-pressure").
#include "overlay/overlay.hpp"

#include <algorithm>

#include "overlay/log.hpp"

namespace phoenix::overlay {

namespace {
using clock = std::chrono::steady_clock;
}  // namespace

void overlay::account(std::int64_t delta) {
  held_bytes_.fetch_add(static_cast<std::uint64_t>(delta), std::memory_order_relaxed);
}

// The bound covers everything this node holds for sending (waiting or unacknowledged by the next hop), so a
// burst of sends from application threads is refused at once, not silently dropped later.
bool overlay::try_reserve(std::uint64_t bytes) {
  const auto before = held_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  if (before + bytes <= config_.max_waiting_bytes) return true;
  held_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  return false;
}

void overlay::send(packet p) {
  p.source = self_;
  p.hops_left = config_.hop_limit;
  route(std::move(p));
}

void overlay::send_unbounded(packet p) {
  account(static_cast<std::int64_t>(p.footprint()));
  send(std::move(p));
}

void overlay::on_data(connection& c, const data_head& head, phoenix::Bytes body) {
  last_data_from_ = c.peer();
  route_in_transit(packet{head.dest, head.source, head.tag, head.hops_left, std::move(body), c.peer()});
}

bool overlay::begin_direct_reads() {
  const auto it = neighbours_.find(last_data_from_);
  std::shared_ptr<connection> c = it == neighbours_.end() ? nullptr : it->second->conn;
  if (c != direct_) end_direct_reads();
  if (!c || !c->begin_direct()) return false;
  direct_ = std::move(c);
  return true;
}

std::size_t overlay::read_direct() { return direct_ ? direct_->read_direct() : connection::direct_reads_stopped; }

void overlay::end_direct_reads() {
  if (!direct_) return;
  direct_->end_direct();
  direct_ = nullptr;
}

void overlay::route_in_transit(packet p) {
  account(static_cast<std::int64_t>(p.footprint()));
  route(std::move(p));
}

bool overlay::is_local(std::uint64_t dest) const {
  return dest == self_ || (dest < config_.space_size && own_.contains(dest));
}

std::optional<node_id> overlay::next_hop_for(std::uint64_t dest) const {
  if (dest >= config_.space_size) return table_.next_hop(dest);
  const auto owner = table_.owner_of(dest);
  if (!owner || *owner == self_) return std::nullopt;
  return table_.next_hop(*owner);
}

void overlay::route(packet p) {
  if (is_local(p.dest)) {
    account(-static_cast<std::int64_t>(p.footprint()));
    deliver_(std::move(p));
    return;
  }
  if (p.hops_left == 0) return hold_out_of_hops(std::move(p));
  // Behind packets for the same destination that wait here: a route that came back before flush_waiting ran
  // must not let a newer packet overtake them.
  if (waiting_.holds_for(p.dest)) return hold(std::move(p));
  const auto nh = next_hop_for(p.dest);
  if (!nh) return hold(std::move(p));
  --p.hops_left;
  forward(*nh, std::move(p));
}

void overlay::forward(node_id next_hop, packet p) {
  auto& slot = neighbours_[next_hop];
  if (!slot) slot = std::make_unique<neighbour>(config_.link_window_bytes);
  slot->session.enqueue(std::move(p));
  if (slot->conn) slot->conn->send_pending();
}

// A neighbour can send packets for destinations nobody routes to, and this node acknowledges what it receives
// at once: past max_waiting_per_neighbour_bytes of its packets waiting here, its acks are held back, so its
// window fills and the rest waits at the sender, bounded by its own max_waiting_bytes (an application there
// gets PH_EAGAIN). Nothing is dropped; the link carries nothing new from it until the routes change.
void overlay::hold(packet p) {
  const node_id from = p.arrived_from;
  const std::uint64_t from_bytes = waiting_.hold(std::move(p));
  if (!from || from_bytes <= config_.max_waiting_per_neighbour_bytes) return;
  const auto it = neighbours_.find(from);
  if (it == neighbours_.end() || it->second->session.acks_held()) return;
  it->second->session.hold_acks(true);
  logger()->info("{}: {} sent {} bytes that wait here for a route: holding back its acks", config_.name,
                 it->second->name, from_bytes);
}

// After waiting packets were routed again: a neighbour whose packets no longer wait here beyond the bound gets
// its acks again (after the routing, so that one still over it never sees an ack go out in between).
void overlay::release_held_acks() {
  for (auto& [id, nb] : neighbours_) {
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
void overlay::hold_out_of_hops(packet p) {
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
    flush_waiting();
  });
}

// Waiting packets go out in the order they came, each either sent or held again behind the ones before it.
void overlay::flush_waiting() {
  if (waiting_.empty()) return;
  for (auto& p : waiting_.take_all()) {
    if (p.hops_left == 0) p.hops_left = config_.hop_limit;
    route(std::move(p));
  }
  release_held_acks();
}

base::interval_set::result overlay::assume(base::interval s) {
  const auto r = own_.add(s);
  if (r == base::interval_set::result::ok) {
    table_.set_local_intervals(own_.intervals(), clock::now());
    routing_changed();
  }
  return r;
}

base::interval_set::result overlay::release(base::interval s) {
  const auto r = own_.remove(s);
  if (r == base::interval_set::result::ok) {
    table_.set_local_intervals(own_.intervals(), clock::now());
    routing_changed();
  }
  return r;
}

}  // namespace phoenix::overlay
