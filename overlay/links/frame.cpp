#include "overlay/links/frame.hpp"

#include "overlay/packet.hpp"

#include <algorithm>
#include <cstring>

namespace phoenix::overlay {

bool is_known_frame_type(std::uint8_t t) {
  switch (static_cast<frame_type>(t)) {
    case frame_type::hello:
    case frame_type::auth:
    case frame_type::refuse:
    case frame_type::data:
    case frame_type::ack:
    case frame_type::route_update:
    case frame_type::route_request:
    case frame_type::goodbye:
    case frame_type::leaving:
    case frame_type::leaving_ack:
    case frame_type::goodbye_ack:
    case frame_type::route_summary:
    case frame_type::route_dump_request:
      return true;
  }
  return false;
}

bool is_handshake_frame(frame_type t) {
  return t == frame_type::hello || t == frame_type::auth || t == frame_type::refuse;
}

const char* to_string(frame_type t) {
  switch (t) {
    case frame_type::hello: return "hello";
    case frame_type::auth: return "auth";
    case frame_type::refuse: return "refuse";
    case frame_type::data: return "data";
    case frame_type::ack: return "ack";
    case frame_type::route_update: return "route_update";
    case frame_type::route_request: return "route_request";
    case frame_type::goodbye: return "goodbye";
    case frame_type::leaving: return "leaving";
    case frame_type::leaving_ack: return "leaving_ack";
    case frame_type::goodbye_ack: return "goodbye_ack";
    case frame_type::route_summary: return "route_summary";
    case frame_type::route_dump_request: return "route_dump_request";
  }
  return "unknown";
}

const char* to_string(frame_error e) {
  switch (e) {
    case frame_error::none: return "no error";
    case frame_error::bad_magic: return "bad frame magic (not a phoenix peer?)";
    case frame_error::bad_version: return "unsupported frame version";
    case frame_error::unknown_type: return "unknown frame type";
    case frame_error::too_large: return "frame larger than the maximum";
    case frame_error::bad_payload: return "malformed frame payload";
  }
  return "unknown error";
}

void encode_frame_header(std::byte* out, frame_type type, std::uint32_t length) {
  base::store_le<std::uint16_t>(out, frame_magic);
  out[2] = static_cast<std::byte>(frame_version);
  out[3] = static_cast<std::byte>(type);
  base::store_le<std::uint32_t>(out + 4, length);
}

frame_error decode_frame_header(std::span<const std::byte, frame_header_bytes> in, std::uint32_t max_payload,
                                frame_header& out) {
  if (base::load_le<std::uint16_t>(in.data()) != frame_magic) return frame_error::bad_magic;
  if (static_cast<std::uint8_t>(in[2]) != frame_version) return frame_error::bad_version;
  const auto type = static_cast<std::uint8_t>(in[3]);
  if (!is_known_frame_type(type)) return frame_error::unknown_type;
  const auto length = base::load_le<std::uint32_t>(in.data() + 4);
  if (length > max_payload || length > hard_max_payload) return frame_error::too_large;
  out.type = static_cast<frame_type>(type);
  out.length = length;
  return frame_error::none;
}

void encode_data_head(std::byte* out, const data_head& h) {
  base::store_le<std::uint64_t>(out, h.seq);
  base::store_le<std::uint64_t>(out + 8, h.ack);
  base::store_le<std::uint64_t>(out + 16, h.dest);
  base::store_le<std::uint64_t>(out + 24, h.source);
  base::store_le<std::uint32_t>(out + 32, static_cast<std::uint32_t>(h.tag));
  out[36] = static_cast<std::byte>(h.hops_left);
  out[37] = static_cast<std::byte>(h.flags);
  base::store_le<std::uint16_t>(out + 38, 0);
  base::store_le<std::uint64_t>(out + 40, h.stream_seq);
  base::store_le<std::uint64_t>(out + 48, h.stream_prev);
}

frame_error decode_data_head(std::span<const std::byte> payload, data_head& out) {
  if (payload.size() < data_head_bytes) return frame_error::bad_payload;
  const std::byte* p = payload.data();
  constexpr std::uint8_t known_flags = packet::handed_over | packet::ack_to_follows;
  if ((static_cast<std::uint8_t>(p[37]) & ~known_flags) != 0 || base::load_le<std::uint16_t>(p + 38) != 0)
    return frame_error::bad_payload;
  out.seq = base::load_le<std::uint64_t>(p);
  out.ack = base::load_le<std::uint64_t>(p + 8);
  out.dest = base::load_le<std::uint64_t>(p + 16);
  out.source = base::load_le<std::uint64_t>(p + 24);
  out.tag = static_cast<std::int32_t>(base::load_le<std::uint32_t>(p + 32));
  out.hops_left = static_cast<std::uint8_t>(p[36]);
  out.flags = static_cast<std::uint8_t>(p[37]);
  out.stream_seq = base::load_le<std::uint64_t>(p + 40);
  out.stream_prev = base::load_le<std::uint64_t>(p + 48);
  return frame_error::none;
}

std::vector<std::byte> make_control_frame(frame_type type, std::span<const std::byte> payload) {
  std::vector<std::byte> f(frame_header_bytes + payload.size());
  encode_frame_header(f.data(), type, static_cast<std::uint32_t>(payload.size()));
  std::copy(payload.begin(), payload.end(), f.begin() + frame_header_bytes);
  return f;
}

std::vector<std::byte> make_ack_frame(frame_type type, std::uint64_t ack) {
  std::vector<std::byte> f(frame_header_bytes + 8);
  encode_frame_header(f.data(), type, 8);
  base::store_le<std::uint64_t>(f.data() + frame_header_bytes, ack);
  return f;
}

std::optional<std::uint64_t> decode_ack_payload(std::span<const std::byte> payload) {
  if (payload.size() != 8) return std::nullopt;
  return base::load_le<std::uint64_t>(payload.data());
}

// --- frame_decoder ------------------------------------------------------------------------------------------

frame_decoder::frame_decoder(std::uint32_t max_payload, std::size_t buffer_bytes)
    : max_payload_(max_payload) {
  reserve(std::max<std::size_t>(buffer_bytes, 2 * data_head_bytes + 64));
}

void frame_decoder::reserve(std::size_t buffer_bytes) {
  if (buffer_bytes <= capacity_) return;
  auto grown = std::make_unique_for_overwrite<std::byte[]>(buffer_bytes);
  if (end_ > begin_) std::memcpy(grown.get(), buf_.get() + begin_, end_ - begin_);
  end_ -= begin_;
  begin_ = 0;
  buf_ = std::move(grown);
  capacity_ = buffer_bytes;
}

std::span<std::byte> frame_decoder::prepare() {
  if (in_large_) return std::span(large_).subspan(large_filled_);
  if (end_ == capacity_) compact();
  return std::span(buf_.get() + end_, capacity_ - end_);
}

void frame_decoder::commit(std::size_t n) {
  if (in_large_) {
    large_filled_ += n;
  } else {
    end_ += n;
  }
}

void frame_decoder::compact() {
  if (begin_ == 0) return;
  std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
  end_ -= begin_;
  begin_ = 0;
}

frame_decoder::status frame_decoder::start_large(const frame_header& h) {
  // A data frame keeps its head apart so that the body buffer is exactly what the application receives.
  const bool is_data = h.type == frame_type::data;
  const std::size_t head = is_data ? data_head_bytes : 0;
  const std::size_t trailer = trailer_of(h);
  if (h.length < head + trailer || trailer > large_trailer_.size()) {
    error_ = frame_error::bad_payload;
    return status::error;
  }
  const std::size_t avail = end_ - begin_ - frame_header_bytes;
  if (avail < head) return status::need_more;
  in_large_ = true;
  large_header_ = h;
  large_head_len_ = head;
  large_trailer_len_ = trailer;
  std::memcpy(large_head_.data(), buf_.get() + begin_ + frame_header_bytes, head);
  large_.resize(h.length - head);  // default-initialised: no zero fill; the trailer is split off at the end
  large_filled_ = avail - head;    // everything buffered belongs to this frame: avail < length
  std::memcpy(large_.data(), buf_.get() + begin_ + frame_header_bytes + head, large_filled_);
  begin_ = end_ = 0;
  return status::need_more;
}

std::optional<frame_decoder::large_frame> frame_decoder::large_in_progress() const {
  if (!in_large_) return std::nullopt;
  const std::size_t body_len = large_.size() - large_trailer_len_;
  return large_frame{large_header_, std::span(large_head_).first(large_head_len_),
                     std::span<const std::byte>(large_.data(), std::min(large_filled_, body_len))};
}

frame_decoder::status frame_decoder::next(frame_view& out) {
  if (error_ != frame_error::none) return status::error;
  if (in_large_) {
    if (large_filled_ < large_.size()) return status::need_more;
    in_large_ = false;
    const std::size_t body_len = large_.size() - large_trailer_len_;
    std::memcpy(large_trailer_.data(), large_.data() + body_len, large_trailer_len_);
    large_.resize(body_len);
    out.header = large_header_;
    out.payload = std::span(large_head_).first(large_head_len_);
    out.trailer = std::span(large_trailer_).first(large_trailer_len_);
    out.body = std::move(large_);
    large_ = phoenix::Bytes();
    if (large_head_len_ == 0) out.payload = *out.body;  // a large control frame: the buffer is the payload
    return status::frame;
  }
  const std::size_t avail = end_ - begin_;
  if (avail < frame_header_bytes) {
    if (begin_ > 0 && end_ == capacity_) compact();
    return status::need_more;
  }
  frame_header h;
  error_ = decode_frame_header(std::span<const std::byte, frame_header_bytes>(buf_.get() + begin_, frame_header_bytes),
                               max_payload_, h);
  if (error_ != frame_error::none) return status::error;
  const std::size_t total = frame_header_bytes + h.length;
  if (avail >= total) {
    const std::size_t trailer = trailer_of(h);
    if (h.length < trailer) {
      error_ = frame_error::bad_payload;
      return status::error;
    }
    const std::byte* p = buf_.get() + begin_ + frame_header_bytes;
    out.header = h;
    out.payload = std::span<const std::byte>(p, h.length - trailer);
    out.trailer = std::span<const std::byte>(p + h.length - trailer, trailer);
    out.body.reset();
    begin_ += total;
    if (begin_ == end_) begin_ = end_ = 0;
    return status::frame;
  }
  if (total > capacity_ / 2) return start_large(h);
  if (begin_ + total > capacity_) compact();
  return status::need_more;
}

}  // namespace phoenix::overlay
