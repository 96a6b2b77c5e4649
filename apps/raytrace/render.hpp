// apps/raytrace/render.hpp — renders rectangles of a scene's image into RGB8 pixels (Whitted-style ray
// tracing).
//
// Contract: every pixel is a pure function of the scene and its own coordinates. A tile computes exactly the
// bytes the whole-frame render has at its place, so tiles rendered in any order, by any thread or process, on
// any machine running the same build, assemble into a bit-identical image. To keep that true the renderer uses
// only IEEE-754 +, -, *, / and sqrt (correctly rounded everywhere) — no libm pow/tan, whose last bit may differ
// between CPUs and libm versions — no randomness, and the library is compiled with -ffp-contract=off so that no
// compiler fuses a*b+c into an FMA on some targets and not others.
//
// Pixel layout: RGB8, 3 bytes per pixel, rows top to bottom, tight rows (a tile's row is 3 * tile.width bytes).
//
// Threads: all functions are re-entrant and share no state; many threads may render tiles of one const Scene at
// once. They block only for the computation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "apps/raytrace/scene.hpp"

namespace phoenix::raytrace {

// A rectangle of the image in pixels: x grows to the right, y downwards, (0, 0) is the top-left pixel.
struct Tile {
  int x0 = 0;
  int y0 = 0;
  int width = 0;
  int height = 0;

  friend bool operator==(const Tile&, const Tile&) = default;
};

// The whole image as one tile.
Tile full_frame(const Scene& scene);

// True when `tile` has no negative size and lies inside the scene's image.
bool tile_fits(const Scene& scene, const Tile& tile);

// Renders `tile` into `rgb`, which must hold exactly 3 * tile.width * tile.height bytes, and returns the rays it
// traced (every nearest-hit and every shadow test, each a pass over the scene's objects: the unit of work,
// which a pixel's count of does not measure, as a sky pixel costs a fraction of a mirror's). Throws
// std::invalid_argument when the tile does not fit the image or the buffer has the wrong size.
std::uint64_t render_tile(const Scene& scene, const Tile& tile, std::span<std::uint8_t> rgb);

// Same, into a new buffer; adds the rays traced to *rays if given.
std::vector<std::uint8_t> render_tile(const Scene& scene, const Tile& tile, std::uint64_t* rays = nullptr);

// The whole frame: render_tile(scene, full_frame(scene), rays).
std::vector<std::uint8_t> render_image(const Scene& scene, std::uint64_t* rays = nullptr);

// 64-bit FNV-1a of `bytes` (offset basis 14695981039346656037, prime 1099511628211): a checksum to compare
// images rendered in different ways or places.
std::uint64_t fnv1a_64(std::span<const std::uint8_t> bytes);

}  // namespace phoenix::raytrace
