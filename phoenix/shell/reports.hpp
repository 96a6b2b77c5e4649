// phoenix/shell/reports.hpp — what nodes tell the shell: the text of their "status" control replies
// (Node::control, phoenix/include/phoenix/node.hpp) and the lines their processes write to stdout.
//
// The stdout protocol of a node process started by phsh, one line each:
//   PORT <endpoint>   JOINED <lo> <hi>   UNITS <total>   LEFT   SUSPENDED <file>   FINISHED
//   REPLICA <process> <replica>   (a Volpex replica: it has started and assumes nothing)
//   COMPLETED         (a Volpex replica called volpex_finalize: its computation is done; it may still serve
//                      lagging replicas from its sender log before FINISHED)
//   RESULT <text>     ERROR <name>: <what>                and free remarks "<name>: <text>"
// Pure functions: no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <phoenix/node.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace phoenix::shell {

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

struct NodeLine {
  enum class Kind { port, joined, replica, units, left, suspended, completed, finished, result, error, remark };
  Kind kind = Kind::remark;
  std::string text;         // port: the endpoint; suspended: the file; result, error, remark: the text;
                            // replica: "replica R of process P"
  Interval interval;        // joined
  std::uint64_t units = 0;  // units
};

// A line of a node process's stdout. A keyword line whose arguments do not parse is a remark.
NodeLine parse_node_line(std::string_view line);

}  // namespace phoenix::shell
