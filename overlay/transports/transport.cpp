// overlay/transports/transport.cpp — the tcp and ssh transports (transport.hpp).
#include "overlay/transports/transport.hpp"

#include "overlay/transports/ssh_connection.hpp"

namespace phoenix::overlay {

void tcp_transport::dial(const address& target, const std::string& text, dial_handler done) {
  auto resolver = std::make_shared<asio::ip::tcp::resolver>(c_.io);
  resolver->async_resolve(
      target.host, std::to_string(target.port),
      [this, text, done = std::move(done), resolver](std::error_code ec,
                                                      asio::ip::tcp::resolver::results_type results) mutable {
        if (ec == asio::error::operation_aborted) return;
        if (ec) return done(nullptr, {"cannot resolve: " + ec.message()});
        auto socket = std::make_shared<asio::ip::tcp::socket>(c_.io);
        // An address that drops SYNs (a firewall, a host that is down, a listener whose queue is full) would
        // hold the connect for the kernel's SYN retries, about two minutes, and the redials with it: it gets
        // the handshake's time, like the handshake after it.
        auto timer = std::make_shared<asio::steady_timer>(c_.io);
        auto timed_out = std::make_shared<bool>(false);
        timer->expires_after(c_.params.handshake_timeout);
        timer->async_wait([socket, timed_out](std::error_code tec) {
          if (tec) return;
          *timed_out = true;
          std::error_code ignored;
          socket->close(ignored);
        });
        asio::async_connect(*socket, results,
                            [this, text, done = std::move(done), socket, timer, timed_out](
                                std::error_code cec, const asio::ip::tcp::endpoint&) {
                              timer->cancel();
                              if (*timed_out)
                                return done(nullptr, {"cannot connect: no answer within " +
                                                      std::to_string(c_.params.handshake_timeout.count()) +
                                                      " ms"});
                              if (cec == asio::error::operation_aborted) return;
                              if (cec) return done(nullptr, {"cannot connect: " + cec.message()});
                              done(make_connection(true, text, std::move(*socket)), {});
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
      [this, text, done = std::move(done)](std::shared_ptr<ssh_channel> channel, const ssh_failure& f) {
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
