// overlay_dialing.cpp — the overlay's endpoints: the port it listens on, and the peers it dials and redials
// through the transport of each address's scheme (overlay.hpp, transport.hpp).
#include "overlay/overlay.hpp"

#include <algorithm>

#include "overlay/log.hpp"

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
                                        start_connection(tcp_.make_connection(false, std::move(remote), std::move(s)));
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
  transport_for(d.target.scheme)
      .dial(d.target, d.text, [this, &d](std::shared_ptr<connection> c, const dial_failure& f) {
        if (shutting_down_) {
          if (c) c->stop();
          return;
        }
        if (!c) {
          // Unreachable endpoints are normal (NAT, firewalls, a peer not started yet): retry, quietly after the
          // first failure. A refusal is a configuration problem that retrying soon will not fix: back off.
          log_link_failure(d.text, f.refused, d.failures++, f.text, d.refusal_log);
          schedule_redial(d, f.refused ? 10 : 1);
          return;
        }
        d.conn = std::move(c);
        start_connection(d.conn);
      });
}

transport& overlay::transport_for(address::scheme_t scheme) {
  if (scheme == address::scheme_t::ssh) return ssh_;
  return tcp_;
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
