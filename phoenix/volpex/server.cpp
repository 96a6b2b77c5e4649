// server.cpp — phoenix::volpex::Server (phoenix/volpex.hpp), the exported face of volpex::tag_server.
#include <phoenix/volpex.hpp>

#include "phoenix/volpex/tag_server.hpp"

namespace phoenix::volpex {

Server::Server(Node& node, ServerOptions o) {
  dataspace::options d;
  d.mode = o.copy_logging ? logging::copy : logging::share;
  d.log.capacity = o.log_capacity;
  d.log.replicas = o.replicas;
  d.log.spill_dir = o.spill_dir;
  d.replica_rules = o.replica_rules;
  impl_ = std::make_unique<tag_server>(node, d);
}

Server::~Server() = default;

std::error_code Server::install() { return impl_->install(); }

std::size_t Server::serve_for(std::chrono::milliseconds timeout) { return impl_->serve_for(timeout); }

ServerStats Server::statistics() const {
  const auto s = impl_->statistics();
  ServerStats out;
  out.puts = s.puts;
  out.replica_puts = s.replica_puts;
  out.delivered = s.delivered;
  out.from_log = s.from_log;
  out.lost = s.lost;
  out.waiting = s.waiting;
  out.objects = s.objects;
  out.log_in_memory = s.log.in_memory;
  out.log_spilled = s.log.spilled;
  out.log_forgotten = s.log.forgotten;
  out.copied_bytes = s.copied_bytes;
  return out;
}

}  // namespace phoenix::volpex
