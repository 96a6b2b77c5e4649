// bench/isort.cpp — isort_bench: NAS integer sort (apps/isort) on 1 and 2 node processes beside the sequential
// benchmark on one thread (the anchor), in one invocation.
//
// Each variant sorts the class's keys for --rounds rounds of NPB's 10 iterations, from generating the keys to
// the verified result, --reps times; the median wall time is printed with its speedup over the sequential run.
// The phoenix runs time from the first node's start to the collector's result, process start-up included.
// Every variant's verification (NPB's partial and full checks, the sorted keys' checksum) must equal the
// sequential one. Nothing about speed is asserted.
//
// Output: `RESULT isort <variant> <class> <seconds> s speedup <x>`, then a markdown table.
// Usage: isort_bench [--class S|W|A] [--rounds R] [--reps R] [--quick]
#include "apps/isort/isort.hpp"

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "app_bench.hpp"

int main(int argc, char** argv) {
  using namespace phoenix;
  using namespace phoenix::apps::isort;
  CLI::App cli{"isort_bench: NAS integer sort on phoenix node processes vs the sequential benchmark"};
  std::string name = "A";
  SortOptions options;
  int reps = 3;
  bool quick = false;
  cli.add_option("--class", name, "NPB problem class: S, W or A")->check(CLI::IsMember({"S", "W", "A"}));
  cli.add_option("--rounds", options.rounds, "rounds of the 10-iteration benchmark")
      ->check(CLI::Range(1, 1000));
  cli.add_option("--reps", reps, "runs of each variant; the median is printed")->check(CLI::Range(1, 99));
  cli.add_flag("--quick", quick, "class S, one run each: checks that everything runs");
  CLI11_PARSE(cli, argc, argv);
  if (quick) {
    name = "S";
    reps = 1;
  }
  const NpbClass c = *npb_class(name[0]);

  const auto cluster = [&](int nodes) {
    return [&, nodes] {
      return bench::run_app_cluster("isort", nodes,
                                    [&](launch::NodeProcess& p) { return run_node(p, c, options); });
    };
  };
  const std::vector<bench::AppVariant> variants{
      {"sequential", [&] { return std::optional(describe(sequential(c, options.rounds))); }},
      {"phoenix-1process", cluster(1)},
      {"phoenix-2processes", cluster(2)},
  };
  std::printf("# isort_bench: class %c, %llu keys, %u round(s) of 10 iterations, %d rep(s) each\n", c.name,
              static_cast<unsigned long long>(c.keys), options.rounds, reps);
  std::fflush(stdout);
  return bench::run_app_variants("isort", std::string(1, c.name), variants, reps);
}
