// phoenix/node.hpp — the C++ face of the phoenix runtime.
//
// A phoenix::Node is one physical node of the Phoenix model (paper, section 3): it has a resource name, joins
// an overlay of other nodes through ph_add_port-style links, assumes intervals of the virtual node space [0, L)
// and sends and receives messages addressed to virtual nodes. Several Nodes may live in one process; each owns
// its own endpoint, resource name and I/O thread.
//
// Threads: every member function may be called from any thread, except that initialize() and finalize() must
// not run concurrently with other calls on the same Node (as with MPI_Init/MPI_Finalize). recv(), recv_for()
// block the calling thread;
// while it waits, that thread drives the node's I/O itself (spins briefly, then blocks in the event loop), so a
// message is handed to the waiting thread without a thread switch. All other calls return without waiting on
// the network. Errors are std::error_code values in phoenix::error_category(); their values are the PH_E* codes
// of phoenix/phoenix.h, so the C and C++ faces agree.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <phoenix/bytes.hpp>
#include <phoenix/interval.hpp>
#include <phoenix/phoenix.h>

namespace phoenix {

inline constexpr int any_tag = PH_ANY_TAG;

PH_API const std::error_category& error_category();
PH_API std::error_code make_error_code(int ph_code);

// One received message. Owns its bytes; move-only.
class PH_API Message {
 public:
  Message() = default;
  Message(vp_t dest, vp_t source, int tag, Bytes body)
      : dest_(dest), source_(source), tag_(tag), body_(std::move(body)) {}

  const std::byte* data() const { return body_.data(); }
  std::size_t size() const { return body_.size(); }
  std::span<const std::byte> bytes() const { return body_; }
  int tag() const { return tag_; }
  vp_t dest() const { return dest_; }      // the virtual node (or resource name) it was sent to
  vp_t source() const { return source_; }  // the sender's resource name
  Bytes take_body() && { return std::move(body_); }

 private:
  vp_t dest_ = 0;
  vp_t source_ = 0;
  int tag_ = 0;
  Bytes body_;
};

// What a node knows of the overlay, for tools and tests (the shell's `routes`, `links`).
struct RouteInfo {
  vp_t destination = 0;   // a resource name
  vp_t next_hop = 0;      // a neighbour's resource name; 0 when unreachable
  std::uint64_t seqno = 0;
  std::uint32_t metric = 0;  // hops; 0xFFFF means unreachable
  std::vector<Interval> intervals;
};
struct LinkInfo {
  vp_t peer = 0;          // the neighbour's resource name (0 before the handshake completes)
  std::string address;    // the remote endpoint
  std::string state;      // "connecting", "handshake", "up", "down"
  bool outbound = false;  // true when this node dialled it (ph_add_port)
  std::uint64_t frames_unacked = 0;
  std::uint64_t bytes_queued = 0;
};
// Virtual nodes whose owner went away holding them (it crashed, or has been cut off for orphan_after_ms) and
// that nobody else assumes now. A node that finalizes, even with a log, withdraws its intervals first and is
// not one of these. Messages to them wait, as for any virtual node nobody assumes.
struct OrphanedInterval {
  Interval span;
  vp_t owner = 0;  // the resource name that held it
  std::chrono::milliseconds lost_for{0};  // how long it has been unreachable
};

struct RoutingSnapshot {
  vp_t self = 0;
  std::uint64_t seqno = 0;
  std::vector<Interval> assumed;
  std::vector<RouteInfo> routes;
  std::vector<LinkInfo> links;
  std::uint64_t waiting_messages = 0;  // messages held for lack of a route
  std::uint64_t waiting_bytes = 0;
  std::vector<vp_t> waiting_for;    // what they wait for: distinct destinations, the first 16
  std::uint64_t links_lost = 0;        // times an established link broke since initialize
  std::uint64_t out_of_hops = 0;       // packets that used up their hop limit here (held, then re-routed)
  std::vector<OrphanedInterval> orphaned;
  // Migration (docs/migration.md): this node's lock, who holds it, and whether an attempt of its own is under
  // way.
  bool migration_locked = false;
  vp_t migration_lock_holder = 0;
  bool migration_attempting = false;
};

// The snapshot as a small text table: links, then routes with their intervals (the shell's `routes`).
PH_API std::string describe(const RoutingSnapshot& s);
// Intervals as text: "[lo,hi) [lo,hi)", or "-" for none.
PH_API std::string describe(const std::vector<Interval>& v);

struct Config;  // phoenix/config.hpp

class PH_API Node {
 public:
  // Configuration comes from the file named by PHOENIX_CONFIG (if set) and PHOENIX_* environment variables.
  Node();
  explicit Node(const Config& config);
  ~Node();  // finalizes without a log if still running
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // lifecycle (paper 3.3)
  std::error_code initialize(std::string_view port, const char* log_in = nullptr);
  std::error_code add_port(std::string_view peer);
  vp_t resource_name() const;
  vp_t space_size() const;
  std::string local_port() const;  // the endpoint actually bound, e.g. "tcp://127.0.0.1:40123"
  std::error_code finalize(const char* log_out = nullptr);
  bool running() const;

