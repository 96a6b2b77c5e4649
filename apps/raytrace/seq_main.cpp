// raytrace_seq — renders a scene file on one thread, prints the time and an FNV-1a checksum of the pixels, and
// writes a PNG. The checksum is the reference a parallel render of the same scene must reproduce.
//
// Usage: raytrace_seq [-o FILE.png] [--tile SIZE] [--no-png] SCENE
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "apps/raytrace/png_image.hpp"
#include "apps/raytrace/render.hpp"
#include "apps/raytrace/scene.hpp"

namespace {

namespace rt = phoenix::raytrace;

struct Options {
  std::filesystem::path scene;
  std::filesystem::path output;  // empty: the scene's file name with .png, in the current directory
  int tile_size = 0;             // 0: the whole frame as one tile
  bool write_png = true;
};

void usage(std::FILE* to, const char* argv0) {
  std::fprintf(
      to,
      "usage: %s [-o FILE.png] [--tile SIZE] [--no-png] SCENE\n"
      "  Renders the scene file SCENE on one thread and prints the render time and the FNV-1a 64 checksum\n"
      "  of the RGB8 pixels.\n"
      "  -o, --output FILE  PNG to write (default: SCENE's name with .png, in the current directory)\n"
      "  --tile SIZE        render SIZE x SIZE tiles row by row instead of the whole frame at once;\n"
      "                     the checksum must not change\n"
      "  --no-png           render and print only\n"
      "  -h, --help         this text\n"
      "  The scene file format is described at the top of apps/raytrace/scene.hpp.\n",
      argv0);
}

bool parse_positive(const char* text, int& out) {
  const char* end = text + std::strlen(text);
  auto [p, ec] = std::from_chars(text, end, out);
  return ec == std::errc() && p == end && out > 0;
}

// Returns 0 to go on, -1 after --help (exit 0), or 2 for a usage error.
int parse_options(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    bool has_value = i + 1 < argc;
    if (arg == "-h" || arg == "--help") {
      usage(stdout, argv[0]);
      return -1;
    } else if ((arg == "-o" || arg == "--output") && has_value) {
      options.output = argv[++i];
    } else if (arg == "--tile" && has_value) {
      if (!parse_positive(argv[++i], options.tile_size)) {
        std::fprintf(stderr, "%s: --tile needs a positive whole number, got '%s'\n", argv[0], argv[i]);
        return 2;
      }
    } else if (arg == "--no-png") {
      options.write_png = false;
    } else if (!arg.empty() && arg[0] != '-' && options.scene.empty()) {
      options.scene = arg;
    } else {
      std::fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], arg.c_str());
      usage(stderr, argv[0]);
      return 2;
    }
  }
  if (options.scene.empty()) {
    usage(stderr, argv[0]);
    return 2;
  }
  if (options.output.empty()) options.output = options.scene.filename().replace_extension(".png");
  return 0;
}

// The image, rendered as one tile or as tiles of `tile_size` copied into place.
std::vector<std::uint8_t> render(const rt::Scene& scene, int tile_size, std::uint64_t& rays) {
  if (tile_size == 0) return rt::render_image(scene, &rays);
  std::vector<std::uint8_t> image(std::size_t{3} * scene.width * scene.height);
  for (int y0 = 0; y0 < scene.height; y0 += tile_size) {
    for (int x0 = 0; x0 < scene.width; x0 += tile_size) {
      rt::Tile tile{x0, y0, std::min(tile_size, scene.width - x0), std::min(tile_size, scene.height - y0)};
      std::vector<std::uint8_t> pixels = rt::render_tile(scene, tile, &rays);
      std::size_t row_bytes = std::size_t{3} * tile.width;
      for (int row = 0; row < tile.height; ++row) {
        std::memcpy(&image[(std::size_t{1} * (y0 + row) * scene.width + x0) * 3], &pixels[row * row_bytes],
                    row_bytes);
      }
    }
  }
  return image;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (int code = parse_options(argc, argv, options); code != 0) return code < 0 ? 0 : code;
  try {
    rt::Scene scene = rt::load_scene(options.scene);
    std::printf("scene: %s (%dx%d, %dx%d samples, depth %d; spheres %zu, planes %zu, lights %zu)\n",
                options.scene.c_str(), scene.width, scene.height, scene.samples, scene.samples, scene.max_depth,
                scene.spheres.size(), scene.planes.size(), scene.lights.size());
    auto start = std::chrono::steady_clock::now();
    std::uint64_t rays = 0;
    std::vector<std::uint8_t> image = render(scene, options.tile_size, rays);
    std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    std::printf(
        "render: %.3f s on one thread (%s)\n", elapsed.count(),
        options.tile_size == 0 ? "whole frame" : ("tiles of " + std::to_string(options.tile_size)).c_str());
    std::printf("rays: %" PRIu64 " traced, %.0f per second\n", rays, static_cast<double>(rays) / elapsed.count());
    std::printf("checksum: fnv1a64 %016" PRIx64 "\n", rt::fnv1a_64(image));
    if (options.write_png) {
      rt::write_png(options.output, scene.width, scene.height, image.data());
      std::printf("png: %s\n", options.output.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "raytrace_seq: %s\n", e.what());
    return 1;
  }
  return 0;
}
