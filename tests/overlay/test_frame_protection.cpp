// Frame protection (overlay/links/frame_protection.hpp): the tag every frame after the handshake carries.
#include <doctest/doctest.h>
#include <openssl/evp.h>

#include <array>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "overlay/links/frame.hpp"
#include "overlay/links/frame_protection.hpp"

using namespace phoenix::overlay;
namespace base = phoenix::base;

namespace {

std::vector<std::byte> text_bytes(std::string_view s) {
  const auto b = std::as_bytes(std::span(s));
  return {b.begin(), b.end()};
}

const std::vector<std::byte> protection_test_key = text_bytes("frame protection test key 0123456789");

// Both ends of one connection after a real handshake: first the dialler, then the acceptor.
std::pair<link_keys, link_keys> handshake_keys(protection_mode mode = protection_mode::integrity) {
  handshake d(protection_test_key, 1000, 1001, "d", link_role::dialler, mode);
  handshake a(protection_test_key, 1000, 1002, "a", link_role::acceptor, mode);
  REQUIRE_FALSE(a.on_hello(d.hello_payload()).has_value());
  REQUIRE_FALSE(d.on_hello(a.hello_payload()).has_value());
  REQUIRE_FALSE(a.on_auth(d.auth_payload(0)).has_value());
  REQUIRE_FALSE(d.on_auth(a.auth_payload(0)).has_value());
  return {d.keys(), a.keys()};
}

// A data frame as the connection writes it: header and head, then the body, then the tag.
struct sealed_frame {
  std::vector<std::byte> head;  // header + data head
  std::vector<std::byte> body;
  frame_tag tag{};
};

sealed_frame seal_data(frame_protection& p, std::uint64_t seq, std::string_view text) {
  sealed_frame f;
  f.body = text_bytes(text);
  f.head.resize(frame_header_bytes + data_head_bytes);
  encode_frame_header(f.head.data(), frame_type::data,
                      static_cast<std::uint32_t>(data_head_bytes + f.body.size() + frame_tag_bytes));
  encode_data_head(f.head.data() + frame_header_bytes, data_head{seq, 0, 5, 1001, 3, 64});
  const std::array<std::span<const std::byte>, 2> pieces{std::span<const std::byte>(f.head), f.body};
  f.tag = p.seal(pieces);
  return f;
}

bool open_data(frame_protection& p, const sealed_frame& f) {
  const std::array<std::span<const std::byte>, 2> pieces{std::span<const std::byte>(f.head), f.body};
  return p.open(pieces, f.tag);
}

}  // namespace

TEST_CASE("frame protection: frames sealed by one end open at the other, in order") {
  auto [dk, ak] = handshake_keys();
  frame_protection d(dk), a(ak);
  REQUIRE(d.is_on());
  CHECK(d.tag_bytes() == frame_tag_bytes);
  for (int i = 1; i <= 5; ++i) CHECK(open_data(a, seal_data(d, i, "hello " + std::to_string(i))));
  for (int i = 1; i <= 3; ++i) CHECK(open_data(d, seal_data(a, i, "back")));
  CHECK(d.frames_sealed() == 5);
  CHECK(a.frames_opened() == 5);
}

TEST_CASE("frame protection: a frame altered in any byte of header, head, body or tag is rejected") {
  const auto reference = [] {
    auto [dk, ak] = handshake_keys();
    frame_protection d(dk);
    return std::pair{seal_data(d, 1, "payload bytes"), ak};
  };
  auto [frame, ak] = reference();
  const std::size_t total = frame.head.size() + frame.body.size() + frame.tag.size();
  for (std::size_t i = 0; i < total; ++i) {
    CAPTURE(i);
    sealed_frame f = frame;
    std::byte* b = i < f.head.size()                     ? &f.head[i]
                   : i < f.head.size() + f.body.size()   ? &f.body[i - f.head.size()]
                                                         : &f.tag[i - f.head.size() - f.body.size()];
    *b ^= std::byte{0x01};
    frame_protection a(ak);  // a fresh receiver: the frame is its first
    CHECK_FALSE(open_data(a, f));
  }
  frame_protection a(ak);
  CHECK(open_data(a, frame));  // unaltered, it opens
}

TEST_CASE("frame protection: a replayed, dropped or reordered frame is rejected") {
  auto [dk, ak] = handshake_keys();
  frame_protection d(dk);
  const auto f1 = seal_data(d, 1, "one");
  const auto f2 = seal_data(d, 2, "two");
  const auto f3 = seal_data(d, 3, "three");
  SUBCASE("replayed") {
    frame_protection a(ak);
    REQUIRE(open_data(a, f1));
    CHECK_FALSE(open_data(a, f1));
  }
  SUBCASE("dropped") {
    frame_protection a(ak);
    REQUIRE(open_data(a, f1));
    CHECK_FALSE(open_data(a, f3));
  }
  SUBCASE("reordered") {
    frame_protection a(ak);
    CHECK_FALSE(open_data(a, f2));
  }
}

