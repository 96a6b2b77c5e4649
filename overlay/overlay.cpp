#include "overlay/overlay.hpp"

#include <algorithm>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "overlay/log.hpp"
#include "overlay/routing/route_message.hpp"

namespace phoenix::overlay {

namespace {

using clock = std::chrono::steady_clock;

route_params make_route_params(const overlay_config& c) {
  route_params p;
  p.full_dump_interval = c.full_dump_interval;
  return p;
}

}  // namespace

overlay::overlay(asio::io_context& io, overlay_config config, node_id self, deliver_fn deliver)
    : io_(io),
      config_(std::move(config)),
      self_(self),
      deliver_(std::move(deliver)),
      tcp_(transport_context{io, *this, conn_params_}),
      ssh_(transport_context{io, *this, conn_params_}, config_.ssh, config_.name),
      table_(self, make_route_params(config_), clock::now()),
      routing_timer_(io),
      hop_retry_timer_(io),
      trim_timer_(io) {
  conn_params_.cluster_key = config_.cluster_key;
  conn_params_.protection = config_.link_protection;
  conn_params_.space_size = config_.space_size;
  conn_params_.self = self_;
  conn_params_.name = config_.name;
  conn_params_.max_payload =
      static_cast<std::uint32_t>(std::min<std::uint64_t>(config_.max_message_bytes + data_head_bytes, hard_max_payload));
  conn_params_.ack_every_bytes = std::max<std::uint64_t>(config_.link_window_bytes / 4, 64 * 1024);
  conn_params_.window_bytes = config_.link_window_bytes;
  conn_params_.ignore_peer_window = config_.fault_ignore_peer_window;
  arm_routing_timer();
}

overlay::~overlay() {
  shutting_down_ = true;
  for (auto& d : dialers_) {
    if (d->timer) d->timer->cancel();
    if (d->conn) d->conn->stop();
  }
  for (const auto& c : handshaking_) c->stop();
  for (auto& [id, nb] : neighbours_)
    if (nb->conn) nb->conn->stop();
  ssh_.close();
  if (listener_) listener_->close();
  routing_timer_.cancel();
  hop_retry_timer_.cancel();
  trim_timer_.cancel();
}

// --- links --------------------------------------------------------------------------------------------------

link_resume overlay::resume_for(node_id peer) {
  const auto it = neighbours_.find(peer);
  if (it == neighbours_.end()) return {};
  return {it->second->session.ack_to_send(), it->second->secret};
}

// Two nodes that dial each other end up with two connections. Both ends must keep the same one without
// talking about it: the one dialled by the smaller resource name; between two dialled by the same node, the
// newer (the older is a half-dead leftover of a broken link).
bool overlay::keeps_existing(const connection& existing, const connection& incoming) const {
  const node_id existing_dialer = existing.is_outbound() ? self_ : existing.peer();
  const node_id incoming_dialer = incoming.is_outbound() ? self_ : incoming.peer();
  if (existing_dialer == incoming_dialer) return false;
  return existing_dialer < incoming_dialer;
}

void overlay::on_connection_up(const std::shared_ptr<connection>& c) {
  end_handshake(c);
  const node_id peer = c->peer();
  if (auto* d = dialer_of(*c)) {
    d->peer = peer;
    d->failures = 0;
  }
  if (!neighbours_.contains(peer) && !make_room_for_neighbour()) {
    ++neighbours_refused_;
    const bool warn = neighbour_limit_log_.pass(clock::now()).has_value();
    logger()->log(warn ? spdlog::level::warn : spdlog::level::debug,
                  "{}: a link from {} ({}) via {} closed: {} neighbour records kept (max_neighbours), none unused",
                  config_.name, c->peer_name(), peer, c->remote(), neighbours_.size());
    c->stop();
    if (auto* d = dialer_of(*c)) schedule_redial(*d, 10);
    return;
  }
  auto& slot = neighbours_[peer];
  if (!slot) slot = std::make_unique<neighbour>(config_.link_window_bytes);
  neighbour& nb = *slot;
  // The peer's AUTH says how far it received: beyond what this session sent, it is not this session's peer,
  // and taking it up would free unacknowledged packets as if they had arrived. (A session that never sent
  // has nothing to free: a leaver that comes back to say goodbye again may remember an older one.)
  if (nb.session.highest_sent() > 0 && c->peer_resume_ack() > nb.session.highest_sent()) {
    logger()->warn("{}: a link claiming to be {} via {} acknowledged {} of the {} packets sent to it: closed it",
                   config_.name, peer, c->remote(), c->peer_resume_ack(), nb.session.highest_sent());
    c->stop();
    if (auto* d = dialer_of(*c)) schedule_redial(*d);
    return;
  }
  if (nb.conn && nb.conn->is_up()) {
    if (keeps_existing(*nb.conn, *c)) {
      logger()->debug("{}: second link to {} closed, keeping the first", config_.name, nb.name);
      c->stop();
      if (auto* d = dialer_of(*c)) schedule_redial(*d);
      return;
    }
    // Only the peer itself, holding the working link's secret, may replace that link: not a relay, not another
    // key holder that claims the peer's resource name.
    if (!nb.secret || !c->proves_continuity(*nb.secret)) return refuse_displacement(c, nb);
    auto old = nb.conn;
    old->stop();
    // Its dialler (if ours) goes back to watching: it redials only if this neighbour is lost again.
    if (auto* d = dialer_of(*old)) schedule_redial(*d);
  }
  nb.conn = c;
  nb.name = c->peer_name();  // only now: a refused connection must not rename the neighbour
  nb.secret = c->session_secret();
  nb.said_goodbye = false;
  c->attach(&nb.session);
  nb.session.set_window(c->send_window());
  nb.session.resume(c->peer_resume_ack());
  nb.session.note_ack_sent(c->resume_ack_sent());  // the AUTH told the peer how far this node received
  logger()->info("{}: link up to {} ({}) via {}, frames {}", config_.name, nb.name, peer, c->remote(),
                 to_string(c->protection()));
  // A neighbour that is leaving carries nothing new; a link that comes up while this node leaves is told so.
  if (!nb.leaving) table_.neighbour_up(peer, clock::now());  // a full dump is due at once: it gets the table
  nb.acked_leaving = false;  // a leaving node waits for the answer on this connection, behind what it carries
  if (leaving_) c->send_control(make_control_frame(frame_type::leaving, {}));
  c->send_pending();  // resend what the peer did not acknowledge, before anything new
  if (saying_goodbye_) c->send_goodbye();  // the final ack, which the peer may have missed on a broken link
  routing_changed();
}

// A record whose link is down and whose session never carried a data packet either way holds nothing of the
// peer's or for it: forgetting it is the same as keeping it, since both ends' sessions then start from the
// first sequence number (a packet the peer sent that never arrived is resent from 1, which a new session
// expects). Records that carried data stay: forgetting one would break its session's numbering.
bool overlay::is_unused(node_id id, const neighbour& nb) const {
  return !nb.conn && nb.session.highest_sent() == 0 && nb.session.received() == 0 && nb.session.is_idle() &&
         waiting_.bytes_from(id) == 0;
}

// A link from a new resource name at max_neighbours: forget the unused record down the longest, if it has been
// down for ten redial intervals at least (up to neighbour_expiry). A neighbour whose link blips comes back
// before that and finds its record, so a key holder's made-up names cannot take the place of a working
// neighbour's between two of its dials.
bool overlay::make_room_for_neighbour() {
  if (neighbours_.size() < config_.max_neighbours) return true;
  const auto settled = clock::now() - std::min<clock::duration>(config_.neighbour_expiry, 10 * config_.retry_interval);
  auto oldest = neighbours_.end();
  for (auto it = neighbours_.begin(); it != neighbours_.end(); ++it) {
    const neighbour& nb = *it->second;
    if (is_unused(it->first, nb) && nb.down_since <= settled &&
        (oldest == neighbours_.end() || nb.down_since < oldest->second->down_since))
      oldest = it;
  }
  if (oldest == neighbours_.end()) return false;
  neighbours_.erase(oldest);
  ++neighbours_forgotten_;
  return true;
}

void overlay::forget_unused_neighbours(clock::time_point now) {
  std::erase_if(neighbours_, [&](const auto& entry) {
    const neighbour& nb = *entry.second;
    const bool expired = is_unused(entry.first, nb) && now - nb.down_since >= config_.neighbour_expiry;
    if (expired) ++neighbours_forgotten_;
    return expired;
  });
}

void overlay::refuse_displacement(const std::shared_ptr<connection>& c, const neighbour& nb) {
  const bool warn = displacement_log_.pass(clock::now()).has_value();
  logger()->log(warn ? spdlog::level::warn : spdlog::level::debug,
                "{}: a second link claiming to be {} ({}) via {} did not prove it continues the working link's "
                "session: closed it, keeping the working link",
                config_.name, nb.name, c->peer(), c->remote());
  c->stop();
  if (auto* d = dialer_of(*c)) schedule_redial(*d);
}

void overlay::on_connection_down(const std::shared_ptr<connection>& c, const std::string& reason) {
  end_handshake(c);
  if (c->was_forged()) ++frames_rejected_;
  dialer* d = dialer_of(*c);
  const node_id peer = c->peer();
  const auto it = peer ? neighbours_.find(peer) : neighbours_.end();
  if (it != neighbours_.end() && it->second->conn == c) {
    neighbour& nb = *it->second;
    nb.conn.reset();
    nb.down_since = clock::now();
    ++links_lost_;
    logger()->log(leaving_ || nb.said_goodbye ? spdlog::level::info : spdlog::level::warn,
                  "{}: link to {} down: {}", config_.name, nb.name, reason);
    table_.neighbour_down(peer, clock::now());
    // What was never sent may take another way; what was sent stays in the session for resending when the
    // link comes back. A peer that said goodbye will not come back: everything goes elsewhere.
    auto unsent = nb.said_goodbye ? nb.session.take_all() : nb.session.take_unsent();
    if (nb.said_goodbye) neighbours_.erase(it);
    for (auto& p : unsent) route(std::move(p));
    routing_changed();
  } else {
    log_link_failure(d ? d->text : c->remote(), c->was_refused(), d ? d->failures++ : 1, reason,
                     d ? d->refusal_log : inbound_refusal_log_);
  }
  // A refused handshake is a configuration mismatch that retrying soon will not fix: back off.
  if (d) schedule_redial(*d, c->was_refused() ? 10 : 1);
  arm_memory_trim();
}

// Buffers of closed connections go back to malloc, which keeps freed heap memory for reuse: after many
// connections closed (an attack, or a cluster that shrank), the node would stay at its peak. Once a second
// at most, after connections went, hand what is free back to the system.
void overlay::arm_memory_trim() {
#if defined(__GLIBC__)
  if (trim_armed_ || shutting_down_) return;
  trim_armed_ = true;
  trim_timer_.expires_after(std::chrono::seconds(1));
  trim_timer_.async_wait([this](std::error_code ec) {
    if (ec) return;
    trim_armed_ = false;
    ::malloc_trim(0);
  });
#endif
}

// A refusal (another key, L or version) is a configuration problem: a warning, within `refusals` (the
// dialler's own, or the one all incoming connections share); past it, debug. A failed attempt is normal (the
// peer is not up yet, or unreachable): info once, then debug.
void overlay::log_link_failure(const std::string& endpoint, bool refused, unsigned failures,
                               const std::string& reason, base::log_budget& refusals) {
  if (!refused) {
    logger()->log(failures == 0 ? spdlog::level::info : spdlog::level::debug, "{}: link {} failed: {}",
                  config_.name, endpoint, reason);
    return;
  }
  if (const auto held_back = refusals.pass(clock::now()); held_back && *held_back > 0) {
    logger()->warn("{}: link {} failed: {} ({} more refusals since the last such line)", config_.name, endpoint,
                   reason, *held_back);
  } else {
    logger()->log(held_back ? spdlog::level::warn : spdlog::level::debug, "{}: link {} failed: {}",
                  config_.name, endpoint, reason);
  }
}

bool overlay::drop_link(node_id peer) {
  const auto it = neighbours_.find(peer);
  if (it == neighbours_.end() || !it->second->conn || !it->second->conn->is_up()) return false;
  drop(*it->second->conn, "dropped on request (fault injection)");
  return true;
}

void overlay::connect_local(overlay& other) {
  asio::local::stream_protocol::socket mine(io_), theirs(other.io_);
  asio::local::connect_pair(mine, theirs);
  start_connection(std::make_shared<local_connection>(*this, conn_params_, true, "local:" + other.config_.name,
                                                      std::move(mine)));
  other.start_connection(std::make_shared<local_connection>(other, other.conn_params_, false,
                                                            "local:" + config_.name, std::move(theirs)));
}

void overlay::start_connection(std::shared_ptr<connection> c) {
  handshaking_.insert(c);
  c->start();
}

// An accepted connection's handshake slot is free again once it is up or gone.
void overlay::end_handshake(const std::shared_ptr<connection>& c) {
  if (handshaking_.erase(c) && !c->is_outbound() && listener_) listener_->handshake_ended(c->remote());
}

std::size_t overlay::drop_links() {
  std::vector<std::shared_ptr<connection>> up;
  for (auto& [id, nb] : neighbours_)
    if (nb->conn && nb->conn->is_up()) up.push_back(nb->conn);
  for (auto& c : up) drop(*c, "dropped on request (fault injection)");
  return up.size();
}

void overlay::drop(connection& c, const std::string& reason) {
  auto self = c.shared_from_this();
  c.stop();
  on_connection_down(self, reason);
}

bool overlay::is_leaving(node_id peer) const {
  const auto it = neighbours_.find(peer);
  return it != neighbours_.end() && it->second->leaving;
}

void overlay::on_freed(connection&, std::uint64_t bytes) { account(-static_cast<std::int64_t>(bytes)); }

void overlay::on_control(connection& c, frame_type type, std::span<const std::byte> payload) {
  const auto now = clock::now();
  std::string error;
  switch (type) {
    case frame_type::route_update: {
      const auto u = decode_update(payload, &error);
      if (!u) return drop(c, "protocol error: bad routing update: " + error);
      if (is_leaving(c.peer())) return;  // routes through a leaving neighbour are gone for good
      table_.on_update(c.peer(), *u, now);
      break;
    }
    case frame_type::route_request: {
      const auto r = decode_request(payload, &error);
      if (!r) return drop(c, "protocol error: bad route request: " + error);
      const auto action = table_.on_request(c.peer(), *r, now);
      if (action.kind == route_table::request_action::forward) send_request(action.forward_to, action.forwarded);
      break;
    }
    case frame_type::goodbye: {
      const auto ack = decode_ack_payload(payload);
      const auto it = neighbours_.find(c.peer());
      if (!ack || it == neighbours_.end()) return drop(c, "protocol error: bad goodbye");
      if (const auto freed = it->second->session.on_ack(*ack)) account(-static_cast<std::int64_t>(*freed));
      it->second->said_goodbye = true;
      c.send_control(make_control_frame(frame_type::goodbye_ack, {}));
      return;
    }
    case frame_type::goodbye_ack: {
      const auto it = neighbours_.find(c.peer());
      if (it == neighbours_.end() || !saying_goodbye_) return drop(c, "protocol error: unexpected goodbye_ack");
      it->second->acked_goodbye = true;
      return;
    }
    case frame_type::leaving: {
      // Route nothing more through the leaver; what was queued for it but never sent goes another way (or
      // waits). What it was sent stays in the session: it acknowledges that as usual before it closes.
      const auto it = neighbours_.find(c.peer());
      if (it == neighbours_.end()) return drop(c, "protocol error: leaving from an unknown neighbour");
      it->second->leaving = true;
      table_.neighbour_down(c.peer(), now);
      for (auto& p : it->second->session.take_unsent()) route(std::move(p));
      c.send_control(make_control_frame(frame_type::leaving_ack, {}));
      break;
    }
    case frame_type::leaving_ack: {
      const auto it = neighbours_.find(c.peer());
      if (it == neighbours_.end() || !leaving_) return drop(c, "protocol error: unexpected leaving_ack");
      it->second->acked_leaving = true;
      return;
    }
    default:
      return drop(c, std::string("protocol error: unexpected ") + to_string(type));
  }
  routing_changed();
}

// --- routing ------------------------------------------------------------------------------------------------

void overlay::routing_changed() {
  const auto now = clock::now();
  if (const auto g = table_.generation(); g != seen_generation_) {
    seen_generation_ = g;
    flush_waiting();
  }
  if (auto u = table_.collect_triggered(now)) send_update(*u);
  for (const auto& [to, r] : table_.collect_requests(now)) send_request(to, r);
  arm_routing_timer();
}

void overlay::arm_routing_timer() {
  routing_timer_.expires_at(table_.next_deadline());
  routing_timer_.async_wait([this](std::error_code ec) {
    if (!ec) on_routing_timer();
  });
}

void overlay::on_routing_timer() {
  const auto now = clock::now();
  table_.expire(now);  // before collecting: expiry may change what gets advertised
  forget_unused_neighbours(now);
  if (table_.full_dump_due(now)) send_update(table_.full_dump(now));
  routing_changed();
}

void overlay::send_update(const route_update& u) {
  if (u.entries.empty() && !u.full_dump) return;
  const auto payloads = encode_update(u, conn_params_.max_payload);
  for (const auto& payload : payloads) {
    const auto frame = make_control_frame(frame_type::route_update, payload);
    for (auto& [id, nb] : neighbours_) {
      if (!nb->conn || !nb->conn->is_up()) continue;
      routing_bytes_sent_ += frame.size();
      nb->conn->send_control(frame);
    }
  }
}

void overlay::send_request(node_id to, const route_request& r) {
  const auto it = neighbours_.find(to);
  if (it == neighbours_.end() || !it->second->conn || !it->second->conn->is_up()) return;
  auto frame = make_control_frame(frame_type::route_request, encode_request(r));
  routing_bytes_sent_ += frame.size();
  it->second->conn->send_control(std::move(frame));
}

overlay_view overlay::view() const {
  overlay_view v;
  v.self = self_;
  v.seqno = table_.own_seqno();
  v.assumed = own_.intervals();
  v.routes = table_.routes();
  for (const auto& [id, nb] : neighbours_) {
    link_view l;
    l.peer = id;
    l.peer_name = nb->name;
    l.unacked = nb->session.unacked_count();
    l.bytes_queued = nb->session.bytes_held();
    l.acks_held = nb->session.acks_held();
    if (nb->conn) {
      l.address = nb->conn->remote();
      l.outbound = nb->conn->is_outbound();
      l.state = nb->conn->is_up() ? "up" : "closing";
    } else {
      l.state = "down";
    }
    v.links.push_back(std::move(l));
  }
  for (const auto& c : handshaking_) {
    link_view l;
    l.address = c->remote();
    l.outbound = c->is_outbound();
    l.state = "handshake";
    v.links.push_back(std::move(l));
  }
  v.waiting_messages = waiting_.size();
  v.waiting_bytes = waiting_.bytes();
  v.waiting_for = waiting_.destinations(16);
  v.links_lost = links_lost_;
  v.frames_rejected = frames_rejected_;
  v.neighbour_records = neighbours_.size();
  v.neighbours_forgotten = neighbours_forgotten_;
  v.neighbours_refused = neighbours_refused_;
  v.out_of_hops = out_of_hops_;
  v.routing_ignored = table_.input_stats();
  if (listener_) {
    v.accept_failures = listener_->accept_failures();
    v.handshakes_refused = listener_->handshakes_refused();
  }
  return v;
}

}  // namespace phoenix::overlay
