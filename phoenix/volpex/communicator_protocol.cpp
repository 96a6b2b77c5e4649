#include "phoenix/volpex/communicator_protocol.hpp"

#include "phoenix/volpex/dataspace_protocol.hpp"

namespace phoenix::volpex {

namespace {

constexpr std::uint32_t max_consumed_entries = 1 << 20;

bool valid_request_kind(std::uint8_t k) {
  return k >= static_cast<std::uint8_t>(comm_request::kind::pull) &&
         k <= static_cast<std::uint8_t>(comm_request::kind::ping);
}

bool valid_answer_kind(std::uint8_t k) {
  return k >= static_cast<std::uint8_t>(comm_answer::kind::data) &&
         k <= static_cast<std::uint8_t>(comm_answer::kind::pong);
}

}  // namespace

Bytes encode(const comm_request& r) {
  base::writer w;
  w.put_u8(comm_protocol_version).put_u8(static_cast<std::uint8_t>(r.what));
  w.put_u32(r.source).put_u32(r.receiver).put_u32(r.receiver_replica);
  w.put_u64(r.reply_to).put_u64(r.id).put_u32(static_cast<std::uint32_t>(r.tag)).put_u64(r.ts);
  w.put_u32(static_cast<std::uint32_t>(r.consumed.size()));
  for (const auto& [tag, ts] : r.consumed) w.put_u32(static_cast<std::uint32_t>(tag)).put_u64(ts);
  return with_body(std::move(w).take(), nullptr);
}

std::optional<comm_request> decode_comm_request(std::span<const std::byte> b) {
  base::reader r(b);
  std::uint8_t version = 0, what = 0;
  std::uint32_t tag = 0, n = 0;
  comm_request out;
  if (!r.get_u8(version) || version != comm_protocol_version || !r.get_u8(what) || !valid_request_kind(what) ||
      !r.get_u32(out.source) || !r.get_u32(out.receiver) || !r.get_u32(out.receiver_replica) ||
      !r.get_u64(out.reply_to) || !r.get_u64(out.id) || !r.get_u32(tag) || !r.get_u64(out.ts) || !r.get_u32(n) ||
      n > max_consumed_entries)
    return std::nullopt;
  out.what = static_cast<comm_request::kind>(what);
  out.tag = static_cast<std::int32_t>(tag);
  out.consumed.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    std::uint32_t t = 0;
    std::uint64_t ts = 0;
    if (!r.get_u32(t) || !r.get_u64(ts)) return std::nullopt;
    out.consumed.emplace_back(static_cast<std::int32_t>(t), ts);
  }
  if (!r.at_end()) return std::nullopt;
  return out;
}

Bytes encode(const comm_answer& a) {
  base::writer w;
  w.put_u8(comm_protocol_version).put_u8(static_cast<std::uint8_t>(a.what)).put_u64(a.id);
  w.put_u32(a.source).put_u32(a.source_replica).put_u32(static_cast<std::uint32_t>(a.tag));
  w.put_u64(a.ts).put_u64(a.latest);
  return with_body(std::move(w).take(), a.what == comm_answer::kind::data ? a.body : nullptr);
}

std::optional<comm_answer> decode_comm_answer(std::span<const std::byte> b) {
  base::reader r(b);
  std::uint8_t version = 0, what = 0;
  std::uint32_t tag = 0;
  comm_answer out;
  if (!r.get_u8(version) || version != comm_protocol_version || !r.get_u8(what) || !valid_answer_kind(what) ||
      !r.get_u64(out.id) || !r.get_u32(out.source) || !r.get_u32(out.source_replica) || !r.get_u32(tag) ||
      !r.get_u64(out.ts) || !r.get_u64(out.latest))
    return std::nullopt;
  out.what = static_cast<comm_answer::kind>(what);
  out.tag = static_cast<std::int32_t>(tag);
  if (out.what == comm_answer::kind::data) {
    out.body = body_of(r);
  } else if (!r.at_end()) {
    return std::nullopt;
  }
  return out;
}

}  // namespace phoenix::volpex
