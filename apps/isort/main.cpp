// isort — integer sort after NAS IS (paper 4.3.1) on local phoenix node processes that join and leave while it
// runs. The RESULT (NPB's partial and full verification, and a checksum of the sorted keys) is compared with
// the sequential benchmark over as many rounds. Started by the shell phsh (PHSH_ROLE set:
// phoenix/launch/spawned_node.hpp) it runs one node of such a run; the RESULT line carries NPB's verification.
//
// Usage: isort --class S|W|A [--rounds R] [--chunk BUCKETS] [--sequential] [--nodes N] [--schedule S] ...
//        (isort --help says everything)
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "apps/isort/isort.hpp"
#include "phoenix/launch/cluster_cli.hpp"
#include "phoenix/launch/spawned_node.hpp"

namespace {

using namespace phoenix;
using namespace phoenix::apps::isort;

Verification run_sequential(const NpbClass& c, std::uint32_t rounds) {
  double seconds = 0;
  const Verification v = sequential(c, rounds, &seconds);
  const double keys = static_cast<double>(c.keys) * max_iterations * rounds;
  std::printf("sequential: %s\n            ranking took %.3f s: %.2f million keys ranked per second\n",
              describe(v).c_str(), seconds, keys / seconds / 1e6);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"isort: NAS integer sort (IS) on phoenix nodes that join and leave while it runs"};
  std::string name = "S";
  SortOptions options;
  bool sequential_only = false, no_check = false;
  cli.add_option("--class", name, "NPB problem class: S (2^16 keys), W (2^20) or A (2^23)")
      ->check(CLI::IsMember({"S", "W", "A"}));
  cli.add_option("--rounds", options.rounds, "repeat the 10-iteration benchmark this many times, each verified")
      ->check(CLI::Range(1, 100000));
  cli.add_option("--chunk", options.chunk_buckets,
                 "buckets merged into one key message (default: a sixteenth of the buckets)")
      ->check(CLI::Range(1, 1 << 20));
  cli.add_option("--window", options.window,
                 "iterations in flight: key holders run at most this many beyond those known complete")
      ->check(CLI::Range(1, 10));
  cli.add_flag("--sequential", sequential_only, "only run the sequential benchmark and time it");
  cli.add_flag("--no-check", no_check, "do not run the sequential benchmark to check the result");
  launch::ClusterCli run;
  run.add_to(cli, "keys ranked");
  CLI11_PARSE(cli, argc, argv);

  const NpbClass c = *npb_class(name[0]);
  if (options.chunk_buckets > c.buckets) options.chunk_buckets = c.buckets;
  if (launch::spawned_by_shell()) {
    return launch::run_spawned_node([&](launch::NodeProcess& p) { return run_node(p, c, options); });
  }
  if (sequential_only) return run_sequential(c, options.rounds).successful() ? 0 : 1;

  auto cluster = run.options("isort", "keys ranked");
  if (!cluster) return 2;
  const launch::ClusterOptions& o = *cluster;
  std::printf(
      "isort: class %c, %llu keys in [0, %u), %u buckets, %u round%s of %d iterations; %d nodes at the "
      "start, %zu joins/leaves scheduled\n",
      c.name, static_cast<unsigned long long>(c.keys), c.max_key, c.buckets, options.rounds,
      options.rounds == 1 ? "" : "s", max_iterations, o.nodes, o.schedule.size());
  std::fflush(stdout);

  const auto outcome = launch::run_cluster(o, [&](launch::NodeProcess& p) { return run_node(p, c, options); });
  if (!outcome.ok) {
    std::printf("isort: FAILED\n");
    return 1;
  }
  const double keys = static_cast<double>(c.keys) * max_iterations * options.rounds;
  std::printf(
      "parallel:   %s\n            in %.3f s: %.2f million keys ranked per second (%d joins, %d leaves "
      "during the run)\n",
      outcome.result.c_str(), outcome.seconds, keys / outcome.seconds / 1e6, outcome.joins, outcome.leaves);
  if (no_check) return 0;
  const Verification expected = run_sequential(c, options.rounds);
  if (outcome.result != describe(expected)) {
    std::printf("isort: MISMATCH between the parallel and the sequential result\n");
    return 1;
  }
  std::printf("isort: the parallel result equals the sequential one\n");
  return expected.successful() ? 0 : 1;
}
