// The chaos test of the migration protocol (the Phoenix paper's section 3.5 test, made harder), shared by the
// test in the suite (test_chaos.cpp) and the longer soak run by hand (scripts/chaos-soak.sh).
//
// Node processes on 127.0.0.1 forward messages to random virtual nodes, each message a fixed number of hops,
// counting every receipt by id, while they migrate random amounts of their intervals to their neighbours,
// cut their links, leave permanently (a fresh node joins instead), and leave temporarily (finalize to a log,
// then a new process resumes from it on another port). Every process records the instants it starts and stops
// assuming each interval (Node::set_ownership_observer, on the system-wide monotonic clock), and its
// application state is a counter per virtual node that moves with the virtual nodes (pack/unpack). At the end:
// every message was received exactly once per hop; every virtual node's counter equals the receipts addressed
// to it; replaying the ownership records, no two processes assumed one virtual node at any instant; and the
// final intervals cover [0, L).
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
};

struct result {
  std::uint64_t receipts = 0, duplicates = 0, missing = 0;
  std::uint64_t expected = 0;            // the receipts the chains of the retired messages add up to
  std::uint64_t counter_mismatches = 0;  // virtual nodes whose final counter differs from their receipts
  std::uint64_t overlaps = 0;            // instants at which two processes assumed one virtual node
  std::uint64_t ownership_events = 0;
  bool covered = false;  // the final intervals are disjoint and cover [0, L)
  std::uint64_t migrations = 0, cuts = 0;
  std::uint64_t out_of_hops = 0;  // packets that used up their hop limit (transient loops; held and retried)
  bool left = false, rejoined = false, suspended = false, resumed = false;
  std::uint64_t paused_holding_lock = 0;  // pauses taken while holding a migration lock
  std::vector<std::string> errors;
  std::string events;  // on failure: each process's last runtime log lines about migrations and leaving
};

// Runs the whole test in a temporary directory; progress lines go to `progress` when set.
result run(const spec& s, void (*progress)(const std::string&) = nullptr);

}  // namespace phoenix::test::chaos
