// apps/lu/factorization.hpp — the LU factorisation as block records driven by messages (the algorithm and its
// decisions are in docs/lu.md): this node's records and, if it assumes virtual node 0, the collector; the handlers
// of every message; the pack/unpack handlers that move records with their virtual nodes.
//
// Threads: one application thread calls everything here. The constructor installs the node's state handlers,
// which run on that thread inside Node::recv, try_recv, recv_for, poll, join and leave; handle() and
// run_ready() never call those, so records only move between calls, with the inputs they hold (some perhaps
// not looked at yet: run_ready).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <phoenix/node.hpp>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "apps/lu/block.hpp"
#include "apps/lu/collector.hpp"
#include "apps/lu/layout.hpp"
#include "apps/lu/lu.hpp"

namespace phoenix::apps::lu {

struct LuStats {
  std::uint64_t flops = 0;              // done on this node: the paper's unit of progress for LU
  std::uint64_t blocks_finished = 0;    // blocks that became final here
  std::uint64_t records_moved_out = 0;  // block records packed for migration
  std::uint64_t records_moved_in = 0;
  std::uint64_t bad_messages = 0;  // malformed, or not meant for the block they reached
  std::uint64_t send_errors = 0;
};

class Factorization {
 public:
  static constexpr int default_first_tag = 3000;  // tags first_tag .. first_tag + 10
  // Of pack's state (2: rows inputs column-major; 3: no interchanges left of the panel; 4: final data stays
  // with the records until gathered; 5: the first panel's blocks wait for the start; 6: the collector knows
  // whether the run has begun): unpack takes its own.
  static constexpr std::uint32_t state_version = 6;

  Factorization(Node& node, const Problem& problem, const Layout& layout, int first_tag = default_first_tag);
  Factorization(const Factorization&) = delete;
  Factorization& operator=(const Factorization&) = delete;

  // On the first node, once it assumes all of [0, L): every block's record (no data yet: a block is generated
  // when first needed) and the collector. The run begins at once, or, with others > 0, once that many other
  // nodes announced themselves (announce_present) or begin() is called: the nodes of the start take their
  // records before the clock starts, as pdgetrf's ranks are all there before its clock. (The blocks are still
  // generated inside the clock, each when first needed; dgetrf and pdgetrf generate their matrices before.)
  void start(std::uint32_t others = 0);
  // The clock starts and the first panel's blocks go (a multicast down block column 0). Once only.
  void begin();
  // Here is virtual node 0, and the run has not begun. (A node that took virtual node 0 before the run began
  // waits for nobody: it begins with the next announcement, or when its run loop's patience runs out.)
  bool waiting() const { return collector_ && !collector_->begun(); }
  // A node of the start that joined tells virtual node 0.
  void announce_present();
  // One received message (any tag: foreign ones are counted as bad).
  void handle(const Message& m);
  // Lets records with inputs waiting run what they can, for about `budget`, those on the critical path first
  // (queue()). True if some still wait: the caller then calls again without blocking in a receive. The budget
  // keeps the node's loop turning (polls, joins, leaves) on a node whose records mostly feed each other.
  bool run_ready(std::chrono::nanoseconds budget);
  bool has_ready() const { return !urgent_.empty() || !ready_.empty(); }

  const Problem& problem() const { return problem_; }
  bool done() const { return done_; }  // "done" reached this node: the run is over
  // On the node whose collector saw the last block.
  const std::optional<Summary>& result() const { return result_; }
  const LuStats& stats() const { return stats_; }
  std::size_t records() const { return records_.size(); }
  bool has_collector() const { return collector_.has_value(); }

  // The state handlers (installed by the constructor).
  std::optional<Bytes> pack(Interval s);
  bool unpack(Interval s, std::span<const std::byte> state);

