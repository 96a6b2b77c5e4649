// Frame codec: round trip, truncated input, oversized frames, wrong version/magic/type, large-mode bodies.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>

#include "overlay/links/frame.hpp"
#include "overlay/packet.hpp"

using namespace phoenix::overlay;

namespace {

std::vector<std::byte> data_frame(const data_head& h, std::size_t body_bytes, std::uint8_t fill = 0xAB) {
  std::vector<std::byte> f(frame_header_bytes + data_head_bytes + body_bytes, std::byte{fill});
  encode_frame_header(f.data(), frame_type::data, static_cast<std::uint32_t>(data_head_bytes + body_bytes));
  encode_data_head(f.data() + frame_header_bytes, h);
  return f;
}

// Feeds `bytes` to the decoder in chunks of `chunk` and collects the frames.
struct collected {
  std::vector<frame_header> headers;
  std::vector<std::vector<std::byte>> payloads;
  std::vector<std::size_t> body_sizes;
  bool error = false;
};
collected feed(frame_decoder& d, std::span<const std::byte> bytes, std::size_t chunk) {
  collected c;
  std::size_t pos = 0;
  while (pos < bytes.size() && !c.error) {
    auto space = d.prepare();
    REQUIRE(!space.empty());
    const std::size_t n = std::min({chunk, space.size(), bytes.size() - pos});
    std::memcpy(space.data(), bytes.data() + pos, n);
    d.commit(n);
    pos += n;
    frame_view f;
    for (;;) {
      const auto st = d.next(f);
      if (st == frame_decoder::status::need_more) break;
      if (st == frame_decoder::status::error) {
        c.error = true;
        break;
      }
      c.headers.push_back(f.header);
      c.payloads.emplace_back(f.payload.begin(), f.payload.end());
      c.body_sizes.push_back(f.body ? f.body->size() : f.payload.size() - (f.header.type == frame_type::data ? data_head_bytes : 0));
    }
  }
  return c;
}

}  // namespace

TEST_CASE("frame: header layout is little-endian with magic, version, type, length") {
  std::byte h[frame_header_bytes];
  encode_frame_header(h, frame_type::ack, 0x01020304);
  const std::uint8_t expected[] = {0x50, 0x58, frame_version, 17, 0x04, 0x03, 0x02, 0x01};
  for (std::size_t i = 0; i < frame_header_bytes; ++i) CHECK(static_cast<std::uint8_t>(h[i]) == expected[i]);
}

TEST_CASE("frame: data head round trip keeps every field, including 64-bit values above 2^32") {
  const data_head in{(1ull << 63) + 5, (1ull << 40) + 7, 0xFFFFFFFFFFFFFFF0ull, 0x123456789ABCDEF0ull, -42, 63,
                     packet::handed_over, (1ull << 62) + 3, (1ull << 33) + 1};
  std::byte buf[data_head_bytes];
  encode_data_head(buf, in);
  data_head out;
  REQUIRE(decode_data_head(std::span<const std::byte>(buf, data_head_bytes), out) == frame_error::none);
  CHECK(out.seq == in.seq);
  CHECK(out.ack == in.ack);
  CHECK(out.dest == in.dest);
  CHECK(out.source == in.source);
  CHECK(out.tag == in.tag);
  CHECK(out.hops_left == in.hops_left);
  CHECK(out.flags == in.flags);
  CHECK(out.stream_seq == in.stream_seq);
  CHECK(out.stream_prev == in.stream_prev);
  CHECK(decode_data_head(std::span<const std::byte>(buf, data_head_bytes - 1), out) == frame_error::bad_payload);
  buf[37] = std::byte{packet::handed_over | packet::ack_to_follows};
  REQUIRE(decode_data_head(std::span<const std::byte>(buf, data_head_bytes), out) == frame_error::none);
  CHECK(out.flags == (packet::handed_over | packet::ack_to_follows));
  // A flag no version defines closes the connection rather than being ignored.
  buf[37] = std::byte{0x04};
  CHECK(decode_data_head(std::span<const std::byte>(buf, data_head_bytes), out) == frame_error::bad_payload);
}

