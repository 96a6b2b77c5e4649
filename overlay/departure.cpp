#include "overlay/departure.hpp"

#include <algorithm>

namespace phoenix::overlay {

namespace {
using clock = std::chrono::steady_clock;
}  // namespace

// Links keep being accepted and redialled while the node drains: a link that breaks now must come back for
// its session to deliver what it holds (resending anything else could duplicate it).
void departure::begin_shutdown() {
  leaving_ = true;
  forwarding_.flush_acks();  // the senders of what this node delivered stop keeping it
  routing_.withdraw();  // before `leaving`: each neighbour passes the withdrawal on before it loses the route
  for (auto& [id, nb] : links_.neighbours())
    if (nb->is_up()) nb->conn->send_control(make_control_frame(frame_type::leaving, {}));
}

bool departure::is_drained(bool wait_for_resource_names) const {
  for (const auto& p : forwarding_.waiting().packets())
    if (wait_for_resource_names || p.dest < config_.space_size) return false;
  for (const auto& [id, nb] : links_.neighbours()) {
    const bool link_down = !nb->is_up();
    if (!wait_for_resource_names && link_down && nb->session.holds_only_beyond(config_.space_size)) continue;
    if (!nb->session.is_idle()) return false;
    if (nb->is_up() && !nb->acked_leaving) return false;
  }
  return true;
}

void departure::say_goodbye() {
  forwarding_.flush_acks();  // ahead of the goodbye on each link: for what arrived while this node drained
  saying_goodbye_ = true;
  goodbye_since_ = clock::now();
  // Acknowledge everything received, so the neighbour resends nothing to an incarnation that is gone, and
  // take nothing more: what the neighbour sends from now on it routes another way when the link closes.
  for (auto& [id, nb] : links_.neighbours())
    if (nb->is_up()) nb->conn->send_goodbye();
}

// Every neighbour may hold unacknowledged packets for this node: it must hear the final ack. That includes one
// whose link broke just before this node began leaving, or while it did: the link comes back (whichever end
// dials redials) and after_resend() says goodbye again. One whose link has stayed down longer than
// `presumed_crashed_after` is a crashed or long-gone node and is not waited for -- counted from when this node
// began saying goodbye at the earliest: time this node itself did not run (stopped, paused, swapped out) says
// nothing about the neighbour, and a link cut just before such a stall came back as soon as both ran again.
bool departure::is_farewelled(clock::duration presumed_crashed_after) const {
  const auto now = clock::now();
  // A forgotten neighbour record (forget_unused_neighbours) was down long before: kept, it would be waited for
  // until presumed_crashed_after from the goodbye, since the neighbour may hold a packet for this node that
  // never arrived. Forgotten ones are waited for the same.
  if (links_.neighbours_forgotten() > 0 && now - goodbye_since_ < presumed_crashed_after) return false;
  for (const auto& [id, nb] : links_.neighbours()) {
    // While a connection exists (up, in its handshake or closing), the neighbour may still answer; once it is
    // gone, link_manager::link_down has set down_since.
    if (!nb->acked_goodbye &&
        (nb->conn || now - std::max(nb->down_since, goodbye_since_) < presumed_crashed_after))
      return false;
  }
  return true;
}

std::vector<packet> departure::take_undelivered() {
  std::vector<packet> out;
  for (auto& p : forwarding_.take_waiting()) out.push_back(std::move(p));
  for (auto& [id, nb] : links_.neighbours()) {
    forwarding_.keep_departed(nb->session);
    for (auto& p : nb->session.take_all()) out.push_back(std::move(p));
  }
  for (auto& p : links_.take_superseded()) out.push_back(std::move(p));
  for (auto& p : forwarding_.take_unacknowledged()) out.push_back(std::move(p));
  return out;
}

void departure::before_resend(neighbour& nb) {
  nb.acked_leaving = false;  // a leaving node waits for the answer on this connection, behind what it carries
  if (!leaving_) return;
  // The withdrawal first (the own entry, triggered by the link-up): a neighbour ignores routing from a leaver,
  // and one that missed it while the link was down would take this node for a lost owner.
  routing_.changed();
  nb.conn->send_control(make_control_frame(frame_type::leaving, {}));
}

void departure::after_resend(neighbour& nb) {
  if (saying_goodbye_) nb.conn->send_goodbye();  // the final ack, which the peer may have missed on a broken link
}

std::optional<std::string> departure::on_frame(connection& c, frame_type type, std::span<const std::byte> payload) {
  neighbour* nb = links_.find(c.peer());
  switch (type) {
    case frame_type::goodbye: {
      const auto ack = decode_ack_payload(payload);
      if (!ack || !nb) return "bad goodbye";
      if (const auto freed = nb->session.on_ack(*ack)) forwarding_.account(-static_cast<std::int64_t>(*freed));
      forwarding_.keep_departed(nb->session);
      nb->said_goodbye = true;
      c.send_control(make_control_frame(frame_type::goodbye_ack, {}));
      return std::nullopt;
    }
    case frame_type::goodbye_ack:
      if (!nb || !saying_goodbye_) return "unexpected goodbye_ack";
      nb->acked_goodbye = true;
      return std::nullopt;
    case frame_type::leaving:
      // Route nothing more through the leaver; what was queued for it but never sent goes another way (or
      // waits). What it was sent stays in the session: it acknowledges that as usual before it closes.
      if (!nb) return "leaving from an unknown neighbour";
      nb->leaving = true;
      routing_.neighbour_down(c.peer());
      for (auto& p : nb->session.take_unsent()) forwarding_.route(std::move(p));
      c.send_control(make_control_frame(frame_type::leaving_ack, {}));
      routing_.changed();
      return std::nullopt;
    case frame_type::leaving_ack:
      if (!nb || !leaving_) return "unexpected leaving_ack";
      nb->acked_leaving = true;
      return std::nullopt;
    default:
      return std::string("unexpected ") + to_string(type);
  }
}

}  // namespace phoenix::overlay
