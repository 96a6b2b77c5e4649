// apps/isort/bucket.cpp — see bucket.hpp.
#include "apps/isort/bucket.hpp"

#include <algorithm>

#include "apps/isort/codec.hpp"

namespace phoenix::apps::isort {

std::uint32_t checking_bucket(const NpbClass& c, std::uint32_t k) {
  return test_applies(c, k) ? c.bucket_of(k - 1) : 0;
}

namespace {

// k lies in [bucket w, (bucket + 1) w), w the bucket width (below, k - bucket w wraps around to a large value).
bool holds_key(const NpbClass& c, std::uint32_t bucket, std::uint32_t k) {
  return k - bucket * c.bucket_width() < c.bucket_width();
}

bool checks_query(const NpbClass& c, std::uint32_t bucket, const TestQuery& q) {
  return q.test < test_keys && checking_bucket(c, q.key) == bucket;
}

bool consistent(const BucketIteration& s) {
  if (s.ranked && (!s.keys.empty() || !s.queries.empty())) return false;
  return !s.counted.complete() || s.keys.size() <= s.total;  // keys may come before the last counts
}

}  // namespace

BucketIteration& BucketRecord::at(std::uint64_t g) {
  return iterations_.try_emplace(g, class_->keys, bucket_).first->second;
}

BucketIteration* BucketRecord::find(std::uint64_t g) {
  auto it = iterations_.find(g);
  return it == iterations_.end() ? nullptr : &it->second;
}

bool BucketRecord::add_counts(std::uint64_t g, IndexRange keys, std::uint64_t count,
                              std::span<const TestQuery> queries) {
  for (const TestQuery& q : queries) {
    if (!checks_query(*class_, bucket_, q)) return false;
    const std::uint64_t index = class_->test_index[q.test];
    if (index < keys.lo || index >= keys.hi) return false;
  }
  if (BucketIteration* s = find(g); s && s->ranked) return false;
  BucketIteration& s = at(g);
  if (!s.counted.add(keys.lo, keys.hi)) return false;
  s.total += count;
  s.queries.insert(s.queries.end(), queries.begin(), queries.end());
  return consistent(s);
}

bool BucketRecord::add_lower(std::uint64_t g, IndexRange buckets, std::uint64_t sum) {
  if (buckets.hi > bucket_) return false;
  if (BucketIteration* s = find(g); s && s->ranked) return false;
  BucketIteration& s = at(g);
  if (!s.lower.add(buckets.lo, buckets.hi)) return false;
  s.offset += sum;
  return true;
}

bool BucketRecord::add_keys(std::uint64_t g, std::span<const std::uint32_t> keys) {
  if (keys.empty()) return true;  // a bucket inside a key message's range with none of the sender's keys
  if (!std::all_of(keys.begin(), keys.end(), [&](std::uint32_t k) { return holds_key(*class_, bucket_, k); }))
    return false;
  if (BucketIteration* s = find(g);
      s && (s->ranked || (s->counted.complete() && s->keys.size() + keys.size() > s->total))) {
    return false;
  }
  BucketIteration& s = at(g);
  s.keys.insert(s.keys.end(), keys.begin(), keys.end());
  return true;
}

// Counting over the bucket's values, as NPB's rank() does per bucket: rank_of[v] becomes the number of keys
// <= base + v in the whole array.
RankedBucket BucketRecord::rank(std::uint64_t g) {
  BucketIteration& s = iterations_.at(g);
  const std::uint32_t base = bucket_ * class_->bucket_width();
  std::vector<std::uint64_t> rank_of(class_->bucket_width(), 0);
  for (std::uint32_t k : s.keys) ++rank_of[k - base];
  rank_of[0] += s.offset;
  for (std::size_t v = 1; v < rank_of.size(); ++v) rank_of[v] += rank_of[v - 1];

  RankedBucket out;
  out.iteration = g;
  out.bucket = bucket_;
  out.keys = s.total;
  out.offset = s.offset;
  check_tests(s, npb_iteration(g), rank_of, out);
  if (last_of_round(g)) place(s, rank_of, out);
  s.ranked = true;
  s.keys = {};
  s.queries = {};
  return out;
}

void BucketRecord::check_tests(const BucketIteration& s, int it, std::span<const std::uint64_t> rank_of,
                               RankedBucket& out) {
  const std::uint32_t base = bucket_ * class_->bucket_width();
  for (const TestQuery& q : s.queries) {
    const bool passed =
        test_applies(*class_, q.key) && rank_of[q.key - 1 - base] == expected_rank(*class_, q.test, it);
    out.tests.push_back({q.test, passed});
  }
}

// NPB's full_verify for this bucket: each key goes to the place its rank gives; then the order is checked.
void BucketRecord::place(BucketIteration& s, std::vector<std::uint64_t>& rank_of, RankedBucket& out) {
  const std::uint32_t base = bucket_ * class_->bucket_width();
  std::vector<std::uint32_t> placed(s.keys.size());
  for (std::uint32_t k : s.keys) placed[--rank_of[k - base] - s.offset] = k;
  for (std::size_t i = 0; i < placed.size(); ++i) {
    if (i > 0 && placed[i - 1] > placed[i]) out.in_order = false;
    out.key_sum += key_checksum(placed[i]);
    out.placed_sum += placed_checksum(s.offset + i, placed[i]);
  }
  if (!placed.empty()) {
    out.min_key = placed.front();
    out.max_key = placed.back();
  }
}

std::size_t BucketRecord::forget_before(std::uint64_t g) {
  std::size_t unranked = 0;
  for (auto it = iterations_.begin(); it != iterations_.end() && it->first < g;) {
    if (!it->second.ranked) ++unranked;
    it = iterations_.erase(it);
  }
  return unranked;
}

// --- the record as it migrates -------------------------------------------------------------------------------

void BucketRecord::write(ByteWriter& w) const {
  w.u32(bucket_);
  w.u64(iterations_.size());
  for (const auto& [g, s] : iterations_) {
    w.u64(g);
    write_coverage(w, s.counted);
    w.u64(s.total);
    w.u64(s.queries.size());
    for (const TestQuery& q : s.queries) {
      w.u32(q.test);
      w.u32(q.key);
    }
    w.u8(s.announced ? 1 : 0);
    write_coverage(w, s.lower);
    w.u64(s.offset);
    write_u32s(w, s.keys);
    w.u8(s.ranked ? 1 : 0);
  }
}

namespace {

bool read_queries(ByteReader& r, std::vector<TestQuery>& queries) {
  std::uint64_t n = 0;
  if (!r.u64(n) || n > test_keys) return false;
  queries.resize(n);
  for (TestQuery& q : queries) {
    if (!r.u32(q.test) || !r.u32(q.key)) return false;
  }
  return true;
}

bool read_flag(ByteReader& r, bool& flag) {
  std::uint8_t v = 0;
  if (!r.u8(v) || v > 1) return false;
  flag = v == 1;
  return true;
}

}  // namespace

// Checked as the messages that built it were, so a forged state is refused as they are.
std::optional<BucketRecord> BucketRecord::read(const NpbClass& c, ByteReader& r) {
  std::uint32_t bucket = 0;
  std::uint64_t n = 0;
  if (!r.u32(bucket) || bucket >= c.buckets || !r.u64(n)) return std::nullopt;
  BucketRecord rec(c, bucket);
  for (std::uint64_t i = 0; i < n; ++i) {
    std::uint64_t g = 0;
    BucketIteration s(c.keys, bucket);
    if (!r.u64(g) || rec.iterations_.count(g) || !read_coverage(r, s.counted) || !r.u64(s.total) ||
        !read_queries(r, s.queries) || !read_flag(r, s.announced) || !read_coverage(r, s.lower) ||
        !r.u64(s.offset) || !read_u32s(r, s.keys) || !read_flag(r, s.ranked)) {
      return std::nullopt;
    }
    const bool valid =
        s.counted.end() == c.keys && s.lower.end() == bucket && s.total <= c.keys && s.offset <= c.keys &&
        consistent(s) &&
        std::all_of(s.keys.begin(), s.keys.end(), [&](std::uint32_t k) { return holds_key(c, bucket, k); }) &&
        std::all_of(s.queries.begin(), s.queries.end(), [&](auto& q) { return checks_query(c, bucket, q); });
    if (!valid) return std::nullopt;
    rec.iterations_.emplace(g, std::move(s));
  }
  return rec;
}

}  // namespace phoenix::apps::isort
