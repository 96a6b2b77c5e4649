// node_messages.cpp — a node's application messages: ph_send's way out through one outbox to the overlay, and
// the way in, from the overlay to the inbox that the receive calls take from (docs/architecture.md, "One
// message's path").
#include <algorithm>
#include <mutex>
#include <phoenix/node.hpp>

#include "migration/message.hpp"
#include "phoenix/control.hpp"
#include "phoenix/node_impl.hpp"
#include "phoenix/service_messages.hpp"

namespace phoenix {

void Node::Impl::deliver(overlay::packet&& p) {
  if (p.tag == migration::protocol_tag) return migration_->on_packet(p);
  if (p.tag == control_tag) return on_control(std::move(p));
  if (!receivable_tag(p.tag)) return drop_unreceivable(p.tag, p.source);
  std::lock_guard lock(inbox_mu_);
  inbox_.emplace_back(p.dest, p.source, p.tag, std::move(p.body));
}

std::optional<Message> Node::Impl::take(int tag) {
  std::lock_guard lock(inbox_mu_);
  // any_tag takes the oldest application message: services' messages (negative tags) are theirs alone.
  const auto it = std::find_if(inbox_.begin(), inbox_.end(), [&](const Message& m) {
    if (tag == any_tag ? m.tag() < 0 : m.tag() != tag) return false;
    // Not before the adoption handler of its interval ran (node_adoption.cpp).
    return adoption_untold_.empty() || std::none_of(adoption_untold_.begin(), adoption_untold_.end(),
                                                    [&](const Interval& s) { return s.contains(m.dest()); });
  });
  if (it == inbox_.end()) return std::nullopt;
  Message m = std::move(*it);
  if (it == inbox_.begin()) inbox_.pop_front();  // the common case, without erase()'s general moves
  else inbox_.erase(it);
  ++received_total_;
  // Recorded before the inbox lock opens: a giver that releases the interval next (which takes this lock) then
  // sees the message in this thread's hands and packs only after it (messages_in_hand.hpp).
  if (m.tag() >= 0) in_hand_.handed_out(m.dest());
  return m;
}

// Pending migration steps (pack, unpack) run here too, on the receiving thread, between messages.
std::optional<Message> Node::Impl::receive(int tag, clock::time_point deadline, bool service) {
  came_back();
  if (tag < any_tag && !(service && tag <= first_service_tag)) return std::nullopt;
  if (auto m = take(tag)) return m;
  if (!running_) return std::nullopt;
  std::optional<Message> got;
  for (;;) {
    migration_->run_pending(*progress_);
    progress_->drive_until([&] { return (got = take(tag)).has_value() || migration_->has_pending(); },
                           deadline);
    if (got || !migration_->has_pending()) return got;
  }
}

std::error_code Node::Impl::check_send(int tag, std::size_t size, bool null_data, bool service) const {
  if (!running_) return make_error_code(PH_ESTATE);
  if ((tag < 0 && !(service && tag <= first_service_tag)) || (null_data && size > 0))
    return make_error_code(PH_EINVAL);
  if (size > config_.max_message_bytes) return make_error_code(PH_ETOOBIG);
  if (!overlay_->try_reserve(overlay::packet::footprint_of(size))) return make_error_code(PH_EAGAIN);
  return {};
}

std::error_code Node::Impl::send(vp_t dest, int tag, std::span<const std::byte> data) {
  if (auto ec = check_send(tag, data.size(), data.data() == nullptr)) return ec;
  return enqueue(dest, tag, copy_bytes(data));
}

std::error_code Node::Impl::send(vp_t dest, int tag, Bytes&& body) {
  if (auto ec = check_send(tag, body.size(), false)) return ec;
  return enqueue(dest, tag, std::move(body));
}

std::error_code Node::Impl::enqueue(vp_t dest, int tag, Bytes body) {
  overlay::packet p;
  p.dest = dest;
  p.tag = tag;
  p.body = std::move(body);
  // One queue for every sending thread keeps send order whether a packet goes out inline (the token was
  // free: the write happens before ph_send returns) or later, drained by whoever holds the token.
  {
    std::lock_guard lock(outbox_mu_);
    outbox_.push_back(std::move(p));
  }
  if (progress_->try_run([this] { drain_outbox(); })) return {};
  if (!drain_posted_.exchange(true)) {
    asio::post(progress_->io(), [this] {
      drain_posted_ = false;
      drain_outbox();
    });
  }
  return {};
}

void Node::Impl::drain_outbox() {
  std::vector<overlay::packet> batch;
  {
    std::lock_guard lock(outbox_mu_);
    batch.swap(outbox_);
  }
  sent_total_ += batch.size();
  for (auto& p : batch) overlay_->send(std::move(p));
}

std::vector<overlay::packet> Node::Impl::take_inbox_packets(const std::function<bool(vp_t)>& which) {
  std::vector<overlay::packet> out;
  std::lock_guard lock(inbox_mu_);
  for (auto it = inbox_.begin(); it != inbox_.end();) {
    if (!which(it->dest())) {
      ++it;
      continue;
    }
    overlay::packet p;
    p.dest = it->dest();
    p.source = it->source();
    p.tag = it->tag();
    p.hops_left = static_cast<std::uint8_t>(config_.hop_limit);
    p.flags = overlay::packet::handed_over;  // delivered here once: its next owner takes it as it is
    p.body = std::move(*it).take_body();
    out.push_back(std::move(p));
    it = inbox_.erase(it);
  }
  return out;
}

}  // namespace phoenix
