// tests/apps/test_raytrace_cluster.cpp — the parallel ray tracer on several node processes, with a join and a
// leave mid-run: the image is bit-identical to the sequential render.
#include <doctest/doctest.h>

#include <cinttypes>
#include <cstdio>
#include <filesystem>

#include "apps/raytrace/png_image.hpp"
#include "apps/raytrace/render.hpp"
#include "apps/raytrace/tile_tasks.hpp"

using namespace phoenix;

TEST_CASE("raytrace: tiles rendered across joining and leaving nodes make the sequential image, bit for bit") {
  raytrace::Scene scene =
      raytrace::load_scene(std::filesystem::path(PHOENIX_SOURCE_DIR) / "apps/raytrace/scenes/example.scene");
  scene.samples = 3;  // long enough (a second or more) for the schedule to happen before the end
  const auto png =
      std::filesystem::temp_directory_path() / ("raytrace-test-" + std::to_string(::getpid()) + ".png");
  launch::ClusterOptions o;
  o.app = "raytrace-test";
  o.quiet = true;
  o.timeout_s = 300;
  o.nodes = 2;
  o.schedule = *launch::parse_schedule("join@0.1,leave@0.25");
  const auto out =
      launch::run_cluster(o, [&](launch::NodeProcess& p) { return raytrace::run_node(p, scene, 64, png); });
  REQUIRE(out.ok);
  CHECK(out.joins == 2);
  CHECK(out.leaves == 1);
  const auto image = raytrace::render_image(scene);
  char expected[64];
  std::snprintf(expected, sizeof expected, "checksum %016" PRIx64, raytrace::fnv1a_64(image));
  CHECK(out.result == expected);
  const auto written = raytrace::read_png(png);
  CHECK(written.rgb == image);
  std::filesystem::remove(png);
}

TEST_CASE("raytrace: an image assembled from overlapping or missing tiles is refused") {
  raytrace::Scene scene =
      raytrace::load_scene(std::filesystem::path(PHOENIX_SOURCE_DIR) / "apps/raytrace/scenes/small.scene");
  raytrace::TileTasks tiles(scene, 1 << 30);
  const auto whole = tiles.run(raytrace::encode_tile(raytrace::full_frame(scene)));
  REQUIRE_FALSE(whole.divided);
  CHECK(raytrace::assemble(scene, whole.result));
  std::vector<Bytes> twice{whole.result, whole.result};
  CHECK_FALSE(raytrace::assemble(scene, tiles.combine({}, twice)));
  std::vector<Bytes> none;
  CHECK_FALSE(raytrace::assemble(scene, tiles.combine({}, none)));
  CHECK(tiles.bad_tasks() == 0);
}
