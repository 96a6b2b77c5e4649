#include "phoenix/volpex/dataspace_protocol.hpp"

#include <cstring>

#include "base/wire.hpp"

namespace phoenix::volpex {

Bytes with_body(std::vector<std::byte> head, const object& body) {
  Bytes out(head.size() + (body ? body->size() : 0));
  std::memcpy(out.data(), head.data(), head.size());
  if (body && !body->empty()) std::memcpy(out.data() + head.size(), body->data(), body->size());
  return out;
}

object body_of(const base::reader& r) {
  const auto rest = r.rest();
  return make_object(Bytes(rest.begin(), rest.end()));
}

namespace {

bool valid_op(std::uint8_t o) {
  return o >= static_cast<std::uint8_t>(op::put) && o <= static_cast<std::uint8_t>(op::decide);
}

}  // namespace

Bytes encode(const request& r) {
  base::writer w;
  w.put_u8(protocol_version)
      .put_u8(static_cast<std::uint8_t>(r.kind))
      .put_u32(r.id.process)
      .put_u64(r.id.request);
  w.put_u64(r.reply_to).put_u32(static_cast<std::uint32_t>(r.tag.size()));
  w.put_bytes(std::as_bytes(std::span(r.tag.data(), r.tag.size())));
  return with_body(std::move(w).take(), r.kind == op::put || r.kind == op::decide ? r.data : nullptr);
}

std::optional<request> decode_request(std::span<const std::byte> b) {
  base::reader r(b);
  std::uint8_t version = 0, kind = 0;
  std::uint32_t tag_size = 0;
  request out;
  if (!r.get_u8(version) || version != protocol_version || !r.get_u8(kind) || !valid_op(kind) ||
      !r.get_u32(out.id.process) || !r.get_u64(out.id.request) || !r.get_u64(out.reply_to) ||
      !r.get_u32(tag_size))
    return std::nullopt;
  const auto tag = r.get_span(tag_size);
  if (!tag) return std::nullopt;
  out.kind = static_cast<op>(kind);
  out.tag.assign(reinterpret_cast<const char*>(tag->data()), tag->size());
  if (out.kind == op::put || out.kind == op::decide) {
    out.data = body_of(r);
  } else if (!r.at_end()) {
    return std::nullopt;
  }
  return out;
}

Bytes encode(const reply& r) {
  base::writer w;
  w.put_u8(protocol_version)
      .put_u8(static_cast<std::uint8_t>(r.kind))
      .put_u8(static_cast<std::uint8_t>(r.result));
  w.put_u32(r.id.process).put_u64(r.id.request);
  return with_body(std::move(w).take(), r.data);
}

std::optional<reply> decode_reply(std::span<const std::byte> b) {
  base::reader r(b);
  std::uint8_t version = 0, kind = 0, result = 0;
  reply out;
  if (!r.get_u8(version) || version != protocol_version || !r.get_u8(kind) || !valid_op(kind) ||
      !r.get_u8(result) || result < static_cast<std::uint8_t>(outcome::stored) ||
      result > static_cast<std::uint8_t>(outcome::absent) || !r.get_u32(out.id.process) ||
      !r.get_u64(out.id.request))
    return std::nullopt;
  out.kind = static_cast<op>(kind);
  out.result = static_cast<outcome>(result);
  if (out.result == outcome::delivered || out.result == outcome::from_log) {
    out.data = body_of(r);
  } else if (!r.at_end()) {
    return std::nullopt;
  }
  return out;
}

}  // namespace phoenix::volpex
