#include "migration/message.hpp"

#include <cstring>

#include "base/wire.hpp"

namespace phoenix::migration {

std::string_view to_string(kind k) {
  switch (k) {
    case kind::query:
      return "query";
    case kind::lock_you_first:
      return "lock_you_first";
    case kind::lock2:
      return "lock2";
    case kind::fail1:
      return "fail1";
    case kind::fail2:
      return "fail2";
    case kind::ok1:
      return "ok1";
    case kind::ok2:
      return "ok2";
    case kind::cleanup:
      return "cleanup";
    case kind::cleanup_ack:
      return "cleanup_ack";
    case kind::give_request:
      return "give_request";
    case kind::state_begin:
      return "state_begin";
    case kind::state_chunk:
      return "state_chunk";
    case kind::state_ack:
      return "state_ack";
    case kind::done:
      return "done";
    case kind::withdraw:
      return "withdraw";
    case kind::refuse:
      return "refuse";
    case kind::give_back:
      return "give_back";
  }
  return "unknown";
}

Bytes encode(const message& m) {
  Bytes out(message_head_bytes + (m.what == kind::state_chunk ? m.chunk.size() : 0));
  std::byte* p = out.data();
  p[0] = static_cast<std::byte>(m.what);
  base::store_le<std::uint64_t>(p + 1, m.from);
  base::store_le<std::uint64_t>(p + 9, m.span.lo);
  base::store_le<std::uint64_t>(p + 17, m.span.hi);
  base::store_le<std::uint64_t>(p + 25, m.number);
  base::store_le<std::uint64_t>(p + 33, m.attempt);
  if (m.what == kind::state_chunk && !m.chunk.empty()) {
    std::memcpy(p + message_head_bytes, m.chunk.data(), m.chunk.size());
  }
  return out;
}

std::optional<message> decode(std::span<const std::byte> body) {
  if (body.size() < message_head_bytes) return std::nullopt;
  const auto k = static_cast<std::uint8_t>(body[0]);
  if (k < static_cast<std::uint8_t>(kind::query) || k > static_cast<std::uint8_t>(kind::give_back))
    return std::nullopt;
  message m;
  m.what = static_cast<kind>(k);
  m.from = base::load_le<std::uint64_t>(body.data() + 1);
  m.span.lo = base::load_le<std::uint64_t>(body.data() + 9);
  m.span.hi = base::load_le<std::uint64_t>(body.data() + 17);
  m.number = base::load_le<std::uint64_t>(body.data() + 25);
  m.attempt = base::load_le<std::uint64_t>(body.data() + 33);
  if (m.what == kind::state_chunk) {
    m.chunk = body.subspan(message_head_bytes);
  } else if (body.size() != message_head_bytes) {
    return std::nullopt;
  }
  return m;
}

}  // namespace phoenix::migration
