// control.hpp — the remote control service every node runs: the wire form of the shell's (phsh) requests and
// their replies (docs/shell.md).
//
// A control packet travels like any other message, to a resource name, with the reserved tag control_tag,
// which ph_send refuses and the receiving runtime handles itself: requests are answered on the node's I/O
// context, whatever the application is doing, and replies go back to the requester's resource name. Body,
// integers little-endian: u8 kind (1 request, 2 reply, 3 sealed request), u8 ok (replies), u64 id (the
// requester's, echoed); a sealed request then carries its seal: u64 target, u64 timestamp_ms, 16 bytes nonce,
// 64 bytes Ed25519 signature (control_auth.hpp); then the text. Requests are words: "status", "routes",
// "log [N]", "leave", "suspend FILE", "kill"; all but the first two need a seal (control_auth.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <phoenix/bytes.hpp>
#include <span>
#include <string>
#include <string_view>

namespace phoenix {

inline constexpr std::int32_t control_tag = -3;  // beside migration::protocol_tag (-2)

using control_nonce = std::array<std::byte, 16>;
using control_signature = std::array<std::byte, 64>;

// What makes a request the controller's: for whom, when, once (control_auth.hpp signs and checks it).
struct control_seal {
  std::uint64_t target = 0;        // the resource name of the node meant
  std::uint64_t timestamp_ms = 0;  // the controller's wall clock, ms since the Unix epoch
  control_nonce nonce{};
  control_signature signature{};
};

struct control_packet {
  enum class kind : std::uint8_t { request = 1, reply = 2 };
  kind what = kind::request;
  bool ok = true;
  std::uint64_t id = 0;
  std::string text;
  std::optional<control_seal> seal;  // requests only; encoded as kind 3
};

Bytes encode_control(const control_packet& p);
std::optional<control_packet> decode_control(std::span<const std::byte> body);  // nullopt: malformed

}  // namespace phoenix
