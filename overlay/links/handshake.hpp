// overlay/links/handshake.hpp — the link handshake: both ends prove knowledge of the shared cluster key, agree
// on the connection's roles and frame protection, and derive the keys that protect every frame after it.
//
// Contract:
//  * A pure state machine: no I/O, no clock, no threads. The caller moves payloads between it and the socket;
//    the frame header around them (types hello_frame_type, auth_frame_type, refuse_frame_type) is the framing
//    layer's business. Both ends run the same symmetric machine, so one round trip brings the link up:
//        send hello_payload()  as soon as the connection is up;
//        on the peer's HELLO:  on_hello();  accepted -> send auth_payload(resume_ack, session_secret)
//        on the peer's AUTH:   on_auth();   verified -> the link is up (is_complete()), keys() are valid
//        any refusal:          send refuse_payload(r), log it, close
//        a received REFUSE:    decode_refuse(), log it, close
//  * Authentication is HMAC-SHA256 challenge-response (see auth_mac() for the exact input). Each side's nonce
//    is fresh from RAND_bytes, so an AUTH recorded from an earlier handshake does not verify; the MAC binds the
//    sender's and the receiver's resource names in order, and a HELLO carrying our own resource name or nonce
//    is refused, so a reflected HELLO or AUTH does not verify either.
//  * Roles: every HELLO says whether its sender dialled or accepted the connection, the MAC covers it, and a
//    peer with the same role is refused. Two connections accepted by X and by Y and spliced together by a
//    relay without the key therefore fail: a relay can forward a real dialler's bytes, never make one up.
//  * Keys: once AUTH verified, keys() holds two directional frame keys and a session secret, derived with
//    HKDF-SHA256 from the cluster key, an X25519 exchange of keys made for this connection alone (as in
//    WireGuard's handshake) and both HELLOs (derive_link_keys()). frame_protection.hpp uses the frame
//    keys on every frame after AUTH. The protection mode is the stronger of the two HELLOs' (covered by the MAC,
//    so nobody on the path can lower it).
//  * Session continuity: the AUTH carries a proof made with the session secret of the link session the sender
//    already has with the receiver (all zeros if none). proves_continuity(secret) tells the link layer whether
//    the peer holds the same secret, i.e. whether this connection continues that session rather than being
//    another key holder claiming the peer's resource name.
//  * Windows: each HELLO announces what its sender accepts unacknowledged on the link (covered by the MAC); the
//    link layer sends at most the peer's window and closes a connection whose peer sends beyond its own.
//  * The HELLO's `name` (logs only) is not authenticated.
//  * Expected failures (anything a peer can send) are values: std::optional<refusal>. After the first refusal
//    the machine is failed and repeats that refusal. Calling auth_payload()/peer() before a HELLO was accepted
//    is a programming error (asserted). An internal libcrypto failure (RAND_bytes, HMAC, HKDF), which no peer
//    can cause, throws std::runtime_error rather than continue with a predictable nonce or a bogus MAC.
//  * The handshake keeps copies of the cluster key and the derived keys and wipes them (OPENSSL_cleanse) when
//    destroyed or assigned over. It is movable, not copyable, so no key is duplicated.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct evp_pkey_st;

