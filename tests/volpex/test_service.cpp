// The dataspace served by phoenix nodes, called by replicated processes, all in one process over loopback TCP:
// replicas of a process see identical answers, a late replica catches up from the read log, the dataspace
// moves with a serving node that leaves, and without the replica rules the same run goes wrong.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "phoenix/volpex/client.hpp"
#include "phoenix/volpex/tag_server.hpp"
#include "volpex/service_deployment.hpp"

using namespace std::chrono_literals;
using phoenix::Bytes;
using phoenix::Node;
using namespace phoenix::volpex;

namespace {

constexpr int rounds = 40;

Bytes number(std::uint64_t v) {
  Bytes b(8);
  std::memcpy(b.data(), &v, 8);
  return b;
}

std::uint64_t number_of(const Bytes& b) {
  std::uint64_t v = 0;
  REQUIRE(b.size() == 8);
  std::memcpy(&v, b.data(), 8);
  return v;
}

// The program every replica runs, deterministic. Process 0 puts x_i and gets y_i back; process 1 gets x_i,
// puts y_i = 3 x_i + 1, and reads a shared counter that process 0 overwrites each round. The digest folds in
// every answer, in order: replicas of a process must end with the same one.
std::uint64_t run_process(client& c, std::chrono::milliseconds timeout, std::atomic<int>* progress = nullptr) {
  std::uint64_t digest = 1469598103934665603ull;
  const auto fold = [&](std::uint64_t v) { digest = (digest ^ v) * 1099511628211ull; };
  std::error_code ec;
  for (int i = 0; i < rounds; ++i) {
    const auto x = "x" + std::to_string(i), y = "y" + std::to_string(i);
    if (c.process() == 0) {
      if (c.put(x, number(1000 + i), timeout)) return 0;
      if (c.put("round", number(i), timeout)) return 0;
      auto v = c.get(y, &ec, timeout);
      if (!v) return 0;
      fold(number_of(*v));
    } else {
      auto v = c.get(x, &ec, timeout);
      if (!v) return 0;
      fold(number_of(*v));
      if (c.put(y, number(3 * number_of(*v) + 1), timeout)) return 0;
      auto r = c.read("round", &ec, timeout);
      if (!r) return 0;
      // Process 0 is somewhere between putting round i - 1 and round i + 1; the exact value depends on timing.
      const auto round = static_cast<std::int64_t>(number_of(*r));
      fold(round >= i - 1 && round <= i + 1 ? 1 : 2);
    }
    if (progress) ++*progress;
  }
  return digest;
}

std::uint64_t reference_digest(process_id p) {
  std::uint64_t digest = 1469598103934665603ull;
  const auto fold = [&](std::uint64_t v) { digest = (digest ^ v) * 1099511628211ull; };
  for (int i = 0; i < rounds; ++i) {
    if (p == 0) {
      fold(3 * (1000 + static_cast<std::uint64_t>(i)) + 1);
    } else {
      fold(1000 + static_cast<std::uint64_t>(i));
      fold(1);
    }
  }
  return digest;
}

using deployment = phoenix::test::service_deployment;

dataspace::options options(unsigned replicas, bool rules = true) {
  dataspace::options o;
  o.log.capacity = 16;  // small, so the run spills
  o.log.replicas = replicas;
  o.replica_rules = rules;
  return o;
}

// k replicas of each of two processes through two serving nodes: the checks that fail, as text (none when
// the replicated run is indistinguishable from an unreplicated one).
std::vector<std::string> replicated_run(unsigned k, bool rules, std::chrono::milliseconds timeout) {
  deployment d;
  tag_server& s1 = d.serve("s1", options(k, rules));
  tag_server& s2 = d.serve("s2", options(k, rules));
  std::vector<std::uint64_t> digests(2 * k);
  std::vector<std::unique_ptr<client>> clients;
  for (unsigned i = 0; i < 2 * k; ++i)
    clients.push_back(
        std::make_unique<client>(d.node("p" + std::to_string(i % 2) + "r" + std::to_string(i / 2)), i % 2));
  std::vector<std::thread> replicas;
  for (unsigned i = 0; i < 2 * k; ++i)
    replicas.emplace_back([&, i] { digests[i] = run_process(*clients[i], timeout); });
  for (auto& t : replicas) t.join();
  std::vector<std::string> failed;
  for (unsigned i = 0; i < 2 * k; ++i)
    if (digests[i] != reference_digest(i % 2)) failed.push_back("digest of replica " + std::to_string(i));
  const auto a = s1.statistics(), b = s2.statistics();
  // Exactly one accepted put per logical put (3 per round), every other instance ignored; one delivery per
  // logical get or read (3 per round), every other instance answered from the log.
  if (a.puts + b.puts != 3u * rounds) failed.push_back("accepted puts");
  if (a.replica_puts + b.replica_puts != 3u * rounds * (k - 1)) failed.push_back("ignored puts");
  if (a.delivered + b.delivered != 3u * rounds) failed.push_back("deliveries");
  if (a.from_log + b.from_log != 3u * rounds * (k - 1)) failed.push_back("answers from the log");
  if (a.lost + b.lost != 0) failed.push_back("lost");
  if (a.puts == 0 || b.puts == 0) failed.push_back("both halves of the space served");
  return failed;
}

}  // namespace

