// Tests of base/wire.hpp: byte layout, round trips, truncation.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "base/wire.hpp"

using namespace phoenix::base;

namespace {

std::vector<std::byte> bytes_of(std::initializer_list<int> values) {
  std::vector<std::byte> out;
  for (int v : values) out.push_back(static_cast<std::byte>(v));
  return out;
}

// Compile-time check that the encoding is constexpr and little-endian.
constexpr bool u32_is_little_endian_at_compile_time() {
  writer w;
  w.put_u32(0x11223344);
  auto b = w.bytes();
  return b.size() == 4 && b[0] == std::byte{0x44} && b[1] == std::byte{0x33} && b[2] == std::byte{0x22} &&
         b[3] == std::byte{0x11};
}
static_assert(u32_is_little_endian_at_compile_time());

// The fixed-position stores and loads, round trips at every width, at compile time.
template <typename T>
constexpr bool round_trips(T v) {
  std::array<std::byte, 8> b{};
  phoenix::base::store_le(b.data(), v);
  return phoenix::base::load_le<T>(b.data()) == v && b[0] == static_cast<std::byte>(v & 0xff);
}
static_assert(round_trips<std::uint8_t>(0xab) && round_trips<std::uint16_t>(0xa1b2) &&
              round_trips<std::uint32_t>(0xa1b2c3d4) && round_trips<std::uint64_t>(0xa1b2c3d4e5f60718ULL));

}  // namespace

TEST_CASE("wire: little-endian layout against literal bytes") {
  writer w;
  w.put_u8(0xAB).put_u16(0x0102).put_u32(0x03040506).put_u64(0x0708090A0B0C0D0EULL);
  w.put_bytes(bytes_of({0xF0, 0xF1}));
  const auto expected = bytes_of({0xAB,                                            // u8
                                  0x02, 0x01,                                      // u16
                                  0x06, 0x05, 0x04, 0x03,                          // u32
                                  0x0E, 0x0D, 0x0C, 0x0B, 0x0A, 0x09, 0x08, 0x07,  // u64
                                  0xF0, 0xF1});
  CHECK(std::move(w).take() == expected);
}

TEST_CASE("wire: reader decodes literal little-endian bytes") {
  const auto in =
      bytes_of({0x02, 0x01, 0x06, 0x05, 0x04, 0x03, 0x0E, 0x0D, 0x0C, 0x0B, 0x0A, 0x09, 0x08, 0x07});
  reader r(in);
  std::uint16_t a = 0;
  std::uint32_t b = 0;
  std::uint64_t c = 0;
  REQUIRE(r.get_u16(a));
  REQUIRE(r.get_u32(b));
  REQUIRE(r.get_u64(c));
  CHECK(a == 0x0102);
  CHECK(b == 0x03040506u);
  CHECK(c == 0x0708090A0B0C0D0EULL);
  CHECK(r.at_end());
}

TEST_CASE("wire: round trip of every width at the edges") {
  const std::uint64_t u64s[] = {0,
                                1,
                                0x80,
                                0xFF,
                                0x100,
                                0x8000000000000000ULL,
                                std::numeric_limits<std::uint64_t>::max(),
                                0x0123456789ABCDEFULL};
  for (std::uint64_t v : u64s) {
    CAPTURE(v);
    writer w;
    w.put_u8(static_cast<std::uint8_t>(v))
        .put_u16(static_cast<std::uint16_t>(v))
        .put_u32(static_cast<std::uint32_t>(v))
        .put_u64(v);
    const auto buf = std::move(w).take();
    REQUIRE(buf.size() == 1 + 2 + 4 + 8);
    reader r(buf);
    std::uint8_t a = 0;
    std::uint16_t b = 0;
    std::uint32_t c = 0;
    std::uint64_t d = 0;
    REQUIRE((r.get_u8(a) && r.get_u16(b) && r.get_u32(c) && r.get_u64(d)));
    CHECK(a == static_cast<std::uint8_t>(v));
    CHECK(b == static_cast<std::uint16_t>(v));
    CHECK(c == static_cast<std::uint32_t>(v));
    CHECK(d == v);
    CHECK(r.at_end());
    CHECK(r.remaining() == 0);
  }
}

