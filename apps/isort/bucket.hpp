// apps/isort/bucket.hpp — the record of one bucket j: everything integer sort knows about the keys of values
// [j w, (j + 1) w) (w = MAX_KEY / buckets), kept at virtual node v_B(j) and moved with it by pack/unpack.
//
// Per iteration the record gathers, in any order and from any number of senders:
//   - counts: how many keys of each key index range fall into the bucket, complete when the ranges cover
//     [0, N); they also bring the partial-verification test keys whose check this bucket makes;
//   - lower totals: the number of keys in lower buckets, by bucket range, complete when the ranges cover
//     [0, j); their sum is the rank of the bucket's first key;
//   - keys: the bucket's keys themselves, complete when there are as many as the counts say.
// Then it is ready and ranks its keys by counting over its value range, as NPB's rank() does per bucket. At the
// last iteration of a round it also places its keys by their ranks (NPB's full_verify) and summarises them.
//
// Threads: a record belongs to the application thread of the node that assumes v_B(j).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "apps/isort/coverage.hpp"
#include "apps/isort/npb.hpp"
#include "apps/multicast/multicast.hpp"
#include "apps/steal/byte_codec.hpp"

namespace phoenix::apps::isort {

// Global iteration g = round * MAX_ITERATIONS + (it - 1): messages and records are keyed by it.
inline int npb_iteration(std::uint64_t g) { return static_cast<int>(g % max_iterations) + 1; }
inline bool last_of_round(std::uint64_t g) { return npb_iteration(g) == max_iterations; }

struct TestQuery {
  std::uint32_t test = 0;  // t in [0, 5)
  std::uint32_t key = 0;   // the value of key test_index[t] at this iteration
};

// The bucket whose record checks test key k: the one holding value k - 1, whose rank NPB checks; bucket 0 for
// a key NPB does not check (its check then fails, as NPB does not count it as passed).
std::uint32_t checking_bucket(const NpbClass& c, std::uint32_t k);

struct TestResult {
  std::uint32_t test = 0;
  bool passed = false;
};

// A ranked bucket, as the collector learns of it (through RunReport, collector.hpp).
struct RankedBucket {
  std::uint64_t iteration = 0;
  std::uint32_t bucket = 0;
  std::uint64_t keys = 0;
  std::uint64_t offset = 0;  // rank of its first key: keys in lower buckets
  std::vector<TestResult> tests;
  // The full verification, at the last iteration of a round only.
  bool in_order = true;                    // placed by their ranks, the keys are non-decreasing
  std::uint32_t min_key = 0, max_key = 0;  // when keys > 0
  std::uint64_t key_sum = 0;               // sum of key_checksum: the multiset of its keys
  std::uint64_t placed_sum = 0;            // sum of placed_checksum: each key at its rank
};

struct BucketIteration {
  BucketIteration(std::uint64_t all_keys, std::uint32_t bucket) : counted(all_keys), lower(bucket) {}
  Coverage counted;         // key indices whose counts have arrived, of [0, N)
  std::uint64_t total = 0;  // the bucket's keys, by those counts
  std::vector<TestQuery> queries;
  bool announced = false;  // the total has gone out to the higher buckets
  Coverage lower;          // buckets whose totals have arrived, of [0, j)
  std::uint64_t offset = 0;
  std::vector<std::uint32_t> keys;
  bool ranked = false;  // then keys and queries are dropped; kept to refuse late duplicates

  bool ready() const { return !ranked && counted.complete() && lower.complete() && keys.size() == total; }
};

class BucketRecord {
 public:
  BucketRecord(const NpbClass& c, std::uint32_t bucket) : class_(&c), bucket_(bucket) {}
  std::uint32_t bucket() const { return bucket_; }

  // Each returns false for input no correct sender makes: an overlapping range, a test key for another bucket
  // or from a sender not holding it, a key outside the bucket, more keys than counted, data for a ranked
  // iteration. What was refused is not recorded, except the last counts when they turn out fewer than the keys
  // already here: which of the two is wrong cannot be told, and the iteration will never be ready.
  bool add_counts(std::uint64_t g, IndexRange keys, std::uint64_t count, std::span<const TestQuery> queries);
  bool add_lower(std::uint64_t g, IndexRange buckets, std::uint64_t sum);
  bool add_keys(std::uint64_t g, std::span<const std::uint32_t> keys);

  const std::map<std::uint64_t, BucketIteration>& iterations() const { return iterations_; }
  BucketIteration* find(std::uint64_t g);
  // Ranks iteration g, which must be ready().
  RankedBucket rank(std::uint64_t g);
  // Forgets the iterations before g (the collector has them all); returns how many were not ranked (a bug).
  std::size_t forget_before(std::uint64_t g);

  void write(ByteWriter& w) const;
  static std::optional<BucketRecord> read(const NpbClass& c, ByteReader& r);

 private:
  BucketIteration& at(std::uint64_t g);
  void check_tests(const BucketIteration& s, int it, std::span<const std::uint64_t> rank_of, RankedBucket& out);
  void place(BucketIteration& s, std::vector<std::uint64_t>& rank_of, RankedBucket& out);

  const NpbClass* class_;
  std::uint32_t bucket_;
  std::map<std::uint64_t, BucketIteration> iterations_;
};

}  // namespace phoenix::apps::isort
