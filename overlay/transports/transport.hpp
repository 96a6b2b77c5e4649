// overlay/transports/transport.hpp — how a link reaches a peer: one transport per address scheme (tcp://,
// ssh://).
//
// A transport turns an address into a connection that has not begun its handshake (over a TCP socket, over a
// channel through an SSH gateway), or into a failure, which the overlay logs and retries. Everything above the
// stream (handshake, frames and their tags, the link session) is the same for every transport; the link
// conformance suite (tests/overlay/test_link_conformance.cpp) runs it over each, and over the in-process pair
// of overlay::connect_local. The overlay knows transports only through this interface, as nng keeps its
// transports apart from its protocols: a new scheme is one more transport, not one more branch.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include <asio.hpp>

#include "overlay/transports/address.hpp"
#include "overlay/links/connection.hpp"
#include "overlay/transports/ssh_session.hpp"

namespace phoenix::overlay {

struct dial_failure {
  std::string text;
  bool refused = false;  // the far end refused us (authentication, host key): a configuration problem, back off
};

class transport {
 public:
  // Either a connection, not started, or why there is none. Runs on the overlay's I/O context, never inline.
  using dial_handler = std::function<void(std::shared_ptr<connection>, const dial_failure&)>;

  virtual ~transport() { *alive_ = false; }
  // Opens a stream to `target` (`text` as the user wrote it, to name the connection in logs).
  virtual void dial(const address& target, const std::string& text, dial_handler done) = 0;
  // The overlay shuts down: what the transport keeps open beside its connections (SSH sessions) closes.
  virtual void close() {}

 protected:
  // Cleared when the transport is destroyed: a dial's handlers, which may run later on the I/O context, check it
  // before they touch the transport, and then drop the dial without calling `done` (its owner is gone too).
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// What a transport needs to make connections that report to the overlay. Outlives the transport.
struct transport_context {
  asio::io_context& io;
  connection_owner& owner;
  const connection_params& params;
};

// tcp://host:port: resolve, connect, TCP_NODELAY. Also makes the connections of the overlay's listener.
class tcp_transport final : public transport {
 public:
  explicit tcp_transport(transport_context c) : c_(c) {}
  void dial(const address& target, const std::string& text, dial_handler done) override;
  std::shared_ptr<connection> make_connection(bool outbound, std::string remote, asio::ip::tcp::socket s) const;

 private:
  transport_context c_;
};

// ssh://[user@]gateway[:port]/host:port: a direct-tcpip channel of the SSH session to the gateway, shared by
// every link through the same gateway and user. A failed session is replaced at the next dial.
class ssh_transport final : public transport {
 public:
  ssh_transport(transport_context c, ssh_options options, std::string node_name)
      : c_(c), options_(std::move(options)), node_name_(std::move(node_name)) {}
  void dial(const address& target, const std::string& text, dial_handler done) override;
  void close() override;

 private:
  std::shared_ptr<ssh_session> session_for(const address& a);

  transport_context c_;
  ssh_options options_;
  std::string node_name_;
  std::map<std::string, std::shared_ptr<ssh_session>> sessions_;  // by user@gateway:port
};

}  // namespace phoenix::overlay
