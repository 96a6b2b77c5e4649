// apps/steal/byte_codec.hpp — little-endian writing and checked reading of the application messages and state
// of the work-stealing layer. Every read is bounds-checked: a malformed message or state blob makes the reader
// fail, never read past the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <phoenix/bytes.hpp>
#include <span>

namespace phoenix::apps {

class ByteWriter {
 public:
  ByteWriter() = default;
  // Reserves room for `capacity` bytes: one allocation for a message of known size.
  explicit ByteWriter(std::size_t capacity) { out_.reserve(capacity); }
  void u8(std::uint8_t v) { out_.push_back(static_cast<std::byte>(v)); }
  void u32(std::uint32_t v) { put(v, 4); }
  void u64(std::uint64_t v) { put(v, 8); }
  void bytes(std::span<const std::byte> b) {  // length-prefixed
    u64(b.size());
    out_.insert(out_.end(), b.begin(), b.end());
  }
  Bytes take() && { return std::move(out_); }
  std::size_t size() const { return out_.size(); }

 private:
  void put(std::uint64_t v, int n) {
    const std::size_t at = out_.size();
    out_.resize(at + static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) out_[at + static_cast<std::size_t>(i)] = static_cast<std::byte>(v >> (8 * i));
  }
  Bytes out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const std::byte> in) : in_(in) {}
  bool u8(std::uint8_t& v) {
    std::uint64_t w = 0;
    if (!get(w, 1)) return false;
    v = static_cast<std::uint8_t>(w);
    return true;
  }
  bool u32(std::uint32_t& v) {
    std::uint64_t w = 0;
    if (!get(w, 4)) return false;
    v = static_cast<std::uint32_t>(w);
    return true;
  }
  bool u64(std::uint64_t& v) { return get(v, 8); }
  bool bytes(Bytes& b) {
    std::uint64_t n = 0;
    if (!u64(n) || n > in_.size() - pos_) return fail();
    b.assign(in_.begin() + static_cast<std::ptrdiff_t>(pos_),
             in_.begin() + static_cast<std::ptrdiff_t>(pos_ + n));
    pos_ += n;
    return true;
  }
  bool at_end() const { return ok_ && pos_ == in_.size(); }
  bool ok() const { return ok_; }

 private:
  bool get(std::uint64_t& v, int n) {
    if (!ok_ || in_.size() - pos_ < static_cast<std::size_t>(n)) return fail();
    v = 0;
    for (int i = 0; i < n; ++i) v |= std::to_integer<std::uint64_t>(in_[pos_ + i]) << (8 * i);
    pos_ += static_cast<std::size_t>(n);
    return true;
  }
  bool fail() {
    ok_ = false;
    return false;
  }
  std::span<const std::byte> in_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace phoenix::apps
