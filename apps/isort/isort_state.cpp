// apps/isort/isort_state.cpp — the Sorter's state handlers (isort.hpp): what moves with an interval of virtual
// nodes, and how key blocks split and merge as it does.
#include <algorithm>
#include <iterator>

#include "apps/isort/isort.hpp"

namespace phoenix::apps::isort {
namespace {

constexpr std::uint32_t state_version = 1;

}  // namespace

// --- state that moves with virtual nodes ---------------------------------------------------------------------

// The keys and records of s's virtual nodes, the collector if s holds 0, and what this node knows of progress.
std::optional<Bytes> Sorter::pack(Interval s) {
  ByteWriter w;
  w.u32(state_version);
  w.u64(complete_through_);
  const std::vector<KeyBlock> blocks = take_key_blocks(layout_.key.in(s));
  w.u64(blocks.size());
  for (const KeyBlock& b : blocks) {
    b.write(w);
    stats_.keys_moved_out += b.hi - b.lo;
  }
  const IndexRange buckets = layout_.bucket.in(s);
  const auto first = records_.lower_bound(static_cast<std::uint32_t>(buckets.lo));
  const auto last = records_.lower_bound(static_cast<std::uint32_t>(buckets.hi));
  w.u64(static_cast<std::uint64_t>(std::distance(first, last)));
  for (auto it = first; it != last; ++it) {
    it->second.write(w);
    ++stats_.buckets_moved_out;
  }
  records_.erase(first, last);
  const bool collector_goes = collector_ && s.contains(0);
  w.u8(collector_goes ? 1 : 0);
  if (collector_goes) {
    collector_->write(w);
    collector_.reset();
  }
  return std::move(w).take();
}

// A migrating state, read and checked whole before any of it is taken.
struct Sorter::Arriving {
  std::uint64_t progress = 0;
  std::vector<KeyBlock> blocks;
  std::vector<BucketRecord> records;
  std::optional<Collector> collector;
};

std::optional<Sorter::Arriving> Sorter::read_state(Interval s, std::span<const std::byte> state) const {
  ByteReader r(state);
  Arriving a;
  std::uint32_t version = 0;
  std::uint64_t nblocks = 0, nrecords = 0;
  if (!r.u32(version) || version != state_version || !r.u64(a.progress) || a.progress > total_iterations_ ||
      !r.u64(nblocks)) {
    return std::nullopt;
  }
  const IndexRange keys = layout_.key.in(s), buckets = layout_.bucket.in(s);
  for (std::uint64_t i = 0; i < nblocks; ++i) {
    auto b = KeyBlock::read(class_, r);
    if (!b || b->lo < keys.lo || b->hi > keys.hi) return std::nullopt;
    a.blocks.push_back(std::move(*b));
  }
  if (!r.u64(nrecords)) return std::nullopt;
  for (std::uint64_t i = 0; i < nrecords; ++i) {
    auto rec = BucketRecord::read(class_, r);
    if (!rec || rec->bucket() < buckets.lo || rec->bucket() >= buckets.hi || records_.count(rec->bucket()))
      return std::nullopt;
    a.records.push_back(std::move(*rec));
  }
  std::uint8_t has_collector = 0;
  if (!r.u8(has_collector) || has_collector > 1) return std::nullopt;
  if (has_collector) {
    a.collector = Collector::read(class_, options_.rounds, r);
    if (!a.collector || !s.contains(0) || collector_) return std::nullopt;
  }
  if (!r.at_end()) return std::nullopt;
  return a;
}

bool Sorter::unpack(Interval s, std::span<const std::byte> state) {
  changed_ = true;
  auto a = read_state(s, state);
  if (!a) {
    bad("a migrating state for [" + std::to_string(s.lo) + ", " + std::to_string(s.hi) + ") refused");
    return false;
  }
  for (KeyBlock& b : a->blocks) {
    stats_.keys_moved_in += b.hi - b.lo;
    key_blocks_.emplace(b.lo, std::move(b));
  }
  merge_key_blocks();
  note_progress(a->progress);
  stats_.buckets_moved_in += a->records.size();
  for (BucketRecord& rec : a->records) {
    if (const std::size_t lost = rec.forget_before(complete_through_))
      bad(std::to_string(lost) + " unranked iterations of bucket " + std::to_string(rec.bucket()) +
          " are over");
    records_.emplace(rec.bucket(), std::move(rec));
  }
  if (a->collector) collector_ = std::move(a->collector);
  return true;
}

// --- key blocks as intervals move --------------------------------------------------------------------------

// Neighbouring blocks at the same iteration become one, so a node sends one set of messages per iteration.
void Sorter::merge_key_blocks() {
  for (auto it = key_blocks_.begin(); it != key_blocks_.end();) {
    auto next = std::next(it);
    if (next != key_blocks_.end() && it->second.hi == next->first && it->second.next == next->second.next &&
        next->second.hi - it->second.lo <= block_keys()) {
      it->second.append(std::move(next->second));
      key_blocks_.erase(next);
    } else {
      it = next;
    }
  }
}

// Removes and returns the keys in `keys`, splitting the blocks that reach past it.
std::vector<KeyBlock> Sorter::take_key_blocks(IndexRange keys) {
  std::vector<KeyBlock> out;
  auto it = key_blocks_.upper_bound(keys.lo);
  if (it != key_blocks_.begin()) --it;
  while (it != key_blocks_.end() && it->first < keys.hi) {
    if (it->second.hi <= keys.lo) {
      ++it;
      continue;
    }
    KeyBlock part = std::move(it->second);
    it = key_blocks_.erase(it);
    if (part.lo < keys.lo) {
      KeyBlock upper = part.split_off(keys.lo);
      key_blocks_.emplace(part.lo, std::move(part));
      part = std::move(upper);
    }
    if (part.hi > keys.hi) {
      KeyBlock rest = part.split_off(keys.hi);
      key_blocks_.emplace(rest.lo, std::move(rest));
    }
    out.push_back(std::move(part));
  }
  return out;
}

}  // namespace phoenix::apps::isort