namespace phoenix::overlay {

// 2: leaving; 3: goodbye_ack; 4: roles, ephemeral keys, windows, frame protection; 5: end-to-end numbers;
// 6: intervals in transit in route updates; 7: intervals in retractions; 8: packets that name where their
// acknowledgement goes (packet::ack_to_follows, stream_ack_for_tag); 9: retractions at the route's own seqno,
// 16-bit hop limits in seqno requests; 10: routing summaries, dump requests and forget entries instead of
// periodic full dumps
inline constexpr std::uint16_t protocol_version = 10;

inline constexpr std::size_t nonce_size_bytes = 32;
inline constexpr std::size_t mac_size_bytes = 32;  // HMAC-SHA256
inline constexpr std::size_t max_name_bytes = 64;
inline constexpr std::size_t max_refuse_text_bytes = 200;
inline constexpr std::size_t secret_size_bytes = 32;
inline constexpr std::size_t ephemeral_size_bytes = 32;  // an X25519 public key (RFC 7748)
// The least link window a HELLO may announce (as phoenix/config_keys.hpp demands of link_window_bytes).
inline constexpr std::uint64_t min_window_bytes = 64 * 1024;
// HELLO: u16 version, u64 L, u64 resource name, nonce, ephemeral public key, u64 window, u8 role,
// u8 protection, u8 name_len, name.
inline constexpr std::size_t hello_fixed_size_bytes =
    2 + 8 + 8 + nonce_size_bytes + ephemeral_size_bytes + 8 + 1 + 1 + 1;
// AUTH: mac, u64 resume_ack, continuity proof.
inline constexpr std::size_t auth_size_bytes = mac_size_bytes + 8 + mac_size_bytes;

using nonce_bytes = std::array<std::uint8_t, nonce_size_bytes>;
using mac_bytes = std::array<std::uint8_t, mac_size_bytes>;
using secret_bytes = std::array<std::uint8_t, secret_size_bytes>;
using ephemeral_bytes = std::array<std::uint8_t, ephemeral_size_bytes>;

// Which end of the connection a node is: the one that dialled, or the one that accepted.
enum class link_role : std::uint8_t { acceptor = 0, dialler = 1 };

// What protects the frames after AUTH (frame_protection.hpp). Values are on the wire and ordered by strength:
// the link uses the stronger of its two ends' modes.
enum class protection_mode : std::uint8_t {
  off = 0,        // nothing: only for links the user declares trusted (loopback, a private cluster network)
  integrity = 1,  // every frame carries an AES-256-GMAC tag over its header, payload, direction and number
};
inline constexpr std::uint8_t max_protection_mode = 1;
const char* to_string(protection_mode m);  // "off", "integrity"
std::optional<protection_mode> protection_mode_from(std::string_view text);

struct hello {
  std::uint16_t version = 0;
  std::uint64_t space_size = 0;  // L, the size of the virtual node space
  std::uint64_t resource_name = 0;
  nonce_bytes nonce{};
  ephemeral_bytes ephemeral{};  // the sender's X25519 public key for this connection only
  std::uint64_t window_bytes = 0;  // what the sender accepts unacknowledged on this link
  link_role role = link_role::dialler;
  protection_mode protection = protection_mode::integrity;
  std::string name;  // <= max_name_bytes, control characters replaced by '?'
  friend bool operator==(const hello&, const hello&) = default;
};

// Values are on the wire (REFUSE payload). `duplicate` is for the link layer: it refuses a second link to a
// peer it already has a link to; the handshake itself never produces it.
enum class refuse_reason : std::uint16_t {
  version = 1,
  space_size = 2,
  key = 3,
  self_connection = 4,
  malformed = 5,
  duplicate = 6,
  role = 7,  // both ends dialled, or both accepted: a relay spliced two connections together
};
const char* to_string(refuse_reason reason);  // "version", "space_size", ...; "unknown" for other values

struct refusal {
  refuse_reason reason = refuse_reason::malformed;
  std::string text;  // human readable, worded so that it reads right on both ends
  friend bool operator==(const refusal&, const refusal&) = default;
};

// The fields an AUTH's MAC covers. sender = the side sending the AUTH.
struct auth_fields {
  std::uint16_t version = 0;
  std::uint64_t space_size = 0;
  std::uint64_t sender_resource_name = 0;
  std::uint64_t receiver_resource_name = 0;
  nonce_bytes sender_nonce{};
  nonce_bytes receiver_nonce{};
  ephemeral_bytes sender_ephemeral{};
  ephemeral_bytes receiver_ephemeral{};
  std::uint64_t sender_window = 0;
  std::uint64_t receiver_window = 0;
  link_role sender_role = link_role::dialler;
  protection_mode sender_protection = protection_mode::integrity;
  protection_mode receiver_protection = protection_mode::integrity;
  std::uint64_t resume_ack = 0;
};
// HMAC-SHA256(key, "phoenix-link-auth-v3" || u16 version || u64 L || u64 sender_resource_name ||
//             u64 receiver_resource_name || sender_nonce || receiver_nonce || sender_ephemeral ||
//             receiver_ephemeral || u64 sender_window || u64 receiver_window || u8 sender_role ||
//             u8 sender_protection || u8 receiver_protection || u64 resume_ack), integers little-endian, the
// label without a terminating NUL. Every part has a fixed size, so the concatenation is unambiguous.
mac_bytes auth_mac(std::span<const std::byte> cluster_key, const auth_fields& fields);

// The continuity proof: HMAC-SHA256(session_secret, "phoenix-link-continuity-v2" || u64 sender_resource_name ||
// u64 receiver_resource_name || sender_nonce || receiver_nonce || sender_ephemeral || receiver_ephemeral ||
// u64 resume_ack). Bound to this handshake's keys: a key holder in the middle, which must put ephemeral keys
// of its own into each side's HELLO, cannot pass one side's proof on to the other.
mac_bytes continuity_proof(const secret_bytes& session_secret, const auth_fields& fields);

// What a completed handshake hands the link: the frame keys of both directions and the session secret.
struct link_keys {
  protection_mode mode = protection_mode::integrity;
  secret_bytes send{};            // protects the frames this node sends
  secret_bytes receive{};         // checks the frames the peer sends
  secret_bytes session_secret{};  // proves continuity of the link session on later connections
  void wipe();
};
// HKDF-SHA256 (RFC 5869): IKM = the cluster key || the X25519 shared secret of both ephemeral keys, salt =
// dialler nonce || acceptor nonce, info = "phoenix-link-keys-v2" || u16 version || u64 L || u64 dialler
// resource name || u64 acceptor resource name || u8 mode || dialler ephemeral || acceptor ephemeral; 96 bytes
// of output: the dialler-to-acceptor key, the acceptor-to-dialler key, the session secret. The shared secret
// never travels, so someone who holds the cluster key and saw both HELLOs still cannot compute the keys (and
// with them forge frames or a continuity proof). `self` is this node's HELLO, `peer` the other's.
link_keys derive_link_keys(std::span<const std::byte> cluster_key, std::span<const std::uint8_t> shared_secret,
                           const hello& self, const hello& peer, protection_mode mode);

class handshake {
 public:
  // cluster_key: copied. name: truncated to max_name_bytes, control characters replaced. The nonce is fresh
  // from RAND_bytes.
  // window_bytes: what this node accepts unacknowledged on the link (at least min_window_bytes). A fresh
  // X25519 key pair is made for this connection alone.
  handshake(std::span<const std::byte> cluster_key, std::uint64_t space_size, std::uint64_t resource_name,
            std::string name, link_role role, protection_mode protection,
            std::uint16_t version = protocol_version, std::uint64_t window_bytes = 8ull << 20);
  // For tests: a given nonce instead of a random one.
  handshake(std::span<const std::byte> cluster_key, std::uint64_t space_size, std::uint64_t resource_name,
            std::string name, link_role role, protection_mode protection, const nonce_bytes& nonce,
            std::uint16_t version = protocol_version, std::uint64_t window_bytes = 8ull << 20);
  ~handshake();
  handshake(handshake&& other) noexcept;
  handshake& operator=(handshake&& other) noexcept;
  handshake(const handshake&) = delete;
  handshake& operator=(const handshake&) = delete;

