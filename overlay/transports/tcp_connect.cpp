// overlay/transports/tcp_connect.cpp — connect_first (tcp_connect.hpp).
#include "overlay/transports/tcp_connect.hpp"

#include <memory>
#include <sstream>

namespace phoenix::overlay {

namespace {

// One address at a time; `attempt` tells a timer or connect of an earlier address, whose handler can still be
// queued after the next address began, from the current one's.
class connect_walk : public std::enable_shared_from_this<connect_walk> {
 public:
  connect_walk(asio::io_context& io, std::vector<asio::ip::tcp::endpoint> endpoints,
               std::chrono::milliseconds per_address, connect_handler done)
      : endpoints_(std::move(endpoints)), per_address_(per_address), done_(std::move(done)), socket_(io),
        timer_(io) {
    if (endpoints_.size() > max_connect_addresses) endpoints_.resize(max_connect_addresses);
  }

  void next() {
    if (next_ == endpoints_.size()) {
      auto done = std::move(done_);
      return asio::post(socket_.get_executor(), [done = std::move(done), why = why_.empty() ? "no address" : why_] {
        done(std::nullopt, why);
      });
    }
    const auto endpoint = endpoints_[next_++];
    const auto attempt = ++attempt_;
    std::error_code ignored;
    socket_.close(ignored);
    timer_.expires_after(per_address_);
    timer_.async_wait([self = shared_from_this(), attempt](std::error_code ec) {
      if (ec || attempt != self->attempt_) return;
      self->timed_out_ = true;
      std::error_code closed;
      self->socket_.close(closed);
    });
    timed_out_ = false;
    socket_.async_connect(endpoint, [self = shared_from_this(), attempt, endpoint](std::error_code ec) {
      if (attempt != self->attempt_) return;
      self->timer_.cancel();
      if (!ec && !self->timed_out_) return self->done_(std::move(self->socket_), "");
      self->note(endpoint, self->timed_out_ ? "no answer within " + std::to_string(self->per_address_.count()) + " ms"
                                            : ec.message());
      self->next();
    });
  }

 private:
  void note(const asio::ip::tcp::endpoint& endpoint, const std::string& why) {
    if (endpoints_.size() == 1) {
      why_ = why;
      return;
    }
    if (!why_.empty()) why_ += "; ";
    std::ostringstream where;
    where << endpoint;
    why_ += where.str() + ": " + why;
  }

  std::vector<asio::ip::tcp::endpoint> endpoints_;
  std::chrono::milliseconds per_address_;
  connect_handler done_;
  asio::ip::tcp::socket socket_;
  asio::steady_timer timer_;
  std::size_t next_ = 0;
  std::uint64_t attempt_ = 0;
  bool timed_out_ = false;
  std::string why_;
};

}  // namespace

void connect_first(asio::io_context& io, std::vector<asio::ip::tcp::endpoint> endpoints,
                   std::chrono::milliseconds per_address, connect_handler done) {
  std::make_shared<connect_walk>(io, std::move(endpoints), per_address, std::move(done))->next();
}

}  // namespace phoenix::overlay
