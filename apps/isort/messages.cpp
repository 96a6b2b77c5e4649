// apps/isort/messages.cpp — see messages.hpp.
#include "apps/isort/messages.hpp"

#include <numeric>

#include "apps/isort/codec.hpp"

namespace phoenix::apps::isort {
namespace {

void write_range(ByteWriter& w, IndexRange r) {
  w.u64(r.lo);
  w.u64(r.hi);
}

// A non-empty range inside [0, end).
bool read_range(ByteReader& r, std::uint64_t end, IndexRange& out) {
  return r.u64(out.lo) && r.u64(out.hi) && out.lo < out.hi && out.hi <= end;
}

std::uint64_t sum(const std::vector<std::uint32_t>& v) {
  return std::accumulate(v.begin(), v.end(), std::uint64_t{0});
}

}  // namespace

// iteration, keys, the test keys; then the B counts.
Bytes encode(const CountsMessage& m) {
  ByteWriter w;
  w.u64(m.iteration);
  write_range(w, m.keys);
  w.u32(static_cast<std::uint32_t>(m.queries.size()));
  for (const TestQuery& q : m.queries) {
    w.u32(q.test);
    w.u32(q.key);
  }
  Bytes out = std::move(w).take();
  append_u32s(out, m.counts);
  return out;
}

std::optional<CountsMessage> decode_counts(const NpbClass& c, std::span<const std::byte> b) {
  const std::size_t counts_bytes = 4 * std::size_t{c.buckets};
  if (b.size() < counts_bytes) return std::nullopt;
  ByteReader r(b.first(b.size() - counts_bytes));
  CountsMessage m;
  std::uint32_t n = 0;
  if (!r.u64(m.iteration) || !read_range(r, c.keys, m.keys) || !r.u32(n) || n > test_keys) return std::nullopt;
  m.queries.resize(n);
  for (TestQuery& q : m.queries) {
    if (!r.u32(q.test) || !r.u32(q.key) || q.test >= test_keys) return std::nullopt;
  }
  if (!r.at_end()) return std::nullopt;
  m.counts = u32s_of(b.last(counts_bytes));
  if (sum(m.counts) != m.keys.size()) return std::nullopt;
  return m;
}

Bytes encode(const LowerMessage& m) {
  ByteWriter w;
  w.u64(m.iteration);
  write_range(w, m.buckets);
  w.u64(m.sum);
  return std::move(w).take();
}

std::optional<LowerMessage> decode_lower(const NpbClass& c, std::span<const std::byte> b) {
  ByteReader r(b);
  LowerMessage m;
  if (!r.u64(m.iteration) || !read_range(r, c.buckets, m.buckets) || !r.u64(m.sum) || m.sum > c.keys ||
      !r.at_end()) {
    return std::nullopt;
  }
  return m;
}

// A fixed header (iteration, keys, first bucket, how many counts); then the counts, then the keys.
constexpr std::size_t keys_header_bytes = 8 + 16 + 4 + 4;

Bytes encode(const KeysMessage& m) { return encode_keys(m.iteration, m.keys, m.first_bucket, m.counts, m.values); }

Bytes encode_keys(std::uint64_t iteration, IndexRange keys, std::uint32_t first_bucket,
                  std::span<const std::uint32_t> counts, std::span<const std::uint32_t> values) {
  ByteWriter w(keys_header_bytes + 4 * (counts.size() + values.size()));  // one allocation
  w.u64(iteration);
  write_range(w, keys);
  w.u32(first_bucket);
  w.u32(static_cast<std::uint32_t>(counts.size()));
  Bytes out = std::move(w).take();
  append_u32s(out, counts);
  append_u32s(out, values);
  return out;
}

std::optional<KeysMessage> decode_keys(const NpbClass& c, std::span<const std::byte> b) {
  if (b.size() < keys_header_bytes) return std::nullopt;
  ByteReader r(b.first(keys_header_bytes));
  KeysMessage m;
  std::uint32_t ncounts = 0;
  if (!r.u64(m.iteration) || !read_range(r, c.keys, m.keys) || !r.u32(m.first_bucket) || !r.u32(ncounts) ||
      ncounts == 0 || m.first_bucket >= c.buckets || ncounts > c.buckets - m.first_bucket) {
    return std::nullopt;
  }
  const auto arrays = b.subspan(keys_header_bytes);
  const std::size_t counts_bytes = 4 * std::size_t{ncounts};
  if (arrays.size() < counts_bytes || arrays.size() % 4 != 0) return std::nullopt;
  m.counts = u32s_of(arrays.first(counts_bytes));
  if (sum(m.counts) != (arrays.size() - counts_bytes) / 4 || sum(m.counts) > m.keys.size()) return std::nullopt;
  m.values = u32s_of(arrays.subspan(counts_bytes));
  m.starts.resize(m.counts.size() + 1, 0);
  std::partial_sum(m.counts.begin(), m.counts.end(), m.starts.begin() + 1);
  return m;
}

void write_report(ByteWriter& w, const RunReport& m) {
  w.u64(m.iteration);
  w.u32(m.first);
  w.u32(m.last);
  w.u64(m.keys);
  w.u64(m.offset);
  w.u32(static_cast<std::uint32_t>(m.tests.size()));
  for (const TestResult& t : m.tests) {
    w.u32(t.test);
    w.u8(t.passed ? 1 : 0);
  }
  w.u8(m.in_order ? 1 : 0);
  w.u32(m.min_key);
  w.u32(m.max_key);
  w.u64(m.key_sum);
  w.u64(m.placed_sum);
}

bool read_report(const NpbClass& c, ByteReader& r, RunReport& m) {
  std::uint32_t n = 0;
  if (!r.u64(m.iteration) || !r.u32(m.first) || !r.u32(m.last) || m.first >= m.last || m.last > c.buckets ||
      !r.u64(m.keys) || m.keys > c.keys || !r.u64(m.offset) || !r.u32(n) || n > test_keys) {
    return false;
  }
  m.tests.resize(n);
  for (TestResult& t : m.tests) {
    std::uint8_t passed = 0;
    if (!r.u32(t.test) || t.test >= test_keys || !r.u8(passed) || passed > 1) return false;
    t.passed = passed == 1;
  }
  std::uint8_t in_order = 0;
  if (!r.u8(in_order) || in_order > 1 || !r.u32(m.min_key) || !r.u32(m.max_key) || !r.u64(m.key_sum) ||
      !r.u64(m.placed_sum)) {
    return false;
  }
  m.in_order = in_order == 1;
  return true;
}

Bytes encode(const RunReport& m) {
  ByteWriter w;
  write_report(w, m);
  return std::move(w).take();
}

std::optional<RunReport> decode_report(const NpbClass& c, std::span<const std::byte> b) {
  ByteReader r(b);
  RunReport m;
  if (!read_report(c, r, m) || !r.at_end()) return std::nullopt;
  return m;
}

Bytes encode(const InputReport& m) {
  ByteWriter w;
  w.u64(m.iteration);
  write_range(w, m.keys);
  w.u64(m.key_sum);
  return std::move(w).take();
}

std::optional<InputReport> decode_input(const NpbClass& c, std::span<const std::byte> b) {
  ByteReader r(b);
  InputReport m;
  if (!r.u64(m.iteration) || !read_range(r, c.keys, m.keys) || !r.u64(m.key_sum) || !r.at_end())
    return std::nullopt;
  return m;
}

Bytes encode_progress(std::uint64_t complete_through) {
  ByteWriter w;
  w.u64(complete_through);
  return std::move(w).take();
}

std::optional<std::uint64_t> decode_progress(std::span<const std::byte> b) {
  ByteReader r(b);
  std::uint64_t v = 0;
  if (!r.u64(v) || !r.at_end()) return std::nullopt;
  return v;
}

}  // namespace phoenix::apps::isort
