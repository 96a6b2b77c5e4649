#include "overlay/forwarding/waiting_room.hpp"

#include <algorithm>
#include <utility>

namespace phoenix::overlay {

std::uint64_t waiting_room::hold(packet p) {
  const std::uint64_t bytes = p.footprint();
  bytes_ += bytes;
  ++dests_[p.dest];
  std::uint64_t& from = from_[p.arrived_from];
  from += bytes;
  packets_.push_back(std::move(p));
  return from;
}

std::deque<packet> waiting_room::take_all() {
  std::deque<packet> all;
  all.swap(packets_);
  bytes_ = 0;
  dests_.clear();
  from_.clear();
  return all;
}

std::uint64_t waiting_room::bytes_from(node_id neighbour) const {
  const auto it = from_.find(neighbour);
  return it == from_.end() ? 0 : it->second;
}

std::vector<std::uint64_t> waiting_room::destinations(std::size_t max) const {
  std::vector<std::uint64_t> out;
  for (const auto& p : packets_) {
    if (out.size() == max) break;
    if (std::find(out.begin(), out.end(), p.dest) == out.end()) out.push_back(p.dest);
  }
  return out;
}

}  // namespace phoenix::overlay
