// client.hpp — one replica of a Volpex process, calling the dataspace (docs/volpex.md).
//
// Each call gets the next request number of the process and waits for its answer: that wait is what makes the
// distributed request numbering exact. Replicas of a process run the same program, so they issue the same
// calls under the same numbers; the servers make the first instance of each take effect and give every other
// instance the same answer. The node a client runs on assumes nothing: answers come to its resource name.
#pragma once

#include <chrono>
#include <optional>
#include <phoenix/node.hpp>
#include <span>
#include <string_view>
#include <system_error>

#include "phoenix/volpex/dataspace.hpp"

namespace phoenix::volpex {

class client {
 public:
  client(Node& node, process_id process);

  // put returns once the object is in the dataspace. get and read block until an object is there (or the
  // timeout passes: PH_ETIMEDOUT, after which this client cannot go on, since its replicas' numbering would
  // differ); PH_ELOST when this replica lagged behind the read log. get removes the object, read leaves it.
  std::error_code put(std::string_view tag, std::span<const std::byte> data,
                      std::chrono::milliseconds timeout = std::chrono::hours(24));
  std::optional<Bytes> get(std::string_view tag, std::error_code* ec = nullptr,
                           std::chrono::milliseconds timeout = std::chrono::hours(24));
  std::optional<Bytes> read(std::string_view tag, std::error_code* ec = nullptr,
                            std::chrono::milliseconds timeout = std::chrono::hours(24));

  // The runtime's own agreement (dataspace.hpp, op::decide): the first non-empty proposal for `tag` takes
  // effect; returns the value in effect, or an empty Bytes when nothing is decided and `proposal` is empty.
  // Takes no request number. nullopt on failure (*ec).
  std::optional<Bytes> decide(std::string_view tag, std::span<const std::byte> proposal, std::error_code* ec,
                              std::chrono::milliseconds timeout);

  // Fault injection for tests and drills: the process kills itself (SIGKILL, as a crash would) at a named point
  // of its nth call of a kind: before sending it, or after sending it and before its answer arrives.
  struct crash_point {
    op kind = op::put;
    std::uint64_t nth = 0;  // 1-based; 0: never
    bool after_send = false;
  };
  void crash_at(crash_point p) { crash_ = p; }
  // "before-put:3", "after-get:1", "after-read:2"; nullopt if `text` is not one.
  static std::optional<crash_point> parse_crash_point(std::string_view text);

  process_id process() const { return process_; }
  request_number last_request() const { return next_ - 1; }
  // How the answers came: from the table (this replica led) or from the read log (another one had).
  std::uint64_t led() const { return led_; }
  std::uint64_t followed() const { return followed_; }

 private:
  std::optional<reply> call(op kind, std::string_view tag, std::span<const std::byte> data,
                            std::chrono::milliseconds timeout, std::error_code* ec);
  std::optional<Bytes> fetch(op kind, std::string_view tag, std::error_code* ec,
                             std::chrono::milliseconds timeout);

  Node& node_;
  process_id process_;
  void maybe_crash(op kind, bool after_send) const;

  request_number next_ = 1;
  std::uint64_t decides_ = 0;  // names each decide's answer: its request field carries (1 << 63) | this count
  crash_point crash_;
  std::uint64_t calls_[5] = {};  // by op
  std::uint64_t led_ = 0, followed_ = 0;
};

}  // namespace phoenix::volpex
