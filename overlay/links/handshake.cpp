// overlay/links/handshake.cpp — see handshake.hpp for the protocol and the contract.
#include "overlay/links/handshake.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cassert>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "base/wire.hpp"

namespace phoenix::overlay {
namespace {

// Domain separation: a MAC made for this purpose cannot be mistaken for one made with the same key elsewhere.
constexpr std::string_view auth_label = "phoenix-link-auth-v3";
constexpr std::string_view continuity_label = "phoenix-link-continuity-v2";
constexpr std::string_view keys_label = "phoenix-link-keys-v2";

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
std::optional<std::string> decode_hello_body(base::reader& r, hello& h) {
  std::uint8_t name_len = 0;
  std::uint8_t role = 0;
  std::uint8_t protection = 0;
  if (!(r.get_u64(h.space_size) && r.get_u64(h.resource_name) &&
        r.get_bytes(std::as_writable_bytes(std::span(h.nonce))) &&
        r.get_bytes(std::as_writable_bytes(std::span(h.ephemeral))) && r.get_u64(h.window_bytes) &&
        r.get_u8(role) && r.get_u8(protection) && r.get_u8(name_len))) {
    return "HELLO truncated";
  }
  if (h.window_bytes < min_window_bytes) {
    return "HELLO announces a window of " + std::to_string(h.window_bytes) + " bytes, under the least, " +
           std::to_string(min_window_bytes);
  }
  if (role > 1) return "HELLO role " + std::to_string(role) + " is neither dialler (1) nor acceptor (0)";
  if (protection > max_protection_mode) {
    return "HELLO asks for frame protection mode " + std::to_string(protection) + ", refusing node knows up to " +
           std::to_string(max_protection_mode);
  }
  h.role = static_cast<link_role>(role);
  h.protection = static_cast<protection_mode>(protection);
  if (name_len > max_name_bytes) {
    return "HELLO name length " + std::to_string(name_len) + " > " + std::to_string(max_name_bytes);
  }
  auto name = r.get_span(name_len);
  if (!name) return "HELLO truncated in the name";
  if (!r.at_end()) return "HELLO has " + std::to_string(r.remaining()) + " trailing bytes";
  h.name = printable(text_of(*name));
  return std::nullopt;
}

// HMAC() one-shot (OpenSSL HMAC(3)); some versions reject a null key pointer even with length 0.
mac_bytes hmac_sha256(std::span<const std::byte> key, std::span<const std::byte> message) {
  static const unsigned char no_key = 0;
  const void* k = key.empty() ? static_cast<const void*>(&no_key) : key.data();
  if (key.size() > static_cast<std::size_t>(INT_MAX)) throw std::runtime_error("HMAC key too long");
  mac_bytes mac{};
  unsigned int mac_len = 0;
  if (HMAC(EVP_sha256(), k, static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
           message.size(), mac.data(), &mac_len) == nullptr ||
      mac_len != mac.size()) {
    throw std::runtime_error("HMAC-SHA256 failed");
  }
  return mac;
}

// HKDF-SHA256 extract-and-expand (RFC 5869) through libcrypto's EVP_PKEY_HKDF.
void hkdf_sha256(std::span<const std::byte> ikm, std::span<const std::byte> salt, std::span<const std::byte> info,
                 std::span<std::byte> out) {
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr);
  auto u = [](std::span<const std::byte> s) { return reinterpret_cast<const unsigned char*>(s.data()); };
  std::size_t out_len = out.size();
  const bool ok = ctx && EVP_PKEY_derive_init(ctx) > 0 && EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) > 0 &&
                  EVP_PKEY_CTX_set1_hkdf_salt(ctx, u(salt), static_cast<int>(salt.size())) > 0 &&
                  EVP_PKEY_CTX_set1_hkdf_key(ctx, u(ikm), static_cast<int>(ikm.size())) > 0 &&
                  EVP_PKEY_CTX_add1_hkdf_info(ctx, u(info), static_cast<int>(info.size())) > 0 &&
                  EVP_PKEY_derive(ctx, reinterpret_cast<unsigned char*>(out.data()), &out_len) > 0 &&
                  out_len == out.size();
  EVP_PKEY_CTX_free(ctx);
  if (!ok) throw std::runtime_error("HKDF-SHA256 failed");
}

// A fresh X25519 key pair (RFC 7748) through libcrypto; its public half goes into the HELLO.
EVP_PKEY* make_ephemeral(ephemeral_bytes& public_key) {
  EVP_PKEY* key = nullptr;
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, nullptr);
  std::size_t len = public_key.size();
  const bool ok = ctx && EVP_PKEY_keygen_init(ctx) > 0 && EVP_PKEY_keygen(ctx, &key) > 0 &&
                  EVP_PKEY_get_raw_public_key(key, public_key.data(), &len) > 0 && len == public_key.size();
  EVP_PKEY_CTX_free(ctx);
  if (!ok) {
    EVP_PKEY_free(key);
    throw std::runtime_error("X25519 key generation failed");
  }
  return key;
}

