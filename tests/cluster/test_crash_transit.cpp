// Intervals lost on their way that one node alone knew of, and that node crashes too: the interval is still
// reported orphaned and adopted under orphan_policy "adopt". A giver that crashes after it released an interval
// and before its taker assumed it advertised it in transit (route_entry::in_transit); a giver whose taker crashed
// hands what it knows on with the interval next to it (phoenix/handover.hpp, "losses") and advertises it in
// transit meanwhile (phoenix/node_losses.cpp). Separate processes on 127.0.0.1.
#include <doctest/doctest.h>

#include <algorithm>
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

// The taker: assumes `first`; reports what it assumes once that is all of [0, L), or at its deadline.
int run_taker(const std::string& key, const std::string& peer, const ChildPipes& pipes, Interval first = {500, L},
              int orphan_after_ms = 300) {
  auto config = member_config("taker", key, "adopt");
  config.orphan_after_ms = orphan_after_ms;
  phoenix::Node node(config);
  if (node.initialize("tcp://127.0.0.1:0") || node.add_port(peer) || node.assume(first)) return 1;
  const auto deadline = Clock::now() + 40s;
  while (node.assumed() != std::vector<Interval>{{0, L}} && Clock::now() < deadline) (void)node.recv_for(1, 20ms);
  return phoenix::test::crash::report_then_finalize(node, pipes, phoenix::test::crash::assumes_line(node));
}

std::string taker_after_giver_crash() {
  phoenix::test::temp_dir dir;
  const std::string key = dir.make_key();
  return phoenix::test::crash::first_then_later(
      "giver", [&](const ChildPipes& p) { return run_giver(key, p); },
      {{"taker",
        [&](const std::string& port) { return [&, port](const ChildPipes& p) { return run_taker(key, port, p); }; }}},
      "ASSUMES");
}

// The middle: assumes [300, 700); gives [300, 400) to the node below, which dies as the state arrives; then
// gives all it has left to the node above, and kills itself.
// Owners gone for 2 s are orphaned here: the middle must give all it has before four times that, when it would
// adopt what it alone knows of itself.
phoenix::Config slow_config(const std::string& name, const std::string& key) {
  auto c = member_config(name, key, "adopt");
  c.orphan_after_ms = 2000;
  return c;
}

int run_middle(const std::string& key, const ChildPipes& pipes) {
  phoenix::Node node(slow_config("middle", key));
  if (node.initialize("tcp://127.0.0.1:0") || node.assume({300, 700})) return 1;
  phoenix::launch::report_line(pipes.report_fd, "PORT " + node.local_port());
  const auto deadline = Clock::now() + 30s;
  while (!(sees_interval(node, {0, 300}) && sees_interval(node, {700, L})) && Clock::now() < deadline)
    (void)node.poll();
  (void)node.migrate(phoenix::Node::MigrationAction::give, phoenix::Node::Side::below, 100, 10s);
  while (node.assumed() != std::vector<Interval>{{400, 700}} && Clock::now() < deadline) (void)node.poll();
  const auto ec = node.migrate(phoenix::Node::MigrationAction::give_all, phoenix::Node::Side::above, 0, 10s);
  phoenix::launch::report_line(pipes.report_fd, "GAVE " + std::to_string(ec.value()));
  ::raise(SIGKILL);
  return 1;
}

// The node below: assumes [0, 300) and dies in its unpack, before it assumes what it was given.
int run_below(const std::string& key, const std::string& peer) {
  phoenix::Node node(slow_config("below", key));
  if (node.initialize("tcp://127.0.0.1:0") || node.add_port(peer) || node.assume({0, 300})) return 1;
  if (node.set_state_handlers([](Interval) -> std::optional<phoenix::Bytes> { return phoenix::Bytes(8); },
                              [](Interval, std::span<const std::byte>) {
                                ::raise(SIGKILL);
                                return true;
                              }))
    return 1;
  const auto deadline = Clock::now() + 30s;
  while (Clock::now() < deadline) (void)node.recv_for(1, 20ms);
  return 1;
}

std::string above_after_both_crash() {
  phoenix::test::temp_dir dir;
  const std::string key = dir.make_key();
  using phoenix::test::crash::child_body;
  return phoenix::test::crash::first_then_later(
      "middle", [&](const ChildPipes& p) { return run_middle(key, p); },
      {{"below", [&](const std::string& port) -> child_body { return [&, port](const ChildPipes&) { return run_below(key, port); }; }},
       {"above", [&](const std::string& port) -> child_body {
          return [&, port](const ChildPipes& p) { return run_taker(key, port, p, {700, L}, 2000); };
        }}},
      "ASSUMES");
}

