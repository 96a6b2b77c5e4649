// apps/isort/collector.cpp — see collector.hpp.
#include "apps/isort/collector.hpp"

#include "apps/isort/codec.hpp"
#include "apps/isort/messages.hpp"

namespace phoenix::apps::isort {
namespace {

constexpr std::uint32_t all_tests = (1u << test_keys) - 1;

// Bit t for each test key checked; nullopt if one is there twice.
std::optional<std::uint32_t> test_mask(const std::vector<TestResult>& tests) {
  std::uint32_t mask = 0;
  for (const TestResult& t : tests) {
    if (mask & (1u << t.test)) return std::nullopt;
    mask |= 1u << t.test;
  }
  return mask;
}

}  // namespace

RunReport summarise(std::span<const RankedBucket> run) {
  RunReport r;
  r.iteration = run.front().iteration;
  r.first = run.front().bucket;
  r.last = run.back().bucket + 1;
  r.offset = run.front().offset;
  bool any_keys = false;
  for (const RankedBucket& b : run) {
    r.in_order = r.in_order && b.in_order && b.offset == r.offset + r.keys;
    if (b.keys > 0) {
      if (!any_keys) r.min_key = b.min_key;
      if (any_keys && r.max_key > b.min_key) r.in_order = false;
      r.max_key = b.max_key;
      any_keys = true;
    }
    r.keys += b.keys;
    r.tests.insert(r.tests.end(), b.tests.begin(), b.tests.end());
    r.key_sum += b.key_sum;
    r.placed_sum += b.placed_sum;
  }
  return r;
}

Collector::Collector(const NpbClass& c, std::uint32_t rounds) : class_(&c) {
  verification_.problem = c.name;
  verification_.rounds = rounds;
}

Collector::Pending* Collector::pending(std::uint64_t g) {
  if (g < complete_through_ || g >= total_iterations()) return nullptr;
  return &pending_.try_emplace(g, class_->buckets, class_->keys).first->second;
}

bool Collector::add(const RunReport& r) {
  Pending* p = pending(r.iteration);
  const auto mask = test_mask(r.tests);
  if (!p || !mask || (*mask & p->tests_seen) || !p->buckets_ranked.add(r.first, r.last)) return false;
  p->tests_seen |= *mask;
  for (const TestResult& t : r.tests) p->tests_passed += t.passed ? 1 : 0;
  p->runs.emplace(r.first, r);
  return true;
}

bool Collector::add(const InputReport& r) {
  Pending* p = last_of_round(r.iteration) ? pending(r.iteration) : nullptr;
  if (!p || !p->inputs.add(r.keys.lo, r.keys.hi)) return false;
  p->input_sum += r.key_sum;
  return true;
}

bool Collector::complete(std::uint64_t g, const Pending& p) const {
  return p.buckets_ranked.complete() && p.tests_seen == all_tests && (!last_of_round(g) || p.inputs.complete());
}

bool Collector::advance() {
  bool moved = false;
  for (auto it = pending_.find(complete_through_); it != pending_.end() && complete(it->first, it->second);
       it = pending_.find(complete_through_)) {
    fold(it->first, it->second);
    pending_.erase(it);
    ++complete_through_;
    moved = true;
  }
  return moved;
}

void Collector::fold(std::uint64_t g, const Pending& p) {
  verification_.partial_passed += p.tests_passed;
  if (!last_of_round(g)) return;
  std::uint64_t placed_sum = 0;
  if (full_verification(p, placed_sum)) ++verification_.full_passed;
  verification_.sorted_checksum += placed_sum;
}

bool Collector::full_verification(const Pending& p, std::uint64_t& placed_sum) const {
  bool ok = true;
  std::uint64_t next_rank = 0, key_sum = 0;
  std::optional<std::uint32_t> previous_max;
  for (const auto& [first, run] : p.runs) {
    ok = ok && run.in_order && run.offset == next_rank;
    if (run.keys > 0) {
      if (previous_max && *previous_max > run.min_key) ok = false;
      previous_max = run.max_key;
    }
    next_rank += run.keys;
    key_sum += run.key_sum;
    placed_sum += run.placed_sum;
  }
  return ok && next_rank == class_->keys && key_sum == p.input_sum;
}

// --- the collector as it migrates ----------------------------------------------------------------------------

void Collector::write(ByteWriter& w) const {
  w.u64(complete_through_);
  w.u64(verification_.partial_passed);
  w.u64(verification_.full_passed);
  w.u64(verification_.sorted_checksum);
  w.u64(pending_.size());
  for (const auto& [g, p] : pending_) {
    w.u64(g);
    write_coverage(w, p.buckets_ranked);
    w.u64(p.runs.size());
    for (const auto& [first, run] : p.runs) write_report(w, run);
    w.u32(p.tests_seen);
    w.u64(p.tests_passed);
    write_coverage(w, p.inputs);
    w.u64(p.input_sum);
  }
}

// The pending iterations are rebuilt by adding their reports again, so the state passes the same checks.
std::optional<Collector> Collector::read(const NpbClass& c, std::uint32_t rounds, ByteReader& r) {
  Collector out(c, rounds);
  std::uint64_t n = 0;
  if (!r.u64(out.complete_through_) || out.complete_through_ > out.total_iterations() ||
      !r.u64(out.verification_.partial_passed) || !r.u64(out.verification_.full_passed) ||
      !r.u64(out.verification_.sorted_checksum) || !r.u64(n)) {
    return std::nullopt;
  }
  for (std::uint64_t i = 0; i < n; ++i) {
    std::uint64_t g = 0, runs = 0;
    Coverage ranked, inputs;
    if (!r.u64(g) || !read_coverage(r, ranked) || !r.u64(runs)) return std::nullopt;
    for (std::uint64_t k = 0; k < runs; ++k) {
      RunReport run;
      if (!read_report(c, r, run) || run.iteration != g || !out.add(run)) return std::nullopt;
    }
    Pending* p = out.pending(g);
    std::uint32_t tests_seen = 0;
    std::uint64_t tests_passed = 0;
    if (!p || !r.u32(tests_seen) || !r.u64(tests_passed) || !read_coverage(r, inputs) || !r.u64(p->input_sum) ||
        tests_seen != p->tests_seen || tests_passed != p->tests_passed ||
        ranked.ranges() != p->buckets_ranked.ranges() || inputs.end() != c.keys) {
      return std::nullopt;
    }
    p->inputs = std::move(inputs);
  }
  return out;
}

}  // namespace phoenix::apps::isort
