// The tcp transport's dial on 127.0.0.1: an address that never answers fails within the handshake timeout
// instead of holding the dial for the kernel's SYN retries, and the next address of the name is tried; a
// transport destroyed mid-dial leaves no handler that touches it.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <asio.hpp>
#include <chrono>
#include <optional>
#include <string>

#include "overlay/transports/tcp_connect.hpp"
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

// A listener with a backlog of 0 that never accepts: once one connection waits in its queue, Linux drops the
// SYNs of the next ones, as a firewall that drops packets does.
struct silent_listener {
  explicit silent_listener(asio::io_context& io)
      : listener(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)), filler(io) {
    REQUIRE(::listen(listener.native_handle(), 0) == 0);
    filler.connect(listener.local_endpoint());
  }
  asio::ip::tcp::endpoint endpoint() const { return listener.local_endpoint(); }
  asio::ip::tcp::acceptor listener;
  asio::ip::tcp::socket filler;
};

struct walk_result {
  bool done = false;
  std::optional<asio::ip::tcp::endpoint> connected_to;
  std::string why;
};

walk_result walk(asio::io_context& io, std::vector<asio::ip::tcp::endpoint> endpoints) {
  walk_result r;
  phoenix::overlay::connect_first(io, std::move(endpoints), 300ms,
                                  [&](std::optional<asio::ip::tcp::socket> s, const std::string& why) {
                                    r.done = true;
                                    if (s) r.connected_to = s->remote_endpoint();
                                    r.why = why;
                                  });
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!r.done && std::chrono::steady_clock::now() < until) io.run_for(50ms);
  return r;
}

}  // namespace tcp_dial

TEST_CASE("tcp connect: a name whose first address never answers connects to its second, each address given its own time") {
  asio::io_context io;
  tcp_dial::silent_listener silent(io);
  asio::ip::tcp::acceptor open(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const auto r = tcp_dial::walk(io, {silent.endpoint(), open.local_endpoint()});
  REQUIRE(r.done);
  REQUIRE(r.connected_to);
  CHECK(*r.connected_to == open.local_endpoint());
}

TEST_CASE("tcp connect: when no address connects, the failure names each address and why") {
  asio::io_context io;
  tcp_dial::silent_listener silent(io);
  // A port nobody listens on: bound, never listening, so the connect is refused.
  asio::ip::tcp::socket closed(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const auto refused = closed.local_endpoint();
  const auto r = tcp_dial::walk(io, {refused, silent.endpoint()});
  REQUIRE(r.done);
  CHECK_FALSE(r.connected_to);
  CHECK(r.why.find("127.0.0.1:" + std::to_string(refused.port()) + ": Connection refused") != std::string::npos);
  CHECK(r.why.find("127.0.0.1:" + std::to_string(silent.endpoint().port()) + ": no answer within 300 ms") !=
        std::string::npos);
}

TEST_CASE("tcp dial: an address that never answers the connect fails within the handshake timeout") {
  asio::io_context io;
  tcp_dial::silent_listener silent(io);
  const auto port = silent.endpoint().port();

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

TEST_CASE("tcp dial: a transport destroyed while its dial resolves or connects calls nothing and touches nothing") {
  asio::io_context io;
  tcp_dial::silent_listener silent(io);
  tcp_dial::no_owner owner;
  phoenix::overlay::connection_params params;
  params.handshake_timeout = 300ms;
  // Destroyed at two moments: before the name resolves, and while the connect waits for an answer that never
  // comes.
  for (const auto run_before : {0ms, 100ms}) {
    const std::string text = "127.0.0.1:" + std::to_string(silent.endpoint().port());
    std::string error;
    const auto target = phoenix::overlay::parse_address("tcp://" + text, &error);
    REQUIRE(target);
    auto tcp = std::make_unique<phoenix::overlay::tcp_transport>(phoenix::overlay::transport_context{io, owner, params});
    int called = 0;
    tcp->dial(*target, text, [&](std::shared_ptr<phoenix::overlay::connection>, const phoenix::overlay::dial_failure&) {
      ++called;
    });
    if (run_before > 0ms) io.run_for(run_before);
    tcp.reset();
    // Longer than the handshake timeout, so every handler of the dial has run.
    io.run_for(800ms);
    io.restart();
    CHECK(called == 0);
  }
}
