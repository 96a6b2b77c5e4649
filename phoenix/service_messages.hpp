// service_messages.hpp — how phoenix's own services on top of the runtime (the Volpex layer) send and receive.
//
// Services talk with reserved tags, at or below first_service_tag: ph_send refuses them, and recv(any_tag) and
// ph_recv never return them, so an application on the same node never sees a service's messages, nor a service
// an application's. Otherwise they are ordinary messages: to a virtual node (queued at its owner, and moved
// with it when it migrates) or to a resource name.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <phoenix/node.hpp>
#include <system_error>

namespace phoenix {

inline constexpr std::int32_t first_service_tag = -4;  // -2 and -3 are the migration and control protocols'
// The lowest tag a service uses (the Volpex layer: -4 to -7). A message with any other negative tag can never be
// received by anyone: a node drops it on arrival (and counts it) instead of holding it for ever.
inline constexpr std::int32_t last_service_tag = -7;
// An application's tag, or a service's: what the inbox may hold.
constexpr bool receivable_tag(std::int32_t tag) {
  return tag >= 0 || (tag >= last_service_tag && tag <= first_service_tag);
}

struct service_messages {
  static std::error_code send(Node& node, vp_t dest, std::int32_t tag, Bytes&& body);
  // Like Node::recv_for, for a service tag (migration steps run meanwhile, as in recv).
  static std::optional<Message> recv_for(Node& node, std::int32_t tag, std::chrono::milliseconds timeout);
  // Whether the node has a route to the resource name `dest` now (a node that died loses its routes as soon as
  // its neighbours' links to it break). Takes the node's progress token for a moment.
  static bool reachable(Node& node, vp_t dest);
  // For a process that exits without finalizing (exit() after an error): stops the node's background thread,
  // so that none of its threads runs while the process destroys its static objects (loggers among them). The
  // node does nothing more, and its neighbours see its links break as after a crash.
  static void halt(Node& node);
};

}  // namespace phoenix
