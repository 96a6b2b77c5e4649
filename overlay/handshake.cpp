// overlay/handshake.cpp — see handshake.hpp for the protocol and the contract.
#include "overlay/handshake.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cassert>
#include <climits>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "overlay/wire.hpp"

namespace phoenix::overlay {
namespace {

// Domain separation: a MAC made for this purpose cannot be mistaken for one made with the same key elsewhere.
constexpr std::string_view auth_label = "phoenix-link-auth-v1";

std::span<const std::byte> as_byte_span(const nonce_bytes& n) { return std::as_bytes(std::span(n)); }

// Longest prefix of s of at most max_bytes that does not cut a UTF-8 sequence in two: a byte 10xxxxxx
// continues the sequence before it (RFC 3629, section 3).
std::string truncate_utf8(std::string s, std::size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  std::size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  s.resize(n);
  return s;
}

// Names and refusal texts come from an unauthenticated peer and end up in logs: replace control characters so
// a peer cannot forge log lines or send terminal escape sequences.
std::string printable(std::string s) {
  for (char& c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) c = '?';
  }
  return s;
}

std::string text_of(std::span<const std::byte> bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

nonce_bytes random_nonce() {
  nonce_bytes n{};
  // RAND_bytes returns 1 on success (OpenSSL RAND_bytes(3)). Never go on with a predictable nonce: it would
  // make recorded AUTHs replayable.
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) throw std::runtime_error("RAND_bytes failed");
  return n;
}

// HELLO layout after the u16 version, which on_hello() reads first. Returns why the HELLO is malformed, or
// nullopt when `h` was filled in.
std::optional<std::string> decode_hello_body(reader& r, hello& h) {
  std::uint8_t name_len = 0;
  if (!(r.get_u64(h.space_size) && r.get_u64(h.resource_name) &&
        r.get_bytes(std::as_writable_bytes(std::span(h.nonce))) && r.get_u8(name_len))) {
    return "HELLO truncated";
  }
  if (name_len > max_name_bytes) {
    return "HELLO name length " + std::to_string(name_len) + " > " + std::to_string(max_name_bytes);
  }
  auto name = r.get_span(name_len);
  if (!name) return "HELLO truncated in the name";
  if (!r.at_end()) return "HELLO has " + std::to_string(r.remaining()) + " trailing bytes";
  h.name = printable(text_of(*name));
  return std::nullopt;
}

}  // namespace

const char* to_string(refuse_reason reason) {
  switch (reason) {
    case refuse_reason::version:
      return "version";
    case refuse_reason::space_size:
      return "space_size";
    case refuse_reason::key:
      return "key";
    case refuse_reason::self_connection:
      return "self_connection";
    case refuse_reason::malformed:
      return "malformed";
    case refuse_reason::duplicate:
      return "duplicate";
  }
  return "unknown";
}

