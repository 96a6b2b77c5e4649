// migration/lock_protocol_leases.cpp — leases (docs/migration.md, decision 8): which messages belong to what a
// node holds now, how those of a broken attempt or grant are answered, and what tick() breaks. The rest of
// lock_protocol is in lock_protocol.cpp.
#include <algorithm>

#include "migration/lock_protocol.hpp"
#include "migration/log.hpp"

namespace phoenix::migration {

// Decision 8: whether m belongs to the attempt or grant this node has now. Replies to the own attempt carry its
// number; a follow-up to a grant names the grant; the rest (query, lock2, withdraw) start or answer something
// new and are always current.
bool lock_protocol::current(const message& m) const {
  switch (m.what) {
    case kind::lock_you_first:
    case kind::ok1:
    case kind::fail1:
    case kind::ok2:
    case kind::fail2:
      return attempting_ && m.attempt == attempt_;
    case kind::cleanup_ack:  // from the node the cleanup went to: not the answer to a copy's, nor forged
      return (attempting_ || aborting_) && m.attempt == attempt_ && cleanup_to_ == m.from;
    case kind::cleanup:
    case kind::give_request:
      return granted(m.from, m.attempt);
    case kind::refuse:
      return transfer_ && transfer_->taker == self_ && transfer_->giver == m.from &&
             transfer_->attempt == m.attempt && !transfer_->complete;
    case kind::done:
      return transfer_ && transfer_->giver == self_ && transfer_->taker == m.from &&
             transfer_->attempt == m.attempt && transfer_->what == m.span;
    default:
      return true;
  }
}

// A message of an attempt or grant that is over (its lease broke it, or it ended otherwise): the partner frees
// what it holds for it and nothing moves.
void lock_protocol::on_stale(const message& m) {
  const vp_t q = m.from;
  switch (m.what) {
    case kind::lock_you_first:
      send(q, kind::withdraw, m.attempt);  // q stops waiting for a lock2
      break;
    case kind::ok1:
    case kind::ok2:
      send(q, kind::cleanup, m.attempt);  // frees q's grant if it is still that one
      break;
    case kind::cleanup:
      end_pending(q, m.attempt);
      send(q, kind::cleanup_ack, m.attempt);
      break;
    case kind::give_request:
      end_pending(q, m.attempt);
      logger()->info("{:x}: give_request of attempt {} from {:x} after its grant ended; refused", self_,
                     m.attempt, q);
      send(q, kind::refuse, m.attempt);  // nothing was released
      break;
    case kind::refuse:
      end_pending(q, m.attempt);
      break;
    case kind::done:
      logger()->info("{:x}: done for [{}, {}) from {:x} matches no transfer; ignored", self_, m.span.lo,
                     m.span.hi, q);
      break;
    default:  // fail1, fail2, cleanup_ack: what they would end has ended
      break;
  }
}

// --- leases (decision 8) ------------------------------------------------------------------------------------

lock_protocol::stage lock_protocol::own_stage() const {
  if (transfer_) {
    return transfer_->taker == self_ && holder_ == self_ && !transfer_->complete ? stage::taking : stage::none;
  }
  if (aborting_) return stage::cleaning;
  if (attempting_) return stage::locking;
  return stage::none;
}

void lock_protocol::tick(time_point now) {
  // Each watch holds what it saw at its first tick; the lease runs from there while the same thing is seen.
  const auto watch = [&](std::optional<lease_watch>& w, bool on, std::uint64_t key, vp_t partner) {
    if (!on) {
      w.reset();
      return false;
    }
    if (!w || w->key != key || w->partner != partner) {
      w = lease_watch{key, partner, now};
      return false;
    }
    return now - w->since >= lease_;
  };
  const stage st = own_stage();
  if (watch(own_watch_, st != stage::none, attempt_ * 4 + static_cast<std::uint64_t>(st), 0)) {
    break_own();
    own_watch_.reset();
  }
  if (watch(grant_watch_, locked_ && holder_ != self_ && !transfer_, grant_attempt_, holder_)) {
    break_grant();
    grant_watch_.reset();
  }
  for (auto it = invited_seen_.begin(); it != invited_seen_.end();)
    it = invited_.count(it->first) ? std::next(it) : invited_seen_.erase(it);
  for (auto it = invited_.begin(); it != invited_.end();) {
    const auto seen = invited_seen_.try_emplace(it->first, now).first;
    if (now - seen->second < lease_) {
      ++it;
      continue;
    }
    logger()->info("{:x}: lease of {} invitation(s) to {:x} ended; forgotten", self_, it->second, it->first);
    ++leases_broken_;
    invited_seen_.erase(seen);
    it = invited_.erase(it);
  }
}

// The own attempt, before anything was released to it: ends; a take that sent give_request keeps a pending
// take, for the state the giver may still send.
void lock_protocol::break_own() {
  const stage st = own_stage();
  logger()->info("{:x}: lease of attempt {} ended ({}, partner {:x}); its lock is free", self_, attempt_,
                 st == stage::taking ? "taking" : st == stage::cleaning ? "cleaning up" : "locking", partner_);
  if (st == stage::taking) {
    add_pending(transfer_->giver, attempt_);
    transfer_.reset();
  }
  if (locked_ && holder_ == self_) free_lock();
  aborting_ = false;
  ++leases_broken_;
  end_attempt(outcome::failed);
}

// A lock granted and not yet used to release anything: freed, with a pending grant for what may still come.
void lock_protocol::break_grant() {
  logger()->info("{:x}: lease of the lock granted to {:x} (attempt {}) ended; it is free", self_, holder_,
                 grant_attempt_);
  add_pending(holder_, grant_attempt_);
  free_lock();
  ++leases_broken_;
}

void lock_protocol::add_pending(vp_t partner, std::uint64_t n) {
  pending_.push_back({partner, n});
  if (pending_.size() > max_pending) {
    logger()->warn("{:x}: more than {} pending grants and takes; forgetting the oldest (of {:x})", self_,
                   max_pending, pending_.front().partner);
    pending_.erase(pending_.begin());
  }
}

bool lock_protocol::has_pending(vp_t partner, std::uint64_t n) const {
  return std::any_of(pending_.begin(), pending_.end(),
                     [&](const pending_record& p) { return p.partner == partner && p.attempt == n; });
}

bool lock_protocol::end_pending(vp_t partner, std::uint64_t n) {
  const auto it = std::find_if(pending_.begin(), pending_.end(),
                               [&](const pending_record& p) { return p.partner == partner && p.attempt == n; });
  if (it == pending_.end()) return false;
  pending_.erase(it);
  return true;
}

std::optional<interval> lock_protocol::partner_gone(vp_t node) {
  std::optional<interval> lost;
  if (transfer_ && transfer_->giver == self_ && transfer_->taker == node && transfer_->released &&
      !transfer_->complete) {
    if (!transfer_->declined) lost = transfer_->what;
    const bool initiator = holder_ == self_;
    logger()->warn("{:x}: {:x} is gone while [{}, {}) was on its way to it; the lock is free", self_, node,
                   transfer_->what.lo, transfer_->what.hi);
    transfer_.reset();
    free_lock();
    if (initiator) end_attempt(outcome::failed);
  }
  std::erase_if(pending_, [&](const pending_record& p) { return p.partner == node; });
  invited_.erase(node);
  invited_seen_.erase(node);
  return lost;
}

std::vector<vp_t> lock_protocol::pending_partners() const {
  std::vector<vp_t> out;
  for (const auto& p : pending_) out.push_back(p.partner);
  return out;
}

vp_t lock_protocol::releasing_to() const {
  return transfer_ && transfer_->giver == self_ && transfer_->released && !transfer_->complete ? transfer_->taker
                                                                                                : 0;
}

}  // namespace phoenix::migration
