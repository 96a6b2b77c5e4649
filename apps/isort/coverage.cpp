// apps/isort/coverage.cpp — see coverage.hpp.
#include "apps/isort/coverage.hpp"

#include <iterator>

namespace phoenix::apps::isort {

bool Coverage::add(std::uint64_t lo, std::uint64_t hi) {
  if (lo >= hi || hi > end_) return false;
  auto next = ranges_.lower_bound(lo);  // the first range starting at or after lo
  if (next != ranges_.end() && next->first < hi) return false;
  auto prev = next == ranges_.begin() ? ranges_.end() : std::prev(next);
  if (prev != ranges_.end() && prev->second > lo) return false;
  covered_ += hi - lo;
  if (next != ranges_.end() && next->first == hi) {  // touches the range above: absorb it
    hi = next->second;
    ranges_.erase(next);
  }
  if (prev != ranges_.end() && prev->second == lo) {  // touches the range below: extend it
    prev->second = hi;
    return true;
  }
  ranges_.emplace(lo, hi);
  return true;
}

}  // namespace phoenix::apps::isort
