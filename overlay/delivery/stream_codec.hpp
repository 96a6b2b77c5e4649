// stream_codec.hpp — end-to-end delivery's two encodings: an owner's acknowledgements to one sender (the body
// of a packet with stream_ack_tag, sent to the sender's resource name) and the state of streams as it moves
// with an interval or goes to a log. Both: a u32 count, then that many fixed-size records, little-endian
// (base/wire.hpp). Decoding rejects a count that does not match the length exactly.
#pragma once

#include <cstdint>
#include <optional>
#include <phoenix/bytes.hpp>
#include <span>
#include <vector>

#include "overlay/delivery/receive_streams.hpp"

namespace phoenix::overlay {

// The tag of acknowledgement packets, which the overlay handles itself (beside the runtime's reserved tags: -2
// migration, -3 control, -4 to -7 services).
inline constexpr std::int32_t stream_ack_tag = -8;

Bytes encode_acks(std::span<const stream_ack> acks);  // records of u64 vnode, u64 upto
std::optional<std::vector<stream_ack>> decode_acks(std::span<const std::byte> body);
Bytes encode_states(std::span<const stream_state> states);  // records of u64 source, u64 vnode, u64 last
std::optional<std::vector<stream_state>> decode_states(std::span<const std::byte> body);

}  // namespace phoenix::overlay
