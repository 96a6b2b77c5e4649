// apps/lu/kernels.cpp — see kernels.hpp.
#include "apps/lu/kernels.hpp"

#include <cblas.h>
#include <lapacke.h>

#include <cmath>
#include <map>
#include <utility>

namespace phoenix::apps::lu {
namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

int blas_int(std::uint64_t v) { return static_cast<int>(v); }

// The right-looking elimination of the paper's Figure 4 on the m×n panel at a (leading dimension lda), no
// interchanges, recursive on the columns (Toledo's): the left half, the top-right solve and bottom-right update
// (Level-3 BLAS), the right half; the unblocked loop only on narrow parts. Column by column throughout, it ran
// a 4096×512 panel at a fifth of the update's speed. Returns LAPACK's info (first zero pivot, from 1) or 0.
int factor_without_pivoting(double* a, int m, int n, int lda) {
  constexpr int unblocked_below = 16;
  if (m < n) {  // wider than tall: the m×m part, then U's columns right of it (the halves below need m >= n)
    const int info = factor_without_pivoting(a, m, m, lda);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, m, n - m, 1.0, a, lda,
                a + std::size_t(m) * lda, lda);
    return info;
  }
  int info = 0;
  if (n <= unblocked_below) {
    for (int c = 0; c < n && c < m; ++c) {
      double* diag = a + std::size_t(c) * lda + c;
      const int below = m - c - 1, right = n - c - 1;
      if (*diag == 0) {
        if (info == 0) info = c + 1;
      } else {
        cblas_dscal(below, 1.0 / *diag, diag + 1, 1);
      }
      if (below > 0 && right > 0)
        cblas_dger(CblasColMajor, below, right, -1.0, diag + 1, 1, diag + lda, lda, diag + lda + 1, lda);
    }
    return info;
  }
  const int n1 = n / 2, n2 = n - n1;
  info = factor_without_pivoting(a, m, n1, lda);
  double* a12 = a + std::size_t(n1) * lda;
  cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, n1, n2, 1.0, a, lda, a12, lda);
  if (m > n1) {
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m - n1, n2, n1, -1.0, a + n1, lda, a12, lda, 1.0,
                a12 + n1, lda);
    if (const int right = factor_without_pivoting(a12 + n1, m - n1, n2, lda); right != 0 && info == 0)
      info = right + n1;
  }
  return info;
}

}  // namespace

void use_one_blas_thread() { openblas_set_num_threads(1); }

// --- the matrix ---------------------------------------------------------------------------------------------

double element(const MatrixSpec& m, std::uint32_t i, std::uint32_t j) {
  const std::uint64_t h = splitmix64(splitmix64(m.seed) ^ (std::uint64_t{i} * m.n + j));
  double v = static_cast<double>(h >> 11) * 0x1p-52 - 1.0;  // 53 random bits onto [-1, 1)
  if (m.dominant && i == j) v += m.n;
  return v;
}

Doubles generate_block(const MatrixSpec& m, std::uint32_t nb, std::uint32_t row,
                                   std::uint32_t col) {
  Doubles out(std::size_t{nb} * nb);
  for (std::uint32_t c = 0; c < nb; ++c)
    for (std::uint32_t r = 0; r < nb; ++r)
      out[std::size_t{c} * nb + r] = element(m, row * nb + r, col * nb + c);
  return out;
}

// Plain memory, not the block pool: the whole matrix is for the check and the sequential baseline.
std::vector<double> generate_matrix(const MatrixSpec& m) {
  std::vector<double> out(std::size_t{m.n} * m.n);
  for (std::uint32_t c = 0; c < m.n; ++c)
    for (std::uint32_t r = 0; r < m.n; ++r) out[std::size_t{c} * m.n + r] = element(m, r, c);
  return out;
}

// --- block kernels ------------------------------------------------------------------------------------------

int factor_panel(std::span<double> a, std::uint32_t m, std::uint32_t nb, bool pivoting,
                 std::vector<std::uint32_t>& pivots) {
  pivots.clear();
  if (!pivoting) return factor_without_pivoting(a.data(), blas_int(m), blas_int(nb), blas_int(m));
  std::vector<lapack_int> ipiv(nb);
  const lapack_int info =
      LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, blas_int(m), blas_int(nb), a.data(), blas_int(m), ipiv.data());
  if (info < 0) return info;
  pivots.reserve(nb);
  for (const lapack_int p : ipiv) pivots.push_back(static_cast<std::uint32_t>(p - 1));  // LAPACK counts from 1
  return info;
}

void solve_unit_lower(std::span<const double> l, std::span<double> a, std::uint32_t nb) {
  cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, blas_int(nb), blas_int(nb), 1.0,
              l.data(), blas_int(nb), a.data(), blas_int(nb));
}

void subtract_product(std::span<double> a, std::span<const double> l, std::span<const double> u,
                      std::uint32_t nb) {
  cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, blas_int(nb), blas_int(nb), blas_int(nb), -1.0,
              l.data(), blas_int(nb), u.data(), blas_int(nb), 1.0, a.data(), blas_int(nb));
}

std::uint64_t panel_flops(std::uint64_t m, std::uint64_t nb) { return m * nb * nb - nb * nb * nb / 3; }

// --- row interchanges ---------------------------------------------------------------------------------------

std::vector<RowMove> net_row_moves(std::uint32_t first_row, std::span<const std::uint32_t> pivots) {
  std::map<std::uint32_t, std::uint32_t> content;  // row -> the original row now in it, for touched rows
  const auto at = [&](std::uint32_t r) -> std::uint32_t& { return content.try_emplace(r, r).first->second; };
  for (std::uint32_t i = 0; i < pivots.size(); ++i) {
    const std::uint32_t r = first_row + i;
    if (pivots[i] != r) std::swap(at(r), at(pivots[i]));
  }
  std::vector<RowMove> moves;
  for (const auto& [dest, src] : content) {
    if (dest != src) moves.push_back({dest, src});
  }
  return moves;
}

void apply_interchanges(std::span<double> a, std::uint32_t n, std::span<const std::uint32_t> pivots) {
  for (std::uint32_t i = 0; i < pivots.size(); ++i) {
    if (pivots[i] != i) cblas_dswap(blas_int(n), &a[i], blas_int(n), &a[pivots[i]], blas_int(n));
  }
}

// --- the check ----------------------------------------------------------------------------------------------

double relative_residual(std::span<const double> a, std::span<const double> lu,
                         std::span<const std::uint32_t> pivots, std::uint32_t n) {
  std::vector<double> pa(a.begin(), a.end());
  apply_interchanges(pa, n, pivots);
  std::vector<double> product(std::size_t{n} * n, 0.0);  // U, then L·U
  for (std::size_t c = 0; c < n; ++c)
    for (std::size_t r = 0; r <= c; ++r) product[c * n + r] = lu[c * n + r];
  cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, blas_int(n), blas_int(n), 1.0,
              lu.data(), blas_int(n), product.data(), blas_int(n));
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    diff += (pa[i] - product[i]) * (pa[i] - product[i]);
    norm += a[i] * a[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace phoenix::apps::lu
