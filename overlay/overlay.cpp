#include "overlay/overlay.hpp"

#include <algorithm>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "overlay/log.hpp"
#include "overlay/route_message.hpp"
#include "overlay/ssh_connection.hpp"

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
  for (auto& [key, s] : ssh_sessions_) s->close();
  if (listener_) listener_->close();
  routing_timer_.cancel();
  hop_retry_timer_.cancel();
  trim_timer_.cancel();
}

// --- endpoints ----------------------------------------------------------------------------------------------

std::error_code overlay::listen(const std::string& text, std::string& bound, std::string* error) {
  const auto a = parse_address(text, error);
  if (!a) return std::make_error_code(std::errc::invalid_argument);
  if (refuses_address(*a, error)) return std::make_error_code(std::errc::permission_denied);
  if (a->scheme != address::scheme_t::tcp) {
    if (error) *error = "a node listens on tcp:// addresses only";
    return std::make_error_code(std::errc::address_family_not_supported);
  }
  std::error_code ec;
  asio::ip::tcp::resolver resolver(io_);
  const auto results = resolver.resolve(a->host, std::to_string(a->port), ec);
  if (ec || results.empty()) {
    if (error) *error = "cannot resolve " + a->host + ": " + ec.message();
    return ec ? ec : std::make_error_code(std::errc::host_unreachable);
  }
  auto l = std::make_unique<listener>(io_, config_.name, config_.admission,
                                      [this](asio::ip::tcp::socket s, std::string remote) {
                                        if (shutting_down_) return listener_->handshake_ended(remote);
                                        start_connection(make_connection(false, std::move(remote), std::move(s)));
                                      });
  asio::ip::tcp::endpoint local;
  std::string why;
  if (ec = l->open(results.begin()->endpoint(), local, &why); ec) {
    if (error) *error = "cannot listen on " + text + ": " + why;
    return ec;
  }
  address bound_addr = *a;
  bound_addr.host = local.address().to_string();
  bound_addr.port = local.port();
  bound = bound_addr.to_string();
  listener_ = std::move(l);
  logger()->info("{}: listening on {}", config_.name, bound);
  return {};
}

std::error_code overlay::add_port(const std::string& text, std::string* error) {
  const auto a = parse_address(text, error);
  if (!a) return std::make_error_code(std::errc::invalid_argument);
  if (refuses_address(*a, error)) return std::make_error_code(std::errc::permission_denied);
  auto d = std::make_unique<dialer>();
  d->target = *a;
  d->text = text;
  d->timer = std::make_unique<asio::steady_timer>(io_);
  dialers_.push_back(std::move(d));
  dial(*dialers_.back());
  return {};
}

bool overlay::refuses_address(const address& a, std::string* error) const {
  if (!config_.loopback_only || is_loopback(a)) return false;
  if (error) {
    *error = a.to_string() +
             " is not a loopback address, and without a cluster key a node links on loopback only (the built-in "
             "key is public). Make a key with: head -c 32 /dev/urandom | base64 > cluster.key && chmod 600 "
             "cluster.key, and give every node the same file as cluster_key_file (or PHOENIX_CLUSTER_KEY_FILE); "
             "phsh writes one for the nodes it starts";
  }
  return true;
}

std::shared_ptr<connection> overlay::make_connection(bool outbound, std::string remote, asio::ip::tcp::socket s) {
  std::error_code ignored;
  s.set_option(asio::ip::tcp::no_delay(true), ignored);
  return std::make_shared<tcp_connection>(*this, conn_params_, outbound, std::move(remote), std::move(s));
}

void overlay::dial(dialer& d) {
  if (shutting_down_) return;
  // A neighbour already reached by another connection needs no second one; look again later.
  if (d.peer) {
    const auto it = neighbours_.find(d.peer);
    if (it != neighbours_.end() && it->second->conn && it->second->conn->is_up()) {
      schedule_redial(d);
      return;
    }
  }
  if (d.target.scheme == address::scheme_t::ssh) return dial_ssh(d);
  auto resolver = std::make_shared<asio::ip::tcp::resolver>(io_);
  resolver->async_resolve(
      d.target.host, std::to_string(d.target.port),
      [this, &d, resolver](std::error_code ec, asio::ip::tcp::resolver::results_type results) {
        if (shutting_down_ || ec == asio::error::operation_aborted) return;
        if (ec) {
          logger()->log(d.failures++ ? spdlog::level::debug : spdlog::level::info, "{}: cannot resolve {}: {}",
                        config_.name, d.text, ec.message());
          schedule_redial(d);
          return;
        }
        auto socket = std::make_shared<asio::ip::tcp::socket>(io_);
        asio::async_connect(*socket, results, [this, &d, socket](std::error_code cec, const asio::ip::tcp::endpoint&) {
          if (shutting_down_ || cec == asio::error::operation_aborted) return;
          if (cec) {
            // Unreachable endpoints are normal (NAT, firewalls, a peer not started yet): retry quietly.
            logger()->log(d.failures++ ? spdlog::level::debug : spdlog::level::info, "{}: cannot connect to {}: {}",
                          config_.name, d.text, cec.message());
            schedule_redial(d);
            return;
          }
          d.conn = make_connection(true, d.text, std::move(*socket));
          start_connection(d.conn);
        });
      });
}

