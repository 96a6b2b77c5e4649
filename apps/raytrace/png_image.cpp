// apps/raytrace/png_image.cpp — see png_image.hpp. The simplified API (png_image_*) reports errors through
// png_image.message instead of longjmp, so no C++ object is ever jumped over.
#include "apps/raytrace/png_image.hpp"

#include <png.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>

namespace phoenix::raytrace {
namespace {

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

File open_file(const std::filesystem::path& path, const char* mode, const char* what) {
  File f(std::fopen(path.c_str(), mode), &std::fclose);
  if (!f) {
    throw std::system_error(errno, std::generic_category(), std::string(what) + " '" + path.string() + "'");
  }
  return f;
}

[[noreturn]] void throw_libpng(const std::filesystem::path& path, const png_image& image) {
  throw std::runtime_error(path.string() + ": libpng: " + image.message);
}

}  // namespace

void write_png(const std::filesystem::path& path, int width, int height, const std::uint8_t* rgb) {
  if (width <= 0 || height <= 0 || rgb == nullptr) {
    throw std::invalid_argument("write_png: needs a positive size and pixels, got " + std::to_string(width) +
                                "x" + std::to_string(height));
  }
  File f = open_file(path, "wb", "cannot create PNG file");
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = PNG_FORMAT_RGB;
  if (!png_image_write_to_stdio(&image, f.get(), 0, rgb, 0, nullptr)) {
    png_image_free(&image);
    f.reset();
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    throw_libpng(path, image);
  }
  // fclose flushes the last buffer: a full disk shows up only here.
  if (std::fclose(f.release()) != 0) {
    throw std::system_error(errno, std::generic_category(), "cannot write PNG file '" + path.string() + "'");
  }
}

RgbImage read_png(const std::filesystem::path& path) {
  File f = open_file(path, "rb", "cannot open PNG file");
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_stdio(&image, f.get())) throw_libpng(path, image);
  if (image.width == 0 || image.height == 0 || image.width > INT_MAX / 3 / image.height) {
    png_image_free(&image);
    throw std::runtime_error(path.string() + ": unsupported image size (" + std::to_string(image.width) + "x" +
                             std::to_string(image.height) + ")");
  }
  image.format = PNG_FORMAT_RGB;
  RgbImage out;
  out.width = static_cast<int>(image.width);
  out.height = static_cast<int>(image.height);
  // Zeroed: with no background colour given, libpng composites alpha onto what the buffer holds.
  out.rgb.assign(PNG_IMAGE_SIZE(image), 0);
  if (!png_image_finish_read(&image, nullptr, out.rgb.data(), 0, nullptr)) throw_libpng(path, image);
  return out;
}

}  // namespace phoenix::raytrace
