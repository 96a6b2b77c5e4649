#include "phoenix/handover.hpp"

#include <algorithm>

#include "base/wire.hpp"
#include "overlay/delivery/stream_codec.hpp"
#include "phoenix/service_messages.hpp"

namespace phoenix {

namespace {

constexpr std::size_t message_head_bytes = 8 + 8 + 4 + 8;
constexpr std::size_t loss_bytes = 3 * 8;

// Reads a u64 at `at`, advancing it; false if fewer than 8 bytes are left.
bool read_u64(std::span<const std::byte> b, std::size_t& at, std::uint64_t& v) {
  if (b.size() - at < 8) return false;
  v = base::load_le<std::uint64_t>(b.data() + at);
  at += 8;
  return true;
}

}  // namespace

Bytes encode_handover(std::vector<overlay::stream_state> states, const std::vector<handed_message>& inbox,
                      const std::vector<handed_loss>& all_losses) {
  if (states.size() > overlay::stream_limits{}.max_streams) states.resize(overlay::stream_limits{}.max_streams);
  const std::span<const handed_loss> losses(all_losses.data(), std::min(all_losses.size(), max_handed_losses));
  const Bytes streams = overlay::encode_states(states);
  std::size_t size = 8 + streams.size() + 8 + 8 + loss_bytes * losses.size();
  for (const auto& m : inbox) size += message_head_bytes + m.body.size();
  Bytes out(size);
  std::byte* p = out.data();
  base::store_le<std::uint64_t>(p, streams.size());
  p = std::copy(streams.begin(), streams.end(), p + 8);
  base::store_le<std::uint64_t>(p, inbox.size());
  p += 8;
  for (const auto& m : inbox) {
    base::store_le<std::uint64_t>(p, m.dest);
    base::store_le<std::uint64_t>(p + 8, m.source);
    base::store_le<std::uint32_t>(p + 16, static_cast<std::uint32_t>(m.tag));
    base::store_le<std::uint64_t>(p + 20, m.body.size());
    p = std::copy(m.body.begin(), m.body.end(), p + message_head_bytes);
  }
  base::store_le<std::uint64_t>(p, losses.size());
  p += 8;
  for (const auto& l : losses) {
    base::store_le<std::uint64_t>(p, l.taker);
    base::store_le<std::uint64_t>(p + 8, l.span.lo);
    base::store_le<std::uint64_t>(p + 16, l.span.hi);
    p += loss_bytes;
  }
  return out;
}

std::optional<handover> decode_handover(std::span<const std::byte> bytes, Interval s, vp_t L, std::string& error) {
  handover h;
  std::size_t at = 0;
  std::uint64_t n = 0;
  if (!read_u64(bytes, at, n) || n > bytes.size() - at) {
    error = "the streams' part is longer than the handover";
    return std::nullopt;
  }
  // More records than a node keeps are not decoded at all: a giver could otherwise make this node allocate for a
  // state of up to migration_driver::max_state_bytes.
  if (n > 4 + 24 * overlay::stream_limits{}.max_streams) {
    error = "more streams than a node keeps";
    return std::nullopt;
  }
  auto states = overlay::decode_states(bytes.subspan(at, n));
  if (!states) {
    error = "a malformed streams' part";
    return std::nullopt;
  }
  for (const auto& st : *states) {
    if (!s.contains(st.vnode)) {
      error = "a stream to " + std::to_string(st.vnode) + ", outside the interval";
      return std::nullopt;
    }
  }
  h.streams = std::move(*states);
  at += n;
  if (!read_u64(bytes, at, n) || n > (bytes.size() - at) / message_head_bytes) {
    error = "more messages than the handover holds";
    return std::nullopt;
  }
  h.inbox.reserve(n);
  for (std::uint64_t k = 0; k < n; ++k) {
    if (bytes.size() - at < message_head_bytes) {
      error = "more messages than the handover holds";
      return std::nullopt;
    }
    handed_message m;
    std::uint64_t length = 0;
    read_u64(bytes, at, m.dest);
    read_u64(bytes, at, m.source);
    m.tag = static_cast<std::int32_t>(base::load_le<std::uint32_t>(bytes.data() + at));
    at += 4;
    read_u64(bytes, at, length);
    if (length > bytes.size() - at) {
      error = "a message is longer than the handover";
      return std::nullopt;
    }
    if (!receivable_tag(m.tag)) {  // only what an inbox holds: an application's tag or a service's
      error = "a message with tag " + std::to_string(m.tag) + ", which no inbox holds";
      return std::nullopt;
    }
    if (!s.contains(m.dest)) {
      error = "a message for virtual node " + std::to_string(m.dest) + ", outside the interval";
      return std::nullopt;
    }
    m.body.assign(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                  bytes.begin() + static_cast<std::ptrdiff_t>(at + length));
    at += length;
    h.inbox.push_back(std::move(m));
  }
  if (!read_u64(bytes, at, n) || n > max_handed_losses || n * loss_bytes != bytes.size() - at) {
    error = "a malformed losses' part";
    return std::nullopt;
  }
  for (std::uint64_t k = 0; k < n; ++k) {
    handed_loss l;
    read_u64(bytes, at, l.taker);
    read_u64(bytes, at, l.span.lo);
    read_u64(bytes, at, l.span.hi);
    if (l.span.empty() || l.span.hi > L || (l.span.hi != s.lo && l.span.lo != s.hi)) {
      ++h.losses_skipped;
      continue;
    }
    h.losses.push_back(l);
  }
  return h;
}

}  // namespace phoenix
