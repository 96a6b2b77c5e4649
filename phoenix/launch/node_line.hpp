// phoenix/launch/node_line.hpp — the lines a node process started by phsh or by the launcher writes to stdout,
// one per event, and their reading: one codec for the writers (app_cluster.cpp, the Volpex C API) and the
// readers (the shell, app_cluster.cpp's cluster runner).
//
//   PORT <endpoint>   JOINED <lo> <hi>   UNITS <total>   LEFT   SUSPENDED <file>   FINISHED
//   REPLICA <process> <replica>   (a Volpex replica: it has started and assumes nothing)
//   COMPLETED         (a Volpex replica called volpex_finalize: its computation is done; it may still serve
//                      lagging replicas from its sender log before FINISHED)
//   RESULT <text>     ERROR <name>: <what>                and free remarks "<name>: <text>"
//
// The writers are inline (the runtime's C API uses them without linking the launcher). Pure functions: no I/O.
#pragma once

#include <cstdint>
#include <phoenix/node.hpp>
#include <string>
#include <string_view>

namespace phoenix::launch {

inline std::string port_line(std::string_view endpoint) { return "PORT " + std::string(endpoint); }
inline std::string joined_line(std::uint64_t lo, std::uint64_t hi) {
  return "JOINED " + std::to_string(lo) + " " + std::to_string(hi);
}
inline std::string units_line(std::uint64_t total) { return "UNITS " + std::to_string(total); }
inline std::string replica_line(std::uint64_t process, std::uint64_t replica) {
  return "REPLICA " + std::to_string(process) + " " + std::to_string(replica);
}
inline std::string suspended_line(std::string_view file) { return "SUSPENDED " + std::string(file); }
inline std::string result_line(std::string_view text) { return "RESULT " + std::string(text); }
inline std::string error_line(std::string_view name, std::string_view what) {
  return "ERROR " + std::string(name) + ": " + std::string(what);
}
inline constexpr std::string_view left_line = "LEFT";
inline constexpr std::string_view completed_line = "COMPLETED";
inline constexpr std::string_view finished_line = "FINISHED";

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

}  // namespace phoenix::launch
