// apps/lu/layout.hpp — where the blocks of the matrix live in the virtual node space (paper 4.3.2; the
// decisions are in docs/lu.md): block b = I·B + J at v(b) = (K·b mod M)·(L/M), and the index maps the row and
// column multicasts use.
#pragma once

#include <cstdint>
#include <optional>
#include <phoenix/node.hpp>
#include <span>

#include "apps/multicast/multicast.hpp"

namespace phoenix::apps::lu {

// The smallest K >= at_least with gcd(K, m) = 1.
std::uint64_t coprime_stride(std::uint64_t m, std::uint64_t at_least = 61);

class Layout {
 public:
  // nullopt unless block divides n, and the B² blocks fit in the space (and below 2^32, so that the inverse map
  // needs no 128-bit arithmetic).
  static std::optional<Layout> make(std::uint32_t n, std::uint32_t block, std::uint64_t space_size);

  std::uint32_t n() const { return n_; }
  std::uint32_t nb() const { return nb_; }
  std::uint32_t per_side() const { return per_side_; }  // B
  std::uint64_t blocks() const { return blocks_; }      // M = B²
  std::uint64_t stride() const { return stride_; }      // K

  std::uint64_t index(std::uint32_t row, std::uint32_t col) const {
    return std::uint64_t{row} * per_side_ + col;
  }
  std::uint32_t row(std::uint64_t b) const { return static_cast<std::uint32_t>(b / per_side_); }
  std::uint32_t col(std::uint64_t b) const { return static_cast<std::uint32_t>(b % per_side_); }

  vp_t vnode(std::uint64_t b) const { return (stride_ * b % blocks_) * spacing_; }
  // The block living at v, nullopt if none does.
  std::optional<std::uint64_t> block_at(vp_t v) const;

  // Pivots of step k as the diagonal's panel yields them: nb global rows, pivots[i] in [k·nb + i, N).
  bool valid_pivots(std::span<const std::uint32_t> pivots, std::uint32_t step) const;

  // Multicast index maps. Row-major: index b, f(b) = v(b), so a row segment is a range of b. Column-major:
  // index c = J·B + I, f(c) = v(I·B + J), so a column segment is a range of c. Neither is monotonic.
  VnodeMap by_row() const;
  VnodeMap by_column() const;
  // I·B + J <-> J·B + I.
  std::uint64_t transposed(std::uint64_t i) const { return index(col(i), row(i)); }

 private:
  Layout(std::uint32_t n, std::uint32_t nb, std::uint64_t space_size);
  std::uint32_t n_ = 0, nb_ = 0, per_side_ = 0;
  std::uint64_t blocks_ = 0, stride_ = 0, inverse_ = 0;  // inverse_: K⁻¹ mod M
  vp_t spacing_ = 0;                                     // L / M
};

}  // namespace phoenix::apps::lu
