// tests/apps/test_isort.cpp — integer sort (apps/isort) piece by piece: the NPB generator and benchmark, the
// maps of keys and buckets to virtual nodes, completion by coverage, bucket records and the collector through
// whole rounds without a network, their migrating state, malformed messages, and one node sorting alone.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "apps/isort/isort.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

namespace {

using namespace phoenix;
using namespace phoenix::apps::isort;
using phoenix::apps::ByteReader;
using phoenix::apps::ByteWriter;
using phoenix::apps::IndexRange;

const NpbClass S = *npb_class('S');

// The keys of class c as iteration `through` of a round leaves them.
std::vector<std::uint32_t> keys_after(const NpbClass& c, int through) {
  std::vector<std::uint32_t> keys(c.keys);
  generate_keys(c, 0, keys);
  for (int it = 1; it <= through; ++it) modify_keys(c, it, 0, keys);
  return keys;
}

// Every proper prefix of b fails to decode.
template <class Decode>
void check_truncations_refused(const Bytes& b, Decode decode) {
  for (std::size_t n = 0; n < b.size(); ++n) {
    CHECK_FALSE(decode(std::span<const std::byte>(b.data(), n)));
  }
}

// One round of class c through key blocks, bucket records and the collector, without a network: every
// delivery of counts and keys happens in a shuffled order, and each bucket announces its total on its own.
Verification simulate_round(const NpbClass& c, std::uint64_t nblocks, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<KeyBlock> blocks;
  for (std::uint64_t b = 0; b < nblocks; ++b) {
    const std::uint64_t lo = c.keys * b / nblocks, hi = c.keys * (b + 1) / nblocks;
    blocks.push_back(KeyBlock{lo, hi, 0, std::vector<std::uint32_t>(hi - lo)});
  }
  std::vector<BucketRecord> records;
  for (std::uint32_t j = 0; j < c.buckets; ++j) records.emplace_back(c, j);
  Collector collector(c, 1);
  for (std::uint64_t g = 0; g < max_iterations; ++g) {
    std::vector<std::function<bool()>> deliveries;
    for (KeyBlock& b : blocks) {
      b.prepare(c, g);
      const auto counts = b.count_buckets(c);
      const auto grouped = std::make_shared<std::vector<std::uint32_t>>();
      b.by_bucket(c, counts, *grouped);
      const auto queries = b.test_queries(c);
      const IndexRange range{b.lo, b.hi};
      std::size_t start = 0;
      for (std::uint32_t j = 0; j < c.buckets; ++j) {
        std::vector<TestQuery> mine;
        for (const auto& q : queries)
          if (checking_bucket(c, q.key) == j) mine.push_back(q);
        deliveries.push_back(
            [&, g, j, range, n = counts[j], mine] { return records[j].add_counts(g, range, n, mine); });
        deliveries.push_back([&, g, j, grouped, start, n = counts[j]] {
          return records[j].add_keys(g, std::span<const std::uint32_t>(*grouped).subspan(start, n));
        });
        start += counts[j];
      }
      if (last_of_round(g)) CHECK(collector.add(InputReport{g, range, b.key_sum()}));
    }
    std::shuffle(deliveries.begin(), deliveries.end(), rng);
    std::size_t refused = 0;
    for (auto& d : deliveries) refused += d() ? 0 : 1;
    for (std::uint32_t j = 0; j < c.buckets; ++j) {
      const std::uint64_t total = records[j].find(g)->total;
      for (std::uint32_t k = j + 1; k < c.buckets; ++k)
        refused += records[k].add_lower(g, {j, j + 1}, total) ? 0 : 1;
    }
    REQUIRE(refused == 0);
    for (auto& rec : records) {
      REQUIRE(rec.find(g)->ready());
      const RankedBucket ranked = rec.rank(g);
      CHECK(collector.add(summarise(std::span(&ranked, 1))));
    }
    CHECK(collector.advance());
    CHECK(collector.complete_through() == g + 1);
  }
  CHECK(collector.finished());
  return collector.verification();
}

}  // namespace

// --- NPB ----------------------------------------------------------------------------------------------------

