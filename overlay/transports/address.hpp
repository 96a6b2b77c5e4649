// address.hpp — the endpoint names ph_initialize and ph_add_port accept.
//
//   tcp://HOST:PORT                              a TCP endpoint; HOST may be a name, an IPv4 or [IPv6] address
//   ssh://[USER@]GATEWAY[:SSHPORT]/HOST:PORT     HOST:PORT as the SSH server GATEWAY sees it (a tunnel)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace phoenix::overlay {

struct address {
  enum class scheme_t { tcp, ssh } scheme = scheme_t::tcp;
  std::string host;        // the target host (as the gateway sees it, for ssh)
  std::uint16_t port = 0;  // the target port
  std::string ssh_user;    // ssh only
  std::string ssh_gateway;
  std::uint16_t ssh_port = 22;

  std::string to_string() const;
};

// nullopt with *error set when the text is not a valid address.
std::optional<address> parse_address(std::string_view text, std::string* error = nullptr);

// A tcp:// address whose host is "localhost" or a loopback literal (127.0.0.0/8, ::1). Other names are not:
// what they resolve to is not known here. ssh:// addresses never are (the gateway is another machine).
bool is_loopback(const address& a);

}  // namespace phoenix::overlay
