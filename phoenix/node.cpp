// node.cpp — phoenix::Node: one physical node of the Phoenix model over the overlay.
#include <phoenix/node.hpp>

#include <openssl/rand.h>
#include <spdlog/cfg/env.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <random>

#include <phoenix/config.hpp>

#include "migration/message.hpp"
#include "overlay/cluster_key.hpp"
#include "overlay/log.hpp"
#include "overlay/overlay.hpp"
#include "phoenix/log.hpp"
#include "phoenix/message_log.hpp"
#include "phoenix/migration_driver.hpp"
#include "phoenix/progress.hpp"

namespace phoenix {

namespace {

using clock = std::chrono::steady_clock;

// How long ph_finalize waits for what this node still has to send or forward before writing the rest to
// its log (paper 3.3: it tries not to log messages meant for other nodes).
constexpr auto drain_timeout = std::chrono::seconds(5);
constexpr auto goodbye_timeout = std::chrono::seconds(1);
// How long ph_finalize waits for a migration this node takes part in to end. Long: a node that leaves in the
// middle of an attempt strands its partner, whose lock (or attempt) then waits for an incarnation that is gone
// (docs/migration.md, "Leaving in the middle").
constexpr auto migration_settle_timeout = std::chrono::seconds(30);
// Back-off between failed migration attempts: randomised, doubling from the first to the last
// (MIGRATION-NOTES.md point 3: attempts may keep failing under contention).
constexpr auto backoff_first = std::chrono::milliseconds(1);
constexpr auto backoff_last = std::chrono::milliseconds(200);

// Outside [0, L), unique per incarnation with high probability (paper 3.3, footnote 1).
vp_t make_resource_name(std::uint64_t space_size) {
  std::uint64_t r = 0;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&r), sizeof r) != 1) {
    std::random_device rd;
    r = (std::uint64_t{rd()} << 32) ^ rd();
  }
  const std::uint64_t span = ~std::uint64_t{0} - space_size;  // names in [L, 2^64 - 1)
  return space_size + r % span;
}

std::optional<spdlog::level::level_enum> parse_level(const std::string& s) {
  const auto l = spdlog::level::from_str(s);
  if (l == spdlog::level::off && s != "off") return std::nullopt;
  return l;
}

}  // namespace

class Node::Impl {
 public:
  using OwnershipObserver = Node::OwnershipObserver;
  explicit Impl(ConfigResult r) : config_(std::move(r.config)), config_error_(std::move(r.error)) {}

  std::error_code initialize(std::string_view port, const char* log_in);
  std::error_code finalize(const char* log_out);
  std::error_code send(vp_t dest, int tag, std::span<const std::byte> data);
  std::error_code send(vp_t dest, int tag, Bytes&& body);
  // The checks of ph_send, and the reservation of room for `size` body bytes among the waiting messages.
  std::error_code check_send(int tag, std::size_t size, bool null_data) const;
  std::error_code enqueue(vp_t dest, int tag, Bytes body);  // after check_send
  std::optional<Message> receive(int tag, clock::time_point deadline);
  std::optional<Message> take(int tag);
  std::error_code assume(Interval s);
  std::error_code release(Interval s);

  // migration (migration_driver.hpp)
  std::error_code join(std::chrono::milliseconds timeout);
  std::error_code leave(std::chrono::milliseconds timeout);
  std::error_code migrate(const migration::plan& p, std::chrono::milliseconds timeout);
  int poll();

  Config config_;
  std::string config_error_;
  std::atomic<bool> running_{false};
  vp_t resource_name_ = 0;
  std::string local_port_;
  std::unique_ptr<progress_engine> progress_;
  std::unique_ptr<overlay::overlay> overlay_;
  std::unique_ptr<migration_driver> migration_;
  OwnershipObserver observer_;

  std::mutex inbox_mu_;
  std::deque<Message> inbox_;

  // Packets from ph_send on their way to the I/O context, in send order (see send()).
  std::mutex outbox_mu_;
  std::vector<overlay::packet> outbox_;
  std::atomic<bool> drain_posted_{false};

