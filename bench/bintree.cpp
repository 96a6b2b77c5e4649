// bench/bintree.cpp — bintree_bench: the lazy-task-creation layer (apps/steal) on the binary task tree, beside
// a sequential C++ recursion (the anchor) and the same tree as OpenMP tasks on 2 threads, in one invocation.
//
// Every variant evaluates the same tree (apps/bintree: 2^depth leaves, `work` rounds of arithmetic each) with
// the same grain: subtrees of depth <= grain are one task (0: every node of the tree is a task, as in the
// paper). Each variant runs --reps times; the median wall time is printed with its speedup over the sequential
// median. The phoenix runs fork 1 and 2 node processes through the app launcher (phoenix/launch) and time from the
// first node's start to the root's value, process start-up included. Every result is compared with the
// sequential value: a mismatch fails the benchmark. Nothing about speed is asserted.
//
// Output: `RESULT bintree <variant> <depth> <seconds> s speedup <x>` per variant, then a markdown table.
// Usage: bintree_bench [--depth D] [--work N] [--grain G] [--reps R] [--quick]
#include "apps/bintree/bintree.hpp"

#include <omp.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "app_bench.hpp"

namespace {

using namespace phoenix;
using apps::bintree::Value;

Value omp_tree(std::uint32_t depth, std::uint32_t work, std::uint32_t grain, std::uint64_t index) {
  if (depth <= grain) return apps::bintree::sequential(depth, work, index);
  Value a, b;
#pragma omp task shared(a) firstprivate(depth, work, grain, index)
  a = omp_tree(depth - 1, work, grain, 2 * index);
  b = omp_tree(depth - 1, work, grain, 2 * index + 1);
#pragma omp taskwait
  return Value{a.leaves + b.leaves, a.checksum + b.checksum};
}

Value omp_run(std::uint32_t depth, std::uint32_t work, std::uint32_t grain, int threads) {
  Value v;
#pragma omp parallel num_threads(threads) shared(v)
#pragma omp single
  v = omp_tree(depth, work, grain, 1);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"bintree_bench: lazy task creation on phoenix vs sequential recursion and OpenMP tasks"};
  std::uint32_t depth = 20, work = 2600, grain = 0;
  int reps = 3;
  bool quick = false;
  cli.add_option("--depth", depth, "depth of the tree")->check(CLI::Range(1, 40));
  cli.add_option("--work", work, "rounds of arithmetic at each leaf")->check(CLI::Range(0, 100000000));
  cli.add_option("--grain", grain, "subtrees of this depth or less are one task")->check(CLI::Range(0, 40));
  cli.add_option("--reps", reps, "runs of each variant; the median is printed")->check(CLI::Range(1, 99));
  cli.add_flag("--quick", quick, "a tiny tree, one run each: checks that everything runs");
  CLI11_PARSE(cli, argc, argv);
  if (quick) {
    depth = 12;
    work = 100;
    reps = 1;
  }

  const auto cluster = [&](int nodes) {
    return [=, &depth, &work, &grain] {
      return bench::run_app_cluster("bintree", nodes, [&](launch::NodeProcess& p) {
        return apps::bintree::run_node(p, depth, work, grain);
      });
    };
  };
  const std::vector<bench::AppVariant> variants{
      {"sequential",
       [&] { return std::optional(apps::bintree::describe(apps::bintree::sequential(depth, work))); }},
      {"openmp-2threads",
       [&] { return std::optional(apps::bintree::describe(omp_run(depth, work, grain, 2))); }},
      {"phoenix-1process", cluster(1)},
      {"phoenix-2processes", cluster(2)},
  };
  std::printf("# bintree_bench: depth %u (%llu leaves), %u rounds per leaf, grain %u, %d rep(s) each\n", depth,
              1ULL << depth, work, grain, reps);
  std::fflush(stdout);

  return bench::run_app_variants("bintree", std::to_string(depth), variants, reps);
}
