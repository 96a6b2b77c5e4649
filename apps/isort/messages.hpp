// apps/isort/messages.hpp — integer sort's messages: what they carry, how they are written, and the checks a
// received one must pass (isort.hpp says who sends which, and to whom). Every message names its global
// iteration. A decoder returns nullopt for anything a correct sender would not write, so a forged or truncated
// message is counted and dropped, never trusted.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "apps/isort/bucket.hpp"
#include "apps/isort/collector.hpp"
#include "apps/isort/npb.hpp"
#include "apps/multicast/multicast.hpp"
#include "apps/steal/byte_codec.hpp"

namespace phoenix::apps::isort {

// Tags, relative to the application's first tag.
enum class Tag : int {
  counts = 0,    // multicast over buckets [0, B): a key holder's counts per bucket, and its test keys
  lower = 1,     // multicast over the buckets above a run: the run's total
  keys = 2,      // multicast over a chunk of buckets: a key holder's keys of those buckets
  report = 3,    // to virtual node 0: a RunReport
  input = 4,     // to virtual node 0: an InputReport
  progress = 5,  // multicast over [0, L): the collector's complete_through; at the total the run is over
};
inline constexpr int tag_count = 6;

struct CountsMessage {
  std::uint64_t iteration = 0;
  IndexRange keys;                    // the key indices counted
  std::vector<std::uint32_t> counts;  // per bucket, B of them
  std::vector<TestQuery> queries;     // the test keys among them
};

struct LowerMessage {
  std::uint64_t iteration = 0;
  IndexRange buckets;     // a run of buckets ...
  std::uint64_t sum = 0;  // ... and how many keys they hold
};

struct KeysMessage {
  std::uint64_t iteration = 0;
  IndexRange keys;  // the holder's key indices they come from
  std::uint32_t first_bucket = 0;
  std::vector<std::uint32_t> counts;  // keys of buckets first_bucket, first_bucket + 1, ...
  std::vector<std::uint32_t> values;  // those keys, bucket after bucket
  // The keys of bucket j, first_bucket <= j < first_bucket + counts.size(); after decode_keys.
  std::span<const std::uint32_t> keys_of(std::uint32_t j) const {
    const std::size_t i = j - first_bucket;
    return std::span<const std::uint32_t>(values).subspan(starts[i], starts[i + 1] - starts[i]);
  }
  std::vector<std::size_t> starts;  // where each bucket's keys start in values; set by decode_keys
};

Bytes encode(const CountsMessage& m);
Bytes encode(const LowerMessage& m);
Bytes encode(const KeysMessage& m);
// A KeysMessage's encoding from its parts where the sender has them (no copy into a KeysMessage first).
Bytes encode_keys(std::uint64_t iteration, IndexRange keys, std::uint32_t first_bucket,
                  std::span<const std::uint32_t> counts, std::span<const std::uint32_t> values);
Bytes encode(const RunReport& m);
Bytes encode(const InputReport& m);
Bytes encode_progress(std::uint64_t complete_through);

std::optional<CountsMessage> decode_counts(const NpbClass& c, std::span<const std::byte> b);
std::optional<LowerMessage> decode_lower(const NpbClass& c, std::span<const std::byte> b);
std::optional<KeysMessage> decode_keys(const NpbClass& c, std::span<const std::byte> b);
std::optional<RunReport> decode_report(const NpbClass& c, std::span<const std::byte> b);
std::optional<InputReport> decode_input(const NpbClass& c, std::span<const std::byte> b);
std::optional<std::uint64_t> decode_progress(std::span<const std::byte> b);

// The RunReport's fields, also part of the collector's migrating state.
void write_report(ByteWriter& w, const RunReport& m);
bool read_report(const NpbClass& c, ByteReader& r, RunReport& m);

}  // namespace phoenix::apps::isort