 private:
  void drain_outbox();
  std::error_code fail(int code, const std::string& why);
  void deliver(overlay::packet&& p);
  overlay::overlay_config overlay_config(std::vector<std::byte> key) const;
  std::vector<overlay::packet> take_inbox_packets(const std::function<bool(vp_t)>& which);
  void release_and_requeue(Interval s);  // holding the token
  bool assume_now(Interval s);           // holding the token; false if it overlaps
  void sync_migration_interval();        // holding the token: the protocol learns what the node assumes
  bool migration_involved() const;       // holding the token: an attempt or a lock is under way
  // Drives the node and runs pending migration steps until done() (evaluated holding the token) or the
  // deadline; returns done()'s last value.
  bool drive_migration(const std::function<bool()>& done, clock::time_point deadline);
  // One protocol attempt, to its end or the deadline.
  migration::outcome one_attempt(const migration::plan& p, clock::time_point deadline);
  void back_off(std::chrono::milliseconds& backoff, clock::time_point deadline);
  std::optional<migration::interval> current_interval() {  // the protocol's I; nullopt: several intervals
    return progress_->call([&] { return migration_->protocol().current(); });
  }
  std::mt19937_64 backoff_rng_{std::random_device{}()};
};

std::error_code Node::Impl::fail(int code, const std::string& why) {
  logger()->error("{}: {}", config_.name, why);
  return make_error_code(code);
}

overlay::overlay_config Node::Impl::overlay_config(std::vector<std::byte> key) const {
  overlay::overlay_config oc;
  oc.name = config_.name;
  oc.space_size = config_.space_size;
  oc.cluster_key = std::move(key);
  oc.retry_interval = std::chrono::milliseconds(config_.retry_interval_ms);
  oc.max_waiting_bytes = config_.max_waiting_bytes;
  oc.max_message_bytes = config_.max_message_bytes;
  oc.link_window_bytes = config_.link_window_bytes;
  oc.full_dump_interval = std::chrono::milliseconds(config_.full_dump_interval_ms);
  oc.hop_limit = static_cast<std::uint8_t>(config_.hop_limit);
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
  logger()->set_level(*level);
  overlay::logger()->set_level(*level);
  spdlog::cfg::load_env_levels();  // SPDLOG_LEVEL=overlay=debug wins over the configuration

  std::vector<std::byte> key;
  if (config_.cluster_key_file.empty()) {
    logger()->warn("{}: no cluster_key_file configured: using the public development key (anyone can join)",
                   config_.name);
    key = overlay::development_key();
  } else {
    auto k = overlay::load_cluster_key(config_.cluster_key_file);
    if (!k.error.empty()) return fail(PH_EKEY, k.error);
    if (!k.warning.empty()) logger()->warn("{}: {}", config_.name, k.warning);
    key = std::move(k.key);
  }

  std::vector<overlay::packet> logged;
  if (log_in && *log_in) {
    if (auto err = read_message_log(log_in, logged); !err.empty()) return fail(PH_EIO, err);
  }

  resource_name_ = make_resource_name(config_.space_size);
  drain_posted_ = false;
  progress_ = std::make_unique<progress_engine>();
  overlay_ = std::make_unique<overlay::overlay>(progress_->io(), overlay_config(std::move(key)), resource_name_,
                                                [this](overlay::packet&& p) { deliver(std::move(p)); });
  const std::string listen = port.empty() ? config_.listen : std::string(port);
  std::string error;
  if (overlay_->listen(listen, local_port_, &error)) {
    overlay_.reset();
    progress_.reset();
    return fail(PH_EADDR, error);
  }
  for (const auto& s : config_.assume) assume_now(s);
  migration_ = std::make_unique<migration_driver>(
      config_.name, resource_name_, config_.space_size,
      migration_driver::node_ops{[this](overlay::packet p) { overlay_->send_unbounded(std::move(p)); },
                                 [this](Interval s) { release_and_requeue(s); },
                                 [this](Interval s) { assume_now(s); }});
  sync_migration_interval();
  for (const auto& peer : config_.peers) {
    if (overlay_->add_port(peer, &error)) {
      overlay_.reset();
      progress_.reset();
      return fail(PH_EADDR, error);
    }
  }
  for (auto& p : logged) overlay_->inject(std::move(p));
  logger()->info("{}: initialized as {} on {} ({} logged messages)", config_.name, resource_name_, local_port_,
                 logged.size());
  progress_->start_background();
  running_ = true;
  return {};
}

void Node::Impl::deliver(overlay::packet&& p) {
  if (p.tag == migration::protocol_tag) return migration_->on_packet(p);
  std::lock_guard lock(inbox_mu_);
  inbox_.emplace_back(p.dest, p.source, p.tag, std::move(p.body));
}

std::optional<Message> Node::Impl::take(int tag) {
  std::lock_guard lock(inbox_mu_);
  const auto it = tag == any_tag ? inbox_.begin()
                                 : std::find_if(inbox_.begin(), inbox_.end(),
                                                [tag](const Message& m) { return m.tag() == tag; });
  if (it == inbox_.end()) return std::nullopt;
  Message m = std::move(*it);
  inbox_.erase(it);
  return m;
}

