// control.cpp — see control.hpp.
#include "phoenix/control.hpp"

#include <cstring>

#include "overlay/frame.hpp"

namespace phoenix {

namespace {
constexpr std::size_t head_bytes = 10;  // kind, ok, id
}

Bytes encode_control(const control_packet& p) {
  Bytes b(head_bytes + p.text.size());
  b[0] = static_cast<std::byte>(p.what);
  b[1] = static_cast<std::byte>(p.ok ? 1 : 0);
  overlay::store_le<std::uint64_t>(b.data() + 2, p.id);
  if (!p.text.empty()) std::memcpy(b.data() + head_bytes, p.text.data(), p.text.size());
  return b;
}

std::optional<control_packet> decode_control(std::span<const std::byte> body) {
  if (body.size() < head_bytes) return std::nullopt;
  control_packet p;
  const auto kind = static_cast<std::uint8_t>(body[0]);
  if (kind != 1 && kind != 2) return std::nullopt;
  p.what = static_cast<control_packet::kind>(kind);
  p.ok = body[1] != std::byte{0};
  p.id = overlay::load_le<std::uint64_t>(body.data() + 2);
  p.text.assign(reinterpret_cast<const char*>(body.data()) + head_bytes, body.size() - head_bytes);
  return p;
}

}  // namespace phoenix
