// tests/apps/test_lu.cpp — the LU application's parts (apps/lu): where blocks live, the kernels against naive
// loops, the row permutation of a step, the residual check, the block records' codec and state hand-over, bad
// input, and a whole factorisation on one in-process node.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "apps/lu/block.hpp"
#include "apps/lu/block_memory.hpp"
#include "apps/lu/factorization.hpp"
#include "apps/lu/kernels.hpp"
#include "apps/lu/layout.hpp"
#include "apps/lu/lu.hpp"
#include "apps/lu/payload.hpp"
#include "apps/multicast/multicast.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

namespace {

using namespace phoenix;
using namespace phoenix::apps::lu;
using phoenix::apps::ByteReader;
using phoenix::apps::ByteWriter;
using namespace std::chrono_literals;

constexpr std::uint64_t L = std::uint64_t{1} << 40;

std::vector<double> random_matrix(std::uint32_t rows, std::uint32_t cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<double> a(std::size_t{rows} * cols);
  for (auto& x : a) x = d(rng);
  return a;
}

double max_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// L·U of the packed m×n factors (L unit lower m×n, U upper n×n), by the definition.
std::vector<double> naive_product(const std::vector<double>& lu, std::uint32_t m, std::uint32_t n) {
  std::vector<double> out(std::size_t{m} * n, 0.0);
  for (std::uint32_t i = 0; i < m; ++i)
    for (std::uint32_t j = 0; j < n; ++j)
      for (std::uint32_t t = 0; t <= std::min(i, j); ++t) {
        const double l = t == i ? 1.0 : lu[std::size_t{t} * m + i];
        out[std::size_t{j} * m + i] += l * lu[std::size_t{j} * m + t];
      }
  return out;
}

// Rows of the m×n matrix a interchanged as LAPACK's pivots say (row i with pivots[i], in order).
std::vector<double> interchanged(std::vector<double> a, std::uint32_t m, std::uint32_t n,
                                 const std::vector<std::uint32_t>& pivots) {
  for (std::uint32_t i = 0; i < pivots.size(); ++i)
    for (std::uint32_t c = 0; c < n; ++c)
      std::swap(a[std::size_t{c} * m + i], a[std::size_t{c} * m + pivots[i]]);
  return a;
}

struct OneNode {
  test::temp_dir dir;
  Node node;
  OneNode() : node(test::node_config("lu-unit", dir.make_key(), L)) {
    REQUIRE_FALSE(node.initialize("tcp://127.0.0.1:0"));
  }
};

// A factorisation of a valid problem on one in-process node that assumes nothing yet.
struct OneFactorization {
  OneNode one;
  Problem problem;
  Layout layout;
  Factorization f;
  explicit OneFactorization(const Problem& p)
      : problem(p), layout(Layout::make(p.n, p.block, L).value()), f(one.node, problem, layout) {}
};

// Two in-process nodes and a factorisation on each, for records handed from one to the other; the giver assumes
// all of [0, L).
struct Handover {
  OneNode giver, taker;
  Problem problem;
  Layout made;
  const Layout* layout = &made;
  Factorization from, to;
  explicit Handover(const Problem& p)
      : problem(p), made(Layout::make(p.n, p.block, L).value()), from(giver.node, problem, made),
        to(taker.node, problem, made) {
    REQUIRE_FALSE(giver.node.assume({0, L}));
  }
  auto parts() { return std::tie(giver, taker, layout, from, to); }
};

// Handles messages until the run is over; false if it is not over in time.
bool run_until_done(Node& node, Factorization& f, std::chrono::seconds limit = 60s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!f.done() && std::chrono::steady_clock::now() < deadline) {
    if (auto m = f.has_ready() ? node.try_recv(any_tag) : node.recv_for(any_tag, 10ms)) f.handle(*m);
    f.run_ready(2ms);
  }
  return f.done();
}

// The node takes the whole space and f runs to the end there: the residual passes, and nothing was refused.
void takes_all_and_finishes_exactly(Node& node, Factorization& f) {
  REQUIRE_FALSE(node.assume({0, L}));
  REQUIRE(run_until_done(node, f));
  REQUIRE(f.result());
  CHECK(f.result()->passed);
  CHECK(f.stats().bad_messages == 0);
}

// The records of a state packed without the collector (pack's format).
std::vector<BlockRecord> records_without_collector(const Bytes& state, const Layout& layout) {
  ByteReader r(state);
  std::uint32_t version = 0;
  std::uint8_t with_collector = 1;
  REQUIRE(r.u32(version));
  REQUIRE(r.u8(with_collector));
  CHECK(with_collector == 0);
  auto records = read_records(r, layout.nb(), layout.blocks());
  REQUIRE(records);
  return std::move(*records);
}

}  // namespace

// --- placement ----------------------------------------------------------------------------------------------

TEST_CASE("lu: K is the smallest integer from 61 prime to the number of blocks") {
  CHECK(coprime_stride(1024) == 61);
  CHECK(coprime_stride(61 * 61) == 62);
  CHECK(coprime_stride(2 * 3 * 5 * 61 * 7 * 31) == 67);  // 61..66 share a factor with M
  CHECK(coprime_stride(1) == 61);
}

