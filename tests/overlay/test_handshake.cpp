// Tests of overlay/links/handshake.hpp (the cluster key files: test_cluster_key.cpp). Over 600 lines as one
// file: they test one state machine (HELLO, AUTH, REFUSE, key derivation) through the fixtures and the
// independent HELLO writer below, which every part uses.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "overlay/links/cluster_key.hpp"
#include "overlay/links/handshake.hpp"
#include "base/wire.hpp"

using namespace phoenix::overlay;
namespace base = phoenix::base;

namespace {

std::vector<std::byte> bytes_of(std::string_view s) {
  const auto b = std::as_bytes(std::span(s));
  return {b.begin(), b.end()};
}

const std::vector<std::byte> key_a = bytes_of("correct horse battery staple 0123456789");
const std::vector<std::byte> key_b = bytes_of("correct horse battery staple 0123456789!");

constexpr std::uint64_t space = 1u << 20;
constexpr std::uint64_t rn_a = 0xA000000000000001ULL;
constexpr std::uint64_t rn_b = 0xB000000000000002ULL;

constexpr auto dialler = link_role::dialler;
constexpr auto acceptor = link_role::acceptor;
constexpr auto integrity = protection_mode::integrity;

nonce_bytes nonce_of(std::uint8_t seed) {
  nonce_bytes n{};
  for (std::size_t i = 0; i < n.size(); ++i) n[i] = static_cast<std::uint8_t>(seed + i);
  return n;
}

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

// The HELLO layout of the protocol description, written independently of handshake.cpp.
// X25519's base point u = 9 (RFC 7748): a valid public key that is no small-order point.
constexpr ephemeral_bytes base_point = {9};

std::vector<std::byte> make_hello(std::uint16_t version, std::uint64_t l, std::uint64_t rn,
                                  const nonce_bytes& n, std::string_view name, std::uint8_t role = 0,
                                  std::uint8_t protection = 1, const ephemeral_bytes& ephemeral = base_point,
                                  std::uint64_t window = 8u << 20) {
  base::writer w;
  w.put_u16(version).put_u64(l).put_u64(rn).put_bytes(std::as_bytes(std::span(n)));
  w.put_bytes(std::as_bytes(std::span(ephemeral))).put_u64(window);
  w.put_u8(role).put_u8(protection);
  w.put_u8(static_cast<std::uint8_t>(name.size())).put_bytes(std::as_bytes(std::span(name)));
  return std::move(w).take();
}

// Both sides exchange HELLOs; returns true when both accepted.
bool exchange_hellos(handshake& a, handshake& b) {
  const auto from_a = a.hello_payload();
  const auto from_b = b.hello_payload();
  const bool b_ok = !b.on_hello(from_a).has_value();
  const bool a_ok = !a.on_hello(from_b).has_value();
  return a_ok && b_ok;
}

// The fields of an AUTH from `from` to `to` (resource names, nonces), windows of 8 MiB, the rest as given later.
auth_fields fields_between(std::uint64_t from, std::uint64_t to, const nonce_bytes& from_nonce,
                           const nonce_bytes& to_nonce) {
  auth_fields f;
  f.version = protocol_version;
  f.space_size = space;
  f.sender_resource_name = from;
  f.receiver_resource_name = to;
  f.sender_nonce = from_nonce;
  f.receiver_nonce = to_nonce;
  f.sender_window = f.receiver_window = 8u << 20;
  return f;
}

}  // namespace

// ----------------------------------------------------------------------------------------------------
// The happy path

TEST_CASE("handshake: same key on both sides completes and exchanges resume_acks") {
  handshake a(key_a, space, rn_a, "alpha", dialler, integrity);
  handshake b(key_a, space, rn_b, "beta", acceptor, integrity);
  CHECK_FALSE(a.has_peer_hello());
  REQUIRE(exchange_hellos(a, b));
  CHECK(a.peer() == b.own());
  CHECK(b.peer() == a.own());
  CHECK(a.peer().name == "beta");
  CHECK_FALSE(a.is_complete());

  const auto auth_from_a = a.auth_payload(7);
  const auto auth_from_b = b.auth_payload(0x0123456789ABCDEFULL);
  CHECK(auth_from_a.size() == auth_size_bytes);
  CHECK_FALSE(b.on_auth(auth_from_a).has_value());
  CHECK_FALSE(a.on_auth(auth_from_b).has_value());
  CHECK(a.is_complete());
  CHECK(b.is_complete());
  CHECK_FALSE(a.is_failed());
  CHECK(a.peer_resume_ack() == 0x0123456789ABCDEFULL);
  CHECK(b.peer_resume_ack() == 7);
}

TEST_CASE("handshake: every handshake gets a fresh random nonce") {
  handshake a1(key_a, space, rn_a, "alpha", dialler, integrity);
  handshake a2(key_a, space, rn_a, "alpha", dialler, integrity);
  CHECK(a1.own().nonce != a2.own().nonce);
  CHECK(a1.own().nonce != nonce_bytes{});
}

