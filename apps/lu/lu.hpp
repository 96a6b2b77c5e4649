// apps/lu/lu.hpp — dense LU factorisation of an N×N matrix over the virtual node space (paper, section 4.3.2),
// on node processes that join and leave while it runs. The decisions, in order:
//
// The matrix. A is generated from (seed, i, j) by a counter-based hash (splitmix64) into [-1, 1), so any
// process can produce any block without communication and the checker can regenerate A. By default A is a
// general random matrix factored with partial pivoting, as users of LU expect: the result is LAPACK's, PA = LU
// with P the row interchanges of every step applied to whole rows (left columns included). With no_pivot the
// paper's variant (its Figure 4) runs without interchanges, and N is added to A's diagonal so that it is
// diagonally dominant and the factorisation stable.
//
// Blocks and where they live. A is cut into nb×nb blocks (64×64 as in the paper; nb divides N): B = N/nb per
// side, M = B² blocks, block (I, J) has index b = I·B + J and lives at virtual node
//   v(b) = (K·b mod M)·(L/M),
// the paper's v(i) = K·i mod |V| with |V| = M, scaled onto [0, L). K is the smallest integer >= 61 prime to M,
// a generous estimate of the number of processes: every K-th of the block sequence cycles once through the
// space, so each process, assuming one interval of it, gets its share of every part of the matrix (the effect
// of a cyclic distribution without knowing the processes). Distinct blocks get distinct virtual nodes, so a
// message to v(b) names block b.
//
// Blocks as state machines. Each block is a record living at v(b): its data (column-major), the step k it is
// at, how far into the step it is, and every input that arrived early, buffered by (kind, step, sender).
// Nothing about a block lives outside its record, so pack moves every record whose v(b) leaves with all of
// that, and a join or leave at any instant is safe: the messages for the block follow v(b) to its new owner.
// Records are quiescent between messages (whatever can run runs when its input arrives), so unpack only queues
// the arriving records for a look once the receive call has returned. To keep moving state small, a block's
// data is generated when first needed, and inputs that several records share (one multicast feeds every block
// of a node in its row) travel once.
//
// The right-looking blocked algorithm, step k = 0 .. B-1, driven by data (messages carry k; no barrier):
//  1. Panel: block (I, k), I >= k, once it has its updates through step k-1, sends its data to the diagonal
//     block's virtual node v(k·B + k). The diagonal record gathers the panel (inputs that migrate with it) and
//     factors the (N - k·nb)×nb panel: LAPACKE_dgetrf with partial pivoting, an unblocked kernel without.
//  2. For every block row I >= k the diagonal multicasts (apps/multicast, the paper's idiom, section 4.3.1)
//     the factored block (I, k) with the step's pivots over the row's blocks J in [k, B): block (I, k) takes
//     it as its final data, the blocks to its right use it as L_Ik (row k: L_kk, for the triangular solve).
//     With pivoting it also multicasts the pivots over the row's left blocks J in [0, k). One multicast per
//     block row, over block indices with f(b) = v(b) (not monotonic); none per block.
//  3. Row interchanges in every block column J != k: each block computes the step's net permutation of the
//     rows it touches from the pivots, sends the rows other blocks need straight to them (one message per
//     source and destination block) and knows which blocks it must hear from.
//  4. Row k, J > k: after its interchanges U_kJ = L_kk⁻¹·A_kJ (dtrsm); the block is then final and multicasts
//     U_kJ down column J over I in (k, B) (column-major indices c = J·B + I, f(c) = v(I·B + J)).
//  5. Blocks (I, J), I, J > k: after the interchanges, with L_Ik and U_kJ, A_IJ -= L_Ik·U_kJ (dgemm); on to
//     step k+1.
// Block (I, J) is touched last at step I (the interchanges of later steps are below it), so it is final then:
// upper blocks after their solve, the diagonal after its panel, lower blocks after step I's interchanges
// (without pivoting, right after their panel). A final block sends its data (the diagonal also its step's
// pivots) to virtual node 0, the collector, and keeps only a small "final" record.
//
// The collector is a record of virtual node 0 too, and moves with it. When all M blocks are in, the run is
// over: it takes the time since the first node started (wall clock: node processes may run on different
// machines), then computes r = ||PA - LU||_F / ||A||_F from the regenerated A (rows interchanged as dlaswp
// does, L·U by dtrmm: N³ flops and 3·N² doubles on that node, which is why --no-check exists) and passes it
// when r / (N·eps) < 30 (LAPACK's dget01 test ratio and threshold, with the Frobenius norm). Then it multicasts
// "done" over [0, L) so that every node stops. Without the check the collector only counts blocks.
//
// Progress is counted in the paper's unit for LU, floating-point operations: 2·nb³ per update, nb³ per solve,
// m·nb² - nb³/3 per m×nb panel; about 2/3·N³ in all.
//
// Deviations from the paper: the paper multicasts one element per row and column; here the factored panel
// block and the pivots travel together in the row multicast, and with pivoting the interchanges (which the
// paper's variant has none of) are point-to-point messages between the blocks of a column. They are most of the
// messages: about 2·min(nb, B - k) per block column and step.
//
// Where the time goes, and what would cut it (not done): on two processes the interchange messages dominate
// (README, LU benchmark). The diagonal block row's outgoing rows could be multicast down each column in one
// message instead of one per destination block, and the interchanges of the columns left of the panel could be
// applied once, at the collector, instead of at every step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "phoenix/launch/app_cluster.hpp"
#include "apps/lu/kernels.hpp"

namespace phoenix::apps::lu {

struct Problem {
  std::uint32_t n = 1024;    // N
  std::uint32_t block = 64;  // nb, divides N
  bool pivoting = true;      // false: the paper's variant on a diagonally dominant matrix
  std::uint64_t seed = 1;
  bool check = true;  // compute the residual at the end (the collector then holds all of L and U)
};

// The matrix a problem factors.
inline MatrixSpec matrix_of(const Problem& p) { return MatrixSpec{p.n, p.seed, !p.pivoting}; }

// "" if the problem can run on a space of size L, else why not.
std::string validate(const Problem& p, std::uint64_t space_size);

// LAPACK's dget01 threshold for ||PA - LU|| / (N·eps·||A||).
inline constexpr double residual_threshold = 30;

// The outcome of a run, as the collector reports it on its RESULT line.
struct Summary {
  std::uint32_t n = 0;
  std::uint32_t block = 0;
  bool pivoting = true;
  double seconds = 0;  // factorisation, from the first node's start to the last final block
  bool checked = false;
  double residual = 0;           // ||PA - LU||_F / ||A||_F
  double scaled = 0;             // residual / (N·eps)
  bool passed = false;           // checked and scaled < residual_threshold
  std::uint64_t migrations = 0;  // times blocks moved to another node before they were final
  double gflops() const;         // 2/3·N³ / seconds
};

// Sets checked, residual, scaled and passed.
void record_residual(Summary& s, double residual);

// "n=… block=… pivoting=partial|none seconds=… residual=… scaled=… check=pass|FAIL|skipped migrations=…"
std::string describe(const Summary& s);
std::optional<Summary> parse_summary(const std::string& text);

// The node process of an LU run under the launcher (phoenix/launch/app_cluster.hpp). Returns the exit status.
int run_node(launch::NodeProcess& process, const Problem& problem);

// The whole factorisation on this thread, one BLAS thread, with LAPACKE_dgetrf: the baseline.
Summary sequential(const Problem& problem);

}  // namespace phoenix::apps::lu
