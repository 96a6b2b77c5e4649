// The tcp transport's dial on 127.0.0.1: an address that never answers fails within the handshake timeout
// instead of holding the dial for the kernel's SYN retries.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <asio.hpp>
#include <chrono>
#include <optional>
#include <string>

#include "overlay/transports/transport.hpp"

using namespace std::chrono_literals;

namespace tcp_dial {

// Nothing reaches it in these tests: a failed dial makes no connection.
struct no_owner final : phoenix::overlay::connection_owner {
  phoenix::overlay::link_resume resume_for(phoenix::overlay::node_id) override { return {}; }
  void on_connection_up(const std::shared_ptr<phoenix::overlay::connection>&) override {}
  void on_connection_down(const std::shared_ptr<phoenix::overlay::connection>&, const std::string&) override {}
  void on_data(phoenix::overlay::connection&, const phoenix::overlay::data_head&, phoenix::Bytes) override {}
  void on_freed(phoenix::overlay::connection&, std::uint64_t) override {}
  void on_control(phoenix::overlay::connection&, phoenix::overlay::frame_type, std::span<const std::byte>) override {}
};

}  // namespace tcp_dial

TEST_CASE("tcp dial: an address that never answers the connect fails within the handshake timeout") {
  // A listener with a backlog of 0 that never accepts: once one connection waits in its queue, Linux drops the
  // SYNs of the next ones, as a firewall that drops packets does.
  asio::io_context io;
  asio::ip::tcp::acceptor listener(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  REQUIRE(::listen(listener.native_handle(), 0) == 0);
  const auto port = listener.local_endpoint().port();
  asio::ip::tcp::socket filler(io);
  filler.connect(listener.local_endpoint());

  tcp_dial::no_owner owner;
  phoenix::overlay::connection_params params;
  params.handshake_timeout = 300ms;
  phoenix::overlay::tcp_transport tcp({io, owner, params});
  std::string error;
  const auto target = phoenix::overlay::parse_address("tcp://127.0.0.1:" + std::to_string(port), &error);
  REQUIRE(target);
  std::optional<std::string> failed;
  bool connected = false;
  tcp.dial(*target, "tcp://127.0.0.1:" + std::to_string(port),
           [&](std::shared_ptr<phoenix::overlay::connection> c, const phoenix::overlay::dial_failure& f) {
             if (c) connected = true;
             else failed = f.text;
           });
  // Well within the first SYN retransmissions (1 s, 3 s, 7 s ...), which would answer nothing either.
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!failed && !connected && std::chrono::steady_clock::now() < until) io.run_for(50ms);
  CHECK_FALSE(connected);
  REQUIRE(failed);
  CHECK(failed->find("no answer within 300 ms") != std::string::npos);
}