TEST_CASE("frame: decoder reassembles frames split at every byte boundary") {
  std::vector<std::byte> stream;
  for (int i = 0; i < 5; ++i) {
    const auto f = data_frame(data_head{static_cast<std::uint64_t>(i + 1), 0, 7, 9, i, 3}, static_cast<std::size_t>(i * 10));
    stream.insert(stream.end(), f.begin(), f.end());
    const auto a = make_ack_frame(frame_type::ack, static_cast<std::uint64_t>(i));
    stream.insert(stream.end(), a.begin(), a.end());
  }
  for (std::size_t chunk : {std::size_t{1}, std::size_t{3}, std::size_t{7}, std::size_t{64}, std::size_t{100000}}) {
    CAPTURE(chunk);
    frame_decoder d(1 << 20, 512);
    const auto c = feed(d, stream, chunk);
    REQUIRE_FALSE(c.error);
    REQUIRE(c.headers.size() == 10);
    for (int i = 0; i < 5; ++i) {
      CHECK(c.headers[2 * i].type == frame_type::data);
      CHECK(c.body_sizes[2 * i] == static_cast<std::size_t>(i * 10));
      data_head h;
      REQUIRE(decode_data_head(c.payloads[2 * i], h) == frame_error::none);
      CHECK(h.seq == static_cast<std::uint64_t>(i + 1));
      CHECK(c.headers[2 * i + 1].type == frame_type::ack);
      CHECK(decode_ack_payload(c.payloads[2 * i + 1]) == static_cast<std::uint64_t>(i));
    }
  }
}

TEST_CASE("frame: a body larger than the buffer is read straight into its own buffer") {
  const std::size_t body = 300000;
  auto f = data_frame(data_head{1, 0, 5, 6, 1, 1}, body, 0x5A);
  auto tail = make_ack_frame(frame_type::ack, 99);
  f.insert(f.end(), tail.begin(), tail.end());
  frame_decoder d(1 << 20, 4096);
  const auto c = feed(d, f, 1500);
  REQUIRE_FALSE(c.error);
  REQUIRE(c.headers.size() == 2);
  CHECK(c.body_sizes[0] == body);
  CHECK(decode_ack_payload(c.payloads[1]) == 99u);
}

TEST_CASE("frame: truncated input yields no frame and no error") {
  const auto f = data_frame(data_head{1, 0, 1, 1, 0, 1}, 100);
  frame_decoder d(1 << 20);
  const auto c = feed(d, std::span(f).first(f.size() - 1), 1000);
  CHECK_FALSE(c.error);
  CHECK(c.headers.empty());
}

TEST_CASE("frame: oversized, wrong magic, wrong version and unknown type are errors") {
  SUBCASE("oversized") {
    const auto f = data_frame(data_head{}, 2000);
    frame_decoder d(1000);
    CHECK(feed(d, f, 64).error);
    CHECK(d.error() == frame_error::too_large);
  }
  SUBCASE("handshake limit applies before authentication") {
    std::vector<std::byte> payload(max_handshake_payload + 1);
    const auto f = make_control_frame(frame_type::hello, payload);
    frame_decoder d(max_handshake_payload);
    CHECK(feed(d, f, 64).error);
  }
  SUBCASE("wrong version") {
    auto f = make_ack_frame(frame_type::ack, 1);
    f[2] = std::byte{frame_version + 1};
    frame_decoder d(1000);
    CHECK(feed(d, f, 64).error);
    CHECK(d.error() == frame_error::bad_version);
  }
  SUBCASE("wrong magic") {
    auto f = make_ack_frame(frame_type::ack, 1);
    f[0] = std::byte{'G'};
    frame_decoder d(1000);
    CHECK(feed(d, f, 64).error);
    CHECK(d.error() == frame_error::bad_magic);
  }
  SUBCASE("unknown type") {
    auto f = make_ack_frame(frame_type::ack, 1);
    f[3] = std::byte{99};
    frame_decoder d(1000);
    CHECK(feed(d, f, 64).error);
    CHECK(d.error() == frame_error::unknown_type);
  }
  SUBCASE("a data frame shorter than its head") {
    std::vector<std::byte> f(frame_header_bytes + 10);
    encode_frame_header(f.data(), frame_type::data, 10);
    frame_decoder d(1000);
    const auto c = feed(d, f, 64);
    REQUIRE(c.headers.size() == 1);
    data_head h;
    CHECK(decode_data_head(c.payloads[0], h) == frame_error::bad_payload);
  }
}

