// communicator.hpp — replicated message passing for one replica of a rank (VolpexMPI's model; docs/volpex.md).
//
// Each logical rank runs as K replicas, deterministic copies of one program. send() only logs the message in
// this replica's sender log (sender-based logging, paper 002 section 3); recv() pulls the message from ONE
// replica of the sending rank, chosen by the target-selection policy (paper 004), naming it by (sending rank,
// receiving rank, tag, timestamp): every replica of the sender logs the same messages under the same names, so
// any of them can serve any receiver replica, and a lagging receiver replica gets exactly what its leader got.
//
// A serving thread answers the pulls of other ranks' replicas from the log while the application computes;
// requests for messages not sent yet wait at the sender until send() logs them. A sender replica that dies is
// detected by its loss of routes (its neighbours' links to it break; liveness.hpp) or by the policy's timeout,
// and the receiver asks another replica of that rank for the same message: nothing is lost or delivered twice.
// Receivers report what they consumed to every replica of the sender, so a log keeps an entry until every live
// replica of the receiving rank has passed it; one that falls behind a full log gets an explicit error
// (PH_ELOST), never a wrong message (sender_log.hpp).
//
// Wildcard receives (any source, any tag) are made deterministic across replicas: the first replica of the
// receiving rank to find a matching message proposes it through the dataspace (client::decide, under a tag
// naming the rank and the count of its wildcard receives); every replica receives what was decided.
//
// Replicas find each other through the dataspace too: start() decides "replica j of rank r is resource name X".
//
// Threads: send, recv, start and finish on the application's thread (the one that uses the client too); the
// serving thread is the communicator's own.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <phoenix/node.hpp>
#include <set>
#include <span>
#include <system_error>
#include <thread>
#include <vector>

#include "phoenix/volpex/client.hpp"
#include "phoenix/volpex/communicator_protocol.hpp"
#include "phoenix/volpex/liveness.hpp"
#include "phoenix/volpex/sender_log.hpp"
#include "phoenix/volpex/target_selection.hpp"

namespace phoenix::volpex {

struct comm_options {
  rank_id rank = 0;
  unsigned ranks = 1;
  replica_index replica = 0;
  unsigned replicas = 1;  // K, for every rank
  selection_options selection;
  std::uint64_t log_capacity_bytes = 256ull << 20;
  // What a missing route means (liveness.hpp): a replica without one for suspect_after is not asked any more
  // while another can be; one without one for give_up_after is given up (a receiver whose every source replica
  // is given up gets PH_EUNREACH; a sender keeps nothing more for a receiver given up). A route that comes back
  // makes the replica count again. A replica not registered yet counts as without a route.
  liveness_timing liveness;
  unsigned progress_every = 16;  // a receiver reports its progress to all replicas of a source every N receives
  // false: a message leaves the sender log as soon as one replica of the receiving rank took it, as in a
  // message passing layer without sender-based logging. Only for drills and the tests that show the log is what
  // lets every replica receive every message.
  bool sender_log = true;
  // Fault drills: the process kills itself (SIGKILL) as it is about to answer its Nth pull with a message,
  // "while a sender's log is being read". 0: never.
  std::uint64_t crash_on_serve = 0;
};

class communicator {
 public:
  static constexpr int any_source = -1;
  static constexpr std::int32_t any_tag = -1;

  communicator(Node& node, client& dataspace, comm_options o);
  ~communicator();
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;

  // Registers this replica in the directory and starts serving pulls.
  std::error_code start(std::chrono::milliseconds timeout);
  // Logs the message for rank `dst`; never waits for the receiver. tag >= 0.
  std::error_code send(rank_id dst, std::int32_t tag, std::span<const std::byte> data);
  struct received {
    rank_id source = 0;
    std::int32_t tag = 0;
    Bytes body;
  };
  // The next message from `source` (any_source) with `tag` (any_tag). nullopt with *ec: PH_ETIMEDOUT, PH_ELOST
  // (every live replica of the source fell behind or trimmed it: this replica lagged too far), PH_EUNREACH
  // (every replica of the source was given up: liveness.hpp), PH_EINVAL.
  std::optional<received> recv(int source, std::int32_t tag, std::error_code* ec,
                               std::chrono::milliseconds timeout = std::chrono::hours(24));
  // Reports final progress to the senders, then keeps serving until no live replica of any receiving rank
  // needs this replica's log any more, or `linger` passes, and says in the directory that this replica
  // finished. A receiver replica without a route that finished needs nothing more; one that did not finish is
  // given up after give_up_after; receivers registered that never asked this replica for anything are watched
  // too, and one never registered holds the log until `linger` (it may be a replica started late). Stops the
  // serving thread.
  std::error_code finish(std::chrono::milliseconds linger);
  // Stops the serving thread at once (idempotent): for a process that exits without finish().
  void stop_serving();

