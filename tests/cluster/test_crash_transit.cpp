// A giver that crashes after it released an interval for a migration and before its taker assumed it: the
// interval is reported orphaned with the giver's own (it was advertised in transit: route_entry::in_transit)
// and adopted under orphan_policy "adopt". Before, the giver's last advertisement had dropped it and nobody
// knew it was anybody's. Separate processes on 127.0.0.1.
#include <doctest/doctest.h>

#include <csignal>
#include <string>
#include <thread>

#include <phoenix/config.hpp>
#include <phoenix/node.hpp>

#include "crash_nodes.hpp"
#include "support/temp_dir.hpp"

using namespace std::chrono_literals;
using phoenix::Interval;
using phoenix::launch::ChildPipes;
using phoenix::launch::Clock;

// Named, not anonymous: the test sources are built as one unity source.
namespace crash_transit {

using phoenix::test::crash::L;
using phoenix::test::crash::member_config;
using phoenix::test::crash::sees_interval;

// The giver: assumes [0, 500) and gives [400, 500) to the node above; it kills itself in its pack, after the
// release, once the release had time to reach the taker.
int run_giver(const std::string& key, const ChildPipes& pipes) {
  phoenix::Node node(member_config("giver", key, "adopt"));
  if (node.initialize("tcp://127.0.0.1:0") || node.assume({0, 500})) return 1;
  if (node.set_state_handlers(
          [](Interval) -> std::optional<phoenix::Bytes> {
            std::this_thread::sleep_for(300ms);
            ::raise(SIGKILL);
            return phoenix::Bytes(8);
          },
          [](Interval, std::span<const std::byte>) { return true; }))
    return 1;
  phoenix::launch::report_line(pipes.report_fd, "PORT " + node.local_port());
  const auto deadline = Clock::now() + 30s;
  while (!phoenix::test::crash::sees_interval(node, {500, L}) && Clock::now() < deadline) (void)node.poll();
  (void)node.migrate(phoenix::Node::MigrationAction::give, phoenix::Node::Side::above, 100, 10s);
  return 1;  // not reached: the pack kills it
}

// The taker: assumes [500, 1000); reports what it assumes once that is all of [0, L), or at its deadline.
int run_taker(const std::string& key, const std::string& peer, const ChildPipes& pipes) {
  phoenix::Node node(member_config("taker", key, "adopt"));
  if (node.initialize("tcp://127.0.0.1:0") || node.add_port(peer) || node.assume({500, L})) return 1;
  const auto deadline = Clock::now() + 30s;
  while (node.assumed() != std::vector<Interval>{{0, L}} && Clock::now() < deadline) (void)node.recv_for(1, 20ms);
  std::string line = "ASSUMES";
  for (const auto& i : node.assumed()) line += " [" + std::to_string(i.lo) + ", " + std::to_string(i.hi) + ")";
  phoenix::launch::report_line(pipes.report_fd, line);
  while (!phoenix::launch::stop_requested(pipes.control_fd, 50ms)) {
  }
  node.finalize();
  return 0;
}

std::string taker_after_giver_crash() {
  phoenix::test::temp_dir dir;
  const std::string key = dir.make_key();
  return phoenix::test::crash::first_then_second(
      "giver", [&](const ChildPipes& p) { return run_giver(key, p); }, "taker",
      [&](const std::string& port) { return [&, port](const ChildPipes& p) { return run_taker(key, port, p); }; },
      "ASSUMES");
}

}  // namespace crash_transit

TEST_CASE("crash: a giver SIGKILLed after it released an interval and before its taker assumed it leaves the interval reported and adopted") {
  CHECK(crash_transit::taker_after_giver_crash() == "ASSUMES [0, 1000)");
}
