// tests/apps/test_bintree.cpp — the lazy-task-creation layer (apps/steal) through the bintree application: on
// several node processes, with nodes joining and leaving mid-run, the value equals the sequential recursion.
#include <doctest/doctest.h>

#include <cstdio>

#include "apps/bintree/bintree.hpp"
#include "phoenix/launch/app_cluster.hpp"

namespace {

using namespace phoenix;
using apps::bintree::Value;

launch::ClusterOutcome run_tree(std::uint32_t depth, std::uint32_t work, launch::ClusterOptions o) {
  o.app = "bintree-test";
  o.quiet = true;
  o.timeout_s = 300;
  return launch::run_cluster(o,
                             [&](launch::NodeProcess& p) { return apps::bintree::run_node(p, depth, work); });
}

}  // namespace

TEST_CASE("bintree: the sequential value counts every leaf and sums their checksums") {
  const Value v = apps::bintree::sequential(3, 10);
  CHECK(v.leaves == 8);
  std::uint64_t sum = 0;
  for (std::uint64_t i = 8; i < 16; ++i) sum += apps::bintree::leaf(i, 10);  // the leaves' indices at depth 3
  CHECK(v.checksum == sum);
  CHECK(apps::bintree::leaf(8, 10) != apps::bintree::leaf(8, 11));
}

TEST_CASE("bintree: a malformed task or value is not taken for a real one") {
  Value v;
  CHECK_FALSE(apps::bintree::decode_value({}, v));
  apps::bintree::Tree tree(1);
  const std::byte junk[3]{};
  const auto out = tree.run(junk);
  CHECK_FALSE(out.divided);
  CHECK(tree.bad_tasks() == 1);
}

TEST_CASE("bintree: three processes steal from each other and get the sequential value") {
  launch::ClusterOptions o;
  o.nodes = 3;
  const auto out = run_tree(15, 200, o);
  REQUIRE(out.ok);
  CHECK(out.result == apps::bintree::describe(apps::bintree::sequential(15, 200)));
}

TEST_CASE(
    "bintree: nodes join and leave mid-run, the oldest (holding virtual node 0) first, the value is exact") {
  // Long enough (several seconds on one core) that every step of the schedule happens before the end.
  launch::ClusterOptions o;
  o.nodes = 2;
  o.schedule = *launch::parse_schedule("join@0.3,leave@0.6,join@0.9,leave@1.2");
  const std::uint32_t depth = 18, work = 4000;
  const auto out = run_tree(depth, work, o);
  REQUIRE(out.ok);
  CHECK(out.joins == 3);  // the second initial node and the two scheduled ones
  CHECK(out.leaves == 2);
  CHECK(out.result == apps::bintree::describe(apps::bintree::sequential(depth, work)));
}

TEST_CASE("bintree: a leave scheduled while one node alone is present waits for the next to join") {
  launch::ClusterOptions o;
  o.nodes = 2;
  o.schedule = *launch::parse_schedule("leave@0");  // before the second node can possibly have joined
  const std::uint32_t depth = 16, work = 4000;
  const auto out = run_tree(depth, work, o);
  REQUIRE(out.ok);
  CHECK(out.joins == 1);
  CHECK(out.leaves == 1);
  CHECK(out.result == apps::bintree::describe(apps::bintree::sequential(depth, work)));
}
