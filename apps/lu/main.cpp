// lu — dense LU factorisation (paper 4.3.2, 6) of an N×N matrix in nb×nb blocks (up to 512) spread over
// the virtual node space, on local node processes that join and leave while it runs. Partial pivoting by default
// (PA = LU, as LAPACK's dgetrf), the paper's variant without pivoting with --no-pivot. Progress is counted in
// flops; the residual ||PA - LU|| / ||A|| is computed at the end and checked. Started by the shell phsh
// (PHSH_ROLE set: phoenix/launch/spawned_node.hpp) it runs one node of such a run; the RESULT line carries the
// residual check.
//
// Usage: lu [--n N] [--block NB] [--no-pivot] [--seed S] [--no-check] [--sequential]
//           [--nodes N] [--schedule S | --figure6 SECONDS] [--trace FILE] ...   (lu --help says everything)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include "phoenix/launch/cluster_cli.hpp"
#include "phoenix/launch/spawned_node.hpp"
#include "apps/lu/lu.hpp"

namespace {

using namespace phoenix;

void print_summary(const char* what, const apps::lu::Summary& s) {
  std::printf("%s: factorised in %.3f s, %.2f GFLOP/s (2/3 N^3 flops)\n", what, s.seconds, s.gflops());
  if (s.checked) {
    std::printf("%s: ||PA - LU||_F / ||A||_F = %.3e = %.3f N eps: %s (threshold %.0f N eps)\n", what,
                s.residual, s.scaled, s.passed ? "pass" : "FAIL", apps::lu::residual_threshold);
  }
}

int run_sequential(const apps::lu::Problem& problem) {
  std::printf("lu: %u x %u matrix, LAPACKE_dgetrf on one thread\n", problem.n, problem.n);
  std::fflush(stdout);
  const auto s = apps::lu::sequential(problem);
  print_summary("sequential", s);
  return !s.checked || s.passed ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"lu: dense LU factorisation in blocks spread over phoenix nodes that join and leave"};
  apps::lu::Problem problem;
  bool no_pivot = false, no_check = false, sequential_only = false;
  cli.add_option("--n", problem.n, "order N of the matrix")->check(CLI::Range(1u, 65536u));
  cli.add_option("--block", problem.block,
                 "block size nb, which must divide N (default: the largest divisor of N up to 512 that leaves "
                 "8 blocks a side; on more than 4 processes a smaller one gives each more blocks)")
      ->check(CLI::Range(1u, 4096u));
  cli.add_flag(
      "--no-pivot", no_pivot,
      "the paper's variant without pivoting, on a diagonally dominant matrix (N added to the diagonal)");
  cli.add_option("--seed", problem.seed, "seed of the generated matrix");
  cli.add_flag("--no-check", no_check, "do not compute the residual (the collector then keeps no data)");
  cli.add_flag("--sequential", sequential_only, "only time LAPACKE_dgetrf on one thread, for comparison");
  launch::ClusterCli run;
  run.add_to(cli, "flops");
  CLI11_PARSE(cli, argc, argv);
  problem.pivoting = !no_pivot;
  problem.check = !no_check;
  if (problem.block == 0) problem.block = apps::lu::default_block(problem.n);
  if (problem.block == 0) {
    std::fprintf(stderr, "lu: N = %u has no divisor between min(32, N/16) and 512 that leaves 8 blocks a side: "
                 "give --block\n", problem.n);
    return 2;
  }
  if (launch::spawned_by_shell()) {
    return launch::run_spawned_node([&](launch::NodeProcess& p) { return apps::lu::run_node(p, problem); });
  }

  if (sequential_only) return run_sequential(problem);
  auto options = run.options("lu", "flops");
  if (!options) return 2;
  if (const std::string why = apps::lu::validate(problem, options->space); !why.empty()) {
    std::fprintf(stderr, "lu: %s\n", why.c_str());
    return 2;
  }
  problem.initial_nodes = static_cast<std::uint32_t>(std::max(1, options->nodes));
  const std::uint32_t side = problem.n / problem.block;
  std::printf(
      "lu: %u x %u matrix in %u x %u blocks of %u, %s pivoting, %d nodes at the start, %zu joins/leaves "
      "scheduled\n",
      problem.n, problem.n, side, side, problem.block, problem.pivoting ? "partial" : "no", options->nodes,
      options->schedule.size());
  std::fflush(stdout);

  const auto outcome =
      launch::run_cluster(*options, [&](launch::NodeProcess& p) { return apps::lu::run_node(p, problem); });
  const auto summary = apps::lu::parse_summary(outcome.result);
  if (!outcome.ok || !summary) {
    std::printf("lu: FAILED\n");
    return 1;
  }
  print_summary("parallel", *summary);
  std::printf("parallel: %d joins, %d leaves during the run; blocks moved %llu times before they were final\n",
              outcome.joins, outcome.leaves, static_cast<unsigned long long>(summary->migrations));
  return !summary->checked || summary->passed ? 0 : 1;
}
