// send_streams.hpp — end-to-end delivery, the sender's half: what this node sent to virtual nodes and their
// owners have not acknowledged yet (docs/overlay.md, "End-to-end delivery").
//
// Every packet this node sends to a virtual node is numbered: `stream_seq` from one counter per incarnation
// (so numbers only grow, whichever virtual node a packet is for) and `stream_prev`, the number of the packet
// before it to the same virtual node if the owner has not acknowledged that one yet, else 0. The owner
// delivers a packet once its predecessor is delivered (receive_streams.hpp). A packet the first hop
// acknowledged is kept here, not freed, until the owner acknowledges it; one not acknowledged `resend_after`
// after it left goes out again (then after twice as long, up to `resend_max`), by whatever route there is then:
// a relay that crashed with it, or restarted without it, loses nothing. A packet sent again names the
// predecessor still not acknowledged then: an owner that lost its state (an adopter) must not wait for one that
// will never come again.
//
// Pure: no I/O, no clock (the time is passed in). One thread (the node's I/O context).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "overlay/packet.hpp"

namespace phoenix::overlay {

struct resend_timing {
  std::chrono::steady_clock::duration resend_after = std::chrono::seconds(2);
  std::chrono::steady_clock::duration resend_max = std::chrono::seconds(60);
};

class send_streams {
 public:
  using clock = std::chrono::steady_clock;
  explicit send_streams(resend_timing t = {}) : timing_(t) {}

  // Numbers p, a new packet from this node to virtual node p.dest (its stream_seq and stream_prev).
  void stamp(packet& p);
  // A packet an earlier incarnation numbered (its log's, p.source that incarnation's name), outstanding here
  // again under its numbers: one send_streams per earlier incarnation. False if it has no number, or that
  // number is outstanding already.
  bool resume(const packet& p);
  // The first hop acknowledged p: kept until its owner acknowledges it. Returns p's footprint if the owner
  // already did (p is dropped at once), else 0.
  std::uint64_t keep(packet p, clock::time_point now);
  // The owner of `vnode` delivered this node's packets to it up to `upto`. Returns the footprints of the kept
  // packets freed; nullopt if `upto` is a number this node never gave a packet to that virtual node.
  std::optional<std::uint64_t> on_ack(std::uint64_t vnode, std::uint64_t upto);
  // Kept packets due to go out again; they come back through keep() when the first hop has them again.
  std::vector<packet> take_due(clock::time_point now);
  // `vnode` has an owner again, perhaps a new one: its kept packets are due by `at`, and back off from
  // resend_after again (what backed off while nobody assumed it must not keep the new owner waiting).
  void hasten(std::uint64_t vnode, clock::time_point at);
  // The same for every stream (a node about to leave waits for what it sends again).
  void hasten_all(clock::time_point at);
  // How long p, just taken by take_due(), had waited: resend_after at first, doubling up to resend_max.
  clock::duration waited(const packet& p) const;
  // Forgets the stream to `dest` and every packet kept of it (an incarnation that is gone); their footprint.
  std::uint64_t drop_stream(std::uint64_t dest);
  // When take_due() next has something, if anything is kept.
  std::optional<clock::time_point> next_due() const;
  // Every kept packet, oldest first per stream (for the finalize log); the streams stay numbered.
  std::vector<packet> take_all();

  std::uint64_t bytes_kept() const { return bytes_kept_; }
  std::size_t packets_kept() const { return packets_kept_; }
  std::size_t streams() const { return streams_.size(); }  // virtual nodes with packets not acknowledged
  bool has_stream(std::uint64_t vnode) const { return streams_.contains(vnode); }
  // How many of those streams' virtual nodes satisfy `pred`.
  template <class Pred>
  std::size_t count_streams(Pred pred) const {
    std::size_t n = 0;
    for (const auto& [vnode, s] : streams_) n += pred(vnode) ? 1 : 0;
    return n;
  }
  std::uint64_t last_stamped() const { return next_seq_ - 1; }

 private:
  struct outstanding {
    std::uint64_t seq = 0;
    std::optional<packet> kept;  // empty until the first hop acknowledged it (or while it is resent)
    clock::time_point due{};
    clock::duration backoff{};
  };
  struct stream {
    std::deque<outstanding> out;  // stamped and not acknowledged by the owner, in order
  };

  resend_timing timing_;
  std::uint64_t next_seq_ = 1;
  std::unordered_map<std::uint64_t, stream> streams_;  // by virtual node; a stream with nothing out is erased
  // The stream last used, and its virtual node: a run of packets to one virtual node looks it up once. Elements
  // of an unordered_map stay put until erased (erase() resets it).
  std::uint64_t last_vnode_ = 0;
  stream* last_ = nullptr;
  stream* find(std::uint64_t vnode);
  stream& find_or_add(std::uint64_t vnode);
  static void hasten(stream& s, clock::time_point at);
  void erase(std::unordered_map<std::uint64_t, stream>::iterator it);
  std::uint64_t bytes_kept_ = 0;
  std::size_t packets_kept_ = 0;
};

}  // namespace phoenix::overlay
