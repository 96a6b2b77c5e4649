// control_guard.hpp — which control requests a node carries out: the checks on a sealed request, the replay
// cache they need, and a budget for the warnings a peer can trigger.
//
// Guarded requests (kill, leave, suspend, log) change or reveal the node; a node carries one out only if
//   1. it has a controller key (control_key_file),
//   2. the request is sealed, and its packet was addressed to this node's resource name (never to a virtual
//      node it assumes: whoever can send to a virtual node could otherwise reach whichever node owns it),
//   3. the seal names this node's resource name (unique per incarnation, so a request for one node or an
//      earlier incarnation does nothing here),
//   4. the signature verifies with the controller key,
//   5. its timestamp is within window_ms of this node's clock, and not older than window_ms before the latest
//      time this node has seen (a clock set back does not reopen the window for requests already forgotten),
//   6. its nonce was not seen within the window (replay_cache; bounded: when full of live entries, further
//      requests are refused until some expire — never admitted unchecked).
// status and routes are open to every holder of the cluster key.
//
// Pure: no I/O and no clock; times are passed in (ms, wall clock for the window, any clock for budgets).
// Not thread-safe: the node calls it on its I/O context.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "phoenix/controller_key.hpp"

namespace phoenix {

inline constexpr std::uint64_t control_window_ms = 120'000;
inline constexpr std::size_t control_replay_capacity = 4096;

// Whether the request's first word is a guarded verb.
bool is_guarded(std::string_view request);

class replay_cache {
 public:
  replay_cache(std::uint64_t window_ms, std::size_t capacity) : window_ms_(window_ms), capacity_(capacity) {}
  enum class result { fresh, replayed, full };
  // Records the nonce of a request stamped timestamp_ms (already within the window) unless it was seen.
  result admit(const control_nonce& nonce, std::uint64_t timestamp_ms, std::uint64_t now_ms);
  std::size_t size() const { return expiry_.size(); }

 private:
  void forget_expired(std::uint64_t now_ms);
  std::uint64_t window_ms_;
  std::size_t capacity_;
  std::map<control_nonce, std::uint64_t> expiry_;          // nonce -> the time after which it can no longer pass
  std::multimap<std::uint64_t, control_nonce> by_expiry_;  // the same, in expiry order
};

struct control_verdict {
  // Why a request was refused; admitted when none.
  enum class refusal { none, no_key, unsealed, not_to_resource_name, other_target, bad_signature, stale, future,
                       replayed, busy };
  refusal why = refusal::none;
  std::string text;  // for the reply: what is wrong and, for configuration, how to fix it
  bool admitted() const { return why == refusal::none; }
};

class control_guard {
 public:
  explicit control_guard(controller_key key = {}, std::uint64_t window_ms = control_window_ms,
                         std::size_t replay_capacity = control_replay_capacity)
      : key_(std::move(key)), window_ms_(window_ms), replay_(window_ms, replay_capacity) {}

  // The checks above for a guarded request that arrived in a packet to packet_dest, at node `self`.
  control_verdict check(const control_packet& request, std::uint64_t self, std::uint64_t packet_dest,
                        std::uint64_t now_ms);

 private:
  controller_key key_;
  std::uint64_t window_ms_;
  std::uint64_t latest_ms_ = 0;  // the latest now_ms seen
  replay_cache replay_;
};

}  // namespace phoenix
