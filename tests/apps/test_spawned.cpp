// tests/apps/test_spawned.cpp — an application's node processes started the way the shell phsh starts them
// (phoenix/launch/spawned_node.hpp), driven by hand: the real raytrace binary, forked and exec'd with the spawn
// protocol's environment and pipes, as a first node, a joining node and later a resumed one; a node of the test
// itself links to them and sends "suspend FILE" and "leave" over the overlay, as phsh does. Every step is
// checked on the report lines (JOINED, SUSPENDED, LEFT, RESULT, FINISHED) and the exit statuses, and the image
// that comes out equals the sequential render.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <phoenix/config.hpp>
#include <phoenix/node.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "apps/raytrace/png_image.hpp"
#include "apps/raytrace/render.hpp"
#include "apps/raytrace/scene.hpp"
#include "apps/raytrace/tile_tasks.hpp"
#include "support/children.hpp"
#include "support/temp_dir.hpp"

namespace {

using namespace std::chrono_literals;
using namespace phoenix;
using phoenix::test::Child;
using phoenix::test::Children;
using phoenix::test::starts_with;
using Clock = std::chrono::steady_clock;

// Generous bounds: the ASan build is several times slower.
constexpr auto step_timeout = 60s;
constexpr auto run_timeout = 240s;


std::string port_of(const Child& c) {
  const auto l = c.line("PORT ");
  return l ? l->substr(5) : std::string();
}

// The resource name of the node at `port`, once the test node's link to it is up and its route known (control
// requests need the route: the link's handshake names the peer before DSDV has advertised it).
std::optional<vp_t> resource_at(Node& node, const std::string& port, std::chrono::milliseconds timeout) {
  const auto give_up = Clock::now() + timeout;
  while (Clock::now() < give_up) {
    const auto snapshot = node.routing_snapshot();
    for (const auto& l : snapshot.links) {
      if (l.address != port || l.state != "up" || l.peer == 0) continue;
      for (const auto& r : snapshot.routes) {
        if (r.destination == l.peer && r.next_hop != 0 && r.metric != 0xFFFF) return l.peer;
      }
    }
    std::this_thread::sleep_for(20ms);
  }
  return std::nullopt;
}

// The scene of the unit tests, larger and with more samples per pixel (about 6 s of sequential rendering on a
// 2-core machine), so that the run lasts long enough for a join, a suspend, a resume and a leave to happen
// before its end.
std::filesystem::path slow_scene(const std::filesystem::path& dir) {
  std::ifstream in(std::filesystem::path(PHOENIX_SOURCE_DIR) / "apps/raytrace/scenes/small.scene");
  std::ostringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  const std::string small = "width 96 height 64 samples 2 ";
  const auto at = s.find(small);
  REQUIRE(at != std::string::npos);
  s.replace(at, small.size(), "width 576 height 384 samples 16 ");
  const auto file = dir / "slow.scene";
  std::ofstream(file) << s;
  return file;
}

}  // namespace

