// overlay/handshake.hpp — the link handshake: both ends prove knowledge of the shared cluster key.
//
// Contract:
//  * A pure state machine: no I/O, no clock, no threads. The caller moves payloads between it and the socket;
//    the frame header around them (types hello_frame_type, auth_frame_type, refuse_frame_type) is the framing
//    layer's business. Both ends run the same symmetric machine, so one round trip brings the link up:
//        send hello_payload()  as soon as the connection is up;
//        on the peer's HELLO:  on_hello();  accepted -> send auth_payload(resume_ack)
//        on the peer's AUTH:   on_auth();   verified -> the link is up (is_complete())
//        any refusal:          send refuse_payload(r), log it, close
//        a received REFUSE:    decode_refuse(), log it, close
//  * Authentication is HMAC-SHA256 challenge-response (see auth_mac() for the exact input). Each side's nonce
//    is fresh from RAND_bytes, so an AUTH recorded from an earlier handshake does not verify; the MAC binds the
//    sender's and the receiver's resource names in order, and a HELLO carrying our own resource name or nonce
//    is refused, so a reflected HELLO or AUTH does not verify either.
//  * Not covered: the HELLO's `name` (logs only) is not authenticated, and frames after the handshake are not
//    authenticated by this module (no session key is derived). An active attacker on the path can therefore
//    take over a link after it is up; the handshake keeps out nodes that do not hold the key.
//  * Expected failures (anything a peer can send) are values: std::optional<refusal>. After the first refusal
//    the machine is failed and repeats that refusal. Calling auth_payload()/peer() before a HELLO was accepted
//    is a programming error (asserted). An internal libcrypto failure (RAND_bytes, HMAC), which no peer can
//    cause, throws std::runtime_error rather than continue with a predictable nonce or a bogus MAC.
//  * The handshake keeps a copy of the cluster key and wipes it (OPENSSL_cleanse) when destroyed or assigned
//    over; drop the object once the link is up. It is movable, not copyable, so the key is not duplicated.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace phoenix::overlay {

inline constexpr std::uint16_t protocol_version = 3;  // 2: leaving / leaving_ack; 3: goodbye_ack

inline constexpr std::size_t nonce_size_bytes = 32;
inline constexpr std::size_t mac_size_bytes = 32;  // HMAC-SHA256
inline constexpr std::size_t max_name_bytes = 64;
inline constexpr std::size_t max_refuse_text_bytes = 200;
// HELLO: u16 version, u64 L, u64 resource name, nonce, u8 name_len, name.
inline constexpr std::size_t hello_fixed_size_bytes = 2 + 8 + 8 + nonce_size_bytes + 1;
// AUTH: mac, u64 resume_ack.
inline constexpr std::size_t auth_size_bytes = mac_size_bytes + 8;

using nonce_bytes = std::array<std::uint8_t, nonce_size_bytes>;
using mac_bytes = std::array<std::uint8_t, mac_size_bytes>;

struct hello {
  std::uint16_t version = 0;
  std::uint64_t space_size = 0;  // L, the size of the virtual node space
  std::uint64_t resource_name = 0;
  nonce_bytes nonce{};
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
  std::uint64_t resume_ack = 0;
};
// HMAC-SHA256(key, "phoenix-link-auth-v1" || u16 version || u64 L || u64 sender_resource_name ||
//             u64 receiver_resource_name || sender_nonce || receiver_nonce || u64 resume_ack), integers
// little-endian, the label without a terminating NUL. Every part has a fixed size, so the concatenation is
// unambiguous.
mac_bytes auth_mac(std::span<const std::byte> cluster_key, const auth_fields& fields);

class handshake {
 public:
  // cluster_key: copied. name: truncated to max_name_bytes, control characters replaced. The nonce is fresh
  // from RAND_bytes.
  handshake(std::span<const std::byte> cluster_key, std::uint64_t space_size, std::uint64_t resource_name,
            std::string name, std::uint16_t version = protocol_version);
  // For tests: a given nonce instead of a random one (deterministic payloads).
  handshake(std::span<const std::byte> cluster_key, std::uint64_t space_size, std::uint64_t resource_name,
            std::string name, const nonce_bytes& nonce, std::uint16_t version = protocol_version);
  ~handshake();
  handshake(handshake&& other) noexcept;
  handshake& operator=(handshake&& other) noexcept;
  handshake(const handshake&) = delete;
  handshake& operator=(const handshake&) = delete;

  std::vector<std::byte> hello_payload() const;
  // nullopt = accepted; peer() is then valid and auth_payload() may be called.
  std::optional<refusal> on_hello(std::span<const std::byte> payload);
  // resume_ack: the highest link sequence number received in order from this peer in an earlier connection of
  // the same session, 0 if none. Precondition: a peer HELLO was accepted.
  std::vector<std::byte> auth_payload(std::uint64_t resume_ack) const;
  // nullopt = verified; the link is up and peer_resume_ack() is valid.
  std::optional<refusal> on_auth(std::span<const std::byte> payload);

  bool is_complete() const { return state_ == state::complete; }
  bool is_failed() const { return state_ == state::failed; }
  // A peer HELLO was accepted. Stays true if the AUTH is then refused, so the caller can name the peer in logs.
  bool has_peer_hello() const { return has_peer_hello_; }

  const hello& own() const { return own_; }
  const hello& peer() const;                                          // precondition: has_peer_hello()
  std::uint64_t peer_resume_ack() const { return peer_resume_ack_; }  // 0 until is_complete()

  static std::vector<std::byte> refuse_payload(const refusal& r);  // text truncated to max_refuse_text_bytes
  // nullopt = malformed. Unknown reason values are kept (a newer peer may know more reasons).
  static std::optional<refusal> decode_refuse(std::span<const std::byte> payload);

 private:
  enum class state { awaiting_hello, awaiting_auth, complete, failed };

  std::optional<refusal> fail(refuse_reason reason, std::string text);
  std::optional<refusal> check_peer_hello(const hello& h) const;
  void wipe_key();

  std::vector<std::byte> key_;
  hello own_;
  hello peer_;
  bool has_peer_hello_ = false;
  std::uint64_t peer_resume_ack_ = 0;
  state state_ = state::awaiting_hello;
  refusal failure_;  // valid when state_ == failed
};

}  // namespace phoenix::overlay
