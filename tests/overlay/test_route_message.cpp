// Tests of overlay/routing/route_message: layout, round trips, strict rejection, splitting.
#include <doctest/doctest.h>

#include <random>

#include "overlay/routing/route_message.hpp"

using namespace phoenix::overlay;

namespace {

std::vector<std::byte> bytes(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int x : v) out.push_back(static_cast<std::byte>(x));
  return out;
}

void put_u16(std::vector<std::byte>& out, std::uint16_t v) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
}
void put_u64(std::vector<std::byte>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
}

// An update payload built by hand, so that the decoder can be fed what the encoder refuses to write.
// Each entry's intervals, then (if given) what it has in transit.
std::vector<std::byte> raw_update(std::uint8_t flags, std::uint8_t reserved, std::uint16_t count,
                                  const std::vector<std::vector<route_interval>>& entries,
                                  const std::vector<std::vector<route_interval>>& transit = {}) {
  std::vector<std::byte> out{static_cast<std::byte>(flags), static_cast<std::byte>(reserved)};
  put_u16(out, count);
  std::uint64_t source = 1;
  for (std::size_t e = 0; e < entries.size(); ++e) {
    const std::vector<route_interval> none;
    const auto& moving = e < transit.size() ? transit[e] : none;
    put_u64(out, source++);
    put_u64(out, 2);
    put_u16(out, 1);
    put_u16(out, static_cast<std::uint16_t>(entries[e].size()));
    put_u16(out, static_cast<std::uint16_t>(moving.size()));
    for (const auto* list : {&entries[e], &moving}) {
      for (const auto& iv : *list) {
        put_u64(out, iv.lo);
        put_u64(out, iv.hi);
      }
    }
  }
  return out;
}

route_update sample_update() {
  return {true,
          {{0x1122334455667788ull, 42, 3, {{0, 10}, {20, 30}}, {{10, 15}}},
           {7, 13, infinite_metric, {}},
           {~std::uint64_t{0}, ~std::uint64_t{0} - 1, 0, {{~std::uint64_t{0} - 1, ~std::uint64_t{0}}}}}};
}

std::vector<std::byte> encode_one(const route_update& u) {
  auto p = encode_update(u, 1 << 20);
  REQUIRE(p.size() == 1);
  return p[0];
}

bool rejected(const std::vector<std::byte>& p, const char* expect_in_error) {
  std::string err;
  const bool bad = !decode_update(p, &err).has_value();
  if (bad && err.find(expect_in_error) == std::string::npos) {
    MESSAGE("error text '" << err << "' lacks '" << expect_in_error << "'");
    return false;
  }
  return bad;
}

}  // namespace

TEST_CASE("route_message: update layout is little-endian and exact") {
  const route_update u{true, {{0x0102030405060708ull, 0x0A, 0x0B0C, {{1, 0x0100}}, {{0x0100, 0x0102}}}}};
  const auto want =
      bytes({0x01, 0x00, 0x01, 0x00,                          // flags, reserved, count 1
             0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,  // source
             0x0A, 0,    0,    0,    0,    0,    0,    0,     // seqno
             0x0C, 0x0B, 0x01, 0x00, 0x01, 0x00,              // metric, n_intervals, n_transit
             1,    0,    0,    0,    0,    0,    0,    0,    0x00, 0x01, 0, 0, 0, 0, 0, 0,      // [1, 256)
             0x00, 0x01, 0, 0, 0, 0, 0, 0, 0x02, 0x01, 0, 0, 0, 0, 0, 0});                  // [256, 258)
  CHECK(encode_one(u) == want);
  CHECK(decode_update(want) == u);
}

TEST_CASE("route_message: update round trip") {
  for (bool full : {false, true}) {
    route_update u = sample_update();
    u.full_dump = full;
    const auto p = encode_one(u);
    CHECK(p.size() == route_update_header_bytes + encoded_size(u.entries[0]) + encoded_size(u.entries[1]) +
                          encoded_size(u.entries[2]));
    CHECK(decode_update(p) == u);
  }
  const auto empty = encode_update(route_update{}, 100);
  REQUIRE(empty.size() == 1);
  CHECK(empty[0] == bytes({0, 0, 0, 0}));
  CHECK(decode_update(empty[0]) == route_update{});
}

