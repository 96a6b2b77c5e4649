#include "overlay/transports/address.hpp"

#include <charconv>

#include <asio/ip/address.hpp>

namespace phoenix::overlay {

namespace {

bool set_error(std::string* error, std::string text) {
  if (error) *error = std::move(text);
  return false;
}

bool parse_port(std::string_view text, std::uint16_t& port) {
  unsigned value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value > 65535 || text.empty()) return false;
  port = static_cast<std::uint16_t>(value);
  return true;
}

// HOST:PORT with HOST possibly a bracketed IPv6 literal.
bool parse_host_port(std::string_view text, std::string& host, std::uint16_t& port, std::string* error) {
  std::string_view h;
  std::string_view p;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return set_error(error, "expected [IPV6]:PORT in '" + std::string(text) + "'");
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return set_error(error, "missing :PORT in '" + std::string(text) + "'");
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
  }
  if (h.empty()) return set_error(error, "missing host in '" + std::string(text) + "'");
  if (!parse_port(p, port)) return set_error(error, "bad port '" + std::string(p) + "'");
  host = std::string(h);
  return true;
}

}  // namespace

std::string address::to_string() const {
  const std::string target = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  if (scheme == scheme_t::tcp) return "tcp://" + target;
  std::string s = "ssh://";
  if (!ssh_user.empty()) s += ssh_user + "@";
  s += ssh_gateway;
  if (ssh_port != 22) s += ":" + std::to_string(ssh_port);
  return s + "/" + target;
}

std::optional<address> parse_address(std::string_view text, std::string* error) {
  address a;
  constexpr std::string_view tcp = "tcp://";
  constexpr std::string_view ssh = "ssh://";
  if (text.starts_with(tcp)) {
    if (!parse_host_port(text.substr(tcp.size()), a.host, a.port, error)) return std::nullopt;
    return a;
  }
  if (text.starts_with(ssh)) {
    a.scheme = address::scheme_t::ssh;
    auto rest = text.substr(ssh.size());
    const auto slash = rest.find('/');
    if (slash == std::string_view::npos) {
      set_error(error, "expected ssh://[USER@]GATEWAY[:SSHPORT]/HOST:PORT, got '" + std::string(text) + "'");
      return std::nullopt;
    }
    auto gw = rest.substr(0, slash);
    if (const auto at = gw.find('@'); at != std::string_view::npos) {
      a.ssh_user = std::string(gw.substr(0, at));
      gw = gw.substr(at + 1);
    }
    if (const auto colon = gw.rfind(':'); colon != std::string_view::npos && gw.find(']') == std::string_view::npos) {
      if (!parse_port(gw.substr(colon + 1), a.ssh_port)) {
        set_error(error, "bad SSH port in '" + std::string(text) + "'");
        return std::nullopt;
      }
      gw = gw.substr(0, colon);
    }
    if (gw.empty()) {
      set_error(error, "missing SSH gateway in '" + std::string(text) + "'");
      return std::nullopt;
    }
    a.ssh_gateway = std::string(gw);
    if (!parse_host_port(rest.substr(slash + 1), a.host, a.port, error)) return std::nullopt;
    return a;
  }
  set_error(error, "unknown address scheme in '" + std::string(text) + "' (expected tcp:// or ssh://)");
  return std::nullopt;
}

bool is_loopback(const address& a) {
  if (a.scheme != address::scheme_t::tcp) return false;
  if (a.host == "localhost") return true;
  std::error_code ec;
  const auto ip = asio::ip::make_address(a.host, ec);
  return !ec && ip.is_loopback();
}

}  // namespace phoenix::overlay
