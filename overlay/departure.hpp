// overlay/departure.hpp — a finalizing node's way out of the overlay, and its neighbours' side of it
// (docs/overlay.md, "Leaving and coming back"):
//   1. leaving: every neighbour is told; each stops routing through this node, re-routes what it had not yet
//      sent here, and answers leaving_ack, after which nothing more arrives from it;
//   2. drained: every neighbour answered, nothing waits for a route and everything was acknowledged;
//   3. goodbye: the final ack, after which this node takes no data; every neighbour answers goodbye_ack;
//   4. the caller stops linking, waits until nothing is left to write, and takes what was not delivered.
// Links keep being accepted and redialled until step 4: one that breaks comes back and is told again.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "overlay/forwarder.hpp"
#include "overlay/link_manager.hpp"
#include "overlay/links/frame.hpp"
#include "overlay/overlay_config.hpp"
#include "overlay/routing_driver.hpp"

namespace phoenix::overlay {

class departure {
 public:
  departure(const overlay_config& config, link_manager& links, routing_driver& routing, forwarder& forwarding)
      : config_(config), links_(links), routing_(routing), forwarding_(forwarding) {}

  bool leaving() const { return leaving_; }

  // This node's side: see overlay.hpp for each step's contract.
  void begin_shutdown();
  bool is_drained(bool wait_for_resource_names) const;
  void say_goodbye();
  bool is_farewelled(std::chrono::steady_clock::duration presumed_crashed_after) const;
  std::vector<packet> take_undelivered();

  // A link came up: its neighbour hears again what it may have missed. The first half before the session
  // resends what it holds, the second after.
  void before_resend(neighbour& nb);
  void after_resend(neighbour& nb);
  // A neighbour's departure frame (goodbye, goodbye_ack, leaving, leaving_ack); an error (the caller drops the
  // link) if it is not one this node expects.
  std::optional<std::string> on_frame(connection& c, frame_type type, std::span<const std::byte> payload);

 private:
  const overlay_config& config_;
  link_manager& links_;
  routing_driver& routing_;
  forwarder& forwarding_;
  bool leaving_ = false;         // begin_shutdown: neighbours are told; links still accepted and redialled
  bool saying_goodbye_ = false;  // say_goodbye: every link that comes up hears goodbye at once
  std::chrono::steady_clock::time_point goodbye_since_{};  // when say_goodbye was called
};

}  // namespace phoenix::overlay
