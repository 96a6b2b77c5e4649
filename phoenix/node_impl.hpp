// phoenix/node_impl.hpp — Node::Impl, the state of one node, shared by the files that implement it: node.cpp
// (the lifecycle and the facade), node_messages.cpp (outbox and inbox), node_migration.cpp (ownership and
// migration calls) and control_service.cpp (remote control). Internal to libphoenix.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <phoenix/config.hpp>
#include <phoenix/node.hpp>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/log_budget.hpp"
#include "migration/message.hpp"
#include "overlay/overlay.hpp"
#include "phoenix/control.hpp"
#include "phoenix/control_guard.hpp"
#include "phoenix/handover.hpp"
#include "phoenix/messages_in_hand.hpp"
#include "phoenix/message_log.hpp"
#include "phoenix/migration_driver.hpp"
#include "phoenix/progress.hpp"

namespace phoenix {

class Node::Impl {
 public:
  using clock = std::chrono::steady_clock;
  using OwnershipObserver = Node::OwnershipObserver;
  explicit Impl(ConfigResult r) : config_(std::move(r.config)), config_error_(std::move(r.error)) {}

  std::error_code initialize(std::string_view port, const char* log_in);
  std::error_code finalize(const char* log_out, const std::vector<suspended_interval>& state = {});
  void wait_for_resends();  // finalize with no log
  std::error_code suspend(const char* file);
  std::error_code set_state_handlers(PackFn pack, UnpackFn unpack);
  std::optional<ControlReply> control(vp_t node, std::string_view request, std::chrono::milliseconds timeout,
                                      std::error_code* ec);
  RoutingSnapshot snapshot();  // holding the token
  std::vector<OrphanedInterval> orphans() const;  // holding the token: one entry per orphaned interval
  std::error_code send(vp_t dest, int tag, std::span<const std::byte> data);
  std::error_code send(vp_t dest, int tag, Bytes&& body);
  // The checks of ph_send, and the reservation of room for `size` body bytes among the waiting messages.
  std::error_code check_send(int tag, std::size_t size, bool null_data, bool service = false) const;
  std::error_code enqueue(vp_t dest, int tag, Bytes body);  // after check_send
  // A receive call: the calling thread is done with the message it had (messages_in_hand.hpp), then gets one.
  std::optional<Message> receive(int tag, clock::time_point deadline, bool service = false);
  // The oldest queued message with `tag`, recorded as in the calling thread's hands.
  std::optional<Message> take(int tag);
  void came_back() { in_hand_.came_back(); }
  std::error_code assume(Interval s);
  std::error_code release(Interval s);
  std::error_code set_adoption_handler(Node::AdoptionHandler handler);

  // migration (migration_driver.hpp)
  std::error_code join(std::chrono::milliseconds timeout);
  std::error_code leave(std::chrono::milliseconds timeout);
  std::error_code migrate(const migration::plan& p, std::chrono::milliseconds timeout);
  int poll();

  Config config_;
  std::string config_error_;
  std::atomic<bool> running_{false};
  // leave() emptied this node, and the application has not assumed anything since: finalize leaves again if an
  // interval came back meanwhile (a late state, docs/migration.md decision 8).
  std::atomic<bool> left_{false};
  vp_t resource_name_ = 0;
  std::string local_port_;
  std::unique_ptr<progress_engine> progress_;
  std::unique_ptr<overlay::overlay> overlay_;
  std::unique_ptr<migration_driver> migration_;
  OwnershipObserver observer_;

  // Application messages threads may still be handling; recorded once state handlers are set.
  messages_in_hand in_hand_;

  std::mutex inbox_mu_;
  std::deque<Message> inbox_;
  // Adopted intervals whose handler has not run yet: their messages stay in the inbox until it has (inbox_mu_).
  std::vector<Interval> adoption_untold_;
  std::uint64_t received_total_ = 0;  // messages the application received (inbox_mu_)
  std::uint64_t sent_total_ = 0;      // messages of the application handed to the overlay (the token)

  // Remote control (control.hpp). The calls waiting for a reply (nullopt until it came) and the rate are the
  // I/O context's (the token); requests for the application and its status text are shared with it.
  std::uint64_t next_control_id_ = 0;
  std::unordered_map<std::uint64_t, std::optional<control_packet>> control_calls_;
  clock::time_point rate_since_;
  std::uint64_t rate_base_ = 0;
  double rate_ = 0;
  std::mutex requests_mu_;
  std::deque<ControlRequest> requests_;
  std::string app_status_;
  // Who may control this node (control_guard.hpp), the key it signs its own guarded requests with, and what
  // it refused; warnings about refusals are budgeted, since any key holder can trigger them.
  control_guard control_guard_;
  controller_key control_signer_;
  std::uint64_t control_malformed_ = 0;
  std::uint64_t control_refused_ = 0;
  base::log_budget control_warnings_{std::chrono::seconds(10), 5};
  // Messages with a negative tag nothing can receive (deliver), dropped and counted; warnings budgeted.
  std::uint64_t unreceivable_dropped_ = 0;
  base::log_budget drop_warnings_{std::chrono::seconds(10)};
  // From initialize's log (a suspend's), taken up when the application sets its state handlers.
  std::vector<suspended_interval> restore_;
  // The state handlers, for suspend and the taking up of restore_ (the application's thread).
  PackFn pack_;
  UnpackFn unpack_;

