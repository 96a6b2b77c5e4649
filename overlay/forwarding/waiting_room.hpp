// waiting_room.hpp — the packets that wait at this node for a route: nobody assumes their destination yet, the
// route is not known yet, or they used up their hops. Kept in arrival order, never dropped, with what each
// neighbour put here. No I/O and no clock: the overlay decides when they are routed again (take_all) and what
// a neighbour's share over its bound costs it (its acks are held back: forwarder::hold).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "overlay/packet.hpp"

namespace phoenix::overlay {

class waiting_room {
 public:
  // Keeps p behind every packet already here. Returns the bytes its neighbour (p.arrived_from; 0 for this
  // node's own packets) now has waiting here, p included.
  std::uint64_t hold(packet p);

  // Every packet, in the order they came; the room is empty afterwards.
  std::deque<packet> take_all();

  // Whether a packet for dest waits here: a newer one for it must wait behind it, not overtake it.
  bool holds_for(std::uint64_t dest) const { return !dests_.empty() && dests_.contains(dest); }
  bool empty() const { return packets_.empty(); }
  std::size_t size() const { return packets_.size(); }
  std::uint64_t bytes() const { return bytes_; }  // the packets' footprints
  std::uint64_t bytes_from(node_id neighbour) const;
  // The distinct destinations of the waiting packets, oldest first, at most `max` of them.
  std::vector<std::uint64_t> destinations(std::size_t max) const;
  const std::deque<packet>& packets() const { return packets_; }

 private:
  std::deque<packet> packets_;
  std::uint64_t bytes_ = 0;
  std::unordered_map<std::uint64_t, std::uint32_t> dests_;  // destination -> packets for it
  std::unordered_map<node_id, std::uint64_t> from_;         // neighbour -> bytes of its packets
};

}  // namespace phoenix::overlay
