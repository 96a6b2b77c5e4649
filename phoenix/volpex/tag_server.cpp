#include "phoenix/volpex/tag_server.hpp"

#include <thread>

#include "phoenix/volpex/log.hpp"
#include "phoenix/volpex/dataspace_protocol.hpp"

namespace phoenix::volpex {

namespace {

dataspace::options with_space(dataspace::options o, const Node& node) {
  o.space_size = node.space_size();
  return o;
}

}  // namespace

tag_server::tag_server(Node& node, dataspace::options o) : node_(node), ds_(with_space(std::move(o), node)) {}

std::error_code tag_server::install() {
  return node_.set_state_handlers(
      [this](Interval s) -> std::optional<Bytes> {
        std::lock_guard lock(mu_);
        return ds_.pack(s.lo, s.hi);
      },
      [this](Interval s, std::span<const std::byte> packed) {
        std::lock_guard lock(mu_);
        if (ds_.unpack(packed)) return true;
        logger()->error("dataspace state of {} is malformed: not taken", describe({s}));
        return false;
      });
}

std::size_t tag_server::serve_for(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::size_t handled = 0;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    auto m = service_messages::recv_for(node_, request_tag, handled ? std::chrono::milliseconds(0) : left);
    if (!m) {
      if (handled || left.count() <= 0) return handled;
      continue;
    }
    handle(*m);
    ++handled;
  }
}

void tag_server::handle(const Message& m) {
  auto r = decode_request(std::span(m.data(), m.size()));
  if (!r) {
    logger()->warn("malformed dataspace request from {} ({} bytes): dropped", m.source(), m.size());
    return;
  }
  replies_.clear();
  {
    std::lock_guard lock(mu_);
    ds_.handle(std::move(*r), replies_);
  }
  for (const auto& rep : replies_) send_reply(rep);
}

// An answer may not be dropped: its replica would wait for ever. Back-pressure (the bound on waiting messages)
// is waited out, while the node's I/O turns.
void tag_server::send_reply(const reply& rep) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  Bytes body = encode(rep);
  for (;;) {
    const auto ec = service_messages::send(node_, rep.to, reply_tag, std::move(body));
    if (!ec) return;
    if (ec != make_error_code(PH_EAGAIN) || std::chrono::steady_clock::now() > give_up) {
      logger()->error("answer to {} for ({}, {}) not sent: {}", rep.to, rep.id.process, rep.id.request,
                      ec.message());
      return;
    }
    node_.poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

dataspace::stats tag_server::statistics() const {
  std::lock_guard lock(mu_);
  return ds_.statistics();
}

}  // namespace phoenix::volpex
