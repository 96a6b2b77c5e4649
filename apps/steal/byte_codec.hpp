// apps/steal/byte_codec.hpp — writing and checked reading of the application messages and state of the
// work-stealing layer, little-endian (base/wire.hpp), byte strings length-prefixed. Every read is bounds-checked: a malformed message or state blob makes the reader
// fail, never read past the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <phoenix/bytes.hpp>
#include <span>

#include "base/wire.hpp"

namespace phoenix::apps {

class ByteWriter {
 public:
  ByteWriter() = default;
  // Reserves room for `capacity` bytes: one allocation for a message of known size.
  explicit ByteWriter(std::size_t capacity) { out_.reserve(capacity); }
  void u8(std::uint8_t v) { out_.push_back(static_cast<std::byte>(v)); }
  void u32(std::uint32_t v) { put(v); }
  void u64(std::uint64_t v) { put(v); }
  void bytes(std::span<const std::byte> b) {  // length-prefixed
    u64(b.size());
    out_.insert(out_.end(), b.begin(), b.end());
  }
  void reserve(std::size_t more) { out_.reserve(out_.size() + more); }  // one allocation for what follows
  Bytes take() && { return std::move(out_); }
  std::size_t size() const { return out_.size(); }

 private:
  template <typename T>
  void put(T v) {
    const std::size_t at = out_.size();
    out_.resize(at + sizeof(T));
    base::store_le<T>(out_.data() + at, v);
  }
  Bytes out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const std::byte> in) : in_(in) {}
  bool u8(std::uint8_t& v) { return get(v); }
  bool u32(std::uint32_t& v) { return get(v); }
  bool u64(std::uint64_t& v) { return get(v); }
  bool bytes(Bytes& b) {
    std::span<const std::byte> v;
    if (!view(v)) return false;
    b.assign(v.begin(), v.end());
    return true;
  }
  // Length-prefixed bytes as a view into the input, without a copy: valid while the input is.
  bool view(std::span<const std::byte>& v) {
    std::uint64_t n = 0;
    if (!u64(n) || n > in_.size() - pos_) return fail();
    v = in_.subspan(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return true;
  }
  bool at_end() const { return ok_ && pos_ == in_.size(); }
  bool ok() const { return ok_; }

 private:
  template <typename T>
  bool get(T& v) {
    if (!ok_ || in_.size() - pos_ < sizeof(T)) return fail();
    v = base::load_le<T>(in_.data() + pos_);
    pos_ += sizeof(T);
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