TEST_CASE("route_message: request layout, round trip and strictness") {
  const route_request r{0x0102030405060708ull, 0x1122, 0x0401};
  const auto p = encode_request(r);
  CHECK(p == bytes({8, 7, 6, 5, 4, 3, 2, 1, 0x22, 0x11, 0, 0, 0, 0, 0, 0, 0x01, 0x04}));
  CHECK(decode_request(p) == r);
  std::string err;
  auto shorter = p;
  shorter.pop_back();
  CHECK_FALSE(decode_request(shorter, &err));
  CHECK(err.find("truncated") != std::string::npos);
  auto longer = p;
  longer.push_back(std::byte{0});
  CHECK_FALSE(decode_request(longer, &err));
  CHECK(err.find("trailing") != std::string::npos);
  auto zero_hops = p;
  zero_hops[16] = zero_hops[17] = std::byte{0};
  CHECK_FALSE(decode_request(zero_hops, &err));
  CHECK_FALSE(decode_request({}));
}

TEST_CASE("route_message: every truncation and any trailing byte is rejected") {
  const auto p = encode_one(sample_update());
  for (std::size_t len = 0; len < p.size(); ++len) {
    CAPTURE(len);
    std::string err;
    CHECK_FALSE(decode_update(std::span(p).first(len), &err));
    CHECK(err.find("truncated") != std::string::npos);
  }
  auto longer = p;
  longer.push_back(std::byte{0});
  CHECK(rejected(longer, "trailing"));
}

TEST_CASE("route_message: count mismatches are rejected") {
  const std::vector<std::vector<route_interval>> two{{{0, 1}}, {}};
  CHECK(decode_update(raw_update(0, 0, 2, two)).has_value());
  CHECK(rejected(raw_update(0, 0, 1, two), "trailing"));
  CHECK(rejected(raw_update(0, 0, 3, two), "truncated"));
  CHECK(rejected(raw_update(0, 0, 0xFFFF, two), "truncated"));  // a huge claim over a few bytes
}

TEST_CASE("route_message: bad headers and bad intervals are rejected") {
  CHECK(rejected(raw_update(0, 1, 0, {}), "reserved"));
  CHECK(rejected(raw_update(0x02, 0, 0, {}), "flags"));
  CHECK(rejected(raw_update(0, 0, 1, {{{5, 5}}}), "intervals"));                 // empty
  CHECK(rejected(raw_update(0, 0, 1, {{{6, 5}}}), "intervals"));                 // reversed
  CHECK(rejected(raw_update(0, 0, 1, {{{10, 20}, {0, 5}}}), "intervals"));       // unsorted
  CHECK(rejected(raw_update(0, 0, 1, {{{0, 10}, {9, 20}}}), "intervals"));       // overlapping
  CHECK(decode_update(raw_update(0, 0, 1, {{{0, 10}, {10, 20}}})).has_value());  // adjacent is disjoint
  CHECK(rejected(raw_update(0, 0, 1, {{}}, {{{7, 7}}}), "intervals"));              // in transit: empty
  CHECK(rejected(raw_update(0, 0, 1, {{}}, {{{10, 20}, {0, 5}}}), "intervals"));    // unsorted
  CHECK(decode_update(raw_update(0, 0, 1, {{{0, 10}}}, {{{10, 20}}})).has_value());  // each list on its own

  // More than 4096 intervals: refused from the count alone, before looking for the bytes.
  auto p = raw_update(0, 0, 1, {{}});
  p[22] = std::byte{0x01};  // n_intervals = 4097
  p[23] = std::byte{0x10};
  CHECK(rejected(p, "too many intervals"));
  std::vector<route_interval> many;
  for (std::uint64_t i = 0; i < max_route_intervals; ++i) many.push_back({2 * i, 2 * i + 1});
  CHECK(decode_update(raw_update(0, 0, 1, {many})).has_value());
  // ... over both lists together.
  const std::vector<route_interval> one_more{{~std::uint64_t{0} - 1, ~std::uint64_t{0}}};
  CHECK(rejected(raw_update(0, 0, 1, {many}, {one_more}), "too many intervals"));
  route_update too_many{false, {{1, 2, 1, many, one_more}}};
  CHECK(encode_update(too_many, 1 << 20).empty());
}