TEST_CASE("lu: distinct blocks live at distinct virtual nodes, and each virtual node names its block") {
  for (const std::uint32_t side : {1u, 7u, 16u, 33u}) {
    const auto layout = Layout::make(side * 8, 8, L);
    REQUIRE(layout);
    std::set<vp_t> seen;
    for (std::uint64_t b = 0; b < layout->blocks(); ++b) {
      const vp_t v = layout->vnode(b);
      CHECK(v < L);
      CHECK(seen.insert(v).second);
      CHECK(layout->block_at(v) == b);
      CHECK(layout->transposed(layout->transposed(b)) == b);
    }
    CHECK_FALSE(layout->block_at(layout->vnode(0) + 1));
    CHECK_FALSE(layout->block_at(L - 1));
  }
}

TEST_CASE("lu: every K-th of the block sequence is spread evenly over equal shares of the space") {
  const auto layout = Layout::make(32 * 64, 64, L);  // M = 1024, K = 61
  REQUIRE(layout);
  const std::uint64_t slice = layout->blocks() / layout->stride(), shares = 4;
  for (std::uint64_t first = 0; first + slice <= layout->blocks(); first += slice) {
    std::vector<std::uint64_t> count(shares);
    for (std::uint64_t b = first; b < first + slice; ++b) ++count[layout->vnode(b) / (L / shares)];
    for (const auto c : count) CHECK(c * shares >= slice - shares);  // within one of slice / shares
    for (const auto c : count) CHECK(c * shares <= slice + shares);
  }
}

TEST_CASE("lu: a problem whose blocks do not tile the matrix or the space is refused") {
  CHECK_FALSE(Layout::make(100, 64, L));
  CHECK_FALSE(Layout::make(0, 64, L));
  CHECK_FALSE(Layout::make(64 * 64, 1, 1000));  // 4096² blocks in a space of 1000
  CHECK(validate(Problem{256, 32, true, 1, true}, L).empty());
  CHECK_FALSE(validate(Problem{250, 32, true, 1, true}, L).empty());
}

// --- kernels ------------------------------------------------------------------------------------------------

TEST_CASE("lu: the block update and the triangular solve agree with naive loops") {
  const std::uint32_t nb = 13;
  const auto a = random_matrix(nb, nb, 1), l = random_matrix(nb, nb, 2), u = random_matrix(nb, nb, 3);
  auto expected = a;
  for (std::uint32_t i = 0; i < nb; ++i)
    for (std::uint32_t j = 0; j < nb; ++j)
      for (std::uint32_t t = 0; t < nb; ++t) expected[j * nb + i] -= l[t * nb + i] * u[j * nb + t];
  auto got = a;
  subtract_product(got, l, u, nb);
  CHECK(max_difference(got, expected) < 1e-12);

  // x = L⁻¹·a by forward substitution with the unit lower triangle of l.
  auto x = a;
  for (std::uint32_t j = 0; j < nb; ++j)
    for (std::uint32_t i = 0; i < nb; ++i)
      for (std::uint32_t t = 0; t < i; ++t) x[j * nb + i] -= l[t * nb + i] * x[j * nb + t];
  got = a;
  solve_unit_lower(l, got, nb);
  CHECK(max_difference(got, x) < 1e-10);
}

TEST_CASE("lu: a panel factored with partial pivoting satisfies PA = LU") {
  const std::uint32_t m = 40, nb = 8;
  const auto a = random_matrix(m, nb, 4);
  auto lu = a;
  std::vector<std::uint32_t> pivots;
  REQUIRE(factor_panel(lu, m, nb, true, pivots) == 0);
  REQUIRE(pivots.size() == nb);
  for (std::uint32_t i = 0; i < nb; ++i) {
    CHECK(pivots[i] >= i);
    CHECK(pivots[i] < m);
    for (std::uint32_t r = i + 1; r < m; ++r) CHECK(std::abs(lu[i * m + r]) <= 1.0);  // |L| <= 1: pivoting
  }
  CHECK(max_difference(naive_product(lu, m, nb), interchanged(a, m, nb, pivots)) < 1e-12);
}

TEST_CASE("lu: a diagonally dominant panel factored without pivoting satisfies A = LU") {
  // 8 columns: the unblocked loop alone; 40 and 37: the recursion (halves of 20, 10 / 18, 19, ...) over it;
  // 20 rows of 34 columns: wider than tall.
  for (const auto& [m, nb] : {std::pair{24u, 8u}, {96u, 40u}, {37u, 37u}, {20u, 34u}}) {
    CAPTURE(nb);
    auto a = random_matrix(m, nb, 5);
    for (std::uint32_t i = 0; i < std::min(m, nb); ++i) a[i * m + i] += m;
    auto lu = a;
    std::vector<std::uint32_t> pivots;
    REQUIRE(factor_panel(lu, m, nb, false, pivots) == 0);
    CHECK(pivots.empty());
    CHECK(max_difference(naive_product(lu, m, nb), a) < 1e-12);
  }
}