// The X25519 shared secret of our private key and the peer's public key; nullopt for a public key that
// yields none (libcrypto refuses an all-zero result, which a small-order point gives).
std::optional<secret_bytes> x25519_shared(EVP_PKEY* own, const ephemeral_bytes& peer_public) {
  EVP_PKEY* peer = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, peer_public.data(), peer_public.size());
  EVP_PKEY_CTX* ctx = peer ? EVP_PKEY_CTX_new(own, nullptr) : nullptr;
  secret_bytes shared{};
  std::size_t len = shared.size();
  const bool ok = ctx && EVP_PKEY_derive_init(ctx) > 0 && EVP_PKEY_derive_set_peer(ctx, peer) > 0 &&
                  EVP_PKEY_derive(ctx, shared.data(), &len) > 0 && len == shared.size();
  EVP_PKEY_CTX_free(ctx);
  EVP_PKEY_free(peer);
  if (!ok) return std::nullopt;
  return shared;
}

}  // namespace

const char* to_string(protection_mode m) {
  switch (m) {
    case protection_mode::off:
      return "off";
    case protection_mode::integrity:
      return "integrity";
  }
  return "unknown";
}

std::optional<protection_mode> protection_mode_from(std::string_view text) {
  if (text == "off") return protection_mode::off;
  if (text == "integrity") return protection_mode::integrity;
  return std::nullopt;
}

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
    case refuse_reason::role:
      return "role";
  }
  return "unknown";
}

mac_bytes auth_mac(std::span<const std::byte> cluster_key, const auth_fields& f) {
  base::writer w;
  w.put_bytes(std::as_bytes(std::span(auth_label)))
      .put_u16(f.version)
      .put_u64(f.space_size)
      .put_u64(f.sender_resource_name)
      .put_u64(f.receiver_resource_name)
      .put_bytes(as_byte_span(f.sender_nonce))
      .put_bytes(as_byte_span(f.receiver_nonce))
      .put_bytes(std::as_bytes(std::span(f.sender_ephemeral)))
      .put_bytes(std::as_bytes(std::span(f.receiver_ephemeral)))
      .put_u64(f.sender_window)
      .put_u64(f.receiver_window)
      .put_u8(static_cast<std::uint8_t>(f.sender_role))
      .put_u8(static_cast<std::uint8_t>(f.sender_protection))
      .put_u8(static_cast<std::uint8_t>(f.receiver_protection))
      .put_u64(f.resume_ack);
  return hmac_sha256(cluster_key, w.bytes());
}

mac_bytes continuity_proof(const secret_bytes& session_secret, const auth_fields& f) {
  base::writer w;
  w.put_bytes(std::as_bytes(std::span(continuity_label)))
      .put_u64(f.sender_resource_name)
      .put_u64(f.receiver_resource_name)
      .put_bytes(as_byte_span(f.sender_nonce))
      .put_bytes(as_byte_span(f.receiver_nonce))
      .put_bytes(std::as_bytes(std::span(f.sender_ephemeral)))
      .put_bytes(std::as_bytes(std::span(f.receiver_ephemeral)))
      .put_u64(f.resume_ack);
  return hmac_sha256(std::as_bytes(std::span(session_secret)), w.bytes());
}

void link_keys::wipe() {
  OPENSSL_cleanse(send.data(), send.size());
  OPENSSL_cleanse(receive.data(), receive.size());
  OPENSSL_cleanse(session_secret.data(), session_secret.size());
}

