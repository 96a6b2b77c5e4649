// bench/raytrace.cpp — raytrace_bench: the ray tracer's tiles as lazy-task-creation tasks (apps/raytrace) on 1
// and 2 node processes, beside the sequential render on one thread (the anchor), in one invocation.
//
// Each variant runs --reps times; the median wall time is printed with its speedup over the sequential render.
// The phoenix runs time from the first node's start to the assembled image, process start-up included. Every
// image's checksum is compared with the sequential one: a mismatch fails the benchmark. Nothing about speed is
// asserted.
//
// Output: `RESULT raytrace <variant> <width>x<height> <seconds> s speedup <x>`, then a markdown table.
// Usage: raytrace_bench [--scene FILE] [--width W --height H] [--grain PIXELS] [--reps R] [--quick]
#include <CLI/CLI.hpp>
#include <cinttypes>
#include <string>
#include <vector>

#include "app_bench.hpp"
#include "apps/raytrace/render.hpp"
#include "apps/raytrace/scene.hpp"
#include "apps/raytrace/tile_tasks.hpp"

int main(int argc, char** argv) {
  using namespace phoenix;
  CLI::App cli{"raytrace_bench: the ray tracer on phoenix node processes vs the sequential render"};
  std::string scene_file = PHOENIX_SOURCE_DIR "/apps/raytrace/scenes/example.scene";
  int width = 1280, height = 960, grain = 256, reps = 3;
  bool quick = false;
  cli.add_option("--scene", scene_file, "scene file");
  cli.add_option("--width", width, "image width (0: the scene's)")->check(CLI::Range(0, 1 << 14));
  cli.add_option("--height", height, "image height (0: the scene's)")->check(CLI::Range(0, 1 << 14));
  cli.add_option("--grain", grain, "tiles of at most this many pixels are one task")
      ->check(CLI::Range(1, 1 << 28));
  cli.add_option("--reps", reps, "runs of each variant; the median is printed")->check(CLI::Range(1, 99));
  cli.add_flag("--quick", quick, "a small image, one run each: checks that everything runs");
  CLI11_PARSE(cli, argc, argv);

  raytrace::Scene scene;
  try {
    scene = raytrace::load_scene(scene_file);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "raytrace_bench: %s\n", e.what());
    return 2;
  }
  if (quick) {
    width = 160;
    height = 120;
    reps = 1;
  }
  if (width) scene.width = width;
  if (height) scene.height = height;

  const auto checksum = [](const std::vector<std::uint8_t>& image) {
    char text[40];
    std::snprintf(text, sizeof text, "checksum %016" PRIx64, raytrace::fnv1a_64(image));
    return std::string(text);
  };
  const auto cluster = [&](int nodes) {
    return [&, nodes] {
      return bench::run_app_cluster(
          "raytrace", nodes, [&](launch::NodeProcess& p) { return raytrace::run_node(p, scene, grain, ""); });
    };
  };
  const std::vector<bench::AppVariant> variants{
      {"sequential", [&] { return std::optional(checksum(raytrace::render_image(scene))); }},
      {"phoenix-1process", cluster(1)},
      {"phoenix-2processes", cluster(2)},
  };
  std::printf("# raytrace_bench: %s, %dx%d pixels, %d samples, grain %d pixels, %d rep(s) each\n",
              scene_file.c_str(), scene.width, scene.height, scene.samples, grain, reps);
  std::fflush(stdout);
  return bench::run_app_variants("raytrace", std::to_string(scene.width) + "x" + std::to_string(scene.height),
                                 variants, reps);
}
