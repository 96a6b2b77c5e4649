// apps/raytrace/scene.hpp — what a ray-traced image shows: camera, image settings, lights, spheres, planes; and
// the plain-text scene file format that describes them.
//
// Scene file grammar. One statement per line; `#` starts a comment that runs to the end of the line; blank
// lines are ignored; tokens are separated by spaces or tabs. A statement is an object word followed by keys,
// each key followed by a fixed count of numbers. Keys may come in any order, each at most once per line.
// Numbers are decimal as std::from_chars reads them (`1`, `-0.5`, `2e-3`; not `inf` or `nan`); N marks a whole
// number.
//
//   camera  [pos X Y Z] [look X Y Z] [up X Y Z] [fov DEGREES]                       at most one camera line
//   image   [width N] [height N] [samples N] [depth N] [background R G B] [ambient A]  at most one image line
//   light   pos X Y Z [colour R G B] [intensity I]                                   any number of lights
//   sphere  centre X Y Z radius R [MATERIAL]                                          any number of spheres
//   plane   point X Y Z normal X Y Z [MATERIAL] [checker SIZE R G B]                  any number of planes
//
//   MATERIAL := [colour R G B] [diffuse KD] [specular KS] [shininess N] [reflect KR]
//
// Defaults and ranges (anything outside is an error):
//   camera:   pos 0 0 -5, look 0 0 0, up 0 1 0, fov 60 (vertical, degrees, 0 < fov < 180); look != pos and up
//             not parallel to the viewing direction. Screen axes are left-handed, as in POV-Ray: a camera
//             looking along +z with up +y sees +x to its right.
//   image:    width 640, height 480 (each 1..16384); samples 1 (1..16: an N×N grid of rays per pixel);
//             depth 5 (0..32: reflection bounces, 0 = no reflections); background 0 0 0; ambient 0.1 (>= 0).
//   light:    colour 1 1 1, intensity 1 (>= 0). A point light; no fall-off with distance.
//   sphere:   radius > 0. plane: normal not zero (it need not be unit length).
//   material: colour 0.8 0.8 0.8, diffuse 0.7, specular 0.3 (each >= 0), shininess 32 (0..10000, a whole number
//             so that the highlight is an exact power, see render.cpp), reflect 0 (0..1).
//   checker:  squares of side SIZE (> 0) alternate between the material colour and R G B.
// Colours are linear in [0, 1] (larger values are allowed and clip); the image maps them to bytes without
// gamma.
//
// Errors: parse_scene and load_scene throw SceneError, whose what() reads "NAME:LINE: message", for example
// "small.scene:12: sphere: unknown key 'radus' (expected centre radius colour diffuse specular shininess
// reflect)". A file that cannot be read throws std::system_error.
//
// Shipping a scene to another process: format_scene writes any Scene as scene text with every number in its
// shortest exact decimal form, so parse_scene(format_scene(s)) == s bit for bit, and both sides render the same
// image. scene_to_bytes / scene_from_bytes name that use.
//
// Threads: everything here is a pure function of its arguments; no global state.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace phoenix::raytrace {

struct Vec3 {
  double x = 0;
  double y = 0;
  double z = 0;

  friend bool operator==(const Vec3&, const Vec3&) = default;
};

// Colours are Vec3s too: x, y, z hold red, green, blue.
using Colour = Vec3;

inline Vec3 operator+(Vec3 a, Vec3 b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
inline Vec3 operator-(Vec3 a, Vec3 b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
inline Vec3 operator-(Vec3 a) { return {-a.x, -a.y, -a.z}; }
inline Vec3 operator*(Vec3 a, double s) { return {a.x * s, a.y * s, a.z * s}; }
inline Vec3 operator*(double s, Vec3 a) { return a * s; }
// Component-wise: a surface colour lit by a light colour.
inline Vec3 operator*(Vec3 a, Vec3 b) { return {a.x * b.x, a.y * b.y, a.z * b.z}; }
inline double dot(Vec3 a, Vec3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
inline Vec3 cross(Vec3 a, Vec3 b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
inline double length(Vec3 a) { return std::sqrt(dot(a, a)); }  // sqrt is correctly rounded: reproducible
inline Vec3 normalize(Vec3 a) { return a * (1.0 / length(a)); }

struct Material {
  Colour colour{0.8, 0.8, 0.8};
  double diffuse = 0.7;
  double specular = 0.3;
  int shininess = 32;
  double reflect = 0;

  friend bool operator==(const Material&, const Material&) = default;
};

struct Camera {
  Vec3 position{0, 0, -5};
  Vec3 look_at{0, 0, 0};
  Vec3 up{0, 1, 0};
  double fov_deg = 60;  // vertical field of view

  friend bool operator==(const Camera&, const Camera&) = default;
};

struct Light {
  Vec3 position;
  Colour colour{1, 1, 1};
  double intensity = 1;

  friend bool operator==(const Light&, const Light&) = default;
};

struct Sphere {
  Vec3 centre;
  double radius = 1;
  Material material;

  friend bool operator==(const Sphere&, const Sphere&) = default;
};

struct Checker {
  double size = 1;
  Colour colour{0, 0, 0};  // the other squares take the material colour

  friend bool operator==(const Checker&, const Checker&) = default;
};

struct Plane {
  Vec3 point;
  Vec3 normal{0, 1, 0};
  Material material;
  std::optional<Checker> checker;

  friend bool operator==(const Plane&, const Plane&) = default;
};

struct Scene {
  Camera camera;
  int width = 640;
  int height = 480;
  int samples = 1;    // per axis: samples × samples rays per pixel
  int max_depth = 5;  // reflection bounces
  Colour background{0, 0, 0};
  double ambient = 0.1;
  std::vector<Light> lights;
  std::vector<Sphere> spheres;
  std::vector<Plane> planes;

  friend bool operator==(const Scene&, const Scene&) = default;
};

// A scene file error at a known line; what() is "NAME:LINE: message".
class SceneError : public std::runtime_error {
 public:
  SceneError(std::string_view source_name, int line, std::string_view message);
  int line() const { return line_; }

 private:
  int line_;
};

// Parses scene text; `source_name` only labels error messages. Throws SceneError.
Scene parse_scene(std::string_view text, std::string_view source_name);

// Reads and parses a scene file. Throws std::system_error when it cannot be read, SceneError when it is
// invalid.
Scene load_scene(const std::filesystem::path& file);

// Writes `scene` in the grammar above, one statement per line, numbers in shortest round-trip form.
std::string format_scene(const Scene& scene);

// The scene as bytes for a message, and back: the text of format_scene. scene_from_bytes throws SceneError.
std::vector<std::uint8_t> scene_to_bytes(const Scene& scene);
Scene scene_from_bytes(std::span<const std::uint8_t> bytes);

}  // namespace phoenix::raytrace
