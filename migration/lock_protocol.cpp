#include "migration/lock_protocol.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <vector>

#include "migration/log.hpp"

namespace phoenix::migration {

lock_protocol::lock_protocol(vp_t self, vp_t space_size) : self_(self), space_size_(space_size) {}

void lock_protocol::send(vp_t to, kind k, interval span) {
  effect e;
  e.what = effect::type::send_to_node;
  e.to = to;
  e.m.what = k;
  e.m.from = self_;
  e.m.span = span;
  effects_.push_back(e);
}

void lock_protocol::set_interval(std::optional<interval> i) {
  migratable_ = i.has_value();
  interval_ = i.value_or(interval{});
  if (interval_.empty()) interval_ = {};
}

void lock_protocol::order(effect::type what, vp_t partner, interval t) {
  effect e;
  e.what = what;
  e.to = partner;
  e.m.span = t;
  effects_.push_back(e);
}

void lock_protocol::end_attempt(outcome o) {
  attempting_ = false;
  outcome_ = o;
}

// --- Figure 2 -----------------------------------------------------------------------------------------------

std::optional<effects> lock_protocol::begin(const plan& p, vp_t any_vnode) {
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
  partner_ = 0;
  partner_span_ = {};
  aborting_ = false;
  effect query;
  query.what = effect::type::send_to_vnode;
  query.to = v;
  query.m.what = kind::query;
  query.m.from = self_;
  effects_.push_back(query);  // lines 10, 13, 16
  attempting_ = true;         // lines 11, 14, 17
  outcome_ = outcome::running;
  logger()->debug("{:x}: attempt to {} via vnode {}", self_,
                  p.what == plan::action::take_half || p.what == plan::action::take ? "take" : "give", v);
  return take_effects();
}

// --- Figure 3 -----------------------------------------------------------------------------------------------

effects lock_protocol::on_message(const message& m) {
  const vp_t q = m.from;
  switch (m.what) {
    case kind::query:
      on_query(q);
      break;
    case kind::lock_you_first:
      on_lock_you_first(q, m.span);
      break;
    case kind::lock2:
      on_lock2(q, m.span);
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
      on_give_request(q, m.span);
      break;
    case kind::done:
      on_done(q, m.span);
      break;
    case kind::withdraw:
      on_withdraw(q);
      break;
    case kind::state_begin:
    case kind::state_chunk:
    case kind::state_ack:
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
void lock_protocol::on_query(vp_t q) {
  if (q == self_) {
    if (attempting_) end_attempt(outcome::failed);  // line 22: the query came back to its sender
  } else if (!migratable_ || closing_) {
    send(q, kind::fail1);  // a node with several intervals sits migration out, a closing node too
  } else if (q < self_) {
    ++invited_[q];                             // answered by lock2 or withdraw
    send(q, kind::lock_you_first, interval_);  // line 25: q must lock itself before p
  } else if (!locked_) {
    locked_ = true;  // line 28: grant p's lock to q
    holder_ = q;
    send(q, kind::ok1, interval_);
  } else {
    send(q, kind::fail1);  // line 31: p is already locked
  }
}

// Lines 33-40.
void lock_protocol::on_lock_you_first(vp_t q, interval s) {
  if (!attempting_) {
    logger()->warn("{:x}: lock_you_first from {:x} without an attempt; withdrawn", self_, q);
    send(q, kind::withdraw);
    return;
  }
  if (!locked_ && adjacent_as_intended(s)) {
    locked_ = true;  // line 36: lock itself, then ask for the second lock
    holder_ = self_;
    partner_ = q;
    partner_span_ = s;
    send(q, kind::lock2, s);
  } else {
    end_attempt(outcome::failed);  // line 39
    send(q, kind::withdraw);       // decision 6: q stops waiting for a lock2
  }
}

void lock_protocol::answered_invitation(vp_t q) {
  const auto it = invited_.find(q);
  if (it == invited_.end()) {
    logger()->warn("{:x}: an answer from {:x} to an invitation never sent", self_, q);
  } else if (--it->second == 0) {
    invited_.erase(it);
  }
}

void lock_protocol::on_withdraw(vp_t q) { answered_invitation(q); }

// Lines 41-48.
void lock_protocol::on_lock2(vp_t q, interval s) {
  answered_invitation(q);
  if (!locked_ && migratable_ && !closing_ && interval_ == s) {
    locked_ = true;  // line 44: grant the lock to q
    holder_ = q;
    send(q, kind::ok2);
  } else {
    send(q, kind::fail2);  // line 47
  }
}

// Line 49.
void lock_protocol::on_fail1(vp_t) {
  if (attempting_) end_attempt(outcome::failed);
}

// Lines 50-52: the remote lock was refused; free the own lock taken at line 36.
void lock_protocol::on_fail2(vp_t) {
  if (!attempting_) return;
  end_attempt(outcome::failed);
  if (locked_ && holder_ == self_) {
    locked_ = false;
    holder_ = 0;
  }
}

// Lines 53-59.
void lock_protocol::on_ok1(vp_t q, interval s) {
  if (!attempting_) {
    logger()->warn("{:x}: ok1 from {:x} without an attempt; releasing it", self_, q);
    send(q, kind::cleanup);
    return;
  }
  if (!locked_ && adjacent_as_intended(s)) {
    locked_ = true;  // line 56: got the first lock remotely, and now the second
    holder_ = self_;
    attempting_ = false;
    both_locks_held(q, s);
  } else {
    send(q, kind::cleanup);  // line 58; l stays true until cleanup_ack (line 66)
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
  if (locked_ && holder_ == q) {
    locked_ = false;
    holder_ = 0;
  }
  send(q, kind::cleanup_ack);
}

// Line 66; after an empty plan, the initiator's own lock is freed here too.
void lock_protocol::on_cleanup_ack(vp_t) {
  if (aborting_) {
    aborting_ = false;
    locked_ = false;
    holder_ = 0;
    end_attempt(outcome::moved_nothing);
  } else if (attempting_) {
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
    send(q, kind::cleanup);
    return;
  }
  logger()->debug("{:x}: both locks held with {:x}; {} [{}, {})", self_, q, taking ? "taking" : "giving", t.lo,
                  t.hi);
  if (taking) {
    transfer_ = transfer{t, q, self_};
    order(effect::type::expect, q, t);
    send(q, kind::give_request, t);
  } else {
    transfer_ = transfer{t, self_, q};
    order(effect::type::give, q, t);
  }
}

void lock_protocol::on_give_request(vp_t q, interval t) {
  const bool at_an_end = !t.empty() && (t.lo == interval_.lo || t.hi == interval_.hi) && interval_.lo <= t.lo &&
                         t.hi <= interval_.hi && t != interval_;
  if (!locked_ || holder_ != q || !at_an_end || transfer_) {
    logger()->error(
        "{:x}: give_request for [{}, {}) from {:x} does not fit (locked {}, holder {:x}, I [{}, {}))", self_,
        t.lo, t.hi, q, locked_, holder_, interval_.lo, interval_.hi);
    return;
  }
  transfer_ = transfer{t, self_, q};
  order(effect::type::give, q, t);
}

// t, adjacent to the interval (or the interval empty), joins it.
void lock_protocol::absorb(interval t) {
  interval_ = interval_.empty() ? t : interval{std::min(t.lo, interval_.lo), std::max(t.hi, interval_.hi)};
}

void lock_protocol::released(interval t) {
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

std::optional<effects> lock_protocol::arrived(interval t, vp_t giver) {
  // The paper's assertion (footnote 2): an interval arriving at q is adjacent to q's interval.
  if (!interval_.empty() && !is_adjacent(t, interval_)) {
    logger()->error("{:x}: interval [{}, {}) from {:x} is not adjacent to [{}, {})", self_, t.lo, t.hi, giver,
                    interval_.lo, interval_.hi);
    return std::nullopt;
  }
  absorb(t);
  const bool initiator = holder_ == self_;
  locked_ = false;
  holder_ = 0;
  transfer_.reset();
  send(giver, kind::done, t);
  if (initiator) {
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

effects lock_protocol::declined(interval t, vp_t giver) {
  const bool initiator = holder_ == self_;
  locked_ = false;
  holder_ = 0;
  transfer_.reset();
  send(giver, kind::done, t);
  if (initiator) end_attempt(outcome::failed);
  return take_effects();
}

void lock_protocol::on_done(vp_t q, interval t) {
  if (!transfer_ || transfer_->giver != self_ || transfer_->taker != q || transfer_->what != t) {
    logger()->error("{:x}: done for [{}, {}) from {:x} matches no transfer; ignored", self_, t.lo, t.hi, q);
    return;
  }
  const bool initiator = holder_ == self_;
  const bool declined = transfer_->declined;
  locked_ = false;
  holder_ = 0;
  transfer_.reset();
  if (initiator && declined) {
    end_attempt(outcome::failed);
  } else if (initiator) {
    moved_ = t;
    end_attempt(outcome::moved);
  }
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
  return parts.empty() ? "idle" : fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace phoenix::migration
