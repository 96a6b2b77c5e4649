// overlay_departure.cpp — a finalizing node's way out: drain what it holds, say goodbye, stop linking, hand back
// what is left for the message log (overlay.hpp; docs/overlay.md, "Leaving and coming back").
#include "overlay/overlay.hpp"

#include <algorithm>

#include "overlay/log.hpp"

namespace phoenix::overlay {

namespace {
using clock = std::chrono::steady_clock;
}  // namespace

// Links keep being accepted and redialled while the node drains: a link that breaks now must come back for
// its session to deliver what it holds (resending anything else could duplicate it).
void overlay::begin_shutdown() {
  leaving_ = true;
  for (auto& [id, nb] : neighbours_)
    if (nb->conn && nb->conn->is_up()) nb->conn->send_control(make_control_frame(frame_type::leaving, {}));
}

bool overlay::is_drained(bool wait_for_resource_names) const {
  for (const auto& p : waiting_.packets())
    if (wait_for_resource_names || p.dest < config_.space_size) return false;
  for (const auto& [id, nb] : neighbours_) {
    const bool link_down = !nb->conn || !nb->conn->is_up();
    if (!wait_for_resource_names && link_down && nb->session.holds_only_beyond(config_.space_size)) continue;
    if (!nb->session.is_idle()) return false;
    if (nb->conn && nb->conn->is_up() && !nb->acked_leaving) return false;
  }
  return true;
}

void overlay::say_goodbye() {
  saying_goodbye_ = true;
  goodbye_since_ = clock::now();
  // Acknowledge everything received, so the neighbour resends nothing to an incarnation that is gone, and
  // take nothing more: what the neighbour sends from now on it routes another way when the link closes.
  for (auto& [id, nb] : neighbours_)
    if (nb->conn && nb->conn->is_up()) nb->conn->send_goodbye();
}

// Every neighbour may hold unacknowledged packets for this node: it must hear the final ack. That includes one
// whose link broke just before this node began leaving, or while it did: the link comes back (whichever end
// dials redials) and on_connection_up says goodbye again. One whose link has stayed down longer than
// `presumed_crashed_after` is a crashed or long-gone node and is not waited for -- counted from when this node
// began saying goodbye at the earliest: time this node itself did not run (stopped, paused, swapped out) says
// nothing about the neighbour, and a link cut just before such a stall came back as soon as both ran again.
bool overlay::is_farewelled(clock::duration presumed_crashed_after) const {
  const auto now = clock::now();
  // A forgotten neighbour record (forget_unused_neighbours) was down long before: kept, it would be waited for
  // until presumed_crashed_after from the goodbye, since the neighbour may hold a packet for this node that
  // never arrived. Forgotten ones are waited for the same.
  if (neighbours_forgotten_ > 0 && now - goodbye_since_ < presumed_crashed_after) return false;
  for (const auto& [id, nb] : neighbours_) {
    // While a connection exists (up, in its handshake or closing), the neighbour may still answer; once it is
    // gone, on_connection_down has set down_since.
    if (!nb->acked_goodbye &&
        (nb->conn || now - std::max(nb->down_since, goodbye_since_) < presumed_crashed_after))
      return false;
  }
  return true;
}

void overlay::stop_linking() {
  shutting_down_ = true;
  if (listener_) listener_->close();
  for (auto& d : dialers_) d->timer->cancel();
}

bool overlay::is_quiet() const {
  for (const auto& [id, nb] : neighbours_)
    if (nb->conn && nb->conn->is_up() && nb->conn->bytes_queued() > 0) return false;
  return true;
}

std::vector<packet> overlay::take_undelivered() {
  std::vector<packet> out;
  for (auto& p : waiting_.take_all()) out.push_back(std::move(p));
  for (auto& [id, nb] : neighbours_)
    for (auto& p : nb->session.take_all()) out.push_back(std::move(p));
  return out;
}

}  // namespace phoenix::overlay
