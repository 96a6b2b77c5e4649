// receive_streams.hpp — end-to-end delivery, the owner's half: which packets of each (sender, virtual node)
// stream this node delivered, packets that came before their predecessor, and the acknowledgements it owes
// (docs/overlay.md, "End-to-end delivery").
//
// A stream's state is the number of the last packet delivered. A packet is delivered once its predecessor
// (`stream_prev`) was, or at once if it names none; a number not above the last is a duplicate (a copy sent
// again, or one a dead relay's neighbour routed again). One whose predecessor has not come is held, up to
// `max_held_bytes` for the node; past that it is dropped, and its sender, which keeps it, sends it again. The
// state of the streams to an interval's virtual nodes moves with the interval (take_interval, adopt).
//
// Bounds: at most `max_streams` streams (past it the longest idle, with nothing held or owed, are forgotten),
// and a stream idle for `idle` since its last acknowledgement is forgotten. A copy that comes after that is delivered again; the sender sends
// copies only of what it has no acknowledgement for, for at most `idle` after it first left.
//
// Pure: no I/O, no clock (the time is passed in). One thread (the node's I/O context).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "overlay/packet.hpp"

namespace phoenix::overlay {

// The state of one stream, as it moves with an interval.
struct stream_state {
  node_id source = 0;
  std::uint64_t vnode = 0;
  std::uint64_t last = 0;  // the last packet delivered
  friend bool operator==(const stream_state&, const stream_state&) = default;
};

// What an owner acknowledges: its sender's packets to `vnode` delivered up to `upto`.
struct stream_ack {
  std::uint64_t vnode = 0;
  std::uint64_t upto = 0;
  friend bool operator==(const stream_ack&, const stream_ack&) = default;
};

struct stream_limits {
  std::size_t max_streams = 1u << 16;
  std::uint64_t max_held_bytes = 64ull << 20;
  std::chrono::steady_clock::duration idle = std::chrono::minutes(10);
  // An acknowledgement goes at once once this much is owed to one sender; before, when the host's delay ends.
  std::uint64_t ack_bytes = 1ull << 20;
  std::uint32_t ack_packets = 64;
  std::uint64_t space_size = 0;  // L: a packet that names a virtual node for its acknowledgements is malformed
};

class receive_streams {
 public:
  using clock = std::chrono::steady_clock;
  explicit receive_streams(stream_limits l = {}) : limits_(l) {}

  enum class verdict {
    deliver,    // deliver p now (the stream's state counts it as delivered)
    duplicate,  // drop p: it was delivered
    hold,       // p came before its predecessor: hold(p), then next_held() once the predecessor is delivered
    malformed,  // its numbers cannot be (a predecessor not before it): drop it
  };
  struct result {
    verdict what;
    bool ack_now = false;  // enough is owed to p's sender to acknowledge at once (take_acks)
  };
  // p arrived for a virtual node this node assumes. No time: a stream's idleness counts from its last
  // acknowledgement (take_acks), as one owed an acknowledgement is never idle.
  result check(const packet& p);
  // Keeps p (verdict hold) until its predecessor comes. False if that would pass max_held_bytes: drop it.
  bool hold(packet p);
  // After a delivery to (source, vnode): a held packet that may be delivered now (counted as delivered).
  std::optional<packet> next_held(node_id source, std::uint64_t vnode);
  bool holds_any() const { return held_bytes_ > 0; }

  // Acknowledgements owed: the senders owed any, where they go (the sender's resource name, or the one the
  // latest packet it is owed for named: packet::ack_to_follows), and then each one's (taken, so owed no more).
  std::vector<node_id> owing() const;
  node_id ack_to(node_id source) const;
  std::vector<stream_ack> take_acks(node_id source, clock::time_point now);

  // The streams to [lo, hi), and the packets held for it, leave with the interval.
  std::pair<std::vector<stream_state>, std::vector<packet>> take_interval(std::uint64_t lo, std::uint64_t hi);
  // Streams that came with an interval (or from a log): merged, and acknowledged again (the giver's own
  // acknowledgement may have died with it). At most max_streams of them; returns how many were left out.
  std::size_t adopt(const std::vector<stream_state>& states, clock::time_point now);
  // Forgets streams idle for `idle` with nothing held or owed. Returns how many.
  std::size_t expire(clock::time_point now);

  std::size_t streams() const { return streams_.size(); }
  std::uint64_t held_bytes() const { return held_bytes_; }
  std::optional<std::uint64_t> last(node_id source, std::uint64_t vnode) const;

 private:
  using key = std::pair<node_id, std::uint64_t>;
  struct key_hash {
    std::size_t operator()(const key& k) const noexcept {
      return std::hash<std::uint64_t>{}(k.first * 0x9E3779B97F4A7C15ull ^ k.second);
    }
  };
  struct stream {
    std::uint64_t last = 0;
    clock::time_point seen{};  // acknowledged last (or adopted, or added)
    bool owed = false;                     // delivered since the last acknowledgement
    std::map<std::uint64_t, packet> held;  // by number
  };
  struct debt {
    std::vector<std::uint64_t> vnodes;  // streams with owed set
    std::vector<stream_ack> left;       // owed for streams that left with their interval
    std::uint64_t bytes = 0;
    std::uint32_t packets = 0;
    node_id ack_to = 0;  // where they go, if not to the sender (packet::ack_to_follows)
  };

  stream& find_or_add(const key& k);
  // Returns whether the sender is owed enough to acknowledge at once.
  bool owe(const key& k, stream& s, std::uint64_t bytes, node_id ack_to);
  void make_room();

  stream_limits limits_;
  std::unordered_map<key, stream, key_hash> streams_;
  std::unordered_map<node_id, debt> owed_;
  // The stream and the debt last used: a run of packets from one sender to one virtual node looks them up once.
  // Elements of an unordered_map stay put until erased; whatever erases resets them.
  key last_key_{};
  stream* last_stream_ = nullptr;
  node_id last_source_ = 0;
  debt* last_debt_ = nullptr;
  std::uint64_t held_bytes_ = 0;
  clock::time_point latest_{};  // the latest time passed in: new streams start from it
};

}  // namespace phoenix::overlay
