// apps/lu/factorization_state.cpp — the Factorization's state handlers (factorization.hpp): every record whose
// virtual node moves, and the collector with virtual node 0, packed and unpacked.
#include "apps/lu/factorization.hpp"

#include <set>

namespace phoenix::apps::lu {

// Every record whose virtual node is in s, and the collector if s holds virtual node 0.
std::optional<Bytes> Factorization::pack(Interval s) {
  ByteWriter w;
  w.u32(state_version);
  const bool collector_goes = collector_ && s.contains(0);
  w.u8(collector_goes ? 1 : 0);
  if (collector_goes) {
    collector_->write(w);
    collector_.reset();
  }
  std::vector<const BlockRecord*> leaving;
  for (const auto& [b, r] : records_) {
    if (s.contains(layout_.vnode(b))) leaving.push_back(&r);
  }
  write_records(w, leaving);
  stats_.records_moved_out += leaving.size();
  std::erase_if(records_, [&](const auto& entry) { return s.contains(layout_.vnode(entry.first)); });
  return std::move(w).take();
}

// A record that is not final goes without data only when not started (its block is generated when first
// needed) or a panel block whose data went to the diagonal (the factored block replaces it). Any other would
// compute on the original matrix, or on nothing.
bool Factorization::may_be_empty(const BlockRecord& r) const {
  if (r.step == 0 && r.stage == Stage::begin) return true;
  return layout_.col(r.index) == r.step && r.stage != Stage::begin;
}

// Checks everything before taking anything: a malformed state changes nothing.
bool Factorization::unpack(Interval s, std::span<const std::byte> state) {
  ByteReader r(state);
  std::uint32_t version = 0;
  std::uint8_t with_collector = 0;
  if (!r.u32(version) || version != state_version || !r.u8(with_collector) || with_collector > 1) return false;
  std::optional<Collector> collector;
  if (with_collector) {
    if (!s.contains(0) || collector_) return false;
    collector = Collector::read(r, problem_, layout_);
    if (!collector) return false;
  }
  auto arriving = read_records(r, layout_.nb(), layout_.blocks());
  if (!arriving || !r.at_end()) return false;
  std::set<std::uint64_t> seen;
  for (const BlockRecord& rec : *arriving) {
    if (rec.index >= layout_.blocks() || !s.contains(layout_.vnode(rec.index)) ||
        records_.contains(rec.index) || !seen.insert(rec.index).second ||
        (!rec.final && (rec.step >= layout_.per_side() || (rec.data.empty() && !may_be_empty(rec)))) ||
        (rec.final && rec.data.empty() == problem_.check))  // final data is kept exactly when the run checks
      return false;
  }
  if (collector) collector_ = std::move(collector);
  for (BlockRecord& rec : *arriving) {
    ++rec.migrations;
    queue(rec);
    records_.emplace(rec.index, std::move(rec));
  }
  stats_.records_moved_in += arriving->size();
  return true;
}

}  // namespace phoenix::apps::lu
