// Replicated message passing (phoenix/volpex/communicator.hpp) with every replica a phoenix::Node of this
// process, over loopback TCP: wildcard receives agree across replicas, a receiver switches to the twin of a
// sender replica that goes away without losing or repeating a message, and a replica that falls behind a full
// sender log gets PH_ELOST. The serving threads make this the communicator's test under TSan.
#include <doctest/doctest.h>
#include <phoenix/phoenix.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "phoenix/volpex/client.hpp"
#include "phoenix/volpex/communicator.hpp"
#include "volpex/service_deployment.hpp"

using namespace std::chrono_literals;
using phoenix::Bytes;
using phoenix::Node;
using namespace phoenix::volpex;

namespace {

// One replica of a rank: its node, its dataspace client and its communicator.
struct replica_process {
  client dataspace;
  communicator comm;
  replica_process(Node& n, comm_options o) : dataspace(n, o.rank), comm(n, dataspace, o) {}
};

comm_options options_for(rank_id rank, unsigned ranks, replica_index replica, unsigned replicas) {
  comm_options o;
  o.rank = rank;
  o.ranks = ranks;
  o.replica = replica;
  o.replicas = replicas;
  o.liveness.suspect_after = 500ms;
  o.liveness.give_up_after = 3s;
  return o;
}

struct cluster {
  phoenix::test::service_deployment d;
  std::vector<std::unique_ptr<replica_process>> replicas;
  cluster() {
    dataspace::options o;
    o.log.replicas = 0;  // the read log keeps what the replicas' directory lookups read
    d.serve("dataspace", o);
  }
  replica_process& start(rank_id rank, unsigned ranks, replica_index j, unsigned k) {
    Node& n = d.node("p" + std::to_string(rank) + "r" + std::to_string(j));
    replicas.push_back(std::make_unique<replica_process>(n, options_for(rank, ranks, j, k)));
    REQUIRE_FALSE(replicas.back()->comm.start(20s));
    return *replicas.back();
  }
};

Bytes word(std::uint64_t v, std::size_t size = 8) {
  Bytes b(size);
  std::memcpy(b.data(), &v, 8);
  return b;
}

std::uint64_t word_of(const Bytes& b) {
  std::uint64_t v = 0;
  if (b.size() >= 8) std::memcpy(&v, b.data(), 8);
  return v;
}

std::uint64_t fold(std::uint64_t digest, std::uint64_t v) { return (digest ^ v) * 1099511628211ull; }

}  // namespace

TEST_CASE(
    "volpex communicator: every replica of a rank receives the same messages in the same order, wildcards "
    "included") {
  constexpr unsigned ranks = 3, k = 2;
  constexpr std::uint64_t n = 40;  // messages from each of ranks 1 and 2 to rank 0
  cluster c;
  std::vector<replica_process*> procs;
  for (replica_index j = 0; j < k; ++j)
    for (rank_id r = 0; r < ranks; ++r) procs.push_back(&c.start(r, ranks, j, k));

  // Rank 0 receives from any source with any tag, in whatever order they come, and sends back the sum;
  // ranks 1 and 2 send concurrently, so the order differs from run to run but must not differ between replicas.
  std::vector<std::uint64_t> order(procs.size()), result(procs.size());
  std::vector<std::error_code> errors(procs.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < procs.size(); ++i) {
    threads.emplace_back([&, i] {
      auto& comm = procs[i]->comm;
      const rank_id rank = static_cast<rank_id>(i % ranks);
      std::error_code ec;
      if (rank == 0) {
        std::uint64_t digest = 1469598103934665603ull, sum = 0;
        for (std::uint64_t m = 0; m < 2 * n; ++m) {
          auto got = comm.recv(communicator::any_source, communicator::any_tag, &ec, 20s);
          if (!got) return void(errors[i] = ec);
          digest =
              fold(fold(fold(digest, got->source), static_cast<std::uint64_t>(got->tag)), word_of(got->body));
          sum += word_of(got->body);
        }
        for (rank_id to : {1u, 2u})
          if ((ec = comm.send(to, 0, word(sum)))) return void(errors[i] = ec);
        order[i] = digest;
        result[i] = sum;
      } else {
        for (std::uint64_t m = 0; m < n; ++m)
          if ((ec = comm.send(0, static_cast<std::int32_t>(m % 3), word(1000 * rank + m))))
            return void(errors[i] = ec);
        auto sum = comm.recv(0, 0, &ec, 20s);
        if (!sum) return void(errors[i] = ec);
        result[i] = word_of(sum->body);
      }
      errors[i] = comm.finish(5s);
    });
  }
  for (auto& t : threads) t.join();
  const std::uint64_t expected = n * 1000 + n * 2000 + 2 * (n * (n - 1) / 2);
  for (std::size_t i = 0; i < procs.size(); ++i) {
    CAPTURE(i);
    CHECK_FALSE(errors[i]);
    CHECK(result[i] == expected);
  }
  CHECK(order[0] == order[ranks]);  // the two replicas of rank 0
  for (std::size_t i : {std::size_t{0}, std::size_t{ranks}}) {
    const auto st = procs[i]->comm.statistics();
    CHECK(st.wildcards == 2 * n);
    CHECK(st.received == 2 * n);
  }
}

