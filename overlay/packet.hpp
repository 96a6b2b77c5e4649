// packet.hpp — an application message on its way through the overlay.
//
// A packet is what ph_send creates and what every hop forwards: the destination (a virtual node in [0, L) or a
// resource name >= L), the origin's resource name, the tag, the hop budget left, and the body. The body moves
// from ph_send's copy to the receiver's phoenix::Message without further copies on the local path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <phoenix/bytes.hpp>
#include <vector>

namespace phoenix::overlay {

using node_id = std::uint64_t;  // a resource name

struct packet {
  static constexpr std::uint8_t handed_over = 1;  // flags: delivered once already, by the owner before this one
  // flags: the body ends in 8 bytes, the resource name its owner acknowledges it to (not `source`: a sender's
  // next incarnation that keeps what the last one logged; delivery/stream_codec.hpp)
  static constexpr std::uint8_t ack_to_follows = 2;

  std::uint64_t dest = 0;
  node_id source = 0;
  std::int32_t tag = 0;
  std::uint8_t hops_left = 0;
  phoenix::Bytes body;
  node_id arrived_from = 0;  // the neighbour it came from, 0 if it started here (bookkeeping, not on the wire)
  bool numbered_here = false;  // this node numbered it and keeps it until its owner acknowledges (not on the wire)
  std::uint8_t flags = 0;
  // End-to-end numbering of a packet to a virtual node (delivery/send_streams.hpp); 0 for one to a resource
  // name.
  std::uint64_t stream_seq = 0;
  std::uint64_t stream_prev = 0;

  // Bytes this packet holds in memory, for the bounds on waiting messages and link windows.
  static std::size_t footprint_of(std::size_t body_bytes) { return body_bytes + sizeof(packet); }
  std::size_t footprint() const { return footprint_of(body.size()); }
};

}  // namespace phoenix::overlay