  struct stats {
    std::uint64_t sent = 0, received = 0;
    std::uint64_t requests = 0, reissued = 0;  // pulls and probes sent; of them, re-sent to another replica
    std::uint64_t not_yet = 0;                 // answers "not yet" (the target lagged)
    std::uint64_t served = 0;                  // messages this replica's log answered with
    std::uint64_t dead_detected = 0;           // source replicas this receiver stopped asking (no route)
    std::uint64_t wildcards = 0, wildcards_decided_elsewhere = 0;
    std::uint64_t switches = 0;  // target changes by the selection policies
    sender_log::stats log;
  };
  stats statistics() const;

 private:
  // A replica of a sending rank, as this receiver sees it.
  struct source_replica {
    std::optional<vp_t> name;  // from the directory, once it registered
    liveness health;
    std::chrono::steady_clock::time_point next_lookup{};  // unregistered: when to look in the directory again
  };
  struct source_state {
    explicit source_state(target_selector s) : selector(std::move(s)) {}
    target_selector selector;
    std::map<replica_index, source_replica> replicas;   // 0..K-1
    std::chrono::steady_clock::time_point next_look{};  // when track_replicas checks the routes again
    std::map<std::int32_t, timestamp> consumed;
    std::uint64_t received = 0;
    bool pinged = false;
  };
  // One outstanding pull or probe of the receiving side.
  struct attempt {
    rank_id source = 0;
    std::optional<replica_index> target;
    std::uint64_t id = 0;
    std::chrono::steady_clock::time_point sent;
    std::set<replica_index> refused;  // answered trimmed or fallen behind for this message
  };

  // receiving side (application thread)
  source_state& state_of(rank_id s);
  comm_request request_to(rank_id s, comm_request::kind what) const;
  void track_replicas(source_state& st, rank_id s);
  std::optional<vp_t> look_up_name(rank_id r, replica_index j);
  void ping_all(source_state& st, rank_id s);
  std::optional<replica_index> pick(source_state& st, rank_id s, const std::set<replica_index>& refused);
  bool issue(attempt& a, comm_request r);
  void watch_target(attempt& a, source_state& st);
  bool all_given_up(const source_state& st) const;
  bool all_refused(const source_state& st, const attempt& a) const;
  bool wants_switch(source_state& st, const attempt& a) const;
  std::optional<received> recv_from(rank_id s, std::int32_t tag, std::error_code* ec,
                                    std::chrono::steady_clock::time_point deadline);
  std::optional<received> recv_wildcard(int source, std::int32_t tag, std::error_code* ec,
                                        std::chrono::steady_clock::time_point deadline);
  std::optional<std::pair<rank_id, std::int32_t>> decided(const std::string& tag, std::span<const std::byte> p,
                                                          std::error_code* ec);
  void note_received(rank_id s, source_state& st, std::int32_t tag, timestamp ts);
  void report_progress(rank_id s, source_state& st);

  // serving side (serving thread; send() answers waiting pulls too)
  void serve_loop();
  void handle(const comm_request& r);
  sender_log::lookup_result look_up(const comm_request& r);
  void answer_pending(rank_id dst);
  void forget(rank_id dst, std::int32_t tag, timestamp ts);
  void trim_log();
  bool answer_lookup(const comm_request& r, const sender_log::lookup_result& res);
  void track_receivers();
  void look_up_receivers();                                       // application thread (it uses the directory)
  void look_up_receivers_every(std::chrono::milliseconds every);  // unless done less than `every` ago
  void post(vp_t to, const comm_answer& a);

  Node& node_;
  client& dataspace_;
  comm_options options_;
  std::map<rank_id, source_state> sources_;
  std::uint64_t next_request_ = 1;
  std::chrono::steady_clock::time_point next_receiver_lookup_{};
  std::uint64_t wildcards_ = 0;

  mutable std::mutex mu_;  // what both threads touch: the log, the pending pulls, the receivers, stats_
  sender_log log_;
  std::map<std::pair<rank_id, replica_index>, comm_request>
      pending_;  // the latest unanswered per receiver replica
  struct receiver_state {
    vp_t name = 0;
    liveness health;
    bool finished = false;  // it said so in the directory: it needs nothing more
  };
  std::map<std::pair<rank_id, replica_index>, receiver_state> receivers_;
  stats stats_;
  std::atomic<bool> stop_{false};
  std::thread serving_;
};

}  // namespace phoenix::volpex