link_keys derive_link_keys(std::span<const std::byte> cluster_key, std::span<const std::uint8_t> shared_secret,
                           const hello& self, const hello& peer, protection_mode mode) {
  const bool dialler = self.role == link_role::dialler;
  const hello& d = dialler ? self : peer;
  const hello& a = dialler ? peer : self;
  base::writer salt;
  salt.put_bytes(as_byte_span(d.nonce)).put_bytes(as_byte_span(a.nonce));
  base::writer info;
  info.put_bytes(std::as_bytes(std::span(keys_label)))
      .put_u16(self.version)
      .put_u64(self.space_size)
      .put_u64(d.resource_name)
      .put_u64(a.resource_name)
      .put_u8(static_cast<std::uint8_t>(mode))
      .put_bytes(std::as_bytes(std::span(d.ephemeral)))
      .put_bytes(std::as_bytes(std::span(a.ephemeral)));
  std::vector<std::byte> ikm(cluster_key.begin(), cluster_key.end());
  const auto shared = std::as_bytes(shared_secret);
  ikm.insert(ikm.end(), shared.begin(), shared.end());
  std::array<std::byte, 3 * secret_size_bytes> out{};
  hkdf_sha256(ikm, salt.bytes(), info.bytes(), out);
  OPENSSL_cleanse(ikm.data(), ikm.size());
  link_keys k;
  k.mode = mode;
  auto block = [&](std::size_t i, secret_bytes& into) {
    std::memcpy(into.data(), out.data() + i * secret_size_bytes, secret_size_bytes);
  };
  block(dialler ? 0 : 1, k.send);
  block(dialler ? 1 : 0, k.receive);
  block(2, k.session_secret);
  OPENSSL_cleanse(out.data(), out.size());
  return k;
}

handshake::handshake(std::span<const std::byte> cluster_key, std::uint64_t space_size,
                     std::uint64_t resource_name, std::string name, link_role role, protection_mode protection,
                     std::uint16_t version, std::uint64_t window_bytes)
    : handshake(cluster_key, space_size, resource_name, std::move(name), role, protection, random_nonce(),
                version, window_bytes) {}

handshake::handshake(std::span<const std::byte> cluster_key, std::uint64_t space_size,
                     std::uint64_t resource_name, std::string name, link_role role, protection_mode protection,
                     const nonce_bytes& nonce, std::uint16_t version, std::uint64_t window_bytes)
    : key_(cluster_key.begin(), cluster_key.end()) {
  ephemeral_key_ = make_ephemeral(own_.ephemeral);
  own_.window_bytes = std::max(window_bytes, min_window_bytes);
  own_.version = version;
  own_.space_size = space_size;
  own_.resource_name = resource_name;
  own_.nonce = nonce;
  own_.role = role;
  own_.protection = protection;
  own_.name = printable(truncate_utf8(std::move(name), max_name_bytes));
}

handshake::~handshake() { wipe_key(); }

handshake::handshake(handshake&& other) noexcept
    : key_(std::move(other.key_)),  // steals the buffer: nothing left behind to wipe
      ephemeral_key_(std::exchange(other.ephemeral_key_, nullptr)),
      own_(std::move(other.own_)),
      peer_(std::move(other.peer_)),
      has_peer_hello_(other.has_peer_hello_),
      peer_resume_ack_(other.peer_resume_ack_),
      peer_proof_(other.peer_proof_),
      keys_(other.keys_),
      state_(other.state_),
      failure_(std::move(other.failure_)) {
  other.keys_.wipe();
}

handshake& handshake::operator=(handshake&& other) noexcept {
  if (this != &other) {
    wipe_key();  // the move below would free our buffer without wiping it
    key_ = std::move(other.key_);
    ephemeral_key_ = std::exchange(other.ephemeral_key_, nullptr);
    own_ = std::move(other.own_);
    peer_ = std::move(other.peer_);
    has_peer_hello_ = other.has_peer_hello_;
    peer_resume_ack_ = other.peer_resume_ack_;
    peer_proof_ = other.peer_proof_;
    keys_ = other.keys_;
    other.keys_.wipe();
    state_ = other.state_;
    failure_ = std::move(other.failure_);
  }
  return *this;
}

void handshake::wipe_key() {
  if (!key_.empty()) OPENSSL_cleanse(key_.data(), key_.size());
  key_.clear();
  keys_.wipe();
  EVP_PKEY_free(ephemeral_key_);  // libcrypto wipes the private key
  ephemeral_key_ = nullptr;
}

std::vector<std::byte> handshake::hello_payload() const {
  base::writer w;
  w.put_u16(own_.version)
      .put_u64(own_.space_size)
      .put_u64(own_.resource_name)
      .put_bytes(as_byte_span(own_.nonce))
      .put_bytes(std::as_bytes(std::span(own_.ephemeral)))
      .put_u64(own_.window_bytes)
      .put_u8(static_cast<std::uint8_t>(own_.role))
      .put_u8(static_cast<std::uint8_t>(own_.protection))
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
  base::reader r(payload);
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
  if (h.role == own_.role) {
    return refusal{refuse_reason::role, std::string("received and refusing node both ") +
                                            (h.role == link_role::dialler ? "dialled" : "accepted") +
                                            " this connection (a relay between two nodes?)"};
  }
  return std::nullopt;
}

const hello& handshake::peer() const {
  assert(has_peer_hello());
  return peer_;
}

