// phoenix/handover.hpp — what leaves with an interval in a migration beside the application's state: the state
// of the end-to-end streams to its virtual nodes, and the messages for it that the giver's inbox held (its
// application had not taken them). The giver acknowledged those messages to their senders when it delivered
// them, so nobody else has a copy: they travel inside the state, which its taker either gets whole or the
// interval is lost with it, never one without the other (docs/overlay.md, "End-to-end delivery").
//
// Third, what the giver alone knew of an interval next to the one it gives: it was on its way to a taker that
// crashed (Node::Impl::given_lost_). The taker of the interval next to it adopts it in the giver's stead
// (orphan_adoption.hpp); the giver, whose interval no longer touches it, could not.
//
// Layout, little-endian: u64 length of the streams' part, the streams' part (overlay::encode_states), u64
// message count, then per message u64 dest, u64 source, u32 tag (two's complement), u64 length, the body; u64
// loss count, then per loss u64 taker, u64 lo, u64 hi.
// Decoding is for bytes from the network: every count and length is checked against what is left, at most as
// many streams as a node keeps (overlay/delivery/receive_streams.hpp) are decoded, every stream and every
// message must be for a virtual node of the interval (a giver cannot set another interval's streams, or mark a
// sender's packets to this node's resource name as delivered), and every message must have a tag an inbox holds
// (an application's or a service's); at most max_handed_losses losses. A loss that is empty, not next to the
// interval or past L is skipped (counted in losses_skipped), not a reason to refuse the messages. How long ago
// the taker was lost is not the giver's to say: the node that gets a loss waits as if it were lost now. Pure.
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

struct handed_loss {
  vp_t taker = 0;  // the crashed taker's resource name
  Interval span;
  friend bool operator==(const handed_loss&, const handed_loss&) = default;
};
inline constexpr std::size_t max_handed_losses = 16;

struct handover {
  std::vector<overlay::stream_state> streams;
  std::vector<handed_message> inbox;
  std::vector<handed_loss> losses;
  std::size_t losses_skipped = 0;
};

// At most stream_limits::max_streams streams go (a node's streams pass that bound only briefly; the rest would
// make the taker refuse all of it) and at most max_handed_losses losses.
Bytes encode_handover(std::vector<overlay::stream_state> streams, const std::vector<handed_message>& inbox,
                      const std::vector<handed_loss>& losses = {});
// nullopt, with the reason in `error`, if the bytes are malformed or a stream or a message is not for a virtual
// node of s. L is the size of the virtual node space.
std::optional<handover> decode_handover(std::span<const std::byte> bytes, Interval s, vp_t L, std::string& error);

}  // namespace phoenix