TEST_CASE("handshake: HELLO layout against the protocol description") {
  handshake a(key_a, 0x1122334455667788ULL, 0x0102030405060708ULL, "ab", dialler, integrity, nonce_of(0x40), 0x0201);
  const auto payload = a.hello_payload();
  std::vector<std::byte> expected;
  for (int v : {0x01, 0x02,                                         // version 0x0201
                0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,     // L
                0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01}) {  // resource name
    expected.push_back(static_cast<std::byte>(v));
  }
  for (int i = 0; i < 32; ++i) expected.push_back(static_cast<std::byte>(0x40 + i));    // nonce
  for (auto b : a.own().ephemeral) expected.push_back(static_cast<std::byte>(b));         // X25519 public key
  for (int v : {0, 0, 0x80, 0, 0, 0, 0, 0}) expected.push_back(static_cast<std::byte>(v));  // window 8 MiB
  for (int v : {1, 1}) expected.push_back(static_cast<std::byte>(v));                   // dialler, integrity
  for (int v : {2, int{'a'}, int{'b'}}) expected.push_back(static_cast<std::byte>(v));  // name
  CHECK(payload == expected);
  CHECK(payload.size() == hello_fixed_size_bytes + 2);
}

TEST_CASE("handshake: own name is truncated to 64 bytes at a UTF-8 boundary and control characters replaced") {
  std::string long_name(63, 'x');
  long_name += "\xC3\xA9";  // 'é', would straddle byte 64
  handshake a(key_a, space, rn_a, long_name, dialler, integrity, nonce_of(1));
  CHECK(a.own().name == std::string(63, 'x'));
  handshake b(key_a, space, rn_b, "evil\nname\x1b[31m", acceptor, integrity, nonce_of(2));
  CHECK(b.own().name == "evil?name?[31m");
  // What is sent is what own() says, and the peer decodes it.
  handshake c(key_a, space, rn_b, "c", acceptor, integrity, nonce_of(3));
  REQUIRE_FALSE(c.on_hello(a.hello_payload()).has_value());
  CHECK(c.peer().name == std::string(63, 'x'));
}

TEST_CASE("handshake: control characters in a peer's name are replaced") {
  handshake a(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(1));
  REQUIRE_FALSE(a.on_hello(make_hello(protocol_version, space, rn_b, nonce_of(2), "x\r\ny\x7f")).has_value());
  CHECK(a.peer().name == "x??y?");
}

// ----------------------------------------------------------------------------------------------------
// Authentication failures

TEST_CASE("handshake: different keys - both verifiers refuse with reason key") {
  handshake a(key_a, space, rn_a, "alpha", dialler, integrity);
  handshake b(key_b, space, rn_b, "beta", acceptor, integrity);
  REQUIRE(exchange_hellos(a, b));  // HELLOs carry no proof yet
  // As on the wire: each side sends its AUTH on the peer's HELLO, before the peer's AUTH arrives.
  const auto auth_from_a = a.auth_payload(0);
  const auto auth_from_b = b.auth_payload(0);
  const auto refused_by_b = b.on_auth(auth_from_a);
  const auto refused_by_a = a.on_auth(auth_from_b);
  REQUIRE(refused_by_b.has_value());
  REQUIRE(refused_by_a.has_value());
  CHECK(refused_by_b->reason == refuse_reason::key);
  CHECK(refused_by_a->reason == refuse_reason::key);
  CHECK(refused_by_b->text == "cluster key mismatch");
  CHECK(a.is_failed());
  CHECK_FALSE(a.is_complete());
  CHECK(a.peer_resume_ack() == 0);
  REQUIRE(a.has_peer_hello());  // still there, to name the peer in the log
  CHECK(a.peer().name == "beta");
  // The refusing side's REFUSE tells the other side why.
  const auto told = handshake::decode_refuse(handshake::refuse_payload(*refused_by_b));
  REQUIRE(told.has_value());
  CHECK(*told == *refused_by_b);
}

TEST_CASE("handshake: an AUTH replayed from an earlier handshake is refused") {
  // Session 1, recorded by an eavesdropper.
  handshake a1(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(10));
  handshake b1(key_a, space, rn_b, "beta", acceptor, integrity, nonce_of(20));
  REQUIRE(exchange_hellos(a1, b1));
  const auto old_hello = a1.hello_payload();
  const auto old_auth = a1.auth_payload(5);
  REQUIRE_FALSE(b1.on_auth(old_auth).has_value());  // it was valid then

  SUBCASE("replayed to a new handshake with a fresh random nonce") {
    handshake b2(key_a, space, rn_b, "beta", acceptor, integrity);
    REQUIRE_FALSE(b2.on_hello(old_hello).has_value());  // the old HELLO itself is unremarkable
    const auto refused = b2.on_auth(old_auth);
    REQUIRE(refused.has_value());
    CHECK(refused->reason == refuse_reason::key);
    CHECK_FALSE(b2.is_complete());
  }
  SUBCASE("replayed after a fresh HELLO from the real peer") {
    handshake a2(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(11));
    handshake b2(key_a, space, rn_b, "beta", acceptor, integrity, nonce_of(21));
    REQUIRE(exchange_hellos(a2, b2));
    const auto refused = b2.on_auth(old_auth);
    REQUIRE(refused.has_value());
    CHECK(refused->reason == refuse_reason::key);
  }
}