// The fields of the AUTH this node sends (sent = true) or expects from the peer.
auth_fields handshake::fields(bool sent, std::uint64_t resume_ack) const {
  const hello& from = sent ? own_ : peer_;
  const hello& to = sent ? peer_ : own_;
  auth_fields f;
  f.version = own_.version;
  f.space_size = own_.space_size;
  f.sender_resource_name = from.resource_name;
  f.receiver_resource_name = to.resource_name;
  f.sender_nonce = from.nonce;
  f.receiver_nonce = to.nonce;
  f.sender_ephemeral = from.ephemeral;
  f.receiver_ephemeral = to.ephemeral;
  f.sender_window = from.window_bytes;
  f.receiver_window = to.window_bytes;
  f.sender_role = from.role;
  f.sender_protection = from.protection;
  f.receiver_protection = to.protection;
  f.resume_ack = resume_ack;
  return f;
}

std::vector<std::byte> handshake::auth_payload(std::uint64_t resume_ack,
                                               const std::optional<secret_bytes>& session_secret) const {
  assert(has_peer_hello());
  if (!has_peer_hello()) return {};
  const auth_fields f = fields(true, resume_ack);
  const mac_bytes mac = auth_mac(key_, f);
  const mac_bytes proof = session_secret ? continuity_proof(*session_secret, f) : mac_bytes{};
  base::writer w;
  w.put_bytes(std::as_bytes(std::span(mac))).put_u64(resume_ack).put_bytes(std::as_bytes(std::span(proof)));
  return std::move(w).take();
}

std::optional<refusal> handshake::on_auth(std::span<const std::byte> payload) {
  if (state_ == state::failed) return failure_;
  if (state_ == state::awaiting_hello) return fail(refuse_reason::malformed, "AUTH before HELLO");
  if (state_ == state::complete) return fail(refuse_reason::malformed, "second AUTH");
  base::reader r(payload);
  mac_bytes received{};
  std::uint64_t resume_ack = 0;
  mac_bytes proof{};
  if (!(r.get_bytes(std::as_writable_bytes(std::span(received))) && r.get_u64(resume_ack) &&
        r.get_bytes(std::as_writable_bytes(std::span(proof))) && r.at_end())) {
    return fail(refuse_reason::malformed, "AUTH is " + std::to_string(payload.size()) + " bytes, expected " +
                                              std::to_string(auth_size_bytes));
  }
  // Recompute with the peer as sender and our own fresh nonce as receiver_nonce: an AUTH made for another
  // session (other nonces) or for another pair of nodes does not match.
  const mac_bytes expected = auth_mac(key_, fields(false, resume_ack));
  // Constant time, so the comparison does not reveal how many leading bytes of a forged MAC were right.
  if (CRYPTO_memcmp(expected.data(), received.data(), expected.size()) != 0) {
    return fail(refuse_reason::key, "cluster key mismatch");
  }
  if (auto refused = derive_keys()) return refused;
  peer_resume_ack_ = resume_ack;
  peer_proof_ = proof;
  state_ = state::complete;
  return std::nullopt;
}

std::optional<refusal> handshake::derive_keys() {
  auto shared = x25519_shared(ephemeral_key_, peer_.ephemeral);
  if (!shared) return fail(refuse_reason::malformed, "HELLO's ephemeral key yields no shared secret");
  keys_ = derive_link_keys(key_, *shared, own_, peer_, std::max(own_.protection, peer_.protection));
  OPENSSL_cleanse(shared->data(), shared->size());
  return std::nullopt;
}

bool handshake::proves_continuity(const secret_bytes& session_secret) const {
  if (!is_complete()) return false;
  const mac_bytes expected = continuity_proof(session_secret, fields(false, peer_resume_ack_));
  return CRYPTO_memcmp(expected.data(), peer_proof_.data(), expected.size()) == 0;
}

std::vector<std::byte> handshake::refuse_payload(const refusal& r) {
  const std::string text = truncate_utf8(r.text, max_refuse_text_bytes);
  base::writer w;
  w.put_u16(static_cast<std::uint16_t>(r.reason))
      .put_u8(static_cast<std::uint8_t>(text.size()))
      .put_bytes(std::as_bytes(std::span(text)));
  return std::move(w).take();
}

std::optional<refusal> handshake::decode_refuse(std::span<const std::byte> payload) {
  base::reader r(payload);
  std::uint16_t reason = 0;
  std::uint8_t text_len = 0;
  if (!(r.get_u16(reason) && r.get_u8(text_len)) || text_len > max_refuse_text_bytes) return std::nullopt;
  auto text = r.get_span(text_len);
  if (!text || !r.at_end()) return std::nullopt;
  return refusal{static_cast<refuse_reason>(reason), printable(text_of(*text))};
}

}  // namespace phoenix::overlay
