// apps/steal/pool_node.cpp — see pool_node.hpp.
#include "apps/steal/pool_node.hpp"

#include <phoenix/node.hpp>

namespace phoenix::apps {

int run_pool_node(launch::NodeProcess& process, const PoolNodeParts& parts) {
  using namespace std::chrono_literals;
  Node node(process.config());
  if (!launch::connect_node(process, node)) return 1;
  TaskPool pool(node, *parts.app,
                parts.options);  // sets the state handlers: a resumed node gets its state here
  if (!launch::enter_space(process, node, [&] { pool.start(parts.root_task); })) return 1;

  auto hooks = process.run_hooks(node, parts.units);
  // The node with the root's value stays until "done" reaches it: the value is not part of its state.
  hooks.keep_interval = [&] { return pool.result().has_value(); };
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
  if (end == TaskPool::End::suspended) {
    process.report_suspended();
    return 0;  // suspend finalized the node
  }
  if (end == TaskPool::End::left) process.report_left();
  bool checked = true;
  if (end == TaskPool::End::done && pool.result()) {
    const std::string text = parts.describe(*pool.result());
    process.report_result(text);
    if (parts.check) checked = parts.check(process, text);
  }
  if (end != TaskPool::End::left) process.report_finished();
  return node.finalize() || !checked ? 1 : 0;
}

}  // namespace phoenix::apps
