// control.hpp — the remote control service every node runs: the wire form of the shell's (phsh) requests and
// their replies (docs/shell.md).
//
// A control packet travels like any other message, to a resource name, with the reserved tag control_tag,
// which ph_send refuses and the receiving runtime handles itself: requests are answered on the node's I/O
// context, whatever the application is doing, and replies go back to the requester's resource name. Body,
// integers little-endian: u8 kind (1 request, 2 reply), u8 ok (replies), u64 id (the requester's, echoed),
// then the text. Requests are words: "status", "routes", "log [N]", "leave", "suspend FILE", "kill".
#pragma once

#include <cstdint>
#include <optional>
#include <phoenix/bytes.hpp>
#include <span>
#include <string>
#include <string_view>

namespace phoenix {

inline constexpr std::int32_t control_tag = -3;  // beside migration::protocol_tag (-2)

struct control_packet {
  enum class kind : std::uint8_t { request = 1, reply = 2 };
  kind what = kind::request;
  bool ok = true;
  std::uint64_t id = 0;
  std::string text;
};

Bytes encode_control(const control_packet& p);
std::optional<control_packet> decode_control(std::span<const std::byte> body);  // nullopt: malformed

}  // namespace phoenix
