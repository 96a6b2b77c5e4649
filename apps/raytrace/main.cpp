// raytrace — renders a scene (apps/raytrace/scenes/) by parallel divide-and-conquer over image tiles (the
// lazy-task-creation layer of apps/steal) on local node processes that join and leave while it runs, writes a
// PNG, and checks that the image is bit-identical to the sequential render. Started by the shell phsh
// (PHSH_ROLE set: phoenix/launch/spawned_node.hpp) it runs one node of such a render; the node that reports the
// RESULT writes the PNG and does the check.
//
// Usage: raytrace [-o FILE.png] [--nodes N] [--schedule S | --figure6 SECONDS] [--trace FILE] SCENE
//        (raytrace --help says everything)
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>

#include "phoenix/launch/cluster_cli.hpp"
#include "phoenix/launch/spawned_node.hpp"
#include "apps/raytrace/render.hpp"
#include "apps/raytrace/scene.hpp"
#include "apps/raytrace/tile_tasks.hpp"

int main(int argc, char** argv) {
  using namespace phoenix;
  CLI::App cli{
      "raytrace: a ray tracer parallelised by lazy task creation over image tiles, on phoenix nodes that "
      "join and leave"};
  std::string scene_file, png = "raytrace.png";
  int grain = 256;
  bool no_check = false;
  cli.add_option("scene", scene_file, "scene file (see apps/raytrace/scene.hpp for the format)")->required();
  cli.add_option("-o,--output", png, "PNG file to write (empty: none)");
  cli.add_option("--grain", grain, "tiles of at most this many pixels are rendered as one task")
      ->check(CLI::Range(1, 1 << 24));
  cli.add_flag("--no-check", no_check, "do not render sequentially to check the image");
  int width = 0, height = 0, samples = 0;
  cli.add_option("--width", width, "image width in pixels, instead of the scene's")
      ->check(CLI::Range(1, 16384));
  cli.add_option("--height", height, "image height in pixels, instead of the scene's")
      ->check(CLI::Range(1, 16384));
  cli.add_option("--samples", samples, "N: an NxN grid of rays per pixel, instead of the scene's")
      ->check(CLI::Range(1, 16));
  launch::ClusterCli run;
  run.add_to(cli, "rays");
  CLI11_PARSE(cli, argc, argv);

  raytrace::Scene scene;
  try {
    scene = raytrace::load_scene(scene_file);
    if (width) scene.width = width;
    if (height) scene.height = height;
    if (samples) scene.samples = samples;
  } catch (const std::exception& e) {
    if (launch::spawned_by_shell()) {
      const std::string why = e.what();
      return launch::run_spawned_node([&](launch::NodeProcess& p) {
        p.report_error("raytrace: " + why);
        return 1;
      });
    }
    std::fprintf(stderr, "raytrace: %s\n", e.what());
    return 1;
  }
  if (launch::spawned_by_shell()) {
    return launch::run_spawned_node(
        [&](launch::NodeProcess& p) { return raytrace::run_node(p, scene, grain, png, !no_check); });
  }
  auto options = run.options("raytrace", "rays");
  if (!options) return 2;
  const launch::ClusterOptions& o = *options;
  std::printf("raytrace: %s, %dx%d, %d nodes at the start, %zu joins/leaves scheduled\n", scene_file.c_str(),
              scene.width, scene.height, o.nodes, o.schedule.size());
  std::fflush(stdout);
  const auto outcome =
      launch::run_cluster(o, [&](launch::NodeProcess& p) { return raytrace::run_node(p, scene, grain, png); });
  if (!outcome.ok) {
    std::printf("raytrace: FAILED\n");
    return 1;
  }
  std::printf("parallel:   %s in %.3f s (%d joins, %d leaves during the run)%s%s\n", outcome.result.c_str(),
              outcome.seconds, outcome.joins, outcome.leaves, png.empty() ? "" : "; image in ", png.c_str());
  if (no_check) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  const auto image = raytrace::render_image(scene);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string expected = raytrace::checksum_text(image);
  std::printf("sequential: %s in %.3f s\n", expected.c_str(), s);
  if (outcome.result != expected) {
    std::printf("raytrace: MISMATCH: the parallel image differs from the sequential one\n");
    return 1;
  }
  std::printf("raytrace: the parallel image is bit-identical to the sequential one\n");
  return 0;
}
