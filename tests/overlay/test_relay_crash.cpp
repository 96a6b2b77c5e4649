// A relay that crashes holding a packet it acknowledged hop by hop: what the sender numbered end to end it
// keeps, and sends again another way once end_to_end_resend has passed; what it sent hop by hop only is lost
// with the relay. The runtime's migration replies to a resource name go numbered (overlay::send_unbounded,
// delivery::reliable), so a giver never waits for good for a `done` that a crashed relay held.
#include <doctest/doctest.h>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "overlay/links/cluster_key.hpp"
#include "overlay/overlay.hpp"
#include "support/io_drive.hpp"

using namespace phoenix::overlay;
using namespace std::chrono_literals;

// Named, not anonymous: the test sources are built as one unity source.
namespace relay_crash {

constexpr std::uint64_t L = 1000;

using phoenix::test::drive_until;

// A line sender - relay - receiver, in one io_context. The sender's packets have one hop: they run out of hops
// at the relay, which acknowledges them and holds them (for an hour before it tries again, and sooner only if
// its routes change). Then the relay is destroyed, as a crash, and the sender linked to the receiver directly.
// Returns what the receiver got with tag 7 within `wait`.
enum class to { resource_name, virtual_node };

std::size_t through_crashed_relay(to where, overlay::delivery d, std::chrono::milliseconds wait) {
  asio::io_context io;
  std::vector<std::deque<packet>> got(3);
  std::vector<std::unique_ptr<overlay>> n;
  for (int i = 0; i < 3; ++i) {
    overlay_config c;
    c.name = "m" + std::to_string(i);
    c.space_size = L;
    c.cluster_key = development_key();
    c.end_to_end_resend = 200ms;
    c.hop_retry = 1h;
    if (i == 0) c.hop_limit = 1;
    n.push_back(std::make_unique<overlay>(io, c, L + 1 + static_cast<node_id>(i),
                                          [&got, i](packet&& p) { got[static_cast<std::size_t>(i)].push_back(std::move(p)); }));
  }
  n[0]->connect_local(*n[1]);
  n[1]->connect_local(*n[2]);
  REQUIRE(n[2]->assume({0, 10}) == phoenix::base::interval_set::result::ok);
  const node_id receiver = n[2]->self();
  REQUIRE(drive_until(io, [&] { return n[0]->can_reach(receiver) && n[0]->owner_of(5) == receiver; }, 5s));
  io.run_for(200ms);  // the routes settle: a change at the relay would send the held packet on
  packet p;
  p.dest = where == to::resource_name ? receiver : 5;
  p.tag = 7;
  p.body.resize(16);
  n[0]->send_unbounded(std::move(p), d);
  REQUIRE(drive_until(io, [&] { return n[1]->view().out_of_hops == 1; }, 2s));
  io.run_for(50ms);  // the relay's hop-by-hop acknowledgement reaches the sender
  CHECK(n[0]->view().out_of_hops == 0);
  n[1].reset();  // the relay crashes with the packet
  n[0]->connect_local(*n[2]);
  drive_until(io, [&] { return !got[2].empty(); }, wait);
  return got[2].size();
}

}  // namespace relay_crash

using relay_crash::through_crashed_relay;
using relay_crash::to;

TEST_CASE("end-to-end: a runtime packet to a resource name sent reliably outlives a relay that crashed holding it") {
  CHECK(through_crashed_relay(to::resource_name, overlay::delivery::reliable, 3s) == 1);
}

TEST_CASE("end-to-end: a runtime packet sent hop by hop, or to a virtual node, is lost with a relay that crashed holding it") {
  CHECK(through_crashed_relay(to::resource_name, overlay::delivery::hop_by_hop, 1500ms) == 0);
  CHECK(through_crashed_relay(to::virtual_node, overlay::delivery::reliable, 1500ms) == 0);  // a query: never numbered
}
