// phoenix/launch/spawned_node.cpp — see spawned_node.hpp.
#include "phoenix/launch/spawned_node.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <phoenix/config.hpp>
#include <string>

namespace phoenix::launch {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// An ERROR line before there is a NodeProcess (the configuration is wrong); best effort.
void early_error(const std::string& what) {
  std::string name = env("PHOENIX_NAME");
  if (name.empty()) name = default_node_name();
  try {
    report_line(STDOUT_FILENO, "ERROR " + name + ": " + what);
  } catch (...) {
  }
}

}  // namespace

bool spawned_by_shell() { return std::getenv("PHSH_ROLE") != nullptr; }

int run_spawned_node(const NodeBody& body) {
  // A write to a closed stdout (phsh went away) is an error to report, not a reason to die; stdin's end of
  // file then stops the run.
  ::signal(SIGPIPE, SIG_IGN);
  const std::string role_text = env("PHSH_ROLE");
  NodeProcess::Role role;
  if (role_text == "first") {
    role = NodeProcess::Role::first;
  } else if (role_text == "join") {
    role = NodeProcess::Role::join;
  } else if (role_text == "resume") {
    role = NodeProcess::Role::resume;
  } else {
    early_error("PHSH_ROLE=" + role_text + ": expected first, join or resume");
    return 2;
  }
  const std::string resume_file = env("PHSH_RESUME_FILE");
  if (role == NodeProcess::Role::resume && resume_file.empty()) {
    early_error("PHSH_ROLE=resume needs PHSH_RESUME_FILE (the file of the suspended node)");
    return 2;
  }
  auto loaded = config_from_environment();
  if (!loaded.ok()) {
    early_error(loaded.error);
    return 2;
  }
  Config config = std::move(loaded.config);
  // The application decides what the node assumes (everything, a joined interval, or what the file restores):
  // a share from the environment would be assumed without its state.
  config.assume.clear();
  config.share.reset();
  NodeProcess process(ChildPipes{STDIN_FILENO, STDOUT_FILENO}, std::move(config), role, resume_file);
  int status = 1;
  try {
    status = body(process);
  } catch (const std::exception& e) {
    try {
      process.report_error(e.what());
    } catch (...) {
    }
  }
  std::fflush(nullptr);
  return status;
}

}  // namespace phoenix::launch
