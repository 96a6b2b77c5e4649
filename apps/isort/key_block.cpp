// apps/isort/key_block.cpp — see key_block.hpp.
#include "apps/isort/key_block.hpp"

#include <algorithm>

#include "apps/isort/codec.hpp"

namespace phoenix::apps::isort {

void KeyBlock::prepare(const NpbClass& c, std::uint64_t g) {
  if (npb_iteration(g) == 1) generate_keys(c, lo, keys);
  modify_keys(c, npb_iteration(g), lo, keys);
}

std::vector<std::uint32_t> KeyBlock::count_buckets(const NpbClass& c) const {
  std::vector<std::uint32_t> counts(c.buckets, 0);
  const std::uint32_t shift = c.bucket_shift();
  for (std::uint32_t k : keys) ++counts[k >> shift];
  return counts;
}

void KeyBlock::by_bucket(const NpbClass& c, const std::vector<std::uint32_t>& counts,
                         std::vector<std::uint32_t>& out) const {
  std::vector<std::size_t> place(c.buckets, 0);
  for (std::uint32_t j = 1; j < c.buckets; ++j) place[j] = place[j - 1] + counts[j - 1];
  out.resize(keys.size());  // every element is written below
  const std::uint32_t shift = c.bucket_shift();
  for (std::uint32_t k : keys) out[place[k >> shift]++] = k;
}

std::vector<TestQuery> KeyBlock::test_queries(const NpbClass& c) const {
  std::vector<TestQuery> out;
  for (std::uint32_t t = 0; t < test_keys; ++t) {
    const std::uint64_t i = c.test_index[t];
    if (i >= lo && i < hi) out.push_back({t, keys[i - lo]});
  }
  return out;
}

std::uint64_t KeyBlock::key_sum() const {
  std::uint64_t sum = 0;
  for (std::uint32_t k : keys) sum += key_checksum(k);
  return sum;
}

KeyBlock KeyBlock::split_off(std::uint64_t at) {
  KeyBlock upper{at, hi, next,
                 std::vector<std::uint32_t>(keys.begin() + static_cast<std::ptrdiff_t>(at - lo), keys.end())};
  keys.resize(at - lo);
  hi = at;
  return upper;
}

void KeyBlock::append(KeyBlock&& above) {
  keys.insert(keys.end(), above.keys.begin(), above.keys.end());
  hi = above.hi;
}

void KeyBlock::write(ByteWriter& w) const {
  w.u64(lo);
  w.u64(hi);
  w.u64(next);
  write_u32s(w, keys);
}

std::optional<KeyBlock> KeyBlock::read(const NpbClass& c, ByteReader& r) {
  KeyBlock b;
  if (!r.u64(b.lo) || !r.u64(b.hi) || !r.u64(b.next) || !read_u32s(r, b.keys) || b.lo >= b.hi ||
      b.hi > c.keys || b.keys.size() != b.hi - b.lo ||
      std::any_of(b.keys.begin(), b.keys.end(), [&](std::uint32_t k) { return k >= c.max_key; })) {
    return std::nullopt;
  }
  return b;
}

}  // namespace phoenix::apps::isort