TEST_CASE("lu: a zero pivot without pivoting is reported as LAPACK's info") {
  std::vector<double> a(4 * 2, 1.0);  // every column equal: U(1, 1) = 0
  std::vector<std::uint32_t> pivots;
  CHECK(factor_panel(a, 4, 2, false, pivots) == 2);
  // In the right half of a recursive split: a dominant diagonal but column 30 zero, so U(30, 30) = 0 exactly.
  const std::uint32_t m = 48, nb = 32;
  auto wide = random_matrix(m, nb, 7);
  for (std::uint32_t i = 0; i < nb; ++i) wide[i * m + i] += m;
  std::fill_n(&wide[30 * m], m, 0.0);
  CHECK(factor_panel(wide, m, nb, false, pivots) == 31);
}

TEST_CASE("lu: the net row moves of a step equal the pivots applied row by row") {
  std::mt19937 rng(6);
  for (int round = 0; round < 50; ++round) {
    const std::uint32_t n = 64, nb = 8, first = 8 * (rng() % 7);
    std::vector<std::uint32_t> pivots(nb);
    for (std::uint32_t i = 0; i < nb; ++i) pivots[i] = first + i + rng() % (n - first - i);
    std::vector<std::uint32_t> rows(n);
    std::iota(rows.begin(), rows.end(), 0);
    for (std::uint32_t i = 0; i < nb; ++i) std::swap(rows[first + i], rows[pivots[i]]);

    const auto moves = net_row_moves(first, pivots);
    std::vector<std::uint32_t> moved(n);
    std::iota(moved.begin(), moved.end(), 0);
    for (const RowMove& m : moves) {
      CHECK(m.dest != m.src);
      moved[m.dest] = m.src;
    }
    CHECK(moved == rows);
    CHECK(std::is_sorted(moves.begin(), moves.end(), [](auto& x, auto& y) { return x.dest < y.dest; }));
  }
  const std::uint32_t none[] = {16, 17, 18};
  CHECK(net_row_moves(16, none).empty());
}

TEST_CASE("lu: the residual is tiny for a true factorisation and detects a corrupted factor") {
  const std::uint32_t n = 48;
  const MatrixSpec spec{n, 7, false};
  const auto a = generate_matrix(spec);
  auto lu = a;
  std::vector<std::uint32_t> pivots;
  REQUIRE(factor_panel(lu, n, n, true, pivots) == 0);
  const double eps = std::numeric_limits<double>::epsilon();
  CHECK(relative_residual(a, lu, pivots, n) / (n * eps) < residual_threshold);
  auto corrupted = lu;
  corrupted[20 * n + 30] += 1e-6;  // one element of L
  CHECK(relative_residual(a, corrupted, pivots, n) / (n * eps) > residual_threshold);
  corrupted = lu;
  corrupted[30 * n + 20] += 1e-6;  // one element of U
  CHECK(relative_residual(a, corrupted, pivots, n) / (n * eps) > residual_threshold);
  auto swapped = pivots;
  std::swap(swapped[3], swapped[9]);
  CHECK(relative_residual(a, lu, swapped, n) / (n * eps) > residual_threshold);
}

TEST_CASE(
    "lu: the generated matrix is the same block by block as a whole, between -1 and 1, dominant on request") {
  const MatrixSpec spec{32, 9, false};
  const auto a = generate_matrix(spec);
  const auto block = generate_block(spec, 8, 2, 1);
  for (std::uint32_t c = 0; c < 8; ++c)
    for (std::uint32_t r = 0; r < 8; ++r) CHECK(block[c * 8 + r] == a[(8 + c) * 32 + 16 + r]);
  CHECK(std::all_of(a.begin(), a.end(), [](double x) { return x >= -1 && x < 1; }));
  CHECK(element({32, 9, true}, 5, 5) == doctest::Approx(element(spec, 5, 5) + 32));
  CHECK(element({32, 10, false}, 5, 5) != element(spec, 5, 5));
}

TEST_CASE("lu: block memory reserved ahead serves the next blocks without mapping more") {
  // More than the pool maps at a time, so that without the reservation the blocks would map more.
  constexpr std::size_t block_bytes = std::size_t{32} << 20, blocks = 4;
  block_memory_reserve(blocks * block_bytes);
  const BlockMemoryStats reserved = block_memory_stats();
  std::vector<Doubles> held;
  for (std::size_t i = 0; i < blocks; ++i) {
    held.emplace_back(block_bytes / sizeof(double));
    held.back().front() = static_cast<double>(i);
    held.back().back() = static_cast<double>(i);
  }
  CHECK(block_memory_stats().mapped_bytes == reserved.mapped_bytes);
  for (std::size_t i = 0; i < blocks; ++i)
    CHECK(held[i].front() + held[i].back() == 2.0 * static_cast<double>(i));
  held.clear();
  const bool pooled = reserved.mapped_bytes > 0;  // not under AddressSanitizer, where malloc has them
  CHECK(block_memory_stats().free_bytes == reserved.free_bytes + (pooled ? blocks * block_bytes : 0));
}

