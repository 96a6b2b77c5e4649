// sender_log.hpp — what one sender replica sent, kept until no live receiver replica needs it (paper 002,
// section 3, "buffer management module"; paper 004, section 2).
//
// VolpexMPI logs every message at its sender only (distributed sender-based logging) and lets each receiver
// replica pull it from ONE replica of the sending rank. A message is named by its stream (sender rank,
// receiver rank, tag) and its virtual timestamp on that stream: 1, 2, 3... (paper 002, section 3: "timestamps
// messages by counting the number of messages exchanged between pairs of processes"). Replicas are
// deterministic, so every replica of a sender logs the same messages under the same names: any of them can
// serve any receiver replica, and a lagging receiver replica gets exactly what its leader got. This log is that
// buffer for one sender replica (the sender rank is implicit: it is ours); its streams are keyed by (receiver
// rank, tag).
//
// When an entry goes (the paper keeps a circular buffer and leaves a receiver that lags past it waiting
// forever, paper 004, section 2; we make both explicit):
//   - consumed: every replica of the receiving rank consumed it, is dead, or fell behind. The replicas of rank
//     d are 0..K-1 plus any late replica (index >= K) seen in a lookup, a first_unconsumed or a note_consumed.
//     One never heard from has consumed nothing, so a replica started late catches up from the log.
//   - capacity: while the bodies held exceed capacity_bytes, the oldest entry held goes, and the replicas that
//     still needed it are declared fallen behind: from then on they get `fallen_behind` whatever they ask (an
//     explicit error, never a wrong or missing message in silence), and hold nothing back.
// Entries go only in trim(); append, lookup and the notes never drop anything (so a caller may answer a lookup
// and then trim, without the answer's body vanishing under it — bodies are shared and immutable anyway).
//
// Data structure:
//   streams_     (dst, tag) -> stream: a deque of the bodies still held, in timestamp order, holding exactly
//                dropped+1 .. latest (entries only ever go from the front of their stream: consumption is a
//                prefix "1..ts", and the oldest entry held overall is the front of its stream), plus what each
//                receiver replica consumed on it. A lookup is a map find and a deque index: O(log streams).
//   receivers_   dst -> the replicas of that rank known here, each live, dead and/or fallen behind.
//   send_order_  (stream, ts) in this replica's send order, for the capacity rule: its front is the oldest
//                entry held, once the items of entries already dropped (ts <= their stream's watermark) are
//                skipped.
//                Those stale items are swept out whenever they outnumber the entries held, so the queue stays
//                O(entries) and the sweep costs amortised O(1) per append.
//   dirty_       the streams whose droppable prefix may have grown since the last trim (an append, a report of
//                progress, a death or a fall behind on their rank); trim looks at those only, never at every
//                entry, and each entry is dropped once.
//
// Single-threaded: the owner serialises every call. No I/O, no clock.
#pragma once

#include <compare>
#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "phoenix/volpex/object.hpp"

namespace phoenix::volpex {

using rank_id = std::uint32_t;        // a logical process (MPI-like rank)
using replica_index = std::uint32_t;  // which replica of a rank: 0 .. K-1, or >= K for a replica started later
using timestamp = std::uint64_t;      // per stream (sender rank, receiver rank, tag): 1 for the first message

class sender_log {
 public:
  struct options {
    // Message bodies held; past it the slowest replicas fall behind.
    std::uint64_t capacity_bytes = 256ull << 20;
    unsigned replicas = 1;  // K: replicas of every receiving rank (at least 1)
  };
  explicit sender_log(options o);

  // Logs a message this replica sends to rank `dst` with `tag` (tag >= 0); returns its timestamp on (dst, tag).
  timestamp append(rank_id dst, std::int32_t tag, object body);

  enum class status : std::uint8_t { found = 1, not_yet = 2, trimmed = 3, fallen_behind = 4 };
  struct lookup_result {
    status result = status::not_yet;
    std::int32_t tag = 0;
    timestamp ts = 0;
    object body;  // found only
    // The latest timestamp this log has on the stream asked for (for timestamp-based selection).
    timestamp latest = 0;
  };
  // Replica `who` of rank `dst` asks for message ts on (dst, tag). Asking for ts means it consumed 1..ts-1 of
  // that stream; `found` also counts ts as consumed (the answer will reach it: links are reliable).
  //   fallen_behind: `who` was declared fallen behind by this log (see trim) — whatever it asks.
  //   trimmed: ts was already dropped (every replica then known had consumed it, or capacity forced it). A ts
  //            of 0 names no message and is answered trimmed too: an explicit error rather than a wait forever.
  //   not_yet: this replica has not sent it yet (it lags the receiver); the caller keeps the request and asks
  //            again after the next append.
  // A replica marked dead that still asks is answered like any other; it just holds nothing back.
  lookup_result lookup(rank_id dst, replica_index who, std::int32_t tag, timestamp ts);

