// communicator_parts.hpp — what the two halves of the communicator share (communicator.cpp receives,
// communicator_serving.cpp serves): the timing of their loops and the names they keep in the dataspace.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <phoenix/bytes.hpp>
#include <string>

#include "phoenix/volpex/communicator.hpp"

namespace phoenix::volpex::communicator_parts {

using clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// How long recv waits for an answer before looking after its target.
inline constexpr std::chrono::milliseconds answer_slice{20};
// How often the serving thread trims and looks for dead receivers.
inline constexpr std::chrono::milliseconds housekeeping{100};
// Hybrid selection: how long the pings of a rank's replicas are awaited.
inline constexpr std::chrono::milliseconds ping_wait{200};
// How often a receiver looks for a source replica not registered yet.
inline constexpr std::chrono::milliseconds lookup_every{250};
// How often recv looks up the receivers its log waits for.
inline constexpr std::chrono::milliseconds receiver_lookup_every{2000};

// Names in the dataspace that no application tag can take: they start with a byte 0x01.
inline std::string directory_tag(rank_id r, replica_index j) {
  return "\x01vmpi/dir/" + std::to_string(r) + "/" + std::to_string(j);
}

// Set by a replica in finish(): it needs no message any more.
inline std::string finished_tag(rank_id r, replica_index j) {
  return "\x01vmpi/done/" + std::to_string(r) + "/" + std::to_string(j);
}

inline std::string decision_tag(rank_id r, std::uint64_t n) {
  return "\x01vmpi/any/" + std::to_string(r) + "/" + std::to_string(n);
}

inline Bytes u64_bytes(std::uint64_t v) {
  Bytes b(8);
  std::memcpy(b.data(), &v, 8);
  return b;
}

inline Bytes choice_bytes(rank_id s, std::int32_t tag) {
  Bytes b(8);
  std::memcpy(b.data(), &s, 4);
  std::memcpy(b.data() + 4, &tag, 4);
  return b;
}

}  // namespace phoenix::volpex::communicator_parts
