// migration/lock_protocol.hpp — the lock-ordered interval migration protocol of the Phoenix paper (section 3.5,
// Figures 1-3), as specified in docs/migration.md.
//
// A deterministic state machine, one per node: begin() is Figure 2, on_message() dispatches to one handler per
// message of Figure 3 (each names its figure lines), and the transfer that follows once the initiator holds
// both locks (which the figures leave out) is split between this class (who gives what to whom, the paper's
// adjacency assertion, freeing the locks) and its host (releasing, packing, streaming and assuming, which need
// the application's thread). Nothing here blocks, reads a clock, draws a random number or calls out: each step
// returns what the host must do as data (`effects`, in order), as etcd's raft returns its Ready, so tests
// drive the protocol through any interleaving they like by moving those effects around.
//
// Leases (decision 8): every message names the initiator's attempt, and tick(now) breaks, after `lease` of a
// phase, what is safe to break against a partner that is only slow: an attempt before anything was released, a
// lock granted and not yet used. A message of what was broken is answered so that the partner frees what it
// holds, and a state that comes late is assumed or given back, never dropped. After a release nothing is broken
// by time; only partner_gone (the taker is unreachable for good) frees the giver.
//
// Not thread-safe: the host calls it from one thread at a time (the node's I/O context).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "migration/message.hpp"

namespace phoenix::migration {

// state_begin's length when the giver declines (its pack failed).
inline constexpr std::uint64_t declined_length = ~std::uint64_t{0};

// Which neighbour an attempt goes to: the owner of a - 1 (below), of b (above), or of a random virtual node
// (any; only for a node that assumes nothing, Figure 2 line 10).
enum class side : std::uint8_t { any, below, above };

// What an attempt is for; applied by the initiator once both locks are held (docs/migration.md, "plan").
struct plan {
  enum class action : std::uint8_t { take_half, take, give_all, give };
  action what = action::take_half;
  side where = side::any;
  std::uint64_t count = 0;  // take, give: how many virtual nodes
};

// How this node's last attempt went.
enum class outcome : std::uint8_t { none, running, failed, moved_nothing, moved };

// One thing a step asks of the node the protocol runs in.
struct effect {
  enum class type : std::uint8_t {
    send_to_vnode,  // send m to whoever assumes virtual node `to` when it arrives
    send_to_node,   // send m to the resource name `to`
    // Give m.span to `to`: release it (then call released(m.span)), pack its state and stream it. The taker's
    // done arrives through on_message.
    give,
    // m.span's state is about to come from `to`; once all of it is here, call arrived(m.span, to).
    expect,
    // Stream the state that came late for m.span back to `to` (its giver) as give_back, attempt m.attempt.
    give_back,
  };
  type what = type::send_to_node;
  vp_t to = 0;
  message m;  // give, expect: only m.span
};
using effects = std::vector<effect>;

// What to do with a state whose last byte arrived (state_complete).
enum class state_verdict : std::uint8_t {
  unpack,     // unpack it, then arrived(): this node assumes it (or takes its own back)
  give_back,  // the effects stream it back to its giver
  ignore,     // it belongs to nothing here
};

class lock_protocol {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  static constexpr std::chrono::milliseconds default_lease{3000};
  // Pending grants and takes kept at once; past it the oldest is forgotten (a state for it is then refused).
  static constexpr std::size_t max_pending = 64;

  // first_attempt: the number of this incarnation's first attempt, the next ones following it, for attempts
  // begun without a number of their own (begin).
  lock_protocol(vp_t self, vp_t space_size, std::uint64_t first_attempt = 1,
                std::chrono::nanoseconds lease = default_lease);

  // Figure 2 (lines 8-18): starts an attempt if this node's lock is free and no attempt of its own is
  // outstanding, and the plan's side lies inside V; nullopt otherwise. `any_vnode` is where the query goes when
  // this node assumes nothing (line 10): the host draws it uniformly from [0, L). `number` names the attempt in
  // all its messages; the host draws each at random (in [1, 2^63)), so that a late message of an earlier
  // attempt or incarnation names none of this one, and a peer that does not see the attempt's messages cannot
  // forge one of them. 0: the next of the sequence from first_attempt.
  [[nodiscard]] std::optional<effects> begin(const plan& p, vp_t any_vnode, std::uint64_t number = 0);

  // One handler per message (Figure 3 and the transfer). Messages of the state stream (state_begin,
  // state_chunk, state_ack) belong to the host and are ignored here.
  [[nodiscard]] effects on_message(const message& m);

