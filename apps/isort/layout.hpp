// apps/isort/layout.hpp — where integer sort's data lives in the virtual node space (paper 4.3.1): key i at
// v_A(i) = floor(i L / N), bucket j at v_B(j) = floor(j L / B). Both maps are non-decreasing (strictly, when
// N, B <= L), so the keys or buckets of an interval of virtual nodes form one index range, and the
// multicasting idiom finds a node's share of a bucket range by binary search.
#pragma once

#include <cstdint>
#include <phoenix/node.hpp>

#include "apps/multicast/multicast.hpp"

namespace phoenix::apps::isort {

// The map of n indices to [0, L): floor(i L / n), computed without a 128-bit product as i q + i r / n, where
// L = q n + r and i r < n^2 fits in 64 bits for n < 2^32.
class IndexMap {
 public:
  IndexMap(std::uint64_t count, vp_t space) : count_(count), space_(space) {}
  std::uint64_t count() const { return count_; }
  vp_t vnode(std::uint64_t i) const { return i * (space_ / count_) + i * (space_ % count_) / count_; }
  // The indices whose virtual nodes lie in s.
  IndexRange in(Interval s) const { return {first_at(s.lo), first_at(s.hi)}; }
  VnodeMap as_vnode_map() const {
    return VnodeMap{[m = *this](std::uint64_t i) { return m.vnode(i); }, true};
  }

 private:
  // The least i <= count with vnode(i) >= v (count if none).
  std::uint64_t first_at(vp_t v) const {
    std::uint64_t lo = 0, hi = count_;
    while (lo < hi) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      if (vnode(mid) < v)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo;
  }
  std::uint64_t count_;
  vp_t space_;
};

struct Layout {
  Layout(std::uint64_t keys, std::uint64_t buckets, vp_t space) : key(keys, space), bucket(buckets, space) {}
  IndexMap key;     // v_A
  IndexMap bucket;  // v_B
};

}  // namespace phoenix::apps::isort
