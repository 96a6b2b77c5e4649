// The Volpex applications as separate replica processes: ring (replicated point-to-point messages, a wildcard
// receive), psrs (all-to-all through the dataspace) and remd (neighbour exchanges through the dataspace). Each
// run's result must equal the application's --sequential one; replicas of process 0 must agree on the order of
// their wildcard receives; replicas killed mid-run — by a signal, as `phsh kill` does, or at named points
// ("while its sender log is being read", before a put, after a get was sent) — leave the result unchanged.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "volpex/volpex_cluster.hpp"

namespace {

using namespace std::chrono_literals;
using phoenix::test::Child;
using phoenix::test::volpex_cluster;

constexpr auto run_timeout = 240s;  // the ASan build is several times slower

using phoenix::test::run_sequential;

struct replicated_run {
  volpex_cluster cluster;
  std::vector<std::vector<Child*>> replicas;  // by process

  // A replica that kills itself at a named protocol point (VOLPEX_CRASH_AT).
  struct crash {
    int process = 0, replica = 0;
    std::string at;
  };

  replicated_run(const std::string& app, const std::vector<std::string>& args, int processes, int k,
                 const std::vector<std::string>& env = {}, const std::vector<crash>& crashes = {}) {
    cluster.server("s1", {"--replicas", std::to_string(k)});
    replicas.resize(processes);
    for (int r = 0; r < k; ++r) {
      for (int p = 0; p < processes; ++p) {
        auto e = env;
        e.push_back("VOLPEX_REPLICAS=" + std::to_string(k));
        for (const auto& c : crashes)
          if (c.process == p && c.replica == r) e.push_back("VOLPEX_CRASH_AT=" + c.at);
        replicas[p].push_back(&cluster.replica(volpex_cluster::program(app), args, p, processes, r, e));
      }
    }
  }

  // Waits for every replica; the lines of process 0's replicas that start with `prefix`, one per replica that
  // printed it.
  std::vector<std::string> lines_of_zero(const std::string& prefix) {
    for (auto& process : replicas)
      for (Child* c : process)
        REQUIRE_MESSAGE(cluster.children.wait_exit(*c, run_timeout), c->name << " did not finish\n"
                                                                             << cluster.children.transcript());
    std::vector<std::string> out;
    for (Child* c : replicas[0])
      if (auto l = c->line(prefix)) out.push_back(*l);
    return out;
  }
};

// Rounds of the ring runs that check results and catching up (not kills, which need a longer run). Under a
// sanitizer every replica runs several times slower; 100 rounds still pass hundreds of messages through
// the sender logs and the wildcard receives.
const std::string ring_rounds = phoenix::test::sanitized_build ? "100" : "300";

bool exited_cleanly(const Child& c) { return WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0; }
bool was_killed(const Child& c) { return WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGKILL; }

}  // namespace

TEST_CASE("volpex ring: 1, 2 and 3 replicas give the sequential result and one order of wildcard receives") {
  const std::vector<std::string> args{"1000", ring_rounds};
  const auto expected = run_sequential("ring", {"3", "1000", ring_rounds});
  for (int k = 1; k <= 3; ++k) {
    CAPTURE(k);
    replicated_run run("ring", args, 3, k);
    const auto results = run.lines_of_zero("RESULT ");
    CHECK_MESSAGE(results.size() == static_cast<std::size_t>(k), run.cluster.children.transcript());
    for (const auto& r : results) CHECK(r == expected);
    const auto orders = run.lines_of_zero("ORDER ");
    CHECK(orders.size() == static_cast<std::size_t>(k));
    CHECK(std::set<std::string>(orders.begin(), orders.end()).size() == 1);
    for (const auto& process : run.replicas)
      for (Child* c : process) CHECK_MESSAGE(exited_cleanly(*c), c->name);
  }
}

TEST_CASE(
    "volpex ring: replicas killed mid-run, by a signal and while serving from their log, change nothing") {
  // Long enough that the kills fall mid-run (was_killed below fails otherwise).
  const std::string rounds = phoenix::test::sanitized_build ? "1000" : "3000";
  const std::vector<std::string> args{"1000", rounds};
  const auto expected = run_sequential("ring", {"3", "1000", rounds});
  // First run: process 2's replica 1 and process 0's replica 1 are killed from outside once they registered
  // and the run is under way.
  replicated_run run("ring", args, 3, 2);
  run.cluster.wait_registered(*run.replicas[2][1]);
  run.cluster.wait_registered(*run.replicas[0][1]);
  std::this_thread::sleep_for(300ms);
  ::kill(run.replicas[2][1]->pid, SIGKILL);
  ::kill(run.replicas[0][1]->pid, SIGKILL);
  const auto results = run.lines_of_zero("RESULT ");
  CHECK_MESSAGE(results == std::vector<std::string>{expected}, run.cluster.children.transcript());
  CHECK(was_killed(*run.replicas[2][1]));
  CHECK(was_killed(*run.replicas[0][1]));
  CHECK(exited_cleanly(*run.replicas[0][0]));

  // Second run: process 1's replica 0 dies as it is about to answer its 200th pull from its sender log.
  volpex_cluster cluster;
  cluster.server("s1", {"--replicas", "2"});
  std::vector<Child*> all;
  Child* crashing = nullptr;
  for (int p = 0; p < 3; ++p) {
    for (int r = 0; r < 2; ++r) {
      std::vector<std::string> env{"VOLPEX_REPLICAS=2"};
      if (p == 1 && r == 0) env.push_back("VOLPEX_CRASH_AT=serve:200");
      all.push_back(&cluster.replica(volpex_cluster::program("ring"), args, p, 3, r, env));
      if (p == 1 && r == 0) crashing = all.back();
    }
  }
  std::vector<std::string> lines;
  for (Child* c : all) {
    REQUIRE_MESSAGE(cluster.children.wait_exit(*c, run_timeout), c->name << "\n"
                                                                         << cluster.children.transcript());
    if (auto l = c->line("RESULT ")) lines.push_back(*l);
  }
  CHECK_MESSAGE(lines == std::vector<std::string>(2, expected), cluster.children.transcript());
  CHECK(was_killed(*crashing));
}