// Pending migration steps (pack, unpack) run here too, on the receiving thread, between messages.
std::optional<Message> Node::Impl::receive(int tag, clock::time_point deadline) {
  if (tag < any_tag) return std::nullopt;
  if (auto m = take(tag)) return m;
  if (!running_) return std::nullopt;
  std::optional<Message> got;
  for (;;) {
    migration_->run_pending(*progress_);
    progress_->drive_until([&] { return (got = take(tag)).has_value() || migration_->has_pending(); },
                           deadline);
    if (got || !migration_->has_pending()) return got;
  }
}

std::error_code Node::Impl::check_send(int tag, std::size_t size, bool null_data) const {
  if (!running_) return make_error_code(PH_ESTATE);
  if (tag < 0 || (null_data && size > 0)) return make_error_code(PH_EINVAL);
  if (size > config_.max_message_bytes) return make_error_code(PH_ETOOBIG);
  if (!overlay_->try_reserve(overlay::packet::footprint_of(size))) return make_error_code(PH_EAGAIN);
  return {};
}

std::error_code Node::Impl::send(vp_t dest, int tag, std::span<const std::byte> data) {
  if (auto ec = check_send(tag, data.size(), data.data() == nullptr)) return ec;
  return enqueue(dest, tag, copy_bytes(data));
}

std::error_code Node::Impl::send(vp_t dest, int tag, Bytes&& body) {
  if (auto ec = check_send(tag, body.size(), false)) return ec;
  return enqueue(dest, tag, std::move(body));
}

std::error_code Node::Impl::enqueue(vp_t dest, int tag, Bytes body) {
  overlay::packet p;
  p.dest = dest;
  p.tag = tag;
  p.body = std::move(body);
  // One queue for every sending thread keeps send order whether a packet goes out inline (the token was
  // free: the write happens before ph_send returns) or later, drained by whoever holds the token.
  {
    std::lock_guard lock(outbox_mu_);
    outbox_.push_back(std::move(p));
  }
  if (progress_->try_run([this] { drain_outbox(); })) return {};
  if (!drain_posted_.exchange(true)) {
    asio::post(progress_->io(), [this] {
      drain_posted_ = false;
      drain_outbox();
    });
  }
  return {};
}

void Node::Impl::drain_outbox() {
  std::vector<overlay::packet> batch;
  {
    std::lock_guard lock(outbox_mu_);
    batch.swap(outbox_);
  }
  for (auto& p : batch) overlay_->send(std::move(p));
}

std::vector<overlay::packet> Node::Impl::take_inbox_packets(const std::function<bool(vp_t)>& which) {
  std::vector<overlay::packet> out;
  std::lock_guard lock(inbox_mu_);
  for (auto it = inbox_.begin(); it != inbox_.end();) {
    if (!which(it->dest())) {
      ++it;
      continue;
    }
    overlay::packet p;
    p.dest = it->dest();
    p.source = it->source();
    p.tag = it->tag();
    p.hops_left = static_cast<std::uint8_t>(config_.hop_limit);
    p.body = std::move(*it).take_body();
    out.push_back(std::move(p));
    it = inbox_.erase(it);
  }
  return out;
}

// While a migration involving this node is under way its interval belongs to the protocol: the application
// cannot change it underneath (docs/migration.md).
std::error_code Node::Impl::assume(Interval s) {
  if (!running_) return make_error_code(PH_ESTATE);
  if (s.empty() || s.hi > config_.space_size) return make_error_code(PH_EINVAL);
  return progress_->call([&] {
    if (migration_involved()) return make_error_code(PH_ESTATE);
    if (!assume_now(s)) return make_error_code(PH_EOVERLAP);
    sync_migration_interval();
    return std::error_code{};
  });
}

std::error_code Node::Impl::release(Interval s) {
  if (!running_) return make_error_code(PH_ESTATE);
  if (s.empty() || s.hi > config_.space_size) return make_error_code(PH_EINVAL);
  return progress_->call([&] {
    if (migration_involved()) return make_error_code(PH_ESTATE);
    if (!overlay_->assumed().contains({s.lo, s.hi})) return make_error_code(PH_ENOTASSUMED);
    release_and_requeue(s);
    sync_migration_interval();
    return std::error_code{};
  });
}

// Paper 3.3 and API.md "Release": messages for s queued here and not yet received go back into the overlay,
// to the next node that assumes s.
void Node::Impl::release_and_requeue(Interval s) {
  if (overlay_->release({s.lo, s.hi}) == overlay::interval_set::result::ok && observer_) observer_(false, s);
  for (auto& p : take_inbox_packets([&](vp_t v) { return s.contains(v); })) overlay_->inject(std::move(p));
}

