// apps/isort/key_block.hpp — a run of consecutive keys [lo, hi) of the array being sorted, as the node that
// assumes their virtual nodes v_A(lo) .. v_A(hi - 1) holds them, with the iteration they are at. Blocks split
// when part of their virtual nodes migrates and merge again when neighbours are at the same iteration.
//
// Threads: a block belongs to the application thread of the node holding it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "apps/isort/bucket.hpp"
#include "apps/isort/npb.hpp"
#include "apps/steal/byte_codec.hpp"

namespace phoenix::apps::isort {

struct KeyBlock {
  std::uint64_t lo = 0, hi = 0;
  std::uint64_t next = 0;           // the next global iteration to run
  std::vector<std::uint32_t> keys;  // keys [lo, hi) as the last iteration left them

  // Iteration g's changes to the keys, after generating them anew if g starts a round.
  void prepare(const NpbClass& c, std::uint64_t g);
  // How many of the keys fall into each bucket.
  std::vector<std::uint32_t> count_buckets(const NpbClass& c) const;
  // The keys, bucket after bucket (counts from count_buckets), into `out`, whose memory the caller reuses from
  // one iteration to the next (a fresh buffer of a block's keys each iteration cost a page fault per 4 KiB and
  // a zero fill).
  void by_bucket(const NpbClass& c, const std::vector<std::uint32_t>& counts, std::vector<std::uint32_t>& out) const;
  // The partial-verification test keys among them, with their values.
  std::vector<TestQuery> test_queries(const NpbClass& c) const;
  std::uint64_t key_sum() const;  // sum of key_checksum

  // Keys [at, hi) leave this block (lo < at < hi) and are returned as a block of their own.
  KeyBlock split_off(std::uint64_t at);
  // Appends the block that starts where this one ends and is at the same iteration.
  void append(KeyBlock&& above);

  void write(ByteWriter& w) const;
  // nullopt unless a block of the class's keys with one key per index.
  static std::optional<KeyBlock> read(const NpbClass& c, ByteReader& r);
};

}  // namespace phoenix::apps::isort
