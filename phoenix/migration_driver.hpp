// migration_driver.hpp — hosts a node's migration protocol (migration/lock_protocol.hpp) in the runtime.
//
// The protocol runs on the node's I/O context: migration messages arrive as overlay packets with the reserved
// tag and go out the same way. What needs the application — `pack` on the giver, `unpack` on the taker — is
// queued as a pending step and run on an application thread inside a receive call, ph_poll, ph_join or
// ph_leave (API.md: state handlers never run concurrently with the application's handling of a message).
// Without state handlers there is nothing of the application's to run, and the steps run on the I/O context.
//
// The state streams in chunks of `chunk_bytes`, at most `window_chunks` unacknowledged, so a state of hundreds
// of MiB neither fills a link's window nor delays other traffic by more than a few chunks, and the taker
// gathers it while its application goes on (docs/migration.md, "The transfer").
//
// Leases (docs/migration.md, decision 8): tick() drives the protocol's, and gives up on a taker that has been
// unreachable for `gone_after` while this node waits for its done (partner_gone). Several streams may be under
// way at once: a late state, or one given back, beside the transfer of the attempt under way.
//
// Threads: everything but run_pending() must be called holding the node's progress token.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <phoenix/node.hpp>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/log_budget.hpp"
#include "migration/lock_protocol.hpp"
#include "overlay/packet.hpp"
#include "phoenix/log.hpp"

namespace phoenix {

class progress_engine;

class migration_driver {
 public:
  static constexpr std::size_t chunk_bytes = 256u << 10;
  static constexpr std::uint64_t window_chunks = 4;
  // The largest state a node takes (a longer state_begin is refused): a peer with a granted lock or a pending
  // record can make this node hold at most this much per such record, allocated as its first chunk arrives.
  static constexpr std::uint64_t max_state_bytes = 4ull << 30;

  // What the driver does to its node; each is called holding the progress token.
  struct node_ops {
    std::function<void(overlay::packet)> send;  // a runtime packet, past the bound on waiting bytes
    // ph_release: queued messages for it go back to the overlay. Returns the state of the end-to-end streams
    // to its virtual nodes (overlay/delivery/stream_codec.hpp), which goes with the interval's state.
    std::function<Bytes(Interval)> release;
    // ph_assume, with the streams' state that came with it (empty if none).
    std::function<void(Interval, std::span<const std::byte>)> assume;
    // Whether an application thread may still be handling a message for a virtual node in the interval
    // (messages_in_hand.hpp); called without the token. Unset: never.
    std::function<bool(Interval)> handling;
    // The adoption handler ran for an adopted interval: its messages may go to the application now.
    std::function<void(Interval)> adoption_told;
    // Whether this node has a route to a resource name now. Unset: always.
    std::function<bool(vp_t)> reachable;
    // An interval released to a taker that has been unreachable this long without being heard to assume it:
    // reported as orphaned with the taker's (Node::orphaned), so that orphan_policy "adopt" assumes it. Unset:
    // nothing.
    std::function<void(vp_t, Interval, std::chrono::steady_clock::duration)> lost_in_transit;
    // The transfer of an interval `release` gave is over (done, taken or given back, or its taker given up
    // on): it is no longer advertised in transit (overlay::release). Unset: nothing.
    std::function<void(Interval)> transit_over;
  };
  struct lease_config {
    std::chrono::milliseconds lease = migration::lock_protocol::default_lease;
    std::chrono::milliseconds gone_after{10'000};  // a taker unreachable this long is given up on
  };

  // How long a giver waits for application threads to finish the messages for the interval it released, before
  // it packs anyway (and says so): a thread that keeps a message while it waits for this one must not hang it.
  static constexpr std::chrono::seconds handling_wait{5};

  migration_driver(std::string name, vp_t self, vp_t space_size, node_ops ops, lease_config leases);

  // The protocol, for queries and for the calls that return no effects (set_interval, close, reopen).
  migration::lock_protocol& protocol() { return protocol_; }
  // Figure 2: starts an attempt with plan p; false if the protocol would not (lock_protocol::begin).
  bool begin(const migration::plan& p);
  void on_packet(const overlay::packet& p);  // a packet with migration::protocol_tag, delivered here
  // Leases and partners gone; the host calls it every lease / 4 or so.
  void tick(std::chrono::steady_clock::time_point now);
  std::chrono::milliseconds lease() const { return leases_.lease; }
  // A state stream in or out is under way (a state given back included): a finalizing node waits for it.
  bool streaming() const {
    return !in_.empty() || std::any_of(out_.begin(), out_.end(), [](const outgoing& o) { return o.back; });
  }

  // Set before migrating; without them no application state moves.
  void set_handlers(Node::PackFn pack, Node::UnpackFn unpack);
  // An orphaned interval this node assumed (orphan_policy "adopt"): the handler is told on an application
  // thread, as a pending step; then ops.adoption_told. Unset handler: nothing to tell, adopted() does nothing.
  void set_adoption_handler(Node::AdoptionHandler handler) { adoption_handler_ = std::move(handler); }
  bool tells_adoptions() const { return static_cast<bool>(adoption_handler_); }
  void adopted(Interval span, vp_t owner);

