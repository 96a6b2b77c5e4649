#include "overlay/overlay.hpp"

#include <utility>

namespace phoenix::overlay {

overlay::overlay(asio::io_context& io, overlay_config config, node_id self, deliver_fn deliver)
    : self_(self),
      config_(std::move(config)),
      links_(io, config_, self, *this, [this](node_id id) { return forwarder_.waiting_from(id); }),
      routing_(io, config_, self, links_, [this] { forwarder_.routes_changed(); }),
      forwarder_(io, config_, self, links_, routing_, std::move(deliver)),
      departure_(config_, links_, routing_, forwarder_) {}

overlay::~overlay() = default;

link_resume overlay::resume_for(node_id peer) { return links_.resume_for(peer); }

void overlay::on_connection_up(const std::shared_ptr<connection>& c) {
  neighbour* nb = links_.link_up(c);
  forwarder_.account(-static_cast<std::int64_t>(links_.take_resume_freed()));
  if (!nb) return;
  forwarder_.keep_departed(nb->session);
  // A neighbour that is leaving carries nothing new; a link that comes up while this node leaves is told so.
  if (!nb->leaving) routing_.neighbour_up(c->peer());  // a full dump is due at once: it gets the table
  departure_.before_resend(*nb);
  c->send_pending();  // resend what the peer did not acknowledge, before anything new
  departure_.after_resend(*nb);
  routing_.changed();
  for (auto& p : links_.take_superseded()) forwarder_.route(std::move(p));
}

void overlay::on_connection_down(const std::shared_ptr<connection>& c, const std::string& reason) {
  auto lost = links_.link_down(c, reason, departure_.leaving());
  if (!lost) return;
  forwarder_.departed(lost->departed);
  routing_.neighbour_down(lost->peer);
  for (auto& p : lost->unsent) forwarder_.route(std::move(p));
  routing_.changed();
  forwarder_.link_lost();
}

void overlay::on_data(connection& c, const data_head& head, phoenix::Bytes body) {
  links_.note_data_from(c.peer());
  forwarder_.route_in_transit(packet{head.dest, head.source, head.tag, head.hops_left, std::move(body), c.peer(),
                                     false, head.flags, head.stream_seq, head.stream_prev});
}

// Bytes a link acknowledged; this node's own numbered packets among them are kept until their owners acknowledge.
void overlay::on_freed(connection& c, std::uint64_t bytes) {
  forwarder_.account(-static_cast<std::int64_t>(bytes));
  if (neighbour* nb = links_.find(c.peer())) forwarder_.keep_departed(nb->session);
}

void overlay::on_control(connection& c, frame_type type, std::span<const std::byte> payload) {
  std::optional<std::string> error;
  switch (type) {
    case frame_type::route_update:
      error = routing_.on_update(c.peer(), payload);
      break;
    case frame_type::route_request:
      error = routing_.on_request(c.peer(), payload);
      break;
    case frame_type::route_summary:
      error = routing_.on_summary(c.peer(), payload);
      break;
    case frame_type::route_dump_request:
      error = routing_.on_dump_request(c.peer(), payload);
      break;
    default:
      if ((error = departure_.on_frame(c, type, payload))) break;
      return;
  }
  if (error) return links_.drop(c, "protocol error: " + *error);
  routing_input_ = true;
}

// Collected once per read rather than once per frame: the changes of every frame a neighbour sent since the
// last read go out merged, and a burst of forwarded requests or updates costs one collection.
void overlay::on_frames_done(connection&) {
  if (std::exchange(routing_input_, false)) routing_.changed();
}

overlay_view overlay::view() const {
  overlay_view v;
  v.self = self_;
  v.seqno = routing_.table().own_seqno();
  v.assumed = routing_.assumed().intervals();
  v.routes = routing_.table().routes();
  links_.add_views(v.links);
  v.waiting_messages = forwarder_.waiting().size();
  v.waiting_bytes = forwarder_.waiting().bytes();
  v.waiting_for = forwarder_.waiting().destinations(16);
  v.links_lost = links_.links_lost();
  v.frames_rejected = links_.frames_rejected();
  v.neighbour_records = links_.neighbours().size();
  v.neighbours_forgotten = links_.neighbours_forgotten();
  v.neighbours_refused = links_.neighbours_refused();
  v.out_of_hops = forwarder_.out_of_hops();
  v.routing_ignored = routing_.table().input_stats();
  v.lost_owners = orphaned();
  v.accept_failures = links_.accept_failures();
  v.handshakes_refused = links_.handshakes_refused();
  return v;
}

std::vector<overlay_view::lost_owner> overlay::orphaned(bool all) const {
  std::vector<overlay_view::lost_owner> out;
  const auto now = std::chrono::steady_clock::now();
  for (auto& l : routing_.table().lost_owners(now, all ? std::chrono::nanoseconds(0) : config_.orphan_after))
    out.push_back({l.source, std::move(l.intervals),
                   std::chrono::duration_cast<std::chrono::milliseconds>(now - l.since)});
  return out;
}

}  // namespace phoenix::overlay
