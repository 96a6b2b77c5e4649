// packet.hpp — an application message on its way through the overlay.
//
// A packet is what ph_send creates and what every hop forwards: the destination (a virtual node in [0, L) or a
// resource name >= L), the origin's resource name, the tag, the hop budget left, and the body. The body moves
// from ph_send's copy to the receiver's phoenix::Message without further copies on the local path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <phoenix/bytes.hpp>

namespace phoenix::overlay {

using node_id = std::uint64_t;  // a resource name

struct packet {
  std::uint64_t dest = 0;
  node_id source = 0;
  std::int32_t tag = 0;
  std::uint8_t hops_left = 0;
  phoenix::Bytes body;
  node_id arrived_from = 0;  // the neighbour it came from, 0 if it started here (bookkeeping, not on the wire)

  // Bytes this packet holds in memory, for the bounds on waiting messages and link windows.
  static std::size_t footprint_of(std::size_t body_bytes) { return body_bytes + sizeof(packet); }
  std::size_t footprint() const { return footprint_of(body.size()); }
};

}  // namespace phoenix::overlay
