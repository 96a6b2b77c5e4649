// Phoenix nodes serving the Volpex dataspace, and the nodes of the replicas that use it, all in one process
// over loopback TCP (tests/volpex/test_service.cpp, test_communicator.cpp).
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <phoenix/node.hpp>
#include <string>
#include <thread>
#include <vector>

#include "phoenix/volpex/tag_server.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

namespace phoenix::test {

struct service_deployment {
  static constexpr std::uint64_t space_size = 1 << 16;

  temp_dir dir;
  std::string key = dir.make_key();
  std::vector<std::unique_ptr<Node>> nodes;
  std::vector<std::unique_ptr<volpex::tag_server>> servers;
  std::vector<std::thread> serving;
  std::vector<std::unique_ptr<std::atomic<bool>>> stop;

  // A node linked to the first one.
  Node& node(const std::string& name) {
    nodes.push_back(std::make_unique<Node>(node_config(name, key, space_size)));
    Node& n = *nodes.back();
    REQUIRE_FALSE(n.initialize("tcp://127.0.0.1:0"));
    if (nodes.size() > 1) REQUIRE_FALSE(n.add_port(nodes.front()->local_port()));
    return n;
  }
  // A serving node, served by a thread of its own; the first assumes all of [0, L), later ones join.
  volpex::tag_server& serve(const std::string& name, volpex::dataspace::options o) {
    using namespace std::chrono_literals;
    Node& n = node(name);
    servers.push_back(std::make_unique<volpex::tag_server>(n, o));
    REQUIRE_FALSE(servers.back()->install());
    if (servers.size() == 1) {
      REQUIRE_FALSE(n.assume({0, space_size}));
    } else {
      REQUIRE_FALSE(n.join(10s));  // the first server's loop runs the migration steps on its side
    }
    stop.push_back(std::make_unique<std::atomic<bool>>(false));
    auto* s = servers.back().get();
    auto* flag = stop.back().get();
    serving.emplace_back([s, flag] {
      while (!*flag) s->serve_for(10ms);
    });
    return *servers.back();
  }
  void stop_serving(std::size_t i) {
    *stop[i] = true;
    serving[i].join();
  }
  ~service_deployment() {
    for (std::size_t i = 0; i < serving.size(); ++i)
      if (serving[i].joinable()) stop_serving(i);
  }
};

}  // namespace phoenix::test