TEST_CASE("isort: randlc is x <- 5^13 x mod 2^46 from seed 314159265 and skip_ahead jumps along it") {
  double x = npb_seed;
  std::uint64_t exact = 314159265;
  int differ = 0;
  for (int i = 0; i < 1000; ++i) {
    exact = (exact * 1220703125ULL) & ((std::uint64_t{1} << 46) - 1);
    const double r = randlc(x, npb_multiplier);
    differ += static_cast<std::uint64_t>(x) == exact && r == static_cast<double>(exact) * 0x1p-46 ? 0 : 1;
  }
  CHECK(differ == 0);
  CHECK(skip_ahead(npb_seed, npb_multiplier, 1000) == x);
  CHECK(skip_ahead(npb_seed, npb_multiplier, 0) == npb_seed);
  double y = npb_seed;
  CHECK(randlc(y, npb_multiplier) ==
        doctest::Approx(0.7945219111887383).epsilon(1e-15));  // 55909509111989 2^-46
}

TEST_CASE("isort: a slice of the key sequence generated on its own equals that slice of the whole") {
  const auto all = keys_after(S, 0);
  std::vector<std::uint32_t> part(1000);
  generate_keys(S, 12345, part);
  CHECK(std::equal(part.begin(), part.end(), all.begin() + 12345));
  CHECK(std::all_of(all.begin(), all.end(), [](std::uint32_t k) { return k < S.max_key; }));
}

TEST_CASE("isort: the sequential benchmark passes NPB's partial and full verification for classes S and W") {
  for (char name : {'S', 'W'}) {
    const NpbClass c = *npb_class(name);
    const Verification v = sequential(c, 1);
    CHECK(v.partial_passed == 50);
    CHECK(v.full_passed == 1);
    CHECK(v.successful());
  }
}

TEST_CASE("isort: the sequential sort's checksum is that of std::sort over the final keys") {
  auto keys = keys_after(S, max_iterations);
  std::sort(keys.begin(), keys.end());
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) sum += placed_checksum(i, keys[i]);
  CHECK(sequential(S, 1).sorted_checksum == sum);
  CHECK(sequential(S, 2).sorted_checksum == 2 * sum);  // rounds start from the same keys
}

TEST_CASE("isort: NPB's per-class test ranks move with the iteration as its switch says") {
  CHECK(expected_rank(S, 0, 1) == 1);
  CHECK(expected_rank(S, 2, 10) == 356);
  CHECK(expected_rank(S, 3, 10) == 64907);
  const NpbClass W = *npb_class('W');
  CHECK(expected_rank(W, 1, 1) == 11697);
  CHECK(expected_rank(W, 2, 1) == 1039986);
  const NpbClass A = *npb_class('A');
  CHECK(expected_rank(A, 2, 1) == 123928);
  CHECK(expected_rank(A, 4, 3) == 8388262);
  CHECK_FALSE(test_applies(S, 0));
  CHECK(checking_bucket(S, 0) == 0);
  CHECK(checking_bucket(S, 9) == S.bucket_of(8));
}

// --- where data lives ---------------------------------------------------------------------------------------

TEST_CASE(
    "isort: the key and bucket maps are monotonic and the intervals of a partition cover each index once") {
  for (const vp_t space : {vp_t{1000}, vp_t{1} << 40, vp_t{1} << 62}) {
    const Layout layout(S.keys, S.buckets, space);
    for (const IndexMap* m : {&layout.key, &layout.bucket}) {
      std::uint64_t decreasing = 0;
      for (std::uint64_t i = 1; i < m->count(); ++i) decreasing += m->vnode(i - 1) > m->vnode(i) ? 1 : 0;
      CHECK(decreasing == 0);
      CHECK(m->vnode(0) == 0);
      CHECK(m->vnode(m->count() - 1) < space);
      std::vector<vp_t> cuts{0, space / 7, space / 3, space / 3 + 1, space - 1, space};
      std::uint64_t next = 0, outside = 0;
      for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
        const IndexRange r = m->in({cuts[k], cuts[k + 1]});
        CHECK(r.lo == next);
        for (std::uint64_t i = r.lo; i < r.hi; ++i)
          outside += cuts[k] <= m->vnode(i) && m->vnode(i) < cuts[k + 1] ? 0 : 1;
        next = r.hi;
      }
      CHECK(outside == 0);
      CHECK(next == m->count());
    }
  }
}