TEST_CASE("handshake: a node's own AUTH reflected back to it is refused") {
  handshake a(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(1));
  handshake b(key_a, space, rn_b, "beta", acceptor, integrity, nonce_of(2));
  REQUIRE(exchange_hellos(a, b));
  const auto refused = a.on_auth(a.auth_payload(0));
  REQUIRE(refused.has_value());
  CHECK(refused->reason == refuse_reason::key);
}

TEST_CASE("handshake: an AUTH obtained from a second connection to the same node does not verify") {
  // An attacker without the key poses as beta to alpha on connection 1 and, to get an AUTH over alpha's nonce,
  // sends alpha's nonce to alpha on connection 2. Alpha only ever signs as sender, so that AUTH is useless.
  handshake a1(key_a, space, rn_a, "alpha", dialler, integrity);
  handshake a2(key_a, space, rn_a, "alpha", dialler, integrity);
  REQUIRE_FALSE(a1.on_hello(make_hello(protocol_version, space, rn_b, nonce_of(9), "beta")).has_value());
  REQUIRE_FALSE(a2.on_hello(make_hello(protocol_version, space, rn_b, a1.own().nonce, "beta")).has_value());
  const auto refused = a1.on_auth(a2.auth_payload(0));
  REQUIRE(refused.has_value());
  CHECK(refused->reason == refuse_reason::key);
}

TEST_CASE("handshake: a tampered resume_ack is refused") {
  handshake a(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(1));
  handshake b(key_a, space, rn_b, "beta", acceptor, integrity, nonce_of(2));
  REQUIRE(exchange_hellos(a, b));
  auto auth = a.auth_payload(100);
  auth[mac_size_bytes] ^= std::byte{1};  // resume_ack 100 -> 101
  const auto refused = b.on_auth(auth);
  REQUIRE(refused.has_value());
  CHECK(refused->reason == refuse_reason::key);
}

TEST_CASE("handshake: a tampered MAC is refused whichever byte changes") {
  for (std::size_t i = 0; i < mac_size_bytes; ++i) {
    CAPTURE(i);
    handshake a(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(1));
    handshake b(key_a, space, rn_b, "beta", acceptor, integrity, nonce_of(2));
    REQUIRE(exchange_hellos(a, b));
    auto auth = a.auth_payload(0);
    auth[i] ^= std::byte{0x80};
    const auto refused = b.on_auth(auth);
    REQUIRE(refused.has_value());
    CHECK(refused->reason == refuse_reason::key);
  }
}

// ----------------------------------------------------------------------------------------------------
// HELLO checks

TEST_CASE("handshake: a reflected HELLO is refused") {
  handshake a(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(1));
  SUBCASE("verbatim") {
    const auto refused = a.on_hello(a.hello_payload());
    REQUIRE(refused.has_value());
    CHECK(refused->reason == refuse_reason::self_connection);
  }
  SUBCASE("own nonce under another resource name") {
    const auto refused = a.on_hello(make_hello(protocol_version, space, rn_b, a.own().nonce, "mallory"));
    REQUIRE(refused.has_value());
    CHECK(refused->reason == refuse_reason::self_connection);
    CHECK(contains(refused->text, "nonce"));
  }
  SUBCASE("own resource name with another nonce (a node dialled itself)") {
    const auto refused = a.on_hello(make_hello(protocol_version, space, rn_a, nonce_of(2), "alpha"));
    REQUIRE(refused.has_value());
    CHECK(refused->reason == refuse_reason::self_connection);
    CHECK(contains(refused->text, std::to_string(rn_a)));
  }
  CHECK(a.is_failed());
  CHECK_FALSE(a.has_peer_hello());
}

TEST_CASE("handshake: protocol version mismatch is refused on both sides, naming both versions") {
  handshake a(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(1));
  constexpr std::uint16_t other = protocol_version + 1;
  handshake b(key_a, space, rn_b, "beta", acceptor, integrity, nonce_of(2), other);
  const auto by_a = a.on_hello(b.hello_payload());
  const auto by_b = b.on_hello(a.hello_payload());
  REQUIRE(by_a.has_value());
  REQUIRE(by_b.has_value());
  CHECK(by_a->reason == refuse_reason::version);
  CHECK(by_b->reason == refuse_reason::version);
  const auto mine = std::to_string(protocol_version), theirs = std::to_string(other);
  CHECK(by_a->text == "received protocol version " + theirs + ", refusing node speaks " + mine);
  CHECK(by_b->text == "received protocol version " + mine + ", refusing node speaks " + theirs);
}

TEST_CASE("handshake: the version is checked before the rest of the HELLO is parsed") {
  // A future version may lay out its HELLO differently; it must hear "version", not "malformed".
  handshake a(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(1));
  const std::vector<std::byte> next_only{std::byte{protocol_version + 1}, std::byte{0}, std::byte{0xFF}};
  const auto refused = a.on_hello(next_only);
  REQUIRE(refused.has_value());
  CHECK(refused->reason == refuse_reason::version);
}

