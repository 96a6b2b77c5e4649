#include "phoenix/volpex/client.hpp"

#include <signal.h>

#include <charconv>
#include <thread>

#include "phoenix/volpex/error_out.hpp"
#include "phoenix/volpex/log.hpp"
#include "phoenix/volpex/dataspace_protocol.hpp"

namespace phoenix::volpex {

client::client(Node& node, process_id process) : node_(node), process_(process) {}

std::optional<reply> client::call(op kind, std::string_view tag, std::span<const std::byte> data,
                                  std::chrono::milliseconds timeout, std::error_code* ec) {
  request r;
  r.kind = kind;
  r.id = {process_, kind == op::decide ? (std::uint64_t{1} << 63) | ++decides_ : next_++};
  r.tag = std::string(tag);
  if (kind == op::put || kind == op::decide) r.data = make_object(Bytes(data.begin(), data.end()));
  r.reply_to = node_.resource_name();
  const auto dest = vnode_of(tag, node_.space_size());
  ++calls_[static_cast<int>(kind)];
  maybe_crash(kind, false);
  if (auto e = service_messages::send(node_, dest, request_tag, encode(r))) {
    set_error(ec, e);
    return std::nullopt;
  }
  maybe_crash(kind, true);
  // Only this call's answer counts: anything else on the reply tag is a leftover of a call that timed out.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      set_error(ec, make_error_code(PH_ETIMEDOUT));
      return std::nullopt;
    }
    auto m = service_messages::recv_for(node_, reply_tag, left);
    if (!m) continue;
    auto rep = decode_reply(std::span(m->data(), m->size()));
    if (!rep) {
      logger()->warn("malformed dataspace answer from {} ({} bytes): dropped", m->source(), m->size());
      continue;
    }
    if (rep->id != r.id || rep->kind != kind) {
      logger()->debug("stale dataspace answer for ({}, {}): dropped", rep->id.process, rep->id.request);
      continue;
    }
    set_error(ec, {});
    return rep;
  }
}

void client::maybe_crash(op kind, bool after_send) const {
  if (crash_.nth == 0 || crash_.kind != kind || crash_.after_send != after_send) return;
  if (calls_[static_cast<int>(kind)] != crash_.nth) return;
  if (after_send) {
    // The request must be on its way: let the node's I/O write it out first.
    for (int i = 0; i < 100; ++i) {
      node_.poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  logger()->warn("crash point {}-{}:{} reached: killing this process", after_send ? "after" : "before",
                 to_string(kind), crash_.nth);
  ::raise(SIGKILL);
}

std::optional<client::crash_point> client::parse_crash_point(std::string_view text) {
  crash_point p;
  const auto dash = text.find('-'), colon = text.find(':');
  if (dash == std::string_view::npos || colon == std::string_view::npos || colon < dash) return std::nullopt;
  const auto when = text.substr(0, dash), kind = text.substr(dash + 1, colon - dash - 1);
  const auto nth = text.substr(colon + 1);
  if (when == "before") {
    p.after_send = false;
  } else if (when == "after") {
    p.after_send = true;
  } else {
    return std::nullopt;
  }
  if (kind == "put") {
    p.kind = op::put;
  } else if (kind == "get") {
    p.kind = op::get;
  } else if (kind == "read") {
    p.kind = op::read;
  } else {
    return std::nullopt;
  }
  const auto [end, ec] = std::from_chars(nth.data(), nth.data() + nth.size(), p.nth);
  if (ec != std::errc() || end != nth.data() + nth.size() || p.nth == 0) return std::nullopt;
  return p;
}

std::error_code client::put(std::string_view tag, std::span<const std::byte> data,
                            std::chrono::milliseconds timeout) {
  std::error_code ec;
  const auto rep = call(op::put, tag, data, timeout, &ec);
  if (rep) ++(rep->result == outcome::stored ? led_ : followed_);
  return ec;
}

std::optional<Bytes> client::fetch(op kind, std::string_view tag, std::error_code* ec,
                                   std::chrono::milliseconds timeout) {
  auto rep = call(kind, tag, {}, timeout, ec);
  if (!rep) return std::nullopt;
  if (rep->result == outcome::lost || !rep->data) {
    set_error(ec, make_error_code(PH_ELOST));
    return std::nullopt;
  }
  ++(rep->result == outcome::delivered ? led_ : followed_);
  return Bytes(rep->data->begin(), rep->data->end());
}

std::optional<Bytes> client::decide(std::string_view tag, std::span<const std::byte> proposal,
                                    std::error_code* ec, std::chrono::milliseconds timeout) {
  auto rep = call(op::decide, tag, proposal, timeout, ec);
  if (!rep) return std::nullopt;
  if (rep->result == outcome::absent || !rep->data) return Bytes();
  return Bytes(rep->data->begin(), rep->data->end());
}

std::optional<Bytes> client::get(std::string_view tag, std::error_code* ec, std::chrono::milliseconds timeout) {
  return fetch(op::get, tag, ec, timeout);
}

std::optional<Bytes> client::read(std::string_view tag, std::error_code* ec,
                                  std::chrono::milliseconds timeout) {
  return fetch(op::read, tag, ec, timeout);
}

}  // namespace phoenix::volpex
