// apps/lu/lu.hpp — dense LU factorisation of an N×N matrix over the virtual node space (paper, section 4.3.2),
// on node processes that join and leave while it runs: blocks as records at virtual nodes v(b) = (K·b mod M)·(L/M)
// that move with their state, a right-looking blocked algorithm driven by messages, a collector at virtual node
// 0 that checks ||PA - LU|| / ||A||. The design, step by step, is docs/lu.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "phoenix/launch/app_cluster.hpp"
#include "apps/lu/kernels.hpp"

namespace phoenix::apps::lu {

struct Problem {
  std::uint32_t n = 1024;   // N
  std::uint32_t block = 0;  // nb, divides N; 0: default_block(n)
  bool pivoting = true;     // false: the paper's variant on a diagonally dominant matrix
  std::uint64_t seed = 1;
  bool check = true;  // compute the residual at the end (the collector then holds all of L and U)
  // Node processes the launcher starts the run with: the first waits until the others joined and took their
  // records before the clock starts (1 for a node started by the shell, which knows of no others).
  std::uint32_t initial_nodes = 1;
  double begin_patience_s = 30;  // then the first node begins without those missing, with a warning
};

// The block size a run takes unless told: the largest divisor of N up to 512 that cuts the matrix into at
// least 8 blocks a side. The BLAS updates run fastest on the largest blocks (at N = 4096 on one process, 512
// ran a fifth faster than 128: bench/README.md, "Applications"), and 64 blocks keep 2-4 processes busy; on
// more, a smaller --block gives each more blocks to share. 0 if there is none of at least min(32, N/16) (a
// prime N would get blocks of one, millions of records): the user chooses.
std::uint32_t default_block(std::uint32_t n);

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
  double seconds = 0;  // factorisation, from its beginning (Factorization::begin) to the last final block
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
