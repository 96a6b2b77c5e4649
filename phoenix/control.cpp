// control.cpp — see control.hpp.
#include "phoenix/control.hpp"

#include <cstring>

#include "overlay/links/frame.hpp"

namespace phoenix {

namespace {
constexpr std::size_t head_bytes = 10;                       // kind, ok, id
constexpr std::size_t seal_bytes = 8 + 8 + 16 + 64;          // target, timestamp, nonce, signature
constexpr std::uint8_t sealed_request = 3;
}  // namespace

Bytes encode_control(const control_packet& p) {
  const bool sealed = p.seal && p.what == control_packet::kind::request;
  const std::size_t text_at = head_bytes + (sealed ? seal_bytes : 0);
  Bytes b(text_at + p.text.size());
  b[0] = static_cast<std::byte>(sealed ? sealed_request : static_cast<std::uint8_t>(p.what));
  b[1] = static_cast<std::byte>(p.ok ? 1 : 0);
  base::store_le<std::uint64_t>(b.data() + 2, p.id);
  if (sealed) {
    std::byte* s = b.data() + head_bytes;
    base::store_le<std::uint64_t>(s, p.seal->target);
    base::store_le<std::uint64_t>(s + 8, p.seal->timestamp_ms);
    std::memcpy(s + 16, p.seal->nonce.data(), p.seal->nonce.size());
    std::memcpy(s + 32, p.seal->signature.data(), p.seal->signature.size());
  }
  if (!p.text.empty()) std::memcpy(b.data() + text_at, p.text.data(), p.text.size());
  return b;
}

std::optional<control_packet> decode_control(std::span<const std::byte> body) {
  if (body.size() < head_bytes) return std::nullopt;
  control_packet p;
  const auto kind = static_cast<std::uint8_t>(body[0]);
  if (kind != 1 && kind != 2 && kind != sealed_request) return std::nullopt;
  std::size_t text_at = head_bytes;
  if (kind == sealed_request) {
    if (body.size() < head_bytes + seal_bytes) return std::nullopt;
    const std::byte* s = body.data() + head_bytes;
    control_seal seal;
    seal.target = base::load_le<std::uint64_t>(s);
    seal.timestamp_ms = base::load_le<std::uint64_t>(s + 8);
    std::memcpy(seal.nonce.data(), s + 16, seal.nonce.size());
    std::memcpy(seal.signature.data(), s + 32, seal.signature.size());
    p.seal = seal;
    text_at += seal_bytes;
  }
  p.what = kind == 2 ? control_packet::kind::reply : control_packet::kind::request;
  p.ok = body[1] != std::byte{0};
  p.id = base::load_le<std::uint64_t>(body.data() + 2);
  p.text.assign(reinterpret_cast<const char*>(body.data()) + text_at, body.size() - text_at);
  return p;
}

}  // namespace phoenix
