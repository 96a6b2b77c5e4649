// <phoenix/interval.hpp> — a virtual node and a half-open interval [lo, hi) of the virtual node space: the one
// interval type of phoenix, from the overlay's interval sets through migration to the C++ API.
#pragma once

#include <cstdint>

namespace phoenix {

using vp_t = std::uint64_t;

struct Interval {
  vp_t lo = 0;
  vp_t hi = 0;
  bool empty() const { return lo >= hi; }
  bool contains(vp_t v) const { return lo <= v && v < hi; }
  vp_t size() const { return empty() ? 0 : hi - lo; }
  friend bool operator==(const Interval&, const Interval&) = default;
};

}  // namespace phoenix