TEST_CASE("handshake: space size mismatch is refused, naming both values") {
  handshake a(key_a, 1000, rn_a, "alpha", dialler, integrity, nonce_of(1));
  handshake b(key_a, 4096, rn_b, "beta", acceptor, integrity, nonce_of(2));
  const auto by_a = a.on_hello(b.hello_payload());
  REQUIRE(by_a.has_value());
  CHECK(by_a->reason == refuse_reason::space_size);
  CHECK(contains(by_a->text, "4096"));
  CHECK(contains(by_a->text, "1000"));
  CHECK(by_a->text == "received space size L=4096, refusing node has L=1000");
}

TEST_CASE("handshake: malformed HELLOs are refused as malformed") {
  const auto good = make_hello(protocol_version, space, rn_b, nonce_of(2), "beta");
  {
    handshake a(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(1));
    REQUIRE_FALSE(a.on_hello(good).has_value());  // the reference payload itself is fine
  }
  SUBCASE("every truncation") {
    for (std::size_t len = 0; len < good.size(); ++len) {
      CAPTURE(len);
      handshake a(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(1));
      const auto refused = a.on_hello(std::span(good).first(len));
      REQUIRE(refused.has_value());
      CHECK(refused->reason == refuse_reason::malformed);
    }
  }
  SUBCASE("trailing bytes") {
    auto longer = good;
    longer.push_back(std::byte{0});
    handshake a(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(1));
    const auto refused = a.on_hello(longer);
    REQUIRE(refused.has_value());
    CHECK(refused->reason == refuse_reason::malformed);
    CHECK(contains(refused->text, "trailing"));
  }
  SUBCASE("name longer than 64 bytes") {
    handshake a(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(1));
    const auto refused =
        a.on_hello(make_hello(protocol_version, space, rn_b, nonce_of(2), std::string(65, 'n')));
    REQUIRE(refused.has_value());
    CHECK(refused->reason == refuse_reason::malformed);
    CHECK(contains(refused->text, "65"));
  }
  SUBCASE("a name of exactly 64 bytes is fine") {
    handshake a(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(1));
    CHECK_FALSE(a.on_hello(make_hello(protocol_version, space, rn_b, nonce_of(2), std::string(64, 'n'))));
    CHECK(a.peer().name.size() == 64);
  }
}

TEST_CASE("handshake: malformed AUTHs and out-of-order frames are refused as malformed") {
  handshake a(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(1));
  handshake b(key_a, space, rn_b, "beta", acceptor, integrity, nonce_of(2));
  const auto early_auth = std::vector<std::byte>(auth_size_bytes);

  SUBCASE("AUTH before HELLO") {
    const auto refused = a.on_auth(early_auth);
    REQUIRE(refused.has_value());
    CHECK(refused->reason == refuse_reason::malformed);
  }
  SUBCASE("wrong sizes") {
    REQUIRE(exchange_hellos(a, b));
    auto auth = b.auth_payload(3);
    SUBCASE("short") { auth.pop_back(); }
    SUBCASE("long") { auth.push_back(std::byte{0}); }
    SUBCASE("empty") { auth.clear(); }
    const auto refused = a.on_auth(auth);
    REQUIRE(refused.has_value());
    CHECK(refused->reason == refuse_reason::malformed);
  }
  SUBCASE("second HELLO") {
    REQUIRE(exchange_hellos(a, b));
    const auto refused = a.on_hello(b.hello_payload());
    REQUIRE(refused.has_value());
    CHECK(refused->reason == refuse_reason::malformed);
  }
  SUBCASE("second AUTH after completion") {
    REQUIRE(exchange_hellos(a, b));
    const auto auth = b.auth_payload(0);
    REQUIRE_FALSE(a.on_auth(auth).has_value());
    const auto refused = a.on_auth(auth);
    REQUIRE(refused.has_value());
    CHECK(refused->reason == refuse_reason::malformed);
  }
}

TEST_CASE("handshake: after a refusal the machine stays failed and repeats the refusal") {
  handshake a(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(1));
  handshake b(key_a, space + 1, rn_b, "beta", acceptor, integrity, nonce_of(2));
  const auto first = a.on_hello(b.hello_payload());
  REQUIRE(first.has_value());
  CHECK(a.is_failed());
  // Even a good HELLO now gets the first refusal.
  const auto again = a.on_hello(make_hello(protocol_version, space, rn_b, nonce_of(3), "beta"));
  REQUIRE(again.has_value());
  CHECK(*again == *first);
  const auto on_auth = a.on_auth(std::vector<std::byte>(auth_size_bytes));
  REQUIRE(on_auth.has_value());
  CHECK(*on_auth == *first);
  CHECK_FALSE(a.is_complete());
}

// ----------------------------------------------------------------------------------------------------
// The MAC

