// A giver that crashes right after a migration's state left it: the messages its inbox held for the interval
// (delivered to it and acknowledged to their senders, not yet taken by its application) reach the taker with the
// state (phoenix/handover.hpp). Sent through the overlay instead, they waited at the giver for the taker's route
// and died with it. Separate processes on 127.0.0.1.
#include <doctest/doctest.h>

#include <sys/types.h>
#include <unistd.h>

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
namespace crash_handover {

using phoenix::test::crash::L;
using phoenix::test::crash::member_config;
using phoenix::test::crash::sees_interval;
constexpr int messages = 10;
constexpr int tag_waiting = 5, tag_sent = 6;

// The giver: assumes [0, 500) and never takes a message for virtual node 450; once the taker says it sent them
// all (a message to virtual node 10), it gives [400, 500) to the taker above.
int run_giver(const std::string& key, const ChildPipes& pipes) {
  phoenix::Node node(member_config("giver", key, "wait"));
  if (node.initialize("tcp://127.0.0.1:0") || node.assume({0, 500})) return 1;
  if (node.set_state_handlers([](Interval) -> std::optional<phoenix::Bytes> { return phoenix::Bytes(8); },
                              [](Interval, std::span<const std::byte>) { return true; }))
    return 1;
  phoenix::launch::report_line(pipes.report_fd, "PORT " + node.local_port() + " " + std::to_string(::getpid()));
  const auto deadline = Clock::now() + 30s;
  while (!node.recv_for(tag_sent, 20ms) && Clock::now() < deadline) {
  }
  std::this_thread::sleep_for(100ms);  // the end-to-end acknowledgements reach the taker
  const auto ec = node.migrate(phoenix::Node::MigrationAction::give, phoenix::Node::Side::above, 100, 10s);
  phoenix::launch::report_line(pipes.report_fd, "GAVE " + std::to_string(ec.value()));
  while (!phoenix::launch::stop_requested(pipes.control_fd, 50ms)) {
  }
  node.finalize();
  return 0;
}

// The taker: assumes [500, 1000), sends the messages to virtual node 450, and kills the giver (SIGKILL) in its
// unpack, once the state arrived; then receives what waited for 450.
int run_taker(const std::string& key, const std::string& peer, pid_t giver, const ChildPipes& pipes) {
  phoenix::Node node(member_config("taker", key, "wait"));
  if (node.initialize("tcp://127.0.0.1:0") || node.add_port(peer) || node.assume({500, L})) return 1;
  if (node.set_state_handlers([](Interval) -> std::optional<phoenix::Bytes> { return phoenix::Bytes(8); },
                              [giver](Interval, std::span<const std::byte>) {
                                ::kill(giver, SIGKILL);
                                std::this_thread::sleep_for(200ms);  // its links close
                                return true;
                              }))
    return 1;
  const auto deadline = Clock::now() + 30s;
  while (!sees_interval(node, {0, 500}) && Clock::now() < deadline) (void)node.recv_for(1, 20ms);
  for (int k = 0; k < messages; ++k)
    if (node.send(450, tag_waiting, &k, sizeof k)) return 1;
  if (node.send(10, tag_sent, nullptr, 0)) return 1;
  while (node.assumed() != std::vector<Interval>{{400, L}} && Clock::now() < deadline) (void)node.poll();
  int got = 0;
  const auto until = Clock::now() + 3s;
  while (got < messages && Clock::now() < until)
    if (node.recv_for(tag_waiting, 50ms)) ++got;
  return phoenix::test::crash::report_then_finalize(node, pipes, "GOT " + std::to_string(got));
}

std::string giver_killed_after_give() {
  phoenix::test::temp_dir dir;
  const std::string key = dir.make_key();
  const auto make_taker = [&](const std::string& rest) -> phoenix::test::crash::child_body {  // "<address> <pid>"
    const auto space = rest.rfind(' ');
    const std::string port = rest.substr(0, space);
    const pid_t pid = static_cast<pid_t>(std::stol(rest.substr(space + 1)));
    return [&, port, pid](const ChildPipes& p) { return run_taker(key, port, pid, p); };
  };
  return phoenix::test::crash::first_then_later(
      "giver", [&](const ChildPipes& p) { return run_giver(key, p); }, {{"taker", make_taker}}, "GOT ");
}

}  // namespace crash_handover

TEST_CASE("crash: a giver SIGKILLed as its state arrives loses none of the messages its inbox held for the interval") {
  CHECK(crash_handover::giver_killed_after_give() == "GOT " + std::to_string(crash_handover::messages));
}