  // Cheap enough for the receive path's every turn: one atomic load, no lock.
  bool has_pending() const { return pending_.load(std::memory_order_acquire) > 0; }
  // Runs the pending pack and unpack steps on the calling (application) thread, taking the token in between;
  // returns how many ran.
  int run_pending(progress_engine& progress);

  // Debug builds and tests: the paper's assertion failed somewhere on this node (never expected).
  bool assertion_failed() const { return assertion_failed_; }

 private:
  struct outgoing {
    migration::interval what;
    vp_t taker = 0;  // where it goes (the giver, for a state given back)
    std::uint64_t attempt = 0;
    // What goes on the wire is state then tail (state_tail): two buffers, so that the application's state of
    // hundreds of MiB is never copied to append the runtime's part.
    Bytes state, tail;
    std::uint64_t length() const { return state.size() + tail.size(); }
    std::uint64_t next = 0;   // next chunk to send
    std::uint64_t acked = 0;  // chunks acknowledged
    bool back = false;        // a state given back (give_back), not a give
  };
  struct incoming {
    migration::interval what;
    vp_t giver = 0;  // where it comes from
    std::uint64_t attempt = 0;
    std::uint64_t length = 0;
    std::uint64_t received = 0;
    Bytes state;            // allocated as the first chunk arrives
    std::vector<bool> got;  // per chunk: arrived (a duplicate counts once)
    bool back = false;      // a state given back to this node (give_back), not a giver's
    bool ready = false;     // complete, and waits for its unpack step
  };
  struct early_chunk {  // a state_chunk that came before its state_begin
    migration::interval what;
    vp_t giver = 0;
    std::uint64_t attempt = 0;
    std::uint64_t index = 0;
    Bytes bytes;
  };
  enum class step_kind { give, arrive, adopted };
  struct step {
    step_kind what;
    migration::interval span;
    vp_t partner = 0;
    std::uint64_t attempt = 0;
  };

  // Carries out what a protocol step asked for, in order.
  void apply(const migration::effects& effects);
  void give(migration::interval t, vp_t taker, std::uint64_t attempt);
  void send_message(vp_t dest, const migration::message& m);
  void start_stream(migration::kind begin, migration::interval t, vp_t to, std::uint64_t attempt, Bytes state,
                    Bytes tail = {});
  void send_chunks(outgoing& o);
  void on_stream_begin(const migration::message& m);  // state_begin or give_back
  void on_state_chunk(const migration::message& m);
  void on_state_ack(const migration::message& m);
  bool take_back(const migration::message& refuse);  // whether the refusal was of a state this node released
  std::list<incoming>::iterator find_incoming(vp_t from, migration::interval t, std::uint64_t attempt);
  // Returns whether it was the last chunk (the stream is complete and was handled).
  bool take_chunk(std::list<incoming>::iterator in, std::uint64_t index, std::span<const std::byte> chunk);
  void complete(std::list<incoming>::iterator in);  // all of it is here: the protocol's verdict
  // Tells the giver of a state this node will not take (refuse, with T): it takes T back.
  void refuse_state(vp_t giver, migration::interval t, std::uint64_t attempt);
  void finish_arrival(std::list<incoming>::iterator in, bool unpacked);
  void give_now(migration::interval t, vp_t taker, std::uint64_t attempt);  // without state handlers
  void dispatch(const overlay::packet& p);
  void settle_transit();
  // A state on the wire: the application's bytes, the streams' state, and its length as a u64 (so that the
  // application's part is a prefix: nothing is copied on arrival). state_tail is what follows the
  // application's bytes; split_state returns the two parts.
  static Bytes state_tail(const Bytes& streams);
  struct state_parts {
    std::span<const std::byte> app, streams;
  };
  state_parts split_state(const Bytes& state, vp_t giver) const;
  // On the application thread, after the release of t and before its pack.
  void wait_for_handling(progress_engine& progress, migration::interval t);

  std::string name_;
  node_ops ops_;
  migration::lock_protocol protocol_;
  std::mt19937_64 rng_;
  vp_t space_size_;

  Node::PackFn pack_;
  Node::UnpackFn unpack_;
  Node::AdoptionHandler adoption_handler_;
  lease_config leases_;
  // Lists: an incoming stream's bytes are unpacked without the token, so they must not move meanwhile.
  std::list<outgoing> out_;
  std::optional<migration::interval> transit_;  // released for a give whose transfer is not over (settle_transit)
  std::list<incoming> in_;
  std::vector<early_chunk> early_chunks_;
  // Partners this node waits on that have no route, and since when (tick).
  std::map<vp_t, std::chrono::steady_clock::time_point> unreachable_since_;

  void queue_step(const step& s);
  // The level for a line a peer can cause: `wanted` within peer_log_, debug past it.
  spdlog::level::level_enum peer_line(spdlog::level::level_enum wanted);
  base::log_budget peer_log_{std::chrono::seconds(10), 5};

  std::mutex steps_mu_;  // steps_ is filled on the I/O context and drained by application threads
  std::deque<step> steps_;
  std::atomic<std::size_t> pending_{0};  // steps_.size(), readable without the lock
  bool assertion_failed_ = false;
};

}  // namespace phoenix
