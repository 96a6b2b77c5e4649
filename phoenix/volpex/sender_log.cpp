#include "phoenix/volpex/sender_log.hpp"

#include <algorithm>
#include <cassert>
#include <limits>

namespace phoenix::volpex {

namespace {

std::uint64_t size_of(const object& body) { return body ? body->size() : 0; }

timestamp consumed_in(const std::map<std::int32_t, timestamp>& consumed, std::int32_t tag) {
  const auto it = consumed.find(tag);
  return it == consumed.end() ? 0 : it->second;
}

}  // namespace

sender_log::sender_log(options o) : options_(o) { options_.replicas = std::max(1u, options_.replicas); }

// The replicas 0..K-1 of a rank are known from the start: one never heard from has consumed nothing.
sender_log::receiver& sender_log::receiver_of(rank_id dst) {
  auto [it, created] = receivers_.try_emplace(dst);
  if (created)
    for (replica_index i = 0; i < options_.replicas; ++i) it->second.emplace(i, receiver_replica{});
  return it->second;
}

const sender_log::receiver_replica* sender_log::find_replica(rank_id dst, replica_index who) const {
  const auto r = receivers_.find(dst);
  if (r == receivers_.end()) return nullptr;
  const auto it = r->second.find(who);
  return it == r->second.end() ? nullptr : &it->second;
}

sender_log::stream& sender_log::stream_of(stream_key k) {
  receiver_of(k.dst);  // a stream's rank is always known, for trim
  return streams_[k];
}

timestamp sender_log::append(rank_id dst, std::int32_t tag, object body) {
  assert(tag >= 0);
  const stream_key k{dst, tag};
  stream& s = stream_of(k);
  const std::uint64_t bytes = size_of(body);
  s.held.push_back(entry{std::move(body), stats_.appended});
  ++s.latest;
  send_order_.emplace_back(k, s.latest);
  ++stats_.appended;
  ++stats_.entries;
  stats_.bytes += bytes;
  mark_dirty(k, s);  // the receivers may already be past it (they pulled it from a faster replica)
  return s.latest;
}

// Counts ts as consumed by `who` on stream k; a late replica seen here for the first time holds entries from
// now on.
void sender_log::note(stream_key k, stream& s, replica_index who, timestamp ts) {
  receiver_of(k.dst).try_emplace(who);
  timestamp& c = s.consumed[who];
  if (ts <= c) return;
  c = ts;
  mark_dirty(k, s);
}

sender_log::lookup_result sender_log::lookup(rank_id dst, replica_index who, std::int32_t tag, timestamp ts) {
  const stream_key k{dst, tag};
  stream& s = stream_of(k);
  lookup_result r{.result = status::not_yet, .tag = tag, .ts = ts, .body = {}, .latest = s.latest};
  if (is_fallen_behind(dst, who)) {
    r.result = status::fallen_behind;
    return r;
  }
  if (ts == 0 || ts <= s.dropped) {
    r.result = status::trimmed;
  } else if (ts <= s.latest) {
    r.result = status::found;
    r.body = s.held[ts - s.dropped - 1].body;
  }
  // Asking for ts says 1..ts-1 were consumed; an answer found will reach `who` (links are reliable).
  note(k, s, who, r.result == status::found ? ts : (ts == 0 ? 0 : ts - 1));
  return r;
}

sender_log::lookup_result sender_log::first_unconsumed(rank_id dst, replica_index who,
                                                       const std::map<std::int32_t, timestamp>& consumed,
                                                       std::int32_t tag_filter) {
  receiver_of(dst).try_emplace(who);
  for (const auto& [tag, ts] : consumed) note_consumed(dst, who, tag, ts);
  lookup_result r{.result = status::not_yet, .tag = tag_filter, .ts = 0, .body = {}, .latest = 0};
  if (tag_filter >= 0) r.latest = latest(dst, tag_filter);
  if (is_fallen_behind(dst, who)) {
    r.result = status::fallen_behind;
    return r;
  }
  const std::int32_t from = tag_filter < 0 ? std::numeric_limits<std::int32_t>::min() : tag_filter;
  const entry* earliest = nullptr;
  for (auto it = streams_.lower_bound({dst, from}); it != streams_.end() && it->first.dst == dst; ++it) {
    const auto& [k, s] = *it;
    if (tag_filter >= 0 && k.tag != tag_filter) break;
    const timestamp next = consumed_in(consumed, k.tag) + 1;
    if (next <= s.dropped) return {status::trimmed, k.tag, next, {}, s.latest};
    if (next > s.latest) continue;
    const entry& e = s.held[next - s.dropped - 1];
    if (earliest && earliest->order < e.order) continue;
    earliest = &e;
    r = {status::found, k.tag, next, e.body, s.latest};
  }
  return r;
}

void sender_log::note_consumed(rank_id dst, replica_index who, std::int32_t tag, timestamp ts) {
  const stream_key k{dst, tag};
  note(k, stream_of(k), who, ts);
}

void sender_log::mark_dead(rank_id dst, replica_index who) {
  receiver_of(dst)[who].dead = true;
  mark_rank_dirty(dst);
}

void sender_log::mark_alive(rank_id dst, replica_index who) { receiver_of(dst)[who].dead = false; }

bool sender_log::is_dead(rank_id dst, replica_index who) const {
  const receiver_replica* r = find_replica(dst, who);
  return r && r->dead;
}

bool sender_log::is_fallen_behind(rank_id dst, replica_index who) const {
  const receiver_replica* r = find_replica(dst, who);
  return r && r->fallen_behind;
}

timestamp sender_log::latest(rank_id dst, std::int32_t tag) const {
  const auto it = streams_.find({dst, tag});
  return it == streams_.end() ? 0 : it->second.latest;
}

void sender_log::mark_dirty(stream_key k, stream& s) {
  if (s.dirty) return;
  s.dirty = true;
  dirty_.push_back(k);
}

void sender_log::mark_rank_dirty(rank_id dst) {
  const stream_key first{dst, std::numeric_limits<std::int32_t>::min()};
  for (auto it = streams_.lower_bound(first); it != streams_.end() && it->first.dst == dst; ++it)
    mark_dirty(it->first, it->second);
}

// The last ts every replica still holding entries back has consumed on s; everything when none does.
timestamp sender_log::consumed_by_all(const stream& s, const receiver& r) const {
  timestamp least = std::numeric_limits<timestamp>::max();
  for (const auto& [who, state] : r) {
    if (!state.holds_back()) continue;
    const auto it = s.consumed.find(who);
    least = std::min(least, it == s.consumed.end() ? 0 : it->second);
  }
  return least;
}

void sender_log::drop_front(stream& s) {
  const std::uint64_t bytes = size_of(s.held.front().body);
  s.held.pop_front();
  ++s.dropped;
  --stats_.entries;
  stats_.bytes -= bytes;
  ++stats_.dropped;
}

// Only the dirty streams can have a droppable prefix: every other stream's front is still needed by someone.
void sender_log::drop_consumed() {
  for (const stream_key& k : dirty_) {
    stream& s = streams_.find(k)->second;
    s.dirty = false;
    const timestamp upto = std::min(s.latest, consumed_by_all(s, receivers_.at(k.dst)));
    while (s.dropped < upto) drop_front(s);
  }
  dirty_.clear();
}

void sender_log::declare_fallen_behind(stream_key k, const stream& s, timestamp ts,
                                       std::vector<std::pair<rank_id, replica_index>>& fallen) {
  for (auto& [who, state] : receivers_.at(k.dst)) {
    if (!state.holds_back()) continue;
    const auto c = s.consumed.find(who);
    if (c != s.consumed.end() && c->second >= ts) continue;
    state.fallen_behind = true;
    fallen.emplace_back(k.dst, who);
    ++stats_.fallen_behind;
  }
  mark_rank_dirty(k.dst);  // whatever else only they needed, on every stream to their rank, goes too
}

std::vector<std::pair<rank_id, replica_index>> sender_log::trim() {
  drop_consumed();
  std::vector<std::pair<rank_id, replica_index>> fallen;
  while (stats_.bytes > options_.capacity_bytes && !send_order_.empty()) {
    const auto [k, ts] = send_order_.front();
    send_order_.pop_front();
    const stream& s = streams_.find(k)->second;
    if (ts <= s.dropped) continue;  // consumed and dropped already
    assert(ts == s.dropped + 1);    // the oldest entry held is the front of its stream
    declare_fallen_behind(k, s, ts, fallen);
    drop_consumed();
    assert(s.dropped >= ts);
  }
  sweep_send_order();
  return fallen;
}

// Items of entries dropped as consumed stay in send_order_ until they reach its front; sweep them out once they
// outnumber the entries held, so the queue stays O(entries) (amortised O(1) per append).
void sender_log::sweep_send_order() {
  if (send_order_.size() <= 2 * stats_.entries + 64) return;
  std::erase_if(send_order_, [&](const std::pair<stream_key, timestamp>& item) {
    return item.second <= streams_.find(item.first)->second.dropped;
  });
}

bool sender_log::drained() const { return stats_.entries == 0; }

bool sender_log::holds_for(rank_id dst) const {
  const stream_key first{dst, std::numeric_limits<std::int32_t>::min()};
  for (auto it = streams_.lower_bound(first); it != streams_.end() && it->first.dst == dst; ++it)
    if (!it->second.held.empty()) return true;
  return false;
}

sender_log::stats sender_log::statistics() const { return stats_; }

}  // namespace phoenix::volpex
