// phoenix/launch/spawned_node.hpp — an application's node process started by the shell phsh instead of the
// launcher: one node, in this process, whose configuration and role come from the environment.
//
// The spawn protocol. phsh runs the application with the arguments a user gives it and with:
//   PHOENIX_NAME, PHOENIX_LISTEN, PHOENIX_PEERS, PHOENIX_CLUSTER_KEY_FILE, PHOENIX_SPACE_SIZE, ...
//                        the node's configuration (phoenix::config_from_environment; the node links to the
//                        peers itself when it initializes)
//   PHSH_ROLE            first: assume all of [0, L) and start the computation; join: obtain an interval with
//                        ph_join; resume: take back what a suspended incarnation wrote to PHSH_RESUME_FILE (its
//                        undelivered messages, its intervals and their state) instead of joining
//   PHSH_RESUME_FILE     with PHSH_ROLE=resume
// stdin is the control pipe: its end of file means "stop now". stdout carries the launcher's report lines
// (PORT, JOINED, UNITS, LEFT, FINISHED, RESULT, ERROR, remarks "NAME: text") and SUSPENDED <file>; nothing else
// is written there. Leave and suspend requests arrive over the overlay (Node::take_control_request, taken by
// the run hooks' tick). The exit status is 0 after LEFT, SUSPENDED or FINISHED; 2 when the environment is wrong
// (one ERROR line says why).
#pragma once

#include "phoenix/launch/app_cluster.hpp"

namespace phoenix::launch {

// True when PHSH_ROLE is set: the process was started by phsh and runs one node (run_spawned_node).
bool spawned_by_shell();

// Runs `body` as the node of a process started by phsh (see above) and returns the process's exit status. An
// exception from the body is reported as an ERROR line (status 1).
int run_spawned_node(const NodeBody& body);

}  // namespace phoenix::launch
