// The chaos test of the migration protocol (the Phoenix paper's section 3.5 test, made harder), shared by the
// test in the suite (test_chaos.cpp) and the longer soak run by hand (scripts/chaos-soak.sh).
//
// Node processes on 127.0.0.1 forward messages to random virtual nodes, each message a fixed number of hops,
// counting every receipt by id, while they migrate random amounts of their intervals to their neighbours,
// cut their links, leave permanently (a fresh node joins instead), and leave temporarily (finalize to a log,
// then a new process resumes from it on another port). Every process records the instants it starts and stops
// assuming each interval (Node::set_ownership_observer, on the system-wide monotonic clock), every hop it sends
// (before the send) and every hop it receives, and its application state is a counter per virtual node that
// moves with the virtual nodes (pack/unpack). At the end: every hop sent was received exactly once, and every
// hop received that did not end its message was sent on; every virtual node's counter equals the receipts
// addressed to it; replaying the ownership records, no two processes assumed one virtual node at any instant;
// and the final intervals cover [0, L).
//
// With `kills`, the parent also SIGKILLs processes at random moments during the chaos, in turn: an owner (a
// process that assumes an interval), a migration partner (a process that finds itself holding a migration lock,
// between its own actions or in unpack as a taker, stops itself and is killed stopped), and a relay (a restarted process that assumes nothing, if there is one).
// Each is restarted at once as a fresh process on the victim's port (so the links to it come back), alternately
// one that assumes nothing and one that joins. The nodes run with orphan_policy "adopt", so what a victim
// assumed is adopted by a neighbour. The rules then, for a process X killed at instant tk (docs/overlay.md,
// "End-to-end delivery": what still loses or duplicates):
//   - the virtual nodes nobody assumes at tk, once X's intervals are counted as released at tk (X's own and any
//     on their way to or from X in a migration; not those of a process away on a temporary leave), are lost at
//     tk: a hop to one of them sent before a live process next assumed it (however long before tk: the test
//     cannot tell what was in X's inbox) may be lost or delivered twice (the owner crashed with its inbox and
//     its deduplication state), and their counters are not compared;
//   - a hop sent by X may be lost (its sender crashed), not duplicated;
//   - a message's chain of hops may end at X (X received a hop and died before it sent the next one);
//   - X's release at tk is an ownership record like any other: an adopter's assumption must come after it;
//   - the final intervals of the live processes may leave out only what one of them reports as orphaned.
// Everything else is checked as without kills: every other hop received exactly once, every chain goes on.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace phoenix::test::chaos {

struct spec {
  std::uint64_t space = 4096;
  int origins = 8;    // processes started at first; each sends `messages` messages
  int statics = 4;    // the first `statics` assume equal shares; the others join
  int messages = 25;  // per origin, circulating while the chaos lasts
  int hops = 5;       // receipts per message at least; messages hop on while the chaos lasts
  std::uint64_t seed = 1;
  std::chrono::milliseconds action_every{60};  // a migration or a link cut per process, on average
  std::chrono::milliseconds chaos_for{6000};   // then the processes only forward until every message retired
  std::chrono::milliseconds leave_at{1500};    // process 5 leaves for good; a fresh process joins instead
  std::chrono::milliseconds suspend_at{2500};  // process 2 finalizes to a log; a new process resumes it
  std::chrono::seconds deadline{150};
  // The pause test: a process that finds itself holding a migration lock (its own or granted to another)
  // stops itself with SIGSTOP, at most `pauses` times; the parent resumes it after `pause_for`.
  int pauses = 0;
  std::chrono::milliseconds pause_for{1500};
  // The crash test: SIGKILLs during the chaos, the kinds in turn: a migration partner, an owner, a relay. The
  // nodes then adopt orphaned intervals after `orphan_after`, and give up a migration whose partner is silent
  // after `migration_lease` (Config::orphan_after_ms, migration_lease_ms); without kills the defaults apply.
  int kills = 0;
  std::chrono::milliseconds orphan_after{1000};
  std::chrono::milliseconds migration_lease{1000};
};

struct result {
  std::uint64_t receipts = 0;
  std::uint64_t duplicates = 0;          // extra receipts of a hop sent once (not excused by a kill)
  std::uint64_t missing = 0;             // hops sent and never received, chains that stopped (not excused)
  std::uint64_t expected = 0;            // the receipts the chains of the retired messages add up to
  std::uint64_t counter_mismatches = 0;  // virtual nodes whose final counter differs from their receipts
  std::uint64_t overlaps = 0;            // instants at which two processes assumed one virtual node
  std::uint64_t ownership_events = 0;
  bool covered = false;  // the final intervals are disjoint and cover [0, L)
  std::uint64_t migrations = 0, cuts = 0;
  std::uint64_t out_of_hops = 0;  // packets that used up their hop limit (transient loops; held and retried)
  bool left = false, rejoined = false, suspended = false, resumed = false;
  std::uint64_t paused_holding_lock = 0;  // pauses taken while holding a migration lock
  // The crash test: the kills made, by kind, and what the rules above excused.
  std::uint64_t kills = 0, owner_kills = 0, partner_kills = 0, relay_kills = 0;
  std::uint64_t excused_losses = 0;      // hops lost that a kill explains
  std::uint64_t excused_duplicates = 0;  // extra receipts that a kill explains
  std::uint64_t ended_at_killed = 0;     // chains that ended at a process killed before it sent the next hop
  std::uint64_t lost_vnodes = 0;         // virtual nodes lost at some kill (their counters not compared)
  std::uint64_t orphaned_at_end = 0;     // virtual nodes nobody assumed at the end, reported orphaned
  std::vector<std::string> errors;
  std::string events;  // on failure: each process's last runtime log lines about migrations and leaving
};

// Runs the whole test in a temporary directory; progress lines go to `progress` when set.
result run(const spec& s, void (*progress)(const std::string&) = nullptr);

}  // namespace phoenix::test::chaos
