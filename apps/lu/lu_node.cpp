// apps/lu/lu_node.cpp — the node process of an LU run under the launcher (lu.hpp,
// phoenix/launch/app_cluster.hpp) or started by the shell (phoenix/launch/spawned_node.hpp): makes the node,
// assumes everything (the first node, which creates every block), joins or resumes, handles messages until the
// run is over, and leaves when told, its blocks going to a neighbour with their state, or suspends when told,
// its blocks going to a file.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <phoenix/node.hpp>

#include "phoenix/launch/process_memory.hpp"
#include "phoenix/launch/run_control.hpp"
#include "apps/lu/block_memory.hpp"
#include "apps/lu/factorization.hpp"
#include "apps/lu/log.hpp"
#include "apps/lu/lu.hpp"

namespace phoenix::apps::lu {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto idle_wait = 5ms;  // blocking receive when nothing is queued
// try_recv returns a queued message without running migration steps, and a busy node always has messages
// queued (its blocks send to each other): poll now and then, so that a join or leave is not held up.
constexpr auto poll_interval = 2ms;
constexpr int max_messages_per_turn = 64;  // then the node's own ready records, and a poll
// A leave is tried for a while, then messages are handled before the next try: near the end the neighbours may
// already have stopped, and the "done" that ends this node's run too is waiting in its queue. (A transfer still
// under way when a try times out goes on, and the next try sees it end.)
constexpr auto leave_attempt = 2s;
constexpr auto leave_retry_interval = 200ms;

using End = launch::RunEnd;

// Handles messages until the run is over, the launcher stops it, or the node has left or suspended.
End run(Node& node, Factorization& lu, launch::NodeProcess& process) {
  auto hooks = process.run_hooks(node, [&] { return lu.stats().flops; });
  // The node with the result stays: "done" is on its way to it; so does the first node until the run begins
  // (the nodes of the start announce themselves to it).
  hooks.keep_interval = [&] { return lu.result().has_value() || lu.waiting(); };
  launch::RunControl control(node, hooks, leave_attempt, leave_retry_interval, lu_log());
  auto last_poll = Clock::now();
  const auto patience = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(lu.problem().begin_patience_s));
  const auto begin_by = last_poll + patience;
  bool reported = false;
  for (;;) {
    if (lu.result() && !reported) {
      process.report_result(describe(*lu.result()));
      reported = true;
    }
    if (lu.done()) return End::done;
    if (control.stop()) return End::stopped;
    const auto now = Clock::now();
    if (lu.waiting() && now >= begin_by) {
      lu_log()->warn("not every node of the start joined within {} s: the run begins without them",
                     lu.problem().begin_patience_s);
      lu.begin();
    }
    if (const auto end = control.tick_and_leave(now)) return *end;
    if (now - last_poll >= poll_interval) {
      node.poll();
      last_poll = now;
    }
    // Messages first (other processes' blocks, multicasts to forward, wait on them), then this node's own.
    int handled = 0;
    while (handled < max_messages_per_turn) {
      auto m = node.try_recv(any_tag);
      if (!m) break;
      lu.handle(*m);
      ++handled;
    }
    if (handled == 0 && !lu.has_ready()) {
      if (auto m = node.recv_for(any_tag, idle_wait)) lu.handle(*m);
    }
    lu.run_ready(poll_interval);
  }
}

void report_stats(launch::NodeProcess& process, const LuStats& st) {
  process.report_units(st.flops);
  process.report("blocks finished here " + std::to_string(st.blocks_finished) + ", state moved out/in " +
                 std::to_string(st.records_moved_out) + "/" + std::to_string(st.records_moved_in) + " blocks");
  if (st.bad_messages) process.report_error(std::to_string(st.bad_messages) + " bad messages");
  if (st.send_errors) process.report_error(std::to_string(st.send_errors) + " failed sends");
}

}  // namespace

int run_node(launch::NodeProcess& process, const Problem& problem) {
  use_one_blas_thread();
  launch::keep_freed_memory();  // messages of whole blocks come and go at every step
  Node node(process.config());
  if (!launch::connect_node(process, node)) return 1;
  const auto layout = Layout::make(problem.n, problem.block, node.space_size());
  if (!layout) {
    process.report_error(validate(problem, node.space_size()));
    return 1;
  }
  Factorization lu(node, problem, *layout);  // sets the state handlers: a resumed node gets its blocks here
  // The first node holds every block at first: their memory is mapped before it starts the clock, as dgetrf's
  // and pdgetrf's matrices are before theirs. Besides the N² values: the panels, factored blocks and rows in
  // flight, which peaked at 5·N·nb values on 1 process at N = 4096, nb = 512, and the leftovers of the pool's
  // size classes (10·N·nb mapped then): 12·N·nb.
  // It begins the run once the other nodes of the start have joined and taken their records (none of which
  // has data yet), so that the clock measures the factorisation on all of them, not the joins.
  const auto start = [&] {
    block_memory_reserve(std::size_t{problem.n} * (problem.n + 12 * problem.block) * sizeof(double));
    lu.start(std::max(1u, problem.initial_nodes) - 1);
  };
  // A node that joins takes half of one node's blocks, about half of an even share of the matrix: it maps and
  // touches that much, and half the first node's allowance for data in flight, before it asks, so that the
  // blocks it takes or generates cost no page fault while the run goes on. The launcher's nodes know every
  // node present; one started by the shell knows only its contacts, and reserves nothing.
  if (process.role() == launch::NodeProcess::Role::join && !process.peers_in_config()) {
    const std::size_t present = std::max<std::size_t>(1, process.peers().size());
    const std::size_t values = std::size_t{problem.n} * (problem.n / (2 * present) + 6 * problem.block);
    block_memory_reserve(values * sizeof(double));
  }
  if (!launch::enter_space(process, node, start)) return 1;
  const bool of_the_start = process.role() == launch::NodeProcess::Role::join && !process.peers_in_config() &&
                            static_cast<std::uint32_t>(process.index()) < problem.initial_nodes;
  if (of_the_start) lu.announce_present();

  const End end = run(node, lu, process);
  report_stats(process, lu.stats());
  if (end == End::suspended) {
    process.report_suspended();
    return 0;  // suspend finalized the node
  }
  if (end == End::left)
    process.report_left();
  else
    process.report_finished();
  return node.finalize() ? 1 : 0;
}

}  // namespace phoenix::apps::lu