bool Node::Impl::assume_now(Interval s) {
  if (overlay_->assume({s.lo, s.hi}) != overlay::interval_set::result::ok) return false;
  if (observer_) observer_(true, s);
  return true;
}

void Node::Impl::sync_migration_interval() {
  const auto all = overlay_->assumed().intervals();
  if (all.size() > 1) return migration_->protocol().set_interval(std::nullopt);
  migration_->protocol().set_interval(all.empty() ? migration::interval{}
                                                  : migration::interval{all[0].lo, all[0].hi});
}

bool Node::Impl::migration_involved() const {
  const auto& p = migration_->protocol();
  return p.busy() || p.locked();
}

// --- migration ----------------------------------------------------------------------------------------------

bool Node::Impl::drive_migration(const std::function<bool()>& done, clock::time_point deadline) {
  for (;;) {
    migration_->run_pending(*progress_);
    bool ok = false;
    progress_->drive_until([&] { return (ok = done()) || migration_->has_pending(); }, deadline);
    if (ok) return true;
    if (!migration_->has_pending() && clock::now() >= deadline) return false;
  }
}

migration::outcome Node::Impl::one_attempt(const migration::plan& p, clock::time_point deadline) {
  if (!progress_->call([&] { return migration_->protocol().begin(p); })) return migration::outcome::none;
  drive_migration([&] { return !migration_->protocol().busy(); }, deadline);
  return progress_->call([&] {
    const auto& proto = migration_->protocol();
    return proto.busy() ? migration::outcome::running : proto.last_outcome();
  });
}

// Waits a random time around `backoff` (driving the node meanwhile: it may be the other end of someone else's
// attempt), then doubles it.
void Node::Impl::back_off(std::chrono::milliseconds& backoff, clock::time_point deadline) {
  std::uniform_int_distribution<long> jitter(backoff.count() / 2, backoff.count() * 3 / 2);
  const auto until = std::min(deadline, clock::now() + std::chrono::milliseconds(jitter(backoff_rng_)));
  drive_migration([] { return false; }, until);
  backoff = std::min(backoff * 2, std::chrono::duration_cast<std::chrono::milliseconds>(backoff_last));
}

std::error_code Node::Impl::join(std::chrono::milliseconds timeout) {
  if (!running_) return make_error_code(PH_ESTATE);
  const auto deadline = clock::now() + std::max(timeout, std::chrono::milliseconds(0));
  if (const auto i = current_interval(); !i || !i->empty()) return make_error_code(PH_ESTATE);
  std::chrono::milliseconds backoff = backoff_first;
  for (;;) {
    const auto o = one_attempt({migration::plan::action::take_half, migration::side::any, 0}, deadline);
    if (const auto i = current_interval(); i && !i->empty()) return {};
    if (o == migration::outcome::running || clock::now() >= deadline) return make_error_code(PH_ETIMEDOUT);
    back_off(backoff, deadline);
  }
}

std::error_code Node::Impl::leave(std::chrono::milliseconds timeout) {
  if (!running_) return make_error_code(PH_ESTATE);
  const auto deadline = clock::now() + std::max(timeout, std::chrono::milliseconds(0));
  auto i = current_interval();
  if (!i) return make_error_code(PH_ESTATE);
  if (i->empty()) return {};
  if (i->lo == 0 && i->hi == config_.space_size) return make_error_code(PH_ESTATE);
  migration::side side = i->lo > 0 ? migration::side::below : migration::side::above;
  std::chrono::milliseconds backoff = backoff_first;
  for (;;) {
    const auto o = one_attempt({migration::plan::action::give_all, side, 0}, deadline);
    i = current_interval();
    if (!i || i->empty()) return {};
    if (o == migration::outcome::running || clock::now() >= deadline) return make_error_code(PH_ETIMEDOUT);
    // Alternate between the two neighbours while both exist: one of them may be busy for a while.
    const auto other = side == migration::side::below ? migration::side::above : migration::side::below;
    if ((other == migration::side::below && i->lo > 0) ||
        (other == migration::side::above && i->hi < config_.space_size))
      side = other;
    back_off(backoff, deadline);
  }
}

std::error_code Node::Impl::migrate(const migration::plan& p, std::chrono::milliseconds timeout) {
  if (!running_) return make_error_code(PH_ESTATE);
  const auto deadline = clock::now() + std::max(timeout, std::chrono::milliseconds(0));
  switch (one_attempt(p, deadline)) {
    case migration::outcome::none:
      return make_error_code(PH_ESTATE);
    case migration::outcome::running:
      return make_error_code(PH_ETIMEDOUT);
    case migration::outcome::moved:
      return {};
    default:
      return make_error_code(PH_EBUSY);
  }
}