mac_bytes auth_mac(std::span<const std::byte> cluster_key, const auth_fields& f) {
  writer w;
  w.put_bytes(std::as_bytes(std::span(auth_label)))
      .put_u16(f.version)
      .put_u64(f.space_size)
      .put_u64(f.sender_resource_name)
      .put_u64(f.receiver_resource_name)
      .put_bytes(as_byte_span(f.sender_nonce))
      .put_bytes(as_byte_span(f.receiver_nonce))
      .put_u64(f.resume_ack);
  const auto message = w.bytes();
  // HMAC() one-shot (OpenSSL HMAC(3)); some versions reject a null key pointer even with length 0.
  static const unsigned char no_key = 0;
  const void* key = cluster_key.empty() ? static_cast<const void*>(&no_key) : cluster_key.data();
  if (cluster_key.size() > static_cast<std::size_t>(INT_MAX)) throw std::runtime_error("cluster key too long");
  mac_bytes mac{};
  unsigned int mac_len = 0;
  if (HMAC(EVP_sha256(), key, static_cast<int>(cluster_key.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac.data(),
           &mac_len) == nullptr ||
      mac_len != mac.size()) {
    throw std::runtime_error("HMAC-SHA256 failed");
  }
  return mac;
}

handshake::handshake(std::span<const std::byte> cluster_key, std::uint64_t space_size,
                     std::uint64_t resource_name, std::string name, std::uint16_t version)
    : handshake(cluster_key, space_size, resource_name, std::move(name), random_nonce(), version) {}

handshake::handshake(std::span<const std::byte> cluster_key, std::uint64_t space_size,
                     std::uint64_t resource_name, std::string name, const nonce_bytes& nonce,
                     std::uint16_t version)
    : key_(cluster_key.begin(), cluster_key.end()) {
  own_.version = version;
  own_.space_size = space_size;
  own_.resource_name = resource_name;
  own_.nonce = nonce;
  own_.name = printable(truncate_utf8(std::move(name), max_name_bytes));
}

handshake::~handshake() { wipe_key(); }

handshake::handshake(handshake&& other) noexcept
    : key_(std::move(other.key_)),  // steals the buffer: nothing left behind to wipe
      own_(std::move(other.own_)),
      peer_(std::move(other.peer_)),
      has_peer_hello_(other.has_peer_hello_),
      peer_resume_ack_(other.peer_resume_ack_),
      state_(other.state_),
      failure_(std::move(other.failure_)) {}

handshake& handshake::operator=(handshake&& other) noexcept {
  if (this != &other) {
    wipe_key();  // the move below would free our buffer without wiping it
    key_ = std::move(other.key_);
    own_ = std::move(other.own_);
    peer_ = std::move(other.peer_);
    has_peer_hello_ = other.has_peer_hello_;
    peer_resume_ack_ = other.peer_resume_ack_;
    state_ = other.state_;
    failure_ = std::move(other.failure_);
  }
  return *this;
}

void handshake::wipe_key() {
  if (!key_.empty()) OPENSSL_cleanse(key_.data(), key_.size());
  key_.clear();
}

std::vector<std::byte> handshake::hello_payload() const {
  writer w;
  w.put_u16(own_.version)
      .put_u64(own_.space_size)
      .put_u64(own_.resource_name)
      .put_bytes(as_byte_span(own_.nonce))
      .put_u8(static_cast<std::uint8_t>(own_.name.size()))  // <= max_name_bytes, see the constructor
      .put_bytes(std::as_bytes(std::span(own_.name)));
  return std::move(w).take();
}

std::optional<refusal> handshake::fail(refuse_reason reason, std::string text) {
  state_ = state::failed;
  failure_ = refusal{reason, std::move(text)};
  return failure_;
}

std::optional<refusal> handshake::on_hello(std::span<const std::byte> payload) {
  if (state_ == state::failed) return failure_;
  if (state_ != state::awaiting_hello) return fail(refuse_reason::malformed, "second HELLO");
  reader r(payload);
  std::uint16_t version = 0;
  if (!r.get_u16(version)) return fail(refuse_reason::malformed, "HELLO truncated");
  // The version comes first and is checked before the rest: a newer peer's HELLO may be laid out differently,
  // and it deserves "version" rather than "malformed".
  if (version != own_.version) {
    return fail(refuse_reason::version, "received protocol version " + std::to_string(version) +
                                            ", refusing node speaks " + std::to_string(own_.version));
  }
  hello h;
  h.version = version;
  if (auto error = decode_hello_body(r, h)) return fail(refuse_reason::malformed, std::move(*error));
  if (auto refused = check_peer_hello(h)) return fail(refused->reason, std::move(refused->text));
  peer_ = std::move(h);
  has_peer_hello_ = true;
  state_ = state::awaiting_auth;
  return std::nullopt;
}

// Texts say "received" and "refusing node" rather than "peer" and "ours", so they read right on both ends.
std::optional<refusal> handshake::check_peer_hello(const hello& h) const {
  if (h.space_size != own_.space_size) {
    return refusal{refuse_reason::space_size, "received space size L=" + std::to_string(h.space_size) +
                                                  ", refusing node has L=" + std::to_string(own_.space_size)};
  }
  if (h.resource_name == own_.resource_name) {
    return refusal{refuse_reason::self_connection, "received resource name " + std::to_string(h.resource_name) +
                                                       " is the refusing node's own (connected to itself?)"};
  }
  // Our own nonce coming back means our HELLO was reflected; with a different resource name it is an attempt
  // to make us compute an AUTH that verifies for the attacker.
  if (h.nonce == own_.nonce) {
    return refusal{refuse_reason::self_connection,
                   "received nonce is the refusing node's own (reflected HELLO)"};
  }
  return std::nullopt;
}

const hello& handshake::peer() const {
  assert(has_peer_hello());
  return peer_;
}

std::vector<std::byte> handshake::auth_payload(std::uint64_t resume_ack) const {
  assert(has_peer_hello());
  if (!has_peer_hello()) return {};
  const mac_bytes mac = auth_mac(key_, {own_.version, own_.space_size, own_.resource_name, peer_.resource_name,
                                        own_.nonce, peer_.nonce, resume_ack});
  writer w;
  w.put_bytes(std::as_bytes(std::span(mac))).put_u64(resume_ack);
  return std::move(w).take();
}

std::optional<refusal> handshake::on_auth(std::span<const std::byte> payload) {
  if (state_ == state::failed) return failure_;
  if (state_ == state::awaiting_hello) return fail(refuse_reason::malformed, "AUTH before HELLO");
  if (state_ == state::complete) return fail(refuse_reason::malformed, "second AUTH");
  reader r(payload);
  mac_bytes received{};
  std::uint64_t resume_ack = 0;
  if (!(r.get_bytes(std::as_writable_bytes(std::span(received))) && r.get_u64(resume_ack) && r.at_end())) {
    return fail(refuse_reason::malformed, "AUTH is " + std::to_string(payload.size()) + " bytes, expected " +
                                              std::to_string(auth_size_bytes));
  }
  // Recompute with the peer as sender and our own fresh nonce as receiver_nonce: an AUTH made for another
  // session (other nonces) or for another pair of nodes does not match.
  const mac_bytes expected = auth_mac(key_, {own_.version, own_.space_size, peer_.resource_name,
                                             own_.resource_name, peer_.nonce, own_.nonce, resume_ack});
  // Constant time, so the comparison does not reveal how many leading bytes of a forged MAC were right.
  if (CRYPTO_memcmp(expected.data(), received.data(), expected.size()) != 0) {
    return fail(refuse_reason::key, "cluster key mismatch");
  }
  peer_resume_ack_ = resume_ack;
  state_ = state::complete;
  return std::nullopt;
}

std::vector<std::byte> handshake::refuse_payload(const refusal& r) {
  const std::string text = truncate_utf8(r.text, max_refuse_text_bytes);
  writer w;
  w.put_u16(static_cast<std::uint16_t>(r.reason))
      .put_u8(static_cast<std::uint8_t>(text.size()))
      .put_bytes(std::as_bytes(std::span(text)));
  return std::move(w).take();
}

std::optional<refusal> handshake::decode_refuse(std::span<const std::byte> payload) {
  reader r(payload);
  std::uint16_t reason = 0;
  std::uint8_t text_len = 0;
  if (!(r.get_u16(reason) && r.get_u8(text_len)) || text_len > max_refuse_text_bytes) return std::nullopt;
  auto text = r.get_span(text_len);
  if (!text || !r.at_end()) return std::nullopt;
  return refusal{static_cast<refuse_reason>(reason), printable(text_of(*text))};
}

}  // namespace phoenix::overlay
