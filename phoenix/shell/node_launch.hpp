// phoenix/shell/node_launch.hpp — how phsh starts a node process: where its program is, the environment it
// gets (PHOENIX_* for its phoenix::Node, PHSH_* for the application), its peers as seen from where it runs
// (through an SSH gateway with --via), and the ssh command line that runs it on another host.
//
// Like mpirun, phsh assumes the same paths on every host: the program found here is run by that path there.
// Pure functions, except resolve_app, which looks at the file system.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace phoenix::shell {

// The program to run for `app`: containing a '/', `app` itself made absolute (if it is an executable file);
// otherwise the first executable file of that name in the colon-separated directories of `app_path`
// (PHSH_APP_PATH), then of `path` (PATH). Either may be null. nullopt if there is none.
std::optional<std::string> resolve_app(const std::string& app, const char* app_path, const char* path);

// Where an installed phsh finds phoenix's applications: the directory they are installed to, relative to
// phsh's own (`cmake --install`: bin/phsh, libexec/phoenix/lu, ...), if it exists and only its owner may
// write to it; "" if not (phsh run from the build tree). Searched after PHSH_APP_PATH and before PATH.
std::string installed_apps_dir();

// `endpoint` as a node reaches it through `via` (ssh://[USER@]GATEWAY[:PORT]): tcp://H:P becomes
// ssh://[USER@]GATEWAY[:PORT]/H:P. Other schemes, and any endpoint when `via` is empty, stay as they are.
std::string through_gateway(const std::string& endpoint, const std::string& via);

// `endpoint` with a wildcard host (0.0.0.0 or [::]) replaced by `host` (without any USER@).
std::string with_host(const std::string& endpoint, const std::string& host);

// Where a node listens: tcp://127.0.0.1:PORT on this host, tcp://0.0.0.0:PORT on another; PORT 0 is any.
std::string listen_endpoint(bool remote, int port);

// What the node process is told; see docs of PHSH_ROLE in the application launcher.
struct NodeEnvironment {
  std::string name;                // PHOENIX_NAME
  std::string listen;              // PHOENIX_LISTEN
  std::vector<std::string> peers;  // PHOENIX_PEERS (already as the node reaches them)
  std::string key_file;            // PHOENIX_CLUSTER_KEY_FILE
  std::string control_key_file;    // PHOENIX_CONTROL_KEY_FILE: the shell's public controller key (if any)
  std::uint64_t space_size = 0;    // PHOENIX_SPACE_SIZE
  std::string role;                // PHSH_ROLE: first, join or resume
  std::string resume_file;         // PHSH_RESUME_FILE (role resume)
  std::vector<std::string> extra;  // NAME=value the application reads besides (VOLPEX_* for a replica)
};

// The host of a node or replica from spawn's --host list (HOST,HOST,...; "" for this host): plain nodes take the
// hosts in turn; replica r of process p takes hosts[(p * replicas + r) mod n], so the replicas of a process are
// on different hosts whenever there are at least `replicas` of them (a host lost takes one replica of each
// process it holds, not a whole process). replicas 0: a plain node, number `process`.
std::string placement_host(const std::string& hosts, int process, int replica, int replicas);

// NAME=value entries, in a fixed order.
std::vector<std::string> node_environment(const NodeEnvironment& e);

// The argv running `command` (program and arguments) with `environment` on `host` through `ssh_command`
// (already split into words): ssh_command... HOST 'cd WORKDIR 2>/dev/null; mkdir -p DIR && exec env
// VAR=value... PROGRAM ARGS...', every word quoted for the remote shell. Like mpirun, the program starts in
// phsh's working directory where the host has it (relative file arguments then work on shared file systems),
// else in the home directory. An empty `workdir` or `remote_dir` leaves that part out.
std::vector<std::string> ssh_argv(const std::vector<std::string>& ssh_command, const std::string& host,
                                  const std::string& workdir, const std::string& remote_dir,
                                  const std::vector<std::string>& environment,
                                  const std::vector<std::string>& command);

}  // namespace phoenix::shell