// Through a gateway: a direct-tcpip channel of the SSH session to it, shared with every other link through the
// same gateway and user. A failed session is replaced at the next dial.
void overlay::dial_ssh(dialer& d) {
  ssh_session_for(d.target)->open_channel(
      d.target.host, d.target.port, [this, &d](std::shared_ptr<ssh_channel> channel, const ssh_failure& f) {
        if (shutting_down_) {
          if (channel) channel->close();
          return;
        }
        if (!channel) {
          log_link_failure(d.text, f.refused, d.failures++, f.text, d.refusal_log);
          schedule_redial(d, f.refused ? 10 : 1);
          return;
        }
        d.conn = std::make_shared<ssh_connection>(*this, conn_params_, d.text, std::move(channel));
        start_connection(d.conn);
      });
}

std::shared_ptr<ssh_session> overlay::ssh_session_for(const address& a) {
  auto& s = ssh_sessions_[ssh_session::session_key(a)];
  if (!s || s->has_failed()) s = std::make_shared<ssh_session>(io_, a, config_.ssh, config_.name);
  return s;
}

void overlay::schedule_redial(dialer& d, unsigned intervals) {
  if (shutting_down_) return;
  d.conn.reset();
  d.timer->expires_after(config_.retry_interval * intervals);
  d.timer->async_wait([this, &d](std::error_code ec) {
    if (!ec) dial(d);
  });
}

overlay::dialer* overlay::dialer_of(const connection& c) {
  for (auto& d : dialers_)
    if (d->conn.get() == &c) return d.get();
  return nullptr;
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

// --- messages -----------------------------------------------------------------------------------------------

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
  inject(packet{head.dest, head.source, head.tag, head.hops_left, std::move(body), c.peer()});
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

void overlay::inject(packet p) {
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
  if (!waiting_dests_.empty() && waiting_dests_.contains(p.dest)) return hold(std::move(p));
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
  const std::size_t bytes = p.footprint();
  waiting_bytes_ += bytes;
  ++waiting_dests_[p.dest];
  if (p.arrived_from) {
    const auto it = neighbours_.find(p.arrived_from);
    if (it != neighbours_.end()) {
      neighbour& nb = *it->second;
      nb.waiting_bytes += bytes;
      if (nb.waiting_bytes > config_.max_waiting_per_neighbour_bytes && !nb.session.acks_held()) {
        nb.session.hold_acks(true);
        logger()->info("{}: {} sent {} bytes that wait here for a route: holding back its acks", config_.name,
                       nb.name, nb.waiting_bytes);
      }
    }
  }
  waiting_.push_back(std::move(p));
}

// After waiting packets were routed again: a neighbour whose packets no longer wait here beyond the bound gets
// its acks again (after the routing, so that one still over it never sees an ack go out in between).
void overlay::release_held_acks() {
  for (auto& [id, nb] : neighbours_) {
    if (!nb->session.acks_held() || nb->waiting_bytes > config_.max_waiting_per_neighbour_bytes) continue;
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
  std::deque<packet> retry;
  retry.swap(waiting_);
  waiting_bytes_ = 0;
  waiting_dests_.clear();
  for (auto& [id, nb] : neighbours_) nb->waiting_bytes = 0;
  for (auto& p : retry) {
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

// --- leaving ------------------------------------------------------------------------------------------------

// Links keep being accepted and redialled while the node drains: a link that breaks now must come back for
// its session to deliver what it holds (resending anything else could duplicate it).
void overlay::begin_shutdown() {
  leaving_ = true;
  for (auto& [id, nb] : neighbours_)
    if (nb->conn && nb->conn->is_up()) nb->conn->send_control(make_control_frame(frame_type::leaving, {}));
}

bool overlay::is_drained(bool wait_for_resource_names) const {
  for (const auto& p : waiting_)
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
  for (auto& p : waiting_) out.push_back(std::move(p));
  waiting_.clear();
  waiting_bytes_ = 0;
  waiting_dests_.clear();
  for (auto& [id, nb] : neighbours_) nb->waiting_bytes = 0;
  for (auto& [id, nb] : neighbours_)
    for (auto& p : nb->session.take_all()) out.push_back(std::move(p));
  return out;
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
  v.waiting_bytes = waiting_bytes_;
  constexpr std::size_t listed = 16;
  for (const auto& p : waiting_) {
    if (v.waiting_for.size() == listed) break;
    if (std::find(v.waiting_for.begin(), v.waiting_for.end(), p.dest) == v.waiting_for.end())
      v.waiting_for.push_back(p.dest);
  }
  v.links_lost = links_lost_;
  v.frames_rejected = frames_rejected_;
  v.out_of_hops = out_of_hops_;
  v.routing_ignored = table_.input_stats();
  if (listener_) {
    v.accept_failures = listener_->accept_failures();
    v.handshakes_refused = listener_->handshakes_refused();
  }
  return v;
}

}  // namespace phoenix::overlay
