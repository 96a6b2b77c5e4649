// tests/apps/test_lu_cluster.cpp — the LU application (apps/lu) on several node processes: the residual of the
// factorisation passes with partial pivoting and without, also when a node joins and the node holding virtual
// node 0 (the collector, and the most blocks) leaves in the middle, its blocks moving with their state.
#include <doctest/doctest.h>

#include "phoenix/launch/app_cluster.hpp"
#include "apps/lu/lu.hpp"

namespace {

using namespace phoenix;
using apps::lu::Problem;
using apps::lu::Summary;

struct Run {
  launch::ClusterOutcome outcome;
  Summary summary;
};

Run run_lu(const Problem& problem, launch::ClusterOptions o) {
  o.app = "lu-test";
  o.quiet = true;
  o.timeout_s = 400;
  Run r;
  r.outcome = launch::run_cluster(o, [&](launch::NodeProcess& p) { return apps::lu::run_node(p, problem); });
  REQUIRE(r.outcome.ok);
  const auto s = apps::lu::parse_summary(r.outcome.result);
  REQUIRE(s);
  r.summary = *s;
  return r;
}

}  // namespace

TEST_CASE("lu: three processes factor a matrix with partial pivoting, and the residual passes") {
  // The first node starts at once and the others join one after the other: 96² blocks of 16 take long enough
  // (a second or more) for both to take part.
  launch::ClusterOptions o;
  o.nodes = 3;
  const Problem problem{1536, 16, true, 11, true};
  const Run r = run_lu(problem, o);
  CHECK(r.summary.n == 1536);
  CHECK(r.summary.pivoting);
  CHECK(r.summary.checked);
  CHECK(r.summary.passed);
  CHECK(r.outcome.joins == 2);
  CHECK(r.summary.migrations > 0);
}

TEST_CASE("lu: the first of three processes begins once the other two joined and took their records, and the "
          "residual passes") {
  launch::ClusterOptions o;
  o.nodes = 3;
  Problem problem{1024, 32, true, 15, true};
  problem.initial_nodes = 3;
  problem.begin_patience_s = 1000;  // beyond the run's timeout: a lost announcement fails the test
  const Run r = run_lu(problem, o);
  CHECK(r.summary.passed);
  CHECK(r.outcome.joins == 2);
  // Every block of the two joiners' intervals moved before any was final: half at the first join, a quarter at
  // the second.
  const std::uint64_t blocks = 32 * 32;
  CHECK(r.summary.migrations >= blocks * 3 / 4);
}

TEST_CASE("lu: a node joins and the oldest leaves mid-run, blocks move with their state, the residual passes") {
  // 128² blocks of 16: some 5·10^5 messages between blocks, several seconds on two cores even without
  // sanitizers, so that the join and the leave happen well before the end.
  launch::ClusterOptions o;
  o.nodes = 2;
  o.schedule = *launch::parse_schedule("join@0.5,leave@1.0");
  Problem problem{2048, 16, true, 12, true};
  problem.initial_nodes = 2;  // the second node announces itself, and the run begins when it has joined
  problem.begin_patience_s = 1000;
  const Run r = run_lu(problem, o);
  CHECK(r.outcome.joins == 2);  // the second initial node and the scheduled one
  CHECK(r.outcome.leaves == 1);
  CHECK(r.summary.passed);
  // The second node's join moved half of the blocks; the scheduled join and leave moved more before they were
  // final.
  const std::uint64_t blocks = 128 * 128;
  CHECK(r.summary.migrations > blocks / 2);
}

TEST_CASE("lu: two processes factor the paper's variant without pivoting, and the residual passes") {
  launch::ClusterOptions o;
  o.nodes = 2;
  const Problem problem{1024, 16, false, 13, true};
  const Run r = run_lu(problem, o);
  CHECK_FALSE(r.summary.pivoting);
  CHECK(r.summary.passed);
  CHECK(r.outcome.joins == 1);
  CHECK(r.summary.migrations > 0);  // the second node took blocks that were not final yet
}
