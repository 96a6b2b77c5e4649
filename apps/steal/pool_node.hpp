// apps/steal/pool_node.hpp — the node process of a divide-and-conquer application run by the launcher
// (phoenix/launch/app_cluster.hpp) or started by the shell (phoenix/launch/spawned_node.hpp): makes the node, assumes
// everything, joins or resumes, runs the task pool, leaves or suspends when told.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "phoenix/launch/app_cluster.hpp"
#include "apps/steal/task_pool.hpp"

namespace phoenix::apps {

struct PoolNodeParts {
  Application* app = nullptr;
  Bytes root_task;                                    // started by the first node
  std::function<std::uint64_t()> units;               // progress so far, in the application's unit
  std::function<std::string(const Bytes&)> describe;  // the root's value as the RESULT line's text
  std::function<std::uint64_t()> errors;              // optional: malformed tasks seen (nonzero fails the run)
  // Optional: runs on the node that reported the RESULT line, after it and before FINISHED; false fails the run
  // (it reported why with report_error).
  std::function<bool(launch::NodeProcess&, const std::string& result)> check;
  PoolOptions options;
};

// Returns the process's exit status: 0 after the end of the run, after leaving or suspending, or when stopped.
int run_pool_node(launch::NodeProcess& process, const PoolNodeParts& parts);

}  // namespace phoenix::apps
