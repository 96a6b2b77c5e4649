#include "overlay/links/link_session.hpp"

#include <algorithm>

namespace phoenix::overlay {

link_session::link_session(std::uint64_t window_bytes, std::uint64_t first_seq)
    : window_bytes_(window_bytes),
      next_seq_(first_seq),
      peer_ack_(first_seq - 1),
      written_(first_seq - 1),
      received_(first_seq - 1),
      acked_to_peer_(first_seq - 1) {}

void link_session::enqueue(packet p) {
  bytes_held_ += p.footprint();
  pending_.push_back(std::move(p));
}

const sequenced_packet* link_session::next_to_send() {
  if (sent_here_ < unacked_.size()) return &unacked_[sent_here_++];  // resend after a reconnect
  if (pending_.empty()) return nullptr;
  // The window bounds unacknowledged bytes; a packet always fits while little is in flight (small_in_flight_bytes),
  // so a packet larger than the window moves.
  const std::uint64_t size = pending_.front().footprint();
  if (in_flight_bytes_ > small_in_flight_bytes && in_flight_bytes_ + size > window_bytes_) return nullptr;
  unacked_.push_back(sequenced_packet{next_seq_++, std::move(pending_.front())});
  pending_.pop_front();
  in_flight_bytes_ += size;
  ++sent_here_;
  return &unacked_.back();
}

std::optional<std::uint64_t> link_session::on_ack(std::uint64_t ack) {
  if (ack >= next_seq_) return std::nullopt;
  peer_ack_ = std::max(peer_ack_, ack);
  return free_acknowledged();
}

std::uint64_t link_session::mark_written(std::uint64_t seq) {
  written_ = std::max(written_, seq);
  return free_acknowledged();
}

std::uint64_t link_session::free_acknowledged() {
  const std::uint64_t upto = std::min(peer_ack_, written_);
  std::uint64_t freed = 0;
  while (!unacked_.empty() && unacked_.front().seq <= upto) {
    freed += unacked_.front().pkt.footprint();
    if (unacked_.front().pkt.numbered_here) departed_.push_back(std::move(unacked_.front().pkt));
    unacked_.pop_front();
    if (sent_here_ > 0) --sent_here_;
  }
  in_flight_bytes_ -= freed;
  bytes_held_ -= freed;
  return freed;
}

std::uint64_t link_session::resume(std::uint64_t peer_resume_ack) {
  // No write is in progress on a new connection, so everything the peer has can go at once. An ack beyond
  // what we sent cannot come from this session's peer; clamp it and resend the rest.
  sent_here_ = 0;
  written_ = next_seq_ - 1;
  const auto freed = on_ack(std::min(peer_resume_ack, next_seq_ - 1));
  written_ = peer_ack_;
  return freed.value_or(0);
}

std::vector<packet> link_session::take_unsent() {
  std::vector<packet> out;
  out.reserve(pending_.size());
  for (auto& p : pending_) {
    bytes_held_ -= p.footprint();
    out.push_back(std::move(p));
  }
  pending_.clear();
  return out;
}

std::vector<packet> link_session::take_all() {
  std::vector<packet> out;
  out.reserve(unacked_.size() + pending_.size());
  for (auto& sp : unacked_) out.push_back(std::move(sp.pkt));
  for (auto& p : pending_) out.push_back(std::move(p));
  unacked_.clear();
  pending_.clear();
  sent_here_ = 0;
  bytes_held_ = 0;
  in_flight_bytes_ = 0;
  return out;
}

std::vector<packet> link_session::copy_stranded() {
  std::vector<packet> out;
  for (auto& sp : unacked_) {
    if (!sp.pkt.numbered_here || sp.copied) continue;
    sp.copied = true;
    out.push_back(sp.pkt);
  }
  return out;
}

link_session::receipt link_session::on_receive(std::uint64_t seq) {
  if (seq <= received_) return receipt::duplicate;
  if (seq != received_ + 1) return receipt::gap;
  received_ = seq;
  return receipt::accept;
}

bool link_session::holds_only_beyond(std::uint64_t bound) const {
  for (const auto& s : unacked_)
    if (s.pkt.dest < bound) return false;
  for (const auto& p : pending_)
    if (p.dest < bound) return false;
  return true;
}

}  // namespace phoenix::overlay
