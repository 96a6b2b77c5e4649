#include "apps/multicast/multicast.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <thread>

#include "base/wire.hpp"

namespace phoenix::apps {
namespace {

using Runs = std::vector<IndexRange>;

constexpr std::uint8_t wire_magic = 0x4d;  // 'M'
constexpr std::uint8_t wire_version = 1;
constexpr std::size_t fixed_header_bytes = 8;
constexpr std::size_t range_bytes = 16;

// --- wire format (multicast.hpp) --------------------------------------------------------------------------

Bytes encode(std::span<const IndexRange> runs, std::span<const std::byte> payload) {
  const std::size_t header = fixed_header_bytes + range_bytes * runs.size();
  Bytes body(header + payload.size());
  std::byte* p = body.data();
  base::store_le<std::uint8_t>(p, wire_magic);
  base::store_le<std::uint8_t>(p + 1, wire_version);
  base::store_le<std::uint16_t>(p + 2, 0);
  base::store_le<std::uint32_t>(p + 4, static_cast<std::uint32_t>(runs.size()));
  p += fixed_header_bytes;
  for (const IndexRange& r : runs) {
    base::store_le<std::uint64_t>(p, r.lo);
    base::store_le<std::uint64_t>(p + 8, r.hi);
    p += range_bytes;
  }
  if (!payload.empty()) std::memcpy(p, payload.data(), payload.size());
  return body;
}

struct Decoded {
  Runs ranges;
  std::span<const std::byte> payload;
};

// Checks the header field by field before trusting it: the count must fit the body, so a forged count cannot
// make us read past the message or allocate more than it holds.
std::optional<Decoded> decode(std::span<const std::byte> body) {
  if (body.size() < fixed_header_bytes) return std::nullopt;
  const std::byte* p = body.data();
  if (base::load_le<std::uint8_t>(p) != wire_magic || base::load_le<std::uint8_t>(p + 1) != wire_version ||
      base::load_le<std::uint16_t>(p + 2) != 0)
    return std::nullopt;
  const std::uint64_t n = base::load_le<std::uint32_t>(p + 4);
  if (n == 0 || n > (body.size() - fixed_header_bytes) / range_bytes) return std::nullopt;
  Decoded d;
  d.ranges.reserve(n);
  p += fixed_header_bytes;
  for (std::uint64_t i = 0; i < n; ++i, p += range_bytes) {
    const IndexRange r{base::load_le<std::uint64_t>(p), base::load_le<std::uint64_t>(p + 8)};
    if (r.empty()) return std::nullopt;
    if (!d.ranges.empty() && r.lo < d.ranges.back().hi) return std::nullopt;  // out of order or overlapping
    d.ranges.push_back(r);
  }
  d.payload = body.subspan(fixed_header_bytes + range_bytes * n);
  return d;
}

// --- the indices of a message that this node assumes ------------------------------------------------------

std::uint64_t count_indices(std::span<const IndexRange> runs) {
  std::uint64_t n = 0;  // disjoint ranges below 2^64 hold fewer than 2^64 indices: no overflow
  for (const IndexRange& r : runs) n += r.size();
  return n;
}

// The index half-way through the indices of `runs` (non-empty): where a message is sent, so that with a
// monotonic f its receiver's run splits the rest into two parts of at most half the size each.
std::uint64_t middle_index(std::span<const IndexRange> runs) {
  std::uint64_t skip = count_indices(runs) / 2;
  for (const IndexRange& r : runs) {
    if (skip < r.size()) return r.lo + skip;
    skip -= r.size();
  }
  return runs.back().hi - 1;  // not reached
}

// Appends index range [lo, hi) to runs, merging it with the last run when they touch.
void append_run(Runs& runs, std::uint64_t lo, std::uint64_t hi) {
  if (lo >= hi) return;
  if (!runs.empty() && runs.back().hi == lo)
    runs.back().hi = hi;
  else
    runs.push_back({lo, hi});
}

// The first j in [lo, hi) with f(j) >= v, or hi: f is non-decreasing there.
std::uint64_t first_at_or_above(const VnodeMap& map, std::uint64_t lo, std::uint64_t hi, vp_t v) {
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (map.f(mid) < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

struct Split {
  Runs mine;
  Runs rest;
};

// Monotonic f: per assumed interval, the indices mapped into it form one run, found by binary search. Only
// the ends of each range are checked against [0, L); the values between lie between them.
bool split_monotonic(const std::vector<Interval>& assumed, const Runs& ranges, const VnodeMap& map, vp_t L,
                     Split& out) {
  for (const IndexRange& r : ranges) {
    const vp_t first = map.f(r.lo);
    const vp_t last = map.f(r.hi - 1);
    if (first > last || last >= L) return false;
    std::uint64_t done = r.lo;  // indices below `done` are classified
    for (const Interval& s : assumed) {
      if (s.hi <= first || s.lo > last) continue;
      const std::uint64_t from = first_at_or_above(map, done, r.hi, s.lo);
      const std::uint64_t to = first_at_or_above(map, from, r.hi, s.hi);
      append_run(out.rest, done, from);
      append_run(out.mine, from, to);
      done = to;
    }
    append_run(out.rest, done, r.hi);
  }
  return true;
}

bool assumes(const std::vector<Interval>& assumed, vp_t v) {
  auto it =
      std::upper_bound(assumed.begin(), assumed.end(), v, [](vp_t x, const Interval& s) { return x < s.lo; });
  return it != assumed.begin() && std::prev(it)->contains(v);
}

// Any f: every index is looked at.
bool split_scanning(const std::vector<Interval>& assumed, const Runs& ranges, const VnodeMap& map, vp_t L,
                    Split& out) {
  if (count_indices(ranges) > max_scanned_indices) return false;
  for (const IndexRange& r : ranges) {
    for (std::uint64_t j = r.lo; j < r.hi; ++j) {
      const vp_t v = map.f(j);
      if (v >= L) return false;
      append_run(assumes(assumed, v) ? out.mine : out.rest, j, j + 1);
    }
  }
  return true;
}

std::optional<Split> split(const Node& node, const Runs& ranges, const VnodeMap& map) {
  std::vector<Interval> assumed = node.assumed();
  std::sort(assumed.begin(), assumed.end(), [](const Interval& a, const Interval& b) { return a.lo < b.lo; });
  Split out;
  const bool ok = map.monotonic ? split_monotonic(assumed, ranges, map, node.space_size(), out)
                                : split_scanning(assumed, ranges, map, node.space_size(), out);
  if (!ok) return std::nullopt;
  return out;
}

// --- sending on -------------------------------------------------------------------------------------------

// PH_EAGAIN means the node holds too many messages for now; they drain as links deliver, so waiting a little is
// better than losing these indices.
std::error_code send_patiently(Node& node, vp_t dest, int tag, Bytes body) {
  const auto give_up = std::chrono::steady_clock::now() + forward_patience;
  for (;;) {
    std::error_code ec = node.send(dest, tag, std::move(body));  // on an error, body is left as it was
    if (ec.value() != PH_EAGAIN || std::chrono::steady_clock::now() >= give_up) return ec;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::error_code forward(Node& node, int tag, std::span<const IndexRange> runs,
                        std::span<const std::byte> payload, const VnodeMap& map);

// One message for all of `runs`. Should their header make it too big (a scattered remainder has many runs),
// they go as two smaller messages instead: one run never makes a message bigger than the one received.
std::error_code forward_one(Node& node, int tag, std::span<const IndexRange> runs,
                            std::span<const std::byte> payload, const VnodeMap& map) {
  const std::error_code ec = send_patiently(node, map.f(middle_index(runs)), tag, encode(runs, payload));
  if (ec.value() == PH_ETOOBIG && runs.size() > 1) return forward(node, tag, runs, payload, map);
  return ec;
}

// The rest goes as at most two messages, each with half of the runs: fan-out stays two, and a list of
// scattered runs halves at each hop.
std::error_code forward(Node& node, int tag, std::span<const IndexRange> runs,
                        std::span<const std::byte> payload, const VnodeMap& map) {
  if (runs.empty()) return {};
  if (runs.size() == 1) return forward_one(node, tag, runs, payload, map);
  const std::size_t half = runs.size() / 2;
  const std::error_code first = forward_one(node, tag, runs.first(half), payload, map);
  const std::error_code second = forward_one(node, tag, runs.subspan(half), payload, map);
  return first ? first : second;
}

}  // namespace

std::error_code multicast(Node& node, int tag, IndexRange r, const VnodeMap& map,
                          std::span<const std::byte> payload) {
  if (r.lo == r.hi) return {};
  if (r.lo > r.hi || !map.f) return make_error_code(PH_EINVAL);
  const IndexRange one[] = {r};
  const vp_t L = node.space_size();
  const vp_t middle = map.f(middle_index(one));
  if (middle >= L) return make_error_code(PH_EINVAL);
  if (map.monotonic) {
    // The checks every receiver makes: refuse here what they would refuse.
    const vp_t first = map.f(r.lo);
    const vp_t last = map.f(r.hi - 1);
    if (first > middle || middle > last || last >= L) return make_error_code(PH_EINVAL);
  } else if (r.size() > max_scanned_indices) {
    return make_error_code(PH_EINVAL);
  }
  return node.send(middle, tag, encode(one, payload));
}

std::optional<IndexSplit> split_by_owner(const Node& node, IndexRange r, const VnodeMap& map) {
  if (r.lo > r.hi || !map.f) return std::nullopt;
  if (r.empty()) return IndexSplit{};
  const Runs one{r};
  std::optional<Split> s = split(node, one, map);
  if (!s) return std::nullopt;
  return IndexSplit{std::move(s->mine), std::move(s->rest)};
}

std::error_code multicast_runs(Node& node, int tag, std::span<const IndexRange> runs, const VnodeMap& map,
                               std::span<const std::byte> payload) {
  if (!map.f) return make_error_code(PH_EINVAL);
  return forward(node, tag, runs, payload, map);
}

std::optional<MulticastDelivery> accept_multicast(Node& node, const Message& m, const VnodeMap& map) {
  if (!map.f) return std::nullopt;
  std::optional<Decoded> d = decode(m.bytes());
  if (!d) return std::nullopt;
  std::optional<Split> s = split(node, d->ranges, map);
  if (!s) return std::nullopt;
  MulticastDelivery out;
  out.payload = d->payload;
  // A receiver that assumes none of the indices lost their virtual nodes after the message arrived: the same
  // message to the same virtual node reaches their new owner.
  out.forward_error = s->mine.empty() ? forward_one(node, m.tag(), d->ranges, d->payload, map)
                                      : forward(node, m.tag(), s->rest, d->payload, map);
  out.mine = std::move(s->mine);
  return out;
}

}  // namespace phoenix::apps
