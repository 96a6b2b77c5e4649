// listener.hpp — the accept path of a node: accepting TCP connections, backing off while accept() fails, and
// closing at once a connection over the handshake caps (admission.hpp), before anything is allocated for it.
//
// A thin coordinator of the pure parts in admission.hpp: it owns the acceptor and the backoff timer and logs,
// at most once per episode or per interval, what a peer can make it log. Runs on the node's I/O context only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>

#include <asio.hpp>

#include "overlay/links/admission.hpp"
#include "base/log_budget.hpp"

namespace phoenix::overlay {

struct admission_limits {
  std::size_t max_handshakes = 64;              // accepted connections in their handshake, in total
  std::size_t max_handshakes_per_address = 8;   // ... and from one source address
  std::chrono::milliseconds accept_backoff_first{50};
  std::chrono::milliseconds accept_backoff_max{1000};
};

class listener {
 public:
  // An admitted connection: its socket and "address:port". The caller calls handshake_ended(remote) once.
  using accepted_fn = std::function<void(asio::ip::tcp::socket, std::string remote)>;

  listener(asio::io_context& io, std::string node_name, admission_limits limits, accepted_fn on_accepted);
  ~listener();
  listener(const listener&) = delete;
  listener& operator=(const listener&) = delete;

  // Binds and listens; the bound endpoint in `local`.
  std::error_code open(const asio::ip::tcp::endpoint& at, asio::ip::tcp::endpoint& local, std::string* error);
  void close();
  // An admitted connection finished its handshake (up or failed): its slot is free.
  void handshake_ended(const std::string& remote);

  std::uint64_t accept_failures() const { return accept_failures_; }
  std::uint64_t handshakes_refused() const { return refused_; }
  std::size_t handshakes_in_progress() const { return caps_.in_progress(); }

 private:
  void accept_next();
  void on_accept(std::error_code ec, asio::ip::tcp::socket s);
  void on_accept_failed(std::error_code ec);
  void admit(asio::ip::tcp::socket s);

  std::string name_;
  admission_limits limits_;
  accepted_fn on_accepted_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer backoff_timer_;
  accept_backoff backoff_;
  handshake_caps caps_;
  base::log_budget refusal_log_{std::chrono::seconds(10)};
  std::uint64_t accept_failures_ = 0;
  std::uint64_t refused_ = 0;
  // Handlers may outlive close() by one run of the loop; they check this before touching anything.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace phoenix::overlay