  // Packets from ph_send on their way to the I/O context, in send order (see send()).
  std::mutex outbox_mu_;
  std::vector<overlay::packet> outbox_;
  std::atomic<bool> drain_posted_{false};

 private:
  void drain_outbox();
  std::error_code fail(int code, const std::string& why);
  void deliver(overlay::packet&& p);
  void on_control(overlay::packet&& p);                          // holding the token
  std::error_code load_control_keys();
  void warn_control(const std::string& what);                    // holding the token: budgeted
  void drop_unreceivable(std::int32_t tag, vp_t source);              // holding the token: counted, budgeted
  bool refused_control(const control_packet& c, const overlay::packet& p, control_packet& reply);
  control_packet answer(const std::string& request, vp_t from);  // holding the token
  std::string status_text();                                     // holding the token
  overlay::overlay_config overlay_config(std::vector<std::byte> key) const;
  std::vector<overlay::packet> take_inbox_packets(const std::function<bool(vp_t)>& which);
  // Holding the token. A plain release (ph_release): messages for s in the inbox go back into the overlay, and
  // the end-to-end streams' state to s is dropped.
  void release_and_requeue(Interval s);
  // Holding the token. A migration's release: returns what goes with the state (handover.hpp); arrive() takes
  // it up and assumes s.
  Bytes release_for_migration(Interval s);
  void arrive(Interval s, std::span<const std::byte> with);
  bool assume_now(Interval s);           // holding the token; false if it overlaps
  void sync_migration_interval();        // holding the token: the protocol learns what the node assumes
  bool migration_involved() const;       // holding the token: an attempt or a lock is under way
  // orphan_policy "adopt" (orphan_adoption.hpp): looks at the orphaned intervals every quarter of
  // orphan_after_ms, holding the token, and assumes one that touches this node's interval.
  void arm_adoption();
  void adopt_orphan();
  // Intervals lost in transit that this node alone knows of (node_losses.cpp): it gave them to takers that
  // crashed before anyone heard them assume them, or they came with an interval next to them from a giver that
  // had (handover.hpp). It adopts them (orphan_adoption.hpp) and advertises them in transit meanwhile. At most
  // max_given_lost, the oldest dropped first; an entry goes once no orphaned interval overlaps it, or with the
  // interval next to it. Holding the token, as every member below.
  std::vector<Interval> given_lost_;
  static constexpr std::size_t max_given_lost = max_logged_losses;
  bool adopt_given_lost(clock::time_point deadline);  // a leaver that gave all it had: assumes something again?
  void note_given_lost(Interval s);
  void forget_given_lost(const std::function<bool(const Interval&)>& gone);
  void prune_given_lost();  // what no record holds any more
  void lost_in_transit(vp_t taker, Interval s, std::chrono::steady_clock::duration gone);
  void transit_over(Interval s);
  std::vector<handed_loss> hand_over_losses(Interval s);  // given_lost_ next to s, which leaves with it
  void take_handed_losses(Interval s, const std::vector<handed_loss>& losses, std::size_t skipped);
  void record_handed_losses();  // those whose taker is unreachable from here now, too
  // For a log (finalize, suspend): what this node alone knows was lost on its way, and to whom; the next
  // incarnation that reads the log takes it up (restore_logged_losses).
  std::vector<logged_loss> losses_for_log() const;
  void restore_logged_losses(const std::vector<logged_loss>& losses);
  // What went with an interval on its way (restored should its taker crash), and what came with one and waits
  // for its taker to be unreachable from here too.
  std::vector<std::pair<Interval, std::vector<handed_loss>>> handed_out_;
  struct handed_in {
    handed_loss loss;
    clock::time_point at;
  };
  std::vector<handed_in> handed_in_;
  std::unique_ptr<asio::steady_timer> adoption_timer_;
  // Migration leases (migration_driver::tick), every quarter of migration_lease_ms.
  void arm_lease();
  std::unique_ptr<asio::steady_timer> lease_timer_;
  // Closes the migration protocol and drives the node until no migration it takes part in is under way (the
  // wait of finalize and suspend); false if one still is after migration_settle_timeout.
  bool settle_migrations();
  // Drives the node and runs pending migration steps until done() (evaluated holding the token) or the
  // deadline; returns done()'s last value.
  bool drive_migration(const std::function<bool()>& done, clock::time_point deadline);
  // One protocol attempt, to its end or the deadline.
  migration::outcome one_attempt(const migration::plan& p, clock::time_point deadline);
  void back_off(std::chrono::milliseconds& backoff, clock::time_point deadline);
  std::optional<migration::interval> current_interval() {  // the protocol's I; nullopt: several intervals
    return progress_->call([&] { return migration_->protocol().current(); });
  }
  std::mt19937_64 backoff_rng_{std::random_device{}()};
};

}  // namespace phoenix
