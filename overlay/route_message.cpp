// overlay/route_message.cpp — see route_message.hpp for the layout.
#include "overlay/route_message.hpp"

#include <limits>

namespace phoenix::overlay {
namespace {

constexpr std::uint8_t flag_full_dump = 0x01;
constexpr std::size_t max_entries_per_payload = std::numeric_limits<std::uint16_t>::max();  // u16 count

class writer {
 public:
  explicit writer(std::vector<std::byte>& out) : out_(out) {}
  void u8(std::uint8_t v) { out_.push_back(static_cast<std::byte>(v)); }
  void u16(std::uint16_t v) { put(v, 2); }
  void u64(std::uint64_t v) { put(v, 8); }

 private:
  void put(std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
  }
  std::vector<std::byte>& out_;
};

// Bounds-checked little-endian reader: every read says whether the bytes were there.
class reader {
 public:
  explicit reader(std::span<const std::byte> in) : in_(in) {}
  std::size_t remaining() const { return in_.size() - pos_; }
  bool u8(std::uint8_t& v) {
    std::uint64_t x = 0;
    if (!get(x, 1)) return false;
    v = static_cast<std::uint8_t>(x);
    return true;
  }
  bool u16(std::uint16_t& v) {
    std::uint64_t x = 0;
    if (!get(x, 2)) return false;
    v = static_cast<std::uint16_t>(x);
    return true;
  }
  bool u64(std::uint64_t& v) { return get(v, 8); }

 private:
  bool get(std::uint64_t& v, std::size_t bytes) {
    if (remaining() < bytes) return false;
    v = 0;
    for (std::size_t i = 0; i < bytes; ++i) v |= std::to_integer<std::uint64_t>(in_[pos_ + i]) << (8 * i);
    pos_ += bytes;
    return true;
  }
  std::span<const std::byte> in_;
  std::size_t pos_ = 0;
};

bool intervals_valid(const std::vector<route_interval>& v) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i].lo >= v[i].hi) return false;
    if (i > 0 && v[i - 1].hi > v[i].lo) return false;
  }
  return true;
}

template <typename T>
std::optional<T> fail(std::string* error, const char* why) {
  if (error) *error = why;
  return std::nullopt;
}

void write_header(std::vector<std::byte>& out, bool full_dump, std::uint16_t count) {
  writer w(out);
  w.u8(full_dump ? flag_full_dump : 0);
  w.u8(0);
  w.u16(count);
}

// The count is known only when the payload is closed: patch it in place.
void patch_count(std::vector<std::byte>& out, std::size_t count) {
  out[2] = static_cast<std::byte>(count & 0xFF);
  out[3] = static_cast<std::byte>((count >> 8) & 0xFF);
}

void write_entry(std::vector<std::byte>& out, const route_entry& e) {
  writer w(out);
  w.u64(e.source);
  w.u64(e.seqno);
  w.u16(e.metric);
  w.u16(static_cast<std::uint16_t>(e.intervals.size()));
  for (const auto& iv : e.intervals) {
    w.u64(iv.lo);
    w.u64(iv.hi);
  }
}

}  // namespace

std::vector<std::vector<std::byte>> encode_update(const route_update& u, std::size_t max_payload_bytes) {
  for (const auto& e : u.entries) {
    if (e.intervals.size() > max_route_intervals || !intervals_valid(e.intervals) ||
        route_update_header_bytes + encoded_size(e) > max_payload_bytes) {
      return {};
    }
  }
  if (max_payload_bytes < route_update_header_bytes) return {};

  std::vector<std::vector<std::byte>> payloads;
  std::size_t count = 0;
  for (const auto& e : u.entries) {
    const bool open = !payloads.empty();
    if (!open || payloads.back().size() + encoded_size(e) > max_payload_bytes ||
        count == max_entries_per_payload) {
      if (open) patch_count(payloads.back(), count);
      payloads.emplace_back();
      write_header(payloads.back(), u.full_dump, 0);
      count = 0;
    }
    write_entry(payloads.back(), e);
    ++count;
  }
  if (payloads.empty()) {
    payloads.emplace_back();
    write_header(payloads.back(), u.full_dump, 0);
  } else {
    patch_count(payloads.back(), count);
  }
  return payloads;
}

std::vector<std::byte> encode_request(const route_request& r) {
  std::vector<std::byte> out;
  out.reserve(route_request_bytes);
  writer w(out);
  w.u64(r.source);
  w.u64(r.seqno);
  w.u8(r.hop_limit);
  return out;
}

std::optional<route_update> decode_update(std::span<const std::byte> payload, std::string* error) {
  reader in(payload);
  std::uint8_t flags = 0, reserved = 0;
  std::uint16_t count = 0;
  if (!in.u8(flags) || !in.u8(reserved) || !in.u16(count)) return fail<route_update>(error, "truncated header");
  if ((flags & ~flag_full_dump) != 0) return fail<route_update>(error, "unknown flags");
  if (reserved != 0) return fail<route_update>(error, "reserved byte not zero");

  route_update u;
  u.full_dump = (flags & flag_full_dump) != 0;
  // Reserve only what the bytes present could possibly hold, never what the count claims.
  u.entries.reserve(std::min<std::size_t>(count, in.remaining() / route_entry_header_bytes));
  for (std::size_t i = 0; i < count; ++i) {
    route_entry e;
    std::uint16_t n_intervals = 0;
    if (!in.u64(e.source) || !in.u64(e.seqno) || !in.u16(e.metric) || !in.u16(n_intervals)) {
      return fail<route_update>(error, "truncated entry (fewer entries than count)");
    }
    if (n_intervals > max_route_intervals) return fail<route_update>(error, "too many intervals");
    if (in.remaining() / route_interval_bytes < n_intervals)
      return fail<route_update>(error, "truncated intervals");
    e.intervals.resize(n_intervals);
    for (auto& iv : e.intervals) {
      in.u64(iv.lo);  // cannot fail: checked above
      in.u64(iv.hi);
    }
    if (!intervals_valid(e.intervals))
      return fail<route_update>(error, "intervals empty, unsorted or overlapping");
    u.entries.push_back(std::move(e));
  }
  if (in.remaining() != 0) return fail<route_update>(error, "trailing bytes (more entries than count?)");
  return u;
}

std::optional<route_request> decode_request(std::span<const std::byte> payload, std::string* error) {
  if (payload.size() < route_request_bytes) return fail<route_request>(error, "truncated request");
  if (payload.size() > route_request_bytes) return fail<route_request>(error, "trailing bytes after request");
  reader in(payload);
  route_request r;
  in.u64(r.source);
  in.u64(r.seqno);
  in.u8(r.hop_limit);
  if (r.hop_limit == 0) return fail<route_request>(error, "hop limit 0");
  return r;
}

}  // namespace phoenix::overlay
