// overlay/routing_driver.hpp — the DSDV driver: runs a node's route table (routing/route_table.hpp, which has
// no clock and no I/O) on the node's I/O context. It keeps the intervals this node assumes, sends the table's
// updates and requests over the links, feeds it what neighbours advertise, and wakes it at its deadlines
// (expiry, summaries, dumps, request resends).
//
// Every change goes through changed(): when the routes moved, the `routes_changed` callback runs first (the
// forwarder sends what waited for a route), then triggered updates and requests go out.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "base/interval_set.hpp"
#include "overlay/link_manager.hpp"
#include "overlay/overlay_config.hpp"
#include "overlay/routing/route_table.hpp"

namespace phoenix::overlay {

class routing_driver {
 public:
  routing_driver(asio::io_context& io, const overlay_config& config, node_id self, link_manager& links,
                 std::function<void()> routes_changed);
  ~routing_driver();
  routing_driver(const routing_driver&) = delete;
  routing_driver& operator=(const routing_driver&) = delete;

  // The intervals of [0, L) this node assumes; each change is advertised. A release `in_transit` (a
  // migration's give) is advertised as such, in the same update as the release, until transit_over(s):
  // should this node crash before its taker assumes s, s is reported with this node's intervals
  // (route_entry::in_transit).
  base::interval_set::result assume(base::interval s);
  base::interval_set::result release(base::interval s, bool in_transit = false);
  void transit_over(base::interval s);
  // Advertises s in transit, where it overlaps nothing this node assumes or has in transit: an interval lost
  // on its way that this node alone knows of (its record, should this node crash too).
  void hold_in_transit(base::interval s);
  const base::interval_set& assumed() const { return own_; }
  // A node that finalizes advertises no intervals from now on, while it still delivers what arrives for them:
  // the others see it go as a node that left, not as an owner lost (route_table::lost_owners).
  void withdraw();

  // Where a packet for `dest` (a virtual node, or a resource name at or beyond L) goes: here, or to a next hop.
  bool is_local(std::uint64_t dest) const;
  std::optional<node_id> next_hop_for(std::uint64_t dest) const;
  const route_table& table() const { return table_; }
  // An interval this node gave to a taker unreachable for `unreachable_for` before anyone heard it assume the
  // interval: reported as lost with the taker (route_table::note_lost_in_transit).
  void note_lost_in_transit(node_id taker, base::interval given,
                            std::chrono::steady_clock::duration unreachable_for) {
    table_.note_lost_in_transit(taker, given, std::chrono::steady_clock::now() - unreachable_for);
  }

  // Link events. A leaving neighbour counts as down: routes through it are gone for good.
  void neighbour_up(node_id peer);
  void neighbour_down(node_id peer);
  // A neighbour's routing frame; an error (the caller drops the link) if it does not decode.
  std::optional<std::string> on_update(node_id from, std::span<const std::byte> payload);
  std::optional<std::string> on_request(node_id from, std::span<const std::byte> payload);
  std::optional<std::string> on_summary(node_id from, std::span<const std::byte> payload);
  std::optional<std::string> on_dump_request(node_id from, std::span<const std::byte> payload);
  // After any of the above: tell the forwarder if the routes moved, send what the table wants sent.
  void changed();

  // Sends u to `to`, or to every neighbour whose link is up, as the table's own updates are (and as a hostile
  // node could).
  void send_update(const route_update& u, std::optional<node_id> to = std::nullopt);
  std::uint64_t bytes_sent() const { return traffic_.bytes; }
  // What this node's routing sent, and the seqno requests it did not act on (route_input_stats::
  // requests_limited), since it started.
  struct traffic {
    std::uint64_t bytes = 0;
    std::uint64_t update_frames = 0;  // one per neighbour a frame went to
    std::uint64_t requests = 0;       // its own and those it forwarded
    std::uint64_t requests_limited = 0;
    route_sync_stats sync;  // dumps, dump requests, summaries that differed, holds expired
  };
  traffic traffic_sent() const {
    traffic t = traffic_;
    t.requests_limited = table_.input_stats().requests_limited;
    t.sync = table_.sync_stats();
    return t;
  }

 private:
  base::interval_set::result advertise(base::interval_set::result r);  // after own_ changed (or not)
  bool drop_transit(base::interval s);
  void arm_timer();
  void on_timer();
  void send_request(node_id to, const route_request& r);
  std::uint64_t send_frame(std::optional<node_id> to, std::vector<std::byte> frame);  // bytes sent

  const overlay_config& config_;
  node_id self_;
  link_manager& links_;
  std::function<void()> routes_changed_;
  route_table table_;
  base::interval_set own_;
  base::interval_set transit_;
  bool withdrawn_ = false;
  std::uint64_t seen_generation_ = 0;
  asio::steady_timer timer_;
  // False once destroyed: a wait that completed before the destructor's cancel() still runs its handler.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  traffic traffic_;
};

}  // namespace phoenix::overlay
