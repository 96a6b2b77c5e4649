// phoenix/launch/cluster_cli.hpp — the command-line options every application shares for its run on local node
// processes (phoenix/launch/app_cluster.hpp): how many nodes, the join/leave schedule, the trace, the time limit.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>

#include "phoenix/launch/app_cluster.hpp"

namespace phoenix::launch {

struct ClusterCli {
  int nodes = 2;
  std::string schedule;
  double figure6 = 0;
  std::string trace;
  double timeout = 3600;
  bool quiet = false;

  void add_to(CLI::App& cli, const std::string& unit) {
    cli.add_option("--nodes", nodes, "node processes present from the start")->check(CLI::Range(1, 64));
    cli.add_option("--schedule", schedule, "joins and leaves during the run, e.g. join@2,leave@5 (seconds)");
    cli.add_option("--figure6", figure6,
                   "the paper's Figure 6: start on one node, add one every SECONDS up to 8, then remove them")
        ->check(CLI::PositiveNumber);
    cli.add_option("--trace", trace, "write time, nodes present and " + unit + " per second as CSV to FILE");
    cli.add_option("--timeout", timeout, "give up after this many seconds")->check(CLI::PositiveNumber);
    cli.add_flag("--quiet", quiet, "no progress lines");
  }

  // The launcher's options; nullopt (after saying why on stderr) if the schedule does not parse.
  std::optional<ClusterOptions> options(const std::string& app, const std::string& unit) const {
    ClusterOptions o;
    o.app = app;
    o.unit = unit;
    o.nodes = figure6 > 0 ? 1 : nodes;
    o.trace_file = trace;
    o.timeout_s = timeout;
    o.quiet = quiet;
    if (figure6 > 0) {
      o.schedule = figure6_schedule(8, figure6);
    } else if (!schedule.empty()) {
      auto s = parse_schedule(schedule);
      if (!s) {
        std::fprintf(stderr, "%s: --schedule: expected join@SECONDS or leave@SECONDS, comma-separated\n",
                     app.c_str());
        return std::nullopt;
      }
      o.schedule = *s;
    }
    return o;
  }
};

}  // namespace phoenix::launch