TEST_CASE("handshake: auth_mac known answer (computed independently with Python's hmac module)") {
  auth_fields f;
  f.version = 1;
  f.space_size = 1u << 20;
  f.sender_resource_name = 0x0102030405060708ULL;
  f.receiver_resource_name = 0x1112131415161718ULL;
  f.sender_nonce = nonce_of(0);
  f.receiver_nonce = nonce_of(32);
  for (std::size_t i = 0; i < 32; ++i) f.sender_ephemeral[i] = static_cast<std::uint8_t>(0x40 + i);
  for (std::size_t i = 0; i < 32; ++i) f.receiver_ephemeral[i] = static_cast<std::uint8_t>(0x80 + i);
  f.sender_window = 1u << 20;
  f.receiver_window = 2u << 20;
  f.sender_role = dialler;
  f.sender_protection = integrity;
  f.receiver_protection = protection_mode::off;
  f.resume_ack = 0xA0A1A2A3A4A5A6A7ULL;
  const mac_bytes expected = {0x42, 0x92, 0x8d, 0xdc, 0x46, 0x40, 0x5d, 0x94, 0xd2, 0xc7, 0xe0,
                              0x5b, 0x09, 0xc7, 0xb2, 0xe0, 0xae, 0x8f, 0xbd, 0x01, 0x13, 0x7a,
                              0xa1, 0x0e, 0x29, 0x7b, 0xa8, 0xde, 0x90, 0x31, 0x68, 0x72};
  CHECK(auth_mac(bytes_of("0123456789abcdef0123456789abcdef"), f) == expected);
}

