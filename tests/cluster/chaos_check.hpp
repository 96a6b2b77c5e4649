// The checks of the chaos test (chaos.hpp): the records its processes wrote, read back and replayed after the
// run, and during it for the crash test's stop condition.
//
// The records, one file per process (CHILD: unique per process), one line per record, each line written with
// one write(2) so that a process SIGKILLed leaves every line it wrote whole; times are nanoseconds on the
// system-wide monotonic clock (now_ns):
//   own-CHILD       "t sign lo hi": sign '+' it assumed [lo, hi), '-' it released it, 's' it released it for
//                   a temporary leave (its next incarnation takes it up), 'k' it was killed assuming it
//                   (written by the parent, after the process was reaped)
//   sent-CHILD      "t origin seq hop dest": a hop, written before it is sent
//   receipts-CHILD  "t origin seq hop dest last": a hop received; last 1 if it ended its message
//   final-CHILD     "lo hi", then "vnode counter" lines: what a process that ended by itself assumed, its state
//   orphaned-CHILD  "lo hi owner": what its Node::orphaned() listed just before it finalized
//   done-CHILD      present once the process ended by itself, cleanly
#pragma once

#include <cstdint>
#include <filesystem>
#include <phoenix/interval.hpp>
#include <string>
#include <vector>

#include "chaos.hpp"

namespace phoenix::test::chaos {

// Nanoseconds on the system-wide monotonic clock (launch::Clock): the time of every record.
std::int64_t now_ns();

// A process the parent SIGKILLed, and when: an instant after it was reaped, so every record it wrote is older.
struct kill_record {
  std::string child;
  std::int64_t t = 0;
  std::string kind;  // owner, partner or relay
};

// Where a run's records are, what it killed, and when it began (times in messages are relative to it).
struct run_records {
  std::filesystem::path dir;
  std::vector<kill_record> kills;
  std::int64_t t0 = 0;
};

// The intervals one ownership file (own-CHILD) leaves its process assuming at its end.
std::vector<Interval> owned_at_end(const std::filesystem::path& own_file);

// No two processes assumed one virtual node at any instant (r.overlaps, r.ownership_events).
void check_ownership(const run_records& run, result& r);

// Hops sent and received, chains of hops, counters against receipts, and the final cover, under the rules of
// chaos.hpp (r.receipts, expected, duplicates, missing, counter_mismatches, covered and the excused counts).
void check_deliveries(const spec& s, const run_records& run, result& r);

// Hops sent and not received, and hops received that a live process did not send on, that no kill excuses:
// 0 once every message has ended, or ended where a kill explains it.
std::uint64_t unaccounted(const spec& s, const run_records& run);

// What each process's runtime said last about migrations and leaving, newest last, and the kills.
std::string recent_events(const run_records& run);

}  // namespace phoenix::test::chaos
