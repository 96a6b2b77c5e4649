// frame.hpp — the link wire format: versioned, length-prefixed frames with a hard maximum size.
//
// Every frame starts with an 8-byte header, all integers little-endian:
//
//   offset 0  u16  magic 0x5850 ("PX" on the wire)
//   offset 2  u8   protocol version (frame_version)
//   offset 3  u8   frame type
//   offset 4  u32  payload length in bytes (not counting the header)
//
// A data frame's payload starts with a fixed 56-byte head (data_head) followed by the message body. Control
// frames (handshake, ack, routing, goodbye) carry small payloads defined next to their users.
//
// Until a link is authenticated its frames may not exceed max_handshake_payload, and the decoder buffers at
// most handshake_buffer_bytes; after that the node's configured maximum applies. Frames after the handshake may
// end in a trailer (the frame_protection tag), counted in the header's length. A frame over the limit, with a
// wrong magic, another version or an unknown type is a protocol error: the link is closed (the caller logs it)
// and the node goes on serving its other links.
//
// frame_decoder reassembles frames from a byte stream without I/O of its own: the connection reads into the
// span prepare() gives and commit()s what arrived. Large data bodies are read straight into their own buffer,
// so a 16 MiB message is copied once, from the kernel to the buffer the application receives.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <phoenix/bytes.hpp>

#include "base/buffer_pool.hpp"
#include "base/wire.hpp"

namespace phoenix::overlay {

inline constexpr std::uint16_t frame_magic = 0x5850;
inline constexpr std::uint8_t frame_version = 1;
inline constexpr std::size_t frame_header_bytes = 8;
inline constexpr std::uint32_t max_handshake_payload = 4096;
// What a connection that has not authenticated may make a node buffer (a HELLO is about 120 bytes).
inline constexpr std::size_t handshake_buffer_bytes = 4096 + 64;
// The buffer after authentication: frames up to half of it are reassembled there, larger ones read in place.
inline constexpr std::size_t link_buffer_bytes = 256 * 1024;
// No configuration can raise a frame beyond this: it bounds what a peer can make us allocate.
inline constexpr std::uint32_t hard_max_payload = 1u << 30;

enum class frame_type : std::uint8_t {
  hello = 1,
  auth = 2,
  refuse = 3,
  data = 16,
  ack = 17,
  route_update = 18,
  route_request = 19,
  goodbye = 20,
  leaving = 21,      // the sender is finalizing: route nothing more through it (empty payload)
  leaving_ack = 22,  // answer to leaving: nothing more will follow on this link for the leaver (empty)
  goodbye_ack = 23,  // answer to goodbye: the leaver may go, its final ack arrived (empty)
  route_summary = 24,       // a digest of the sender's routing entries (routing/route_sync.cpp)
  route_dump_request = 25,  // "send me your whole routing table" (empty)
};
bool is_known_frame_type(std::uint8_t t);
const char* to_string(frame_type t);
// HELLO, AUTH and REFUSE: the frames of the handshake, which never carry a trailer.
bool is_handshake_frame(frame_type t);

struct frame_header {
  frame_type type = frame_type::data;
  std::uint32_t length = 0;
};

enum class frame_error { none, bad_magic, bad_version, unknown_type, too_large, bad_payload };
const char* to_string(frame_error e);

void encode_frame_header(std::byte* out, frame_type type, std::uint32_t length);
frame_error decode_frame_header(std::span<const std::byte, frame_header_bytes> in, std::uint32_t max_payload,
                                frame_header& out);

// The fixed head of a data frame's payload.
inline constexpr std::size_t data_head_bytes = 56;
static_assert(frame_header_bytes + data_head_bytes == base::pool_data_lead_bytes,
              "bodies are pooled where a write places them (base/buffer_pool.hpp)");
struct data_head {
  std::uint64_t seq = 0;    // link sequence number (link_session)
  std::uint64_t ack = 0;    // piggybacked cumulative ack for the reverse direction
  std::uint64_t dest = 0;   // virtual node or resource name
  std::uint64_t source = 0; // origin's resource name
  std::int32_t tag = 0;
  std::uint8_t hops_left = 0;
  std::uint8_t flags = 0;          // packet::handed_over, or nothing
  std::uint64_t stream_seq = 0;    // end-to-end numbers (overlay/delivery/send_streams.hpp)
  std::uint64_t stream_prev = 0;
};
void encode_data_head(std::byte* out, const data_head& h);
frame_error decode_data_head(std::span<const std::byte> payload, data_head& out);

// A whole control frame (header + payload) in one buffer.
std::vector<std::byte> make_control_frame(frame_type type, std::span<const std::byte> payload);
std::vector<std::byte> make_ack_frame(frame_type type, std::uint64_t ack);  // ack and goodbye: one u64
std::optional<std::uint64_t> decode_ack_payload(std::span<const std::byte> payload);

// One complete frame as frame_decoder hands it out. `payload` and `trailer` are valid until the next call on
// the decoder. For a data frame read in large mode, `payload` holds only the 56-byte head and `body` the rest
// of the payload. `trailer` is the frame's last trailer_bytes() (empty for handshake frames).
struct frame_view {
  frame_header header;
  std::span<const std::byte> payload;
  std::optional<phoenix::Bytes> body;
  std::span<const std::byte> trailer;
};

class frame_decoder {
 public:
  explicit frame_decoder(std::uint32_t max_payload, std::size_t buffer_bytes = link_buffer_bytes);
  void set_max_payload(std::uint32_t max_payload) { max_payload_ = max_payload; }
  // From the next frame on, every frame but a handshake frame ends in `bytes` of trailer.
  void set_trailer_bytes(std::size_t bytes) { trailer_bytes_ = bytes; }
  // Grow the reassembly buffer (bytes already buffered are kept); never shrinks.
  void reserve(std::size_t buffer_bytes);

  std::span<std::byte> prepare();  // where the next read should go (never empty)
  void commit(std::size_t n);      // n bytes arrived there

  enum class status { frame, need_more, error };
  status next(frame_view& out);  // on error, error() says why; the stream cannot be resumed
  frame_error error() const { return error_; }

  // While a large frame is being read in place (between the next() that began it and the one that hands it
  // out): its header, its head (a data frame's 56 bytes, else empty) and the part of its payload that arrived
  // so far, trailer excluded. Lets the caller check a large frame's tag as it arrives. nullopt otherwise.
  struct large_frame {
    frame_header header;
    std::span<const std::byte> head;
    std::span<const std::byte> arrived;
  };
  std::optional<large_frame> large_in_progress() const;

 private:
  void compact();
  status start_large(const frame_header& h);

  std::size_t trailer_of(const frame_header& h) const { return is_handshake_frame(h.type) ? 0 : trailer_bytes_; }

  std::uint32_t max_payload_;
  std::size_t trailer_bytes_ = 0;
  // Left uninitialised: only [begin_, end_) is ever read, and reads start again at the front whenever all was
  // consumed, so pages beyond the largest burst a link received never become resident.
  std::unique_ptr<std::byte[]> buf_;
  std::size_t capacity_ = 0;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  frame_error error_ = frame_error::none;

  // Large mode: the payload (or a data frame's body) goes straight into large_.
  bool in_large_ = false;
  frame_header large_header_;
  std::array<std::byte, data_head_bytes> large_head_{};
  std::size_t large_head_len_ = 0;
  phoenix::Bytes large_;
  std::size_t large_filled_ = 0;
  std::array<std::byte, 64> large_trailer_{};
  std::size_t large_trailer_len_ = 0;
};

}  // namespace phoenix::overlay