TEST_CASE("handshake: continuity_proof known answer (computed independently with Python's hmac module)") {
  auth_fields f;
  f.sender_resource_name = 0x0102030405060708ULL;
  f.receiver_resource_name = 0x1112131415161718ULL;
  f.sender_nonce = nonce_of(0);
  f.receiver_nonce = nonce_of(32);
  for (std::size_t i = 0; i < 32; ++i) f.sender_ephemeral[i] = static_cast<std::uint8_t>(0x40 + i);
  for (std::size_t i = 0; i < 32; ++i) f.receiver_ephemeral[i] = static_cast<std::uint8_t>(0x80 + i);
  f.resume_ack = 0x0A0B0C0D0E0F1011ULL;
  secret_bytes secret{};
  for (std::size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<std::uint8_t>(i);
  const mac_bytes expected = {0xda, 0x82, 0x3d, 0x7b, 0x62, 0xb6, 0xc2, 0x6c, 0xbe, 0x93, 0xf4,
                              0xb6, 0x30, 0x04, 0xa0, 0xa6, 0x95, 0x2b, 0x5e, 0xe7, 0xeb, 0x8f,
                              0x49, 0x6d, 0x76, 0x0b, 0xda, 0xb9, 0x1e, 0xeb, 0xbd, 0xac};
  CHECK(continuity_proof(secret, f) == expected);
  // Another ephemeral key (a key holder in the middle has its own) or resume ack gives another proof.
  auth_fields g = f;
  g.sender_ephemeral[5] ^= 1;
  CHECK(continuity_proof(secret, g) != expected);
  g = f;
  g.receiver_ephemeral[0] ^= 1;
  CHECK(continuity_proof(secret, g) != expected);
  g = f;
  g.resume_ack += 1;
  CHECK(continuity_proof(secret, g) != expected);
}

TEST_CASE("handshake: link keys are HKDF-SHA256 of the key, the X25519 secret and both HELLOs (known answer from Python)") {
  hello d, a;
  d.version = a.version = 4;  // the version the known answer was computed for (an input like the others)
  d.space_size = a.space_size = space;
  d.resource_name = rn_a;
  a.resource_name = rn_b;
  d.nonce = nonce_of(1);
  a.nonce = nonce_of(2);
  for (std::size_t i = 0; i < 32; ++i) d.ephemeral[i] = static_cast<std::uint8_t>(0x40 + i);
  for (std::size_t i = 0; i < 32; ++i) a.ephemeral[i] = static_cast<std::uint8_t>(0x80 + i);
  d.role = dialler;
  a.role = acceptor;
  std::array<std::uint8_t, 32> shared{};
  for (std::size_t i = 0; i < 32; ++i) shared[i] = static_cast<std::uint8_t>(0xC0 + i);
  const std::string expected =
      "4a4e186cae1d0130bb178b4f0c96f15ef1e94fd2e545f1438f4c4608d820a152"   // dialler to acceptor
      "dad91252ac3384738492f971e5bd0b9bf913029c666b8a0cb71806e1cdd1dbff"   // acceptor to dialler
      "7c6c25c5e6bd4eb29d426a639a37b3cc219559c45d12885a04d0ffe5fb9dfd64";  // session secret
  auto hex = [](const secret_bytes& k) {
    std::string out;
    for (auto byte : k) {
      char two[3];
      std::snprintf(two, sizeof two, "%02x", byte);
      out += two;
    }
    return out;
  };
  const link_keys at_d = derive_link_keys(key_a, shared, d, a, integrity);
  const link_keys at_a = derive_link_keys(key_a, shared, a, d, integrity);
  CHECK(hex(at_d.send) == expected.substr(0, 64));
  CHECK(hex(at_d.receive) == expected.substr(64, 64));
  CHECK(hex(at_d.session_secret) == expected.substr(128, 64));
  CHECK(at_d.send == at_a.receive);
  CHECK(at_d.receive == at_a.send);
  CHECK(at_d.session_secret == at_a.session_secret);
  CHECK(at_d.mode == integrity);
}

TEST_CASE("handshake: both ends of a handshake derive the same keys, which depend on a secret no HELLO shows") {
  // The same two nodes, nonces and names twice: only the ephemeral keys differ, and so do the link keys. A
  // key holder who saw both HELLOs cannot compute them.
  link_keys first;
  for (int round = 0; round < 2; ++round) {
    handshake a(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(1));
    handshake b(key_a, space, rn_b, "beta", acceptor, integrity, nonce_of(2));
    REQUIRE(exchange_hellos(a, b));
    REQUIRE_FALSE(b.on_auth(a.auth_payload(0)).has_value());
    REQUIRE_FALSE(a.on_auth(b.auth_payload(0)).has_value());
    CHECK(a.keys().send == b.keys().receive);
    CHECK(a.keys().receive == b.keys().send);
    CHECK(a.keys().session_secret == b.keys().session_secret);
    const link_keys guessed = derive_link_keys(key_a, std::array<std::uint8_t, 32>{}, a.own(), a.peer(), integrity);
    CHECK(guessed.send != a.keys().send);
    if (round == 0) first = a.keys();
    else CHECK(first.send != a.keys().send);
  }
}

TEST_CASE("handshake: an ephemeral key that yields no shared secret, or a window under the least, is refused") {
  SUBCASE("a small-order point, in a HELLO and AUTH a key holder made") {
    handshake a(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(1));
    // u = 0 is of small order: the X25519 result is all zeros, which libcrypto refuses.
    REQUIRE_FALSE(a.on_hello(make_hello(protocol_version, space, rn_b, nonce_of(2), "beta", 0, 1, ephemeral_bytes{}))
                      .has_value());
    auth_fields f = fields_between(rn_b, rn_a, nonce_of(2), nonce_of(1));
    f.receiver_ephemeral = a.own().ephemeral;
    f.sender_role = acceptor;
    base::writer w;
    const mac_bytes mac = auth_mac(key_a, f);
    const mac_bytes no_proof{};
    w.put_bytes(std::as_bytes(std::span(mac))).put_u64(0).put_bytes(std::as_bytes(std::span(no_proof)));
    const auto refused = a.on_auth(w.bytes());
    REQUIRE(refused.has_value());
    CHECK(refused->reason == refuse_reason::malformed);
    CHECK(contains(refused->text, "shared secret"));
    CHECK_FALSE(a.is_complete());
  }
  SUBCASE("a window under 64 KiB") {
    handshake a(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(1));
    const auto refused =
        a.on_hello(make_hello(protocol_version, space, rn_b, nonce_of(2), "beta", 0, 1, base_point, 65535));
    REQUIRE(refused.has_value());
    CHECK(refused->reason == refuse_reason::malformed);
    CHECK(contains(refused->text, "window"));
  }
}

TEST_CASE("handshake: every connection gets its own link keys") {
  handshake a1(key_a, space, rn_a, "alpha", dialler, integrity);
  handshake b1(key_a, space, rn_b, "beta", acceptor, integrity);
  handshake a2(key_a, space, rn_a, "alpha", dialler, integrity);
  handshake b2(key_a, space, rn_b, "beta", acceptor, integrity);
  for (const auto& [a, b] : {std::pair{&a1, &b1}, std::pair{&a2, &b2}}) {
    REQUIRE(exchange_hellos(*a, *b));
    REQUIRE_FALSE(b->on_auth(a->auth_payload(0)).has_value());
    REQUIRE_FALSE(a->on_auth(b->auth_payload(0)).has_value());
  }
  CHECK(a1.keys().send != a2.keys().send);
  CHECK(a1.keys().session_secret != a2.keys().session_secret);
  CHECK(a1.keys().send != a1.keys().receive);
}

TEST_CASE("handshake: the link takes the stronger protection of its two ends") {
  for (auto [mine, theirs, expected] :
       {std::tuple{protection_mode::off, protection_mode::off, protection_mode::off},
        std::tuple{protection_mode::off, integrity, integrity}, std::tuple{integrity, protection_mode::off, integrity}}) {
    handshake a(key_a, space, rn_a, "alpha", dialler, mine);
    handshake b(key_a, space, rn_b, "beta", acceptor, theirs);
    REQUIRE(exchange_hellos(a, b));
    REQUIRE_FALSE(b.on_auth(a.auth_payload(0)).has_value());
    REQUIRE_FALSE(a.on_auth(b.auth_payload(0)).has_value());
    CHECK(a.keys().mode == expected);
    CHECK(b.keys().mode == expected);
  }
}

TEST_CASE("handshake: two ends with the same role are refused (a relay splicing two accepted connections)") {
  for (auto role : {dialler, acceptor}) {
    handshake a(key_a, space, rn_a, "alpha", role, integrity);
    handshake b(key_a, space, rn_b, "beta", role, integrity);
    const auto r = b.on_hello(a.hello_payload());
    REQUIRE(r.has_value());
    CHECK(r->reason == refuse_reason::role);
    CHECK(contains(r->text, "relay"));
  }
}

TEST_CASE("handshake: the continuity proof verifies only with the session's secret") {
  secret_bytes secret{};
  secret.fill(7);
  secret_bytes other = secret;
  other[31] ^= 1;
  handshake a(key_a, space, rn_a, "alpha", dialler, integrity);
  handshake b(key_a, space, rn_b, "beta", acceptor, integrity);
  REQUIRE(exchange_hellos(a, b));
  CHECK_FALSE(b.proves_continuity(secret));  // nothing verified yet
  REQUIRE_FALSE(b.on_auth(a.auth_payload(0, secret)).has_value());
  REQUIRE_FALSE(a.on_auth(b.auth_payload(0)).has_value());  // b has no session: an all-zero proof
  CHECK(b.proves_continuity(secret));
  CHECK_FALSE(b.proves_continuity(other));
  CHECK_FALSE(a.proves_continuity(secret));
}

TEST_CASE("handshake: a continuity proof altered in any one byte does not verify") {
  secret_bytes secret{};
  secret.fill(7);
  for (std::size_t i = 0; i < mac_size_bytes; ++i) {
    CAPTURE(i);
    handshake a(key_a, space, rn_a, "alpha", dialler, integrity);
    handshake b(key_a, space, rn_b, "beta", acceptor, integrity);
    REQUIRE(exchange_hellos(a, b));
    auto auth = a.auth_payload(0, secret);
    auth[mac_size_bytes + 8 + i] ^= std::byte{0x01};  // the proof, behind the MAC and the resume ack
    // Either the AUTH is refused, or it is accepted and proves nothing.
    if (!b.on_auth(auth).has_value()) CHECK_FALSE(b.proves_continuity(secret));
  }
}

TEST_CASE("handshake: AUTH payload is the MAC over the documented fields, resume_ack and the proof") {
  handshake a(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(1));
  handshake b(key_a, space, rn_b, "beta", acceptor, protection_mode::off, nonce_of(2));
  REQUIRE(exchange_hellos(a, b));
  secret_bytes secret{};
  secret.fill(3);
  const auto auth = a.auth_payload(0x0807060504030201ULL, secret);
  auth_fields f = fields_between(rn_a, rn_b, nonce_of(1), nonce_of(2));
  f.sender_ephemeral = a.own().ephemeral;
  f.receiver_ephemeral = b.own().ephemeral;
  f.sender_role = dialler;
  f.sender_protection = integrity;
  f.receiver_protection = protection_mode::off;
  f.resume_ack = 0x0807060504030201ULL;
  const mac_bytes mac = auth_mac(key_a, f);
  const mac_bytes proof = continuity_proof(secret, f);
  REQUIRE(auth.size() == auth_size_bytes);
  for (std::size_t i = 0; i < mac.size(); ++i) CHECK(auth[i] == static_cast<std::byte>(mac[i]));
  for (std::size_t i = 0; i < 8; ++i) CHECK(auth[mac_size_bytes + i] == static_cast<std::byte>(i + 1));
  for (std::size_t i = 0; i < proof.size(); ++i) CHECK(auth[mac_size_bytes + 8 + i] == static_cast<std::byte>(proof[i]));
}

TEST_CASE("handshake: the MAC changes if any covered field changes") {
  const auth_fields base = [] {
    auth_fields f = fields_between(rn_a, rn_b, nonce_of(1), nonce_of(2));
    f.sender_ephemeral[0] = 1;
    f.receiver_ephemeral[0] = 2;
    f.resume_ack = 77;
    return f;
  }();
  const mac_bytes reference = auth_mac(key_a, base);
  CHECK(auth_mac(key_a, base) == reference);  // deterministic

  auto differs = [&](auth_fields f) { return auth_mac(key_a, f) != reference; };
  auth_fields f = base;
  f.version = protocol_version + 1;
  CHECK(differs(f));
  f = base;
  f.space_size += 1;
  CHECK(differs(f));
  f = base;
  f.sender_resource_name ^= 1;
  CHECK(differs(f));
  f = base;
  f.receiver_resource_name ^= 1ULL << 63;
  CHECK(differs(f));
  f = base;
  std::swap(f.sender_resource_name, f.receiver_resource_name);  // the order matters: no reflection
  CHECK(differs(f));
  f = base;
  f.sender_nonce[31] ^= 1;
  CHECK(differs(f));
  f = base;
  f.receiver_nonce[0] ^= 1;
  CHECK(differs(f));
  f = base;
  std::swap(f.sender_nonce, f.receiver_nonce);
  CHECK(differs(f));
  f = base;
  f.sender_ephemeral[31] ^= 1;  // a key swapped on the path shows
  CHECK(differs(f));
  f = base;
  f.receiver_ephemeral[0] ^= 1;
  CHECK(differs(f));
  f = base;
  f.sender_window += 1;
  CHECK(differs(f));
  f = base;
  f.receiver_window -= 1;
  CHECK(differs(f));
  f = base;
  f.sender_role = acceptor;
  CHECK(differs(f));
  f = base;
  f.sender_protection = protection_mode::off;  // a downgrade on the path shows
  CHECK(differs(f));
  f = base;
  f.receiver_protection = protection_mode::off;
  CHECK(differs(f));
  f = base;
  f.resume_ack = 78;
  CHECK(differs(f));
  CHECK(auth_mac(key_b, base) != reference);
}

// ----------------------------------------------------------------------------------------------------
// REFUSE

TEST_CASE("handshake: refuse payload round trip for every reason") {
  for (auto reason : {refuse_reason::version, refuse_reason::space_size, refuse_reason::key,
                      refuse_reason::self_connection, refuse_reason::malformed, refuse_reason::duplicate}) {
    const refusal r{reason, std::string("because ") + to_string(reason)};
    const auto decoded = handshake::decode_refuse(handshake::refuse_payload(r));
    REQUIRE(decoded.has_value());
    CHECK(*decoded == r);
  }
  const auto empty_text = handshake::decode_refuse(handshake::refuse_payload({refuse_reason::key, ""}));
  REQUIRE(empty_text.has_value());
  CHECK(empty_text->text.empty());
}

TEST_CASE("handshake: refuse payload layout") {
  const auto payload = handshake::refuse_payload({refuse_reason::self_connection, "hi"});
  const std::vector<std::byte> expected{std::byte{4}, std::byte{0}, std::byte{2}, std::byte{'h'},
                                        std::byte{'i'}};
  CHECK(payload == expected);
}

TEST_CASE("handshake: refuse text is truncated to 200 bytes without splitting a UTF-8 character") {
  std::string text(199, 't');
  text += "\xE2\x82\xAC";  // '€' straddles byte 200
  const auto payload = handshake::refuse_payload({refuse_reason::malformed, text});
  CHECK(payload.size() == 3 + 199);
  const auto decoded = handshake::decode_refuse(payload);
  REQUIRE(decoded.has_value());
  CHECK(decoded->text == std::string(199, 't'));

  const auto exact =
      handshake::decode_refuse(handshake::refuse_payload({refuse_reason::key, std::string(300, 'x')}));
  REQUIRE(exact.has_value());
  CHECK(exact->text.size() == max_refuse_text_bytes);
}

TEST_CASE("handshake: malformed refuse payloads are rejected") {
  const auto good = handshake::refuse_payload({refuse_reason::key, "cluster key mismatch"});
  for (std::size_t len = 0; len < good.size(); ++len) {
    CAPTURE(len);
    CHECK_FALSE(handshake::decode_refuse(std::span(good).first(len)).has_value());
  }
  auto longer = good;
  longer.push_back(std::byte{'!'});
  CHECK_FALSE(handshake::decode_refuse(longer).has_value());

  base::writer w;  // text_len 201 > 200, with the bytes present
  w.put_u16(3).put_u8(201).put_bytes(std::vector<std::byte>(201, std::byte{'x'}));
  CHECK_FALSE(handshake::decode_refuse(std::move(w).take()).has_value());
}

TEST_CASE("handshake: decode_refuse keeps unknown reasons and replaces control characters") {
  base::writer w;
  w.put_u16(99).put_u8(4).put_bytes(bytes_of("a\nb\x1b"));
  const auto decoded = handshake::decode_refuse(std::move(w).take());
  REQUIRE(decoded.has_value());
  CHECK(static_cast<std::uint16_t>(decoded->reason) == 99);
  CHECK(std::string(to_string(decoded->reason)) == "unknown");
  CHECK(decoded->text == "a?b?");
}

TEST_CASE("handshake: to_string of refuse reasons") {
  CHECK(std::string(to_string(refuse_reason::version)) == "version");
  CHECK(std::string(to_string(refuse_reason::space_size)) == "space_size");
  CHECK(std::string(to_string(refuse_reason::key)) == "key");
  CHECK(std::string(to_string(refuse_reason::self_connection)) == "self_connection");
  CHECK(std::string(to_string(refuse_reason::malformed)) == "malformed");
  CHECK(std::string(to_string(refuse_reason::duplicate)) == "duplicate");
}

TEST_CASE("handshake: a moved handshake keeps working and keeps its key") {
  handshake a_orig(key_a, space, rn_a, "alpha", dialler, integrity, nonce_of(1));
  handshake b(key_a, space, rn_b, "beta", acceptor, integrity, nonce_of(2));
  handshake a(std::move(a_orig));
  REQUIRE(exchange_hellos(a, b));
  handshake a2(key_b, space, rn_a, "other", dialler, integrity, nonce_of(3));
  a2 = std::move(a);  // a2's own key is wiped and replaced by key_a
  CHECK_FALSE(b.on_auth(a2.auth_payload(1)).has_value());
  CHECK_FALSE(a2.on_auth(b.auth_payload(2)).has_value());
  CHECK(a2.is_complete());
  CHECK(a2.peer_resume_ack() == 2);
}
