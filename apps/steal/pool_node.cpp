// apps/steal/pool_node.cpp — see pool_node.hpp.
#include "apps/steal/pool_node.hpp"

#include <phoenix/node.hpp>

#include <cstdlib>

namespace phoenix::apps {

int run_pool_node(launch::NodeProcess& process, const PoolNodeParts& parts) {
  using namespace std::chrono_literals;
  Node node(process.config());
  if (auto ec = node.initialize("tcp://127.0.0.1:0")) {
    process.report("ERROR initialize: " + ec.message());
    return 1;
  }
  process.report_port(node.local_port());
  for (const auto& peer : process.peers()) {
    if (auto ec = node.add_port(peer)) {
      process.report("ERROR add_port " + peer + ": " + ec.message());
      return 1;
    }
  }
  TaskPool pool(node, *parts.app, parts.options);
  if (process.first()) {
    if (auto ec = node.assume({0, node.space_size()})) {
      process.report("ERROR assume: " + ec.message());
      return 1;
    }
    pool.start(parts.root_task);
  } else {
    while (!node.assumed().size()) {
      if (process.stop_requested()) {
        // The run ended before this node obtained anything: it holds no state and no message of the run, but its
        // join's query may wait for nodes that have already gone, and finalize would wait for the answer.
        process.report_finished();
        std::_Exit(0);
      }
      const auto ec = node.join(250ms);  // short: a run that ends meanwhile is noticed soon
      if (ec && ec != make_error_code(PH_ETIMEDOUT) && ec != make_error_code(PH_EBUSY)) {
        process.report("ERROR join: " + ec.message());
        return 1;
      }
    }
  }
  const auto mine = node.assumed();
  process.report_joined(mine.front().lo, mine.front().hi);

  bool stop = false;
  TaskPool::Hooks hooks;
  hooks.stop = [&] { return stop; };
  hooks.leave_now = [&] { return process.leave_requested(); };
  hooks.tick = [&] {
    process.report_units(parts.units());
    stop = process.stop_requested();
  };
  const auto end = pool.run(hooks);
  process.report_units(parts.units());
  const auto& st = pool.stats();
  process.report("tasks run " + std::to_string(st.tasks_run) + ", stolen from it " +
                 std::to_string(st.tasks_stolen_from_me) + ", received by stealing " +
                 std::to_string(st.tasks_received) + ", steal requests " + std::to_string(st.steals_sent) +
                 ", state moved out/in " + std::to_string(st.state_moved_out) + "/" +
                 std::to_string(st.state_moved_in));
  if (st.bad_messages) process.report("ERROR " + std::to_string(st.bad_messages) + " bad messages");
  if (parts.errors && parts.errors())
    process.report("ERROR " + std::to_string(parts.errors()) + " malformed tasks");
  if (end == TaskPool::End::left) process.report_left();
  if (end == TaskPool::End::done && pool.result()) process.report_result(parts.describe(*pool.result()));
  if (end != TaskPool::End::left) process.report_finished();
  return node.finalize() ? 1 : 0;
}

}  // namespace phoenix::apps
