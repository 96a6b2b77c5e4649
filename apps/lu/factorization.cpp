// apps/lu/factorization.cpp — see factorization.hpp.
#include "apps/lu/factorization.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "apps/lu/log.hpp"

namespace phoenix::apps::lu {
namespace {

// How long a send refused because the node holds too many messages (PH_EAGAIN) is retried: they drain as links
// deliver, and losing a block's input would stall the run.
constexpr std::chrono::milliseconds send_patience{10'000};

VnodeMap identity_map() {
  return VnodeMap{[](std::uint64_t v) { return static_cast<vp_t>(v); }, true};
}

template <class Send>
std::error_code patiently(const Send& send) {
  const auto give_up = std::chrono::steady_clock::now() + send_patience;
  for (;;) {
    const std::error_code ec = send();
    if (ec.value() != PH_EAGAIN || std::chrono::steady_clock::now() >= give_up) return ec;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// The at-th nb×nb block of the m×nb column-major panel (its rows at·nb ..), in and out.
void copy_into_panel(std::span<const double> block, Doubles& panel, std::uint32_t at, std::uint32_t m,
                     std::uint32_t nb) {
  for (std::size_t c = 0; c < nb; ++c) std::copy_n(&block[c * nb], nb, &panel[c * m + std::size_t{at} * nb]);
}
Doubles copy_from_panel(const Doubles& panel, std::uint32_t at, std::uint32_t m, std::uint32_t nb) {
  Doubles block(std::size_t{nb} * nb);
  for (std::size_t c = 0; c < nb; ++c) std::copy_n(&panel[c * m + std::size_t{at} * nb], nb, &block[c * nb]);
  return block;
}

}  // namespace

Factorization::Factorization(Node& node, const Problem& problem, const Layout& layout, int first_tag)
    : node_(node), problem_(problem), layout_(layout), first_tag_(first_tag) {
  node_.set_state_handlers([this](Interval s) { return pack(s); },
                           [this](Interval s, std::span<const std::byte> state) { return unpack(s, state); });
}

void Factorization::start(std::uint32_t others) {
  collector_.emplace(problem_, layout_, wall_clock_ns());
  for (std::uint64_t b = 0; b < layout_.blocks(); ++b) records_[b].index = b;
  awaited_ = others;
  if (others == 0) begin();
}

void Factorization::begin() {
  if (!waiting()) return;
  present_.clear();
  collector_->begin(wall_clock_ns());
  // Block column 0, column-major indices [0, B): the blocks of the first panel.
  multicast_payload(tag_start, InputKind::start, IndexRange{0, layout_.per_side()}, layout_.by_column(),
                    Payload{0, 0, {}, {}});
}

void Factorization::announce_present() { send_bytes(0, tag_present, {}); }

bool Factorization::run_ready(std::chrono::nanoseconds budget) {
  const auto until = std::chrono::steady_clock::now() + budget;
  while (has_ready()) {
    auto& queue = urgent_.empty() ? ready_ : urgent_;
    const std::uint64_t b = queue.front();
    queue.pop_front();
    if (auto it = records_.find(b); it != records_.end()) advance(it->second);
    if (std::chrono::steady_clock::now() >= until) break;
  }
  return has_ready();
}

void Factorization::queue(const BlockRecord& r) {
  const std::uint32_t row = layout_.row(r.index), col = layout_.col(r.index);
  const bool urgent = col <= r.step + 1 || row == r.step;
  (urgent ? urgent_ : ready_).push_back(r.index);
}

// --- messages in --------------------------------------------------------------------------------------------

void Factorization::handle(const Message& m) {
  switch (m.tag() - first_tag_) {
    case tag_panel:
      return on_direct(m, InputKind::panel);
    case tag_rows:
      return on_direct(m, InputKind::rows);
    case tag_row:
      return on_multicast(m, InputKind::row, layout_.by_row());
    case tag_column:
      return on_multicast(m, InputKind::column, layout_.by_column());
    case tag_final:
      return on_final(m);
    case tag_done:
      return on_done(m);
    case tag_gather:
      return on_gather(m);
    case tag_data:
      return on_data(m);
    case tag_start:
      return on_multicast(m, InputKind::start, layout_.by_column());
    case tag_present:
      return on_present(m);
    default:
      reject("a message with tag " + std::to_string(m.tag()));
  }
}

// A message sent straight to a block's virtual node.
void Factorization::on_direct(const Message& m, InputKind kind) {
  BlockRecord* r = record_at(m);
  if (!r) return;
  if (m.bytes().size() > max_payload_bytes()) return reject("an oversized message for a block");
  auto p = decode_payload(m.bytes());
  if (!p) return reject("a malformed message for block " + std::to_string(r->index));
  deliver(*r, kind, std::make_shared<const Payload>(std::move(*p)));
}

// A row or column multicast: the blocks of this node it names get the payload, the rest goes on.
void Factorization::on_multicast(const Message& m, InputKind kind, const VnodeMap& map) {
  const auto d = accept_multicast(node_, m, map);
  if (!d) return reject("a malformed multicast");
  if (d->forward_error) {
    ++stats_.send_errors;
    lu_log()->error("forwarding a multicast failed: {}", d->forward_error.message());
  }
  if (d->mine.empty()) return;
  if (d->payload.size() > max_payload_bytes()) return reject("an oversized multicast");
  auto p = decode_payload(d->payload);
  if (!p) return reject("a multicast with a malformed payload");
  deliver_to_runs(d->mine, kind, std::make_shared<const Payload>(std::move(*p)));
}

// A multicast's payload to this node's blocks of `runs` (indices as the multicast's map takes them).
void Factorization::deliver_to_runs(std::span<const IndexRange> runs, InputKind kind,
                                    const std::shared_ptr<const Payload>& shared) {
  for (const IndexRange& run : runs) {
    for (std::uint64_t i = run.lo; i < run.hi; ++i) {
      const bool column_major = kind == InputKind::column || kind == InputKind::start;
      const std::uint64_t b = column_major ? layout_.transposed(i) : i;
      auto it = records_.find(b);
      if (it == records_.end()) {
        reject("a multicast for block " + std::to_string(b) + ", which is not here");
        continue;
      }
      deliver(it->second, kind, shared);
    }
  }
}

void Factorization::on_final(const Message& m) {
  if (m.dest() != 0) return reject("a final block sent elsewhere than virtual node 0");
  if (!collector_) {
    if (assumes(0)) return reject("a final block where virtual node 0 has no collector");
    return send_bytes(0, tag_final, Bytes(m.bytes().begin(), m.bytes().end()));  // it moved meanwhile
  }
  // A final block carries its pivots, not its data: anything larger is refused before it is decoded.
  if (m.bytes().size() > 64 + std::size_t{layout_.nb()} * sizeof(std::uint32_t))
    return reject("an oversized final block");
  auto f = decode_final(m.bytes());
  if (!f || !collector_->add(std::move(*f))) return reject("a malformed or repeated final block");
  counted();
}

// The collector asks this node's final blocks among the multicast's for their data.
void Factorization::on_gather(const Message& m) {
  const auto d = accept_multicast(node_, m, layout_.by_row());
  if (!d) return reject("a malformed gathering of the final blocks");
  if (d->forward_error) {
    ++stats_.send_errors;
    lu_log()->error("forwarding the gathering failed: {}", d->forward_error.message());
  }
  for (const IndexRange& run : d->mine)
    for (std::uint64_t b = run.lo; b < run.hi; ++b) give_data(b);
}

void Factorization::on_data(const Message& m) {
  if (m.dest() != 0) return reject("a final block's data sent elsewhere than virtual node 0");
  if (!collector_) {
    if (assumes(0)) return reject("a final block's data where virtual node 0 has no collector");
    return send_bytes(0, tag_data, Bytes(m.bytes().begin(), m.bytes().end()));  // it moved meanwhile
  }
  if (m.bytes().size() > max_payload_bytes()) return reject("an oversized final block");
  auto f = decode_final(m.bytes());
  if (!f || !f->pivots.empty()) return reject("a malformed final block's data");
  if (collector_->has_data(f->block)) return;  // the answer to a gather asked again: the first is in
  if (!collector_->add_data(f->block, std::move(f->data))) return reject("an unexpected final block's data");
  if (collector_->gathered()) conclude();
}

void Factorization::on_done(const Message& m) {
  if (!accept_multicast(node_, m, identity_map())) return reject("a malformed end of the run");
  done_ = true;
}

// Counted by the first node while it waits; one that comes later (the run began without it, or a node that
// joined after the start) changes nothing.
void Factorization::on_present(const Message& m) {
  if (m.dest() != 0 || !m.bytes().empty()) return reject("a malformed announcement of a node");
  if (!waiting()) return;
  present_.insert(m.source());
  if (present_.size() >= awaited_) begin();
}

// The record of the block m was sent to; nullptr if it is not here (m then goes on to its virtual node: it
// moved after m arrived) or there is no such block.
BlockRecord* Factorization::record_at(const Message& m) {
  const auto b = layout_.block_at(m.dest());
  if (!b) {
    reject("a message for virtual node " + std::to_string(m.dest()) + ", where no block lives");
    return nullptr;
  }
  if (auto it = records_.find(*b); it != records_.end()) return &it->second;
  if (assumes(m.dest())) {
    reject("a message for block " + std::to_string(*b) + ", whose record is missing");
  } else {
    send_bytes(m.dest(), static_cast<Tag>(m.tag() - first_tag_), Bytes(m.bytes().begin(), m.bytes().end()));
  }
  return nullptr;
}

// The sender part of the input's key if p is an input block r can have, nullopt if not (see payload.hpp for
// what each kind carries).
std::optional<std::uint32_t> Factorization::sender_key(const BlockRecord& r, InputKind kind,
                                                       const Payload& p) const {
  const std::uint32_t k = p.step, row = layout_.row(r.index), col = layout_.col(r.index);
  const std::uint32_t side = layout_.per_side(), nb = layout_.nb();
  const std::size_t block_size = std::size_t{nb} * nb;
  if (k >= side) return std::nullopt;
  const bool pivots_ok = problem_.pivoting ? layout_.valid_pivots(p.rows, k) : p.rows.empty();
  switch (kind) {
    case InputKind::panel:
      if (row != k || col != k || p.index < k || p.index >= side || !p.rows.empty() ||
          p.data.size() != block_size)
        return std::nullopt;
      return p.index;
    case InputKind::row:
      if (p.index != row || row < k || col < k || !pivots_ok || p.data.size() != block_size)
        return std::nullopt;
      return 0;
    case InputKind::left:  // no longer sent: the collector applies interchanges left of a step
      return std::nullopt;
    case InputKind::column:
      if (p.index != col || row <= k || col <= k || !p.rows.empty() || p.data.size() != block_size)
        return std::nullopt;
      return 0;
    case InputKind::start:
      if (col != 0 || k != 0 || p.index != 0 || !p.rows.empty() || !p.data.empty()) return std::nullopt;
      return 0;
    case InputKind::rows: {
      const bool rows_here = std::all_of(p.rows.begin(), p.rows.end(), [&](auto x) { return x / nb == row; });
      if (!problem_.pivoting || p.index < k || p.index >= side || p.index == row || row < k || col == k ||
          p.rows.empty() || !rows_here || p.data.size() != p.rows.size() * nb)
        return std::nullopt;
      return p.index;
    }
  }
  return std::nullopt;
}

void Factorization::deliver(BlockRecord& r, InputKind kind, std::shared_ptr<const Payload> p) {
  const auto from = sender_key(r, kind, *p);
  const auto block = [&] { return "block " + std::to_string(r.index); };
  if (!from) return reject("an input " + block() + " cannot have");
  if (r.final || p->step < r.step) return reject("an input for a step " + block() + " has done");
  const std::uint32_t step = p->step;
  if (!r.inputs.emplace(InputKey{kind, step, *from}, std::move(p)).second)
    return reject("an input " + block() + " already has");
  queue(r);
}

void Factorization::reject(const std::string& why) {
  ++stats_.bad_messages;
  lu_log()->warn("{}: ignored {}", node_.resource_name(), why);
}

// --- the block state machines -------------------------------------------------------------------------------

// Runs whatever r can do with the inputs it has, step after step.
void Factorization::advance(BlockRecord& r) {
  while (!r.final) {
    const std::uint32_t col = layout_.col(r.index);
    // A block is final once its column's panel is factored: no record is ever left of its step.
    const bool next = col == r.step ? advance_panel(r) : advance_trailing(r);
    if (!next) return;
  }
}

// Block (I, k) at step k: its data to the diagonal, which factors the panel once all of it is there; then the
// factored block comes back with the row multicast. True when the block goes on to step k+1.
bool Factorization::advance_panel(BlockRecord& r) {
  const std::uint32_t k = r.step, row = layout_.row(r.index);
  if (r.stage == Stage::begin) {
    if (k == 0 && !r.input(InputKind::start, 0)) return false;  // the run has not begun
    ensure_data(r);
    // The data goes: the factored block comes back with the row multicast and replaces it.
    send(layout_.vnode(layout_.index(k, k)), tag_panel, Payload{k, row, {}, std::move(r.data)});
    r.data = Doubles();
    r.stage = Stage::sent;
  }
  if (row == k && r.stage == Stage::sent && panel_gathered(r)) {
    factor(r);
    r.stage = Stage::factored;
  }
  const Payload* factored = r.input(InputKind::row, k);
  if (!factored) return false;
  r.data = factored->data;
  // Final now, also with pivoting: later steps' interchanges of these rows are applied by the collector.
  finish(r, row == k ? factored->rows : std::vector<std::uint32_t>{});
  return false;
}

// Block (I, J), J > k, at step k: interchanges, then the solve (I = k, which makes it final) or the update.
bool Factorization::advance_trailing(BlockRecord& r) {
  const std::uint32_t k = r.step, row = layout_.row(r.index), col = layout_.col(r.index);
  const Payload* l = r.input(InputKind::row, k);
  if (!l) return false;
  ensure_data(r);
  if (!interchange(r, l->rows)) return false;
  if (row == k) {
    solve_unit_lower(l->data, r.data, layout_.nb());
    stats_.flops += solve_flops(layout_.nb());
    const std::uint64_t column = layout_.index(col, 0);  // column J, column-major
    multicast_payload(tag_column, InputKind::column, IndexRange{column + k + 1, column + layout_.per_side()},
                      layout_.by_column(), Payload{k, col, {}, r.data});
    finish(r, {});
    return false;
  }
  const Payload* u = r.input(InputKind::column, k);
  if (!u) return false;
  subtract_product(r.data, l->data, u->data, layout_.nb());
  stats_.flops += update_flops(layout_.nb());
  r.next_step();
  return true;
}

bool Factorization::panel_gathered(const BlockRecord& diagonal) const {
  const std::uint32_t k = diagonal.step;
  for (std::uint32_t row = k; row < layout_.per_side(); ++row) {
    if (!diagonal.input(InputKind::panel, k, row)) return false;
  }
  return true;
}

// The diagonal block at step k, with the whole panel: factors it and multicasts each block row its factored
// block with the pivots (the row's blocks left of the panel are final: the collector applies their swaps).
void Factorization::factor(const BlockRecord& diagonal) {
  const std::uint32_t k = diagonal.step, side = layout_.per_side(), nb = layout_.nb();
  const std::uint32_t m = (side - k) * nb;
  // The first panel is the tallest: one buffer serves every step (a new one per step would be fresh memory,
  // a page fault per huge page, each time).
  Doubles& panel = panel_;
  if (panel.size() < std::size_t{m} * nb) panel.resize(std::size_t{m} * nb);
  for (std::uint32_t row = k; row < side; ++row)
    copy_into_panel(diagonal.input(InputKind::panel, k, row)->data, panel, row - k, m, nb);
  std::vector<std::uint32_t> pivots;
  if (const int info = factor_panel(panel, m, nb, problem_.pivoting, pivots); info != 0)
    lu_log()->warn("panel {}: LAPACK info {} (a zero pivot makes U singular)", k, info);
  stats_.flops += panel_flops(m, nb);
  for (auto& p : pivots) p += k * nb;  // panel rows to matrix rows
  for (std::uint32_t row = k; row < side; ++row) {
    const std::uint64_t first = layout_.index(row, 0);
    multicast_payload(tag_row, InputKind::row, IndexRange{first + k, first + side}, layout_.by_row(),
                      Payload{k, row, pivots, copy_from_panel(panel, row - k, m, nb)});
  }
}

// Step k's interchanges in block (I, J), J != k: its rows out to the blocks that need them, then, once every
// block that owes it rows has sent them, the new rows in place. True once done.
bool Factorization::interchange(BlockRecord& r, std::span<const std::uint32_t> pivots) {
  if (r.stage == Stage::swapped) return true;
  const std::uint32_t nb = layout_.nb(), row = layout_.row(r.index);
  const std::vector<RowMove>& moves = moves_of(r.step, pivots);
  if (r.stage == Stage::begin) {
    send_rows(r, moves);
    r.stage = Stage::sent;
  }
  std::map<std::uint32_t, const Payload*> from;  // by source block row
  for (const RowMove& move : moves) {
    const std::uint32_t source = move.src / nb;
    if (move.dest / nb != row || source == row || from.contains(source)) continue;
    const Payload* rows = r.input(InputKind::rows, r.step, source);
    if (!rows) return false;
    from.emplace(source, rows);
  }
  apply_moves(r, moves, from);
  r.stage = Stage::swapped;
  return true;
}

const std::vector<RowMove>& Factorization::moves_of(std::uint32_t step, std::span<const std::uint32_t> pivots) {
  auto& [known, moves] = moves_[step];
  if (!std::equal(known.begin(), known.end(), pivots.begin(), pivots.end())) {
    known.assign(pivots.begin(), pivots.end());
    moves = net_row_moves(step * layout_.nb(), pivots);
  }
  return moves;
}

// One message per destination block of the same column, with every row it gets from this block. Rows are
// copied column by column: a block is column-major, and a row walked across its columns misses the cache at
// every value.
void Factorization::send_rows(const BlockRecord& r, const std::vector<RowMove>& moves) {
  const std::uint32_t nb = layout_.nb(), row = layout_.row(r.index), col = layout_.col(r.index);
  std::map<std::uint32_t, std::pair<Payload, std::vector<std::uint32_t>>> out;  // by destination block row:
                                                                                   // the payload, source rows
  for (const RowMove& move : moves) {
    if (move.src / nb != row || move.dest / nb == row) continue;
    auto& [p, sources] = out[move.dest / nb];
    p.rows.push_back(move.dest);
    sources.push_back(move.src % nb);
  }
  for (auto& [dest, entry] : out) {
    auto& [p, sources] = entry;
    const std::size_t n = sources.size();
    p.step = r.step;
    p.index = row;
    p.data.resize(n * nb);
    for (std::size_t c = 0; c < nb; ++c) {
      const double* from = &r.data[c * nb];
      double* to = &p.data[c * n];
      for (std::size_t i = 0; i < n; ++i) to[i] = from[sources[i]];
    }
    send(layout_.vnode(layout_.index(dest, col)), tag_rows, std::move(p));
  }
}

// The new rows are gathered first (a row may be the source of another row of the same block), then written;
// both column by column.
void Factorization::apply_moves(BlockRecord& r, const std::vector<RowMove>& moves,
                                const std::map<std::uint32_t, const Payload*>& from) {
  const std::uint32_t nb = layout_.nb(), row = layout_.row(r.index);
  struct Source {
    const double* column0;  // the row's value in column 0
    std::size_t stride;     // from one column to the next
  };
  std::vector<std::uint32_t> dests;
  std::vector<Source> sources;
  for (const RowMove& move : moves) {
    if (move.dest / nb != row) continue;
    Source src{&r.data[move.src % nb], nb};
    if (move.src / nb != row) {
      const Payload& p = *from.at(move.src / nb);
      const auto at = std::find(p.rows.begin(), p.rows.end(), move.dest);
      if (at == p.rows.end()) {
        reject("rows for block " + std::to_string(r.index) + " without row " + std::to_string(move.dest));
        continue;
      }
      src = {&p.data[static_cast<std::size_t>(at - p.rows.begin())], p.rows.size()};
    }
    dests.push_back(move.dest % nb);
    sources.push_back(src);
  }
  const std::size_t n = dests.size();
  std::vector<double> column(n);
  for (std::size_t c = 0; c < nb; ++c) {
    for (std::size_t i = 0; i < n; ++i) column[i] = sources[i].column0[c * sources[i].stride];
    double* to = &r.data[c * nb];
    for (std::size_t i = 0; i < n; ++i) to[dests[i]] = column[i];
  }
}

// r is done: the collector counts it, and the record keeps only its data, if the run checks, for the collector
// to gather once every block is final (so that the node with virtual node 0 does not carry all of L and U,
// and hand it on when it leaves, while the factorisation runs). Without the check the buffer goes back to the
// pool (assigning {} would keep its capacity).
void Factorization::finish(BlockRecord& r, std::vector<std::uint32_t> pivots) {
  FinalBlock f{r.index, r.migrations, std::move(pivots), {}};
  r.final = true;
  if (!problem_.check) r.data = Doubles();
  r.inputs.clear();
  ++stats_.blocks_finished;
  if (!collector_) return send_bytes(0, tag_final, encode(f));
  if (!collector_->add(std::move(f))) return reject("a final block the collector refused (repeated?)");
  counted();
}

// Once every block is counted, the factorisation is over: the clock stops, and a run that checks gathers the
// final data (a multicast to every block, one per block row) before it concludes.
void Factorization::counted() {
  if (!collector_->complete()) return;
  collector_->stop(wall_clock_ns());
  if (!problem_.check) return conclude();
  lu_log()->info("every block is final: gathering their data for the check");
  // One multicast per block row: a row's B indices are few enough to split by owner whatever N is.
  const VnodeMap map = layout_.by_row();
  const std::uint32_t side = layout_.per_side();
  for (std::uint32_t row = 0; row < side && !result_; ++row) {
    const IndexRange blocks{layout_.index(row, 0), layout_.index(row, 0) + side};
    const auto split = split_by_owner(node_, blocks, map);
    if (!split) {
      ++stats_.send_errors;
      lu_log()->error("block row {} cannot be multicast to", row);
      continue;
    }
    if (auto ec = multicast_runs(node_, first_tag_ + tag_gather, split->rest, map, {})) {
      ++stats_.send_errors;
      lu_log()->error("gathering block row {} failed: {}", row, ec.message());
    }
    for (const IndexRange& run : split->mine)
      for (std::uint64_t b = run.lo; b < run.hi; ++b) give_data(b);
  }
}

// A copy of a final block's data to the collector, here or at virtual node 0. The record keeps its data until
// the run is over: a gather that comes too early (a forgery: the collector refuses data before every block is
// final) must not lose it.
void Factorization::give_data(std::uint64_t block) {
  const auto it = records_.find(block);
  if (it == records_.end() || !it->second.final || it->second.data.empty())
    return reject("a gathering of block " + std::to_string(block) + ", which has no final data here");
  const Doubles& data = it->second.data;
  if (!collector_) {
    ByteWriter w;
    w.reserve(64 + data.size() * sizeof(double));
    write_final(w, block, 0, {}, data);
    return send_bytes(0, tag_data, std::move(w).take());
  }
  if (collector_->has_data(block)) return;  // asked again: the first answer is in
  if (!collector_->add_data(block, data)) return reject("a final block's data before every block is final");
  if (collector_->gathered()) conclude();
}

// Every block is final (and gathered, if the run checks): the summary, then the end of the run for every node.
void Factorization::conclude() {
  result_ = collector_->conclude();
  lu_log()->info("factorised: {}", describe(*result_));
  if (auto ec =
          multicast(node_, first_tag_ + tag_done, IndexRange{0, node_.space_size()}, identity_map(), {})) {
    ++stats_.send_errors;
    lu_log()->error("announcing the end failed: {}", ec.message());
  }
}

void Factorization::ensure_data(BlockRecord& r) const {
  if (r.data.empty())
    r.data = generate_block(matrix_of(problem_), layout_.nb(), layout_.row(r.index), layout_.col(r.index));
}

// --- messages out -------------------------------------------------------------------------------------------

// The largest payload a block can be sent (rows: at most nb, with nb values each; a block: nb² values): a
// bigger one is refused before it is decoded, so that a peer chooses no buffer size.
std::size_t Factorization::max_payload_bytes() const {
  const std::size_t nb = layout_.nb();
  return 3 * sizeof(std::uint32_t) + nb * sizeof(std::uint32_t) + sizeof(std::uint64_t) +
         nb * nb * sizeof(double);
}

void Factorization::send(vp_t dest, Tag tag, Payload p) {
  if (BlockRecord* r = local_record(dest)) {
    return deliver(*r, tag == tag_panel ? InputKind::panel : InputKind::rows,
                   std::make_shared<const Payload>(std::move(p)));
  }
  send_bytes(dest, tag, encode(p));
}

// The record of the block at virtual node v if this node has it, else nullptr.
BlockRecord* Factorization::local_record(vp_t v) {
  if (!assumes(v)) return nullptr;
  const auto b = layout_.block_at(v);
  if (!b) return nullptr;
  const auto it = records_.find(*b);
  return it == records_.end() ? nullptr : &it->second;
}

void Factorization::send_bytes(vp_t dest, Tag tag, Bytes body) {
  if (auto ec = patiently([&] { return node_.send(dest, first_tag_ + tag, std::move(body)); })) {
    ++stats_.send_errors;
    lu_log()->error("sending to virtual node {} failed: {}", dest, ec.message());
  }
}

// The blocks of this node get the payload itself; one multicast carries it to the others.
void Factorization::multicast_payload(Tag tag, InputKind kind, IndexRange range, const VnodeMap& map,
                                      Payload p) {
  const auto split = split_by_owner(node_, range, map);
  if (!split) {
    ++stats_.send_errors;
    lu_log()->error("blocks [{}, {}) cannot be multicast to", range.lo, range.hi);
    return;
  }
  const auto shared = std::make_shared<const Payload>(std::move(p));
  if (!split->rest.empty()) {
    const Bytes body = encode(*shared);
    // multicast_runs waits out PH_EAGAIN itself, message by message: retrying here could send a half twice.
    if (auto ec = multicast_runs(node_, first_tag_ + tag, split->rest, map, body)) {
      ++stats_.send_errors;
      lu_log()->error("multicasting to blocks [{}, {}) failed: {}", range.lo, range.hi, ec.message());
    }
  }
  deliver_to_runs(split->mine, kind, shared);
}

bool Factorization::assumes(vp_t v) const {
  const auto mine = node_.assumed();
  return std::any_of(mine.begin(), mine.end(), [v](const Interval& s) { return s.contains(v); });
}

}  // namespace phoenix::apps::lu
