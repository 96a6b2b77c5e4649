// apps/isort/isort.hpp — integer sort after NAS IS (paper, section 4.3.1) on phoenix nodes that join and leave
// while it runs: bucket counting and key exchange with the multicasting idiom, keys generated and verified the
// NAS way (npb.hpp).
//
// Data in the virtual node space (layout.hpp). Key i lives at v_A(i) = floor(i L / N), bucket j at
// v_B(j) = floor(j L / B), and the collector at virtual node 0. A node holds the key blocks (key_block.hpp)
// whose virtual nodes it assumes, the bucket records (bucket.hpp) of the buckets whose virtual nodes it
// assumes, and the collector (collector.hpp) if it assumes 0. Nothing about keys or buckets lives anywhere
// else: pack(s) hands over exactly the keys in v_A^-1(s), the records in v_B^-1(s) with everything buffered in
// them, and the collector if 0 is in s, and the node's knowledge of the collector's progress; unpack takes
// them. So a node may join or leave at any moment and the result stays exact.
//
// One iteration, data-driven: messages carry the global iteration g (round * 10 + it - 1), data that comes
// early waits in the records, and there is no barrier and no count of processes anywhere.
//  1. Counts. A key block at iteration g applies the iteration's key changes (NPB: key[it] = it,
//     key[it + 10] = MAX_KEY - it; at a round's start it generates its keys anew), counts its keys per bucket
//     and multicasts the counts over buckets [0, B) with f = v_B, with its key range [a, b) and its
//     partial-verification test keys. A record's counts are complete when the key ranges cover [0, N).
//  2. Offsets. When the counts of a run of consecutive records on one node [j0, j1) are complete, the node
//     gives each record of the run the total of the run's records below it and multicasts the run's total,
//     with the range [j0, j1), over buckets [j1, B). A record's offset (the rank of its first key) is complete
//     when the ranges it has heard of cover [0, j). Each bucket's total is announced exactly once, by whoever
//     holds its record when its counts complete.
//  3. Keys. The key block sends its keys bucket by bucket, merging `chunk` consecutive buckets into one message
//     multicast over their range with f = v_B (trimmed to the non-empty ends); the message carries per-bucket
//     counts so each receiver takes its buckets' keys; the records of the key block's own node take theirs
//     directly, without a message. A record's keys are complete when there are as many as its counts say.
//     Small chunks mean many messages, large ones a message forwarded along the multicasting tree (the
//     paper's trade-off); the default is B / 16.
//  4. Ranking. A complete record ranks its keys by counting over its value range, as NPB ranks a bucket, and
//     checks the test keys that fall to it: NPB checks the number of keys <= k - 1 for a test key of value k,
//     so the record of bucket(k - 1) does (bucket 0 takes, and fails, a key NPB does not check). At the last
//     iteration of a round it also places its keys by rank and checks their order (NPB's full_verify). Runs of
//     records ranked together on one node report to virtual node 0; key blocks report the checksum of their
//     keys there at the last iteration of a round. The collector knows iteration g is over when the reports
//     cover buckets [0, B), all five test keys were checked and (last iteration) the key reports cover [0, N).
//  5. Progress. The collector multicasts complete_through (every iteration below it is over) over [0, L) with
//     the identity map. A key block runs iteration g only when g < complete_through + window (default 2), which
//     bounds what records buffer; records forget the iterations below it. complete_through = rounds * 10 means
//     the run is over: the node holding the collector has the Verification (the RESULT), and every node that
//     receives that progress message — all that assume a virtual node — stops, as TaskPool's "done" does.
//
// Decisions where NPB or the paper leave a choice:
// - NPB's one untimed warm-up iteration is not run: it only repeats iteration 1's key changes.
// - `rounds` repeats the 10-iteration benchmark, each round from freshly generated keys (so runs last long
//   enough for nodes to join and leave mid-run); every round is verified. Rounds are identical, so the result
//   is the same for any number of nodes and any joins and leaves, and equal to sequential() over as many
//   rounds.
// - The full verification's multiset check compares checksums (sums of a 64-bit mix of each key) of what the
//   key holders had and what the buckets ranked; the sorted checksum (a mix of each position and its key) goes
//   into the RESULT, and the program compares that with the sequential sort.
// - Every message is handled by whoever assumes its virtual node when it arrives; one for a bucket a node does
//   not hold is a bug or a forgery, counted in bad_messages (a node process that saw any exits with status 1,
//   which fails the run).
//
// Threads: a Sorter belongs to one application thread, which calls run(); the state handlers run on it, inside
// the node's receive calls and leave().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <phoenix/node.hpp>
#include <span>
#include <string>
#include <vector>

#include "apps/isort/bucket.hpp"
#include "apps/isort/collector.hpp"
#include "apps/isort/key_block.hpp"
#include "apps/isort/layout.hpp"
#include "apps/isort/messages.hpp"
#include "apps/isort/npb.hpp"
#include "phoenix/launch/app_cluster.hpp"
#include "phoenix/launch/run_control.hpp"

