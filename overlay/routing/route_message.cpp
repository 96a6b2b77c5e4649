// overlay/routing/route_message.cpp — see route_message.hpp for the layout.
#include "overlay/routing/route_message.hpp"

#include <limits>

#include "base/wire.hpp"

namespace phoenix::overlay {
namespace {

constexpr std::uint8_t flag_full_dump = 0x01;
constexpr std::uint8_t flag_ends_dump = 0x01;
constexpr std::size_t max_entries_per_payload = std::numeric_limits<std::uint16_t>::max();  // u16 count

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

void write_header(base::writer& w, bool full_dump) {
  w.put_u8(full_dump ? flag_full_dump : 0).put_u8(0).put_u16(0);  // the count is patched in when it is known
}
constexpr std::size_t count_offset = 2;

void write_entry(base::writer& w, const route_entry& e) {
  w.put_u64(e.source).put_u64(e.seqno).put_u16(e.metric).put_u16(
      static_cast<std::uint16_t>(e.intervals.size()));
  w.put_u16(static_cast<std::uint16_t>(e.in_transit.size()));
  for (const auto& iv : e.intervals) w.put_u64(iv.lo).put_u64(iv.hi);
  for (const auto& iv : e.in_transit) w.put_u64(iv.lo).put_u64(iv.hi);
}

}  // namespace

std::vector<std::vector<std::byte>> encode_update(const route_update& u, std::size_t max_payload_bytes) {
  for (const auto& e : u.entries) {
    const bool bad_forget =
        is_forget(e) && (e.metric != infinite_metric || !e.intervals.empty() || !e.in_transit.empty());
    if (e.intervals.size() + e.in_transit.size() > max_route_intervals || !intervals_valid(e.intervals) ||
        !intervals_valid(e.in_transit) || bad_forget ||
        route_update_header_bytes + encoded_size(e) > max_payload_bytes) {
      return {};
    }
  }
  if (max_payload_bytes < route_update_header_bytes) return {};

  std::vector<base::writer> payloads;
  std::size_t count = 0;
  for (const auto& e : u.entries) {
    const bool open = !payloads.empty();
    if (!open || payloads.back().size() + encoded_size(e) > max_payload_bytes ||
        count == max_entries_per_payload) {
      if (open) payloads.back().patch_u16(count_offset, static_cast<std::uint16_t>(count));
      write_header(payloads.emplace_back(), u.full_dump);
      count = 0;
    }
    write_entry(payloads.back(), e);
    ++count;
  }
  if (payloads.empty()) {
    write_header(payloads.emplace_back(), u.full_dump);
  } else {
    payloads.back().patch_u16(count_offset, static_cast<std::uint16_t>(count));
  }
  std::vector<std::vector<std::byte>> out;
  out.reserve(payloads.size());
  for (auto& w : payloads) out.push_back(std::move(w).take());
  return out;
}

std::vector<std::byte> encode_request(const route_request& r) {
  base::writer w;
  w.put_u64(r.source).put_u64(r.seqno).put_u16(r.hop_limit);
  return std::move(w).take();
}

std::vector<std::byte> encode_summary(const route_summary& s) {
  base::writer w;
  w.put_u64(s.digest).put_u32(s.entries).put_u8(s.ends_dump ? flag_ends_dump : 0);
  return std::move(w).take();
}

std::optional<route_update> decode_update(std::span<const std::byte> payload, std::string* error) {
  base::reader in(payload);
  std::uint8_t flags = 0, reserved = 0;
  std::uint16_t count = 0;
  if (!in.get_u8(flags) || !in.get_u8(reserved) || !in.get_u16(count))
    return fail<route_update>(error, "truncated header");
  if ((flags & ~flag_full_dump) != 0) return fail<route_update>(error, "unknown flags");
  if (reserved != 0) return fail<route_update>(error, "reserved byte not zero");

  route_update u;
  u.full_dump = (flags & flag_full_dump) != 0;
  // Reserve only what the bytes present could possibly hold, never what the count claims.
  u.entries.reserve(std::min<std::size_t>(count, in.remaining() / route_entry_header_bytes));
  for (std::size_t i = 0; i < count; ++i) {
    route_entry e;
    std::uint16_t n_intervals = 0, n_transit = 0;
    if (!in.get_u64(e.source) || !in.get_u64(e.seqno) || !in.get_u16(e.metric) || !in.get_u16(n_intervals) ||
        !in.get_u16(n_transit)) {
      return fail<route_update>(error, "truncated entry (fewer entries than count)");
    }
    if (std::size_t{n_intervals} + n_transit > max_route_intervals)
      return fail<route_update>(error, "too many intervals");
    if (in.remaining() / route_interval_bytes < std::size_t{n_intervals} + n_transit)
      return fail<route_update>(error, "truncated intervals");
    e.intervals.resize(n_intervals);
    e.in_transit.resize(n_transit);
    for (auto* list : {&e.intervals, &e.in_transit}) {
      for (auto& iv : *list) {
        if (!in.get_u64(iv.lo) || !in.get_u64(iv.hi)) return fail<route_update>(error, "truncated intervals");
      }
      if (!intervals_valid(*list)) return fail<route_update>(error, "intervals empty, unsorted or overlapping");
    }
    if (is_forget(e) && (e.metric != infinite_metric || n_intervals != 0 || n_transit != 0))
      return fail<route_update>(error, "forget entry with a metric or intervals");
    u.entries.push_back(std::move(e));
  }
  if (in.remaining() != 0) return fail<route_update>(error, "trailing bytes (more entries than count?)");
  return u;
}

std::optional<route_request> decode_request(std::span<const std::byte> payload, std::string* error) {
  if (payload.size() < route_request_bytes) return fail<route_request>(error, "truncated request");
  if (payload.size() > route_request_bytes) return fail<route_request>(error, "trailing bytes after request");
  base::reader in(payload);
  route_request r;
  if (!in.get_u64(r.source) || !in.get_u64(r.seqno) || !in.get_u16(r.hop_limit))
    return fail<route_request>(error, "truncated request");
  if (r.hop_limit == 0) return fail<route_request>(error, "hop limit 0");
  return r;
}

std::optional<route_summary> decode_summary(std::span<const std::byte> payload, std::string* error) {
  if (payload.size() != route_summary_bytes) return fail<route_summary>(error, "summary of the wrong size");
  base::reader in(payload);
  route_summary s;
  std::uint8_t flags = 0;
  if (!in.get_u64(s.digest) || !in.get_u32(s.entries) || !in.get_u8(flags))
    return fail<route_summary>(error, "truncated summary");
  if ((flags & ~flag_ends_dump) != 0) return fail<route_summary>(error, "unknown flags");
  s.ends_dump = (flags & flag_ends_dump) != 0;
  return s;
}

std::optional<route_dump_request> decode_dump_request(std::span<const std::byte> payload, std::string* error) {
  if (!payload.empty()) return fail<route_dump_request>(error, "dump request with a payload");
  return route_dump_request{};
}

}  // namespace phoenix::overlay
