// apps/isort/codec.hpp — the pieces integer sort's messages and migrating state are written with, on top of
// apps/steal/byte_codec.hpp: arrays of keys or counts (little-endian u32s) and coverages. Every read is
// checked; a malformed input makes it return false, never read past the end.
//
// A message puts its arrays last, after a header written with ByteWriter, and they are copied in bulk
// (append_u32s, u32s_of) rather than value by value through ByteWriter::u32 and ByteReader::u32, which
// messages of megabytes of keys, several per iteration, would notice. The migrating state, written once per
// migration, uses the length-prefixed write_u32s and read_u32s.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "apps/isort/coverage.hpp"
#include "apps/steal/byte_codec.hpp"

namespace phoenix::apps::isort {

inline void append_u32s(Bytes& out, std::span<const std::uint32_t> values) {
  const std::size_t at = out.size();
  out.resize(at + 4 * values.size());
  if constexpr (std::endian::native == std::endian::little) {
    if (!values.empty()) std::memcpy(out.data() + at, values.data(), 4 * values.size());
  } else {
    for (std::size_t i = 0; i < values.size(); ++i)
      for (int k = 0; k < 4; ++k) out[at + 4 * i + k] = static_cast<std::byte>(values[i] >> (8 * k));
  }
}

// The u32s in b, whose size must be a multiple of 4.
inline std::vector<std::uint32_t> u32s_of(std::span<const std::byte> b) {
  std::vector<std::uint32_t> values(b.size() / 4);
  if constexpr (std::endian::native == std::endian::little) {
    if (!values.empty()) std::memcpy(values.data(), b.data(), 4 * values.size());
  } else {
    for (std::size_t i = 0; i < values.size(); ++i)
      for (int k = 0; k < 4; ++k) values[i] |= std::to_integer<std::uint32_t>(b[4 * i + k]) << (8 * k);
  }
  return values;
}

inline void write_u32s(ByteWriter& w, std::span<const std::uint32_t> values) {
  if constexpr (std::endian::native == std::endian::little) {
    w.bytes(std::as_bytes(values));
  } else {
    ByteWriter le;
    for (std::uint32_t v : values) le.u32(v);
    w.bytes(std::move(le).take());
  }
}

inline bool read_u32s(ByteReader& r, std::vector<std::uint32_t>& values) {
  Bytes b;
  if (!r.bytes(b) || b.size() % 4 != 0) return false;
  values = u32s_of(b);
  return true;
}

inline void write_coverage(ByteWriter& w, const Coverage& c) {
  w.u64(c.end());
  w.u64(c.ranges().size());
  for (const auto& [lo, hi] : c.ranges()) {
    w.u64(lo);
    w.u64(hi);
  }
}

// The ranges are added one by one, so a forged coverage (overlapping, past its end) is refused like a message.
inline bool read_coverage(ByteReader& r, Coverage& c) {
  std::uint64_t end = 0, n = 0;
  if (!r.u64(end) || !r.u64(n)) return false;
  c = Coverage(end);
  for (std::uint64_t i = 0; i < n; ++i) {
    std::uint64_t lo = 0, hi = 0;
    if (!r.u64(lo) || !r.u64(hi) || !c.add(lo, hi)) return false;
  }
  return true;
}

}  // namespace phoenix::apps::isort
