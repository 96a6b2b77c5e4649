// apps/isort/coverage.hpp — completion by coverage: a record knows it has everything for an iteration when the
// index ranges it has heard from add up to the whole range, whoever sent them and however many senders there
// were. So no part of integer sort needs to know how many processes take part.
//
// A Coverage is a set of disjoint half-open ranges inside [0, end), merged where they touch. Adding a range
// that overlaps what is covered is refused: every index is reported exactly once, so an overlap is a duplicate
// or a forged message.
#pragma once

#include <cstdint>
#include <map>

namespace phoenix::apps::isort {

class Coverage {
 public:
  explicit Coverage(std::uint64_t end = 0) : end_(end) {}

  // Adds [lo, hi); false, and nothing changes, if it is empty, reaches past end or overlaps a covered range.
  bool add(std::uint64_t lo, std::uint64_t hi);
  bool complete() const { return covered_ == end_; }
  std::uint64_t covered() const { return covered_; }
  std::uint64_t end() const { return end_; }
  // lo -> hi, in increasing order, never touching each other.
  const std::map<std::uint64_t, std::uint64_t>& ranges() const { return ranges_; }

 private:
  std::uint64_t end_;
  std::uint64_t covered_ = 0;
  std::map<std::uint64_t, std::uint64_t> ranges_;
};

}  // namespace phoenix::apps::isort
