// overlay/overlay_config.hpp — what one node's overlay is configured with (phoenix's config.hpp fills it from
// the node's configuration file, environment and API calls).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "overlay/links/handshake.hpp"
#include "overlay/links/listener.hpp"
#include "overlay/transports/ssh_session.hpp"

namespace phoenix::overlay {

struct overlay_config {
  std::string name;
  std::uint64_t space_size = std::uint64_t{1} << 62;
  std::vector<std::byte> cluster_key;
  // The key is public (no key was configured): listen and dial on loopback addresses only.
  bool loopback_only = false;
  // What protects frames after the handshake (frame_protection.hpp); a link takes the stronger of both ends'.
  protection_mode link_protection = protection_mode::integrity;
  std::chrono::milliseconds retry_interval{1000};
  std::uint64_t max_waiting_bytes = 256ull << 20;
  // Packets from one neighbour that wait here for a route, at most (then its acks are held back: its window
  // fills and it holds the rest itself; nothing is dropped). See docs/security.md, "Resources".
  std::uint64_t max_waiting_per_neighbour_bytes = 16ull << 20;
  std::uint64_t max_message_bytes = 64ull << 20;
  std::uint64_t link_window_bytes = 8ull << 20;  // announced to each neighbour; it sends at most this unacked
  bool fault_ignore_peer_window = false;         // fault injection (tests): send beyond neighbours' windows
  std::chrono::milliseconds full_dump_interval{10000};
  bool split_horizon = false;  // route_params::split_horizon
  // An owner unreachable this long, that held intervals when it went, is reported (overlay_view::lost_owners).
  std::chrono::milliseconds orphan_after{10000};
  std::uint8_t hop_limit = 64;
  // A packet that used up its hops is tried again after this with a fresh budget, unless the routes change
  // first (forwarder::hold_out_of_hops). Long against a loopback hop, short against what a loop costs.
  std::chrono::milliseconds hop_retry{100};
  // End-to-end delivery (docs/overlay.md): a packet this node sent to a virtual node and not acknowledged by its
  // owner goes out again after end_to_end_resend (then after twice as long each time, up to a minute); an owner
  // acknowledges within end_to_end_ack_delay, or at once when much is owed.
  std::chrono::milliseconds end_to_end_resend{2000};
  std::chrono::milliseconds end_to_end_ack_delay{10};
  // A packet for a resource name that has waited here this long with no route to it is dropped: resource names
  // are never reused, and its incarnation is gone (forwarder::routes_changed; its sender gives the stream up).
  std::chrono::milliseconds waiting_gone_after{60000};
  ssh_options ssh;  // ssh:// links: identity, known_hosts, host key policy, keepalives
  admission_limits admission;  // accepted connections: handshakes in progress, accept() backoff
  // A record per resource name this node linked with (its link session, about 2 KB). One whose link is down
  // and that never carried a data packet either way is forgotten after neighbour_expiry; at max_neighbours a
  // link from a new name first makes room by forgetting such a record, and is closed if there is none.
  std::size_t max_neighbours = 4096;
  std::chrono::milliseconds neighbour_expiry{60000};
};

}  // namespace phoenix::overlay