TEST_CASE("route_message: big updates split across payloads, each within the limit and flagged") {
  route_update u{true, {}};
  for (std::uint64_t i = 0; i < 100; ++i) {
    std::vector<route_interval> ivs;
    for (std::uint64_t k = 0; k < i % 4; ++k) ivs.push_back({100 * i + 10 * k, 100 * i + 10 * k + 5});
    u.entries.push_back({i + 1, 2 * i + 2, static_cast<std::uint16_t>(i), ivs});
  }
  for (std::size_t max : {84u, 100u, 200u, 1400u}) {
    CAPTURE(max);
    const auto payloads = encode_update(u, max);
    REQUIRE_FALSE(payloads.empty());
    CHECK(payloads.size() > 1);
    route_update joined{true, {}};
    for (const auto& p : payloads) {
      CHECK(p.size() <= max);
      auto d = decode_update(p);
      REQUIRE(d.has_value());
      CHECK(d->full_dump);
      CHECK_FALSE(d->entries.empty());
      joined.entries.insert(joined.entries.end(), d->entries.begin(), d->entries.end());
    }
    CHECK(joined == u);
  }
  u.full_dump = false;
  for (const auto& p : encode_update(u, 300)) CHECK_FALSE(decode_update(p)->full_dump);
}

TEST_CASE("route_message: payloads are packed to the byte") {
  route_update u;
  u.entries.resize(6, route_entry{1, 2, 3, {}});  // 22 bytes each
  const std::size_t two = route_update_header_bytes + 2 * route_entry_header_bytes;
  CHECK(encode_update(u, two).size() == 3);  // exactly two per payload
  for (const auto& p : encode_update(u, two - 1))
    CHECK(p.size() == two - route_entry_header_bytes);  // one each
  CHECK(encode_update(u, two - 1).size() == 6);
  CHECK(encode_update(u, two + route_entry_header_bytes - 1).size() == 3);
}

TEST_CASE("route_message: more entries than a u16 count holds are split too") {
  route_update u;
  u.entries.resize(70000, route_entry{1, 2, 3, {}});
  const auto payloads = encode_update(u, std::size_t{1} << 30);
  REQUIRE(payloads.size() == 2);
  CHECK(decode_update(payloads[0])->entries.size() == 65535);
  CHECK(decode_update(payloads[1])->entries.size() == 70000 - 65535);
}

TEST_CASE("route_message: what cannot be encoded is refused, not mangled") {
  const route_entry e{1, 2, 3, {{0, 10}, {20, 30}}};  // 54 bytes on the wire
  CHECK(encode_update({false, {e}}, route_update_header_bytes + encoded_size(e)).size() == 1);
  CHECK(encode_update({false, {e}}, route_update_header_bytes + encoded_size(e) - 1).empty());
  CHECK(encode_update({false, {}}, 3).empty());
  CHECK(encode_update({false, {{1, 2, 3, {{10, 0}}}}}, 1000).empty());
  CHECK(encode_update({false, {{1, 2, 3, {{0, 10}, {5, 20}}}}}, 1000).empty());
  CHECK(encode_update({false, {{1, 2, 3, {}, {{8, 4}}}}}, 1000).empty());  // in transit, reversed
  std::vector<route_interval> too_many;
  for (std::uint64_t i = 0; i <= max_route_intervals; ++i) too_many.push_back({2 * i, 2 * i + 1});
  CHECK(encode_update({false, {{1, 2, 3, too_many}}}, 1 << 20).empty());
}

