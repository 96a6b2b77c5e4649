// phoenix/shell/reports.hpp — what nodes tell the shell: the text of their "status" control replies
// (Node::control, phoenix/include/phoenix/node.hpp); the lines their processes write to stdout are read with
// phoenix/launch/node_line.hpp. Pure functions: no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <phoenix/node.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "phoenix/launch/node_line.hpp"

namespace phoenix::shell {

using launch::NodeLine;
using launch::parse_node_line;

// A node's answer to "status" (key=value lines). Keys it does not send keep their defaults.
struct NodeStatus {
  std::string name, host, endpoint, state;
  long pid = 0;
  vp_t resource = 0;
  std::vector<Interval> assumed;
  std::uint64_t queued = 0, waiting = 0, sent = 0, received = 0;
  double rate = 0;          // messages per second
  std::size_t links = 0;    // links up
  std::vector<vp_t> peers;  // resource names at the other end of those links
};

// nullopt when the text is not a status reply (no name= line, or a value that does not parse).
std::optional<NodeStatus> parse_status(std::string_view text);

// "[0,512) [768,1024)" (spaces after commas allowed); "-" and "" are the empty list. nullopt if malformed.
std::optional<std::vector<Interval>> parse_intervals(std::string_view text);

// "[0, 512) [768, 1024)", or "-" for none.
std::string format_intervals(const std::vector<Interval>& intervals);

}  // namespace phoenix::shell
