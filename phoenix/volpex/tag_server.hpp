// tag_server.hpp — a node serving the dataspace's tags of the virtual nodes it assumes (docs/volpex.md).
//
// The node's application thread runs serve_for in a loop. The server installs the node's state handlers: the
// dataspace part of each interval (its tags' objects, waiting calls, read log, and every process's request
// numbers) moves with the interval when the node joins, leaves or rebalances, and requests still queued for
// the interval move with it as every message does. So tags keep being served while serving nodes come and go.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <phoenix/node.hpp>
#include <system_error>
#include <vector>

#include "phoenix/volpex/dataspace.hpp"

namespace phoenix::volpex {

class tag_server {
 public:
  // o.space_size is taken from the node.
  tag_server(Node& node, dataspace::options o);
  // Sets the node's state handlers to the dataspace's (before the node joins or assumes anything).
  std::error_code install();
  // Handles the requests that arrive within `timeout` (migration steps run meanwhile); returns how many.
  std::size_t serve_for(std::chrono::milliseconds timeout);
  dataspace::stats statistics() const;

 private:
  void handle(const Message& m);
  void send_reply(const reply& rep);

  Node& node_;
  mutable std::mutex mu_;  // statistics() may be called from another thread
  dataspace ds_;
  std::vector<reply> replies_;
};

}  // namespace phoenix::volpex