TEST_CASE("route_message: mutated payloads never crash and accepted ones are canonical") {
  // A tiny deterministic fuzzer (the real one is libFuzzer): flip, insert, delete and truncate bytes of a valid
  // payload. Under ASan/UBSan this finds out-of-bounds reads; the canonical check finds lenient parsing.
  const auto base = encode_one(sample_update());
  std::mt19937_64 rng(2024);
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    auto p = base;
    for (int m = 0, edits = 1 + static_cast<int>(rng() % 4); m < edits; ++m) {
      const std::size_t at = p.empty() ? 0 : rng() % p.size();
      switch (rng() % 4) {
        case 0:
          if (!p.empty()) p[at] = static_cast<std::byte>(rng());
          break;
        case 1:
          p.insert(p.begin() + static_cast<std::ptrdiff_t>(at), static_cast<std::byte>(rng()));
          break;
        case 2:
          if (!p.empty()) p.erase(p.begin() + static_cast<std::ptrdiff_t>(at));
          break;
        default:
          p.resize(at);
          break;
      }
    }
    if (auto u = decode_update(p)) {
      ++accepted;
      REQUIRE(encode_one(*u) == p);
    }
    if (auto r = decode_request(std::span(p).first(std::min(p.size(), route_request_bytes)))) {
      CHECK(encode_request(*r) == std::vector<std::byte>(p.begin(), p.begin() + route_request_bytes));
    }
  }
  CHECK(accepted > 0);  // byte flips inside seqnos and metrics stay valid
}

TEST_CASE("route_message: a forget entry has seqno 0, an infinite metric and no intervals, or is rejected") {
  const route_update u{false, {forget_entry(7), {8, 2, 1, {{1, 2}}}}};
  CHECK(decode_update(encode_one(u)) == u);
  // One entry of seqno 0 with the given metric, intervals and transit, built by hand.
  auto forget = [](std::uint16_t metric, std::uint16_t n_intervals, std::uint16_t n_transit) {
    std::vector<std::byte> out{std::byte{0}, std::byte{0}};
    put_u16(out, 1);
    put_u64(out, 7);
    put_u64(out, 0);
    put_u16(out, metric);
    put_u16(out, n_intervals);
    put_u16(out, n_transit);
    for (int i = 0; i < n_intervals + n_transit; ++i) {
      put_u64(out, 1);
      put_u64(out, 2);
    }
    return out;
  };
  CHECK(decode_update(forget(infinite_metric, 0, 0)) == route_update{false, {forget_entry(7)}});
  CHECK(rejected(forget(1, 0, 0), "forget entry with a metric or intervals"));
  CHECK(rejected(forget(infinite_metric, 1, 0), "forget entry with a metric or intervals"));
  CHECK(rejected(forget(infinite_metric, 0, 1), "forget entry with a metric or intervals"));
  CHECK(encode_update(route_update{false, {{7, 0, 1, {}}}}, 1000).empty());
}

TEST_CASE("route_message: summaries are 13 bytes, round trip, and reject other sizes and flags") {
  const route_summary sum{0x0102030405060708ull, 0x0A0B0C0D, true};
  const auto p = encode_summary(sum);
  CHECK(p == bytes({0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x0D, 0x0C, 0x0B, 0x0A, 0x01}));
  CHECK(decode_summary(p) == sum);
  CHECK(decode_summary(encode_summary({5, 1, false})) == route_summary{5, 1, false});
  std::string why;
  auto bad = p;
  bad.back() = std::byte{0x02};
  CHECK_FALSE(decode_summary(bad, &why).has_value());
  CHECK(why == "unknown flags");
  bad.pop_back();
  CHECK_FALSE(decode_summary(bad, &why).has_value());
  CHECK(why == "summary of the wrong size");
  bad = p;
  bad.push_back(std::byte{0});
  CHECK_FALSE(decode_summary(bad).has_value());
  CHECK(decode_dump_request({}).has_value());
  CHECK_FALSE(decode_dump_request(bytes({0}), &why).has_value());
  CHECK(why == "dump request with a payload");
}
