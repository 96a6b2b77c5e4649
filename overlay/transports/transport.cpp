// overlay/transports/transport.cpp — the tcp and ssh transports (transport.hpp).
#include "overlay/transports/transport.hpp"

#include "overlay/transports/ssh_connection.hpp"
#include "overlay/transports/tcp_connect.hpp"

namespace phoenix::overlay {

void tcp_transport::dial(const address& target, const std::string& text, dial_handler done) {
  auto resolver = std::make_shared<asio::ip::tcp::resolver>(c_.io);
  resolver->async_resolve(
      target.host, std::to_string(target.port),
      [this, alive = alive_, text, done = std::move(done), resolver](
          std::error_code ec, asio::ip::tcp::resolver::results_type results) mutable {
        if (!*alive || ec == asio::error::operation_aborted) return;
        if (ec) return done(nullptr, {"cannot resolve: " + ec.message()});
        std::vector<asio::ip::tcp::endpoint> endpoints(results.begin(), results.end());
        // Each address gets the handshake's time, like the handshake after it (tcp_connect.hpp).
        connect_first(c_.io, std::move(endpoints), c_.params.handshake_timeout,
                      [this, alive, text, done = std::move(done)](std::optional<asio::ip::tcp::socket> s,
                                                                  const std::string& why) {
                        if (!*alive) return;
                        if (!s) return done(nullptr, {"cannot connect: " + why});
                        done(make_connection(true, text, std::move(*s)), {});
                      });
      });
}

std::shared_ptr<connection> tcp_transport::make_connection(bool outbound, std::string remote,
                                                           asio::ip::tcp::socket s) const {
  std::error_code ignored;
  s.set_option(asio::ip::tcp::no_delay(true), ignored);
  return std::make_shared<tcp_connection>(c_.owner, c_.params, outbound, std::move(remote), std::move(s));
}

void ssh_transport::dial(const address& target, const std::string& text, dial_handler done) {
  session_for(target)->open_channel(
      target.host, target.port,
      [this, alive = alive_, text, done = std::move(done)](std::shared_ptr<ssh_channel> channel,
                                                           const ssh_failure& f) {
        if (!*alive) return;
        if (!channel) return done(nullptr, {f.text, f.refused});
        done(std::make_shared<ssh_connection>(c_.owner, c_.params, text, std::move(channel)), {});
      });
}

void ssh_transport::close() {
  for (auto& [key, s] : sessions_) s->close();
}

std::shared_ptr<ssh_session> ssh_transport::session_for(const address& a) {
  auto& s = sessions_[ssh_session::session_key(a)];
  if (!s || s->has_failed()) s = std::make_shared<ssh_session>(c_.io, a, options_, node_name_);
  return s;
}

}  // namespace phoenix::overlay
