// stream_codec.hpp — end-to-end delivery's two encodings: an owner's acknowledgements to one sender (the body
// of a packet with stream_ack_tag, sent to the sender's resource name) and the state of streams as it moves
// with an interval or goes to a log. Both: a u32 count, then that many fixed-size records, little-endian
// (base/wire.hpp). Decoding rejects a count that does not match the length exactly. And the resource name that
// a packet re-sent by its sender's next incarnation carries at the end of its body (packet::ack_to_follows).
#pragma once

#include <cstdint>
#include <optional>
#include <phoenix/bytes.hpp>
#include <span>
#include <utility>
#include <vector>

#include "overlay/delivery/receive_streams.hpp"

namespace phoenix::overlay {

// The tag of acknowledgement packets, which the overlay handles itself (beside the runtime's reserved tags: -2
// migration, -3 control, -4 to -7 services).
inline constexpr std::int32_t stream_ack_tag = -8;
// Acknowledgements of packets an earlier incarnation numbered, to the one that keeps them now (packet::
// ack_to_follows): a u64 source, the earlier incarnation's resource name, then the records of encode_acks.
inline constexpr std::int32_t stream_ack_for_tag = -9;
inline constexpr bool is_stream_ack(std::int32_t tag) { return tag == stream_ack_tag || tag == stream_ack_for_tag; }

Bytes encode_acks(std::span<const stream_ack> acks);  // records of u64 vnode, u64 upto
std::optional<std::vector<stream_ack>> decode_acks(std::span<const std::byte> body);
Bytes encode_acks_for(node_id source, std::span<const stream_ack> acks);
std::optional<std::pair<node_id, std::vector<stream_ack>>> decode_acks_for(std::span<const std::byte> body);

// The resource name a packet with packet::ack_to_follows names (nullopt if its body is too short for it, or it
// has none), and the packet with it removed, or set to `to`.
std::optional<node_id> ack_to_of(const packet& p);
void strip_ack_to(packet& p);
void set_ack_to(packet& p, node_id to);

Bytes encode_states(std::span<const stream_state> states);  // records of u64 source, u64 vnode, u64 last
std::optional<std::vector<stream_state>> decode_states(std::span<const std::byte> body);

}  // namespace phoenix::overlay