TEST_CASE("lu: a freed buffer larger than the one asked for is split before more memory is mapped, and "
          "interchanged rows of nearby sizes reuse one buffer") {
  constexpr std::size_t mib = std::size_t{1} << 20;
  BlockPool pool;
  void* big = pool.allocate(64 * mib);  // one arena, all of it
  const std::size_t mapped = pool.stats().mapped_bytes;
  REQUIRE(mapped == 64 * mib);
  pool.free(big, 64 * mib);
  // The arena is used up: 16 MiB come from the front of the free 64, the rest serves 48 MiB.
  CHECK(pool.allocate(16 * mib) == big);
  void* rest = pool.allocate(48 * mib);
  CHECK(rest == static_cast<std::byte*>(big) + 16 * mib);
  CHECK(pool.stats().mapped_bytes == mapped);
  CHECK(pool.stats().free_bytes == 0);
  pool.free(rest, 48 * mib);

  // The rest of a split is filed under the largest class that fits in it, where it lies: 2 MiB split by a
  // 72 KiB request leaves 1,966,080 bytes (15 steps of 128 KiB) after it.
  void* two = pool.allocate(2 * mib);  // no arena left: the front of the free 48 MiB
  pool.free(two, 2 * mib);
  CHECK(pool.allocate(73'728) == two);
  CHECK(pool.allocate(1'966'080) == static_cast<std::byte*>(two) + 73'728);
  CHECK(pool.stats().mapped_bytes == mapped);

  // Eight classes per doubling: 1,000,000 and 1,040,000 bytes share one (1 MiB), 1,100,000 is the next.
  void* rows = pool.allocate(1'000'000);
  pool.free(rows, 1'000'000);
  CHECK(pool.allocate(1'040'000) == rows);
  pool.free(rows, 1'040'000);
  void* more = pool.allocate(1'100'000);
  CHECK(more != rows);
  CHECK_THROWS_AS(pool.allocate(std::numeric_limits<std::size_t>::max() - 10), std::bad_alloc);
}

TEST_CASE("lu: the default block size is the largest divisor of N up to 512 that leaves 8 blocks a side, and none "
          "below min(32, N/16)") {
  CHECK(default_block(4096) == 512);
  CHECK(default_block(15360) == 512);
  CHECK(default_block(2048) == 256);
  CHECK(default_block(1000) == 125);
  CHECK(default_block(100) == 10);
  CHECK(default_block(97) == 0);    // a prime: blocks of one would be 9,409 records; the user chooses
  CHECK(default_block(1009) == 0);
  CHECK(default_block(4) == 1);
  CHECK(validate(Problem{4096, default_block(4096), true, 1, true}, L).empty());
}

// --- records and messages -----------------------------------------------------------------------------------

TEST_CASE("lu: messages and final blocks survive their encoding, and truncated ones are refused") {
  const Payload p{3, 5, {24, 31, 40}, {1.5, -2.25, 3.0}};
  const Bytes wire = encode(p);
  REQUIRE(decode_payload(wire));
  CHECK(*decode_payload(wire) == p);
  for (std::size_t cut = 0; cut < wire.size(); ++cut) CHECK_FALSE(decode_payload(std::span(wire).first(cut)));

  const FinalBlock f{17, 2, {8, 9}, {0.5, 0.25}};
  const Bytes final_wire = encode(f);
  REQUIRE(decode_final(final_wire));
  CHECK(*decode_final(final_wire) == f);
  for (std::size_t cut = 0; cut < final_wire.size(); ++cut)
    CHECK_FALSE(decode_final(std::span(final_wire).first(cut)));
}

TEST_CASE("lu: block records with buffered inputs travel whole, and a shared input stays shared") {
  const std::uint32_t nb = 2;
  auto shared = std::make_shared<const Payload>(Payload{1, 0, {2, 3}, {1, 2, 3, 4}});
  BlockRecord a;
  a.index = 5;
  a.step = 1;
  a.stage = Stage::sent;
  a.migrations = 3;
  a.data = {1, 2, 3, 4};
  a.inputs[{InputKind::row, 1, 0}] = shared;
  a.inputs[{InputKind::rows, 1, 2}] = std::make_shared<const Payload>(Payload{1, 2, {2}, {7, 8}});
  BlockRecord b;
  b.index = 6;
  b.final = true;
  b.inputs[{InputKind::row, 1, 0}] = shared;

  ByteWriter w;
  write_records(w, {&a, &b});
  const Bytes state = std::move(w).take();
  ByteReader r(state);
  const auto back = read_records(r, nb, 10);
  REQUIRE(back);
  CHECK(r.at_end());
  REQUIRE(back->size() == 2);
  const BlockRecord& a2 = (*back)[0];
  CHECK(a2.index == 5);
  CHECK(a2.step == 1);
  CHECK(a2.stage == Stage::sent);
  CHECK(a2.migrations == 3);
  CHECK_FALSE(a2.final);
  CHECK(a2.data == a.data);
  REQUIRE(a2.inputs.size() == 2);
  CHECK(*a2.input(InputKind::row, 1) == *shared);
  CHECK(a2.input(InputKind::rows, 1, 2)->data == Doubles{7, 8});
  CHECK((*back)[1].final);
  CHECK((*back)[1].input(InputKind::row, 1) == a2.input(InputKind::row, 1));  // one payload for both

  for (std::size_t cut = 0; cut < state.size(); ++cut) {
    ByteReader truncated(std::span<const std::byte>(state).first(cut));
    const auto partial = read_records(truncated, nb, 10);
    CHECK((!partial || !truncated.at_end()));
  }
  ByteReader too_many(state);
  CHECK_FALSE(read_records(too_many, nb, 1));
  ByteReader wrong_size(state);
  CHECK_FALSE(read_records(wrong_size, 3, 10));  // 4 values are not a 3×3 block
}

TEST_CASE("lu: the collector counts final blocks once, then gathers their data once, and refuses what it cannot "
          "have") {
  const Problem problem{32, 16, true, 1, true};
  const auto layout = Layout::make(32, 16, L);  // 2×2 blocks
  REQUIRE(layout);
  Collector c(problem, *layout, 0);
  const Doubles block(16 * 16, 0.5);
  c.begin(0);
  CHECK_FALSE(c.add(FinalBlock{4, 0, {}, {}}));     // no such block
  CHECK_FALSE(c.add(FinalBlock{1, 0, {}, block}));  // data: it comes when gathered
  CHECK_FALSE(c.add(FinalBlock{1, 0, {16}, {}}));   // pivots off the diagonal
  CHECK_FALSE(c.add(FinalBlock{0, 0, {}, {}}));     // the diagonal without pivots
  std::vector<std::uint32_t> pivots(16), pivots1(16);
  std::iota(pivots.begin(), pivots.end(), 0);
  std::iota(pivots1.begin(), pivots1.end(), 16);
  CHECK(c.add(FinalBlock{0, 1, pivots, {}}));
  CHECK_FALSE(c.add(FinalBlock{0, 1, pivots, {}}));  // twice
  CHECK(c.add(FinalBlock{1, 0, {}, {}}));
  CHECK_FALSE(c.complete());
  CHECK_FALSE(c.add_data(1, block));  // before the end

  const auto moved = [&](const Collector& from) {
    ByteWriter w;
    from.write(w);
    const Bytes state = std::move(w).take();
    ByteReader r(state);
    return Collector::read(r, problem, *layout);
  };
  auto back = moved(c);
  REQUIRE(back);
  CHECK(back->begun());
  CHECK(back->add(FinalBlock{2, 0, {}, {}}));
  CHECK_FALSE(back->add(FinalBlock{1, 0, {}, {}}));  // came with the state
  CHECK(back->add(FinalBlock{3, 0, pivots1, {}}));
  REQUIRE(back->complete());
  back->stop(5);
  CHECK(back->add_data(0, block));
  CHECK_FALSE(back->add_data(0, block));       // twice
  CHECK_FALSE(back->add_data(1, {1.0}));       // not a block's size
  CHECK_FALSE(back->add_data(4, block));       // no such block
  CHECK_FALSE(back->gathered());

  auto mid = moved(*back);  // halfway through gathering
  REQUIRE(mid);
  CHECK_FALSE(mid->add_data(0, block));  // came with the state
  for (std::uint64_t b = 1; b < 4; ++b) CHECK(mid->add_data(b, block));
  REQUIRE(mid->gathered());
  const Summary s = mid->conclude();
  CHECK(s.checked);
  CHECK(s.seconds == doctest::Approx(5e-9));
  CHECK(s.migrations == 1);

  const auto not_begun = moved(Collector(problem, *layout, 0));
  REQUIRE(not_begun);
  CHECK_FALSE(not_begun->begun());
  Collector half(problem, *layout, 0);

  half.begin(0);
  REQUIRE(half.add(FinalBlock{1, 0, {}, {}}));
  half.stop(5);
  CHECK_FALSE(moved(half));  // an end with blocks missing is no collector's state
  Collector unstopped(problem, *layout, 0);
  unstopped.begin(0);
  for (std::uint64_t b = 0; b < 4; ++b)
    REQUIRE(unstopped.add(FinalBlock{b, 0, b == 0 ? pivots : b == 3 ? pivots1 : std::vector<std::uint32_t>{}, {}}));
  CHECK_FALSE(moved(unstopped));  // nor every block counted and no end: it would never gather

  const Problem unchecked{32, 16, true, 1, false};
  Collector quiet(unchecked, *layout, 0);
  quiet.begin(0);
  for (std::uint64_t b = 0; b < 4; ++b)
    REQUIRE(quiet.add(FinalBlock{b, 0, b == 0 ? pivots : b == 3 ? pivots1 : std::vector<std::uint32_t>{}, {}}));
  quiet.stop(5);
  CHECK_FALSE(quiet.add_data(1, block));  // a run that does not check gathers nothing
  CHECK_FALSE(quiet.conclude().checked);
}

TEST_CASE("lu: the RESULT line reads back as it was written") {
  Summary s;
  s.n = 512;
  s.block = 32;
  s.pivoting = false;
  s.seconds = 1.25;
  s.migrations = 9;
  record_residual(s, 1e-15);
  const auto back = parse_summary(describe(s));
  REQUIRE(back);
  CHECK(back->n == 512);
  CHECK(back->block == 32);
  CHECK_FALSE(back->pivoting);
  CHECK(back->seconds == doctest::Approx(1.25));
  CHECK(back->residual == doctest::Approx(1e-15));
  CHECK(back->passed);
  CHECK(back->migrations == 9);
  CHECK(back->gflops() == doctest::Approx(2.0 / 3.0 * 512 * 512 * 512 / 1.25 * 1e-9));
  CHECK_FALSE(parse_summary("n=5 garbage"));
  CHECK_FALSE(parse_summary(""));
}

// --- the factorisation on one node --------------------------------------------------------------------------

TEST_CASE("lu: one node factors a matrix with partial pivoting, and the residual passes") {
  OneFactorization run({96, 16, true, 3, true});
  Factorization& f = run.f;
  const Layout* layout = &run.layout;
  REQUIRE_FALSE(run.one.node.assume({0, L}));
  f.start();
  REQUIRE(run_until_done(run.one.node, f));
  REQUIRE(f.result());
  CHECK(f.result()->checked);
  CHECK(f.result()->passed);
  CHECK(f.stats().bad_messages == 0);
  CHECK(f.stats().blocks_finished == layout->blocks());
  CHECK(static_cast<double>(f.stats().flops) == doctest::Approx(2.0 / 3.0 * 96 * 96 * 96).epsilon(0.05));
}

TEST_CASE("lu: one node factors the paper's variant without pivoting") {
  OneNode one;
  const Problem problem{64, 16, false, 4, true};
  const auto layout = Layout::make(problem.n, problem.block, L);
  REQUIRE(layout);
  Factorization f(one.node, problem, *layout);
  REQUIRE_FALSE(one.node.assume({0, L}));
  f.start();
  REQUIRE(run_until_done(one.node, f));
  REQUIRE(f.result());
  CHECK(f.result()->passed);
  CHECK_FALSE(f.result()->pivoting);
}

TEST_CASE("lu: records leave with pack and arrive with unpack, with everything they had buffered, and finish exactly") {
  Handover run({64, 16, true, 5, true});
  auto [giver, taker, layout, from, to] = run.parts();
  from.start();
  // Some way into the run: every block of one process feeds the others without messages, one record per call.
  for (int i = 0; i < 40; ++i) from.run_ready(0ns);
  REQUIRE(from.has_ready());  // inputs given and not yet looked at: they must move with their records
  const Interval upper{L / 2, L};
  const std::size_t before = from.records();
  const auto state = from.pack(upper);
  REQUIRE(state);
  const std::size_t moved = before - from.records();
  CHECK(moved == layout->blocks() / 2);
  CHECK(from.has_collector());  // virtual node 0 stays
  CHECK(from.stats().records_moved_out == moved);

  CHECK(to.unpack(upper, *state));
  CHECK(to.records() == moved);
  CHECK(to.stats().records_moved_in == moved);
  CHECK_FALSE(to.has_collector());
  CHECK_FALSE(to.unpack(upper, *state));  // the same records again
  CHECK(to.records() == moved);

  const auto lower = from.pack({0, L / 2});
  REQUIRE(lower);
  CHECK(from.records() == 0);
  CHECK_FALSE(from.has_collector());
  CHECK_FALSE(to.unpack(upper, *lower));  // records outside the interval they came with
  CHECK(to.unpack({0, L / 2}, *lower));
  CHECK(to.has_collector());
  CHECK_FALSE(to.waiting());  // the run has begun: the collector says so where it goes
  CHECK(to.records() == layout->blocks());
  CHECK_FALSE(from.run_ready(1s));  // what waited there left with the records

  takes_all_and_finishes_exactly(taker.node, to);
}

TEST_CASE("lu: with nodes of the start to wait for, nothing runs until they announce themselves, records handed "
          "on before the run begins carry no data, and the run then finishes exactly") {
  Handover run({64, 16, true, 14, true});
  auto [giver, taker, layout, from, to] = run.parts();
  from.start(1);
  CHECK(from.waiting());
  CHECK_FALSE(from.has_ready());
  CHECK_FALSE(from.run_ready(10ms));
  CHECK(from.stats().flops == 0);
  CHECK_FALSE(giver.node.recv_for(any_tag, 50ms));  // and nothing was sent

  // A node of the start takes its half: records only, no block generated yet; none of them goes there either.
  const Interval upper{L / 2, L};
  auto state = from.pack(upper);
  REQUIRE(state);
  CHECK(state->size() < layout->blocks() * 64);
  REQUIRE(to.unpack(upper, *state));
  CHECK_FALSE(to.waiting());  // it has no collector: only the first node waits
  CHECK_FALSE(to.run_ready(10ms));
  CHECK(to.stats().flops == 0);
  state = to.pack(upper);  // and hands them back, untouched
  REQUIRE(state);
  const auto records = records_without_collector(*state, *layout);
  CHECK(records.size() == layout->blocks() / 2);
  for (const BlockRecord& rec : records) CHECK((rec.stage == Stage::begin && rec.data.empty()));
  REQUIRE(from.unpack(upper, *state));
  CHECK_FALSE(from.run_ready(10ms));

  // The announcement (here from the node itself) begins the run: the clock starts, the first panel goes.
  from.announce_present();
  auto hello = giver.node.recv_for(any_tag, 5s);
  REQUIRE(hello);
  from.handle(*hello);
  CHECK_FALSE(from.waiting());
  CHECK(from.has_ready());
  from.handle(*hello);  // once begun, another changes nothing
  CHECK(from.stats().bad_messages == 0);
  REQUIRE(run_until_done(giver.node, from));
  REQUIRE(from.result());
  CHECK(from.result()->passed);
  CHECK(from.stats().bad_messages == 0);
}

TEST_CASE("lu: repeated announcements from one node count once, and a forged start before the run begins sends "
          "blocks on early but loses none") {
  OneFactorization run({64, 16, true, 16, true});
  Factorization& f = run.f;
  REQUIRE_FALSE(run.one.node.assume({0, L}));
  f.start(2);
  const auto take_one = [&] {
    auto m = run.one.node.recv_for(any_tag, 5s);
    REQUIRE(m);
    f.handle(*m);
  };
  f.announce_present();
  f.announce_present();
  take_one();
  take_one();
  CHECK(f.waiting());  // two announcements, one node: the other is still awaited

  const int start_tag = Factorization::default_first_tag + 9;
  REQUIRE_FALSE(multicast(run.one.node, start_tag, apps::IndexRange{0, run.layout.per_side()},
                          run.layout.by_column(), encode(Payload{0, 0, {}, {}})));
  take_one();
  for (int i = 0; i < 400 && f.stats().blocks_finished < 2; ++i) f.run_ready(0ns);
  CHECK(f.stats().blocks_finished >= 2);  // counted, though the run has not begun
  CHECK(f.waiting());
  f.begin();  // as when the first node's patience runs out: its own start is refused, as a repeated input
  CHECK_FALSE(f.waiting());
  REQUIRE(run_until_done(run.one.node, f));
  REQUIRE(f.result());
  CHECK(f.result()->passed);
}

TEST_CASE("lu: a final block keeps its data with its record until every block is final, so the state of virtual "
          "node 0 carries the count, not L and U") {
  Handover run({128, 32, true, 8, true});  // 4×4 blocks of 8 KiB
  auto [giver, taker, layout, from, to] = run.parts();
  from.start();
  for (int i = 0; i < 200 && from.stats().blocks_finished < 6; ++i) from.run_ready(0ns);
  REQUIRE(from.stats().blocks_finished >= 6);
  REQUIRE_FALSE(from.result());
  const std::size_t block_bytes = 32 * 32 * sizeof(double);
  const auto first = from.pack({0, 1});  // the collector and block 0's record
  REQUIRE(first);
  CHECK(first->size() < block_bytes + 2048);
  const auto rest = from.pack({1, L});
  REQUIRE(rest);
  int finals = 0;
  for (const BlockRecord& rec : records_without_collector(*rest, *layout)) {
    if (!rec.final) continue;
    ++finals;
    CHECK(rec.data.size() == 32 * 32);
  }
  CHECK(finals >= 5);
  // Gathered where the records went: the residual passes.
  REQUIRE(to.unpack({1, L}, *rest));
  REQUIRE(to.unpack({0, 1}, *first));
  takes_all_and_finishes_exactly(taker.node, to);
}

TEST_CASE("lu: a gathering of a final block before every block is final is refused, and the block's data is "
          "still there when the collector gathers") {
  OneFactorization run({64, 16, true, 9, true});
  Factorization& f = run.f;
  REQUIRE_FALSE(run.one.node.assume({0, L}));
  f.start();
  for (int i = 0; i < 400 && f.stats().blocks_finished < 2; ++i) f.run_ready(0ns);
  REQUIRE(f.stats().blocks_finished >= 2);
  REQUIRE_FALSE(f.result());
  // Block 0 (the first diagonal block) is final after the first step: a forged gathering of it, now.
  REQUIRE_FALSE(multicast(run.one.node, Factorization::default_first_tag + 7, apps::IndexRange{0, 1},
                          run.layout.by_row(), {}));
  auto m = run.one.node.recv_for(any_tag, 5s);
  REQUIRE(m);
  f.handle(*m);
  CHECK(f.stats().bad_messages == 1);  // the collector refused the data: not every block is final
  REQUIRE(run_until_done(run.one.node, f));
  REQUIRE(f.result());
  CHECK(f.result()->passed);
}

TEST_CASE("lu: malformed messages and state are counted and ignored, nothing crashes") {
  OneNode one;
  const Problem problem{64, 16, true, 6, true};
  const auto layout = Layout::make(problem.n, problem.block, L);
  REQUIRE(layout);
  const int tag = Factorization::default_first_tag;
  Factorization f(one.node, problem, *layout, tag);
  REQUIRE_FALSE(one.node.assume({0, L}));
  f.start();
  const std::byte junk[5]{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}};
  const vp_t diagonal = layout->vnode(0), other = layout->vnode(1);
  const Doubles block(16 * 16, 1.0);

  std::vector<Message> bad;
  for (int t = 0; t <= 11; ++t) bad.emplace_back(diagonal, 1, tag + t, Bytes(junk, junk + 5));
  bad.emplace_back(0, 1, tag + 10, Bytes(junk, junk + 1));  // a node's announcement with a body
  bad.emplace_back(5, 1, tag + 10, Bytes{});                 // ... not sent to 0
  bad.emplace_back(diagonal + 1, 1, tag, encode(Payload{0, 0, {}, block}));  // no block lives there
  bad.emplace_back(other, 1, tag, encode(Payload{0, 0, {}, block}));         // a panel for a non-diagonal block
  bad.emplace_back(diagonal, 1, tag, encode(Payload{0, 9, {}, block}));      // from block row 9 of 4
  bad.emplace_back(diagonal, 1, tag, encode(Payload{0, 1, {}, {1.0}}));      // a panel of one value
  bad.emplace_back(diagonal, 1, tag, encode(Payload{7, 1, {}, block}));      // step 7 of 4
  bad.emplace_back(other, 1, tag + 4, encode(Payload{0, 0, {70}, {1.0}}));   // rows of another block
  bad.emplace_back(5, 1, tag + 5, encode(FinalBlock{0, 0, {}, block}));      // a final block not sent to 0
  bad.emplace_back(0, 1, tag + 5, encode(FinalBlock{0, 0, {}, {}}));         // the diagonal without pivots
  bad.emplace_back(0, 1, tag + 5, encode(FinalBlock{1, 0, {}, block}));      // data before the gathering
  bad.emplace_back(5, 1, tag + 8, encode(FinalBlock{1, 0, {}, block}));      // data not sent to 0
  bad.emplace_back(0, 1, tag + 8, encode(FinalBlock{1, 0, {}, block}));      // data before the gathering
  bad.emplace_back(diagonal, 1, tag - 1, Bytes(junk, junk + 5));             // not an LU tag
  const Doubles big(17 * 16, 1.0);
  bad.emplace_back(diagonal, 1, tag, encode(Payload{0, 1, {}, big}));  // more than a block: refused undecoded
  for (const Message& m : bad) f.handle(m);
  CHECK(f.stats().bad_messages == bad.size());

  CHECK_FALSE(f.unpack({0, L}, junk));
  CHECK_FALSE(f.unpack({0, L}, {}));
  CHECK(f.records() == layout->blocks());
  REQUIRE(run_until_done(one.node, f));  // and the run goes on as if nothing happened
  CHECK(f.result()->passed);
}

TEST_CASE("lu: a record that moves without its data is taken only where none is right: not started, its panel part sent, or final in a run that does not check") {
  OneFactorization run({64, 16, true, 7, true});
  const Layout* layout = &run.layout;
  Factorization& f = run.f;
  const auto state_of = [](const BlockRecord& rec) {
    ByteWriter w;
    w.u32(Factorization::state_version);
    w.u8(0);  // no collector
    write_records(w, {&rec});
    return std::move(w).take();
  };
  const auto at = [&](std::uint64_t b) { return Interval{layout->vnode(b), layout->vnode(b) + 1}; };
  BlockRecord r;
  r.index = layout->index(1, 2);  // a trailing block at step 1 without data: it would compute on nothing
  r.step = 1;
  CHECK_FALSE(f.unpack(at(r.index), state_of(r)));
  r.data = Doubles(16 * 16, 0.5);
  CHECK(f.unpack(at(r.index), state_of(r)));
  BlockRecord fresh;
  fresh.index = layout->index(3, 3);  // not started
  CHECK(f.unpack(at(fresh.index), state_of(fresh)));
  BlockRecord panel;
  panel.index = layout->index(2, 1);  // its panel part at the diagonal
  panel.step = 1;
  panel.stage = Stage::sent;
  CHECK(f.unpack(at(panel.index), state_of(panel)));
  BlockRecord final_block;
  final_block.index = layout->index(1, 0);
  final_block.step = 1;
  final_block.final = true;  // this run checks: a final block keeps its data for the collector to gather
  CHECK_FALSE(f.unpack(at(final_block.index), state_of(final_block)));
  final_block.data = Doubles(16 * 16, 0.25);
  CHECK(f.unpack(at(final_block.index), state_of(final_block)));
  CHECK(f.records() == 4);

  OneFactorization unchecked({64, 16, true, 7, false});  // and one that does not check keeps none
  CHECK_FALSE(unchecked.f.unpack(at(final_block.index), state_of(final_block)));
  final_block.data = Doubles();
  CHECK(unchecked.f.unpack(at(final_block.index), state_of(final_block)));
}