namespace phoenix::apps::isort {

struct SortOptions {
  std::uint32_t rounds = 1;         // at least 1
  std::uint32_t chunk_buckets = 0;  // buckets per key message; 0: B / 16
  std::uint32_t window = 2;         // at least 1: iterations a key block may run ahead of complete_through
  // Key blocks hold at most this many keys (0: N / 16), and one runs an iteration per turn of the node's loop:
  // a node answers joins and leaves between blocks, so a join is not held up for a whole iteration (or a
  // round's key generation) on all of a node's keys, and the keys it takes have not been generated yet.
  std::uint64_t block_keys = 0;
  int first_tag = 3000;             // uses first_tag .. first_tag + tag_count - 1
  std::chrono::milliseconds idle_wait{5};  // how long an idle node blocks in recv_for
  // One leave attempt; between attempts the node handles its messages (near the end of a run the progress
  // message that ends it may be waiting while the neighbours have stopped and cannot take its interval).
  std::chrono::milliseconds leave_timeout{2000};
  std::chrono::milliseconds leave_retry{200};
};

struct SortStats {
  std::uint64_t keys_ranked = 0;     // by this node's records: the progress unit
  std::uint64_t key_iterations = 0;  // iterations run by this node's key blocks
  // Keys its key blocks handed to this node's records directly, and sent to other nodes' buckets in messages.
  std::uint64_t keys_handed = 0, keys_sent = 0;
  std::uint64_t keys_moved_out = 0, keys_moved_in = 0;
  std::uint64_t buckets_moved_out = 0, buckets_moved_in = 0;
  std::uint64_t bad_messages = 0;  // malformed, or for data this node does not hold, or a state it refused
  std::uint64_t send_errors = 0;
};

class Sorter {
 public:
  // Installs the node's state handlers: construct it before the node joins or assumes anything it may give
  // away. Needs N <= L.
  Sorter(Node& node, const NpbClass& c, SortOptions options = {});
  Sorter(const Sorter&) = delete;
  Sorter& operator=(const Sorter&) = delete;

  // The first node: every key, every bucket and the collector (it assumes, or is about to assume, [0, L)).
  void start();

  using Hooks = launch::RunHooks;
  using End = launch::RunEnd;
  End run(const Hooks& hooks);

  // The verification, on the node whose collector saw the last iteration complete.
  const std::optional<Verification>& result() const { return result_; }
  const SortStats& stats() const { return stats_; }
  std::uint64_t complete_through() const { return complete_through_; }

 private:
  using Records = std::map<std::uint32_t, BucketRecord>;

  // key blocks
  bool step_key_block();
  void run_iteration(KeyBlock& b);
  void send_keys(const KeyBlock& b, std::uint64_t g, const std::vector<std::uint32_t>& counts);
  void deliver_keys(const KeyBlock& b, std::uint64_t g, std::uint32_t first, std::span<const std::uint32_t> counts,
                    std::span<const std::uint32_t> values);
  void merge_key_blocks();
  std::vector<KeyBlock> take_key_blocks(IndexRange keys);
  // messages
  bool drain_messages();
  void handle(const Message& m);
  void on_counts(const Message& m);
  void on_lower(const Message& m);
  void on_keys(const Message& m);
  void on_report(const Message& m);
  void on_input(const Message& m);
  void on_progress(const Message& m);
  std::optional<MulticastDelivery> accept(const Message& m, const VnodeMap& map);
  BucketRecord* record(std::uint32_t j);
  bool live(std::uint64_t g) const;
  // what follows from the records' state
  void settle();
  void announce_totals();
  void rank_ready();
  void advance_collector();
  void note_progress(std::uint64_t complete_through);
  // migration
  struct Arriving;
  std::optional<Bytes> pack(Interval s);
  std::optional<Arriving> read_state(Interval s, std::span<const std::byte> state) const;
  bool unpack(Interval s, std::span<const std::byte> state);
  // sending
  void send_to(vp_t v, Tag tag, Bytes body);
  void multicast_to(Tag tag, IndexRange r, const VnodeMap& map, std::span<const std::byte> payload);
  void bad(const std::string& what);
  int tag_of(Tag t) const { return options_.first_tag + static_cast<int>(t); }
  std::uint64_t block_keys() const {
    return options_.block_keys ? options_.block_keys : std::max<std::uint64_t>(1, class_.keys / 16);
  }

  Node& node_;
  const NpbClass class_;
  SortOptions options_;
  Layout layout_;
  VnodeMap bucket_map_, identity_map_;
  std::uint64_t total_iterations_;
  std::map<std::uint64_t, KeyBlock> key_blocks_;  // by lo
  Records records_;
  std::optional<Collector> collector_;
  std::uint64_t complete_through_ = 0;  // as this node knows it: every iteration below it is over
  std::optional<Verification> result_;
  bool done_ = false;
  bool changed_ = true;  // a message or a state arrived since settle() last looked at the records
  SortStats stats_;
  std::vector<std::uint32_t> grouped_;  // send_keys's scratch: a key block's keys by bucket, reused
};

// The node process of a parallel integer sort under the launcher: makes the node, assumes everything or joins,
// runs the Sorter, leaves when told; reports keys ranked as its units, the state it moved, and the RESULT
// (describe(Verification)) if its collector finished. on_end, if set, sees the statistics before it returns.
int run_node(launch::NodeProcess& process, const NpbClass& c, const SortOptions& options,
             const std::function<void(const SortStats&)>& on_end = {});

}  // namespace phoenix::apps::isort