TEST_CASE("spawned raytrace: first, join, suspend, resume and leave driven over the overlay, as phsh does") {
  const std::string program = std::string(PHOENIX_BINARY_DIR) + "/apps/raytrace/raytrace";
  REQUIRE_MESSAGE(::access(program.c_str(), X_OK) == 0, program << " is not built");
  test::temp_dir dir;
  const std::string key = dir.make_key();
  const auto controller = dir.make_controller_keys();  // the test's node signs as phsh does
  const auto scene_file = slow_scene(dir.path());
  const auto png = dir / "image.png";
  const auto suspend_file = dir / "rt1.suspended";
  const std::uint64_t space = std::uint64_t{1} << 40;

  // The reference image, rendered meanwhile.
  const raytrace::Scene scene = raytrace::load_scene(scene_file);
  auto expected = std::async(std::launch::async, [&] { return raytrace::render_image(scene); });

  const std::vector<std::string> args{scene_file.string(), "-o", png.string(), "--grain", "64"};
  const auto env = [&](const std::string& name, const std::string& role, const std::string& peers) {
    std::vector<std::string> e{"PHOENIX_NAME=" + name,
                               "PHOENIX_LISTEN=tcp://127.0.0.1:0",
                               "PHOENIX_CLUSTER_KEY_FILE=" + key,
                               "PHOENIX_CONTROL_KEY_FILE=" + controller.public_file,
                               "PHOENIX_SPACE_SIZE=" + std::to_string(space),
                               "PHOENIX_RETRY_INTERVAL_MS=100",
                               "PHSH_ROLE=" + role};
    if (!peers.empty()) e.push_back("PHOENIX_PEERS=" + peers);
    if (role == "resume") e.push_back("PHSH_RESUME_FILE=" + suspend_file.string());
    return e;
  };

  Children children;
  INFO(children.transcript());

  // rt0 assumes everything and starts the render; rt1 links to it and joins: it obtains [L/2, L).
  Child& rt0 = children.spawn("rt0", program, args, env("rt0", "first", ""), dir / "rt0.log");
  REQUIRE(children.wait_line(rt0, "PORT ", step_timeout));
  REQUIRE(children.wait_line(rt0, "JOINED ", step_timeout) == "JOINED 0 " + std::to_string(space));
  Child& rt1 = children.spawn("rt1", program, args, env("rt1", "join", port_of(rt0)), dir / "rt1.log");
  REQUIRE(children.wait_line(rt1, "PORT ", step_timeout));
  const auto joined = children.wait_line(rt1, "JOINED ", step_timeout);
  REQUIRE(joined);
  CHECK(*joined == "JOINED " + std::to_string(space / 2) + " " + std::to_string(space));

  // The test's node: links to both, learns their resource names, and controls them as phsh would.
  Config config;
  config.name = "spawn-test";
  config.cluster_key_file = key;
  config.controller_key_file = controller.private_file;
  config.space_size = space;
  config.retry_interval_ms = 100;
  Node shell(config);
  REQUIRE_FALSE(shell.initialize("tcp://127.0.0.1:0"));
  REQUIRE_FALSE(shell.add_port(port_of(rt0)));
  REQUIRE_FALSE(shell.add_port(port_of(rt1)));
  const auto name0 = resource_at(shell, port_of(rt0), step_timeout);
  const auto name1 = resource_at(shell, port_of(rt1), step_timeout);
  REQUIRE(name0);
  REQUIRE(name1);
  std::error_code ec;
  const auto status = shell.control(*name0, "status", 10s, &ec);
  REQUIRE_MESSAGE(status, ec.message());
  CHECK(status->ok);
  CHECK(status->text.find("state=running") != std::string::npos);

  // rt1 suspends to a file once it has work of its own (it rendered rows of a stolen tile): SUSPENDED, exit
  // status 0. rt0 renders on meanwhile, but cannot finish without rt1's part; what is sent to rt1's virtual
  // nodes waits.
  REQUIRE(children.wait_until(
      [&] {
        for (const auto& l : rt1.lines) {
          if (starts_with(l, "UNITS ") && l != "UNITS 0") return true;
        }
        return rt1.eof;
      },
      step_timeout));
  const auto suspend = shell.control(*name1, "suspend " + suspend_file.string(), 10s, &ec);
  REQUIRE_MESSAGE(suspend, ec.message());
  CHECK(suspend->ok);
  CHECK(children.wait_line(rt1, "SUSPENDED ", step_timeout) == "SUSPENDED " + suspend_file.string());
  REQUIRE(children.wait_exit(rt1, step_timeout));
  CHECK(WIFEXITED(rt1.status));
  CHECK(WEXITSTATUS(rt1.status) == 0);
  CHECK_FALSE(rt1.has("LEFT"));
  CHECK_FALSE(rt1.has("FINISHED"));
  REQUIRE(std::filesystem::exists(suspend_file));
  REQUIRE_FALSE(rt0.has("FINISHED"));  // else the render was too short for this test

  // rt2 resumes from the file: it does not join but assumes rt1's interval again.
  Child& rt2 = children.spawn("rt2", program, args, env("rt2", "resume", port_of(rt0)), dir / "rt2.log");
  REQUIRE(children.wait_line(rt2, "PORT ", step_timeout));
  CHECK(children.wait_line(rt2, "JOINED ", step_timeout) == *joined);

  // rt0 is told to leave: everything it has goes to rt2, which finishes the render and checks it.
  const auto leave = shell.control(*name0, "leave", 10s, &ec);
  REQUIRE_MESSAGE(leave, ec.message());
  CHECK(leave->ok);
  CHECK(children.wait_line(rt0, "LEFT", step_timeout));
  REQUIRE(children.wait_exit(rt0, step_timeout));
  CHECK(WIFEXITED(rt0.status));
  CHECK(WEXITSTATUS(rt0.status) == 0);
  CHECK_FALSE(rt0.has("RESULT "));

  REQUIRE(children.wait_exit(rt2, run_timeout));
  CHECK(WIFEXITED(rt2.status));
  CHECK(WEXITSTATUS(rt2.status) == 0);
  CHECK(rt2.has("FINISHED"));
  CHECK(rt2.contains("raytrace: the parallel image is bit-identical to the sequential one"));
  CHECK_FALSE(rt2.has("ERROR"));
  CHECK_FALSE(rt0.has("ERROR"));
  CHECK_FALSE(rt1.has("ERROR"));
  const auto image = expected.get();
  CHECK(rt2.line("RESULT ") == "RESULT " + raytrace::checksum_text(image));
  REQUIRE(std::filesystem::exists(png));
  CHECK(raytrace::read_png(png).rgb == image);
  CHECK_FALSE(shell.finalize());
}
