// apps/lu/collector.cpp — see collector.hpp.
#include "apps/lu/collector.hpp"

#include <chrono>
#include <utility>

namespace phoenix::apps::lu {

std::int64_t wall_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Collector::Collector(const Problem& problem, const Layout& layout, std::int64_t start_ns)
    : problem_(problem), layout_(layout), start_ns_(start_ns) {}

bool Collector::add(FinalBlock f) {
  if (f.block >= layout_.blocks() || blocks_.contains(f.block)) return false;
  const std::uint32_t row = layout_.row(f.block);
  const bool has_pivots = problem_.pivoting && row == layout_.col(f.block);
  if (!f.data.empty() || (has_pivots ? !layout_.valid_pivots(f.pivots, row) : !f.pivots.empty())) return false;
  if (has_pivots) pivots_[row] = std::move(f.pivots);
  blocks_.emplace(f.block, Doubles());
  migrations_ += f.migrations;
  return true;
}

bool Collector::add_data(std::uint64_t block, Doubles data) {
  if (!problem_.check || !stopped()) return false;
  const auto it = blocks_.find(block);
  if (it == blocks_.end() || !it->second.empty() || data.size() != std::size_t{layout_.nb()} * layout_.nb())
    return false;
  it->second = std::move(data);
  ++with_data_;
  return true;
}

bool Collector::has_data(std::uint64_t block) const {
  const auto it = blocks_.find(block);
  return it != blocks_.end() && !it->second.empty();
}

Summary Collector::conclude() const {
  Summary s;
  s.n = problem_.n;
  s.block = problem_.block;
  s.pivoting = problem_.pivoting;
  s.seconds = static_cast<double>(end_ns_ - start_ns_) * 1e-9;
  s.migrations = migrations_;
  if (problem_.check && gathered()) record_residual(s, residual());
  return s;
}

// ||PA - LU||_F / ||A||_F from the gathered factors and the regenerated A.
double Collector::residual() const {
  const std::uint32_t n = problem_.n, nb = layout_.nb();
  std::vector<double> lu(std::size_t{n} * n);
  for (const auto& [b, data] : blocks_) {
    const std::size_t row0 = std::size_t{layout_.row(b)} * nb, col0 = std::size_t{layout_.col(b)} * nb;
    for (std::size_t c = 0; c < nb; ++c)
      for (std::size_t r = 0; r < nb; ++r) lu[(col0 + c) * n + row0 + r] = data[c * nb + r];
  }
  std::vector<std::uint32_t> pivots(n);
  for (std::uint32_t i = 0; i < n; ++i) pivots[i] = i;
  for (const auto& [step, rows] : pivots_)
    for (std::uint32_t i = 0; i < nb; ++i) pivots[step * nb + i] = rows[i];
  // L's blocks came final after their own step: every later step's interchanges are applied to the columns
  // left of it here, in order, as LAPACK's dgetrf applies them at each step (dlaswp).
  for (const auto& [step, rows] : pivots_) {
    const std::size_t left = std::size_t{step} * nb;
    for (std::uint32_t i = 0; i < nb; ++i) {
      const std::size_t a = left + i, b = rows[i];
      if (a == b) continue;
      for (std::size_t c = 0; c < left; ++c) std::swap(lu[c * n + a], lu[c * n + b]);
    }
  }
  return relative_residual(generate_matrix(matrix_of(problem_)), lu, pivots, n);
}

// The blocks go as the final blocks they came as (the diagonal ones with their step's pivots), with the data
// gathered so far, so reading them back checks them as add() and add_data() did.
void Collector::write(ByteWriter& w) const {
  w.u64(static_cast<std::uint64_t>(start_ns_));
  w.u64(static_cast<std::uint64_t>(end_ns_));
  w.u8(begun_ ? 1 : 0);
  w.u64(migrations_);
  w.u64(blocks_.size());
  // With the check, the final blocks are most of the matrix: one allocation for them, and no copy of a block.
  std::size_t bytes = 0;
  for (const auto& [b, data] : blocks_) bytes += 40 + data.size() * sizeof(double);
  w.reserve(bytes + pivots_.size() * (8 + std::size_t{layout_.nb()} * sizeof(std::uint32_t)));
  for (const auto& [b, data] : blocks_) {
    const std::uint32_t row = layout_.row(b);
    const auto it = pivots_.find(row);
    const bool with_pivots = it != pivots_.end() && row == layout_.col(b);
    write_final(w, b, 0,
                with_pivots ? std::span<const std::uint32_t>(it->second) : std::span<const std::uint32_t>(),
                data);
  }
}

std::optional<Collector> Collector::read(ByteReader& r, const Problem& problem, const Layout& layout) {
  std::uint64_t start = 0, end = 0, migrations = 0, count = 0;
  std::uint8_t begun = 0;
  if (!r.u64(start) || !r.u64(end) || !r.u8(begun) || begun > 1 || !r.u64(migrations) || !r.u64(count) ||
      count > layout.blocks())
    return std::nullopt;
  Collector c(problem, layout, static_cast<std::int64_t>(start));
  c.begun_ = begun != 0;
  c.end_ns_ = static_cast<std::int64_t>(end);
  for (std::uint64_t i = 0; i < count; ++i) {
    FinalBlock f;
    if (!read_final(r, f)) return std::nullopt;
    Doubles data = std::move(f.data);
    const std::uint64_t block = f.block;
    if (!c.add(std::move(f)) || (!data.empty() && !c.add_data(block, std::move(data)))) return std::nullopt;
  }
  // The clock stops in the same call that counts the last block: either without the other is no state a
  // collector can be in (and would never gather, or stop).
  if (c.stopped() != c.complete()) return std::nullopt;
  c.migrations_ = migrations;
  return c;
}

}  // namespace phoenix::apps::lu