TEST_CASE("isort: a coverage completes when its ranges add up and refuses overlaps") {
  Coverage c(10);
  CHECK_FALSE(c.complete());
  CHECK(c.add(4, 6));
  CHECK(c.add(0, 2));
  CHECK_FALSE(c.add(5, 7));   // overlaps [4, 6)
  CHECK_FALSE(c.add(1, 3));   // overlaps [0, 2)
  CHECK_FALSE(c.add(8, 11));  // past the end
  CHECK_FALSE(c.add(3, 3));   // empty
  CHECK(c.add(2, 4));         // joins [0, 2) and [4, 6)
  CHECK(c.ranges().size() == 1);
  CHECK(c.covered() == 6);
  CHECK(c.add(6, 10));
  CHECK(c.complete());
  CHECK(Coverage(0).complete());  // bucket 0 has no lower buckets to hear from
}

// --- records and the collector -------------------------------------------------------------------------------

TEST_CASE("isort: class S through records and collector in shuffled order verifies as the sequential run") {
  const Verification expected = sequential(S, 1);
  CHECK(simulate_round(S, 1, 1) == expected);
  CHECK(simulate_round(S, 3, 2) == expected);
  CHECK(simulate_round(S, 7, 3) == expected);
}

TEST_CASE("isort: a bucket record refuses what no correct sender sends") {
  BucketRecord rec(S, 5);
  const std::uint32_t w = S.bucket_width();
  const std::uint32_t in_bucket = 5 * w, below = 5 * w - 1;
  CHECK(rec.add_counts(0, {0, 100}, 2, {}));
  CHECK_FALSE(rec.add_counts(0, {50, 150}, 1, {}));                               // overlaps [0, 100)
  CHECK_FALSE(rec.add_counts(0, {100, 200}, 1, std::vector<TestQuery>{{0, 1}}));  // test key of another bucket
  CHECK_FALSE(rec.add_keys(0, std::vector<std::uint32_t>{below}));
  CHECK_FALSE(rec.add_lower(0, {3, 6}, 10));  // reaches past bucket 5
  CHECK(rec.add_counts(0, {100, S.keys}, 0, {}));
  CHECK(rec.add_keys(0, std::vector<std::uint32_t>{in_bucket, in_bucket + 1}));
  CHECK_FALSE(rec.add_keys(0, std::vector<std::uint32_t>{in_bucket}));  // more than counted
  CHECK(rec.add_lower(0, {0, 5}, 40));
  REQUIRE(rec.find(0)->ready());
  const RankedBucket r = rec.rank(0);
  CHECK(r.keys == 2);
  CHECK(r.offset == 40);
  CHECK_FALSE(rec.add_lower(0, {0, 1}, 1));  // ranked already
  CHECK(rec.forget_before(1) == 0);
  CHECK(rec.iterations().empty());
}

TEST_CASE("isort: a bucket record with buffered data survives pack and unpack and a damaged one is refused") {
  const std::uint32_t j = S.buckets / 2;
  const std::uint32_t k0 = j * S.bucket_width();
  BucketRecord rec(S, j);
  REQUIRE(rec.add_counts(3, {0, 1000}, 2, {}));
  REQUIRE(rec.add_keys(3, std::vector<std::uint32_t>{k0 + 1, k0, k0 + 2}));  // keys before all counts are in
  REQUIRE(rec.add_lower(3, {0, 2}, 17));
  REQUIRE(rec.add_counts(9, {0, S.keys}, 1, std::vector<TestQuery>{{1, k0 + 1}}));
  REQUIRE(rec.add_keys(9, std::vector<std::uint32_t>{k0}));
  ByteWriter w;
  rec.write(w);
  const Bytes packed = std::move(w).take();

  ByteReader r(packed);
  auto back = BucketRecord::read(S, r);
  REQUIRE(back);
  CHECK(r.at_end());
  REQUIRE(back->iterations().size() == 2);
  const BucketIteration& s = back->iterations().at(3);
  CHECK(s.counted.ranges() == rec.iterations().at(3).counted.ranges());
  CHECK(s.total == 2);
  CHECK(s.keys == std::vector<std::uint32_t>{k0 + 1, k0, k0 + 2});
  CHECK(s.offset == 17);
  CHECK(back->iterations().at(9).queries.size() == 1);

  // Both go on the same way and rank alike.
  for (BucketRecord* x : {&rec, &*back}) {
    REQUIRE(x->add_counts(3, {1000, S.keys}, 1, {}));
    REQUIRE(x->add_lower(3, {2, j}, 3));
    REQUIRE(x->add_lower(9, {0, j}, 33));
  }
  const RankedBucket a = rec.rank(3), b = back->rank(3);
  CHECK(a.keys == b.keys);
  CHECK(a.offset == b.offset);
  const RankedBucket a9 = rec.rank(9), b9 = back->rank(9);
  CHECK(a9.tests.size() == 1);
  CHECK(b9.tests.size() == 1);
  CHECK(a9.placed_sum == b9.placed_sum);  // iteration 9 is the last of round 0: keys are placed

  check_truncations_refused(packed, [](std::span<const std::byte> bytes) {
    ByteReader rr(bytes);
    return BucketRecord::read(S, rr).has_value();
  });
  Bytes forged = packed;
  forged[1] = std::byte{0xff};  // the bucket index, now beyond the class's buckets
  ByteReader rf(forged);
  CHECK_FALSE(BucketRecord::read(S, rf));

  // A total of more keys than the class has (no counts message can make one) is refused too.
  BucketRecord one(S, j);
  REQUIRE(one.add_counts(5, {0, S.keys}, 12345, {}));
  ByteWriter w1;
  one.write(w1);
  Bytes big = std::move(w1).take();
  const std::byte total_le[8]{std::byte{0x39}, std::byte{0x30}};  // 12345, little-endian
  const auto at = std::search(big.begin(), big.end(), std::begin(total_le), std::end(total_le));
  REQUIRE(at != big.end());
  ByteReader as_written(big);
  CHECK(BucketRecord::read(S, as_written));
  base::store_le<std::uint64_t>(&*at, S.keys + 1);
  ByteReader too_many(big);
  CHECK_FALSE(BucketRecord::read(S, too_many));
}

