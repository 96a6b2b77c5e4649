#include "overlay/link_manager.hpp"

#include <algorithm>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "overlay/log.hpp"

namespace phoenix::overlay {

namespace {

using clock = std::chrono::steady_clock;

connection_params make_params(const overlay_config& c, node_id self) {
  connection_params p;
  p.cluster_key = c.cluster_key;
  p.protection = c.link_protection;
  p.space_size = c.space_size;
  p.self = self;
  p.name = c.name;
  // A packet sent again by its sender's next incarnation carries 8 bytes more (packet::ack_to_follows).
  p.max_payload = static_cast<std::uint32_t>(std::min<std::uint64_t>(c.max_message_bytes + data_head_bytes + 8,
                                                                     hard_max_payload));
  p.ack_every_bytes = std::max<std::uint64_t>(c.link_window_bytes / 4, 64 * 1024);
  p.window_bytes = c.link_window_bytes;
  p.ignore_peer_window = c.fault_ignore_peer_window;
  return p;
}

}  // namespace

link_manager::link_manager(asio::io_context& io, const overlay_config& config, node_id self,
                           connection_owner& owner, std::function<std::uint64_t(node_id)> waiting_from)
    : io_(io),
      config_(config),
      owner_(owner),
      waiting_from_(std::move(waiting_from)),
      params_(make_params(config, self)),
      tcp_(transport_context{io, owner, params_}),
      ssh_(transport_context{io, owner, params_}, config.ssh, config.name),
      expiry_timer_(io),
      trim_timer_(io) {}

link_manager::~link_manager() {
  stopped_ = true;
  *alive_ = false;
  for (auto& d : dialers_) {
    if (d->timer) d->timer->cancel();
    if (d->conn) d->conn->stop();
  }
  for (const auto& c : handshaking_) c->stop();
  for (auto& [id, nb] : neighbours_)
    if (nb->conn) nb->conn->stop();
  ssh_.close();
  if (listener_) listener_->close();
  expiry_timer_.cancel();
  trim_timer_.cancel();
}

// --- endpoints ----------------------------------------------------------------------------------------------

std::error_code link_manager::listen(const std::string& text, std::string& bound, std::string* error) {
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
                                        if (stopped_) return listener_->handshake_ended(remote);
                                        start_connection(tcp_.make_connection(false, std::move(remote), std::move(s)));
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

std::error_code link_manager::add_port(const std::string& text, std::string* error) {
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

bool link_manager::refuses_address(const address& a, std::string* error) const {
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

void link_manager::stop_linking() {
  stopped_ = true;
  if (listener_) listener_->close();
  for (auto& d : dialers_) d->timer->cancel();
}

void link_manager::dial(dialer& d) {
  if (stopped_) return;
  // A neighbour already reached by another connection needs no second one; look again later.
  if (const neighbour* nb = d.peer ? find(d.peer) : nullptr; nb && nb->is_up()) {
    schedule_redial(d);
    return;
  }
  transport_for(d.target.scheme)
      .dial(d.target, d.text, [this, &d](std::shared_ptr<connection> c, const dial_failure& f) {
        if (stopped_) {
          if (c) c->stop();
          return;
        }
        if (!c) {
          // Unreachable endpoints are normal (NAT, firewalls, a peer not started yet): retry, quietly after the
          // first failure. A refusal is a configuration problem that retrying soon will not fix: back off.
          log_link_failure(d.text, f.refused, d.failures++, f.text, d.refusal_log);
          schedule_redial(d, f.refused ? 10 : 1);
          return;
        }
        d.conn = std::move(c);
        start_connection(d.conn);
      });
}

transport& link_manager::transport_for(address::scheme_t scheme) {
  if (scheme == address::scheme_t::ssh) return ssh_;
  return tcp_;
}

void link_manager::schedule_redial(dialer& d, unsigned intervals) {
  if (stopped_) return;
  d.conn.reset();
  d.timer->expires_after(config_.retry_interval * intervals);
  d.timer->async_wait([this, &d, alive = alive_](std::error_code ec) {
    if (!ec && *alive) dial(d);
  });
}

link_manager::dialer* link_manager::dialer_of(const connection& c) {
  for (auto& d : dialers_)
    if (d->conn.get() == &c) return d.get();
  return nullptr;
}

void link_manager::connect_local(link_manager& other) {
  asio::local::stream_protocol::socket mine(io_), theirs(other.io_);
  asio::local::connect_pair(mine, theirs);
  start_connection(std::make_shared<local_connection>(owner_, params_, true, "local:" + other.config_.name,
                                                      std::move(mine)));
  other.start_connection(std::make_shared<local_connection>(other.owner_, other.params_, false,
                                                            "local:" + config_.name, std::move(theirs)));
}

void link_manager::start_connection(std::shared_ptr<connection> c) {
  handshaking_.insert(c);
  c->start();
}

// An accepted connection's handshake slot is free again once it is up or gone.
void link_manager::end_handshake(const std::shared_ptr<connection>& c) {
  if (handshaking_.erase(c) && !c->is_outbound() && listener_) listener_->handshake_ended(c->remote());
}

// --- links up and down --------------------------------------------------------------------------------------

link_resume link_manager::resume_for(node_id peer) const {
  const neighbour* nb = find(peer);
  if (!nb) return {};
  return {nb->session.ack_to_send(), nb->secret};
}

// Two nodes that dial each other end up with two connections. Both ends must keep the same one without
// talking about it: the one dialled by the smaller resource name; between two dialled by the same node, the
// newer (the older is a half-dead leftover of a broken link).
bool link_manager::keeps_existing(const connection& existing, const connection& incoming) const {
  const node_id existing_dialer = existing.is_outbound() ? params_.self : existing.peer();
  const node_id incoming_dialer = incoming.is_outbound() ? params_.self : incoming.peer();
  if (existing_dialer == incoming_dialer) return false;
  return existing_dialer < incoming_dialer;
}

void link_manager::close_refused(const std::shared_ptr<connection>& c, unsigned redial_intervals) {
  c->stop();
  if (auto* d = dialer_of(*c)) schedule_redial(*d, redial_intervals);
}

neighbour* link_manager::link_up(const std::shared_ptr<connection>& c) {
  end_handshake(c);
  const node_id peer = c->peer();
  node_id before = 0;  // who the dialled address answered as before
  if (auto* d = dialer_of(*c)) {
    before = d->peer;
    d->peer = peer;
    d->failures = 0;
  }
  if (!neighbours_.contains(peer) && !make_room_for_neighbour()) {
    ++neighbours_refused_;
    const bool warn = neighbour_limit_log_.pass(clock::now()).has_value();
    logger()->log(warn ? spdlog::level::warn : spdlog::level::debug,
                  "{}: a link from {} ({}) via {} closed: {} neighbour records kept (max_neighbours), none unused",
                  config_.name, c->peer_name(), peer, c->remote(), neighbours_.size());
    close_refused(c, 10);
    return nullptr;
  }
  neighbour& nb = record(peer);
  // The peer's AUTH says how far it received: beyond what this session sent, it is not this session's peer,
  // and taking it up would free unacknowledged packets as if they had arrived. (A session that never sent
  // has nothing to free: a leaver that comes back to say goodbye again may remember an older one.)
  if (nb.session.highest_sent() > 0 && c->peer_resume_ack() > nb.session.highest_sent()) {
    logger()->warn("{}: a link claiming to be {} via {} acknowledged {} of the {} packets sent to it: closed it",
                   config_.name, peer, c->remote(), c->peer_resume_ack(), nb.session.highest_sent());
    close_refused(c, 1);
    return nullptr;
  }
  if (nb.is_up()) {
    if (keeps_existing(*nb.conn, *c)) {
      logger()->debug("{}: second link to {} closed, keeping the first", config_.name, nb.name);
      close_refused(c, 1);
      return nullptr;
    }
    // Only the peer itself, holding the working link's secret, may replace that link: not a relay, not another
    // key holder that claims the peer's resource name.
    if (!nb.secret || !c->proves_continuity(*nb.secret)) {
      const bool warn = displacement_log_.pass(clock::now()).has_value();
      logger()->log(warn ? spdlog::level::warn : spdlog::level::debug,
                    "{}: a second link claiming to be {} ({}) via {} did not prove it continues the working link's "
                    "session: closed it, keeping the working link",
                    config_.name, nb.name, c->peer(), c->remote());
      close_refused(c, 1);
      return nullptr;
    }
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
  resume_freed_ += nb.session.resume(c->peer_resume_ack());
  nb.session.note_ack_sent(c->resume_ack_sent());  // the AUTH told the peer how far this node received
  logger()->info("{}: link up to {} ({}) via {}, frames {}", config_.name, nb.name, peer, c->remote(),
                 to_string(c->protection()));
  if (before != 0 && before != peer) supersede(before, c->remote());
  return &nb;
}

// A dialled address answered with a new resource name: the incarnation that was there before crashed or
// finalized, and resource names are never reused, so it will not come back. What its session still holds goes
// another way (take_superseded): packets it never acknowledged, which the new incarnation or another path
// carries, and which end-to-end delivery deduplicates should the old one have passed them on after all.
void link_manager::supersede(node_id old_peer, const std::string& address) {
  const auto it = neighbours_.find(old_peer);
  if (it == neighbours_.end() || it->second->conn) return;
  auto packets = it->second->session.take_all();
  logger()->info("{}: {} now answers as another node: the {} packets {} ({}) did not acknowledge go another way",
                 config_.name, address, packets.size(), it->second->name, old_peer);
  for (auto& p : packets) superseded_.push_back(std::move(p));
  neighbours_.erase(it);
}

std::optional<link_manager::lost_link> link_manager::link_down(const std::shared_ptr<connection>& c,
                                                               const std::string& reason, bool expected) {
  end_handshake(c);
  if (c->was_forged()) ++frames_rejected_;
  dialer* d = dialer_of(*c);
  const node_id peer = c->peer();
  const auto it = peer ? neighbours_.find(peer) : neighbours_.end();
  std::optional<lost_link> lost;
  if (it != neighbours_.end() && it->second->conn == c) {
    neighbour& nb = *it->second;
    nb.conn.reset();
    nb.down_since = clock::now();
    ++links_lost_;
    if (const auto held_back = nb.down_log.pass(nb.down_since)) {
      logger()->log(expected || nb.said_goodbye ? spdlog::level::info : spdlog::level::warn,
                    "{}: link to {} down: {}{}", config_.name, nb.name, reason,
                    *held_back ? fmt::format(" ({} more such lines held back)", *held_back) : std::string());
    }
    // What was never sent may take another way; what was sent stays in the session for resending when the
    // link comes back. A peer that said goodbye will not come back: everything goes elsewhere.
    lost = lost_link{peer, nb.said_goodbye ? nb.session.take_all() : nb.session.take_unsent(), {}};
    if (nb.said_goodbye) {
      nb.session.take_departed(lost->departed);
      neighbours_.erase(it);
    }
    arm_expiry();
  } else {
    log_link_failure(d ? d->text : c->remote(), c->was_refused(), d ? d->failures++ : 1, reason,
                     d ? d->refusal_log : inbound_refusal_log_);
  }
  // A refused handshake is a configuration mismatch that retrying soon will not fix: back off.
  if (d) schedule_redial(*d, c->was_refused() ? 10 : 1);
  arm_memory_trim();
  return lost;
}

void link_manager::drop(connection& c, const std::string& reason) {
  auto self = c.shared_from_this();
  c.stop();
  owner_.on_connection_down(self, reason);
}

std::size_t link_manager::drop_links() {
  std::vector<std::shared_ptr<connection>> up;
  for (auto& [id, nb] : neighbours_)
    if (nb->is_up()) up.push_back(nb->conn);
  for (auto& c : up) drop(*c, "dropped on request (fault injection)");
  return up.size();
}

bool link_manager::drop_link(node_id peer) {
  neighbour* nb = find(peer);
  if (!nb || !nb->is_up()) return false;
  drop(*nb->conn, "dropped on request (fault injection)");
  return true;
}

// A refusal (another key, L or version) is a configuration problem: a warning, within `refusals` (the
// dialler's own, or the one all incoming connections share); past it, debug. A failed attempt is normal (the
// peer is not up yet, or unreachable): info once, then debug.
void link_manager::log_link_failure(const std::string& endpoint, bool refused, unsigned failures,
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

// Buffers of closed connections go back to malloc, which keeps freed heap memory for reuse: after many
// connections closed (an attack, or a cluster that shrank), the node would stay at its peak. Once a second
// at most, after connections went, hand what is free back to the system. Not under ASan or TSan: they
// replace malloc, and glibc's malloc_trim then walks arenas their allocator does not keep (it crashed in mtrim).
void link_manager::arm_memory_trim() {
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  if (trim_armed_ || stopped_) return;
  trim_armed_ = true;
  trim_timer_.expires_after(std::chrono::seconds(1));
  trim_timer_.async_wait([this, alive = alive_](std::error_code ec) {
    if (ec || !*alive) return;
    trim_armed_ = false;
    ::malloc_trim(0);
  });
#endif
}

// --- neighbour records --------------------------------------------------------------------------------------

neighbour* link_manager::find(node_id peer) {
  const auto it = neighbours_.find(peer);
  return it == neighbours_.end() ? nullptr : it->second.get();
}

const neighbour* link_manager::find(node_id peer) const {
  const auto it = neighbours_.find(peer);
  return it == neighbours_.end() ? nullptr : it->second.get();
}

neighbour& link_manager::record(node_id peer) {
  auto& slot = neighbours_[peer];
  if (!slot) {
    slot = std::make_unique<neighbour>(config_.link_window_bytes);
    arm_expiry();  // it has no link yet
  }
  return *slot;
}

// A record whose link is down and whose session never carried a data packet either way holds nothing of the
// peer's or for it: forgetting it is the same as keeping it, since both ends' sessions then start from the
// first sequence number (a packet the peer sent that never arrived is resent from 1, which a new session
// expects). Records that carried data stay: forgetting one would break its session's numbering.
bool link_manager::is_unused(node_id id, const neighbour& nb) const {
  return !nb.conn && nb.session.highest_sent() == 0 && nb.session.received() == 0 && nb.session.is_idle() &&
         waiting_from_(id) == 0;
}

// A link from a new resource name at max_neighbours: forget the unused record down the longest, if it has been
// down for ten redial intervals at least (up to neighbour_expiry). A neighbour whose link blips comes back
// before that and finds its record, so a key holder's made-up names cannot take the place of a working
// neighbour's between two of its dials.
bool link_manager::make_room_for_neighbour() {
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

// While some record has no link, look at the records four times per neighbour_expiry: one unused and down for
// longer is forgotten.
void link_manager::arm_expiry() {
  if (expiry_armed_ || stopped_) return;
  expiry_armed_ = true;
  expiry_timer_.expires_after(std::max<clock::duration>(config_.neighbour_expiry / 4, std::chrono::milliseconds(1)));
  expiry_timer_.async_wait([this, alive = alive_](std::error_code ec) {
    if (ec || !*alive) return;
    expiry_armed_ = false;
    forget_unused_neighbours(clock::now());
    for (const auto& [id, nb] : neighbours_) {
      if (!nb->conn) return arm_expiry();
    }
  });
}

void link_manager::forget_unused_neighbours(clock::time_point now) {
  std::erase_if(neighbours_, [&](const auto& entry) {
    const neighbour& nb = *entry.second;
    const bool expired = is_unused(entry.first, nb) && now - nb.down_since >= config_.neighbour_expiry;
    if (expired) ++neighbours_forgotten_;
    return expired;
  });
}

// --- control frames and direct reads ------------------------------------------------------------------------

std::uint64_t link_manager::send_to_all(const std::vector<std::byte>& frame) {
  std::uint64_t sent = 0;
  for (auto& [id, nb] : neighbours_) {
    if (!nb->is_up()) continue;
    sent += frame.size();
    nb->conn->send_control(frame);
  }
  return sent;
}

std::uint64_t link_manager::send_to(node_id peer, std::vector<std::byte> frame) {
  neighbour* nb = find(peer);
  if (!nb || !nb->is_up()) return 0;
  const std::uint64_t size = frame.size();
  nb->conn->send_control(std::move(frame));
  return size;
}

bool link_manager::is_quiet() const {
  for (const auto& [id, nb] : neighbours_)
    if (nb->is_up() && nb->conn->bytes_queued() > 0) return false;
  return true;
}

bool link_manager::begin_direct_reads() {
  neighbour* nb = find(last_data_from_);
  std::shared_ptr<connection> c = nb ? nb->conn : nullptr;
  if (c != direct_) end_direct_reads();
  if (!c || !c->begin_direct()) return false;
  direct_ = std::move(c);
  return true;
}

std::size_t link_manager::read_direct() {
  return direct_ ? direct_->read_direct() : connection::direct_reads_stopped;
}

void link_manager::end_direct_reads() {
  if (!direct_) return;
  direct_->end_direct();
  direct_ = nullptr;
}

void link_manager::add_views(std::vector<link_view>& out) const {
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
    out.push_back(std::move(l));
  }
  for (const auto& c : handshaking_) {
    link_view l;
    l.address = c->remote();
    l.outbound = c->is_outbound();
    l.state = "handshake";
    out.push_back(std::move(l));
  }
}

}  // namespace phoenix::overlay
