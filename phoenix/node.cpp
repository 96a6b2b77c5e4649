// node.cpp — phoenix::Node: one physical node of the Phoenix model over the overlay: its lifecycle (initialize,
// finalize, suspend) and the facade. Messages are node_messages.cpp, ownership and migration node_migration.cpp,
// remote control control_service.cpp; the state they share is node_impl.hpp.
#include <signal.h>
#include <spdlog/cfg/env.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <phoenix/config.hpp>
#include <phoenix/node.hpp>
#include <sstream>
#include <unordered_map>

#include "migration/log.hpp"
#include "migration/message.hpp"
#include "overlay/delivery/stream_codec.hpp"
#include "overlay/links/cluster_key.hpp"
#include "overlay/log.hpp"
#include "overlay/overlay.hpp"
#include "phoenix/control.hpp"
#include "phoenix/control_guard.hpp"
#include "phoenix/log.hpp"
#include "phoenix/messages_in_hand.hpp"
#include "phoenix/message_log.hpp"
#include "phoenix/migration_driver.hpp"
#include "phoenix/node_impl.hpp"
#include "phoenix/progress.hpp"
#include "phoenix/random_bits.hpp"
#include "phoenix/service_messages.hpp"

namespace phoenix {

namespace {

using clock = std::chrono::steady_clock;

// How long ph_finalize waits for what this node still has to send or forward before writing the rest to
// its log (paper 3.3: it tries not to log messages meant for other nodes).
constexpr auto drain_timeout = std::chrono::seconds(5);
// How long a finalizing node waits for packets to resource names that no route or no link reaches, and for a
// neighbour whose link is down to come back and hear goodbye: longer than the default redial interval (1 s),
// so a link merely cut comes back first.
constexpr auto crashed_peer_grace = std::chrono::seconds(2);
// How long it waits for every neighbour to answer goodbye (a link that breaks meanwhile is re-established and
// told again), then for the last bytes to be written.
constexpr auto goodbye_timeout = std::chrono::seconds(3);
constexpr auto quiet_timeout = std::chrono::seconds(1);
// How long it waits for the owners of what it sent to acknowledge it end to end, before it says it is leaving
// (after that nothing routes to it): acknowledgements come within end_to_end_ack_delay (10 ms) plus a round
// trip; one whose owner is away is logged with the rest.
constexpr auto acknowledgement_wait = std::chrono::milliseconds(500);

// Outside [0, L), unique per incarnation with high probability (paper 3.3, footnote 1).
vp_t make_resource_name(std::uint64_t space_size) {
  const std::uint64_t r = random_bits();
  const std::uint64_t span = ~std::uint64_t{0} - space_size;  // names in [L, 2^64 - 1)
  return space_size + r % span;
}

std::optional<spdlog::level::level_enum> parse_level(const std::string& s) {
  const auto l = spdlog::level::from_str(s);
  if (l == spdlog::level::off && s != "off") return std::nullopt;
  return l;
}

// Every module's logger prints `level` on stderr, unless SPDLOG_LEVEL (e.g. overlay=debug) says otherwise.
void set_log_levels(spdlog::level::level_enum level) {
  // "volpex" is phoenix/volpex/log.hpp's: the Volpex layer, in the same library, follows the node's level.
  const std::shared_ptr<spdlog::logger> modules[] = {logger(), overlay::logger(), migration::logger(),
                                                     base::module_logger("volpex")};
  std::vector<spdlog::level::level_enum> before;
  for (const auto& l : modules) {
    base::set_module_level(*l, level);
    before.push_back(l->level());
  }
  spdlog::cfg::load_env_levels();
  for (std::size_t i = 0; i < std::size(modules); ++i) base::follow_env_level(*modules[i], before[i]);
}

}  // namespace

std::error_code Node::Impl::fail(int code, const std::string& why) {
  logger()->error("{}: {}", config_.name, why);
  return make_error_code(code);
}

overlay::overlay_config Node::Impl::overlay_config(std::vector<std::byte> key) const {
  overlay::overlay_config oc;
  oc.name = config_.name;
  oc.space_size = config_.space_size;
  oc.cluster_key = std::move(key);
  oc.link_protection = overlay::protection_mode_from(config_.link_protection)  // validate() checked it
                           .value_or(overlay::protection_mode::integrity);
  oc.retry_interval = std::chrono::milliseconds(config_.retry_interval_ms);
  oc.max_waiting_bytes = config_.max_waiting_bytes;
  oc.max_message_bytes = config_.max_message_bytes;
  oc.link_window_bytes = config_.link_window_bytes;
  oc.full_dump_interval = std::chrono::milliseconds(config_.full_dump_interval_ms);
  oc.orphan_after = std::chrono::milliseconds(config_.orphan_after_ms);
  oc.hop_limit = static_cast<std::uint8_t>(config_.hop_limit);
  oc.end_to_end_resend = std::chrono::milliseconds(config_.end_to_end_resend_ms);
  oc.end_to_end_ack_delay = std::chrono::milliseconds(config_.end_to_end_ack_delay_ms);
  oc.ssh.identity_file = config_.ssh_identity;
  oc.ssh.known_hosts = config_.ssh_known_hosts;
  oc.ssh.accept_new_host_keys = config_.ssh_host_key_policy == "accept-new";
  return oc;
}

std::error_code Node::Impl::initialize(std::string_view port, const char* log_in) {
  if (running_) return make_error_code(PH_ESTATE);
  if (!config_error_.empty()) return fail(PH_ECONFIG, config_error_);
  if (config_.name.empty()) config_.name = default_node_name();
  if (const auto problem = validate(config_); !problem.empty()) return fail(PH_ECONFIG, problem);
  const auto level = parse_level(config_.log_level);
  if (!level) return fail(PH_ECONFIG, "unknown log_level '" + config_.log_level + "'");
  set_log_levels(*level);

  std::vector<std::byte> key;
  const bool public_key = config_.cluster_key_file.empty();
  if (public_key) {
    logger()->warn("{}: no cluster_key_file configured: using the public development key, on loopback only",
                   config_.name);
    key = overlay::development_key();
  } else {
    auto k = overlay::load_cluster_key(config_.cluster_key_file);
    if (!k.error.empty()) return fail(PH_EKEY, k.error);
    if (!k.warning.empty()) logger()->warn("{}: {}", config_.name, k.warning);
    key = std::move(k.key);
  }

  if (auto ec = load_control_keys()) return ec;

  std::vector<overlay::packet> logged;
  std::vector<suspended_interval> restore;
  std::vector<overlay::stream_state> streams;
  std::vector<logged_loss> losses;
  if (log_in && *log_in) {
    if (auto err = read_message_log(log_in, logged, &restore, &streams, &losses); !err.empty())
      return fail(PH_EIO, err);
    if (const auto dropped = drop_runtime_records(logged))
      logger()->warn("{}: {} ignored {} records of the runtime's own protocols (control, migration)",
                     config_.name, log_in, dropped);
  }

  resource_name_ = make_resource_name(config_.space_size);
  drain_posted_ = false;
  progress_ = std::make_unique<progress_engine>();
  auto oc = overlay_config(std::move(key));
  oc.loopback_only = public_key;
  overlay_ = std::make_unique<overlay::overlay>(progress_->io(), std::move(oc), resource_name_,
                                                [this](overlay::packet&& p) { deliver(std::move(p)); });
  static_assert(progress_engine::direct_reads::stopped == overlay::connection::direct_reads_stopped);
  progress_->set_direct_reads({[this] { return overlay_->begin_direct_reads(); },
                               [this] { return overlay_->read_direct(); },
                               [this] { overlay_->end_direct_reads(); }});
  const std::string listen = port.empty() ? config_.listen : std::string(port);
  std::string error;
  if (const auto ec = overlay_->listen(listen, local_port_, &error)) {
    overlay_.reset();
    progress_.reset();
    return fail(ec == std::errc::permission_denied ? PH_EKEY : PH_EADDR, error);
  }
  for (const auto& s : config_.assume) assume_now(s);
  migration_ = std::make_unique<migration_driver>(
      config_.name, resource_name_, config_.space_size,
      migration_driver::node_ops{[this](overlay::packet p) {
                                   overlay_->send_unbounded(std::move(p), overlay::overlay::delivery::reliable);
                                 },
                                 [this](Interval s) { return release_for_migration(s); },
                                 [this](Interval s, std::span<const std::byte> with) { arrive(s, with); },
                                 [this](Interval s) { return in_hand_.handling(s); },
                                 [this](Interval s) {
                                   std::lock_guard lock(inbox_mu_);
                                   const auto it = std::find(adoption_untold_.begin(), adoption_untold_.end(), s);
                                   if (it != adoption_untold_.end()) adoption_untold_.erase(it);
                                 },
                                 [this](vp_t n) { return overlay_->can_reach(n); },
                                 [this](vp_t taker, Interval s, std::chrono::steady_clock::duration gone) {
                                   lost_in_transit(taker, s, gone);
                                 },
                                 [this](Interval s) { transit_over(s); }},
      migration_driver::lease_config{std::chrono::milliseconds(config_.migration_lease_ms),
                                     std::chrono::milliseconds(config_.orphan_after_ms)});
  sync_migration_interval();
  for (const auto& peer : config_.peers) {
    if (const auto ec = overlay_->add_port(peer, &error)) {
      overlay_.reset();
      progress_.reset();
      return fail(ec == std::errc::permission_denied ? PH_EKEY : PH_EADDR, error);
    }
  }
  overlay_->adopt_streams(streams);
  for (auto& p : logged) overlay_->route_logged(std::move(p));
  restore_logged_losses(losses);
  if (config_.orphan_policy == "adopt") adoption_timer_ = std::make_unique<asio::steady_timer>(progress_->io());
  lease_timer_ = std::make_unique<asio::steady_timer>(progress_->io());
  restore_ = std::move(restore);
  {
    std::lock_guard lock(requests_mu_);
    requests_.clear();
    app_status_.clear();
  }
  rate_since_ = clock::now();
  rate_base_ = 0;
  rate_ = 0;
  sent_total_ = 0;
  received_total_ = 0;  // no other thread yet: the background thread starts below
  logger()->info("{}: initialized as {} on {} ({} logged messages)", config_.name, resource_name_, local_port_,
                 logged.size());
  progress_->start_background();
  running_ = true;
  progress_->call([&] {
    if (adoption_timer_) arm_adoption();
    arm_lease();
  });
  return {};
}

std::error_code Node::Impl::finalize(const char* log_out, const std::vector<suspended_interval>& state) {
  came_back();
  if (!running_) return make_error_code(PH_ESTATE);
  if (!settle_migrations())
    logger()->warn("{}: finalizing in the middle of a migration: {}", config_.name,
                   progress_->call([&] { return migration_->protocol().describe(); }));
  running_ = false;
  progress_->call([&] { drain_outbox(); });  // what ph_send accepted goes out before the links drain
  progress_->drive_until([&] { return overlay_->unacknowledged() == 0; }, clock::now() + acknowledgement_wait);
  if (!(log_out && *log_out)) wait_for_resends();
  progress_->call([&] { overlay_->begin_shutdown(); });
  // Everything first; after a grace, no more waiting for incarnations that crashed (overlay::is_drained).
  const auto drain_deadline = clock::now() + drain_timeout;
  // A link merely cut comes back within a redial interval: until twice that has passed, a peer is not presumed
  // crashed (never sooner than crashed_peer_grace).
  const auto presumed_crashed_after =
      std::max<clock::duration>(crashed_peer_grace, 2 * std::chrono::milliseconds(config_.retry_interval_ms));
  if (!progress_->drive_until([&] { return overlay_->is_drained(); }, clock::now() + presumed_crashed_after) &&
      !progress_->drive_until([&] { return overlay_->is_drained(false); }, drain_deadline))
    logger()->warn("{}: links did not drain within {} s; logging what is left", config_.name,
                   drain_timeout.count());
  progress_->call([&] { overlay_->say_goodbye(); });
  if (!progress_->drive_until([&] { return overlay_->is_farewelled(presumed_crashed_after); },
                              clock::now() + goodbye_timeout))
    logger()->warn("{}: a neighbour did not answer goodbye within {} s; it may keep messages for this node",
                   config_.name, goodbye_timeout.count());
  progress_->call([&] {
    overlay_->stop_linking();
    if (adoption_timer_) adoption_timer_->cancel();
    lease_timer_->cancel();
  });
  progress_->drive_until([&] { return overlay_->is_quiet(); }, clock::now() + quiet_timeout);
  progress_->stop_background();

  auto undelivered = take_inbox_packets([](vp_t) { return true; });
  {
    std::lock_guard lock(inbox_mu_);
    adoption_untold_.clear();  // a handler that never ran: its messages are logged with the rest
  }
  for (auto& p : overlay_->take_undelivered()) {
    // Replies to this incarnation's own migration attempts die with it; a query to a virtual node is kept,
    // for whoever assumes it next (its sender waits for an answer).
    if (p.tag == migration::protocol_tag && p.dest == resource_name_) continue;
    // Acknowledgements: the streams' state is logged instead, and the next incarnation acknowledges again.
    if (overlay::is_stream_ack(p.tag)) continue;
    undelivered.push_back(std::move(p));
  }
  // What this node delivered of each stream: its next incarnation (or whoever reads the log) drops the copies
  // its senders may still send (docs/overlay.md, "End-to-end delivery").
  const auto streams = overlay_->take_all_streams(undelivered);
  // What only this node knew was lost on its way: written with the rest, else lost with this incarnation.
  const auto losses = losses_for_log();
  migration_.reset();
  adoption_timer_.reset();
  lease_timer_.reset();
  overlay_.reset();
  progress_.reset();
  std::error_code result;
  if (log_out && *log_out) {
    if (auto err = write_message_log(log_out, undelivered, state, streams, losses); !err.empty())
      result = fail(PH_EIO, err);
  } else {
    if (!undelivered.empty())
      logger()->warn("{}: {} undelivered messages discarded: no log file given to finalize", config_.name,
                     undelivered.size());
    if (!losses.empty())
      logger()->warn("{}: {} intervals lost on their way to takers that crashed, known to this node alone, are "
                     "forgotten: no log file given to finalize",
                     config_.name, losses.size());
  }
  if (!restore_.empty())
    logger()->warn("{}: finalized before its application took up the suspended state (set_state_handlers)",
                   config_.name);
  logger()->info("{}: finalized ({} messages logged)", config_.name, log_out ? undelivered.size() : 0);
  local_port_.clear();
  return result;
}

// With no log, what the owners have not acknowledged would be discarded. A relay that crashed holding some of it
// (acknowledged hop by hop, not passed on) loses it unless this node sends it again: a node leaving without a
// log waits for the acknowledgements through two resends, while an owner is reachable or was within
// crashed_peer_grace (the routes through a restarted relay come back; an owner suspended or crashed does not
// keep it waiting longer).
void Node::Impl::wait_for_resends() {
  const auto streams = progress_->call([&] {
    overlay_->send_unacknowledged_again();
    return overlay_->unacknowledged();
  });
  if (streams == 0) return;
  // Two resends: the first within end_to_end_resend of now (however far a packet had backed off), the second
  // twice that after it.
  const auto wait = 3 * std::chrono::milliseconds(config_.end_to_end_resend_ms) + acknowledgement_wait;
  logger()->info("{}: waiting up to {} ms for the owners of {} streams to acknowledge what they were sent",
                 config_.name, std::chrono::duration_cast<std::chrono::milliseconds>(wait).count(), streams);
  auto reachable_at = clock::now();
  const auto given_up = [&] {
    if (overlay_->unacknowledged() == 0) return true;
    const auto now = clock::now();
    // An owner reachable lately, or this node cut off from everyone lately (its routes come back with its
    // links, and under repeated cuts that takes a while): not yet presumed gone.
    if (overlay_->unacknowledged_reachable() > 0) reachable_at = now;
    return now - std::max(reachable_at, overlay_->alone_at()) >= crashed_peer_grace;
  };
  progress_->drive_until(given_up, clock::now() + wait);
  if (const auto left = progress_->call([&] { return overlay_->unacknowledged(); }); left > 0)
    logger()->warn("{}: the owners of {} streams did not acknowledge what they were sent; it is discarded (no log)",
                   config_.name, left);
}

// Like finalize, after pack gave the state of every interval. Migrations end first (finalize's own wait, done
// here so that no give or arrival changes the intervals after they were packed); the protocol stays closed.
std::error_code Node::Impl::suspend(const char* file) {
  came_back();
  if (!running_) return make_error_code(PH_ESTATE);
  if (!file || !*file) return make_error_code(PH_EINVAL);
  if (!pack_) return fail(PH_ESTATE, "suspend needs state handlers (set_state_handlers)");
  if (!settle_migrations()) {
    progress_->call([&] { migration_->protocol().reopen(); });
    return fail(PH_ETIMEDOUT, "suspend: a migration this node takes part in did not end");
  }
  std::vector<suspended_interval> state;
  for (const auto& s : progress_->call([&] { return snapshot().assumed; })) {
    auto packed = pack_(s);
    if (!packed) {
      // Nothing is lost: what was packed goes back, and the node runs on.
      for (const auto& done : state) unpack_(done.span, done.state);
      progress_->call([&] { migration_->protocol().reopen(); });
      return fail(PH_ESTATE,
                  "suspend: pack of [" + std::to_string(s.lo) + ", " + std::to_string(s.hi) + ") declined");
    }
    state.push_back({s, std::move(*packed)});
  }
  logger()->info("{}: suspending with {} intervals to {}", config_.name, state.size(), file);
  return finalize(file, state);
}

std::error_code Node::Impl::set_state_handlers(PackFn pack, UnpackFn unpack) {
  if (!pack || !unpack) return make_error_code(PH_EINVAL);
  if (!running_) return make_error_code(PH_ESTATE);
  pack_ = pack;
  unpack_ = unpack;
  in_hand_.start();
  progress_->call([&] { migration_->set_handlers(std::move(pack), std::move(unpack)); });
  // A suspended incarnation's intervals: their state first, then they are assumed (messages waited meanwhile).
  std::error_code result;
  for (auto& r : std::exchange(restore_, {})) {
    if (!unpack_(r.span, r.state)) {
      result = fail(PH_EINVAL, "unpack of the suspended state of [" + std::to_string(r.span.lo) + ", " +
                                   std::to_string(r.span.hi) + ") failed: not assumed");
      continue;
    }
    progress_->call([&] {
      if (!assume_now(r.span)) logger()->error("{}: the suspended interval overlaps one assumed", config_.name);
      sync_migration_interval();
    });
    logger()->info("{}: resumed [{}, {}) with {} bytes of state", config_.name, r.span.lo, r.span.hi,
                   r.state.size());
  }
  return result;
}

// --- Node ---------------------------------------------------------------------------------------------------

Node::Node() : impl_(std::make_unique<Impl>(config_from_environment())) {}
Node::Node(const Config& config) : impl_(std::make_unique<Impl>(ConfigResult{config, {}})) {}
Node::~Node() {
  if (impl_->running_) impl_->finalize(nullptr);
}

std::error_code Node::initialize(std::string_view port, const char* log_in) {
  return impl_->initialize(port, log_in);
}

std::error_code Node::add_port(std::string_view peer) {
  if (!impl_->running_) return make_error_code(PH_ESTATE);
  std::string error;
  const auto ec = impl_->progress_->call([&] { return impl_->overlay_->add_port(std::string(peer), &error); });
  if (!ec) return {};
  logger()->error("{}: add_port {}: {}", impl_->config_.name, peer, error);
  if (ec == std::errc::permission_denied) return make_error_code(PH_EKEY);
  return make_error_code(ec == std::errc::operation_not_supported ? PH_ENOTSUP : PH_EADDR);
}

vp_t Node::resource_name() const { return impl_->running_ ? impl_->resource_name_ : 0; }
vp_t Node::space_size() const { return impl_->config_.space_size; }
std::string Node::local_port() const { return impl_->local_port_; }
std::error_code Node::finalize(const char* log_out) { return impl_->finalize(log_out); }
bool Node::running() const { return impl_->running_; }

std::error_code Node::send(vp_t dest, int tag, std::span<const std::byte> data) {
  return impl_->send(dest, tag, data);
}
std::error_code Node::send(vp_t dest, int tag, Bytes&& body) { return impl_->send(dest, tag, std::move(body)); }

std::error_code service_messages::send(Node& node, vp_t dest, std::int32_t tag, Bytes&& body) {
  auto& impl = *node.impl_;
  if (auto ec = impl.check_send(tag, body.size(), false, true)) return ec;
  return impl.enqueue(dest, tag, std::move(body));
}

std::optional<Message> service_messages::recv_for(Node& node, std::int32_t tag,
                                                std::chrono::milliseconds timeout) {
  if (tag > first_service_tag) return std::nullopt;
  return node.impl_->receive(tag, clock::now() + std::max(timeout, std::chrono::milliseconds(0)), true);
}

bool service_messages::reachable(Node& node, vp_t dest) {
  auto& impl = *node.impl_;
  if (!impl.running_) return false;
  if (dest == impl.resource_name_) return true;
  return impl.progress_->call([&] { return impl.overlay_->can_reach(dest); });
}

void service_messages::halt(Node& node) {
  auto& impl = *node.impl_;
  if (impl.running_ && impl.progress_) impl.progress_->stop_background();
}

std::optional<Message> Node::recv(int tag) { return impl_->receive(tag, clock::time_point::max()); }
std::optional<Message> Node::try_recv(int tag) {
  impl_->came_back();
  if (tag < any_tag || !impl_->running_) return std::nullopt;
  if (auto m = impl_->take(tag)) return m;
  // Nothing queued. While the background thread waits in the event loop, it handles whatever arrives: waking it
  // to take one turn here would cost more than the turn. Otherwise (the application kept it away, or a
  // migration step waits for this thread) take one non-blocking turn, as MPI_Iprobe does.
  if (!impl_->migration_->has_pending() && impl_->progress_->background_driving()) return std::nullopt;
  return impl_->receive(tag, clock::now());
}
std::optional<Message> Node::recv_for(int tag, std::chrono::milliseconds timeout) {
  return impl_->receive(tag, clock::now() + std::max(timeout, std::chrono::milliseconds(0)));
}

std::error_code Node::set_state_handlers(PackFn pack, UnpackFn unpack) {
  return impl_->set_state_handlers(std::move(pack), std::move(unpack));
}
std::error_code Node::suspend(const char* file) { return impl_->suspend(file); }

std::optional<Node::ControlReply> Node::control(vp_t node, std::string_view request,
                                                std::chrono::milliseconds timeout, std::error_code* ec) {
  return impl_->control(node, request, timeout, ec);
}
Node::ControlRequest Node::take_control_request() {
  std::lock_guard lock(impl_->requests_mu_);
  if (impl_->requests_.empty()) return {};
  auto r = std::move(impl_->requests_.front());
  impl_->requests_.pop_front();
  return r;
}
void Node::set_status(std::string_view text) {
  std::lock_guard lock(impl_->requests_mu_);
  impl_->app_status_ = text;
}
std::error_code Node::join(std::chrono::milliseconds timeout) { return impl_->join(timeout); }
std::error_code Node::leave(std::chrono::milliseconds timeout) { return impl_->leave(timeout); }
int Node::poll() { return impl_->poll(); }
std::error_code Node::migrate(MigrationAction action, Side side, vp_t count,
                              std::chrono::milliseconds timeout) {
  migration::plan p;
  p.what = static_cast<migration::plan::action>(action);
  p.where = side == Side::below ? migration::side::below : migration::side::above;
  p.count = count;
  return impl_->migrate(p, timeout);
}

void Node::set_ownership_observer(OwnershipObserver f) {
  if (!impl_->running_) {
    impl_->observer_ = std::move(f);
    return;
  }
  impl_->progress_->call([&] { impl_->observer_ = std::move(f); });
}

std::error_code Node::assume(Interval s) { return impl_->assume(s); }
std::error_code Node::release(Interval s) { return impl_->release(s); }

std::vector<Interval> Node::assumed() const {
  if (!impl_->running_) return {};
  return impl_->progress_->call([&] {
    return impl_->overlay_->assumed().intervals();
  });
}

std::size_t Node::drop_links() {
  if (!impl_->running_) return 0;
  return impl_->progress_->call([&] { return impl_->overlay_->drop_links(); });
}

std::vector<OrphanedInterval> Node::orphaned() const {
  if (!impl_->running_) return {};
  return impl_->progress_->call([&] { return impl_->orphans(); });
}

namespace {
std::vector<OrphanedInterval> flatten(const std::vector<overlay::overlay_view::lost_owner>& lost) {
  std::vector<OrphanedInterval> out;
  for (const auto& l : lost)
    for (const auto& i : l.intervals) out.push_back({i, l.source, l.lost_for});
  return out;
}
}  // namespace

std::vector<OrphanedInterval> Node::Impl::orphans() const { return flatten(overlay_->orphaned()); }
std::error_code Node::set_adoption_handler(AdoptionHandler handler) {
  return impl_->set_adoption_handler(std::move(handler));
}

RoutingSnapshot Node::routing_snapshot() const {
  if (!impl_->running_) return {};
  return impl_->progress_->call([&] { return impl_->snapshot(); });
}

// One turn with the token: the overlay's view and the migration state are of the same instant.
RoutingSnapshot Node::Impl::snapshot() {
  RoutingSnapshot s;
  const auto& p = migration_->protocol();
  s.migration_locked = p.locked();
  s.migration_lock_holder = p.locked() ? p.holder() : 0;
  s.migration_attempting = p.busy();
  const auto v = overlay_->view();
  s.self = v.self;
  s.seqno = v.seqno;
  s.assumed = v.assumed;
  for (const auto& r : v.routes) {
    s.routes.push_back(RouteInfo{r.destination, r.next_hop, r.seqno, r.metric, r.intervals});
  }
  for (const auto& l : v.links)
    s.links.push_back({l.peer, l.address, l.state, l.outbound, l.unacked, l.bytes_queued});
  s.waiting_messages = v.waiting_messages;
  s.waiting_bytes = v.waiting_bytes;
  s.waiting_for = v.waiting_for;
  s.links_lost = v.links_lost;
  s.out_of_hops = v.out_of_hops;
  s.orphaned = flatten(v.lost_owners);
  return s;
}

}  // namespace phoenix