TEST_CASE("isort: the collector's state survives pack and unpack mid-iteration") {
  Collector c(S, 2);
  RunReport low;
  low.iteration = 0;
  low.first = 0;
  low.last = 100;
  low.keys = 5000;
  low.tests = {{0, true}, {3, false}};
  REQUIRE(c.add(low));
  CHECK_FALSE(c.add(low));  // the same buckets twice
  ByteWriter w;
  c.write(w);
  const Bytes packed = std::move(w).take();
  ByteReader r(packed);
  auto back = Collector::read(S, 2, r);
  REQUIRE(back);
  CHECK(r.at_end());
  RunReport high = low;
  high.first = 100;
  high.last = S.buckets;
  high.offset = 5000;
  high.keys = S.keys - 5000;
  high.tests = {{1, true}, {2, true}, {4, true}};
  for (Collector* x : {&c, &*back}) {
    REQUIRE(x->add(high));
    CHECK(x->advance());
    CHECK(x->complete_through() == 1);
    CHECK(x->verification().partial_passed == 4);
  }
  check_truncations_refused(packed, [](std::span<const std::byte> b) {
    ByteReader rr(b);
    return Collector::read(S, 2, rr).has_value();
  });
}

TEST_CASE("isort: key blocks split and append and travel whole") {
  KeyBlock b{100, 200, 4, std::vector<std::uint32_t>(100)};
  for (std::uint32_t i = 0; i < 100; ++i) b.keys[i] = i;
  KeyBlock upper = b.split_off(150);
  CHECK(b.hi == 150);
  CHECK(upper.lo == 150);
  CHECK(upper.keys.front() == 50);
  CHECK(upper.next == 4);
  ByteWriter w;
  upper.write(w);
  const Bytes packed = std::move(w).take();
  ByteReader r(packed);
  auto back = KeyBlock::read(S, r);
  REQUIRE(back);
  b.append(std::move(*back));
  CHECK(b.hi == 200);
  CHECK(b.keys.size() == 100);
  CHECK(b.keys.back() == 99);
  check_truncations_refused(packed, [](std::span<const std::byte> bytes) {
    ByteReader rr(bytes);
    return KeyBlock::read(S, rr).has_value();
  });
}

// --- messages -----------------------------------------------------------------------------------------------

