// migration/message.hpp — the messages of the migration protocol and their wire form.
//
// The lock exchange of the Phoenix paper's Figure 3 (query ... cleanup_ack) and the transfer that follows it
// (give_request, state_begin, state_chunk, state_ack, done; docs/migration.md). Each travels as the body of an
// overlay message with the reserved tag `protocol_tag` (application tags are >= 0), so it is routed, held and
// delivered exactly like application traffic: a query to a virtual node reaches whoever assumes it when it
// arrives, or waits.
//
// Layout, little-endian: u8 kind, u64 from (the sender's resource name), u64 lo, u64 hi (S or T), u64 number
// (a chunk's index, or a state's length), u64 attempt (the initiator's number of the attempt the message
// belongs to: docs/migration.md, decision 8), then for state_chunk the chunk's bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <phoenix/bytes.hpp>
#include <span>
#include <string_view>

#include "base/interval_set.hpp"

namespace phoenix::migration {

using phoenix::vp_t;
using base::interval;
using base::is_adjacent;

// The overlay tag of every migration message. Negative: ph_send refuses it, so applications cannot forge one.
inline constexpr std::int32_t protocol_tag = -2;

enum class kind : std::uint8_t {
  // Figure 3, the lock exchange
  query = 1,           // (p): lines 10, 13, 16 -> 20
  lock_you_first = 2,  // (p, I): line 25 -> 33
  lock2 = 3,           // (p, S): line 36 -> 41
  fail1 = 4,           // (p): line 31 -> 49
  fail2 = 5,           // (p): line 47 -> 50
  ok1 = 6,             // (p, I): line 28 -> 53
  ok2 = 7,             // (p): line 44 -> 60
  cleanup = 8,         // (p): line 58 -> 63
  cleanup_ack = 9,     // (p): line 65 -> 66
  // the transfer, after both locks are held (docs/migration.md)
  give_request = 10,  // (p, T): the initiator takes T from the responder
  state_begin = 11,   // (p, T, length): the giver starts streaming T's state
  state_chunk = 12,   // (p, T, index, bytes)
  state_ack = 13,     // (p, T, index): the taker has chunk `index`
  done = 14,          // (p, T): the taker assumes T
  // the answer to lock_you_first when no lock2 follows (docs/migration.md, decision 6)
  withdraw = 15,  // (p): line 39 -> the responder stops waiting for lock2
  // leases (docs/migration.md, decision 8)
  refuse = 16,     // (p): a give_request for a grant broken by its lease; nothing was released
  give_back = 17,  // (p, T, length): a state that came after its lease, streamed back to the giver
};

std::string_view to_string(kind k);

struct message {
  kind what = kind::query;
  vp_t from = 0;
  interval span;             // S for lock_you_first, lock2, ok1; T for the transfer
  std::uint64_t number = 0;  // state_begin: total length; state_chunk, state_ack: chunk index
  // state_chunk only: a view of the chunk's bytes (in the state being sent, or in the received body), so that a
  // chunk is copied once on each side, not three times.
  std::span<const std::byte> chunk;
  std::uint64_t attempt = 0;  // the initiator's number of the attempt (0 in no attempt's name)
};

inline constexpr std::size_t message_head_bytes = 1 + 8 * 5;

Bytes encode(const message& m);
// nullopt for anything malformed: unknown kind, short, trailing bytes on a message without a chunk. A chunk
// is a view into `body`.
std::optional<message> decode(std::span<const std::byte> body);

}  // namespace phoenix::migration
