// The waiting room: packets that wait for a route, in arrival order, with each neighbour's share counted.
#include <doctest/doctest.h>

#include "overlay/forwarding/waiting_room.hpp"

using namespace phoenix::overlay;

namespace {

packet waiting_packet(std::uint64_t dest, node_id from, std::size_t bytes, std::int32_t tag = 0) {
  packet p;
  p.dest = dest;
  p.arrived_from = from;
  p.tag = tag;
  p.body.resize(bytes);
  return p;
}

}  // namespace

TEST_CASE("waiting room: packets come out in the order they came, and the room is empty afterwards") {
  waiting_room room;
  for (std::int32_t i = 0; i < 5; ++i) room.hold(waiting_packet(static_cast<std::uint64_t>(i % 2), 7, 10, i));
  CHECK(room.size() == 5);
  CHECK(room.bytes() == 5 * packet::footprint_of(10));
  const auto all = room.take_all();
  REQUIRE(all.size() == 5);
  for (std::int32_t i = 0; i < 5; ++i) CHECK(all[static_cast<std::size_t>(i)].tag == i);
  CHECK(room.empty());
  CHECK(room.bytes() == 0);
  CHECK_FALSE(room.holds_for(0));
  CHECK_FALSE(room.holds_for(1));
  CHECK(room.bytes_from(7) == 0);
}

TEST_CASE("waiting room: each neighbour's share is counted apart, and hold returns the sender's share") {
  waiting_room room;
  CHECK(room.hold(waiting_packet(1, 7, 100)) == packet::footprint_of(100));
  CHECK(room.hold(waiting_packet(2, 8, 50)) == packet::footprint_of(50));
  CHECK(room.hold(waiting_packet(3, 7, 20)) == packet::footprint_of(100) + packet::footprint_of(20));
  CHECK(room.hold(waiting_packet(4, 0, 5)) == packet::footprint_of(5));  // this node's own
  CHECK(room.bytes_from(7) == packet::footprint_of(100) + packet::footprint_of(20));
  CHECK(room.bytes_from(8) == packet::footprint_of(50));
  CHECK(room.bytes_from(9) == 0);
  CHECK(room.bytes() == room.bytes_from(7) + room.bytes_from(8) + room.bytes_from(0));
  room.take_all();
  CHECK(room.hold(waiting_packet(5, 7, 1)) == packet::footprint_of(1));  // counted afresh
}

TEST_CASE("waiting room: a destination waits while any packet for it is held, and is listed once, oldest first") {
  waiting_room room;
  room.hold(waiting_packet(30, 1, 1));
  room.hold(waiting_packet(10, 1, 1));
  room.hold(waiting_packet(30, 2, 1));
  room.hold(waiting_packet(20, 2, 1));
  CHECK(room.holds_for(30));
  CHECK(room.holds_for(10));
  CHECK_FALSE(room.holds_for(40));
  CHECK(room.destinations(16) == std::vector<std::uint64_t>{30, 10, 20});
  CHECK(room.destinations(2) == std::vector<std::uint64_t>{30, 10});
  CHECK(room.destinations(0).empty());
}