TEST_CASE("wire: bytes round trip, copied and viewed") {
  const auto payload = bytes_of({1, 2, 3, 4, 5});
  writer w;
  w.put_bytes(payload).put_bytes(payload).put_bytes({});
  const auto buf = std::move(w).take();
  REQUIRE(buf.size() == 10);
  reader r(buf);
  std::array<std::byte, 5> copy{};
  REQUIRE(r.get_bytes(copy));
  CHECK(std::vector<std::byte>(copy.begin(), copy.end()) == payload);
  auto view = r.get_span(5);
  REQUIRE(view.has_value());
  CHECK(std::vector<std::byte>(view->begin(), view->end()) == payload);
  CHECK(view->data() == buf.data() + 5);  // a view, not a copy
  CHECK(r.at_end());
  auto none = r.get_span(0);  // zero bytes at the end is fine
  CHECK(none.has_value());
}

TEST_CASE("wire: truncation is detected and leaves output and position unchanged") {
  for (std::size_t len = 0; len < 8; ++len) {
    CAPTURE(len);
    const std::vector<std::byte> buf(len, std::byte{0x5A});
    reader r(buf);
    std::uint64_t v = 42;
    CHECK_FALSE(r.get_u64(v));
    CHECK(v == 42);
    CHECK(r.position() == 0);
    CHECK(r.remaining() == len);
  }
  const auto buf = bytes_of({1, 2, 3});
  reader r(buf);
  std::uint32_t u32 = 7;
  CHECK_FALSE(r.get_u32(u32));
  CHECK(u32 == 7);
  std::uint16_t u16 = 0;
  REQUIRE(r.get_u16(u16));
  CHECK(u16 == 0x0201);
  CHECK_FALSE(r.get_u16(u16));
  CHECK(u16 == 0x0201);
  CHECK(r.remaining() == 1);
  std::array<std::byte, 2> two{std::byte{9}, std::byte{9}};
  CHECK_FALSE(r.get_bytes(two));
  CHECK(two[0] == std::byte{9});
  CHECK_FALSE(r.get_span(2).has_value());
  CHECK_FALSE(r.skip(2));
  CHECK(r.remaining() == 1);
  std::uint8_t u8 = 0;
  REQUIRE(r.get_u8(u8));
  CHECK(u8 == 3);
  CHECK(r.at_end());
  CHECK_FALSE(r.get_u8(u8));
  CHECK(r.rest().empty());
}

TEST_CASE("wire: empty input") {
  reader r(std::span<const std::byte>{});
  CHECK(r.at_end());
  CHECK(r.remaining() == 0);
  std::uint8_t v = 0;
  CHECK_FALSE(r.get_u8(v));
}

TEST_CASE("wire: skip, rest and position") {
  const auto buf = bytes_of({1, 2, 3, 4});
  reader r(buf);
  REQUIRE(r.skip(1));
  CHECK(r.position() == 1);
  CHECK(r.rest().size() == 3);
  CHECK(r.rest()[0] == std::byte{2});
  CHECK_FALSE(r.at_end());
}

TEST_CASE("wire: writer adopts an existing buffer and patches fields in place") {
  writer w(bytes_of({0xEE}));
  const std::size_t length_at = w.size();
  w.put_u32(0);  // placeholder
  w.put_u16(0xBEEF);
  w.patch_u32(length_at, 0xA1B2C3D4);
  w.patch_u8(0, 0x11);
  CHECK(std::move(w).take() == bytes_of({0x11, 0xD4, 0xC3, 0xB2, 0xA1, 0xEF, 0xBE}));

  writer w2;
  w2.put_u64(0).put_u16(0);
  w2.patch_u64(0, 0x0102030405060708ULL);
  w2.patch_u16(8, 0x0A0B);
  CHECK(std::move(w2).take() == bytes_of({8, 7, 6, 5, 4, 3, 2, 1, 0x0B, 0x0A}));
}
