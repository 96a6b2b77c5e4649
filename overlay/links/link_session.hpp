// link_session.hpp — the reliable part of a link: sequence numbers, cumulative acknowledgements, resending.
//
// A session lives as long as both ends' incarnations do (it is keyed by the peer's resource name), while the
// connections under it may break and be re-established any number of times. Each data packet gets the next
// 64-bit sequence number (64 bits: no wrap-around within any realistic lifetime). The receiver accepts exactly
// the next expected number, drops anything older as a duplicate, and treats a gap as a broken connection (on
// one ordered byte stream a gap can only mean a bug or a mixed-up connection). Acknowledgements are cumulative.
//
// On a new connection the handshake carries each side's "resume ack" (the highest number received in order);
// resume() drops what the peer already has and queues the rest for sending again, in the original order, ahead
// of anything new. So cutting a connection loses and duplicates nothing.
//
// Flow control: at most window_bytes of packets are sent and unacknowledged; the rest waits in `pending`.
// Pure logic: no I/O, no clock, single-threaded (the node's I/O context).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "overlay/packet.hpp"

namespace phoenix::overlay {

struct sequenced_packet {
  std::uint64_t seq = 0;
  packet pkt;
  bool copied = false;  // copy_stranded() made a copy of it
};

class link_session {
 public:
  // A packet of any size may go while at most this much is in flight: a large body is not held back, for an
  // ack delay, behind a few small frames (an end-to-end acknowledgement, say) that filled no window. Both ends
  // keep to it; a receiver holds at most the window, this, and one packet.
  static constexpr std::uint64_t small_in_flight_bytes = 64 * 1024;

  explicit link_session(std::uint64_t window_bytes, std::uint64_t first_seq = 1);

  // --- sending side ---
  void enqueue(packet p);  // to be sent after everything already queued
  // The next packet to write, if the window allows; it moves to the unacknowledged list (kept for resending).
  const sequenced_packet* next_to_send();
  // Everything up to and including `ack` arrived at the peer: forget it. Returns the bytes freed, or nullopt
  // when `ack` acknowledges a number never sent (a broken or hostile peer). Packets are freed only once their
  // write has completed (mark_written), because a write in progress still reads their bytes.
  std::optional<std::uint64_t> on_ack(std::uint64_t ack);
  // The write of everything up to `seq` completed on the current connection. Returns the bytes freed.
  std::uint64_t mark_written(std::uint64_t seq);
  // Packets freed by on_ack or mark_written (counted in what they returned) that their origin keeps until their
  // owner acknowledges them (packet::numbered_here): handed back rather than destroyed.
  // Swapped with `into` (which the caller emptied), so that both keep their capacity.
  void take_departed(std::vector<packet>& into) { departed_.swap(into); }
  bool has_departed() const { return !departed_.empty(); }
  // A new connection came up and the peer has everything up to `peer_resume_ack`: resend the rest.
  // Precondition: peer_resume_ack <= highest_sent() (the caller refuses a connection that claims more).
  // Returns the bytes freed (what the peer had).
  std::uint64_t resume(std::uint64_t peer_resume_ack);
  std::uint64_t highest_sent() const { return next_seq_ - 1; }
  // Packets never sent (still pending), handed back so the caller can route them another way.
  std::vector<packet> take_unsent();
  // Every packet the session holds, sent or not, in order (used when the peer is gone for good).
  std::vector<packet> take_all();
  // Copies of the packets sent and unacknowledged that their origin keeps until their owner acknowledges them
  // (packet::numbered_here), each once: the peer may be gone, and only the origin can send them again. The
  // originals stay, for the peer should it come back (end-to-end delivery drops the second copy).
  std::vector<packet> copy_stranded();

  // --- receiving side ---
  enum class receipt { accept, duplicate, gap };
  receipt on_receive(std::uint64_t seq);
  std::uint64_t received() const { return received_; }   // highest sequence number received in order
  // The cumulative ack to send now: received(), unless acks are held back (hold_acks), when it stays at the last
  // one sent, so that the peer's window fills and it sends no more until they are let go.
  std::uint64_t ack_to_send() const { return acks_held_ ? acked_to_peer_ : received_; }
  bool ack_owed() const { return ack_to_send() != acked_to_peer_; }
  void note_ack_sent(std::uint64_t ack) {
    acked_to_peer_ = ack;
    if (ack == received_) bytes_beyond_ack_ = 0;
  }
  void hold_acks(bool held) { acks_held_ = held; }
  // Packets accepted beyond the last ack sent, and their footprints: what the peer has in flight, at least. A
  // peer that keeps to the window this node announced (window_bytes) never has more in flight than the window,
  // or than small_in_flight_bytes and one packet of any size (next_to_send).
  void count_beyond_ack(std::uint64_t footprint) { bytes_beyond_ack_ += footprint; }
  bool would_exceed_window(std::uint64_t footprint, std::uint64_t window_bytes) const {
    return bytes_beyond_ack_ > small_in_flight_bytes && bytes_beyond_ack_ + footprint > window_bytes;
  }
  std::uint64_t bytes_beyond_ack() const { return bytes_beyond_ack_; }
  // The window this end sends within: the least of its own and what the peer announced it accepts.
  void set_window(std::uint64_t window_bytes) { window_bytes_ = window_bytes; }
  bool acks_held() const { return acks_held_; }
  std::uint64_t bytes_since_ack() const { return bytes_since_ack_; }
  void count_received_bytes(std::uint64_t n) { bytes_since_ack_ += n; }
  void reset_ack_counter() { bytes_since_ack_ = 0; }

  // --- state ---
  std::size_t unacked_count() const { return unacked_.size(); }
  std::uint64_t bytes_held() const { return bytes_held_; }
  bool is_idle() const { return unacked_.empty() && pending_.empty(); }
  // Whether every packet held (sent or not) is addressed at or above `bound` (resource names, for bound = L).
  bool holds_only_beyond(std::uint64_t bound) const;

 private:
  std::uint64_t window_bytes_;
  std::uint64_t next_seq_;
  // Sent and not yet acknowledged, oldest first. unacked_[0, sent_here_) went out on the current connection;
  // the rest were sent on an earlier one and go out again before anything new.
  std::deque<sequenced_packet> unacked_;
  std::size_t sent_here_ = 0;
  std::deque<packet> pending_;
  std::uint64_t bytes_held_ = 0;
  std::uint64_t in_flight_bytes_ = 0;
  std::uint64_t peer_ack_ = 0;  // highest cumulative ack the peer sent
  std::uint64_t written_ = 0;   // highest sequence number whose write completed

  std::uint64_t free_acknowledged();
  std::vector<packet> departed_;

  std::uint64_t received_ = 0;
  std::uint64_t acked_to_peer_ = 0;
  bool acks_held_ = false;
  std::uint64_t bytes_beyond_ack_ = 0;
  std::uint64_t bytes_since_ack_ = 0;
};

}  // namespace phoenix::overlay
