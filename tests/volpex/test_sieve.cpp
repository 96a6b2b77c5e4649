// The Sieve of Eratosthenes (apps/volpex/sieve.c) as separate replica processes beside a volpex_server node:
// with 1, 2 and 3 replicas per process every replica of process 0 prints the sequential result; replicas killed
// at named points of the protocol leave the result unchanged; a replica started after its leader finished
// catches up from the read log, and without the replica rules it cannot; the server accepts exactly one put per
// logical put, whatever the number of replicas.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "volpex/volpex_cluster.hpp"

namespace {

using namespace std::chrono_literals;
using phoenix::test::Child;
using phoenix::test::volpex_cluster;

constexpr int sieve_processes = 3;
constexpr int block = 10;
const std::string limit = "2000000";
constexpr auto sieve_timeout = 180s;  // the ASan build is several times slower

std::string run_sequential() { return phoenix::test::run_sequential("sieve", {limit}); }

// How many puts the program makes as one process: the base primes up to sqrt(limit) in blocks, an empty block
// that ends them, and one result per process.
int logical_puts() {
  const int root = 1414;  // isqrt(2,000,000)
  std::vector<bool> composite(root + 1);
  int primes = 0;
  for (int i = 2; i <= root; ++i) {
    if (composite[i]) continue;
    ++primes;
    for (int m = i * i; m <= root; m += i) composite[m] = true;
  }
  return (primes + block - 1) / block + 1 + sieve_processes;
}

struct put_counts {
  int accepted = -1, ignored = -1;
};

put_counts server_puts(const Child& server) {
  // Its final remark: "s1: puts N (+M replicas'), delivered ..."
  const std::regex statistics(R"(: puts (\d+) \(\+(\d+) replicas)");
  for (const auto& line : server.lines) {
    std::smatch m;
    if (std::regex_search(line, m, statistics)) return {std::stoi(m[1]), std::stoi(m[2])};
  }
  FAIL("the server printed no statistics");
  return {};
}

std::vector<std::string> args() { return {limit, std::to_string(block)}; }

// Waits for every child in `replicas` to exit; returns the RESULT lines of those that printed one.
std::vector<std::string> results(volpex_cluster& run, const std::vector<Child*>& replicas) {
  std::vector<std::string> out;
  for (Child* c : replicas) {
    REQUIRE_MESSAGE(run.children.wait_exit(*c, sieve_timeout), c->name << " did not finish\n"
                                                                       << run.children.transcript());
    if (auto r = c->line("RESULT ")) out.push_back(*r);
  }
  return out;
}

}  // namespace

TEST_CASE("volpex sieve: 1, 2 and 3 replicas per process print the sequential result, one put accepted each") {
  const std::string expected = run_sequential();
  for (int k = 1; k <= 3; ++k) {
    CAPTURE(k);
    volpex_cluster run;
    Child& server = run.server("s1", {"--replicas", std::to_string(k)});
    std::vector<Child*> zero, all;
    for (int p = 0; p < sieve_processes; ++p) {
      for (int r = 0; r < k; ++r) {
        Child& c = run.replica(volpex_cluster::program("sieve"), args(), p, sieve_processes, r);
        all.push_back(&c);
        if (p == 0) zero.push_back(&c);
      }
    }
    const auto lines = results(run, all);
    CHECK_MESSAGE(lines.size() == static_cast<std::size_t>(k), run.children.transcript());
    for (const auto& l : lines) CHECK(l == expected);
    for (Child* c : all) CHECK_MESSAGE((WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0), c->name);
    run.stop_servers();
    const auto puts = server_puts(server);
    CHECK(puts.accepted == logical_puts());
    CHECK(puts.ignored == (k - 1) * logical_puts());
  }
}

TEST_CASE("volpex sieve: replicas killed before a put, after a get or a read was sent, the others finish alike") {
  const std::string expected = run_sequential();
  // Process 0's replica 0 dies before its 4th put (a block of base primes); process 1's replica 1 after sending
  // its 3rd read (the server delivers it and logs it for a replica that will never ask again); process 0's
  // replica 1 after sending its 2nd get (a result), so process 0's third replica finishes alone.
  const std::vector<std::pair<std::pair<int, int>, std::string>> crashes = {
      {{0, 0}, "before-put:4"}, {{1, 1}, "after-read:3"}, {{0, 1}, "after-get:2"}};
  volpex_cluster run;
  Child& server = run.server("s1", {"--replicas", "3"});
  std::vector<Child*> all, crashed;
  for (int p = 0; p < sieve_processes; ++p) {
    for (int r = 0; r < 3; ++r) {
      std::vector<std::string> env;
      for (const auto& [who, point] : crashes)
        if (who == std::make_pair(p, r)) env.push_back("VOLPEX_CRASH_AT=" + point);
      Child& c = run.replica(volpex_cluster::program("sieve"), args(), p, sieve_processes, r, env);
      all.push_back(&c);
      if (!env.empty()) crashed.push_back(&c);
    }
  }
  const auto lines = results(run, all);
  REQUIRE_MESSAGE(lines.size() == 1, run.children.transcript());  // process 0's one surviving replica
  CHECK(lines.front() == expected);
  for (Child* c : all) {
    const bool should_crash = std::find(crashed.begin(), crashed.end(), c) != crashed.end();
    CAPTURE(c->name);
    if (should_crash) {
      CHECK((WIFSIGNALED(c->status) && WTERMSIG(c->status) == SIGKILL));
    } else {
      CHECK((WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0));
    }
  }
  run.stop_servers();
  CHECK(server_puts(server).accepted == logical_puts());
}

TEST_CASE("volpex sieve: a replica started after its leader finished catches up from the read log") {
  const std::string expected = run_sequential();
  for (const bool rules : {true, false}) {
    CAPTURE(rules);
    volpex_cluster run;
    std::vector<std::string> server_args{"--replicas", "2"};
    if (!rules) server_args.push_back("--no-replica-rules");
    run.server("s1", server_args);
    // One replica of each process, then a second replica of process 0 once the first has finished. (With a
    // second replica of the others too, the second put of a result could refill the table in time for the late
    // get without the rules: the run would show nothing.)
    std::vector<Child*> first;
    for (int p = 0; p < sieve_processes; ++p)
      first.push_back(&run.replica(volpex_cluster::program("sieve"), args(), p, sieve_processes, 0));
    const auto lines = results(run, first);
    REQUIRE_MESSAGE(lines.size() == 1, run.children.transcript());
    REQUIRE(lines.front() == expected);
    // Every object process 0 got is gone from the table now; only the read log still holds them.
    Child& late = run.replica(volpex_cluster::program("sieve"), args(), 0, sieve_processes, 1);
    if (rules) {
      const auto late_lines = results(run, {&late});
      CHECK_MESSAGE(late_lines == std::vector<std::string>{expected}, run.children.transcript());
    } else {
      // Without identical gets the late replica's first get of a result waits for a put that never comes.
      CHECK_FALSE(run.children.wait_exit(late, 10s));
      CHECK_FALSE(late.has("RESULT "));
    }
  }
}
