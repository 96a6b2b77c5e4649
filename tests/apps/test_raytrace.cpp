// The sequential ray tracer (apps/raytrace): scene files, tile rendering that is independent of the tiling, PNG
// output.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "apps/raytrace/png_image.hpp"
#include "apps/raytrace/render.hpp"
#include "apps/raytrace/scene.hpp"
#include "support/temp_dir.hpp"

namespace rt = phoenix::raytrace;

namespace {

const std::filesystem::path small_scene_file =
    std::filesystem::path(PHOENIX_SOURCE_DIR) / "apps/raytrace/scenes/small.scene";

// The SceneError that parsing `text` throws (as "test.scene"), or a failed check.
rt::SceneError parse_error(const std::string& text) {
  try {
    rt::parse_scene(text, "test.scene");
  } catch (const rt::SceneError& e) {
    return e;
  }
  FAIL("no SceneError for:\n" << text);
  return rt::SceneError("", 0, "");
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The three bytes of pixel (x, y) of a whole-frame RGB8 image.
std::vector<std::uint8_t> pixel_at(const std::vector<std::uint8_t>& image, int width, int x, int y) {
  auto at = image.begin() + (static_cast<std::ptrdiff_t>(y) * width + x) * 3;
  return {at, at + 3};
}

}  // namespace

TEST_CASE("the small scene parses with its values and the documented defaults") {
  rt::Scene scene = rt::load_scene(small_scene_file);
  CHECK(scene.width == 96);
  CHECK(scene.height == 64);
  CHECK(scene.samples == 2);
  CHECK(scene.max_depth == 3);
  CHECK(scene.background == rt::Colour{0.2, 0.4, 0.6});
  CHECK(scene.ambient == 0.1);
  CHECK(scene.camera.position == rt::Vec3{0, 1, -5});
  CHECK(scene.camera.look_at == rt::Vec3{0, 1, 0});
  CHECK(scene.camera.fov_deg == 50);
  REQUIRE(scene.lights.size() == 2);
  CHECK(scene.lights[0].position == rt::Vec3{-5, 8, -6});
  CHECK(scene.lights[1].intensity == 1);  // default
  REQUIRE(scene.spheres.size() == 2);
  CHECK(scene.spheres[0].centre == rt::Vec3{0, 1, 0});
  CHECK(scene.spheres[0].radius == 1);
  CHECK(scene.spheres[0].material.colour == rt::Colour{0.8, 0.2, 0.2});
  CHECK(scene.spheres[0].material.shininess == 50);
  CHECK(scene.spheres[0].material.reflect == 0.3);
  CHECK(scene.spheres[1].material.diffuse == 0.7);  // default
  CHECK(scene.spheres[1].material.reflect == 0.5);
  REQUIRE(scene.planes.size() == 1);
  CHECK(scene.planes[0].normal == rt::Vec3{0, 1, 0});
  REQUIRE(scene.planes[0].checker.has_value());
  CHECK(scene.planes[0].checker->size == 1);
  CHECK(scene.planes[0].checker->colour == rt::Colour{0.1, 0.1, 0.1});
}

TEST_CASE("comments, blank lines, tabs and an empty text are accepted") {
  rt::Scene empty = rt::parse_scene("", "empty");
  CHECK(empty == rt::Scene{});
  rt::Scene scene =
      rt::parse_scene("# only a comment\n\n\tsphere\tcentre 1 2 3 radius 0.5 # trailing\r\n", "x");
  REQUIRE(scene.spheres.size() == 1);
  CHECK(scene.spheres[0].centre == rt::Vec3{1, 2, 3});
  CHECK(scene.spheres[0].radius == 0.5);
}

TEST_CASE("parse errors report the source, the line number and what is wrong") {
  const std::string good = "# a comment\ncamera pos 0 1 -5 look 0 0 0\n\n";

  SUBCASE("an unknown key names the key and the valid ones") {
    rt::SceneError e = parse_error(good + "sphere centre 0 1 0 radus 1\n");
    CHECK(e.line() == 4);
    std::string what = e.what();
    CHECK(what.starts_with("test.scene:4: "));
    CHECK(contains(what, "unknown key 'radus'"));
    CHECK(contains(what, "radius"));
  }
  SUBCASE("an unknown object") {
    rt::SceneError e = parse_error(good + "sphre centre 0 1 0 radius 1\n");
    CHECK(e.line() == 4);
    CHECK(contains(e.what(), "unknown object 'sphre'"));
  }
  SUBCASE("a bad number") {
    rt::SceneError e = parse_error(good + "light pos 1 x 3\n");
    CHECK(e.line() == 4);
    CHECK(contains(e.what(), "'x' is not a finite number"));
  }
  SUBCASE("too few numbers at the end of the line") {
    rt::SceneError e = parse_error("sphere radius 1 centre 0 1\n");
    CHECK(e.line() == 1);
    CHECK(contains(e.what(), "'centre' takes 3 numbers, found 2"));
  }
  SUBCASE("a missing required key") {
    CHECK(contains(parse_error(good + "sphere centre 0 0 0\n").what(), "missing key 'radius'"));
    CHECK(contains(parse_error("light colour 1 1 1\n").what(), "missing key 'pos'"));
  }
  SUBCASE("out-of-range values") {
    CHECK(contains(parse_error("sphere centre 0 0 0 radius -1\n").what(), "radius must be > 0"));
    CHECK(contains(parse_error("image samples 0\n").what(), "samples must be in [1, 16]"));
    CHECK(contains(parse_error("image width 12.5\n").what(), "a whole number"));
    CHECK(contains(parse_error("plane point 0 0 0 normal 0 0 0\n").what(), "normal must not be zero"));
    CHECK(contains(parse_error("camera fov 180\n").what(), "fov must be between 0 and 180"));
    CHECK(contains(parse_error("camera pos 0 0 0 look 0 5 0\n").what(), "parallel"));
    CHECK(contains(parse_error("sphere centre 0 0 0 radius 1 reflect 1.5\n").what(),
                   "reflect must be in [0, 1]"));
    CHECK(contains(parse_error("light pos 0 0 0 intensity inf\n").what(), "not a finite number"));
  }
  SUBCASE("a key given twice, and a second camera line") {
    CHECK(contains(parse_error("sphere centre 0 0 0 radius 1 radius 2\n").what(), "key 'radius' given twice"));
    rt::SceneError e = parse_error(good + "camera fov 40\n");
    CHECK(e.line() == 4);
    CHECK(contains(e.what(), "second camera line (the first is line 2)"));
  }
  SUBCASE("a file that does not exist is a system error") {
    CHECK_THROWS_AS(rt::load_scene("/nonexistent/phoenix/raytrace.scene"), std::system_error);
  }
}

TEST_CASE("format_scene and parse_scene round-trip every number exactly") {
  rt::Scene scene = rt::load_scene(small_scene_file);
  scene.spheres.push_back({{1.0 / 3, -0.0, 1e-17}, 0.1 + 0.2, {{0.7, 0.1, 1e300}, 2.0 / 7, 0, 9999, 1}});
  scene.camera.fov_deg = 47.123456789012345;
  CHECK(rt::parse_scene(rt::format_scene(scene), "formatted") == scene);
  CHECK(rt::scene_from_bytes(rt::scene_to_bytes(scene)) == scene);
}

TEST_CASE("tiles rendered in a scrambled order assemble into exactly the whole-frame image") {
  const rt::Scene scene = rt::load_scene(small_scene_file);
  REQUIRE(scene.width == 96);
  REQUIRE(scene.height == 64);
  const std::vector<std::uint8_t> whole = rt::render_image(scene);
  REQUIRE(whole.size() == 96u * 64u * 3u);

  // Four tiles of different sizes that cover the image once, cut at x = 37 and y = 23.
  const std::vector<rt::Tile> tiles = {{0, 0, 37, 23}, {37, 0, 59, 23}, {0, 23, 37, 41}, {37, 23, 59, 41}};
  std::vector<std::uint8_t> assembled(whole.size(), 0);
  for (int index : {3, 0, 2, 1}) {
    const rt::Tile& tile = tiles[static_cast<std::size_t>(index)];
    std::vector<std::uint8_t> pixels = rt::render_tile(scene, tile);
    REQUIRE(pixels.size() == static_cast<std::size_t>(tile.width * tile.height * 3));
    for (int row = 0; row < tile.height; ++row) {
      std::memcpy(&assembled[(static_cast<std::size_t>(tile.y0 + row) * scene.width + tile.x0) * 3],
                  &pixels[static_cast<std::size_t>(row * tile.width * 3)],
                  static_cast<std::size_t>(tile.width * 3));
    }
  }
  CHECK(assembled == whole);

  // A one-pixel tile is the same pixel too, rendered through a caller's buffer.
  std::vector<std::uint8_t> one(3);
  rt::render_tile(scene, {50, 40, 1, 1}, one);
  CHECK(one == pixel_at(whole, scene.width, 50, 40));
}

TEST_CASE("the rays traced are the unit of work: a frame's are its tiles' sum and the sky costs least") {
  const rt::Scene scene = rt::load_scene(small_scene_file);
  std::uint64_t whole = 0;
  rt::render_image(scene, &whole);
  std::uint64_t tiles = 0;
  for (const rt::Tile& tile : {rt::Tile{0, 0, 37, 64}, rt::Tile{37, 0, 59, 64}})
    rt::render_tile(scene, tile, &tiles);
  CHECK(tiles == whole);
  // Background at the top left: one ray a sample, which hits nothing and casts no shadow ray.
  std::vector<std::uint8_t> one(3);
  const auto samples = static_cast<std::uint64_t>(scene.samples) * static_cast<std::uint64_t>(scene.samples);
  CHECK(rt::render_tile(scene, {0, 0, 1, 1}, one) == samples);
  // The lit sphere at the centre: a shadow ray per light on top of each sample's ray.
  CHECK(rt::render_tile(scene, {scene.width / 2, scene.height / 2, 1, 1}, one) > samples);
  CHECK(whole > static_cast<std::uint64_t>(scene.width) * static_cast<std::uint64_t>(scene.height) * samples);
}

TEST_CASE("the centre pixel shows the lit red sphere and a corner the background colour") {
  const rt::Scene scene = rt::load_scene(small_scene_file);
  const std::vector<std::uint8_t> image = rt::render_image(scene);
  // The camera looks straight at the red sphere's centre, lit from the upper left.
  std::vector<std::uint8_t> centre = pixel_at(image, scene.width, scene.width / 2, scene.height / 2);
  CHECK(centre[0] > centre[1] + 40);
  CHECK(centre[0] > centre[2] + 40);
  // Nothing is above the horizon at the top left: background 0.2 0.4 0.6 is 51 102 153 (round(c * 255)).
  CHECK(pixel_at(image, scene.width, 0, 0) == std::vector<std::uint8_t>{51, 102, 153});
}

TEST_CASE("two independent renders have the same FNV-1a checksum") {
  // FNV-1a 64 reference values: the empty input is the offset basis; "a" is from the FNV authors' test vectors.
  CHECK(rt::fnv1a_64({}) == 14695981039346656037ull);
  const std::uint8_t a[] = {'a'};
  CHECK(rt::fnv1a_64(a) == 0xaf63dc4c8601ec8cull);

  const rt::Scene first = rt::load_scene(small_scene_file);
  const rt::Scene second = rt::scene_from_bytes(rt::scene_to_bytes(rt::load_scene(small_scene_file)));
  std::uint64_t checksum = rt::fnv1a_64(rt::render_image(first));
  CHECK(rt::fnv1a_64(rt::render_image(second)) == checksum);

  rt::Scene moved = first;
  moved.spheres[0].centre.x += 0.25;
  CHECK(rt::fnv1a_64(rt::render_image(moved)) != checksum);
}

TEST_CASE("render_tile rejects tiles outside the image and buffers of the wrong size") {
  const rt::Scene scene = rt::parse_scene("image width 8 height 4\n", "tiny");
  CHECK(rt::tile_fits(scene, {0, 0, 8, 4}));
  CHECK(rt::tile_fits(scene, {8, 4, 0, 0}));
  CHECK_FALSE(rt::tile_fits(scene, {1, 0, 8, 4}));
  CHECK_FALSE(rt::tile_fits(scene, {-1, 0, 1, 1}));
  CHECK_FALSE(rt::tile_fits(scene, {0, 0, -1, 1}));
  CHECK_THROWS_AS(rt::render_tile(scene, {0, 3, 8, 2}), std::invalid_argument);
  std::vector<std::uint8_t> small(5);
  CHECK_THROWS_AS(rt::render_tile(scene, {0, 0, 2, 1}, small), std::invalid_argument);
  CHECK(rt::render_tile(scene, {2, 2, 0, 0}).empty());
}

TEST_CASE("write_png and read_png round-trip the pixels") {
  phoenix::test::temp_dir dir;
  const rt::Scene scene = rt::load_scene(small_scene_file);
  const std::vector<std::uint8_t> image = rt::render_image(scene);
  rt::write_png(dir / "small.png", scene.width, scene.height, image.data());
  rt::RgbImage back = rt::read_png(dir / "small.png");
  CHECK(back.width == scene.width);
  CHECK(back.height == scene.height);
  CHECK(back.rgb == image);

  // Every byte value survives, in an image that is not square.
  std::vector<std::uint8_t> ramp(3 * 256 * 2);
  for (std::size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<std::uint8_t>(i * 7);
  rt::write_png(dir / "ramp.png", 256, 2, ramp.data());
  CHECK(rt::read_png(dir / "ramp.png").rgb == ramp);
}

TEST_CASE("PNG errors are clear") {
  phoenix::test::temp_dir dir;
  const std::uint8_t pixel[3] = {1, 2, 3};
  CHECK_THROWS_AS(rt::write_png(dir / "missing/dir/x.png", 1, 1, pixel), std::system_error);
  CHECK_THROWS_AS(rt::write_png(dir / "x.png", 0, 1, pixel), std::invalid_argument);
  CHECK_THROWS_AS(rt::read_png(dir / "absent.png"), std::system_error);
  std::ofstream(dir / "not.png") << "this is not a PNG file";
  try {
    rt::read_png(dir / "not.png");
    FAIL("read_png accepted a text file");
  } catch (const std::system_error&) {
    FAIL("a bad PNG is not a system error");
  } catch (const std::runtime_error& e) {
    CHECK(contains(e.what(), "not.png: libpng: "));
  }
}
