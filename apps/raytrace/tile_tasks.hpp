// apps/raytrace/tile_tasks.hpp — the ray tracer as a divide-and-conquer problem for the task pool (apps/steal):
// a task is a rectangle of the image; one larger than `grain` pixels divides into two halves across its longer
// side, a smaller one is rendered. A value is a list of rendered rectangles; combining concatenates them, so
// the root's value is the whole image, assembled by assemble(). Rendering is a pure function of the scene and
// the pixel, so the image is bit-identical to the sequential render whoever renders which tile.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "phoenix/launch/app_cluster.hpp"
#include "apps/raytrace/render.hpp"
#include "apps/raytrace/scene.hpp"
#include "apps/steal/task_pool.hpp"

namespace phoenix::raytrace {

Bytes encode_tile(const Tile& t);

class TileTasks final : public apps::Application {
 public:
  TileTasks(const Scene& scene, int grain_pixels) : scene_(scene), grain_(grain_pixels) {}
  apps::Outcome run(std::span<const std::byte> task) override;
  Bytes combine(std::span<const std::byte> context, std::vector<Bytes>& values) override;
  std::uint64_t rays() const { return rays_; }  // progress unit: rays traced (render.hpp)
  std::uint64_t bad_tasks() const { return bad_tasks_; }

 private:
  const Scene& scene_;
  int grain_;
  std::uint64_t rays_ = 0;
  std::uint64_t bad_tasks_ = 0;
};

// The whole image from the root's value; nullopt unless the rectangles cover it exactly once.
std::optional<std::vector<std::uint8_t>> assemble(const Scene& scene, std::span<const std::byte> value);

// "checksum HEX" of an image (fnv1a_64): the RESULT text, and what the sequential render is compared by.
std::string checksum_text(const std::vector<std::uint8_t>& rgb);

// The node process of a parallel render under the launcher or started by the shell. The node that assembles
// the image writes it to png_path (if not empty) and reports "checksum HEX"; with check_result it then renders
// the scene sequentially and reports that the images are bit-identical, or an error.
int run_node(launch::NodeProcess& process, const Scene& scene, int grain_pixels, const std::string& png_path,
             bool check_result = false);

}  // namespace phoenix::raytrace
