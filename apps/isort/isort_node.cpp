// apps/isort/isort_node.cpp — the node process of a parallel integer sort under the launcher (isort.hpp) or
// started by the shell (phoenix/launch/spawned_node.hpp).
#include <phoenix/node.hpp>

#include "phoenix/launch/process_memory.hpp"
#include "apps/isort/isort.hpp"

namespace phoenix::apps::isort {
namespace {

std::string stats_line(const SortStats& st) {
  return "keys ranked " + std::to_string(st.keys_ranked) + ", key iterations " +
         std::to_string(st.key_iterations) + ", keys handed/sent " + std::to_string(st.keys_handed) + "/" +
         std::to_string(st.keys_sent) + ", state moved out/in: keys " + std::to_string(st.keys_moved_out) +
         "/" + std::to_string(st.keys_moved_in) + ", buckets " + std::to_string(st.buckets_moved_out) + "/" +
         std::to_string(st.buckets_moved_in);
}

}  // namespace

int run_node(launch::NodeProcess& process, const NpbClass& c, const SortOptions& options,
             const std::function<void(const SortStats&)>& on_end) {
  // Bucket records grow their key buffers every iteration and free them when it is over: without keeping
  // freed memory, twice the page faults and a third more time on one process.
  launch::keep_freed_memory();
  Node node(process.config());
  if (!launch::connect_node(process, node)) return 1;
  if (node.space_size() < c.keys) {
    process.report_error("the virtual node space is smaller than the number of keys");
    return 1;
  }
  Sorter sorter(node, c, options);  // sets the state handlers: a resumed node gets its keys and buckets here
  if (process.first()) sorter.start();  // every key and bucket, on the node about to assume [0, L)
  if (!launch::enter_space(process, node)) return 1;

  auto hooks = process.run_hooks(node, [&] { return sorter.stats().keys_ranked; });
  // The node whose collector has the result does not suspend: it reports the result at the end of its run, and
  // its next incarnation would report it again.
  const auto suspend_to = hooks.suspend_to;
  hooks.suspend_to = [&]() -> std::optional<std::string> {
    if (sorter.result()) return std::nullopt;
    return suspend_to();
  };
  const auto end = sorter.run(hooks);
  const SortStats& st = sorter.stats();
  process.report_units(st.keys_ranked);
  process.report(stats_line(st));
  if (st.bad_messages) process.report_error(std::to_string(st.bad_messages) + " bad messages");
  if (st.send_errors) process.report_error(std::to_string(st.send_errors) + " failed sends");
  if (sorter.result()) process.report_result(describe(*sorter.result()));
  if (on_end) on_end(st);
  const bool clean = st.bad_messages == 0 && st.send_errors == 0;
  if (end == Sorter::End::suspended) {
    process.report_suspended();
    return clean ? 0 : 1;  // suspend finalized the node
  }
  if (end == Sorter::End::left) process.report_left();
  if (end != Sorter::End::left) process.report_finished();
  return node.finalize() || !clean ? 1 : 0;
}

}  // namespace phoenix::apps::isort
