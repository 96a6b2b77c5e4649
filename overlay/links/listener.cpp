#include "overlay/links/listener.hpp"

#include "overlay/log.hpp"

namespace phoenix::overlay {

listener::listener(asio::io_context& io, std::string node_name, admission_limits limits, accepted_fn on_accepted)
    : name_(std::move(node_name)),
      limits_(limits),
      on_accepted_(std::move(on_accepted)),
      acceptor_(io),
      backoff_timer_(io),
      backoff_(limits.accept_backoff_first, limits.accept_backoff_max),
      caps_(limits.max_handshakes, limits.max_handshakes_per_address) {}

listener::~listener() { close(); }

std::error_code listener::open(const asio::ip::tcp::endpoint& at, asio::ip::tcp::endpoint& local,
                               std::string* error) {
  std::error_code ec;
  acceptor_.open(at.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(at, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) local = acceptor_.local_endpoint(ec);
  if (ec) {
    if (error) *error = ec.message();
    std::error_code ignored;
    acceptor_.close(ignored);
    return ec;
  }
  accept_next();
  return {};
}

void listener::close() {
  *alive_ = false;
  std::error_code ignored;
  acceptor_.close(ignored);
  backoff_timer_.cancel();
}

void listener::handshake_ended(const std::string& remote) { caps_.release(address_part(remote)); }

void listener::accept_next() {
  acceptor_.async_accept([this, alive = alive_](std::error_code ec, asio::ip::tcp::socket s) {
    if (*alive && ec != asio::error::operation_aborted) on_accept(ec, std::move(s));
  });
}

void listener::on_accept(std::error_code ec, asio::ip::tcp::socket s) {
  if (ec) return on_accept_failed(ec);
  if (const auto failed = backoff_.on_success())
    logger()->info("{}: accepting connections again after {} failed accepts", name_, failed);
  admit(std::move(s));
  accept_next();
}

// Whatever the error, the next accept waits: one warning per episode, not one per attempt.
void listener::on_accept_failed(std::error_code ec) {
  ++accept_failures_;
  const auto step = backoff_.on_failure();
  if (step.episode_began)
    logger()->warn("{}: accept failed: {}; retrying after {} ms, backing off up to {} ms", name_, ec.message(),
                   step.delay.count(), limits_.accept_backoff_max.count());
  backoff_timer_.expires_after(step.delay);
  backoff_timer_.async_wait([this, alive = alive_](std::error_code tec) {
    if (!tec && *alive) accept_next();
  });
}

// Over a cap, the socket is closed here: no connection object, buffer or timer exists for it.
void listener::admit(asio::ip::tcp::socket s) {
  std::error_code ec;
  const auto remote = s.remote_endpoint(ec);
  if (ec) return;  // reset before we got to it
  const auto address = remote.address().to_string();
  const auto verdict = caps_.try_admit(address);
  if (verdict == handshake_caps::verdict::admitted)
    return on_accepted_(std::move(s), address + ":" + std::to_string(remote.port()));
  ++refused_;
  s.close(ec);
  if (const auto held_back = refusal_log_.pass(std::chrono::steady_clock::now()))
    logger()->warn("{}: connection from {} closed: {} ({} more closed since the last such line)", name_,
                   address,
                   verdict == handshake_caps::verdict::over_total
                       ? "already " + std::to_string(limits_.max_handshakes) + " handshakes in progress"
                       : "already " + std::to_string(limits_.max_handshakes_per_address) +
                             " handshakes in progress from that address",
                   *held_back);
}

}  // namespace phoenix::overlay
