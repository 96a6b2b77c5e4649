// apps/raytrace/tile_tasks.cpp — see tile_tasks.hpp.
#include "apps/raytrace/tile_tasks.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "apps/raytrace/png_image.hpp"
#include "apps/steal/byte_codec.hpp"
#include "apps/steal/pool_node.hpp"

namespace phoenix::raytrace {
namespace {

using apps::ByteReader;
using apps::ByteWriter;

void write_tile(ByteWriter& w, const Tile& t) {
  w.u32(static_cast<std::uint32_t>(t.x0));
  w.u32(static_cast<std::uint32_t>(t.y0));
  w.u32(static_cast<std::uint32_t>(t.width));
  w.u32(static_cast<std::uint32_t>(t.height));
}

bool read_tile(ByteReader& r, Tile& t) {
  std::uint32_t v[4];
  for (auto& x : v) {
    if (!r.u32(x) || x > (1u << 20)) return false;
  }
  t = Tile{static_cast<int>(v[0]), static_cast<int>(v[1]), static_cast<int>(v[2]), static_cast<int>(v[3])};
  return true;
}

// A value: u32 count, then per rectangle its tile and its pixels (length-prefixed).
struct Piece {
  Tile tile;
  Bytes rgb;
};

bool read_pieces(std::span<const std::byte> value, std::vector<Piece>& out) {
  ByteReader r(value);
  std::uint32_t n = 0;
  if (!r.u32(n)) return false;
  for (std::uint32_t i = 0; i < n; ++i) {
    Piece p;
    if (!read_tile(r, p.tile) || !r.bytes(p.rgb)) return false;
    out.push_back(std::move(p));
  }
  return r.at_end();
}

Bytes write_pieces(const std::vector<Piece>& pieces) {
  ByteWriter w;
  w.u32(static_cast<std::uint32_t>(pieces.size()));
  for (const auto& p : pieces) {
    write_tile(w, p.tile);
    w.bytes(p.rgb);
  }
  return std::move(w).take();
}

}  // namespace

Bytes encode_tile(const Tile& t) {
  ByteWriter w;
  write_tile(w, t);
  return std::move(w).take();
}

apps::Outcome TileTasks::run(std::span<const std::byte> task) {
  ByteReader r(task);
  Tile t;
  if (!read_tile(r, t) || !r.at_end() || !tile_fits(scene_, t)) {
    ++bad_tasks_;
    return apps::Outcome::value(write_pieces({}));
  }
  if (t.width * t.height > grain_ && (t.width > 1 || t.height > 1)) {
    Tile a = t, b = t;
    if (t.width >= t.height) {
      a.width = t.width / 2;
      b.x0 = t.x0 + a.width;
      b.width = t.width - a.width;
    } else {
      a.height = t.height / 2;
      b.y0 = t.y0 + a.height;
      b.height = t.height - a.height;
    }
    return apps::Outcome::divide({encode_tile(a), encode_tile(b)}, {});
  }
  const auto px = render_tile(scene_, t, &rays_);
  Piece p{t, Bytes(px.size())};
  std::memcpy(p.rgb.data(), px.data(), px.size());
  return apps::Outcome::value(write_pieces({p}));
}

Bytes TileTasks::combine(std::span<const std::byte>, std::vector<Bytes>& values) {
  std::vector<Piece> all;
  for (const auto& v : values) {
    if (!read_pieces(v, all)) ++bad_tasks_;
  }
  return write_pieces(all);
}

std::optional<std::vector<std::uint8_t>> assemble(const Scene& scene, std::span<const std::byte> value) {
  std::vector<Piece> pieces;
  if (!read_pieces(value, pieces)) return std::nullopt;
  const auto w = static_cast<std::size_t>(scene.width), h = static_cast<std::size_t>(scene.height);
  std::vector<std::uint8_t> image(w * h * 3);
  std::vector<std::uint8_t> covered(w * h, 0);
  for (const auto& p : pieces) {
    if (!tile_fits(scene, p.tile) || p.rgb.size() != static_cast<std::size_t>(p.tile.width * p.tile.height * 3))
      return std::nullopt;
    for (int y = 0; y < p.tile.height; ++y) {
      const std::size_t row = static_cast<std::size_t>(p.tile.y0 + y) * w + static_cast<std::size_t>(p.tile.x0);
      for (int x = 0; x < p.tile.width; ++x) {
        if (covered[row + static_cast<std::size_t>(x)]++) return std::nullopt;
      }
      std::memcpy(image.data() + row * 3, p.rgb.data() + static_cast<std::size_t>(y * p.tile.width * 3),
                  static_cast<std::size_t>(p.tile.width * 3));
    }
  }
  for (auto c : covered) {
    if (c != 1) return std::nullopt;
  }
  return image;
}

std::string checksum_text(const std::vector<std::uint8_t>& rgb) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "checksum %016" PRIx64, fnv1a_64(rgb));
  return buf;
}

int run_node(launch::NodeProcess& process, const Scene& scene, int grain_pixels, const std::string& png_path,
             bool check_result) {
  TileTasks tiles(scene, grain_pixels);
  apps::PoolNodeParts parts;
  parts.app = &tiles;
  parts.root_task = encode_tile(full_frame(scene));
  parts.units = [&] { return tiles.rays(); };
  parts.errors = [&] { return tiles.bad_tasks(); };
  parts.describe = [&](const Bytes& value) -> std::string {
    const auto image = assemble(scene, value);
    if (!image) return "malformed image";
    if (!png_path.empty()) write_png(png_path, scene.width, scene.height, image->data());
    return checksum_text(*image);
  };
  if (check_result) {
    parts.check = [&](launch::NodeProcess& p, const std::string& result) {
      const std::string expected = checksum_text(render_image(scene));
      if (result != expected) {
        p.report_error("raytrace: MISMATCH: the parallel image (" + result +
                       ") differs from the sequential one (" + expected + ")");
        return false;
      }
      p.report("raytrace: the parallel image is bit-identical to the sequential one");
      return true;
    };
  }
  return apps::run_pool_node(process, parts);
}

}  // namespace phoenix::raytrace
