// base/wire.hpp — explicit little-endian encoding of integers and byte strings, for every codec of phoenix.
//
// Contract:
//  * Every multi-byte integer is written and read least significant byte first, whatever the host byte order,
//    by shifts (never by memcpy of the object representation), so the layout is fixed by this file alone.
//  * writer appends to a buffer it owns; take() hands the buffer over. A writer may adopt an existing buffer
//    and keep appending to it (e.g. a payload after a frame header), and patch_*() overwrites a field written
//    earlier (e.g. a length known only at the end). patch_*() outside the written bytes is a programming error.
//  * reader walks a borrowed std::span; the caller keeps the bytes alive. Every get_*() is bounds checked: on
//    truncation it returns false / std::nullopt and leaves both the output and the read position unchanged, so
//    a decoder can chain `r.get_u16(a) && r.get_u64(b) && ...` and then demand r.at_end() to reject trailing
//    bytes. Nothing here allocates on the read side or throws.
//  * Everything is constexpr, so encodings can be checked at compile time.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace phoenix::base {

// Little-endian stores and loads into fixed positions, for fixed-size heads on the hot path. Written out byte by
// byte with constant indices (not as a loop), so that the compiler merges them into one load or store at -O2:
// a loop of eight was left as a loop, eight shifts and stores per field.
template <typename T, std::size_t... I>
constexpr void store_le_bytes(std::byte* out, T v, std::index_sequence<I...>) {
  ((out[I] = static_cast<std::byte>(v >> (8 * I))), ...);
}
template <typename T, std::size_t... I>
constexpr T load_le_bytes(const std::byte* in, std::index_sequence<I...>) {
  return static_cast<T>((static_cast<T>(static_cast<T>(in[I]) << (8 * I)) | ...));
}
template <typename T>
constexpr void store_le(std::byte* out, T v) {
  store_le_bytes(out, v, std::make_index_sequence<sizeof(T)>{});
}
template <typename T>
constexpr T load_le(const std::byte* in) {
  return load_le_bytes<T>(in, std::make_index_sequence<sizeof(T)>{});
}

class writer {
  // Defined before the members that call them: clang 14 evaluates a constexpr call only to a template already
  // defined at that point of the class.
  template <typename T>
  constexpr writer& put_le(T v) {
    if (std::is_constant_evaluated()) {  // clang cannot evaluate libstdc++'s resize() at compile time
      for (std::size_t i = 0; i < sizeof(T); ++i) buf_.push_back(static_cast<std::byte>(v >> (8 * i)));
      return *this;
    }
    const std::size_t at = buf_.size();
    buf_.resize(at + sizeof(T));
    store_le(buf_.data() + at, v);
    return *this;
  }
  template <typename T>
  constexpr void patch_le(std::size_t offset, T v) {
    assert(offset <= buf_.size() && sizeof(T) <= buf_.size() - offset);
    store_le(buf_.data() + offset, v);
  }

 public:
  constexpr writer() = default;
  // Continue appending to `buf` (its existing bytes are kept).
  constexpr explicit writer(std::vector<std::byte> buf) : buf_(std::move(buf)) {}

  constexpr writer& put_u8(std::uint8_t v) { return put_le(v); }
  constexpr writer& put_u16(std::uint16_t v) { return put_le(v); }
  constexpr writer& put_u32(std::uint32_t v) { return put_le(v); }
  constexpr writer& put_u64(std::uint64_t v) { return put_le(v); }
  constexpr writer& put_bytes(std::span<const std::byte> bytes) {
    buf_.insert(buf_.end(), bytes.begin(), bytes.end());
    return *this;
  }

  // Overwrite a field already written at byte `offset` (precondition: offset + width <= size()).
  constexpr void patch_u8(std::size_t offset, std::uint8_t v) { patch_le(offset, v); }
  constexpr void patch_u16(std::size_t offset, std::uint16_t v) { patch_le(offset, v); }
  constexpr void patch_u32(std::size_t offset, std::uint32_t v) { patch_le(offset, v); }
  constexpr void patch_u64(std::size_t offset, std::uint64_t v) { patch_le(offset, v); }

  constexpr std::size_t size() const { return buf_.size(); }
  constexpr std::span<const std::byte> bytes() const { return buf_; }
  constexpr std::vector<std::byte> take() && { return std::move(buf_); }

 private:
  std::vector<std::byte> buf_;
};

class reader {
 public:
  constexpr explicit reader(std::span<const std::byte> bytes) : bytes_(bytes) {}

  [[nodiscard]] constexpr bool get_u8(std::uint8_t& out) { return get_le(out); }
  [[nodiscard]] constexpr bool get_u16(std::uint16_t& out) { return get_le(out); }
  [[nodiscard]] constexpr bool get_u32(std::uint32_t& out) { return get_le(out); }
  [[nodiscard]] constexpr bool get_u64(std::uint64_t& out) { return get_le(out); }

  // Copy exactly out.size() bytes into `out`.
  [[nodiscard]] constexpr bool get_bytes(std::span<std::byte> out) {
    if (out.size() > remaining()) return false;
    std::copy_n(bytes_.begin() + static_cast<std::ptrdiff_t>(pos_), out.size(), out.begin());
    pos_ += out.size();
    return true;
  }
  // View the next n bytes without copying; the view borrows the reader's underlying bytes.
  [[nodiscard]] constexpr std::optional<std::span<const std::byte>> get_span(std::size_t n) {
    if (n > remaining()) return std::nullopt;
    auto view = bytes_.subspan(pos_, n);
    pos_ += n;
    return view;
  }
  [[nodiscard]] constexpr bool skip(std::size_t n) {
    if (n > remaining()) return false;
    pos_ += n;
    return true;
  }

  constexpr std::size_t position() const { return pos_; }
  constexpr std::size_t remaining() const { return bytes_.size() - pos_; }
  constexpr bool at_end() const { return pos_ == bytes_.size(); }
  // Everything not read yet, e.g. an opaque body after a header.
  constexpr std::span<const std::byte> rest() const { return bytes_.subspan(pos_); }

 private:
  template <typename T>
  constexpr bool get_le(T& out) {
    if (sizeof(T) > remaining()) return false;
    out = load_le<T>(bytes_.data() + pos_);
    pos_ += sizeof(T);
    return true;
  }

  std::span<const std::byte> bytes_;
  std::size_t pos_ = 0;
};

}  // namespace phoenix::base
