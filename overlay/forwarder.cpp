#include "overlay/forwarder.hpp"

#include <algorithm>

#include "overlay/delivery/stream_codec.hpp"
#include "overlay/log.hpp"

namespace phoenix::overlay {

namespace {
// The longest a kept packet waits between two resends (send_streams.hpp).
constexpr std::chrono::steady_clock::duration resend_max = std::chrono::minutes(1);

// Arms `timer` to call `fire` after `after`, unless it is armed already (`armed` says so until it fires).
// Nothing runs once `alive` is false: a wait that completed before the owner's cancel() still runs its handler.
template <class F>
void arm_once(asio::steady_timer& timer, bool& armed, std::chrono::steady_clock::duration after,
              const std::shared_ptr<bool>& alive, F fire) {
  if (armed) return;
  armed = true;
  timer.expires_after(after);
  timer.async_wait([&armed, alive, fire = std::move(fire)](std::error_code ec) {
    if (ec || !*alive) return;
    armed = false;
    fire();
  });
}
}  // namespace

forwarder::forwarder(asio::io_context& io, const overlay_config& config, node_id self, link_manager& links,
                     const routing_driver& routing, deliver_fn deliver)
    : config_(config),
      self_(self),
      links_(links),
      routing_(routing),
      deliver_(std::move(deliver)),
      hop_retry_timer_(io),
      sweep_timer_(io),
      sent_(resend_timing{config.end_to_end_resend, resend_max}),
      received_(stream_limits{.space_size = config.space_size}),
      resend_timer_(io),
      stranded_timer_(io),
      ack_timer_(io) {}

forwarder::~forwarder() {
  *alive_ = false;
  hop_retry_timer_.cancel();
  sweep_timer_.cancel();
  resend_timer_.cancel();
  stranded_timer_.cancel();
  ack_timer_.cancel();
}

void forwarder::account(std::int64_t delta) {
  held_bytes_.fetch_add(static_cast<std::uint64_t>(delta), std::memory_order_relaxed);
}

// The bound covers everything this node holds for sending (waiting or unacknowledged by the next hop), so a
// burst of sends from application threads is refused at once, not silently dropped later.
bool forwarder::try_reserve(std::uint64_t bytes) {
  const auto before = held_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  if (before + bytes <= config_.max_waiting_bytes) return true;
  held_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  return false;
}

void forwarder::send(packet p, bool numbered) {
  p.source = self_;
  p.hops_left = config_.hop_limit;
  if (numbered) {
    sent_.stamp(p);
    p.numbered_here = true;
  }
  route(std::move(p));
}

void forwarder::route_in_transit(packet p) {
  account(static_cast<std::int64_t>(p.footprint()));
  route(std::move(p));
}

void forwarder::route(packet p) {
  // Acknowledgements go to resource names; one to a virtual node (a forged source) would wait for good. (An
  // application's packet with such a tag is numbered, and goes on to be dropped and counted at its owner.)
  if (is_stream_ack(p.tag) && p.dest < config_.space_size && p.stream_seq == 0) {
    account(-static_cast<std::int64_t>(p.footprint()));
    return;
  }
  if (routing_.is_local(p.dest)) {
    account(-static_cast<std::int64_t>(p.footprint()));
    // To this node's resource name: acknowledgements, else packets numbered or not (deliver_numbered tells).
    if (p.dest >= config_.space_size && p.tag == stream_ack_tag) return on_stream_acks(p);
    if (p.dest >= config_.space_size && p.tag == stream_ack_for_tag) return on_stream_acks_for(p);
    return deliver_numbered(std::move(p));
  }
  const auto nh = routing_.next_hop_for(p.dest);
  // An acknowledgement that cannot go on is dropped, not held: its sender may be gone for good (or never was),
  // and a sender that still waits for it sends a copy, which is acknowledged again.
  if (p.dest >= config_.space_size && is_stream_ack(p.tag) && (p.hops_left == 0 || !nh)) {
    account(-static_cast<std::int64_t>(p.footprint()));
    return;
  }
  if (p.hops_left == 0) return hold_out_of_hops(std::move(p));
  // Behind packets for the same destination that wait here: a route that came back before routes_changed() ran
  // must not let a newer packet overtake them.
  if (waiting_.holds_for(p.dest)) return hold(std::move(p));
  if (!nh) {
    if (p.dest >= config_.space_size) {
      no_route_since_.try_emplace(p.dest, std::chrono::steady_clock::now());
      arm_once(sweep_timer_, sweep_armed_, config_.waiting_gone_after, alive_, [this] { routes_changed(); });
    }
    return hold(std::move(p));
  }
  if (!no_route_since_.empty()) no_route_since_.erase(p.dest);
  --p.hops_left;
  forward(*nh, std::move(p));
}

void forwarder::forward(node_id next_hop, packet p) {
  neighbour& nb = links_.record(next_hop);
  nb.session.enqueue(std::move(p));
  if (nb.conn) nb.conn->send_pending();
}

// A neighbour can send packets for destinations nobody routes to, and this node acknowledges what it receives
// at once: past max_waiting_per_neighbour_bytes of its packets waiting here, its acks are held back, so its
// window fills and the rest waits at the sender, bounded by its own max_waiting_bytes (an application there
// gets PH_EAGAIN). Nothing is dropped; the link carries nothing new from it until the routes change.
void forwarder::hold(packet p) {
  const node_id from = p.arrived_from;
  const std::uint64_t from_bytes = waiting_.hold(std::move(p));
  if (!from || from_bytes <= config_.max_waiting_per_neighbour_bytes) return;
  neighbour* nb = links_.find(from);
  if (!nb || nb->session.acks_held()) return;
  nb->session.hold_acks(true);
  logger()->info("{}: {} sent {} bytes that wait here for a route: holding back its acks", config_.name, nb->name,
                 from_bytes);
}

// After waiting packets were routed again: a neighbour whose packets no longer wait here beyond the bound gets
// its acks again (after the routing, so that one still over it never sees an ack go out in between).
void forwarder::release_held_acks() {
  for (auto& [id, nb] : links_.neighbours()) {
    if (!nb->session.acks_held() || waiting_.bytes_from(id) > config_.max_waiting_per_neighbour_bytes) continue;
    nb->session.hold_acks(false);
    if (nb->conn) nb->conn->send_pending();
  }
}

// The hop limit is the last guard against a loop: hold, never drop. Routes to a source are loop-free
// (route_table.hpp), but which source assumes a virtual node is every node's own view while a migration's
// updates spread, and two nodes that disagree can pass a packet back and forth until one of them learns.
// The updates that end such a loop may all have arrived at the node holding the packet, so its next routing
// change may never come: the packet is tried again after config.hop_retry whatever happens, and sooner if the
// routes change. A loop that outlasts the retry costs one budget of hops per retry, and shows in out_of_hops.
void forwarder::hold_out_of_hops(packet p) {
  ++out_of_hops_;
  logger()->debug("{}: a packet for {} from {:x} used up its hops; held for {} ms", config_.name, p.dest,
                  p.source, config_.hop_retry.count());
  hold(std::move(p));
  arm_once(hop_retry_timer_, hop_retry_armed_, config_.hop_retry, alive_, [this] { routes_changed(); });
}

// Waiting packets go out in the order they came, each either sent or held again behind the ones before it;
// those for resource names gone for good are dropped.
void forwarder::routes_changed() {
  if (!ownerless_.empty()) owners_found();
  if (waiting_.empty()) return no_route_since_.clear();
  const auto now = std::chrono::steady_clock::now();
  for (auto& p : waiting_.take_all()) {
    if (gone_for_good(p, now)) {
      drop_waiting(std::move(p));
      continue;
    }
    if (p.hops_left == 0) p.hops_left = config_.hop_limit;
    route(std::move(p));
  }
  std::erase_if(no_route_since_, [&](const auto& e) { return !waiting_.holds_for(e.first); });
  if (!no_route_since_.empty())
    arm_once(sweep_timer_, sweep_armed_, config_.waiting_gone_after, alive_, [this] { routes_changed(); });
  release_held_acks();
}

// A resource name is never reused: one that packets have waited for through waiting_gone_after (a minute), with
// no route all that time, names an incarnation that is gone (its senders give their streams to it up after as
// long: arm_resend). Held for good, they would hold their neighbours' acks back past
// max_waiting_per_neighbour_bytes.
bool forwarder::gone_for_good(const packet& p, std::chrono::steady_clock::time_point now) const {
  if (p.dest < config_.space_size || no_route_since_.empty()) return false;
  const auto it = no_route_since_.find(p.dest);
  return it != no_route_since_.end() && now - it->second >= config_.waiting_gone_after &&
         !routing_.next_hop_for(p.dest);
}

void forwarder::drop_waiting(packet p) {
  account(-static_cast<std::int64_t>(p.footprint()));
  // This node's own: its stream goes with it, or the stream's other packets would wait for it for good.
  if (send_streams* own = own_of(p.source); own && p.numbered_here)
    account(-static_cast<std::int64_t>(own->drop_stream(p.dest)));
  if (const auto held_back = stream_log_.pass(std::chrono::steady_clock::now())) {
    logger()->warn("{}: a packet for {:x}, which has had no route for {} ms, is dropped ({} more such lines held "
                   "back)", config_.name, p.dest, config_.waiting_gone_after.count(), *held_back);
  }
}

// --- end-to-end delivery --------------------------------------------------------------------------------------

// A packet for a virtual node this node assumes: delivered if it is the next of its stream (and then whatever
// was held behind it), dropped if it was delivered before, held if it came before its predecessor.
void forwarder::deliver_numbered(packet p) {
  const auto r = received_.check(p);
  const node_id source = p.source;
  const std::uint64_t vnode = p.dest;
  const bool numbered = p.stream_seq != 0 && !(p.flags & packet::handed_over);
  switch (r.what) {
    case receive_streams::verdict::deliver:
      strip_ack_to(p);
      deliver_(std::move(p));
      if (!numbered) return;
      if (received_.holds_any()) {
        while (auto next = received_.next_held(source, vnode)) {
          strip_ack_to(*next);
          deliver_(std::move(*next));
        }
      }
      return owe_acks(source, r.ack_now);
    case receive_streams::verdict::duplicate:
      ++duplicates_;
      return owe_acks(source, false);  // its sender has not heard: tell it again
    case receive_streams::verdict::hold:
      if (p.numbered_here) {
        // This node's own: nobody else keeps it. A copy is kept like one a first hop took and sent again
        // (naming the predecessor still unacknowledged then), should the predecessor never come here; the
        // original is held like any other, and moves with the interval.
        std::vector<packet> own{p};  // departed() counts the copy's bytes in while it is kept
        departed(own);
      }
      if (!received_.hold(std::move(p))) {
        logger()->debug("{}: no room to hold a packet from {:x} for {} before its predecessor; its sender sends it "
                        "again", config_.name, source, vnode);
      }
      return;
    case receive_streams::verdict::malformed:
      if (const auto held_back = stream_log_.pass(std::chrono::steady_clock::now())) {
        logger()->warn("{}: a packet from {:x} for {} names a predecessor not before it, or where its "
                       "acknowledgement goes wrongly; dropped ({} more such lines held back)",
                       config_.name, source, vnode, *held_back);
      }
      return;
  }
}

void forwarder::owe_acks(node_id source, bool at_once) {
  if (at_once) return send_acks(source);
  arm_once(ack_timer_, ack_armed_, config_.end_to_end_ack_delay, alive_, [this] {
    flush_acks();
    const auto now = std::chrono::steady_clock::now();
    if (now - expired_at_ >= std::chrono::minutes(1)) {
      received_.expire(now);
      expired_at_ = now;
    }
  });
}

void forwarder::flush_acks() {
  for (const node_id source : received_.owing()) send_acks(source);
}

// One packet to the sender's resource name with everything owed to it (a packet of this node's own: it counts
// against nothing an application reserved, like a forwarded one); or, for packets an earlier incarnation of the
// sender numbered, to the incarnation that keeps them now, saying whose numbers they are.
void forwarder::send_acks(node_id source) {
  const node_id to = received_.ack_to(source);
  const auto acks = received_.take_acks(source, std::chrono::steady_clock::now());
  if (acks.empty()) return;
  packet a;
  a.dest = to;
  a.source = self_;
  a.tag = to == source ? stream_ack_tag : stream_ack_for_tag;
  a.hops_left = config_.hop_limit;
  a.body = to == source ? encode_acks(acks) : encode_acks_for(source, acks);
  route_in_transit(std::move(a));
}

void forwarder::on_stream_acks(const packet& p) {
  const auto acks = decode_acks(p.body);
  if (!acks || !apply_acks(sent_, *acks)) warn_bad_acks(p);
}

void forwarder::on_stream_acks_for(const packet& p) {
  auto acks = decode_acks_for(p.body);
  if (!acks) return warn_bad_acks(p);
  const auto it = inherited_.find(acks->first);
  // Those of an earlier incarnation whose packets this one no longer keeps (acknowledged already) free nothing.
  if (it == inherited_.end()) return;
  // The earlier incarnation's numbers past those it kept are unknown here (a copy of a packet it had
  // acknowledged already can come from its log): an acknowledgement beyond them frees all it kept.
  for (auto& a : acks->second) a.upto = std::min(a.upto, it->second.last_stamped());
  apply_acks(it->second, acks->second);
  if (it->second.streams() == 0) inherited_.erase(it);
}

// False if an acknowledgement names a number never given.
bool forwarder::apply_acks(send_streams& own, const std::vector<stream_ack>& acks) {
  bool ok = true;
  for (const stream_ack& a : acks) {
    if (const auto freed = own.on_ack(a.vnode, a.upto)) {
      account(-static_cast<std::int64_t>(*freed));
    } else {
      ok = false;
    }
  }
  return ok;
}

void forwarder::warn_bad_acks(const packet& p) {
  if (const auto held_back = stream_log_.pass(std::chrono::steady_clock::now())) {
    logger()->warn("{}: {:x} sent a malformed acknowledgement, or one of packets never sent ({} more such lines "
                   "held back)", config_.name, p.source, *held_back);
  }
}

void forwarder::keep_departed(link_session& session) {
  if (!session.has_departed()) return;
  session.take_departed(departed_);
  departed(departed_);
  departed_.clear();
}

void forwarder::departed(std::vector<packet>& packets) {
  const auto now = std::chrono::steady_clock::now();
  for (auto& p : packets) {
    const std::uint64_t bytes = p.footprint();
    p.arrived_from = 0;
    send_streams* own = own_of(p.source);
    account(static_cast<std::int64_t>(bytes - (own ? own->keep(std::move(p), now) : bytes)));
  }
  // A packet kept for the first time is due after end_to_end_resend, which may be before what the timer waits
  // for (a packet sent again waits longer).
  if (resend_at_ && *resend_at_ > now + config_.end_to_end_resend) {
    resend_at_.reset();
    resend_timer_.cancel();
  }
  arm_resend();
}

// Armed for the earliest kept packet's due time; what is due goes out again by the routes there are then. While
// armed nothing is looked at: a packet kept later is due later (next_due() walks every kept packet).
void forwarder::arm_resend() {
  if (resend_at_) return;
  std::optional<std::chrono::steady_clock::time_point> due;
  for_each_own([&](send_streams& own) {
    if (const auto d = own.next_due(); d && (!due || *d < *due)) due = d;
  });
  if (!due) return;
  resend_at_ = *due;
  resend_timer_.expires_at(*due);
  resend_timer_.async_wait([this, alive = alive_, at = *due](std::error_code ec) {
    if (ec || !*alive || resend_at_ != at) return;  // cancelled, or re-armed for an earlier time meanwhile
    resend_at_.reset();
    const auto now = std::chrono::steady_clock::now();
    std::vector<packet> due_now;
    for_each_own([&](send_streams& own) {
      for (auto& p : own.take_due(now)) due_now.push_back(std::move(p));
    });
    if (!due_now.empty()) {
      logger()->debug("{}: {} packets not acknowledged by their owners go out again", config_.name, due_now.size());
    }
    std::vector<packet> no_owner;
    for (auto& p : due_now) {
      // Nobody this node knows of assumes it: a copy would only wait beside the first one. Kept again, for
      // twice as long.
      if (!routing_.is_local(p.dest) && !routing_.next_hop_for(p.dest)) {
        account(-static_cast<std::int64_t>(p.footprint()));  // departed() counts it again
        // A resource name is never reused: one kept through the longest backoff whose incarnation has had no
        // route for as long names an incarnation that is gone, and its stream is given up.
        send_streams* own = own_of(p.source);
        if (p.dest >= config_.space_size && own && own->waited(p) >= resend_max) {
          const auto since = routing_.table().unreachable_since(p.dest);
          if (since && (*since == std::chrono::steady_clock::time_point::min() || now - *since >= resend_max)) {
            account(-static_cast<std::int64_t>(own->drop_stream(p.dest)));
            ++streams_given_up_;
            logger()->warn("{}: {:x} has had no route for a minute or more: what this node kept for it is dropped",
                           config_.name, p.dest);
            continue;
          }
        }
        if (p.dest < config_.space_size) ownerless_.insert(p.dest);
        no_owner.push_back(std::move(p));
        continue;
      }
      p.hops_left = config_.hop_limit;
      route(std::move(p));
    }
    departed(no_owner);
  });
}

// Virtual nodes whose kept packets found nobody assuming them, and that have an owner now (an adopter, or the
// old one back): their kept packets go at once, not after the backoff they reached meanwhile.
void forwarder::owners_found() {
  const auto now = std::chrono::steady_clock::now();
  bool hastened = false;
  for (auto it = ownerless_.begin(); it != ownerless_.end();) {
    const std::uint64_t vnode = *it;
    bool kept = false;  // else acknowledged meanwhile (by an owner reached through a route gone again)
    for_each_own([&](send_streams& own) { kept = kept || own.has_stream(vnode); });
    if (kept && !routing_.is_local(vnode) && !routing_.next_hop_for(vnode)) {
      ++it;
      continue;
    }
    if (kept) for_each_own([&](send_streams& own) { own.hasten(vnode, now); });
    hastened = hastened || kept;
    it = ownerless_.erase(it);
  }
  if (hastened) rearm_resend();
}

void forwarder::send_all_again() {
  const auto by = std::chrono::steady_clock::now() + config_.end_to_end_resend;
  for_each_own([&](send_streams& own) { own.hasten_all(by); });
  rearm_resend();
}

// For a due time earlier than the one the timer waits for.
void forwarder::rearm_resend() {
  resend_at_.reset();
  resend_timer_.cancel();
  arm_resend();
}

void forwarder::link_lost() {
  arm_once(stranded_timer_, stranded_armed_, config_.end_to_end_resend, alive_, [this] { send_stranded(); });
}

// Links down for end_to_end_resend: copies of what this node sent on them unacknowledged take another way;
// while a link is down, look again.
void forwarder::send_stranded() {
  const auto now = std::chrono::steady_clock::now();
  bool still_down = false;
  for (auto& [id, nb] : links_.neighbours()) {
    if (nb->is_up()) continue;
    if (now - nb->down_since < config_.end_to_end_resend) {
      still_down = true;
      continue;
    }
    auto copies = nb->session.copy_stranded();
    if (copies.empty()) continue;
    logger()->info("{}: the link to {} has been down for {} ms: {} packets of this node's it did not acknowledge "
                   "go another way", config_.name, nb->name, config_.end_to_end_resend.count(), copies.size());
    for (auto& p : copies) {
      p.hops_left = config_.hop_limit;
      route_in_transit(std::move(p));
    }
  }
  if (still_down) link_lost();
}

std::pair<std::vector<stream_state>, std::vector<packet>> forwarder::take_streams(std::uint64_t lo,
                                                                                   std::uint64_t hi) {
  auto taken = received_.take_interval(lo, hi);
  flush_acks();  // for what was delivered here: the senders hear it from this node, not from the next owner
  return taken;
}

void forwarder::adopt_streams(const std::vector<stream_state>& states) {
  if (const auto left_out = received_.adopt(states, std::chrono::steady_clock::now())) {
    logger()->warn("{}: {} streams' states came with an interval, more than a node keeps; {} left out",
                   config_.name, states.size(), left_out);
  }
  if (!states.empty()) owe_acks(states.front().source, false);
}

std::vector<packet> forwarder::take_unacknowledged() {
  std::vector<packet> all;
  for_each_own([&](send_streams& own) {
    for (auto& p : own.take_all()) all.push_back(std::move(p));
  });
  std::erase_if(inherited_, [](const auto& e) { return e.second.streams() == 0; });
  for (const auto& p : all) account(-static_cast<std::int64_t>(p.footprint()));
  return all;
}

// A packet from a log. One of an earlier incarnation of this node's own, numbered and to a virtual node, is
// kept until its owner acknowledges it, like one this node sent, under its numbers; the acknowledgement comes
// here (packet::ack_to_follows). Anything else goes on as it came.
void forwarder::route_logged(packet p) {
  const bool earlier_own = p.numbered_here && p.source != self_ && p.dest < config_.space_size &&
                           p.stream_seq != 0 && !(p.flags & packet::handed_over);
  p.numbered_here =
      earlier_own &&
      inherited_.try_emplace(p.source, resend_timing{config_.end_to_end_resend, resend_max}).first->second.resume(p);
  if (earlier_own) set_ack_to(p, self_);  // a second copy in the log too: its acknowledgement comes here
  route_in_transit(std::move(p));
}

send_streams* forwarder::own_of(node_id source) {
  if (source == self_) return &sent_;
  const auto it = inherited_.find(source);
  return it == inherited_.end() ? nullptr : &it->second;
}

std::size_t forwarder::count_unacknowledged(const std::function<bool(std::uint64_t)>& pred) const {
  std::size_t n = 0;
  for_each_own([&](const send_streams& own) { n += own.count_streams(pred); });
  return n;
}

}  // namespace phoenix::overlay