  // The transfer, reported by the host.
  void released(interval t);  // the giver released t: it leaves this node's interval
  // Whether a state stream for t from `from`, attempt n, may begin here: the transfer under way, a granted lock,
  // a pending grant or take (a late state), or the giver's own t coming back.
  bool expects_state(vp_t from, interval t, std::uint64_t n) const;
  // The last byte of that state arrived: unpack it (the lock now holds the interval still until arrived()),
  // give it back (a late state this node cannot assume: its lock is taken, it closes, or t is not adjacent),
  // or ignore it. Effects (give_back) go to `out`.
  [[nodiscard]] state_verdict state_complete(vp_t from, interval t, std::uint64_t n, effects& out);
  // The state of t is unpacked. Checks the paper's assertion (t is adjacent to this node's interval, or that is
  // empty); if it holds, t joins the interval, this node's lock is freed and `done` goes to the giver (not for
  // t given back to this node), and the caller assumes t. Returns nullopt, changing nothing, if the assertion
  // fails.
  [[nodiscard]] std::optional<effects> arrived(interval t, vp_t giver);
  // The paper's assertion alone, for a taker that checks before unpacking.
  bool acceptable(interval t) const { return interval_.empty() || is_adjacent(t, interval_); }
  // The giver could not produce t's state (its pack failed): t is this node's again, and the taker is told
  // (state_begin with length `declined_length`); both locks are freed as after a transfer, nothing moved.
  void decline(interval t);
  // The taker learnt that the giver declined: frees its lock and sends done, as after a transfer (also for a
  // pending grant or take of attempt n, which then ends).
  [[nodiscard]] effects declined(interval t, vp_t giver, std::uint64_t n);

  // Leases: breaks what has been in one breakable phase for `lease` (the first tick that sees a phase starts its
  // lease, so a break comes between lease and lease plus the host's tick period).
  void tick(time_point now);
  // `node` is gone for good (unreachable past the host's bound): a state this node released to it is lost with
  // it (returned, so the host can say so), and its lock, pending grants and takes and invitations end.
  std::optional<interval> partner_gone(vp_t node);
  // The taker of a released interval, while this node waits for its done (partner_gone's subject); 0 if none.
  vp_t releasing_to() const;
  std::size_t pending() const { return pending_.size(); }
  std::vector<vp_t> pending_partners() const;
  // `node` will send nothing more (it finalized, or crashed): its pending grants and takes end.
  void forget_pending(vp_t node) {
    std::erase_if(pending_, [&](const pending_record& p) { return p.partner == node; });
  }
  std::uint64_t leases_broken() const { return leases_broken_; }
  // Forgets which queries this node answered, as the bounded record does with the oldest when a peer floods it
  // (the random runs forget at any moment, as the model's FORGET_ANSWERS does).
  void forget_answers() { answered_.clear(); }

  // The interval the node assumes, kept in step by the host when the application assumes or releases outside
  // the protocol; nullopt when the node assumes several intervals, which makes it sit migration out (it
  // answers every query with fail1 and every lock2 with fail2).
  void set_interval(std::optional<interval> i);

  // The node is about to finalize (docs/migration.md, "Leaving in the middle"): it begins no attempt and
  // grants no lock from now on (queries get fail1, lock2 gets fail2), while what is under way runs to its end.
  void close() { closing_ = true; }
  void reopen() { closing_ = false; }  // a suspend that could not go ahead
  bool closing() const { return closing_; }

  vp_t self() const { return self_; }
  bool locked() const { return locked_; }          // s
  vp_t holder() const { return holder_; }          // h, while locked
  bool attempting() const { return attempting_; }  // l
  std::optional<interval> current() const { return migratable_ ? std::optional(interval_) : std::nullopt; }
  // An attempt of this node's is in progress: querying, locking, or moving state.
  bool busy() const { return attempting_ || (locked_ && holder_ == self_); }
  outcome last_outcome() const { return outcome_; }
  interval last_moved() const { return moved_; }  // what the last successful attempt moved
  bool transferring() const { return transfer_.has_value(); }
  // A lock_you_first this node sent is not yet answered (by lock2 or withdraw): its sender may still ask for
  // this node's lock, so the node must stay until it has answered that (decision 6).
  bool invitations_open() const { return !invited_.empty(); }
  // Everything that needs this node to stay: an attempt of its own, a lock it holds or granted, an open
  // invitation, a pending grant or take (a state may still come).
  bool involved() const {
    return attempting_ || locked_ || transfer_.has_value() || !invited_.empty() || !pending_.empty();
  }
  // What involved() is made of, for a log line: "locked by 5f3a..., attempting, giving [0, 10) to 77c1...,
  // invitations open to 12ab...", or "idle".
  std::string describe() const;

 private:
  struct transfer {
    interval what;
    vp_t giver = 0;
    vp_t taker = 0;
    std::uint64_t attempt = 0;
    bool declined = false;
    bool released = false;  // the giver released `what`: nothing is broken by time from here
    bool complete = false;  // the taker has the whole state and unpacks it: nothing is broken by time
    bool back = false;      // `what` comes back to its giver (give_back)
    bool late = false;      // a late state this node assumes
  };
  // A grant or take broken by a lease, whose partner may still send what ends it (decision 8).
  struct pending_record {
    vp_t partner = 0;
    std::uint64_t attempt = 0;
  };
  // Where this node's own attempt is, for its lease.
  enum class stage : std::uint8_t { none, locking, cleaning, taking };
  struct lease_watch {
    std::uint64_t key = 0;
    vp_t partner = 0;
    time_point since{};
  };

