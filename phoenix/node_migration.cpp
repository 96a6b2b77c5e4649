// node_migration.cpp — what a node's application assumes and releases, and its migration calls: ph_join,
// ph_leave, the rebalancing migrate, ph_poll, and the settling of migrations before it finalizes. The protocol
// itself is migration/lock_protocol.hpp, hosted by migration_driver.hpp; these are the loops around it.
#include <algorithm>
#include <phoenix/node.hpp>
#include <random>

#include "phoenix/handover.hpp"
#include "phoenix/log.hpp"
#include "phoenix/node_impl.hpp"

namespace phoenix {

namespace {
// How long ph_finalize waits for a migration this node takes part in to end. Long: a node that leaves in the
// middle of an attempt strands its partner, whose lock (or attempt) then waits for an incarnation that is gone
// (docs/migration.md, "Leaving in the middle").
constexpr auto migration_settle_timeout = std::chrono::seconds(30);
// Back-off between failed migration attempts: randomised, doubling from the first to the last
// (MIGRATION-NOTES.md point 3: attempts may keep failing under contention).
constexpr auto backoff_first = std::chrono::milliseconds(1);
constexpr auto backoff_last = std::chrono::milliseconds(200);
}  // namespace

// While a migration involving this node is under way its interval belongs to the protocol: the application
// cannot change it underneath (docs/migration.md).
std::error_code Node::Impl::assume(Interval s) {
  if (!running_) return make_error_code(PH_ESTATE);
  if (s.empty() || s.hi > config_.space_size) return make_error_code(PH_EINVAL);
  return progress_->call([&] {
    if (migration_involved()) return make_error_code(PH_ESTATE);
    if (!assume_now(s)) return make_error_code(PH_EOVERLAP);
    sync_migration_interval();
    left_ = false;  // the application takes an interval up again: finalize keeps to what it is told
    return std::error_code{};
  });
}

std::error_code Node::Impl::release(Interval s) {
  if (!running_) return make_error_code(PH_ESTATE);
  if (s.empty() || s.hi > config_.space_size) return make_error_code(PH_EINVAL);
  return progress_->call([&] {
    if (migration_involved()) return make_error_code(PH_ESTATE);
    if (!overlay_->assumed().contains(s)) return make_error_code(PH_ENOTASSUMED);
    release_and_requeue(s);
    sync_migration_interval();
    return std::error_code{};
  });
}

// Paper 3.3 and API.md "Release": messages for s queued here and not yet received go back into the overlay,
// to the next node that assumes s (handed over: delivered here once already). The state of the end-to-end
// streams to s leaves with it (docs/overlay.md, "End-to-end delivery"): a migration gives it to the taker; a
// plain ph_release drops it, and the next owner waits for its senders' copies of what it misses.
void Node::Impl::release_and_requeue(Interval s) {
  if (overlay_->release(s) == base::interval_set::result::ok && observer_) observer_(false, s);
  for (auto& p : take_inbox_packets([&](vp_t v) { return s.contains(v); }))
    overlay_->route_in_transit(std::move(p));
  (void)overlay_->take_streams(s);
}

// A migration's release: the messages for s in the inbox go with the state (handover.hpp), not through the
// overlay, where they would wait at this node for the taker's route and die with it if it crashed first.
Bytes Node::Impl::release_for_migration(Interval s) {
  if (overlay_->release(s, true) == base::interval_set::result::ok && observer_) observer_(false, s);
  std::vector<handed_message> inbox;
  for (auto& p : take_inbox_packets([&](vp_t v) { return s.contains(v); }))
    inbox.push_back({p.dest, p.source, p.tag, std::move(p.body)});
  return encode_handover(overlay_->take_streams(s), inbox, hand_over_losses(s));
}

// The taker's side (and a giver's whose interval came back): the streams first, then the handed-over messages
// go to the inbox ahead of anything for s, then s is assumed (which routes what waited for it).
void Node::Impl::arrive(Interval s, std::span<const std::byte> with) {
  std::string error;
  if (auto h = decode_handover(with, s, config_.space_size, error)) {
    overlay_->adopt_streams(h->streams);
    take_handed_losses(s, h->losses, h->losses_skipped);
    std::lock_guard lock(inbox_mu_);
    for (auto& m : h->inbox) inbox_.emplace_back(m.dest, m.source, m.tag, std::move(m.body));
  } else if (!with.empty()) {
    logger()->error("{}: what came with [{}, {}) beside its state is malformed ({}); ignored", config_.name, s.lo,
                    s.hi, error);
  }
  assume_now(s);
}

bool Node::Impl::assume_now(Interval s) {
  if (overlay_->assume(s) != base::interval_set::result::ok) return false;
  if (observer_) observer_(true, s);
  return true;
}

void Node::Impl::arm_lease() {
  const auto period = std::max(migration_->lease() / 4, std::chrono::milliseconds(10));
  lease_timer_->expires_after(period);
  lease_timer_->async_wait([this](std::error_code ec) {
    if (ec || !migration_) return;
    migration_->tick(clock::now());
    record_handed_losses();
    arm_lease();
  });
}

void Node::Impl::sync_migration_interval() {
  const auto all = overlay_->assumed().intervals();
  if (all.size() > 1) return migration_->protocol().set_interval(std::nullopt);
  migration_->protocol().set_interval(all.empty() ? Interval{} : all[0]);
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

// Under orphan_policy adopt, an orphan the rules give to this node is adopted first: the adoption timer finds a
// node that migrates all the time busy at nearly every look, and an orphan only it knows of (given_lost_) would
// wait until it crashed too.
migration::outcome Node::Impl::one_attempt(const migration::plan& p, clock::time_point deadline) {
  if (!progress_->call([&] {
        if (adoption_timer_) adopt_orphan();
        return migration_->begin(p);
      }))
    return migration::outcome::none;
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
  came_back();
  if (!running_ || !restore_.empty()) return make_error_code(PH_ESTATE);
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
  came_back();
  if (!running_) return make_error_code(PH_ESTATE);
  const auto deadline = clock::now() + std::max(timeout, std::chrono::milliseconds(0));
  // An attempt of this node's own may still bring it an interval (a take whose call timed out), and so may
  // the partner of a grant or take broken by a lease (a late state): the interval is looked at once neither
  // can (spin-models BUG_CLOSE_WHILE_BUSY; docs/migration.md, decision 8).
  const auto settled = [&] { return !migration_->protocol().busy() && migration_->protocol().pending() == 0; };
  if (!drive_migration(settled, deadline)) return make_error_code(PH_ETIMEDOUT);
  // What this node gave to a taker that crashed is known to it alone: under orphan_policy "adopt" it adopts
  // that again and gives it on, rather than leave with the only knowledge of it (orphan_adoption.hpp).
  const auto remaining = [&] {
    auto i = current_interval();
    if (i && i->empty() && adopt_given_lost(deadline)) i = current_interval();
    return i;
  };
  const auto first_side = [](const migration::interval& i) {
    return i.lo > 0 ? migration::side::below : migration::side::above;
  };
  auto i = remaining();
  if (!i) return make_error_code(PH_ESTATE);
  if (i->empty()) {
    left_ = true;
    return {};
  }
  if (i->lo == 0 && i->hi == config_.space_size) return make_error_code(PH_ESTATE);
  migration::side side = first_side(*i);
  std::chrono::milliseconds backoff = backoff_first;
  for (;;) {
    const auto o = one_attempt({migration::plan::action::give_all, side, 0}, deadline);
    i = remaining();
    if (!i || i->empty()) {
      left_ = true;
      return {};
    }
    // An orphan beside it adopted (one_attempt): the only owner left cannot leave.
    if (i->lo == 0 && i->hi == config_.space_size) return make_error_code(PH_ESTATE);
    // Moved, and still something to give: what it gave was adopted again, and is given on anew.
    if (o == migration::outcome::moved) side = first_side(*i);
    if (o == migration::outcome::running || clock::now() >= deadline) return make_error_code(PH_ETIMEDOUT);
    if (o == migration::outcome::moved) continue;
    // Alternate between the two neighbours while both exist: one of them may be busy for a while.
    const auto has = [&](migration::side s) {
      return s == migration::side::below ? i->lo > 0 : i->hi < config_.space_size;
    };
    const auto other = side == migration::side::below ? migration::side::above : migration::side::below;
    if (has(other) || !has(side)) side = other;
    back_off(backoff, deadline);
  }
}

std::error_code Node::Impl::migrate(const migration::plan& p, std::chrono::milliseconds timeout) {
  came_back();
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
  came_back();
  if (!running_) return PH_ESTATE;
  int ran = migration_->run_pending(*progress_);
  progress_->drive_until([] { return false; }, clock::now());
  return ran + migration_->run_pending(*progress_);
}

// A migration this node takes part in ends first (both its ends hold locks the other waits on), and so does
// every lock_you_first it sent: its sender may still ask for this node's lock. Closing, the node starts nothing
// new and grants no lock (docs/migration.md, "Leaving in the middle"). It closes only once no attempt of its
// own is under way: a take that completed after the close would give the node an interval as it finalizes
// (spin-models BUG_CLOSE_WHILE_BUSY).
bool Node::Impl::settle_migrations() {
  const auto deadline = clock::now() + migration_settle_timeout;
  auto& protocol = migration_->protocol();
  for (;;) {
    drive_migration([&] { return !protocol.busy(); }, deadline);
    bool leave_again = false;
    const bool closed = progress_->call([&] {
      if (protocol.busy() && clock::now() < deadline) return false;  // another thread began one meanwhile
      // A node that left holds something again (a late state came after leave returned): it leaves again,
      // as the model's CLOSE guard (empty and not busy, in one step) has it.
      const auto i = protocol.current();  // holding the token already
      if (left_ && i && !i->empty() && clock::now() < deadline) return !(leave_again = true);
      protocol.close();
      return true;
    });
    if (closed) break;
    if (leave_again) {
      logger()->warn("{}: an interval came back after leave; leaving again before finalizing", config_.name);
      (void)leave(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()));
    }
  }
  // A state given back streams on after its record ended: the node stays until all of it is acknowledged.
  return drive_migration([&] { return !protocol.involved() && !migration_->streaming(); }, deadline);
}

}  // namespace phoenix
