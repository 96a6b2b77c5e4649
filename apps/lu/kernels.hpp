// apps/lu/kernels.hpp — the numerical parts of the LU application, on column-major matrices: the generated
// matrix, the block kernels (OpenBLAS and LAPACKE underneath), the net row permutation of one step's pivots,
// and the residual check. No messages, no nodes: what a block record does to its data.
//
// Threads: any; the BLAS below may use threads of its own unless use_one_blas_thread() was called.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "apps/lu/block_memory.hpp"

namespace phoenix::apps::lu {

// OpenBLAS on the calling process's threads only: node processes share the machine's cores.
void use_one_blas_thread();

// --- the matrix ---------------------------------------------------------------------------------------------

// A(i, j) of the N×N test matrix: splitmix64 of the seed and i·N + j, into [-1, 1); `dominant` adds N to the
// diagonal (the matrix of the no-pivot variant).
struct MatrixSpec {
  std::uint32_t n = 0;
  std::uint64_t seed = 0;
  bool dominant = false;
};
double element(const MatrixSpec& m, std::uint32_t i, std::uint32_t j);
// Block (row, col) of size nb×nb, column-major.
Doubles generate_block(const MatrixSpec& m, std::uint32_t nb, std::uint32_t row, std::uint32_t col);
// All of A, column-major.
std::vector<double> generate_matrix(const MatrixSpec& m);

// --- block kernels (nb×nb, column-major) --------------------------------------------------------------------

// Factors the m×nb column-major panel a in place into L (unit lower) and U: with pivoting by LAPACKE_dgetrf,
// `pivots` receiving, for each column i, the panel row (0-based) swapped with row i; without, by a recursive
// elimination that leaves `pivots` empty. Returns LAPACK's info: 0, or i+1 if U(i, i) is exactly zero.
int factor_panel(std::span<double> a, std::uint32_t m, std::uint32_t nb, bool pivoting,
                 std::vector<std::uint32_t>& pivots);
// a = L⁻¹·a with L the unit lower triangle of l (dtrsm).
void solve_unit_lower(std::span<const double> l, std::span<double> a, std::uint32_t nb);
// a -= l·u (dgemm).
void subtract_product(std::span<double> a, std::span<const double> l, std::span<const double> u,
                      std::uint32_t nb);

// Floating-point operations of each, the paper's unit of progress for LU.
std::uint64_t panel_flops(std::uint64_t m, std::uint64_t nb);
inline std::uint64_t solve_flops(std::uint64_t nb) { return nb * nb * nb; }
inline std::uint64_t update_flops(std::uint64_t nb) { return 2 * nb * nb * nb; }

// --- row interchanges ---------------------------------------------------------------------------------------

// Row src's content ends up in row dest.
struct RowMove {
  std::uint32_t dest = 0;
  std::uint32_t src = 0;
  friend bool operator==(const RowMove&, const RowMove&) = default;
};
// One step's interchanges (row first_row + i swapped with pivots[i], in order of i; global row numbers) as the
// net permutation of the rows they touch: every row whose content changes, by increasing dest.
std::vector<RowMove> net_row_moves(std::uint32_t first_row, std::span<const std::uint32_t> pivots);
// Swaps row i of the n×n matrix a with row pivots[i], for i in order (LAPACK's dlaswp).
void apply_interchanges(std::span<double> a, std::uint32_t n, std::span<const std::uint32_t> pivots);

// --- the check ----------------------------------------------------------------------------------------------

// ||PA - LU||_F / ||A||_F for the packed factors lu (L unit lower, U upper) of the n×n matrix a and the pivots
// of every row (pivots[i] = i where nothing was interchanged).
double relative_residual(std::span<const double> a, std::span<const double> lu,
                         std::span<const std::uint32_t> pivots, std::uint32_t n);

}  // namespace phoenix::apps::lu
