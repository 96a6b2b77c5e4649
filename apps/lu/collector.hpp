// apps/lu/collector.hpp — the record of virtual node 0 that gathers the final blocks (docs/lu.md): it counts them,
// keeps their data and the pivots of every step when the run checks its result, and at the end measures the
// time and the residual. It moves with virtual node 0 like a block's record.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "apps/lu/layout.hpp"
#include "apps/lu/lu.hpp"
#include "apps/lu/payload.hpp"

namespace phoenix::apps::lu {

// Wall-clock nanoseconds: the start is taken on one node and the end on another.
std::int64_t wall_clock_ns();

class Collector {
 public:
  Collector(const Problem& problem, const Layout& layout, std::int64_t start_ns);

  // False, and nothing changes, if f is not a final block of this run: an unknown block, one already in, data
  // of the wrong size, or pivots where there should be none (or bad ones).
  bool add(FinalBlock f);
  bool complete() const { return blocks_.size() == layout_.blocks(); }
  // The run's summary; with check, the residual is computed here (O(N³) on this thread, 3·N² doubles).
  Summary conclude(std::int64_t now_ns) const;

  void write(ByteWriter& w) const;
  static std::optional<Collector> read(ByteReader& r, const Problem& problem, const Layout& layout);

 private:
  double residual() const;

  Problem problem_;
  Layout layout_;
  std::int64_t start_ns_ = 0;
  std::map<std::uint64_t, Doubles> blocks_;         // final data by block (empty without check)
  std::map<std::uint32_t, std::vector<std::uint32_t>> pivots_;  // by step
  std::uint64_t migrations_ = 0;
};

}  // namespace phoenix::apps::lu
