// volpex_server — a node that serves the Volpex dataspace (phoenix/volpex.hpp) for the virtual nodes it
// assumes. Started by the shell phsh, or by anything that speaks its spawn protocol (phoenix/launch/
// spawned_node.hpp): the first server assumes all of [0, L), later ones join and take half an interval with
// its tags, and any may leave (or suspend) while replicas compute: the tags move with the intervals.
//
// Usage: volpex_server [--replicas K] [--log-capacity N] [--copy-logging] [--spill-dir DIR] [--no-replica-rules]
#include <CLI/CLI.hpp>
#include <phoenix/volpex.hpp>

#include <chrono>
#include <cstdio>

#include "phoenix/launch/app_log.hpp"
#include "phoenix/launch/run_control.hpp"
#include "phoenix/launch/spawned_node.hpp"

namespace {

using namespace phoenix;
using namespace std::chrono_literals;

int serve(launch::NodeProcess& process, const volpex::ServerOptions& options) {
  Node node(process.config());
  if (!launch::connect_node(process, node)) return 1;
  volpex::Server server(node, options);
  if (auto ec = server.install()) {
    process.report_error("state handlers: " + ec.message());
    return 1;
  }
  if (!launch::enter_space(process, node)) return 1;
  // A unit is a request served.
  std::uint64_t served = 0;
  auto hooks = process.run_hooks(node, [&] { return served; });
  launch::RunControl control(node, hooks, 10s, 500ms, launch::app_logger("volpex_server"));
  std::optional<launch::RunEnd> end;
  while (!end) {
    if (control.stop()) {
      end = launch::RunEnd::stopped;
      break;
    }
    served += server.serve_for(20ms);
    end = control.tick_and_leave(std::chrono::steady_clock::now());
  }
  const auto s = server.statistics();
  process.report("puts " + std::to_string(s.puts) + " (+" + std::to_string(s.replica_puts) + " replicas'), " +
                 "delivered " + std::to_string(s.delivered) + " (+" + std::to_string(s.from_log) +
                 " from the log), lost " + std::to_string(s.lost));
  process.report_units(served);
  if (*end == launch::RunEnd::suspended) {
    process.report_suspended();
    return 0;
  }
  if (*end == launch::RunEnd::left) process.report_left();
  if (*end != launch::RunEnd::left) process.report_finished();
  return node.finalize() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"volpex_server: a phoenix node serving the Volpex dataspace for the virtual nodes it assumes"};
  volpex::ServerOptions options;
  cli.add_option("--replicas", options.replicas, "replicas per process (a read-log entry goes once all have it)");
  cli.add_option("--log-capacity", options.log_capacity, "read-log entries kept in memory")
      ->check(CLI::Range(2, 1 << 30));
  cli.add_flag("--copy-logging", options.copy_logging, "copy each delivered object into the read log");
  cli.add_option("--spill-dir", options.spill_dir, "where the read log spills (default $TMPDIR)");
  bool no_rules = false;
  cli.add_flag("--no-replica-rules", no_rules,
               "treat every call as a first instance (no single put, no identical get): drills only");
  CLI11_PARSE(cli, argc, argv);
  options.replica_rules = !no_rules;
  if (!launch::spawned_by_shell()) {
    std::fprintf(stderr,
                 "volpex_server: start it with phsh (spawn volpex_server), or set PHSH_ROLE=first|join and the "
                 "PHOENIX_* variables (phoenix/launch/spawned_node.hpp)\n");
    return 2;
  }
  return launch::run_spawned_node([&](launch::NodeProcess& p) { return serve(p, options); });
}
