// control_guard.cpp — see control_guard.hpp.
#include "phoenix/control_guard.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

namespace phoenix {
namespace {

std::string seconds(std::uint64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / 1000.0);
  return buf;
}

control_verdict refuse(control_verdict::refusal why, std::string text) { return {why, std::move(text)}; }

}  // namespace

bool is_guarded(std::string_view request) {
  // The white space `std::istream >> verb` skips in the node's answer (isspace in the C locale): a verb behind
  // any of it must be found here too, or "\rkill" would pass as unguarded and then be carried out.
  constexpr std::string_view space = " \t\n\v\f\r";
  const auto start = request.find_first_not_of(space);
  if (start == std::string_view::npos) return false;
  const auto verb = request.substr(start, request.find_first_of(space, start) - start);
  static constexpr std::array<std::string_view, 4> guarded = {"kill", "leave", "suspend", "log"};
  return std::find(guarded.begin(), guarded.end(), verb) != guarded.end();
}

replay_cache::result replay_cache::admit(const control_nonce& nonce, std::uint64_t timestamp_ms,
                                         std::uint64_t now_ms) {
  forget_expired(now_ms);
  if (expiry_.count(nonce)) return result::replayed;
  if (expiry_.size() >= capacity_) return result::full;
  const std::uint64_t expires = timestamp_ms + window_ms_;
  expiry_.emplace(nonce, expires);
  by_expiry_.emplace(expires, nonce);
  return result::fresh;
}

// An entry may go once its request falls out of the window for good: the guard refuses timestamps older
// than window_ms before the latest time seen, so a forgotten nonce can never pass again.
void replay_cache::forget_expired(std::uint64_t now_ms) {
  while (!by_expiry_.empty() && by_expiry_.begin()->first < now_ms) {
    expiry_.erase(by_expiry_.begin()->second);
    by_expiry_.erase(by_expiry_.begin());
  }
}

control_verdict control_guard::check(const control_packet& request, std::uint64_t self,
                                     std::uint64_t packet_dest, std::uint64_t now_ms) {
  using r = control_verdict::refusal;
  if (key_.empty())
    return refuse(r::no_key,
                  "this node has no controller key, so it refuses kill, leave, suspend and log: set "
                  "control_key_file (or PHOENIX_CONTROL_KEY_FILE) to the controller's public key (phsh writes "
                  "controller.pub in its run directory)");
  if (!request.seal)
    return refuse(r::unsealed,
                  "unsigned request: kill, leave, suspend and log need the controller's signature; send them "
                  "from a node whose controller_key_file (PHOENIX_CONTROLLER_KEY_FILE) holds the controller's "
                  "private key");
  if (packet_dest != self)
    return refuse(r::not_to_resource_name,
                  "guarded requests must be addressed to the node's resource name, not to a virtual node");
  if (request.seal->target != self)
    return refuse(r::other_target, "the request was signed for node " + std::to_string(request.seal->target) +
                                       ", not for this node (" + std::to_string(self) + ")");
  if (!key_.verifies(request))
    return refuse(r::bad_signature,
                  "the signature does not verify with this node's controller key: the sender holds another "
                  "controller's key, or this node's control_key_file is not that controller's public key");
  latest_ms_ = std::max(latest_ms_, now_ms);
  const std::uint64_t ts = request.seal->timestamp_ms;
  if (ts > now_ms && ts - now_ms > window_ms_)
    return refuse(r::future, "the request is stamped " + seconds(ts - now_ms) +
                                 " ahead of this node's clock (at most " + seconds(window_ms_) +
                                 " allowed): synchronise the clocks of the controller and this node (NTP)");
  const std::uint64_t oldest = latest_ms_ > window_ms_ ? latest_ms_ - window_ms_ : 0;
  if (ts < oldest)
    return refuse(r::stale, "the request is stamped " + seconds(latest_ms_ - ts) +
                                " behind this node's clock (at most " + seconds(window_ms_) +
                                " allowed): a replay, or the clocks of the controller and this node differ "
                                "(synchronise them with NTP)");
  switch (replay_.admit(request.seal->nonce, ts, latest_ms_)) {
    case replay_cache::result::replayed:
      return refuse(r::replayed, "this request was already carried out (its nonce was seen): a replay");
    case replay_cache::result::full:
      return refuse(r::busy, "too many guarded requests within " + seconds(window_ms_) + "; try again later");
    case replay_cache::result::fresh:
      break;
  }
  return {};
}

}  // namespace phoenix