 private:
  // tag_left is no longer sent (the collector applies the interchanges left of each step); a message with it
  // is refused like any foreign tag.
  // gather: the collector's multicast to every final block, once all are final, when the run checks; data: a
  // final block's data to the collector in answer.
  // start: the first panel's blocks may go (begin); present: a node of the start has joined (to virtual
  // node 0).
  enum Tag : int {
    tag_panel = 0, tag_row, tag_left, tag_column, tag_rows, tag_final, tag_done, tag_gather, tag_data,
    tag_start, tag_present
  };

  // messages in
  void on_direct(const Message& m, InputKind kind);
  void on_multicast(const Message& m, InputKind kind, const VnodeMap& map);
  void on_final(const Message& m);
  void on_gather(const Message& m);
  void on_data(const Message& m);
  void on_done(const Message& m);
  void on_present(const Message& m);
  BlockRecord* record_at(const Message& m);
  std::optional<std::uint32_t> sender_key(const BlockRecord& r, InputKind kind, const Payload& p) const;
  // Stores an input and queues the record for run_ready.
  void deliver(BlockRecord& r, InputKind kind, std::shared_ptr<const Payload> p);
  void deliver_to_runs(std::span<const IndexRange> runs, InputKind kind,
                       const std::shared_ptr<const Payload>& shared);
  // Queues r to run: urgent if what it does next is on the critical path, else behind the rest.
  void queue(const BlockRecord& r);
  void reject(const std::string& why);

  // the block state machines
  void advance(BlockRecord& r);
  bool advance_panel(BlockRecord& r);
  bool advance_trailing(BlockRecord& r);
  bool panel_gathered(const BlockRecord& diagonal) const;
  void factor(const BlockRecord& diagonal);
  bool interchange(BlockRecord& r, std::span<const std::uint32_t> pivots);
  const std::vector<RowMove>& moves_of(std::uint32_t step, std::span<const std::uint32_t> pivots);
  void send_rows(const BlockRecord& r, const std::vector<RowMove>& moves);
  void apply_moves(BlockRecord& r, const std::vector<RowMove>& moves,
                   const std::map<std::uint32_t, const Payload*>& from);
  void finish(BlockRecord& r, std::vector<std::uint32_t> pivots);
  void counted();  // the collector counted a final block
  void give_data(std::uint64_t block);
  void conclude();
  void ensure_data(BlockRecord& r) const;
  bool may_be_empty(const BlockRecord& r) const;

  // messages out: to a block of this node, the payload itself goes to the record's inputs
  void send(vp_t dest, Tag tag, Payload p);
  void send_bytes(vp_t dest, Tag tag, Bytes body);
  void multicast_payload(Tag tag, InputKind kind, IndexRange range, const VnodeMap& map, Payload p);
  BlockRecord* local_record(vp_t v);
  bool assumes(vp_t v) const;
  std::size_t max_payload_bytes() const;

  Node& node_;
  Problem problem_;
  Layout layout_;
  int first_tag_;
  std::map<std::uint64_t, BlockRecord>
      records_;                         // by block index: the blocks whose virtual nodes this node assumes
  std::optional<Collector> collector_;  // if it assumes virtual node 0
  // Records with inputs they have not looked at (received, from records here, or unpacked): run by run_ready,
  // urgent_ first. Look-ahead: a panel's blocks, the row that becomes U and the column that is the next panel
  // are urgent, so that the next panel is factored while this step's other updates still run. Holds indices
  // only, so a record that leaves meanwhile takes its inputs with it and is skipped here.
  std::deque<std::uint64_t> urgent_, ready_;
  // Each step's pivots and their net row moves, computed once for all the blocks here (derived from inputs, so
  // not state: it does not move).
  std::map<std::uint32_t, std::pair<std::vector<std::uint32_t>, std::vector<RowMove>>> moves_;
  Doubles panel_;  // factor's scratch: the gathered panel (not state)
  // On the first node until the run begins: how many other nodes of the start it waits for, and those that
  // announced themselves (by resource name).
  std::uint32_t awaited_ = 0;
  std::set<vp_t> present_;
  std::optional<Summary> result_;
  bool done_ = false;
  LuStats stats_;
};

}  // namespace phoenix::apps::lu
