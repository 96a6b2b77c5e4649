// apps/isort/isort.cpp — see isort.hpp.
#include "apps/isort/isort.hpp"

#include <algorithm>
#include <iterator>
#include <numeric>
#include <thread>

#include "apps/isort/log.hpp"

namespace phoenix::apps::isort {
namespace {

using clock = std::chrono::steady_clock;
constexpr int max_messages_per_turn = 64;
// How long a send refused with PH_EAGAIN is retried: the node holds too many messages waiting for a route
// (during a migration); they drain as routes come back.
constexpr auto send_patience = std::chrono::seconds(10);

template <class Send>
std::error_code patiently(Send&& send_once) {
  const auto give_up = clock::now() + send_patience;
  for (;;) {
    const std::error_code ec = send_once();
    if (ec.value() != PH_EAGAIN || clock::now() >= give_up) return ec;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Splits the ascending indices of `items` into runs of consecutive values and calls f(first, end) for each.
template <class Items, class Index, class F>
void for_each_run(const Items& items, Index index, F f) {
  std::size_t begin = 0;
  for (std::size_t i = 1; i <= items.size(); ++i) {
    if (i == items.size() || index(items[i]) != index(items[i - 1]) + 1) {
      f(begin, i);
      begin = i;
    }
  }
}

}  // namespace

Sorter::Sorter(Node& node, const NpbClass& c, SortOptions options)
    : node_(node),
      class_(c),
      options_(options),
      layout_(c.keys, c.buckets, node.space_size()),
      bucket_map_(layout_.bucket.as_vnode_map()),
      identity_map_{[](std::uint64_t v) { return static_cast<vp_t>(v); }, true},
      total_iterations_(std::uint64_t{options.rounds} * max_iterations) {
  if (options_.chunk_buckets == 0) options_.chunk_buckets = std::max(1u, c.buckets / 16);
  node_.set_state_handlers([this](Interval s) { return pack(s); },
                           [this](Interval s, std::span<const std::byte> state) { return unpack(s, state); });
}

void Sorter::start() {
  for (std::uint64_t lo = 0; lo < class_.keys; lo += block_keys()) {
    const std::uint64_t hi = std::min<std::uint64_t>(class_.keys, lo + block_keys());
    key_blocks_.emplace(lo, KeyBlock{lo, hi, 0, std::vector<std::uint32_t>(hi - lo, 0)});
  }
  for (std::uint32_t j = 0; j < class_.buckets; ++j) records_.emplace(j, BucketRecord(class_, j));
  collector_.emplace(class_, options_.rounds);
}

// --- the loop -----------------------------------------------------------------------------------------------

Sorter::End Sorter::run(const Hooks& hooks) {
  launch::RunControl control(node_, hooks, options_.leave_timeout, options_.leave_retry, isort_log());
  for (;;) {
    if (done_) return End::done;
    if (control.stop()) return End::stopped;
    if (const auto end = control.tick_and_leave(clock::now())) return *end;
    bool busy = drain_messages();
    settle();
    busy = step_key_block() || busy;
    if (!busy) {
      if (auto m = node_.recv_for(any_tag, options_.idle_wait)) {
        handle(*m);
        settle();
      }
    }
  }
}

bool Sorter::drain_messages() {
  for (int i = 0; i < max_messages_per_turn; ++i) {
    auto m = node_.try_recv(any_tag);
    if (!m) return i > 0;
    handle(*m);
  }
  return true;
}

// --- key blocks ---------------------------------------------------------------------------------------------

// Runs one iteration of the block furthest behind, if the window lets it.
bool Sorter::step_key_block() {
  const std::uint64_t limit = std::min(total_iterations_, complete_through_ + options_.window);
  KeyBlock* behind = nullptr;
  for (auto& [lo, b] : key_blocks_) {
    if (b.next < limit && (!behind || b.next < behind->next)) behind = &b;
  }
  if (!behind) return false;
  run_iteration(*behind);
  merge_key_blocks();
  return true;
}

void Sorter::run_iteration(KeyBlock& b) {
  const std::uint64_t g = b.next;
  b.prepare(class_, g);
  const auto counts = b.count_buckets(class_);
  const CountsMessage message{g, {b.lo, b.hi}, counts, b.test_queries(class_)};
  multicast_to(Tag::counts, {0, class_.buckets}, bucket_map_, encode(message));
  send_keys(b, g, counts);
  if (last_of_round(g)) send_to(0, Tag::input, encode(InputReport{g, {b.lo, b.hi}, b.key_sum()}));
  ++b.next;
  ++stats_.key_iterations;
}

void Sorter::send_keys(const KeyBlock& b, std::uint64_t g, const std::vector<std::uint32_t>& counts) {
  b.by_bucket(class_, counts, grouped_);
  std::size_t start = 0;  // where bucket `first` begins in grouped_
  for (std::uint32_t first = 0; first < class_.buckets;) {
    std::uint32_t end = std::min(class_.buckets, first + options_.chunk_buckets);
    while (first < end && counts[first] == 0) ++first;
    std::uint32_t last = end;
    while (last > first && counts[last - 1] == 0) --last;
    if (first < last) {
      const auto chunk_counts = std::span<const std::uint32_t>(counts).subspan(first, last - first);
      const std::size_t n = std::accumulate(chunk_counts.begin(), chunk_counts.end(), std::size_t{0});
      const auto values = std::span<const std::uint32_t>(grouped_).subspan(start, n);
      deliver_keys(b, g, first, chunk_counts, values);
      start += n;
    }
    first = end;
  }
}

// The keys of buckets [first, first + counts.size()): this node's records take theirs from `values` (a copy
// into the record, where a message would cost three more), a multicast (one message on each side of this
// node's buckets at most) carries them to the others.
void Sorter::deliver_keys(const KeyBlock& b, std::uint64_t g, std::uint32_t first,
                          std::span<const std::uint32_t> counts, std::span<const std::uint32_t> values) {
  const IndexRange range{first, first + counts.size()};
  const auto split = split_by_owner(node_, range, bucket_map_);
  if (!split) {
    ++stats_.send_errors;
    return isort_log()->error("buckets [{}, {}) cannot be multicast to", range.lo, range.hi);
  }
  std::vector<std::size_t> starts(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), starts.begin() + 1);
  if (!split->rest.empty()) {
    // multicast_runs waits out PH_EAGAIN itself, message by message: retrying here could send a half twice.
    const Bytes body = encode_keys(g, {b.lo, b.hi}, first, counts, values);
    if (auto ec = multicast_runs(node_, tag_of(Tag::keys), split->rest, bucket_map_, body)) {
      ++stats_.send_errors;
      isort_log()->error("multicasting keys over [{}, {}) failed: {}", range.lo, range.hi, ec.message());
    } else {
      for (const IndexRange& run : split->rest)
        stats_.keys_sent += starts[run.hi - first] - starts[run.lo - first];
    }
  }
  if (split->mine.empty()) return;
  for (const IndexRange& run : split->mine) {
    for (auto j = static_cast<std::uint32_t>(run.lo); j < run.hi; ++j) {
      const std::size_t i = j - first;
      BucketRecord* rec = record(j);
      if (!rec) continue;  // counted as bad by record()
      if (!rec->add_keys(g, values.subspan(starts[i], starts[i + 1] - starts[i]))) {
        bad("keys refused");
        continue;
      }
      stats_.keys_handed += starts[i + 1] - starts[i];
    }
  }
  changed_ = true;
}

// --- messages -----------------------------------------------------------------------------------------------

void Sorter::handle(const Message& m) {
  changed_ = true;
  const int t = m.tag() - options_.first_tag;
  if (t < 0 || t >= tag_count) return bad("a message with tag " + std::to_string(m.tag()));
  switch (static_cast<Tag>(t)) {
    case Tag::counts:
      return on_counts(m);
    case Tag::lower:
      return on_lower(m);
    case Tag::keys:
      return on_keys(m);
    case Tag::report:
      return on_report(m);
    case Tag::input:
      return on_input(m);
    case Tag::progress:
      return on_progress(m);
  }
}

// The multicast's indices this node handles; nullopt (counted) if the message is malformed.
std::optional<MulticastDelivery> Sorter::accept(const Message& m, const VnodeMap& map) {
  auto d = accept_multicast(node_, m, map);
  if (!d) {
    bad("a malformed multicast with tag " + std::to_string(m.tag()));
    return std::nullopt;
  }
  if (d->forward_error) {
    ++stats_.send_errors;
    isort_log()->error("sending a multicast on failed: {}", d->forward_error.message());
  }
  return d;
}

BucketRecord* Sorter::record(std::uint32_t j) {
  auto it = records_.find(j);
  if (it != records_.end()) return &it->second;
  bad("data for bucket " + std::to_string(j) + ", whose record is not here");
  return nullptr;
}

// An iteration still being ranked: not over (the collector has everything of those) and within the run.
bool Sorter::live(std::uint64_t g) const { return g >= complete_through_ && g < total_iterations_; }

void Sorter::on_counts(const Message& m) {
  const auto d = accept(m, bucket_map_);
  if (!d || d->mine.empty()) return;
  const auto c = decode_counts(class_, d->payload);
  if (!c || !live(c->iteration)) return bad("a malformed or stale counts message");
  for (const IndexRange& r : d->mine) {
    for (auto j = static_cast<std::uint32_t>(r.lo); j < r.hi; ++j) {
      std::vector<TestQuery> queries;
      std::copy_if(c->queries.begin(), c->queries.end(), std::back_inserter(queries),
                   [&](const TestQuery& q) { return checking_bucket(class_, q.key) == j; });
      BucketRecord* rec = record(j);
      if (rec && !rec->add_counts(c->iteration, c->keys, c->counts[j], queries)) bad("counts refused");
    }
  }
}

void Sorter::on_lower(const Message& m) {
  const auto d = accept(m, bucket_map_);
  if (!d || d->mine.empty()) return;
  const auto l = decode_lower(class_, d->payload);
  if (!l || !live(l->iteration)) return bad("a malformed or stale lower-total message");
  for (const IndexRange& r : d->mine) {
    for (auto j = static_cast<std::uint32_t>(r.lo); j < r.hi; ++j) {
      BucketRecord* rec = record(j);
      if (rec && !rec->add_lower(l->iteration, l->buckets, l->sum)) bad("a lower total refused");
    }
  }
}

void Sorter::on_keys(const Message& m) {
  const auto d = accept(m, bucket_map_);
  if (!d || d->mine.empty()) return;
  const auto k = decode_keys(class_, d->payload);
  if (!k || !live(k->iteration)) return bad("a malformed or stale keys message");
  for (const IndexRange& r : d->mine) {
    if (r.lo < k->first_bucket || r.hi > k->first_bucket + k->counts.size())
      return bad("a keys message for buckets it has no keys of");
    for (auto j = static_cast<std::uint32_t>(r.lo); j < r.hi; ++j) {
      BucketRecord* rec = record(j);
      if (rec && !rec->add_keys(k->iteration, k->keys_of(j))) bad("keys refused");
    }
  }
}

void Sorter::on_report(const Message& m) {
  const auto r = decode_report(class_, m.bytes());
  if (!r) return bad("a malformed report");
  if (!collector_) return bad("a report, and the collector is not here");
  if (!collector_->add(*r)) bad("a report refused");
}

void Sorter::on_input(const Message& m) {
  const auto r = decode_input(class_, m.bytes());
  if (!r) return bad("a malformed key report");
  if (!collector_) return bad("a key report, and the collector is not here");
  if (!collector_->add(*r)) bad("a key report refused");
}

void Sorter::on_progress(const Message& m) {
  const auto d = accept(m, identity_map_);
  if (!d || d->mine.empty()) return;
  const auto c = decode_progress(d->payload);
  if (!c || *c > total_iterations_) return bad("a malformed progress message");
  note_progress(*c);
  if (*c == total_iterations_) done_ = true;
}

// --- what follows from the records' state --------------------------------------------------------------------

void Sorter::settle() {
  if (!changed_) return;
  changed_ = false;
  announce_totals();
  rank_ready();
  if (collector_) advance_collector();
}

// Step 2 of isort.hpp: per iteration, each run of consecutive records here whose counts just completed.
void Sorter::announce_totals() {
  std::map<std::uint64_t, std::vector<std::uint32_t>> complete;  // iteration -> buckets, ascending
  for (const auto& [j, rec] : records_) {
    for (const auto& [g, s] : rec.iterations()) {
      if (s.counted.complete() && !s.announced) complete[g].push_back(j);
    }
  }
  for (const auto& entry : complete) {  // named, not bound: a lambda below uses them
    const std::uint64_t g = entry.first;
    const std::vector<std::uint32_t>& buckets = entry.second;
    for_each_run(
        buckets, [](std::uint32_t j) { return j; },
        [&](std::size_t begin, std::size_t end) {
          const std::uint32_t first = buckets[begin], last = buckets[end - 1] + 1;
          std::uint64_t below = 0;  // keys in the run's buckets below j
          for (std::uint32_t j = first; j < last; ++j) {
            BucketRecord& rec = records_.at(j);
            if (j > first && !rec.add_lower(g, {first, j}, below)) bad("a lower total of its own run refused");
            BucketIteration& s = *rec.find(g);
            s.announced = true;
            below += s.total;
          }
          if (last < class_.buckets)
            multicast_to(Tag::lower, {last, class_.buckets}, bucket_map_,
                         encode(LowerMessage{g, {first, last}, below}));
        });
  }
}

// Step 4: ranks every ready record and reports each run of consecutive ones of an iteration to the collector.
void Sorter::rank_ready() {
  std::vector<std::pair<std::uint32_t, std::uint64_t>> ready;  // bucket, iteration
  for (const auto& [j, rec] : records_) {
    for (const auto& [g, s] : rec.iterations()) {
      if (s.ready()) ready.emplace_back(j, g);
    }
  }
  std::map<std::uint64_t, std::vector<RankedBucket>> ranked;  // iteration -> buckets, ascending
  for (const auto& [j, g] : ready) {
    ranked[g].push_back(records_.at(j).rank(g));
    stats_.keys_ranked += ranked[g].back().keys;
  }
  for (const auto& entry : ranked) {
    const std::vector<RankedBucket>& buckets = entry.second;
    for_each_run(
        buckets, [](const RankedBucket& b) { return b.bucket; },
        [&](std::size_t begin, std::size_t end) {
          send_to(0, Tag::report, encode(summarise(std::span(buckets).subspan(begin, end - begin))));
        });
  }
}

// Step 5: the collector's progress goes to every node; at the end this node has the result.
void Sorter::advance_collector() {
  if (!collector_->advance()) return;
  const std::uint64_t c = collector_->complete_through();
  note_progress(c);
  if (collector_->finished()) result_ = collector_->verification();
  multicast_to(Tag::progress, {0, node_.space_size()}, identity_map_, encode_progress(c));
}

void Sorter::note_progress(std::uint64_t complete_through) {
  if (complete_through <= complete_through_) return;
  complete_through_ = complete_through;
  for (auto& [j, rec] : records_) {
    if (const std::size_t lost = rec.forget_before(complete_through_))
      bad(std::to_string(lost) + " unranked iterations of bucket " + std::to_string(j) + " are over");
  }
}

// --- sending ------------------------------------------------------------------------------------------------

void Sorter::send_to(vp_t v, Tag tag, Bytes body) {
  const auto ec = patiently([&] { return node_.send(v, tag_of(tag), std::move(body)); });
  if (ec) {
    ++stats_.send_errors;
    isort_log()->error("sending to virtual node {} failed: {}", v, ec.message());
  }
}

void Sorter::multicast_to(Tag tag, IndexRange r, const VnodeMap& map, std::span<const std::byte> payload) {
  const auto ec = patiently([&] { return multicast(node_, tag_of(tag), r, map, payload); });
  if (ec) {
    ++stats_.send_errors;
    isort_log()->error("multicasting over [{}, {}) failed: {}", r.lo, r.hi, ec.message());
  }
}

void Sorter::bad(const std::string& what) {
  ++stats_.bad_messages;
  isort_log()->error("{:x}: {}", node_.resource_name(), what);
}

}  // namespace phoenix::apps::isort
