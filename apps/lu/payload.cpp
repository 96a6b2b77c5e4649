// apps/lu/payload.cpp — see payload.hpp.
#include "apps/lu/payload.hpp"

#include <bit>
#include <cstring>

namespace phoenix::apps::lu {
namespace {

static_assert(std::endian::native == std::endian::little,
              "matrix data travels as the host's doubles; the wire format is little-endian");

void write_rows(ByteWriter& w, std::span<const std::uint32_t> rows) {
  w.u32(static_cast<std::uint32_t>(rows.size()));
  for (const std::uint32_t r : rows) w.u32(r);
}

// One at a time, so a forged count fails at the end of the message instead of allocating.
bool read_rows(ByteReader& r, std::vector<std::uint32_t>& rows) {
  std::uint32_t count = 0;
  if (!r.u32(count)) return false;
  rows.clear();
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint32_t v = 0;
    if (!r.u32(v)) return false;
    rows.push_back(v);
  }
  return true;
}

}  // namespace

void write_doubles(ByteWriter& w, std::span<const double> v) { w.bytes(std::as_bytes(v)); }

bool read_doubles(ByteReader& r, Doubles& v) {
  std::span<const std::byte> raw;
  if (!r.view(raw) || raw.size() % sizeof(double) != 0) return false;
  v.resize(raw.size() / sizeof(double));
  if (!raw.empty()) std::memcpy(v.data(), raw.data(), raw.size());
  return true;
}

// Messages between blocks are written and read straight into place: they are many, and most carry a block.
Bytes encode(const Payload& p) {
  const std::size_t row_bytes = p.rows.size() * sizeof(std::uint32_t),
                    data_bytes = p.data.size() * sizeof(double);
  Bytes out(3 * sizeof(std::uint32_t) + row_bytes + sizeof(std::uint64_t) + data_bytes);  // left uninitialised
  std::byte* at = out.data();
  const auto put = [&at](const void* v, std::size_t n) {
    if (n > 0) std::memcpy(at, v, n);
    at += n;
  };
  const std::uint32_t head[3] = {p.step, p.index, static_cast<std::uint32_t>(p.rows.size())};
  const std::uint64_t data_size = data_bytes;
  put(head, sizeof head);
  put(p.rows.data(), row_bytes);
  put(&data_size, sizeof data_size);
  put(p.data.data(), data_bytes);
  return out;
}

std::optional<Payload> decode_payload(std::span<const std::byte> b) {
  std::size_t at = 0;
  const auto take = [&](void* v, std::size_t n) {
    if (b.size() - at < n) return false;
    if (n > 0) std::memcpy(v, b.data() + at, n);
    at += n;
    return true;
  };
  Payload p;
  std::uint32_t head[3];
  std::uint64_t data_size = 0;
  if (!take(head, sizeof head) || head[2] > (b.size() - at) / sizeof(std::uint32_t)) return std::nullopt;
  p.step = head[0];
  p.index = head[1];
  p.rows.resize(head[2]);
  if (!take(p.rows.data(), p.rows.size() * sizeof(std::uint32_t)) || !take(&data_size, sizeof data_size) ||
      data_size != b.size() - at || data_size % sizeof(double) != 0)
    return std::nullopt;
  p.data.resize(data_size / sizeof(double));
  take(p.data.data(), data_size);
  return p;
}

void write_final(ByteWriter& w, const FinalBlock& f) {
  write_final(w, f.block, f.migrations, f.pivots, f.data);
}

void write_final(ByteWriter& w, std::uint64_t block, std::uint32_t migrations,
                 std::span<const std::uint32_t> pivots, std::span<const double> data) {
  w.u64(block);
  w.u32(migrations);
  write_rows(w, pivots);
  write_doubles(w, data);
}

bool read_final(ByteReader& r, FinalBlock& f) {
  return r.u64(f.block) && r.u32(f.migrations) && read_rows(r, f.pivots) && read_doubles(r, f.data);
}

Bytes encode(const FinalBlock& f) {
  ByteWriter w;
  write_final(w, f);
  return std::move(w).take();
}

std::optional<FinalBlock> decode_final(std::span<const std::byte> b) {
  ByteReader r(b);
  FinalBlock f;
  if (!read_final(r, f) || !r.at_end()) return std::nullopt;
  return f;
}

}  // namespace phoenix::apps::lu
