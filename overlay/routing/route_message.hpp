// overlay/routing/route_message.hpp — wire codec for the payloads of routing frames (updates, summaries, dump
// requests and seqno requests).
//
// Explicit little-endian, no padding, strict decoding: anything but exactly one well-formed payload is
// rejected. Decoders are meant to face hostile input (they are fuzzed): no UB, and nothing is allocated in
// proportion to a claimed count before the bytes backing it are known to be there.
//
// Update payload:
//   u8 flags (bit0 = full_dump, other bits must be 0), u8 reserved (0), u16 count,
//   count x { u64 source, u64 seqno, u16 metric, u16 n_intervals, u16 n_transit,
//             n_intervals x { u64 lo, u64 hi }, n_transit x { u64 lo, u64 hi } }
//   The first list is what the source assumes, the second what it has in transit (route_entry::in_transit);
//   in a retraction (metric 0xFFFF), what it was last known to have.
//   Intervals are half-open, each non-empty (lo < hi), sorted and disjoint (prev.hi <= lo) within each list;
//   at most 4096 over both.
//   An entry with seqno 0 is a forget (route_table.hpp): metric 0xFFFF and no intervals, or it is rejected.
// Summary payload:
//   u64 digest, u32 entries, u8 flags (bit0 = ends_dump, other bits must be 0).
// Dump request payload: empty.
// Request payload:
//   u64 source, u64 seqno, u16 hop_limit (never 0; RFC 8966 4.6.11 has 8 bits, too few for an overlay's long
//   paths: a request must reach a source 150 hops away on a ring of 300).
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "overlay/routing/route_table.hpp"

namespace phoenix::overlay {

inline constexpr std::size_t route_update_header_bytes = 4;
inline constexpr std::size_t route_entry_header_bytes = 22;
inline constexpr std::size_t route_interval_bytes = 16;
inline constexpr std::size_t route_request_bytes = 18;
inline constexpr std::size_t route_summary_bytes = 13;
inline constexpr std::size_t max_route_intervals = 4096;

// Bytes one entry takes on the wire.
constexpr std::size_t encoded_size(const route_entry& e) {
  return route_entry_header_bytes + route_interval_bytes * (e.intervals.size() + e.in_transit.size());
}

// Splits the update into as few payloads as greedy packing allows, each <= max_payload_bytes and each
// carrying the full_dump flag; entries are never split and keep their order. An update without entries gives
// one header-only payload. Returns an empty vector if the update cannot be encoded: an entry that would not
// fit a payload on its own, more than max_route_intervals intervals, or intervals the decoder would reject.
std::vector<std::vector<std::byte>> encode_update(const route_update& u, std::size_t max_payload_bytes);
std::vector<std::byte> encode_request(const route_request& r);
std::vector<std::byte> encode_summary(const route_summary& s);

// nullopt on malformed input; then *error (if given) says why, for logs.
std::optional<route_update> decode_update(std::span<const std::byte> payload, std::string* error = nullptr);
std::optional<route_request> decode_request(std::span<const std::byte> payload, std::string* error = nullptr);
std::optional<route_summary> decode_summary(std::span<const std::byte> payload, std::string* error = nullptr);
std::optional<route_dump_request> decode_dump_request(std::span<const std::byte> payload,
                                                      std::string* error = nullptr);

}  // namespace phoenix::overlay
