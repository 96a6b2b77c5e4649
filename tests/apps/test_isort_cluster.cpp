// tests/apps/test_isort_cluster.cpp — integer sort (apps/isort) on several node processes, with a node joining
// and the one holding virtual node 0 (and the collector) leaving mid-run: the verification equals the
// sequential benchmark's, no node saw a bad message, and keys and buckets really moved between processes.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "apps/isort/isort.hpp"
#include "phoenix/launch/app_cluster.hpp"
#include "support/temp_dir.hpp"

namespace {

using namespace phoenix;
using namespace phoenix::apps::isort;

// What each node process reported at its end, by process index.
using StatsByNode = std::map<int, SortStats>;

launch::ClusterOutcome run_sort(const NpbClass& c, std::uint32_t rounds, launch::ClusterOptions o,
                                StatsByNode& stats) {
  test::temp_dir dir;
  const std::string file = (dir / "stats").string();
  o.app = "isort-test";
  o.quiet = true;
  o.timeout_s = 300;
  SortOptions options;
  options.rounds = rounds;
  const auto out = launch::run_cluster(o, [&](launch::NodeProcess& p) {
    return run_node(p, c, options, [&](const SortStats& s) {
      // One short line, appended: the processes' lines do not interleave.
      if (std::FILE* f = std::fopen(file.c_str(), "a")) {
        std::fprintf(
            f, "%d %llu %llu %llu %llu %llu %llu %llu %llu\n", p.index(),
            static_cast<unsigned long long>(s.keys_handed), static_cast<unsigned long long>(s.keys_sent),
            static_cast<unsigned long long>(s.keys_moved_out), static_cast<unsigned long long>(s.keys_moved_in),
            static_cast<unsigned long long>(s.buckets_moved_out),
            static_cast<unsigned long long>(s.buckets_moved_in),
            static_cast<unsigned long long>(s.bad_messages), static_cast<unsigned long long>(s.send_errors));
        std::fclose(f);
      }
    });
  });
  std::ifstream in(file);
  int index = 0;
  SortStats s;
  while (in >> index >> s.keys_handed >> s.keys_sent >> s.keys_moved_out >> s.keys_moved_in >> s.buckets_moved_out >> s.buckets_moved_in >>
         s.bad_messages >> s.send_errors) {
    stats[index] = s;
  }
  return out;
}

void check_no_errors(const StatsByNode& stats) {
  for (const auto& entry : stats) {  // named, not bound: INFO captures it in a lambda
    const auto& index = entry.first;
    const auto& s = entry.second;
    INFO("node process " << index);
    CHECK(s.bad_messages == 0);
    CHECK(s.send_errors == 0);
  }
}

}  // namespace

TEST_CASE("isort: class S on three processes verifies and equals the sequential benchmark") {
  const NpbClass c = *npb_class('S');
  launch::ClusterOptions o;
  o.nodes = 3;
  StatsByNode stats;
  const auto out = run_sort(c, 1, o, stats);
  REQUIRE(out.ok);
  CHECK(out.result == describe(sequential(c, 1)));
  check_no_errors(stats);
  // Every key reaches its bucket once an iteration: handed to a record of its own process, or sent (how many
  // of each depends on when the others joined).
  std::uint64_t delivered = 0;
  for (const auto& [index, s] : stats) delivered += s.keys_handed + s.keys_sent;
  CHECK(delivered == max_iterations * c.keys);
}

TEST_CASE("isort: a node joins and the one holding virtual node 0 leaves mid-run and the sort stays exact") {
  // Long enough (a few seconds in an optimised build, a minute under a sanitizer) that the join and the leave
  // both happen while keys are being ranked.
  const NpbClass c = *npb_class('W');
  const std::uint32_t rounds = 25;
  launch::ClusterOptions o;
  o.nodes = 2;
  o.schedule = *launch::parse_schedule("join@0.5,leave@1.2");
  StatsByNode stats;
  const auto out = run_sort(c, rounds, o, stats);
  REQUIRE(out.ok);
  CHECK(out.joins == 2);  // the second initial node and the scheduled one
  CHECK(out.leaves == 1);
  // Every round starts from the same keys (isort_unit checks it): the sequential benchmark's one round,
  // repeated.
  Verification expected = sequential(c, 1);
  expected.rounds = rounds;
  expected.partial_passed *= rounds;
  expected.full_passed *= rounds;
  expected.sorted_checksum *= rounds;
  CHECK(out.result == describe(expected));
  check_no_errors(stats);

  REQUIRE(stats.size() == 3);
  // Process 0 started with everything, gave the upper half to process 1, and left with the rest.
  CHECK(stats[0].keys_moved_out == c.keys);
  CHECK(stats[0].buckets_moved_out == c.buckets);
  // Process 2 joined: it took part of someone's keys and buckets.
  CHECK(stats[2].keys_moved_in > 0);
  CHECK(stats[2].buckets_moved_in > 0);
  std::uint64_t keys_out = 0, keys_in = 0, buckets_out = 0, buckets_in = 0;
  for (const auto& [index, s] : stats) {
    keys_out += s.keys_moved_out;
    keys_in += s.keys_moved_in;
    buckets_out += s.buckets_moved_out;
    buckets_in += s.buckets_moved_in;
  }
  CHECK(keys_in == keys_out);  // nothing lost, nothing made up on the way
  CHECK(buckets_in == buckets_out);
}