TEST_CASE(
    "volpex communicator: receivers switch to the twin of a sender replica that goes, losing and "
    "repeating nothing") {
  constexpr std::uint64_t n = 120, cut = 40;
  cluster c;
  auto& sender0 = c.start(0, 2, 0, 2);
  auto& sender1 = c.start(0, 2, 1, 2);
  auto& receiver0 = c.start(1, 2, 0, 2);
  auto& receiver1 = c.start(1, 2, 1, 2);
  Node& sender0_node = *c.d.nodes[1];

  for (auto* s : {&sender0, &sender1})
    for (std::uint64_t m = 0; m < n; ++m) REQUIRE_FALSE(s->comm.send(1, 7, word(m, 256)));

  // Each receiver replica takes `cut` messages from its team mate (replica j of the sender), then waits.
  std::atomic<std::uint64_t> progress{0};
  std::atomic<bool> gone{false};
  std::vector<std::uint64_t> got[2];
  std::error_code errors[2];
  std::vector<std::thread> threads;
  for (int j = 0; j < 2; ++j) {
    threads.emplace_back([&, j] {
      auto& comm = (j == 0 ? receiver0 : receiver1).comm;
      for (std::uint64_t m = 0; m < n; ++m) {
        if (m == cut) {
          ++progress;
          phoenix::test::wait_for([&] { return gone.load(); }, 30s);
        }
        auto msg = comm.recv(0, 7, &errors[j], 20s);
        if (!msg) return;
        got[j].push_back(word_of(msg->body));
      }
    });
  }
  REQUIRE(phoenix::test::wait_for([&] { return progress == 2; }, 20s));
  CHECK(sender0.comm.statistics().served == cut);
  CHECK(sender1.comm.statistics().served == cut);
  // Replica 0 of the sender goes away: its serving thread stops and its node leaves the overlay.
  c.replicas.front().reset();
  sender0_node.finalize();
  gone = true;
  for (auto& t : threads) t.join();
  for (int j = 0; j < 2; ++j) {
    CAPTURE(j);
    REQUIRE_FALSE(errors[j]);
    REQUIRE(got[j].size() == n);
    for (std::uint64_t m = 0; m < n; ++m) REQUIRE(got[j][m] == m);  // in order, each once
  }
  CHECK(receiver0.comm.statistics().dead_detected == 1);
  CHECK(sender1.comm.statistics().served == cut + 2 * (n - cut));  // the rest, to both receivers
  CHECK_FALSE(sender1.comm.finish(5s));
  CHECK_FALSE(receiver0.comm.finish(5s));
  CHECK_FALSE(receiver1.comm.finish(5s));
}

TEST_CASE(
    "volpex communicator: a replica that falls behind a full sender log gets PH_ELOST, never a wrong "
    "message") {
  constexpr std::uint64_t sends = 48;
  constexpr std::size_t size = 4096;
  cluster c;
  // Two replicas of each rank, of which three run: replica 0 of rank 0, with room for 8 messages in its log,
  // and replica 0 of rank 1; replica 1 of rank 1 starts only after the others are done, replica 1 of rank 0
  // never.
  Node& n0 = c.d.node("p0r0");
  auto o0 = options_for(0, 2, 0, 2);
  o0.log_capacity_bytes = 8 * size;
  c.replicas.push_back(std::make_unique<replica_process>(n0, o0));
  auto& p0 = *c.replicas.back();
  REQUIRE_FALSE(p0.comm.start(20s));
  auto& p1 = c.start(1, 2, 0, 2);

  // A ping-pong: rank 0 sends block m once rank 1 acknowledged block m - 1, so the leader keeps up with the
  // log while the replica not started yet falls behind it.
  std::error_code e0, e1;
  std::uint64_t acked = 0, checked = 0;
  std::thread t0([&] {
    for (std::uint64_t m = 0; m < sends; ++m) {
      if ((e0 = p0.comm.send(1, 1, word(m, size)))) return;
      auto ack = p0.comm.recv(1, 2, &e0, 20s);
      if (!ack) return;
      acked += word_of(ack->body) == m;
    }
  });
  std::thread t1([&] {
    for (std::uint64_t m = 0; m < sends; ++m) {
      auto block = p1.comm.recv(0, 1, &e1, 20s);
      if (!block) return;
      checked += word_of(block->body) == m && block->body.size() == size;
      if ((e1 = p1.comm.send(0, 2, word(m)))) return;
    }
  });
  t0.join();
  t1.join();
  REQUIRE_FALSE(e0);
  REQUIRE_FALSE(e1);
  CHECK(acked == sends);
  CHECK(checked == sends);
  const auto log = p0.comm.statistics().log;
  CHECK(log.dropped >= sends - 8);
  CHECK(log.fallen_behind == 1);  // the replica of rank 1 that did not run yet

  auto& late = c.start(1, 2, 1, 2);
  std::error_code ec;
  const auto first = late.comm.recv(0, 1, &ec, 20s);
  CHECK_FALSE(first.has_value());
  CHECK(ec == phoenix::make_error_code(PH_ELOST));
}
