// overlay/links/frame_protection.hpp — the tag every frame carries after the handshake.
//
// With protection on, each frame after AUTH ends in a 16-byte AES-256-GMAC tag (AES-GCM with the frame as
// additional data and nothing encrypted) over the frame header and payload, keyed per direction with the keys
// the handshake derived (handshake.hpp, derive_link_keys) and with the frame's number in that direction as the
// GCM nonce. The number is implicit: both ends count the frames of each direction from 0, so a frame that was
// forged, altered, replayed, dropped, reordered or taken from another connection (other keys) fails its tag,
// and the link closes that connection. The frame header's length counts the tag.
//
// Handshake frames (HELLO, AUTH, REFUSE) are never tagged: they come before the keys, and a REFUSE may follow
// an AUTH the peer has not verified yet. A REFUSE can only close a connection, which anyone on the path can do.
//
// The tags are computed with libcrypto's GCM mode functions (modes.h) over the AES block of an EVP ECB
// context: the same tags as EVP's AES-256-GCM, without its per-call provider overhead, which in OpenSSL 3.0
// costs about 160 ns of the 216 a 64-byte frame takes (bench/frame_crypto, "aes256-gmac" and "gcm128-gmac").
//
// Contract: no I/O, no clock; one object per connection, used on its I/O context only. seal() (or seal_begin ...
// seal_finish) and open() (or open_begin ... open_finish) must be called once per frame, in the order the frames
// are written and read. A libcrypto failure, which no peer
// can cause, throws std::runtime_error.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "overlay/links/handshake.hpp"

struct evp_cipher_ctx_st;
struct gcm128_context;

namespace phoenix::overlay {

inline constexpr std::size_t frame_tag_bytes = 16;
using frame_tag = std::array<std::byte, frame_tag_bytes>;
using frame_pieces = std::span<const std::span<const std::byte>>;

class frame_protection {
 public:
  frame_protection() = default;  // off: nothing is tagged
  explicit frame_protection(const link_keys& keys);
  ~frame_protection();
  frame_protection(frame_protection&&) noexcept;
  frame_protection& operator=(frame_protection&&) noexcept;

  bool is_on() const { return send_.gcm != nullptr; }
  std::size_t tag_bytes() const { return is_on() ? frame_tag_bytes : 0; }

  // The tag of the next frame this end sends: its pieces (header, payload parts) in order.
  frame_tag seal(frame_pieces pieces);
  // The same for a frame written in parts (a large body written slice by slice): begin with its first pieces,
  // add the rest in order as each is written, then finish for its tag. The tag then overlaps the transfer.
  void seal_begin(frame_pieces pieces);
  void seal_more(std::span<const std::byte> piece);
  frame_tag seal_finish();
  bool is_sealing() const { return sealing_; }
  // Whether `tag` is right for the next frame received. A false answer means the connection cannot go on.
  bool open(frame_pieces pieces, std::span<const std::byte> tag);
  // The same for a frame that arrives in parts (a large body read in place): begin with its first pieces,
  // add the rest as it arrives, in order, then finish with its tag. The check then overlaps the transfer.
  void open_begin(frame_pieces pieces);
  void open_more(std::span<const std::byte> piece);
  bool open_finish(std::span<const std::byte> tag);
  bool is_opening() const { return opening_; }

  std::uint64_t frames_sealed() const { return send_.count; }
  std::uint64_t frames_opened() const { return receive_.count; }

 private:
  struct direction {
    evp_cipher_ctx_st* block = nullptr;  // AES-256 keyed once (ECB, one block at a time)
    gcm128_context* gcm = nullptr;       // GHASH over that block cipher; each frame sets only the nonce
    std::uint64_t count = 0;
  };
  static direction keyed(const secret_bytes& key);
  static bool begin_with(direction& d, frame_pieces pieces);
  static frame_tag tag_of(direction& d, frame_pieces pieces);
  static void begin(direction& d);
  static void add(direction& d, std::span<const std::byte> piece);
  static frame_tag finish(direction& d);
  static void release(direction& d);

  direction send_;
  direction receive_;
  bool opening_ = false;  // between open_begin and open_finish
  bool sealing_ = false;  // between seal_begin and seal_finish
};

}  // namespace phoenix::overlay
