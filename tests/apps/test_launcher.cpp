// tests/apps/test_launcher.cpp — the application launcher (phoenix/launch/app_cluster.hpp) on its own: what makes
// a run fail.
#include <doctest/doctest.h>

#include "phoenix/launch/app_cluster.hpp"

using namespace phoenix;

TEST_CASE("launcher: a node that reports an error fails the run even when a result arrives") {
  launch::ClusterOptions o;
  o.app = "launcher-test";
  o.nodes = 1;
  o.quiet = true;
  o.timeout_s = 60;
  const auto body = [](bool with_error) {
    return [with_error](launch::NodeProcess& p) {
      p.report_joined(0, 1);
      if (with_error) p.report_error("something went wrong");
      p.report_result("42");
      p.report_finished();
      return 0;
    };
  };
  const auto clean = launch::run_cluster(o, body(false));
  CHECK(clean.ok);
  CHECK(clean.result == "42");
  const auto failed = launch::run_cluster(o, body(true));
  CHECK_FALSE(failed.ok);
}