TEST_CASE("frame protection: a frame from another connection or reflected back to its sender is rejected") {
  auto [dk1, ak1] = handshake_keys();
  auto [dk2, ak2] = handshake_keys();
  frame_protection d1(dk1), d2(dk2);
  const auto from_first = seal_data(d1, 1, "first connection");
  frame_protection a2(ak2);
  CHECK_FALSE(open_data(a2, from_first));  // same nodes, same number, another connection's keys
  frame_protection d1_reader(dk1);
  CHECK_FALSE(open_data(d1_reader, from_first));  // the sender's own direction: a reflected frame
  (void)d2;
}

TEST_CASE("frame protection: with protection off nothing is tagged and an empty tag is accepted") {
  auto [dk, ak] = handshake_keys(protection_mode::off);
  frame_protection d(dk), a(ak);
  CHECK_FALSE(d.is_on());
  CHECK(d.tag_bytes() == 0);
  const std::array<std::span<const std::byte>, 1> none{};
  CHECK(a.open(none, {}));
  const frame_tag t{};
  CHECK_FALSE(a.open(none, t));  // a tag where none is expected is a protocol error too
}

TEST_CASE("frame protection: a frame checked in parts as it arrives opens like a whole one, and fails alike") {
  auto [dk, ak] = handshake_keys();
  frame_protection d(dk);
  std::string big(100000, 'x');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  const auto f1 = seal_data(d, 1, big);
  const auto f2 = seal_data(d, 2, big);
  auto in_parts = [](frame_protection& p, const sealed_frame& f, std::size_t part) {
    const std::array<std::span<const std::byte>, 1> head{std::span<const std::byte>(f.head)};
    p.open_begin(head);
    CHECK(p.is_opening());
    for (std::size_t at = 0; at < f.body.size(); at += part)
      p.open_more(std::span(f.body).subspan(at, std::min(part, f.body.size() - at)));
    const bool ok = p.open_finish(f.tag);
    CHECK_FALSE(p.is_opening());
    return ok;
  };
  frame_protection a(ak);
  CHECK(in_parts(a, f1, 65536));
  CHECK(open_data(a, f2));  // and the count goes on: a whole frame after one checked in parts
  frame_protection b(ak);
  sealed_frame altered = f1;
  altered.body[77777] ^= std::byte{0x80};
  CHECK_FALSE(in_parts(b, altered, 4096));
}

TEST_CASE("frame protection: a frame sealed in parts as it is written carries the tag of the whole frame") {
  auto [dk, ak] = handshake_keys();
  frame_protection whole(dk), parts(dk);
  std::string big(1234567, 'x');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 23);
  const auto f1 = seal_data(whole, 1, big);
  const auto f2 = seal_data(whole, 2, "after");
  // The same frames through seal_begin/seal_more/seal_finish, the body in uneven slices.
  const std::array<std::span<const std::byte>, 1> head{std::span<const std::byte>(f1.head)};
  parts.seal_begin(head);
  CHECK(parts.is_sealing());
  for (std::size_t at = 0, part = 1; at < f1.body.size(); at += part, part = part * 3 + 1)
    parts.seal_more(std::span(f1.body).subspan(at, std::min(part, f1.body.size() - at)));
  const frame_tag t1 = parts.seal_finish();
  CHECK_FALSE(parts.is_sealing());
  CHECK(t1 == f1.tag);
  const std::array<std::span<const std::byte>, 2> next{std::span<const std::byte>(f2.head), f2.body};
  CHECK(parts.seal(next) == f2.tag);  // and the count goes on
  frame_protection a(ak);
  CHECK(open_data(a, f1));
  CHECK(open_data(a, f2));
  CHECK_THROWS_AS(parts.seal_finish(), std::logic_error);  // finish without begin is a bug, not a zero tag
}

// The tag is standard AES-256-GMAC: EVP's AES-256-GCM over the same additional data, with the frame number as
// nonce, gives the same 16 bytes (a check independent of the mode functions the link uses).
TEST_CASE("frame protection: every tag equals AES-256-GCM's over header and payload with the frame number as nonce") {
  auto [dk, ak] = handshake_keys();
  frame_protection d(dk);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  REQUIRE(ctx);
  REQUIRE(EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr,
                             reinterpret_cast<const unsigned char*>(dk.send.data()), nullptr) == 1);
  const std::string long_text(70'000, 'x');  // more than one GHASH batch, and not a multiple of 16
  const std::array<std::string_view, 4> texts{"", "a", "sixteen bytes!!!", long_text};
  for (std::uint64_t n = 0; n < 4; ++n) {
    const sealed_frame f = seal_data(d, n + 1, texts[n]);
    std::array<unsigned char, 12> nonce{};
    base::store_le<std::uint64_t>(reinterpret_cast<std::byte*>(nonce.data()), n);
    int len = 0;
    REQUIRE(EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce.data()) == 1);
    for (const auto& piece : {std::span<const std::byte>(f.head), std::span<const std::byte>(f.body)}) {
      if (piece.empty()) continue;
      REQUIRE(EVP_EncryptUpdate(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(piece.data()),
                                static_cast<int>(piece.size())) == 1);
    }
    unsigned char unused[16];
    frame_tag expected{};
    REQUIRE(EVP_EncryptFinal_ex(ctx, unused, &len) == 1);
    REQUIRE(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, expected.data()) == 1);
    CHECK(f.tag == expected);
  }
  EVP_CIPHER_CTX_free(ctx);
}
