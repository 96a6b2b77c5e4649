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

// As lu does: the first node begins once the others of the start have joined (and announced themselves, which
// must not be lost: the patience outlasts the timeout).
Run run_lu(Problem problem, launch::ClusterOptions o) {
  problem.initial_nodes = static_cast<std::uint32_t>(o.nodes);
  problem.begin_patience_s = 1000;
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

TEST_CASE("lu: three processes factor a matrix with partial pivoting once the two that join took their records, "
          "and the residual passes") {
  launch::ClusterOptions o;
  o.nodes = 3;
  const Problem problem{1536, 16, true, 11, true};
  const Run r = run_lu(problem, o);
  CHECK(r.summary.n == 1536);
  CHECK(r.summary.pivoting);
  CHECK(r.summary.checked);
  CHECK(r.summary.passed);
  CHECK(r.outcome.joins == 2);
  // Every block of the joiners' intervals moved before any was final: half at the first join, a quarter at the
  // second (about: the blocks' virtual nodes are M places L/M apart, rounded down, and L/M is no integer).
  const std::uint64_t blocks = 96 * 96;
  CHECK(r.summary.migrations >= blocks * 3 / 4 - blocks / 100);
}

TEST_CASE("lu: a node joins and the oldest leaves mid-run, blocks move with their state, the residual passes") {
  // 128² blocks of 16: some 5·10^5 messages between blocks, several seconds on two cores even without
  // sanitizers, so that the join and the leave happen well before the end.
  launch::ClusterOptions o;
  o.nodes = 2;
  o.schedule = *launch::parse_schedule("join@0.5,leave@1.0");
  const Problem problem{2048, 16, true, 12, true};
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
