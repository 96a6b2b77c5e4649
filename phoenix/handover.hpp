// phoenix/handover.hpp — what leaves with an interval in a migration beside the application's state: the state
// of the end-to-end streams to its virtual nodes, and the messages for it that the giver's inbox held (its
// application had not taken them). The giver acknowledged those messages to their senders when it delivered
// them, so nobody else has a copy: they travel inside the state, which its taker either gets whole or the
// interval is lost with it, never one without the other (docs/overlay.md, "End-to-end delivery").
//
// Layout, little-endian: u64 length of the streams' part, the streams' part (overlay::encode_states), u64
// message count, then per message u64 dest, u64 source, u32 tag (two's complement), u64 length, the body.
// Decoding is for bytes from the network: every count and length is checked against what is left, at most as
// many streams as a node keeps (overlay/delivery/receive_streams.hpp) are decoded, every stream and every
// message must be for a virtual node of the interval (a giver cannot set another interval's streams, or mark a
// sender's packets to this node's resource name as delivered), and every message must have a tag an inbox holds
// (an application's or a service's). Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <phoenix/bytes.hpp>
#include <phoenix/interval.hpp>
#include <span>
#include <string>
#include <vector>

#include "overlay/delivery/receive_streams.hpp"

namespace phoenix {

struct handed_message {
  vp_t dest = 0;
  vp_t source = 0;
  std::int32_t tag = 0;
  Bytes body;
  friend bool operator==(const handed_message&, const handed_message&) = default;
};

struct handover {
  std::vector<overlay::stream_state> streams;
  std::vector<handed_message> inbox;
};

Bytes encode_handover(const std::vector<overlay::stream_state>& streams, const std::vector<handed_message>& inbox);
// nullopt, with the reason in `error`, if the bytes are malformed or a stream or a message is not for a virtual
// node of s.
std::optional<handover> decode_handover(std::span<const std::byte> bytes, Interval s, std::string& error);

}  // namespace phoenix