  // Figure 3, one handler per message; q is the sender, n the attempt.
  void on_query(vp_t q, std::uint64_t n);
  void on_lock_you_first(vp_t q, interval s);
  void on_lock2(vp_t q, interval s, std::uint64_t n);
  void on_fail1(vp_t q);
  void on_fail2(vp_t q);
  void on_ok1(vp_t q, interval s);
  void on_ok2(vp_t q);
  void on_cleanup(vp_t q);
  void on_cleanup_ack(vp_t q);
  // The transfer.
  void on_give_request(vp_t q, interval t, std::uint64_t n);
  void on_done(vp_t q, interval t, std::uint64_t n);
  void on_refuse(vp_t q);
  void on_withdraw(vp_t q);
  void answered_invitation(vp_t q);  // lock2 or withdraw from q
  // Leases.
  bool current(const message& m) const;  // m belongs to what this node has now, not to something broken
  void on_stale(const message& m);
  bool is_copy(const message& m) const;  // a current message that answers a copy of this attempt's query
  void on_copy(const message& m);
  bool answered_before(vp_t q, std::uint64_t n);  // a copy of a query answered here; else remembers it
  bool holds_grant_for(vp_t q, std::uint64_t n) const;  // a lock granted for (q, n), held or pending
  bool granted(vp_t q, std::uint64_t n) const {
    return locked_ && holder_ == q && q != self_ && grant_attempt_ == n && !transfer_;
  }
  stage own_stage() const;
  void break_own();
  void break_grant();
  void add_pending(vp_t partner, std::uint64_t n);
  bool end_pending(vp_t partner, std::uint64_t n);  // whether there was one
  bool has_pending(vp_t partner, std::uint64_t n) const;
  void free_lock();

  bool adjacent_as_intended(interval s) const;  // lines 34 and 54
  void both_locks_held(vp_t q, interval s);     // after line 56 or 62: apply the plan
  interval plan_interval(interval s) const;     // T, from I and S
  void absorb(interval t);                      // I = I + t, t adjacent to I (or I empty)
  void end_attempt(outcome o);
  void abandon_take();  // the own take gets no state: its lock is freed and the attempt fails
  void send(vp_t to, kind k, std::uint64_t n, interval span = {});
  void order(effect::type what, vp_t partner, interval t, std::uint64_t n);  // give or expect
  effects take_effects() { return std::exchange(effects_, {}); }

  vp_t self_;
  vp_t space_size_;
  std::chrono::nanoseconds lease_;
  effects effects_;  // of the step under way, handed to the host when it returns
  bool locked_ = false;      // s = LOCKED
  vp_t holder_ = 0;          // h
  interval interval_;        // I
  bool migratable_ = true;   // assumes one interval (or none)
  bool attempting_ = false;  // l
  bool closing_ = false;
  // lock_you_first sent to q and not yet answered, per q (a count: q's next query may overtake the withdraw
  // that ended its previous attempt, as they travel different ways).
  std::map<vp_t, std::uint32_t> invited_;
  std::map<vp_t, time_point> invited_seen_;  // the first tick that saw q's count as it is

  std::uint64_t next_attempt_;     // the number of this node's next attempt
  std::uint64_t attempt_ = 0;      // of the attempt under way, or the last one
  std::uint64_t grant_attempt_ = 0;  // the attempt a lock granted to holder_ belongs to
  std::vector<pending_record> pending_;
  std::optional<lease_watch> own_watch_, grant_watch_;
  std::uint64_t leases_broken_ = 0;

  // The initiator's attempt.
  plan plan_;
  side side_ = side::any;  // where the query went (any when I was empty)
  vp_t partner_ = 0;       // the responder, once known
  interval partner_span_;  // S as sent in lock2
  bool aborting_ = false;  // both locks held, nothing to move: cleanup sent, own lock freed on cleanup_ack
  // Where this attempt's cleanup went (line 58, or nothing to move) until it is acknowledged: only that node's
  // cleanup_ack ends the attempt, not one answering the cleanup a copy's ok1 got, nor one a peer forged.
  std::optional<vp_t> cleanup_to_;
  // Copies of a query (docs/migration.md, "Copies of a query"): only the first reply to this attempt's query
  // answers it (replied_); a node drops a copy of a query it answered (answered_, the last max_answered, by
  // sender and attempt).
  bool replied_ = false;
  std::deque<std::pair<vp_t, std::uint64_t>> answered_;
  static constexpr std::size_t max_answered = 64;
  std::optional<transfer> transfer_;
  outcome outcome_ = outcome::none;
  interval moved_;
};

}  // namespace phoenix::migration