  // messages
  std::error_code send(vp_t dest, int tag, std::span<const std::byte> data);
  std::error_code send(vp_t dest, int tag, const void* data, std::size_t len) {
    return send(dest, tag, std::span(static_cast<const std::byte*>(data), len));
  }
  // Hands `body` over without copying it (a received message's take_body() can be sent on this way). On an
  // error `body` is left as it was.
  std::error_code send(vp_t dest, int tag, Bytes&& body);
  std::optional<Message> recv(int tag = any_tag);
  std::optional<Message> try_recv(int tag = any_tag);
  std::optional<Message> recv_for(int tag, std::chrono::milliseconds timeout);

  // mapping
  std::error_code assume(Interval s);
  std::error_code release(Interval s);
  std::vector<Interval> assumed() const;
  // What this node's routing table says of owners that went away (OrphanedInterval).
  std::vector<OrphanedInterval> orphaned() const;
  // With orphan_policy "adopt", this node assumes an orphaned interval that touches its own (config.hpp) and
  // calls the handler with it and its old owner: no state comes with it (the application re-creates what it
  // can: re-spawns lost work, or lets a Volpex replica take over). It runs on an application thread inside a
  // receive call, ph_poll, ph_join or ph_leave, like the state handlers; messages for the interval reach the
  // application only after it returned (or threw). It must not finalize or suspend the node. Without a
  // handler the interval is assumed all the same.
  using AdoptionHandler = std::function<void(Interval span, vp_t owner)>;
  std::error_code set_adoption_handler(AdoptionHandler handler);

  // migration (paper 3.5-3.6; docs/migration.md). A node taking part assumes one interval or none.
  // pack returns the application state of the virtual nodes leaving this node, nullopt if it cannot (the
  // interval then stays here); unpack takes the state of those arriving, false if it cannot (logged). They run
  // on an application thread inside recv, try_recv, recv_for, poll, join or leave, never concurrently with
  // each other. pack of an interval waits (up to 5 s, then warns) until every other thread that received a
  // message for it has come back to recv, try_recv, recv_for, poll or a migration call: its effect is in the
  // state. Set them before migrating; without them no application state moves.
  using PackFn = std::function<std::optional<Bytes>(Interval)>;
  using UnpackFn = std::function<bool(Interval, std::span<const std::byte>)>;
  std::error_code set_state_handlers(PackFn pack, UnpackFn unpack);
  // Obtains an interval: the upper half of the interval of whoever assumes a random virtual node, with its
  // state. The node must assume nothing. PH_ETIMEDOUT if no attempt succeeded in time (one may still be
  // outstanding and complete later: assumed() tells).
  std::error_code join(std::chrono::milliseconds timeout);
  // Hands everything this node assumes, with its state, to the node below or above it; afterwards it assumes
  // nothing and may finalize. PH_ESTATE if it assumes all of [0, L) (nobody to give to).
  std::error_code leave(std::chrono::milliseconds timeout);
  // Runs pending migration steps (pack, unpack) and gives the network one non-blocking turn; returns how many
  // steps ran.
  int poll();
  // One attempt of the protocol with an explicit plan (rebalancing): take `count` virtual nodes from the
  // neighbour on `side`, or give it `count` of this node's (all of them for give_all). {} if something moved,
  // PH_EBUSY if the attempt ended without moving anything (a lock was taken, the intervals changed, or there was
  // nothing to move), PH_ESTATE if it could not start (another attempt is outstanding, the side lies outside
  // [0, L), the node assumes several intervals), PH_ETIMEDOUT if it is still running at the timeout.
  enum class MigrationAction { take_half, take, give_all, give };
  enum class Side { below, above };
  std::error_code migrate(MigrationAction action, Side side, vp_t count, std::chrono::milliseconds timeout);

