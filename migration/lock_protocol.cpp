#include "migration/lock_protocol.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <vector>

#include "migration/log.hpp"

namespace phoenix::migration {

lock_protocol::lock_protocol(vp_t self, vp_t space_size, std::uint64_t first_attempt,
                             std::chrono::nanoseconds lease)
    : self_(self), space_size_(space_size), lease_(lease), next_attempt_(first_attempt == 0 ? 1 : first_attempt) {}

void lock_protocol::send(vp_t to, kind k, std::uint64_t n, interval span) {
  effect e;
  e.what = effect::type::send_to_node;
  e.to = to;
  e.m.what = k;
  e.m.from = self_;
  e.m.span = span;
  e.m.attempt = n;
  effects_.push_back(e);
}

void lock_protocol::free_lock() {
  locked_ = false;
  holder_ = 0;
  grant_attempt_ = 0;
}

void lock_protocol::set_interval(std::optional<interval> i) {
  migratable_ = i.has_value();
  interval_ = i.value_or(interval{});
  if (interval_.empty()) interval_ = {};
}

void lock_protocol::order(effect::type what, vp_t partner, interval t, std::uint64_t n) {
  effect e;
  e.what = what;
  e.to = partner;
  e.m.span = t;
  e.m.attempt = n;
  effects_.push_back(e);
}

void lock_protocol::end_attempt(outcome o) {
  attempting_ = false;
  replied_ = false;
  cleanup_to_.reset();
  outcome_ = o;
}

// --- Figure 2 -----------------------------------------------------------------------------------------------

std::optional<effects> lock_protocol::begin(const plan& p, vp_t any_vnode, std::uint64_t number) {
  if (locked_ || attempting_ || !migratable_ || closing_) return std::nullopt;  // lines 9, 12, 15: s = FREE, not l
  vp_t v = 0;
  side where = p.where;
  if (interval_.empty()) {
    where = side::any;  // line 10: any virtual node
    v = any_vnode;
  } else if (where == side::below && interval_.lo > 0) {
    v = interval_.lo - 1;  // line 13: a - 1 in V
  } else if (where == side::above && interval_.hi < space_size_) {
    v = interval_.hi;  // line 16: b in V
  } else {
    return std::nullopt;  // the side lies outside V (or "any" for a node that assumes something)
  }
  plan_ = p;
  side_ = where;
  attempt_ = number != 0 ? number : next_attempt_++;
  partner_ = 0;
  partner_span_ = {};
  aborting_ = false;
  replied_ = false;
  cleanup_to_.reset();
  effect query;
  query.what = effect::type::send_to_vnode;
  query.to = v;
  query.m.what = kind::query;
  query.m.from = self_;
  query.m.attempt = attempt_;
  effects_.push_back(query);  // lines 10, 13, 16
  attempting_ = true;         // lines 11, 14, 17
  outcome_ = outcome::running;
  logger()->debug("{:x}: attempt {} to {} via vnode {}", self_, attempt_,
                  p.what == plan::action::take_half || p.what == plan::action::take ? "take" : "give", v);
  return take_effects();
}

// --- Figure 3 -----------------------------------------------------------------------------------------------

effects lock_protocol::on_message(const message& m) {
  const vp_t q = m.from;
  if (!current(m)) {
    on_stale(m);
    return take_effects();
  }
  if (is_copy(m)) {
    on_copy(m);
    return take_effects();
  }
  switch (m.what) {
    case kind::query:
      on_query(q, m.attempt);
      break;
    case kind::lock_you_first:
      on_lock_you_first(q, m.span);
      break;
    case kind::lock2:
      on_lock2(q, m.span, m.attempt);
      break;
    case kind::fail1:
      on_fail1(q);
      break;
    case kind::fail2:
      on_fail2(q);
      break;
    case kind::ok1:
      on_ok1(q, m.span);
      break;
    case kind::ok2:
      on_ok2(q);
      break;
    case kind::cleanup:
      on_cleanup(q);
      break;
    case kind::cleanup_ack:
      on_cleanup_ack(q);
      break;
    case kind::give_request:
      on_give_request(q, m.span, m.attempt);
      break;
    case kind::done:
      on_done(q, m.span, m.attempt);
      break;
    case kind::refuse:
      on_refuse(q);
      break;
    case kind::withdraw:
      on_withdraw(q);
      break;
    case kind::state_begin:
    case kind::state_chunk:
    case kind::state_ack:
    case kind::give_back:
      break;  // the host's
  }
  return take_effects();
}

// Lines 34 and 54, "S and I are adjacent as intended" (docs/migration.md, decision 1): on the side the query
// went to; with I empty anything non-empty; an empty S never.
bool lock_protocol::adjacent_as_intended(interval s) const {
  if (s.empty() || !migratable_) return false;
  if (interval_.empty()) return true;
  switch (side_) {
    case side::below:
      return s.hi == interval_.lo;
    case side::above:
      return s.lo == interval_.hi;
    case side::any:
      return is_adjacent(s, interval_);
  }
  return false;
}

// Lines 20-32.
void lock_protocol::on_query(vp_t q, std::uint64_t n) {
  if (q == self_) {
    // Line 22: the query came back to its sender. Decision 8: only this attempt's query ends it; one of an
    // attempt a lease ended may come back during the next. A copy of it that comes back after a reply ends
    // nothing.
    if (attempting_ && n == attempt_ && !replied_) end_attempt(outcome::failed);
  } else if (answered_before(q, n) || holds_grant_for(q, n)) {
    logger()->debug("{:x}: a copy of the query of attempt {} from {:x}, answered before; dropped", self_, n, q);
  } else if (!migratable_ || closing_) {
    send(q, kind::fail1, n);  // a node with several intervals sits migration out, a closing node too
  } else if (q < self_) {
    ++invited_[q];  // answered by lock2 or withdraw
    invited_seen_.erase(q);
    send(q, kind::lock_you_first, n, interval_);  // line 25: q must lock itself before p
  } else if (!locked_) {
    locked_ = true;  // line 28: grant p's lock to q
    holder_ = q;
    grant_attempt_ = n;
    send(q, kind::ok1, n, interval_);
  } else {
    send(q, kind::fail1, n);  // line 31: p is already locked
  }
}

// Lines 33-40 (a reply to the attempt under way: on_message sent any other to on_stale).
void lock_protocol::on_lock_you_first(vp_t q, interval s) {
  replied_ = true;
  if (!locked_ && adjacent_as_intended(s)) {
    locked_ = true;  // line 36: lock itself, then ask for the second lock
    holder_ = self_;
    partner_ = q;
    partner_span_ = s;
    send(q, kind::lock2, attempt_, s);
  } else {
    end_attempt(outcome::failed);       // line 39
    send(q, kind::withdraw, attempt_);  // decision 6: q stops waiting for a lock2
  }
}

void lock_protocol::answered_invitation(vp_t q) {
  const auto it = invited_.find(q);
  if (it == invited_.end()) {
    logger()->warn("{:x}: an answer from {:x} to an invitation never sent", self_, q);
  } else if (--it->second == 0) {
    invited_.erase(it);
  }
  invited_seen_.erase(q);  // the count changed: its lease starts again
}

void lock_protocol::on_withdraw(vp_t q) { answered_invitation(q); }

// Lines 41-48.
void lock_protocol::on_lock2(vp_t q, interval s, std::uint64_t n) {
  answered_invitation(q);
  if (!locked_ && migratable_ && !closing_ && interval_ == s) {
    locked_ = true;  // line 44: grant the lock to q
    holder_ = q;
    grant_attempt_ = n;
    send(q, kind::ok2, n);
  } else {
    send(q, kind::fail2, n);  // line 47
  }
}

// Line 49.
void lock_protocol::on_fail1(vp_t) {
  replied_ = true;
  end_attempt(outcome::failed);
}

// Lines 50-52: the remote lock was refused; free the own lock taken at line 36.
void lock_protocol::on_fail2(vp_t) {
  end_attempt(outcome::failed);
  if (locked_ && holder_ == self_) free_lock();
}

// Lines 53-59.
void lock_protocol::on_ok1(vp_t q, interval s) {
  replied_ = true;
  if (!locked_ && adjacent_as_intended(s)) {
    locked_ = true;  // line 56: got the first lock remotely, and now the second
    holder_ = self_;
    attempting_ = false;
    both_locks_held(q, s);
  } else {
    cleanup_to_ = q;
    send(q, kind::cleanup, attempt_);  // line 58; l stays true until cleanup_ack (line 66)
  }
}

// Lines 60-62.
void lock_protocol::on_ok2(vp_t q) {
  if (!attempting_ || partner_ != q) {
    logger()->warn("{:x}: ok2 from {:x} it did not ask; ignored", self_, q);
    return;
  }
  attempting_ = false;
  both_locks_held(q, partner_span_);
}

// Lines 63-65, read as "free the lock I granted" (docs/migration.md, decision 2): l is this node's own
// attempt and stays as it is.
void lock_protocol::on_cleanup(vp_t q) {
  const std::uint64_t n = grant_attempt_;
  free_lock();
  send(q, kind::cleanup_ack, n);
}

// Line 66; after an empty plan, the initiator's own lock is freed here too.
void lock_protocol::on_cleanup_ack(vp_t) {
  if (aborting_) {
    aborting_ = false;
    free_lock();
    end_attempt(outcome::moved_nothing);
  } else {
    end_attempt(outcome::failed);
  }
}

// --- the transfer -------------------------------------------------------------------------------------------

// The interval that moves, from this node's interval I and the partner's S, by the plan (docs/migration.md).
interval lock_protocol::plan_interval(interval s) const {
  const interval i = interval_;
  const bool s_below = !i.empty() && s.hi == i.lo;  // otherwise S is above I, or I is empty
  switch (plan_.what) {
    case plan::action::take_half: {
      const std::uint64_t n = s.size() / 2;  // the giver keeps the larger half
      if (n == 0) return {};
      return s_below || i.empty() ? interval{s.hi - n, s.hi} : interval{s.lo, s.lo + n};
    }
    case plan::action::take: {
      const std::uint64_t n = std::min(plan_.count, s.size() - 1);  // the giver keeps one at least
      if (n == 0) return {};
      return s_below || i.empty() ? interval{s.hi - n, s.hi} : interval{s.lo, s.lo + n};
    }
    case plan::action::give_all:
      return i;
    case plan::action::give: {
      const std::uint64_t n = std::min(plan_.count, i.size());
      if (n == 0) return {};
      return s_below ? interval{i.lo, i.lo + n} : interval{i.hi - n, i.hi};
    }
  }
  return {};
}

void lock_protocol::both_locks_held(vp_t q, interval s) {
  partner_ = q;
  partner_span_ = s;
  const interval t = plan_interval(s);
  const bool taking = plan_.what == plan::action::take_half || plan_.what == plan::action::take;
  if (t.empty()) {
    aborting_ = true;  // nothing to move: free q's lock, then ours on cleanup_ack
    cleanup_to_ = q;
    send(q, kind::cleanup, attempt_);
    return;
  }
  logger()->debug("{:x}: both locks held with {:x}; {} [{}, {})", self_, q, taking ? "taking" : "giving", t.lo,
                  t.hi);
  if (taking) {
    transfer_ = transfer{t, q, self_, attempt_};
    order(effect::type::expect, q, t, attempt_);
    send(q, kind::give_request, attempt_, t);
  } else {
    transfer_ = transfer{t, self_, q, attempt_};
    order(effect::type::give, q, t, attempt_);
  }
}

void lock_protocol::on_give_request(vp_t q, interval t, std::uint64_t n) {
  const bool at_an_end = !t.empty() && (t.lo == interval_.lo || t.hi == interval_.hi) && interval_.lo <= t.lo &&
                         t.hi <= interval_.hi && t != interval_;
  if (!at_an_end) {
    // Not from the grant as it stands (forged, or planned on another interval): nothing is released, the grant
    // ends, and q is told, so that neither side waits for the other.
    logger()->error(
        "{:x}: give_request for [{}, {}) from {:x} does not fit (locked {}, holder {:x}, I [{}, {})); refused",
        self_, t.lo, t.hi, q, locked_, holder_, interval_.lo, interval_.hi);
    free_lock();
    send(q, kind::refuse, n);
    return;
  }
  transfer_ = transfer{t, self_, q, n};
  order(effect::type::give, q, t, n);
}

// t, adjacent to the interval (or the interval empty), joins it.
void lock_protocol::absorb(interval t) {
  interval_ = interval_.empty() ? t : interval{std::min(t.lo, interval_.lo), std::max(t.hi, interval_.hi)};
}

void lock_protocol::released(interval t) {
  if (transfer_ && transfer_->giver == self_ && transfer_->what == t) transfer_->released = true;
  if (t == interval_) {
    interval_ = {};
  } else if (t.lo == interval_.lo) {
    interval_.lo = t.hi;
  } else if (t.hi == interval_.hi) {
    interval_.hi = t.lo;
  } else {
    logger()->error("{:x}: released [{}, {}), not at an end of [{}, {})", self_, t.lo, t.hi, interval_.lo,
                    interval_.hi);
  }
}

bool lock_protocol::expects_state(vp_t from, interval t, std::uint64_t n) const {
  if (transfer_ && transfer_->attempt == n && transfer_->what == t && !transfer_->complete) {
    if (transfer_->taker == self_ && transfer_->giver == from) return true;                          // we take
    if (transfer_->giver == self_ && transfer_->taker == from && transfer_->released) return true;  // it comes back
  }
  if (granted(from, n)) return true;  // the initiator gives to us
  return has_pending(from, n);
}

state_verdict lock_protocol::state_complete(vp_t from, interval t, std::uint64_t n, effects& out) {
  const bool taking_now = (transfer_ && transfer_->taker == self_ && transfer_->giver == from &&
                           transfer_->attempt == n && transfer_->what == t && !transfer_->complete) ||
                          granted(from, n);
  if (taking_now && !acceptable(t)) {
    // The paper's assertion, before anything is unpacked: not adjacent to this node's interval (a partner that
    // planned on something else, or an interval that changed under the lock). Refused by the host, and the giver
    // takes it back; what this node held for it ends here, since nothing more will come for it.
    logger()->error("{:x}: [{}, {}) from {:x} is not adjacent to [{}, {}); refused", self_, t.lo, t.hi, from,
                    interval_.lo, interval_.hi);
    if (granted(from, n)) {
      free_lock();
    } else {
      abandon_take();
    }
    return state_verdict::ignore;
  }
  if (transfer_ && transfer_->attempt == n && transfer_->what == t && !transfer_->complete) {
    if (transfer_->taker == self_ && transfer_->giver == from) {
      transfer_->complete = true;
      return state_verdict::unpack;
    }
    if (transfer_->giver == self_ && transfer_->taker == from && transfer_->released) {
      transfer_->complete = true;  // the taker gave it back: this node's interval waited for it
      transfer_->back = true;
      return state_verdict::unpack;
    }
  }
  if (granted(from, n)) {
    transfer_ = transfer{t, from, self_, n};
    transfer_->complete = true;
    return state_verdict::unpack;
  }
  if (!end_pending(from, n)) return state_verdict::ignore;
  // A late state (decision 8): assumed if it can be, as if the lease had not broken, else given back. Never
  // dropped: it is in this message alone.
  if (!locked_ && !closing_ && migratable_ && acceptable(t)) {
    locked_ = true;  // holds the interval still until the unpack is done
    holder_ = from;
    transfer_ = transfer{t, from, self_, n};
    transfer_->complete = true;
    transfer_->late = true;
    logger()->info("{:x}: [{}, {}) from {:x} came after its lease; assuming it", self_, t.lo, t.hi, from);
    return state_verdict::unpack;
  }
  logger()->info("{:x}: [{}, {}) from {:x} came after its lease and cannot be assumed here; giving it back",
                 self_, t.lo, t.hi, from);
  effect e;
  e.what = effect::type::give_back;
  e.to = from;
  e.m.span = t;
  e.m.attempt = n;
  out.push_back(e);
  return state_verdict::give_back;
}

std::optional<effects> lock_protocol::arrived(interval t, vp_t giver) {
  // The paper's assertion (footnote 2): an interval arriving at q is adjacent to q's interval.
  if (!interval_.empty() && !is_adjacent(t, interval_)) {
    logger()->error("{:x}: interval [{}, {}) from {:x} is not adjacent to [{}, {})", self_, t.lo, t.hi, giver,
                    interval_.lo, interval_.hi);
    return std::nullopt;
  }
  if (!transfer_ || transfer_->what != t) {  // state_complete did not answer unpack for it
    logger()->error("{:x}: [{}, {}) from {:x} arrived for no transfer; ignored", self_, t.lo, t.hi, giver);
    return std::nullopt;
  }
  absorb(t);
  const transfer tr = *transfer_;
  const bool initiator = holder_ == self_;
  free_lock();
  transfer_.reset();
  if (tr.back) {
    logger()->info("{:x}: [{}, {}) came back from {:x}", self_, t.lo, t.hi, tr.taker);
    if (initiator) end_attempt(outcome::failed);
    return take_effects();
  }
  send(tr.giver, kind::done, tr.attempt, t);
  if (initiator && !tr.late) {
    moved_ = t;
    end_attempt(outcome::moved);
  }
  return take_effects();
}

void lock_protocol::decline(interval t) {
  if (!transfer_ || transfer_->giver != self_ || transfer_->what != t) return;
  absorb(t);
  transfer_->declined = true;
}

effects lock_protocol::declined(interval t, vp_t giver, std::uint64_t n) {
  if (transfer_ && transfer_->taker == self_ && transfer_->giver == giver && transfer_->attempt == n) {
    const bool initiator = holder_ == self_;
    free_lock();
    transfer_.reset();
    if (initiator) end_attempt(outcome::failed);
  } else if (granted(giver, n)) {
    free_lock();
  } else {
    end_pending(giver, n);  // or nothing here expects it any more: done all the same, so the giver stops waiting
  }
  send(giver, kind::done, n, t);
  return take_effects();
}

void lock_protocol::on_done(vp_t, interval t, std::uint64_t) {
  const bool initiator = holder_ == self_;
  const bool declined = transfer_->declined;
  free_lock();
  transfer_.reset();
  if (initiator && declined) {
    end_attempt(outcome::failed);
  } else if (initiator) {
    moved_ = t;
    end_attempt(outcome::moved);
  }
}

// The responder had broken its grant before the give_request came: nothing was released, the attempt failed.
void lock_protocol::on_refuse(vp_t q) {
  logger()->info("{:x}: {:x} refused the give_request of attempt {}: its grant had ended", self_, q, attempt_);
  abandon_take();
}

void lock_protocol::abandon_take() {
  transfer_.reset();
  if (locked_ && holder_ == self_) free_lock();
  end_attempt(outcome::failed);
}

std::string lock_protocol::describe() const {
  std::vector<std::string> parts;
  if (locked_) parts.push_back(holder_ == self_ ? "locked by itself" : fmt::format("locked by {:x}", holder_));
  if (attempting_) parts.push_back(fmt::format("attempting (partner {:x})", partner_));
  if (transfer_) {
    const bool giving = transfer_->giver == self_;
    parts.push_back(fmt::format("{} [{}, {}) {} {:x}", giving ? "giving" : "taking", transfer_->what.lo,
                                transfer_->what.hi, giving ? "to" : "from",
                                giving ? transfer_->taker : transfer_->giver));
  }
  for (const auto& [q, n] : invited_) parts.push_back(fmt::format("{} invitation(s) open to {:x}", n, q));
  for (const auto& p : pending_)
    parts.push_back(fmt::format("pending attempt {} of {:x} (its state may still come)", p.attempt, p.partner));
  return parts.empty() ? "idle" : fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace phoenix::migration