  std::vector<std::byte> hello_payload() const;
  // nullopt = accepted; peer() is then valid and auth_payload() may be called.
  std::optional<refusal> on_hello(std::span<const std::byte> payload);
  // resume_ack: the highest link sequence number received in order from this peer in an earlier connection of
  // the same session, 0 if none; session_secret: that session's secret, if this node has one (the proof is all
  // zeros without). Precondition: a peer HELLO was accepted.
  std::vector<std::byte> auth_payload(std::uint64_t resume_ack,
                                      const std::optional<secret_bytes>& session_secret = std::nullopt) const;
  // nullopt = verified; the link is up and peer_resume_ack() and keys() are valid.
  std::optional<refusal> on_auth(std::span<const std::byte> payload);

  bool is_complete() const { return state_ == state::complete; }
  bool is_failed() const { return state_ == state::failed; }
  // A peer HELLO was accepted. Stays true if the AUTH is then refused, so the caller can name the peer in logs.
  bool has_peer_hello() const { return has_peer_hello_; }

  const hello& own() const { return own_; }
  const hello& peer() const;                                          // precondition: has_peer_hello()
  std::uint64_t peer_resume_ack() const { return peer_resume_ack_; }  // 0 until is_complete()
  const link_keys& keys() const { return keys_; }                     // valid once is_complete()
  // Whether the peer's AUTH proved that it holds `session_secret` (false before is_complete()).
  bool proves_continuity(const secret_bytes& session_secret) const;

  static std::vector<std::byte> refuse_payload(const refusal& r);  // text truncated to max_refuse_text_bytes
  // nullopt = malformed. Unknown reason values are kept (a newer peer may know more reasons).
  static std::optional<refusal> decode_refuse(std::span<const std::byte> payload);

 private:
  enum class state { awaiting_hello, awaiting_auth, complete, failed };

  std::optional<refusal> fail(refuse_reason reason, std::string text);
  std::optional<refusal> check_peer_hello(const hello& h) const;
  auth_fields fields(bool sent, std::uint64_t resume_ack) const;
  void wipe_key();
  std::optional<refusal> derive_keys();

  std::vector<std::byte> key_;
  ::evp_pkey_st* ephemeral_key_ = nullptr;  // this connection's X25519 private key
  hello own_;
  hello peer_;
  bool has_peer_hello_ = false;
  std::uint64_t peer_resume_ack_ = 0;
  mac_bytes peer_proof_{};
  link_keys keys_;
  state state_ = state::awaiting_hello;
  refusal failure_;  // valid when state_ == failed
};

}  // namespace phoenix::overlay
