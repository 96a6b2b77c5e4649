// bintree — parallel divide-and-conquer by lazy task creation (paper 4.2, 6): a binary task tree of a given
// depth with some work at each leaf, on local node processes that join and leave while it runs. The result
// (leaf count and a checksum computed at the leaves) is compared with a sequential recursion. Started by the
// shell phsh (PHSH_ROLE set: phoenix/launch/spawned_node.hpp) it runs one node of such a run, without the check.
//
// Usage: bintree [--depth D] [--work N] [--nodes N] [--schedule S | --figure6 SECONDS] [--trace FILE] ...
//        (bintree --help says everything)
#include <CLI/CLI.hpp>
#include <chrono>
#include <cinttypes>
#include <cstdio>

#include "apps/bintree/bintree.hpp"
#include "phoenix/launch/cluster_cli.hpp"
#include "phoenix/launch/spawned_node.hpp"

namespace {

using namespace phoenix;
using Seconds = std::chrono::duration<double>;

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{
      "bintree: a binary task tree evaluated by lazy task creation on phoenix nodes that join and leave"};
  std::uint32_t depth = 20, work = 2000, grain = 0;
  bool sequential_only = false, no_check = false;
  cli.add_option("--depth", depth, "depth of the tree: 2^depth leaves")->check(CLI::Range(1, 40));
  cli.add_option("--work", work, "rounds of arithmetic at each leaf (about 1.5 ns each)")
      ->check(CLI::Range(0, 100000000));
  cli.add_option("--grain", grain, "subtrees of this depth or less run as one task")->check(CLI::Range(0, 40));
  cli.add_flag("--sequential", sequential_only, "only run the sequential recursion and time it");
  cli.add_flag("--no-check", no_check, "do not run the sequential recursion to check the result");
  launch::ClusterCli run;
  run.add_to(cli, "tasks");
  CLI11_PARSE(cli, argc, argv);
  if (launch::spawned_by_shell()) {
    return launch::run_spawned_node(
        [&](launch::NodeProcess& p) { return apps::bintree::run_node(p, depth, work, grain); });
  }

  const auto seq = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    const auto v = apps::bintree::sequential(depth, work);
    const double s = Seconds(std::chrono::steady_clock::now() - t0).count();
    std::printf("sequential: %s in %.3f s\n", apps::bintree::describe(v).c_str(), s);
    return v;
  };
  if (sequential_only) {
    seq();
    return 0;
  }

  auto options = run.options("bintree", "tasks");
  if (!options) return 2;
  const launch::ClusterOptions& o = *options;
  std::printf("bintree: depth %u (%" PRIu64
              " leaves), %u rounds per leaf, %d nodes at the start, %zu joins/leaves "
              "scheduled\n",
              depth, std::uint64_t{1} << depth, work, o.nodes, o.schedule.size());
  std::fflush(stdout);

  const auto outcome = launch::run_cluster(
      o, [&](launch::NodeProcess& p) { return apps::bintree::run_node(p, depth, work, grain); });
  if (!outcome.ok) {
    std::printf("bintree: FAILED\n");
    return 1;
  }
  std::printf("parallel:   %s in %.3f s (%d joins, %d leaves during the run)\n", outcome.result.c_str(),
              outcome.seconds, outcome.joins, outcome.leaves);
  if (no_check) return 0;
  const auto expected = seq();
  if (outcome.result != apps::bintree::describe(expected)) {
    std::printf("bintree: MISMATCH between the parallel and the sequential result\n");
    return 1;
  }
  std::printf("bintree: the parallel result equals the sequential one\n");
  return 0;
}