  // Temporary leave with state (paper 3.3; docs/migration.md). Like finalize(file), and the file also records
  // the intervals this node assumes with their application state, from pack on the calling thread. A later
  // incarnation, from any address, restores both: initialize(port, file), then set_state_handlers, which runs
  // unpack on its thread and assumes the intervals again (until then the node assumes nothing and messages to
  // them wait). PH_ESTATE, with the node still running and nothing lost, if no state handlers are set or pack
  // returns nullopt.
  std::error_code suspend(const char* file);

  // Remote control (the shell phsh; docs/shell.md). Every running node answers text requests sent to its
  // resource name, on its I/O thread, whatever its application is doing:
  //   "status"         key=value lines: name host pid endpoint resource assumed queued waiting dropped sent received
  //                    rate state links
  //   "routes"         describe(routing_snapshot())
  //   "log [N]"        the last N (default 50) log lines of its process, oldest first
  //   "leave"          recorded for the application (take_control_request), answered at once
  //   "suspend FILE"   the same, for a suspend to FILE
  //   "kill"           the process ends at once (SIGKILL to itself), as in a crash: for fault drills
  // kill, leave, suspend and log are guarded (docs/shell.md, "Who may control a node"): the node carries one
  // out only if its packet was addressed to the node's resource name and it carries a seal for that name, fresh
  // (within 120 s of the node's clock) and never seen before, signed with the private key whose public key is
  // the node's control_key_file. Otherwise the reply has ok false and says why; status and routes are open.
  struct ControlReply {
    bool ok = false;
    std::string text;  // the answer, or the error when !ok
  };
  // Sends `request` to the node whose resource name is `node` and waits for the reply, driving this node's
  // I/O meanwhile. nullopt if none came: *ec is PH_EUNREACH (no route to it within a second: a node just
  // linked may not have advertised itself yet), PH_ETIMEDOUT or PH_ESTATE (not running). A node may control
  // itself. A guarded request is sealed for `node` (a resource name) with this node's controller_key_file if it
  // has one, and sent unsealed otherwise (then refused).
  std::optional<ControlReply> control(vp_t node, std::string_view request, std::chrono::milliseconds timeout,
                                      std::error_code* ec = nullptr);
  struct ControlRequest {
    enum class Kind { none, leave, suspend } kind = Kind::none;
    std::string file;  // suspend: where to
    vp_t from = 0;     // the requester's resource name
  };
  // The oldest request addressed to the application not yet taken (kind none when there is none).
  ControlRequest take_control_request();
  // What the application is doing, in a word or two ("joining", "running", "finished"): `status` reports it
  // as state=, else the runtime's own ("running", "migrating").
  void set_status(std::string_view text);

  // introspection
  RoutingSnapshot routing_snapshot() const;
  // Called at the instant this node starts (true) or stops (false) assuming s — by assume, release,
  // migration or the configuration — on the node's I/O context: keep it short. For tools and tests that check
  // the disjoint cover across nodes.
  using OwnershipObserver = std::function<void(bool assumed, Interval s)>;
  void set_ownership_observer(OwnershipObserver f);

  // Fault injection for tests and drills: closes every link's connection abruptly, as a network failure
  // would. Nothing is lost: the links are redialled and unacknowledged messages resent. Returns how many.
  std::size_t drop_links();

  class Impl;

 private:
  friend struct service_messages;  // phoenix's own services (phoenix/service_messages.hpp)
  std::unique_ptr<Impl> impl_;
};

}  // namespace phoenix
