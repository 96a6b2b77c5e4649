// overlay_dialing.cpp — the overlay's endpoints: the port it listens on, and the peers it dials and redials, over
// TCP or through SSH gateways (overlay.hpp).
#include "overlay/overlay.hpp"

#include <algorithm>

#include "overlay/log.hpp"
#include "overlay/ssh_connection.hpp"

namespace phoenix::overlay {

namespace {
using clock = std::chrono::steady_clock;
}  // namespace

std::error_code overlay::listen(const std::string& text, std::string& bound, std::string* error) {
  const auto a = parse_address(text, error);
  if (!a) return std::make_error_code(std::errc::invalid_argument);
  if (refuses_address(*a, error)) return std::make_error_code(std::errc::permission_denied);
  if (a->scheme != address::scheme_t::tcp) {
    if (error) *error = "a node listens on tcp:// addresses only";
    return std::make_error_code(std::errc::address_family_not_supported);
  }
  std::error_code ec;
  asio::ip::tcp::resolver resolver(io_);
  const auto results = resolver.resolve(a->host, std::to_string(a->port), ec);
  if (ec || results.empty()) {
    if (error) *error = "cannot resolve " + a->host + ": " + ec.message();
    return ec ? ec : std::make_error_code(std::errc::host_unreachable);
  }
  auto l = std::make_unique<listener>(io_, config_.name, config_.admission,
                                      [this](asio::ip::tcp::socket s, std::string remote) {
                                        if (shutting_down_) return listener_->handshake_ended(remote);
                                        start_connection(make_connection(false, std::move(remote), std::move(s)));
                                      });
  asio::ip::tcp::endpoint local;
  std::string why;
  if (ec = l->open(results.begin()->endpoint(), local, &why); ec) {
    if (error) *error = "cannot listen on " + text + ": " + why;
    return ec;
  }
  address bound_addr = *a;
  bound_addr.host = local.address().to_string();
  bound_addr.port = local.port();
  bound = bound_addr.to_string();
  listener_ = std::move(l);
  logger()->info("{}: listening on {}", config_.name, bound);
  return {};
}

std::error_code overlay::add_port(const std::string& text, std::string* error) {
  const auto a = parse_address(text, error);
  if (!a) return std::make_error_code(std::errc::invalid_argument);
  if (refuses_address(*a, error)) return std::make_error_code(std::errc::permission_denied);
  auto d = std::make_unique<dialer>();
  d->target = *a;
  d->text = text;
  d->timer = std::make_unique<asio::steady_timer>(io_);
  dialers_.push_back(std::move(d));
  dial(*dialers_.back());
  return {};
}

bool overlay::refuses_address(const address& a, std::string* error) const {
  if (!config_.loopback_only || is_loopback(a)) return false;
  if (error) {
    *error = a.to_string() +
             " is not a loopback address, and without a cluster key a node links on loopback only (the built-in "
             "key is public). Make a key with: head -c 32 /dev/urandom | base64 > cluster.key && chmod 600 "
             "cluster.key, and give every node the same file as cluster_key_file (or PHOENIX_CLUSTER_KEY_FILE); "
             "phsh writes one for the nodes it starts";
  }
  return true;
}

std::shared_ptr<connection> overlay::make_connection(bool outbound, std::string remote, asio::ip::tcp::socket s) {
  std::error_code ignored;
  s.set_option(asio::ip::tcp::no_delay(true), ignored);
  return std::make_shared<tcp_connection>(*this, conn_params_, outbound, std::move(remote), std::move(s));
}

void overlay::dial(dialer& d) {
  if (shutting_down_) return;
  // A neighbour already reached by another connection needs no second one; look again later.
  if (d.peer) {
    const auto it = neighbours_.find(d.peer);
    if (it != neighbours_.end() && it->second->conn && it->second->conn->is_up()) {
      schedule_redial(d);
      return;
    }
  }
  if (d.target.scheme == address::scheme_t::ssh) return dial_ssh(d);
  auto resolver = std::make_shared<asio::ip::tcp::resolver>(io_);
  resolver->async_resolve(
      d.target.host, std::to_string(d.target.port),
      [this, &d, resolver](std::error_code ec, asio::ip::tcp::resolver::results_type results) {
        if (shutting_down_ || ec == asio::error::operation_aborted) return;
        if (ec) {
          logger()->log(d.failures++ ? spdlog::level::debug : spdlog::level::info, "{}: cannot resolve {}: {}",
                        config_.name, d.text, ec.message());
          schedule_redial(d);
          return;
        }
        auto socket = std::make_shared<asio::ip::tcp::socket>(io_);
        asio::async_connect(*socket, results, [this, &d, socket](std::error_code cec, const asio::ip::tcp::endpoint&) {
          if (shutting_down_ || cec == asio::error::operation_aborted) return;
          if (cec) {
            // Unreachable endpoints are normal (NAT, firewalls, a peer not started yet): retry quietly.
            logger()->log(d.failures++ ? spdlog::level::debug : spdlog::level::info, "{}: cannot connect to {}: {}",
                          config_.name, d.text, cec.message());
            schedule_redial(d);
            return;
          }
          d.conn = make_connection(true, d.text, std::move(*socket));
          start_connection(d.conn);
        });
      });
}

// Through a gateway: a direct-tcpip channel of the SSH session to it, shared with every other link through the
// same gateway and user. A failed session is replaced at the next dial.
void overlay::dial_ssh(dialer& d) {
  ssh_session_for(d.target)->open_channel(
      d.target.host, d.target.port, [this, &d](std::shared_ptr<ssh_channel> channel, const ssh_failure& f) {
        if (shutting_down_) {
          if (channel) channel->close();
          return;
        }
        if (!channel) {
          log_link_failure(d.text, f.refused, d.failures++, f.text, d.refusal_log);
          schedule_redial(d, f.refused ? 10 : 1);
          return;
        }
        d.conn = std::make_shared<ssh_connection>(*this, conn_params_, d.text, std::move(channel));
        start_connection(d.conn);
      });
}

std::shared_ptr<ssh_session> overlay::ssh_session_for(const address& a) {
  auto& s = ssh_sessions_[ssh_session::session_key(a)];
  if (!s || s->has_failed()) s = std::make_shared<ssh_session>(io_, a, config_.ssh, config_.name);
  return s;
}

void overlay::schedule_redial(dialer& d, unsigned intervals) {
  if (shutting_down_) return;
  d.conn.reset();
  d.timer->expires_after(config_.retry_interval * intervals);
  d.timer->async_wait([this, &d](std::error_code ec) {
    if (!ec) dial(d);
  });
}

overlay::dialer* overlay::dialer_of(const connection& c) {
  for (auto& d : dialers_)
    if (d->conn.get() == &c) return d.get();
  return nullptr;
}

}  // namespace phoenix::overlay