TEST_CASE("volpex ring: a replica started after its leader finished catches up from the sender logs") {
  const std::vector<std::string> args{"1000", ring_rounds};
  const auto expected = run_sequential("ring", {"3", "1000", ring_rounds});
  for (const bool sender_log : {true, false}) {
    CAPTURE(sender_log);
    volpex_cluster cluster;
    cluster.server("s1", {"--replicas", "2"});
    std::vector<std::string> env{"VOLPEX_REPLICAS=2"};
    // Without the log replicas fail by design; their peers need not wait the default 10 s to give them up.
    if (!sender_log) env.insert(env.end(), {"VOLPEX_SENDER_LOG=0", "VOLPEX_GIVE_UP_MS=3000"});
    const auto program = volpex_cluster::program("ring");
    Child& leader = cluster.replica(program, args, 0, 3, 0, env);
    std::vector<Child*> others;
    for (int p = 1; p < 3; ++p)
      for (int r = 0; r < 2; ++r) others.push_back(&cluster.replica(program, args, p, 3, r, env));
    REQUIRE_MESSAGE(cluster.children.wait_exit(leader, run_timeout), cluster.children.transcript());
    // Every message process 0 received is still in its senders' logs, kept for its second replica.
    Child& late = cluster.replica(program, args, 0, 3, 1, env);
    REQUIRE_MESSAGE(cluster.children.wait_exit(late, run_timeout), cluster.children.transcript());
    for (Child* c : others)
      REQUIRE_MESSAGE(cluster.children.wait_exit(*c, run_timeout), cluster.children.transcript());
    if (sender_log) {
      CHECK(leader.line("RESULT ") == expected);
      CHECK_MESSAGE(late.line("RESULT ") == expected, cluster.children.transcript());
      CHECK(exited_cleanly(late));
      for (Child* c : others) CHECK_MESSAGE(exited_cleanly(*c), c->name);
    } else {
      // Without the log a message is gone once one replica of its receiver took it. Both replicas of
      // processes 1 and 2 pull from process 0's only replica, so whichever asks second gets an explicit error
      // (it is never handed another message); the late replica cannot catch up either.
      CHECK_FALSE(late.has("RESULT "));
      CHECK_FALSE(exited_cleanly(late));
      CHECK(std::count_if(others.begin(), others.end(), [](Child* c) { return !exited_cleanly(*c); }) >= 2);
    }
  }
}

TEST_CASE(
    "volpex psrs and remd: 1, 2 and 3 replicas give the sequential result, and so do runs with a replica "
    "killed at a named point") {
  struct app {
    std::string name;
    std::vector<std::string> args, sequential_args;
    replicated_run::crash crash;  // for the run with 2 replicas and one killed
  };
  const std::string keys = phoenix::test::sanitized_build ? "100000" : "300000";
  const std::string steps = phoenix::test::sanitized_build ? "100" : "200";
  const std::vector<app> apps = {{"psrs", {keys, "5"}, {keys, "5"}, {1, 0, "before-put:2"}},
                                 {"remd", {steps, "50", "3"}, {"4", steps, "50", "3"}, {2, 1, "after-get:40"}}};
  for (const auto& a : apps) {
    const auto expected = run_sequential(a.name, a.sequential_args);
    CAPTURE(a.name);
    for (int k = 1; k <= 3; ++k) {
      // Under a sanitizer, 2 replicas only in the run with a kill below: each run there takes 5-10 s.
      if (k == 2 && phoenix::test::sanitized_build) continue;
      CAPTURE(k);
      replicated_run run(a.name, a.args, 4, k);
      const auto results = run.lines_of_zero("RESULT ");
      CHECK_MESSAGE(results == std::vector<std::string>(k, expected), run.cluster.children.transcript());
    }
    replicated_run run(a.name, a.args, 4, 2, {}, {a.crash});
    const auto results = run.lines_of_zero("RESULT ");
    CHECK_MESSAGE(results == std::vector<std::string>(2, expected), run.cluster.children.transcript());
    CHECK(was_killed(*run.replicas[a.crash.process][a.crash.replica]));
    for (const auto& process : run.replicas)
      for (Child* c : process)
        if (c != run.replicas[a.crash.process][a.crash.replica]) CHECK_MESSAGE(exited_cleanly(*c), c->name);
  }
}
