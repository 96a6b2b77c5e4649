// A Volpex computation as separate processes on 127.0.0.1: volpex_server nodes that serve the dataspace
// (started with the shell's spawn protocol, phoenix/launch/spawned_node.hpp) and the replicas of each application
// process, configured through the environment as phoenix/volpex.h describes. Every process is ended by PID at
// the end.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "support/children.hpp"
#include "support/sanitizer.hpp"
#include "support/temp_dir.hpp"

namespace phoenix::test {

class volpex_cluster {
 public:
  static std::string program(const std::string& name) {
    return std::string(PHOENIX_BINARY_DIR) + "/apps/volpex/" + name;
  }

  // The first serving node assumes all of [0, L); later ones join (and take half an interval with its tags).
  Child& server(const std::string& name, const std::vector<std::string>& args = {}) {
    const std::string exe = program("volpex_server");
    REQUIRE_MESSAGE(::access(exe.c_str(), X_OK) == 0, exe << " is not built");
    auto env = node_env(name);
    env.push_back(std::string("PHSH_ROLE=") + (servers_.empty() ? "first" : "join"));
    if (!servers_.empty()) env.push_back("PHOENIX_PEERS=" + peers_);
    Child& c = children.spawn(name, exe, args, env, dir / (name + ".log"));
    const auto port = children.wait_line(c, "PORT ", std::chrono::seconds(30));
    REQUIRE_MESSAGE(port, "no PORT line from " << name << "\n" << children.transcript());
    if (peers_.empty()) peers_ = port->substr(5);
    REQUIRE_MESSAGE(children.wait_line(c, "JOINED ", std::chrono::seconds(30)), name << " did not join\n"
                                                                                     << children.transcript());
    servers_.push_back(&c);
    return c;
  }

  // Replica `replica` of process `process` (of `processes`), running `exe args`, linked to the first server.
  // It runs as the shell starts replicas, so it prints "REPLICA p r" once registered in the directory.
  Child& replica(const std::string& exe, const std::vector<std::string>& args, int process, int processes,
                 int replica, const std::vector<std::string>& extra_env = {}) {
    REQUIRE_MESSAGE(::access(exe.c_str(), X_OK) == 0, exe << " is not built");
    REQUIRE_FALSE(peers_.empty());
    const std::string name = "p" + std::to_string(process) + "r" + std::to_string(replica);
    auto env = node_env(name);
    env.push_back("PHOENIX_PEERS=" + peers_);
    env.push_back("VOLPEX_PROC_ID=" + std::to_string(process));
    env.push_back("VOLPEX_NUM_PROCS=" + std::to_string(processes));
    env.push_back("VOLPEX_REPLICA=" + std::to_string(replica));
    env.push_back("PHSH_ROLE=replica");
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    return children.spawn(name, exe, args, env, dir / (name + ".log"));
  }

  // Waits until `c` registered in the directory (it printed its REPLICA line).
  void wait_registered(Child& c, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    REQUIRE_MESSAGE(children.wait_line(c, "REPLICA ", timeout), c.name << " did not register\n"
                                                                       << children.transcript());
  }

  // Closes every server's stop line and waits for its final report (the statistics line "puts ...").
  void stop_servers(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    for (Child* s : servers_) {
      if (s->control_fd >= 0) {
        ::close(s->control_fd);
        s->control_fd = -1;
      }
    }
    for (Child* s : servers_) children.wait_exit(*s, timeout);
  }

  temp_dir dir;
  Children children;

 private:
  std::vector<std::string> node_env(const std::string& name) {
    return {"PHOENIX_NAME=" + name, "PHOENIX_LISTEN=tcp://127.0.0.1:0", "PHOENIX_CLUSTER_KEY_FILE=" + key_,
            "PHOENIX_SPACE_SIZE=" + std::to_string(std::uint64_t{1} << 40), "PHOENIX_RETRY_INTERVAL_MS=100"};
  }

  std::string key_ = dir.make_key();
  std::string peers_;
  std::vector<Child*> servers_;
};

// The RESULT line of `app --sequential args...`, the reference a replicated run must print.
inline std::string run_sequential(const std::string& app, const std::vector<std::string>& args) {
  std::string cmd = volpex_cluster::program(app) + " --sequential";
  for (const auto& a : args) cmd += " " + a;
  std::array<char, 256> buf{};
  FILE* f = ::popen(cmd.c_str(), "r");
  REQUIRE(f);
  std::string out;
  while (std::fgets(buf.data(), buf.size(), f)) out += buf.data();
  REQUIRE(::pclose(f) == 0);
  REQUIRE(out.rfind("RESULT ", 0) == 0);
  return out.substr(0, out.find('\n'));
}

// The number after `key=` in `line` (0 if absent).
inline std::uint64_t field(const std::string& line, const std::string& key) {
  const auto at = line.find(key + "=");
  if (at == std::string::npos) return 0;
  return std::stoull(line.substr(at + key.size() + 1));
}

}  // namespace phoenix::test
