// ssh_connection.hpp — a link whose byte stream is a direct-tcpip channel of an SSH session (ssh_session.hpp):
// the same framing, handshake and reliable link protocol as a TCP link, end to end with the node at HOST:PORT
// behind the gateway. Runs on the node's I/O context, like every connection.
#pragma once

#include <memory>
#include <string>

#include "overlay/links/connection.hpp"
#include "overlay/transports/ssh_session.hpp"

namespace phoenix::overlay {

class ssh_connection final : public connection {
 public:
  ssh_connection(connection_owner& owner, const connection_params& params, std::string remote,
                 std::shared_ptr<ssh_channel> channel)
      : connection(owner, params, true, std::move(remote)), channel_(std::move(channel)) {}

 protected:
  void stream_read(std::span<std::byte> into, read_handler h) override {
    channel_->async_read(into, std::move(h));
  }
  void stream_write(std::span<const asio::const_buffer> buffers, read_handler h) override {
    channel_->async_write(buffers, std::move(h));
  }
  void stream_close() override { channel_->close(); }
  asio::any_io_executor executor() override { return channel_->executor(); }

 private:
  std::shared_ptr<ssh_channel> channel_;
};

}  // namespace phoenix::overlay