int Node::Impl::poll() {
  if (!running_) return PH_ESTATE;
  int ran = migration_->run_pending(*progress_);
  progress_->drive_until([] { return false; }, clock::now());
  return ran + migration_->run_pending(*progress_);
}

std::error_code Node::Impl::finalize(const char* log_out) {
  if (!running_) return make_error_code(PH_ESTATE);
  // A migration this node takes part in ends first (both its ends hold locks the other waits on), and so does
  // every lock_you_first it sent: its sender may still ask for this node's lock. Closing, the node starts
  // nothing new and grants no lock (docs/migration.md, "Leaving in the middle").
  progress_->call([&] { migration_->protocol().close(); });
  if (!drive_migration([&] { return !migration_->protocol().involved(); },
                       clock::now() + migration_settle_timeout))
    logger()->warn("{}: finalizing in the middle of a migration", config_.name);
  running_ = false;
  progress_->call([&] {
    drain_outbox();  // what ph_send accepted goes out before the links drain
    overlay_->begin_shutdown();
  });
  if (!progress_->drive_until([&] { return overlay_->is_drained(); }, clock::now() + drain_timeout))
    logger()->warn("{}: links did not drain within {} s; logging what is left", config_.name,
                   drain_timeout.count());
  progress_->call([&] { overlay_->say_goodbye_and_close(); });
  progress_->drive_until([&] { return overlay_->is_quiet(); }, clock::now() + goodbye_timeout);
  progress_->stop_background();

  auto undelivered = take_inbox_packets([](vp_t) { return true; });
  for (auto& p : overlay_->take_undelivered()) {
    // Replies to this incarnation's own migration attempts die with it; a query to a virtual node is kept,
    // for whoever assumes it next (its sender waits for an answer).
    if (p.tag == migration::protocol_tag && p.dest == resource_name_) continue;
    undelivered.push_back(std::move(p));
  }
  migration_.reset();
  overlay_.reset();
  progress_.reset();
  std::error_code result;
  if (log_out && *log_out) {
    if (auto err = write_message_log(log_out, undelivered); !err.empty()) result = fail(PH_EIO, err);
  } else if (!undelivered.empty()) {
    logger()->warn("{}: {} undelivered messages discarded: no log file given to finalize", config_.name,
                   undelivered.size());
  }
  logger()->info("{}: finalized ({} messages logged)", config_.name, log_out ? undelivered.size() : 0);
  local_port_.clear();
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

std::optional<Message> Node::recv(int tag) { return impl_->receive(tag, clock::time_point::max()); }
std::optional<Message> Node::try_recv(int tag) {
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
  if (!pack || !unpack) return make_error_code(PH_EINVAL);
  if (!impl_->running_) return make_error_code(PH_ESTATE);
  impl_->progress_->call([&] { impl_->migration_->set_handlers(std::move(pack), std::move(unpack)); });
  return {};
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
    std::vector<Interval> out;
    for (const auto& i : impl_->overlay_->assumed().intervals()) out.push_back({i.lo, i.hi});
    return out;
  });
}

std::size_t Node::drop_links() {
  if (!impl_->running_) return 0;
  return impl_->progress_->call([&] { return impl_->overlay_->drop_links(); });
}

RoutingSnapshot Node::routing_snapshot() const {
  RoutingSnapshot s;
  if (!impl_->running_) return s;
  // One turn with the token: the overlay's view and the migration state are of the same instant.
  const auto v = impl_->progress_->call([&] {
    const auto& p = impl_->migration_->protocol();
    s.migration_locked = p.locked();
    s.migration_lock_holder = p.locked() ? p.holder() : 0;
    s.migration_attempting = p.busy();
    return impl_->overlay_->view();
  });
  s.self = v.self;
  s.seqno = v.seqno;
  for (const auto& i : v.assumed) s.assumed.push_back({i.lo, i.hi});
  for (const auto& r : v.routes) {
    RouteInfo ri{r.destination, r.next_hop, r.seqno, r.metric, {}};
    for (const auto& i : r.intervals) ri.intervals.push_back({i.lo, i.hi});
    s.routes.push_back(std::move(ri));
  }
  for (const auto& l : v.links)
    s.links.push_back({l.peer, l.address, l.state, l.outbound, l.unacked, l.bytes_queued});
  s.waiting_messages = v.waiting_messages;
  s.waiting_bytes = v.waiting_bytes;
  s.links_lost = v.links_lost;
  return s;
}

}  // namespace phoenix