TEST_CASE("isort: messages decode as they were encoded and truncated or forged ones are refused") {
  CountsMessage counts{7, {0, 10}, std::vector<std::uint32_t>(S.buckets, 0), {{2, 99}}};
  counts.counts[3] = 10;
  const Bytes cb = encode(counts);
  const auto c2 = decode_counts(S, cb);
  REQUIRE(c2);
  CHECK(c2->counts == counts.counts);
  CHECK(c2->queries.size() == 1);
  check_truncations_refused(cb, [](auto b) { return decode_counts(S, b).has_value(); });
  counts.counts[4] = 1;  // 11 counted among 10 keys
  CHECK_FALSE(decode_counts(S, encode(counts)));

  KeysMessage keys;
  keys.iteration = 1;
  keys.keys = {0, 10};
  keys.first_bucket = 2;
  keys.counts = {1, 0, 2};
  keys.values = {8, 16, 17};
  const Bytes kb = encode(keys);
  const auto k2 = decode_keys(S, kb);
  REQUIRE(k2);
  CHECK(k2->keys_of(2).size() == 1);
  CHECK(k2->keys_of(3).empty());
  CHECK(k2->keys_of(4)[1] == 17);
  check_truncations_refused(kb, [](auto b) { return decode_keys(S, b).has_value(); });
  keys.first_bucket = S.buckets - 1;  // three buckets from the last one
  CHECK_FALSE(decode_keys(S, encode(keys)));

  const Bytes lb = encode(LowerMessage{3, {0, 4}, 100});
  CHECK(decode_lower(S, lb));
  check_truncations_refused(lb, [](auto b) { return decode_lower(S, b).has_value(); });
  CHECK_FALSE(decode_lower(S, encode(LowerMessage{3, {4, 4}, 100})));  // an empty run

  RunReport report;
  report.first = 1;
  report.last = 2;
  report.tests = {{4, true}};
  const Bytes rb = encode(report);
  CHECK(decode_report(S, rb));
  check_truncations_refused(rb, [](auto b) { return decode_report(S, b).has_value(); });
  report.tests = {{5, true}};  // there are five test keys
  CHECK_FALSE(decode_report(S, encode(report)));

  const Bytes ib = encode(InputReport{9, {0, S.keys}, 1});
  CHECK(decode_input(S, ib));
  check_truncations_refused(ib, [](auto b) { return decode_input(S, b).has_value(); });
  CHECK_FALSE(decode_input(S, encode(InputReport{9, {0, S.keys + 1}, 1})));

  Bytes pb = encode_progress(4);
  CHECK(decode_progress(pb) == 4u);
  pb.push_back(std::byte{0});
  CHECK_FALSE(decode_progress(pb));
}

// --- one node ----------------------------------------------------------------------------------------------

TEST_CASE("isort: one node sorts class S alone and counts the messages it cannot use without trusting them") {
  test::temp_dir dir;
  Node node(test::node_config("isort-unit", dir.make_key(), std::uint64_t{1} << 40));
  REQUIRE_FALSE(node.initialize("tcp://127.0.0.1:0"));
  SortOptions options;
  options.rounds = 2;
  Sorter sorter(node, S, options);
  sorter.start();
  REQUIRE_FALSE(node.assume({0, node.space_size()}));

  const std::byte junk[3]{};
  for (int t = 0; t < tag_count; ++t) REQUIRE_FALSE(node.send(0, options.first_tag + t, junk, sizeof junk));
  REQUIRE_FALSE(node.send(0, options.first_tag + tag_count, junk, sizeof junk));  // not a tag of the sorter's
  std::vector<std::uint32_t> all(S.buckets, 0);
  all[0] = static_cast<std::uint32_t>(S.keys);
  const Layout layout(S.keys, S.buckets, node.space_size());
  REQUIRE_FALSE(apps::multicast(node, options.first_tag, {0, S.buckets}, layout.bucket.as_vnode_map(),
                                encode(CountsMessage{99, {0, S.keys}, all, {}})));  // an iteration past the run

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  Sorter::Hooks hooks;
  hooks.stop = [&] { return std::chrono::steady_clock::now() > deadline; };
  REQUIRE(sorter.run(hooks) == Sorter::End::done);
  REQUIRE(sorter.result());
  CHECK(*sorter.result() == sequential(S, 2));
  CHECK(sorter.stats().keys_ranked == 2 * max_iterations * S.keys);
  // Sixteen key blocks of N / 16 keys, each an iteration at a time, never merged into larger ones: the node
  // answers joins and leaves between them.
  CHECK(sorter.stats().key_iterations == 2 * max_iterations * 16);
  // Every bucket is here: each key goes to its bucket's record without a message.
  CHECK(sorter.stats().keys_handed == 2 * max_iterations * S.keys);
  CHECK(sorter.stats().keys_sent == 0);
  CHECK(sorter.stats().bad_messages == tag_count + 2);
  CHECK(sorter.stats().send_errors == 0);
  CHECK_FALSE(node.finalize());
}
