// communicator_protocol.hpp — the messages of replicated message passing (VolpexMPI's model; docs/volpex.md).
//
// A receiver replica pulls: it sends a request to one replica of the sending rank (to its resource name, with
// comm_request_tag), which answers from its sender log (to the receiver's resource name, with comm_answer_tag).
// Integers are little-endian (base/wire.hpp); every message starts with a version byte.
//   request: u8 version, u8 kind, u32 source rank (the rank asked), u32 receiver rank, u32 receiver replica,
//            u64 reply_to, u64 request id, i32 tag, u64 timestamp, u32 n, n x (i32 tag, u64 consumed)
//            pull:     message `timestamp` of stream (source, receiver, tag)
//            probe:    the first message to the receiver not yet consumed per the list, of `tag` (< 0: any)
//            progress: the receiver replica consumed the listed streams up to the given timestamps
//            ping:     answered with pong at once (the hybrid selection's first measurement)
//   answer:  u8 version, u8 kind, u64 request id, u32 source rank, u32 source replica, i32 tag, u64 timestamp,
//            u64 latest (the answering replica's latest timestamp on the stream), data: the body (the rest)
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "phoenix/service_messages.hpp"
#include "phoenix/volpex/sender_log.hpp"

namespace phoenix::volpex {

inline constexpr std::int32_t comm_request_tag = first_service_tag - 2;  // -6
inline constexpr std::int32_t comm_answer_tag = first_service_tag - 3;   // -7
inline constexpr std::uint8_t comm_protocol_version = 1;

struct comm_request {
  enum class kind : std::uint8_t { pull = 1, probe = 2, progress = 3, ping = 4 };
  kind what = kind::pull;
  rank_id source = 0;
  rank_id receiver = 0;
  replica_index receiver_replica = 0;
  std::uint64_t reply_to = 0;
  std::uint64_t id = 0;
  std::int32_t tag = 0;
  timestamp ts = 0;
  std::vector<std::pair<std::int32_t, timestamp>> consumed;  // probe, progress
};

struct comm_answer {
  enum class kind : std::uint8_t { data = 1, not_yet = 2, trimmed = 3, fallen_behind = 4, pong = 5 };
  kind what = kind::data;
  std::uint64_t id = 0;
  rank_id source = 0;
  replica_index source_replica = 0;
  std::int32_t tag = 0;
  timestamp ts = 0;
  timestamp latest = 0;
  object body;  // data
};

Bytes encode(const comm_request& r);
std::optional<comm_request> decode_comm_request(std::span<const std::byte> b);
Bytes encode(const comm_answer& a);
std::optional<comm_answer> decode_comm_answer(std::span<const std::byte> b);

}  // namespace phoenix::volpex