// The node above: assumes [700, L) and relays between the others, which dial it.
int run_above(const std::string& key, const ChildPipes& pipes) {
  auto config = member_config("above", key, "adopt");
  config.orphan_after_ms = 1000;
  phoenix::Node node(config);
  if (node.initialize("tcp://127.0.0.1:0") || node.assume({700, L})) return 1;
  phoenix::launch::report_line(pipes.report_fd, "PORT " + node.local_port());
  while (!phoenix::launch::stop_requested(pipes.control_fd, 50ms)) (void)node.poll();
  node.finalize();
  return 0;
}

// The middle again: gives [300, 400) to the node below, which dies as the state arrives; once it reports the
// interval orphaned it suspends with [400, 700), and its next incarnation resumes from the log. Only the log
// can tell that incarnation of [300, 400): nobody else heard the node below assume it. The first incarnation
// does not adopt (orphan_policy wait), so that it suspends knowing the loss whatever the timing; the next one
// does. It must not take [0, 300): the node above saw the node below go and holds that record, and could have
// adopted it meanwhile. So it reports what it assumes 3 s after it assumes [300, 700) (past the 2 s after which
// it would adopt an orphan below it that begins at 0), or at its deadline.
int run_suspender(const std::string& key, const std::string& peer, const ChildPipes& pipes,
                  const std::string& log) {
  auto config = member_config("middle", key, "wait");
  config.orphan_after_ms = 1000;
  const auto pack = [](Interval) -> std::optional<phoenix::Bytes> { return phoenix::Bytes(8); };
  const auto unpack = [](Interval, std::span<const std::byte>) { return true; };
  const auto deadline = Clock::now() + 45s;
  {
    phoenix::Node node(config);
    if (node.initialize("tcp://127.0.0.1:0") || node.add_port(peer) || node.assume({300, 700}) ||
        node.set_state_handlers(pack, unpack))
      return 1;
    while (!(sees_interval(node, {0, 300}) && sees_interval(node, {700, L})) && Clock::now() < deadline)
      (void)node.poll();
    (void)node.migrate(phoenix::Node::MigrationAction::give, phoenix::Node::Side::below, 100, 10s);
    const auto reported = [&] {
      for (const auto& o : node.orphaned())  // the node below's record: [0, 300) and [300, 400)
        if (o.span.lo <= 300 && o.span.hi >= 400) return true;
      return false;
    };
    while (!(reported() && node.assumed() == std::vector<Interval>{{400, 700}}) && Clock::now() < deadline)
      (void)node.poll();
    if (const auto ec = node.suspend(log.c_str())) return 1;
  }
  config.orphan_policy = "adopt";
  phoenix::Node next(config);
  if (next.initialize("tcp://127.0.0.1:0", log.c_str()) || next.add_port(peer) ||
      next.set_state_handlers(pack, unpack))
    return 1;
  while (next.assumed() != std::vector<Interval>{{300, 700}} && Clock::now() < deadline)
    (void)next.recv_for(1, 20ms);
  const auto hold = std::min(Clock::now() + 3s, deadline);
  while (Clock::now() < hold) (void)next.recv_for(1, 20ms);
  return phoenix::test::crash::report_then_finalize(next, pipes, phoenix::test::crash::assumes_line(next));
}

std::string resumed_after_suspend() {
  phoenix::test::temp_dir dir;
  const std::string key = dir.make_key();
  const std::string log = (dir / "middle.log").string();
  using phoenix::test::crash::child_body;
  return phoenix::test::crash::first_then_later(
      "above", [&](const ChildPipes& p) { return run_above(key, p); },
      {{"below", [&](const std::string& port) -> child_body { return [&, port](const ChildPipes&) { return run_below(key, port); }; }},
       {"middle", [&](const std::string& port) -> child_body {
          return [&, port](const ChildPipes& p) { return run_suspender(key, port, p, log); };
        }}},
      "ASSUMES");
}

}  // namespace crash_transit

TEST_CASE("crash: a giver SIGKILLed after it released an interval and before its taker assumed it leaves the interval reported and adopted") {
  CHECK(crash_transit::taker_after_giver_crash() == "ASSUMES [0, 1000)");
}

TEST_CASE("crash: a giver whose taker crashed, and which alone knew the interval lost on its way, crashes after giving all it had: the interval is adopted all the same") {
  CHECK(crash_transit::above_after_both_crash() == "ASSUMES [0, 1000)");
}

TEST_CASE("crash: a giver whose taker crashed, and which alone knew the interval lost on its way, suspends: its next incarnation learns that part from the log and adopts it, and not what the taker held besides") {
  CHECK(crash_transit::resumed_after_suspend() == "ASSUMES [300, 700)");
}