  // Wildcard receives (MPI_ANY_SOURCE / ANY_TAG): the earliest message (in this replica's send order) to `dst`
  // that `who` has not consumed, given what it consumed per tag (`consumed[tag]` = last ts consumed; tags
  // absent = 0), with tag == tag_filter, or any tag when tag_filter < 0. Does NOT count it consumed (the
  // receiver may not take it), but the map itself is progress and is noted as note_consumed would. Results:
  //   found: tag, ts, body and latest of that message's stream.
  //   trimmed: the first unconsumed message of some matching stream was dropped (the earliest of all cannot be
  //            told then); tag and ts name it — the lowest such tag.
  //   not_yet: none yet; tag is tag_filter, and latest that stream's when tag_filter >= 0 (else 0).
  //   fallen_behind: as for lookup.
  lookup_result first_unconsumed(rank_id dst, replica_index who,
                                 const std::map<std::int32_t, timestamp>& consumed, std::int32_t tag_filter);

  // Progress reported by a receiver replica (it may have pulled from another replica of this rank, and may be
  // ahead of what this replica has sent: the entries it already has are then dropped as soon as they are sent).
  void note_consumed(rank_id dst, replica_index who, std::int32_t tag, timestamp ts);
  // A receiving replica given up (no route for long): it no longer holds anything back.
  void mark_dead(rank_id dst, replica_index who);
  // It was not dead after all (its route came back): it holds back what is still here from now on; what went
  // meanwhile is answered trimmed.
  void mark_alive(rank_id dst, replica_index who);
  bool is_dead(rank_id dst, replica_index who) const;

  timestamp latest(rank_id dst, std::int32_t tag) const;  // 0 if nothing was sent on the stream

  // Drops every entry that each replica of its receiving rank has consumed, is dead, or fell behind; then,
  // while the bodies held exceed capacity_bytes, the oldest entry held together with whatever else only the
  // replicas that still needed it needed, declaring those replicas fallen behind (see the top of this file). A
  // single body larger than capacity_bytes thus makes every replica that still needs it fall behind. Returns
  // the replicas declared fallen behind by this call, in the order declared.
  std::vector<std::pair<rank_id, replica_index>> trim();
  bool is_fallen_behind(rank_id dst, replica_index who) const;

  // True when no entry is held (a finishing replica may exit without leaving anyone short).
  bool drained() const;
  // True when some entry for rank dst is held (one of its replicas still holds it back).
  bool holds_for(rank_id dst) const;

  struct stats {
    std::uint64_t entries = 0, bytes = 0;     // held now
    std::uint64_t appended = 0, dropped = 0;  // over the life of the log
    std::uint64_t fallen_behind = 0;          // replicas declared fallen behind
  };
  stats statistics() const;

 private:
  struct stream_key {
    rank_id dst = 0;
    std::int32_t tag = 0;
    friend auto operator<=>(const stream_key&, const stream_key&) = default;
  };
  struct entry {
    object body;
    std::uint64_t order = 0;  // position in this replica's send order (wildcard receives take the earliest)
  };
  struct stream {
    std::deque<entry> held;  // timestamps dropped+1 .. latest
    timestamp dropped = 0;   // every ts <= dropped is gone
    timestamp latest = 0;
    std::map<replica_index, timestamp> consumed;  // last ts each receiver replica consumed (absent: 0)
    bool dirty = false;                           // listed in dirty_
  };
  struct receiver_replica {
    bool dead = false;
    bool fallen_behind = false;
    bool holds_back() const { return !dead && !fallen_behind; }
  };
  using receiver = std::map<replica_index, receiver_replica>;  // the replicas of one rank known here

  receiver& receiver_of(rank_id dst);
  const receiver_replica* find_replica(rank_id dst, replica_index who) const;
  stream& stream_of(stream_key k);
  void note(stream_key k, stream& s, replica_index who, timestamp ts);
  void mark_dirty(stream_key k, stream& s);
  void mark_rank_dirty(rank_id dst);
  timestamp consumed_by_all(const stream& s, const receiver& r) const;
  void drop_consumed();
  void drop_front(stream& s);
  void declare_fallen_behind(stream_key k, const stream& s, timestamp ts,
                             std::vector<std::pair<rank_id, replica_index>>& fallen);
  void sweep_send_order();

  options options_;
  std::map<stream_key, stream> streams_;
  std::map<rank_id, receiver> receivers_;
  std::deque<std::pair<stream_key, timestamp>> send_order_;
  std::vector<stream_key> dirty_;
  stats stats_;
};

}  // namespace phoenix::volpex
