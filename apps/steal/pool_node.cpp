// apps/steal/pool_node.cpp — see pool_node.hpp.
#include "apps/steal/pool_node.hpp"

#include <phoenix/node.hpp>

namespace phoenix::apps {

int run_pool_node(launch::NodeProcess& process, const PoolNodeParts& parts) {
  using namespace std::chrono_literals;
  Node node(process.config());
  if (!launch::connect_node(process, node)) return 1;
  TaskPool pool(node, *parts.app, parts.options);
  if (process.first()) {
    if (auto ec = node.assume({0, node.space_size()})) {
      process.report_error("assume: " + ec.message());
      return 1;
    }
    process.report_joined(0, node.space_size());
    pool.start(parts.root_task);
  } else if (!launch::join_run(process, node)) {
    return 1;
  }

  const auto hooks = process.run_hooks(parts.units);
  const auto end = pool.run(hooks);
  process.report_units(parts.units());
  const auto& st = pool.stats();
  process.report("tasks run " + std::to_string(st.tasks_run) + ", stolen from it " +
                 std::to_string(st.tasks_stolen_from_me) + ", received by stealing " +
                 std::to_string(st.tasks_received) + ", steal requests " + std::to_string(st.steals_sent) +
                 ", state moved out/in " + std::to_string(st.state_moved_out) + "/" +
                 std::to_string(st.state_moved_in));
  if (st.bad_messages) process.report_error(std::to_string(st.bad_messages) + " bad messages");
  if (parts.errors && parts.errors()) process.report_error(std::to_string(parts.errors()) + " malformed tasks");
  if (end == TaskPool::End::left) process.report_left();
  if (end == TaskPool::End::done && pool.result()) process.report_result(parts.describe(*pool.result()));
  if (end != TaskPool::End::left) process.report_finished();
  return node.finalize() ? 1 : 0;
}

}  // namespace phoenix::apps