TEST_CASE("volpex service: 1, 2 and 3 replicas of two processes all end as the unreplicated run") {
  for (unsigned k : {1u, 2u, 3u}) {
    CAPTURE(k);
    const auto failed = replicated_run(k, true, 20s);
    CHECK_MESSAGE(failed.empty(),
                  failed.size() << " checks failed, the first: " << (failed.empty() ? "" : failed.front()));
  }
}

TEST_CASE("volpex service: a replica started after its leader finished catches up from the read log") {
  deployment d;
  tag_server& s = d.serve("s", options(2));
  client p0(d.node("p0r0"), 0), p1(d.node("p1r0"), 1);
  std::uint64_t digest0 = 0, digest1 = 0;
  std::thread t0([&] { digest0 = run_process(p0, 20s); });
  std::thread t1([&] { digest1 = run_process(p1, 20s); });
  t0.join();
  t1.join();
  REQUIRE(digest0 == reference_digest(0));
  REQUIRE(digest1 == reference_digest(1));
  // Process 1's second replica starts only now: every answer comes from the log, though x_i were all taken
  // and "round" was overwritten 40 times since.
  client late(d.node("p1r1"), 1);
  CHECK(run_process(late, 20s) == reference_digest(1));
  CHECK(late.led() == 0);
  CHECK(late.followed() == 3u * rounds);
  const auto st = s.statistics();
  CHECK(st.log.spills > 0);  // 16 entries in memory: most of what the late replica read came from disk
  CHECK(st.log.read_back > 0);
  CHECK(st.log.forgotten == 2u * rounds);  // process 1's entries, now both replicas have them
}

TEST_CASE("volpex service: the dataspace moves with a serving node that leaves mid-run") {
  deployment d;
  tag_server& s1 = d.serve("s1", options(2));
  d.serve("s2", options(2));
  std::vector<std::unique_ptr<client>> clients;
  for (unsigned i = 0; i < 4; ++i)
    clients.push_back(std::make_unique<client>(d.node("c" + std::to_string(i)), i % 2));
  std::vector<std::uint64_t> digests(4);
  std::atomic<int> progress{0};
  std::vector<std::thread> replicas;
  for (unsigned i = 0; i < 4; ++i)
    replicas.emplace_back([&, i] { digests[i] = run_process(*clients[i], 20s, &progress); });
  REQUIRE(phoenix::test::wait_for([&] { return progress >= rounds; }, 20s));  // a quarter of the way
  d.stop_serving(1);
  CHECK(d.servers[1]->statistics().puts > 0);  // it served its half
  Node& leaver = *d.nodes[1];
  REQUIRE_FALSE(leaver.leave(10s));  // its objects, waiting calls, log and queued requests go to s1
  CHECK(leaver.assumed().empty());
  const auto left = d.servers[1]->statistics();
  CHECK(left.objects + left.waiting + left.log.in_memory + left.log.spilled == 0);
  for (auto& t : replicas) t.join();
  for (unsigned i = 0; i < 4; ++i) CHECK(digests[i] == reference_digest(i % 2));
  const auto st = s1.statistics();
  CHECK(st.lost == 0);
  CHECK(st.objects + st.waiting < 8);  // nothing stranded beyond the last round's leftovers
}

TEST_CASE("volpex service: without the replica rules the same checks fail") {
  // Short timeouts: a replica whose object another replica took may wait for ever.
  const auto failed = replicated_run(2, false, 2s);
  CHECK(std::find(failed.begin(), failed.end(), "accepted puts") != failed.end());
  CHECK(std::find(failed.begin(), failed.end(), "answers from the log") != failed.end());
}
