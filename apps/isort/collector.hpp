// apps/isort/collector.hpp — the record at virtual node 0 that learns how each iteration went and when the run
// is over; it moves with virtual node 0 like any other record.
//
// Bucket owners report runs of consecutive ranked buckets (RunReport); an iteration is complete when the runs
// cover [0, B) and the five test keys have been checked, and at the last iteration of a round also when key
// holders' checksums of their keys (InputReport) cover [0, N). Iterations complete in any order; they are
// folded into the Verification in order, and complete_through() — every iteration below it complete — is what
// the key holders wait on before running ahead (isort.hpp). The full verification of a round: the runs, in
// bucket order, start at the ranks their predecessors end at, each placed its keys in order, each run's least
// key is at least the previous run's greatest, they hold N keys, and the multiset of keys ranked equals the
// multiset the key holders had.
//
// Threads: belongs to the application thread of the node that assumes virtual node 0.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "apps/isort/bucket.hpp"
#include "apps/isort/coverage.hpp"
#include "apps/isort/npb.hpp"

namespace phoenix::apps::isort {

// Buckets [first, last) ranked together on one node, summed.
struct RunReport {
  std::uint64_t iteration = 0;
  std::uint32_t first = 0, last = 0;
  std::uint64_t keys = 0;
  std::uint64_t offset = 0;  // rank of the first key of bucket `first`
  std::vector<TestResult> tests;
  bool in_order = true;  // within the run: each bucket in order, each starting where the one before ends
  std::uint32_t min_key = 0, max_key = 0;  // over the run, when keys > 0
  std::uint64_t key_sum = 0, placed_sum = 0;
};

// Consecutive buckets of one iteration, ranked here, as one report. `run` is non-empty.
RunReport summarise(std::span<const RankedBucket> run);

// A key holder's keys [keys.lo, keys.hi) at the last iteration of a round: the multiset it ranked.
struct InputReport {
  std::uint64_t iteration = 0;
  IndexRange keys;
  std::uint64_t key_sum = 0;
};

class Collector {
 public:
  Collector(const NpbClass& c, std::uint32_t rounds);

  // false, recording nothing, for reports no correct run makes: an iteration out of range or complete, a
  // bucket or key range reported twice, a test key checked twice.
  bool add(const RunReport& r);
  bool add(const InputReport& r);
  // Folds the complete iterations at complete_through() into the verification; true if it advanced.
  bool advance();

  std::uint64_t complete_through() const { return complete_through_; }
  std::uint64_t total_iterations() const { return std::uint64_t{verification_.rounds} * max_iterations; }
  bool finished() const { return complete_through_ == total_iterations(); }
  const Verification& verification() const { return verification_; }

  void write(ByteWriter& w) const;
  static std::optional<Collector> read(const NpbClass& c, std::uint32_t rounds, ByteReader& r);

 private:
  struct Pending {
    Pending(std::uint32_t buckets, std::uint64_t keys) : buckets_ranked(buckets), inputs(keys) {}
    Coverage buckets_ranked;
    std::map<std::uint32_t, RunReport> runs;  // by first bucket
    std::uint32_t tests_seen = 0;             // bit t: test key t was checked
    std::uint64_t tests_passed = 0;
    Coverage inputs;  // key holders' reports, at the last iteration of a round
    std::uint64_t input_sum = 0;
  };
  Pending* pending(std::uint64_t g);
  bool complete(std::uint64_t g, const Pending& p) const;
  void fold(std::uint64_t g, const Pending& p);
  bool full_verification(const Pending& p, std::uint64_t& placed_sum) const;

  const NpbClass* class_;
  std::uint64_t complete_through_ = 0;
  Verification verification_;
  std::map<std::uint64_t, Pending> pending_;
};

}  // namespace phoenix::apps::isort
