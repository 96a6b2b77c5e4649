// apps/lu/collector.hpp — the record of virtual node 0 that counts the final blocks (docs/lu.md): with the
// pivots of every step, and the time once the last is final. When the run checks its result, it then gathers
// the final blocks' data, which stayed with their records meanwhile, and measures the residual. It moves with
// virtual node 0 like a block's record.
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

  // Counts a final block. False, and nothing changes, if f is not a final block of this run: an unknown block,
  // one already in, data (it comes later, to gather), or pivots where there should be none (or bad ones). Also
  // before the run begins: a forged start may have sent some blocks on early, and a final block refused would
  // be lost.
  bool add(FinalBlock f);
  bool complete() const { return blocks_.size() == layout_.blocks(); }
  // The factorisation's beginning (Factorization::begin): the clock starts. It moves with the collector, so
  // that whoever holds virtual node 0 knows whether the run has begun.
  void begin(std::int64_t now_ns) {
    start_ns_ = now_ns;
    begun_ = true;
  }
  bool begun() const { return begun_; }
  // Once complete: the factorisation's end.
  void stop(std::int64_t now_ns) { end_ns_ = now_ns; }
  bool stopped() const { return end_ns_ != 0; }
  // A counted block's data, once stopped, in a run that checks. False, and nothing changes, if not, or if the
  // block is not counted, has its data, or the data is not nb² values.
  bool add_data(std::uint64_t block, Doubles data);
  bool has_data(std::uint64_t block) const;
  bool gathered() const { return with_data_ == layout_.blocks(); }
  // The run's summary, once stopped; with check and gathered, the residual is computed here (O(N³) on this
  // thread, 3·N² doubles).
  Summary conclude() const;

  void write(ByteWriter& w) const;
  static std::optional<Collector> read(ByteReader& r, const Problem& problem, const Layout& layout);

 private:
  double residual() const;

  Problem problem_;
  Layout layout_;
  std::int64_t start_ns_ = 0, end_ns_ = 0;
  bool begun_ = false;
  std::map<std::uint64_t, Doubles> blocks_;  // counted blocks, with their data once gathered
  std::uint64_t with_data_ = 0;
  std::map<std::uint32_t, std::vector<std::uint32_t>> pivots_;  // by step
  std::uint64_t migrations_ = 0;
};

}  // namespace phoenix::apps::lu
