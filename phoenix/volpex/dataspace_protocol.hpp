// dataspace_protocol.hpp — the dataspace's messages between replicas and the nodes that serve tags
// (docs/volpex.md).
//
// A request goes to the tag's virtual node with request_tag; the answer to the asking replica's resource name
// with reply_tag. Both start with a version byte; integers are little-endian (base/wire.hpp).
//   request: u8 version, u8 op, u32 process, u64 request, u64 reply_to, u32 tag length, tag,
//            put and decide: the object's bytes (the rest of the message)
//   reply:   u8 version, u8 op, u8 outcome, u32 process, u64 request, get/read delivered: the object's bytes
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "base/wire.hpp"
#include "phoenix/service_messages.hpp"
#include "phoenix/volpex/dataspace.hpp"

namespace phoenix::volpex {

inline constexpr std::int32_t request_tag = first_service_tag;    // -4
inline constexpr std::int32_t reply_tag = first_service_tag - 1;  // -5
inline constexpr std::uint8_t protocol_version = 1;

// A message of a fixed head and a body that runs to its end (the head written with base::writer), and the
// body of such a message from the reader positioned after its head.
Bytes with_body(std::vector<std::byte> head, const object& body);
object body_of(const base::reader& r);

Bytes encode(const request& r);
std::optional<request> decode_request(std::span<const std::byte> b);
Bytes encode(const reply& r);
std::optional<reply> decode_reply(std::span<const std::byte> b);

}  // namespace phoenix::volpex
