// phoenix/volpex.hpp — serving the Volpex dataspace from C++ (the calls of replicas are in phoenix/volpex.h).
//
// A node that serves the dataspace runs a volpex::Server: the tags placed on the virtual nodes it assumes are
// its to serve, and their state moves with its intervals when it joins, leaves or rebalances, so serving nodes
// may come and go while the computation runs (docs/volpex.md).
#pragma once

#include <phoenix/node.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>

namespace phoenix::volpex {

class tag_server;

struct ServerOptions {
  unsigned replicas = 0;            // replicas per process: a read-log entry goes once all were served; 0 keeps it
  std::size_t log_capacity = 4096;  // read-log entries in memory; the older half spills to disk beyond
  bool copy_logging = false;        // copy each delivered object into the log (the paper's pessimistic logging)
  std::string spill_dir;            // where the spill file goes (empty: $TMPDIR or /tmp)
  // false: every call counts as the first instance of its logical call (no single put, no identical get). Only
  // for drills and tests that show the rules are what keeps replicas consistent.
  bool replica_rules = true;
};

struct ServerStats {
  std::uint64_t puts = 0, replica_puts = 0;      // accepted, and ignored as replicas'
  std::uint64_t delivered = 0, from_log = 0, lost = 0;
  std::uint64_t waiting = 0, objects = 0;        // now
  std::uint64_t log_in_memory = 0, log_spilled = 0, log_forgotten = 0;
  std::uint64_t copied_bytes = 0;
};

class PH_API Server {
 public:
  explicit Server(Node& node, ServerOptions options = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Sets the node's state handlers to the dataspace's: before the node joins or assumes anything.
  std::error_code install();
  // Waits up to `timeout` for a request, then handles every request queued; returns how many. Migration steps
  // run meanwhile, as in Node::recv. Call it in a loop on one thread.
  std::size_t serve_for(std::chrono::milliseconds timeout);
  ServerStats statistics() const;

 private:
  std::unique_ptr<tag_server> impl_;
};

}  // namespace phoenix::volpex