TEST_CASE("frame: ack payload must be exactly 8 bytes") {
  const std::byte seven[7]{};
  CHECK_FALSE(decode_ack_payload(std::span<const std::byte>(seven, 7)).has_value());
}

TEST_CASE("frame: after set_trailer_bytes every frame but a handshake frame ends in a trailer, small or large") {
  frame_decoder d(hard_max_payload, 4096);
  d.set_trailer_bytes(16);
  std::vector<std::byte> stream;
  auto add = [&](frame_type type, std::size_t payload, std::uint8_t fill) {
    std::vector<std::byte> f(frame_header_bytes + payload + 16, std::byte{fill});
    encode_frame_header(f.data(), type, static_cast<std::uint32_t>(payload + 16));
    for (std::size_t i = 0; i < 16; ++i) f[f.size() - 16 + i] = std::byte{0xEE};  // the trailer
    stream.insert(stream.end(), f.begin(), f.end());
  };
  add(frame_type::ack, 8, 0x11);
  data_head h{};
  std::vector<std::byte> large = data_frame(h, 10000, 0x22);
  encode_frame_header(large.data(), frame_type::data, static_cast<std::uint32_t>(data_head_bytes + 10000 + 16));
  large.insert(large.end(), 16, std::byte{0xEE});
  stream.insert(stream.end(), large.begin(), large.end());
  const auto refuse = make_control_frame(frame_type::refuse, std::vector<std::byte>(5, std::byte{0x33}));
  stream.insert(stream.end(), refuse.begin(), refuse.end());

  std::size_t pos = 0;
  std::vector<frame_view> frames;
  std::vector<std::vector<std::byte>> trailers, payloads;
  std::vector<std::size_t> bodies;
  while (pos < stream.size()) {
    auto room = d.prepare();
    const std::size_t n = std::min(room.size(), stream.size() - pos);
    std::memcpy(room.data(), stream.data() + pos, n);
    d.commit(n);
    pos += n;
    frame_view f;
    while (d.next(f) == frame_decoder::status::frame) {
      trailers.emplace_back(f.trailer.begin(), f.trailer.end());
      payloads.emplace_back(f.payload.begin(), f.payload.end());
      bodies.push_back(f.body ? f.body->size() : 0);
    }
  }
  REQUIRE(trailers.size() == 3);
  CHECK(trailers[0] == std::vector<std::byte>(16, std::byte{0xEE}));
  CHECK(payloads[0] == std::vector<std::byte>(8, std::byte{0x11}));
  CHECK(trailers[1] == std::vector<std::byte>(16, std::byte{0xEE}));  // split off a body read in place
  CHECK(payloads[1].size() == data_head_bytes);
  CHECK(bodies[1] == 10000);
  CHECK(trailers[2].empty());  // REFUSE: a handshake frame
  CHECK(payloads[2] == std::vector<std::byte>(5, std::byte{0x33}));
}

TEST_CASE("frame: a frame shorter than its trailer is an error") {
  frame_decoder d(hard_max_payload, 4096);
  d.set_trailer_bytes(16);
  std::vector<std::byte> f(frame_header_bytes + 8);
  encode_frame_header(f.data(), frame_type::ack, 8);
  auto room = d.prepare();
  std::memcpy(room.data(), f.data(), f.size());
  d.commit(f.size());
  frame_view v;
  CHECK(d.next(v) == frame_decoder::status::error);
  CHECK(d.error() == frame_error::bad_payload);
}

TEST_CASE("frame: a decoder sized for the handshake offers at most its small buffer, and grows on reserve") {
  frame_decoder d(max_handshake_payload, handshake_buffer_bytes);
  CHECK(d.prepare().size() == handshake_buffer_bytes);
  d.commit(3);
  d.reserve(link_buffer_bytes);
  CHECK(d.prepare().size() == link_buffer_bytes - 3);  // the bytes already there are kept
}
