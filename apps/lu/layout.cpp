// apps/lu/layout.cpp — see layout.hpp.
#include "apps/lu/layout.hpp"

#include <numeric>
#include <utility>

namespace phoenix::apps::lu {
namespace {

// x with a·x = 1 (mod m), for a prime to m (extended Euclid).
std::uint64_t inverse_mod(std::uint64_t a, std::uint64_t m) {
  std::int64_t r0 = static_cast<std::int64_t>(m), r1 = static_cast<std::int64_t>(a % m);
  std::int64_t t0 = 0, t1 = 1;
  while (r1 != 0) {
    const std::int64_t q = r0 / r1;
    r0 = std::exchange(r1, r0 - q * r1);
    t0 = std::exchange(t1, t0 - q * t1);
  }
  if (t0 < 0) t0 += static_cast<std::int64_t>(m);
  return static_cast<std::uint64_t>(t0) % m;
}

}  // namespace

std::uint64_t coprime_stride(std::uint64_t m, std::uint64_t at_least) {
  std::uint64_t k = at_least;
  while (std::gcd(k, m) != 1) ++k;
  return k;
}

std::optional<Layout> Layout::make(std::uint32_t n, std::uint32_t block, std::uint64_t space_size) {
  if (n == 0 || block == 0 || n % block != 0) return std::nullopt;
  const std::uint64_t side = n / block;
  if (side * side > space_size || side * side >= (std::uint64_t{1} << 32)) return std::nullopt;
  return Layout(n, block, space_size);
}

Layout::Layout(std::uint32_t n, std::uint32_t nb, std::uint64_t space_size)
    : n_(n), nb_(nb), per_side_(n / nb), blocks_(std::uint64_t{per_side_} * per_side_) {
  stride_ = coprime_stride(blocks_);
  inverse_ = inverse_mod(stride_, blocks_);
  spacing_ = space_size / blocks_;
}

std::optional<std::uint64_t> Layout::block_at(vp_t v) const {
  if (v % spacing_ != 0 || v / spacing_ >= blocks_) return std::nullopt;
  return v / spacing_ * inverse_ % blocks_;  // both factors < M < 2^32: no overflow
}

bool Layout::valid_pivots(std::span<const std::uint32_t> pivots, std::uint32_t step) const {
  if (pivots.size() != nb_ || step >= per_side_) return false;
  for (std::uint32_t i = 0; i < nb_; ++i) {
    if (pivots[i] < step * nb_ + i || pivots[i] >= n_) return false;
  }
  return true;
}

VnodeMap Layout::by_row() const {
  return VnodeMap{[l = *this](std::uint64_t b) { return l.vnode(b); }, false};
}

VnodeMap Layout::by_column() const {
  return VnodeMap{[l = *this](std::uint64_t c) { return l.vnode(l.transposed(c)); }, false};
}

}  // namespace phoenix::apps::lu
