// apps/raytrace/png_image.hpp — RGB8 images to and from PNG files, through libpng's simplified API.
//
// Errors: std::system_error (with errno) when a file cannot be opened, written or closed; std::runtime_error
// ("PATH: libpng: message") when libpng rejects the data or the file is not a valid PNG; std::invalid_argument
// for a non-positive size or a null pixel pointer. std::system_error derives from std::runtime_error, so one
// catch of the latter takes both.
//
// Threads: re-entrant; no shared state. Both calls block on file I/O.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace phoenix::raytrace {

// Pixels as render.hpp lays them out: 3 bytes per pixel, rows top to bottom, no padding.
struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<std::uint8_t> rgb;  // 3 * width * height bytes
};

// Writes a width × height RGB8 image (3 * width * height bytes at `rgb`) as an 8-bit sRGB PNG, replacing
// `path`. On a libpng error the partial file is removed.
void write_png(const std::filesystem::path& path, int width, int height, const std::uint8_t* rgb);

// Reads any PNG libpng understands and converts it to RGB8 (alpha composited on black, grey expanded).
RgbImage read_png(const std::filesystem::path& path);

}  // namespace phoenix::raytrace
