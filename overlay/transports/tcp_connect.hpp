// overlay/transports/tcp_connect.hpp — a TCP connection to the first of a name's addresses that answers, each
// address given its own time.
//
// An address that drops SYNs (a firewall, a host that is down, a listener whose queue is full) would hold a
// connect for the kernel's SYN retries, about two minutes. asio::async_connect walks the addresses of a name,
// but a timer that closes its socket ends the whole walk: a name whose first address drops SYNs and whose second
// answers would never connect. Here each address gets `per_address`, one after another, at most
// max_connect_addresses of them.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <asio.hpp>

namespace phoenix::overlay {

inline constexpr std::size_t max_connect_addresses = 8;

// The connected socket, or why none connected: for one address its error, for several each address's.
using connect_handler = std::function<void(std::optional<asio::ip::tcp::socket>, const std::string& why)>;

// Runs `done` on `io`, never inline, once.
void connect_first(asio::io_context& io, std::vector<asio::ip::tcp::endpoint> endpoints,
                   std::chrono::milliseconds per_address, connect_handler done);

}  // namespace phoenix::overlay
