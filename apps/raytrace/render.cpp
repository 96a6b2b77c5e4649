// apps/raytrace/render.cpp — Whitted-style ray tracing: primary rays through an N×N grid in each pixel,
// Blinn-Phong diffuse + specular from point lights with hard shadows, an ambient term, and mirror reflection to
// a maximum depth. See render.hpp for why only +, -, *, / and sqrt appear here.
#include "apps/raytrace/render.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <string>

namespace phoenix::raytrace {
namespace {

constexpr double no_hit = std::numeric_limits<double>::infinity();
// Smallest distance along a ray that counts as a hit, and how far secondary rays start off the surface they
// leave: without the offset, rounding puts the origin a hair inside the surface and it shadows itself ("acne").
constexpr double min_hit_distance = 1e-9;
constexpr double surface_offset = 1e-6;

struct Ray {
  Vec3 origin;
  Vec3 dir;  // unit length
};

struct Hit {
  double t = no_hit;
  Vec3 point;
  Vec3 normal;  // unit length, facing the incoming ray
  Colour colour;
  const Material* material = nullptr;
};

// tan(x) for 0 < x < pi/2 from the Taylor series of sin and cos (30 terms each: the last is below 1e-60 there),
// using only + - * /. glibc's tan chooses an FMA or a plain variant by CPU at run time, so its last bit may
// differ between machines; the camera scale it gives enters every pixel.
double reproducible_tan(double x) {
  double sin = 0;
  double cos = 0;
  double sin_term = x;
  double cos_term = 1;
  for (int k = 0; k < 30; ++k) {
    sin += sin_term;
    cos += cos_term;
    sin_term *= -x * x / ((2.0 * k + 2) * (2.0 * k + 3));
    cos_term *= -x * x / ((2.0 * k + 1) * (2.0 * k + 2));
  }
  return sin / cos;
}

// base^exponent by repeated squaring: exact order of multiplications, unlike std::pow.
double power(double base, int exponent) {
  double result = 1;
  while (exponent > 0) {
    if (exponent & 1) result *= base;
    base *= base;
    exponent >>= 1;
  }
  return result;
}

std::uint8_t to_byte(double c) {
  if (!(c > 0)) return 0;  // also NaN, which a cast would make undefined
  if (c >= 1) return 255;
  return static_cast<std::uint8_t>(c * 255.0 + 0.5);
}

// Distance along `ray` to `sphere`, or no_hit.
double intersect(const Sphere& sphere, const Ray& ray) {
  Vec3 oc = ray.origin - sphere.centre;
  double b = dot(oc, ray.dir);
  double c = dot(oc, oc) - sphere.radius * sphere.radius;
  double discriminant = b * b - c;
  if (discriminant < 0) return no_hit;
  double root = std::sqrt(discriminant);
  double t = -b - root;
  if (t < min_hit_distance) t = -b + root;  // the ray starts inside the sphere
  return t < min_hit_distance ? no_hit : t;
}

// A plane with a unit normal and, for the checkerboard, two unit axes spanning it.
struct PreparedPlane {
  const Plane* plane;
  Vec3 normal;
  Vec3 u;
  Vec3 v;
};

PreparedPlane prepare(const Plane& plane) {
  Vec3 n = normalize(plane.normal);
  // Any axis not parallel to n gives a basis; pick the one furthest from it so the cross product is well
  // scaled.
  Vec3 helper = std::abs(n.x) < 0.9 ? Vec3{1, 0, 0} : Vec3{0, 1, 0};
  Vec3 u = normalize(cross(n, helper));
  return {&plane, n, u, cross(n, u)};
}

double intersect(const PreparedPlane& p, const Ray& ray) {
  double denominator = dot(p.normal, ray.dir);
  if (std::abs(denominator) < 1e-12) return no_hit;  // parallel to the plane
  double t = dot(p.plane->point - ray.origin, p.normal) / denominator;
  return t < min_hit_distance ? no_hit : t;
}

Colour surface_colour(const PreparedPlane& p, Vec3 point) {
  const Plane& plane = *p.plane;
  if (!plane.checker) return plane.material.colour;
  Vec3 local = point - plane.point;
  double cells =
      std::floor(dot(local, p.u) / plane.checker->size) + std::floor(dot(local, p.v) / plane.checker->size);
  // fmod rather than a cast to an integer: far from the camera the cell index may not fit one.
  return std::fmod(cells, 2.0) == 0 ? plane.material.colour : plane.checker->colour;
}

class Tracer {
 public:
  explicit Tracer(const Scene& scene) : scene_(scene) {
    const Camera& camera = scene.camera;
    // Left-handed screen axes, as in POV-Ray: looking along +z with +y up, +x is to the right.
    forward_ = normalize(camera.look_at - camera.position);
    right_ = normalize(cross(camera.up, forward_));
    up_ = cross(forward_, right_);
    half_height_ = reproducible_tan(camera.fov_deg * std::numbers::pi / 360.0);
    half_width_ = half_height_ * scene.width / scene.height;
    planes_.reserve(scene.planes.size());
    for (const Plane& plane : scene.planes) planes_.push_back(prepare(plane));
  }

  // The mean of the pixel's N×N samples, each at the centre of its cell of the pixel, summed in a fixed order.
  Colour pixel(int x, int y) const {
    const int n = scene_.samples;
    Colour sum;
    for (int sy = 0; sy < n; ++sy) {
      for (int sx = 0; sx < n; ++sx) {
        sum = sum + trace(primary_ray(x + (sx + 0.5) / n, y + (sy + 0.5) / n), 0);
      }
    }
    double count = static_cast<double>(n) * n;
    return {sum.x / count, sum.y / count, sum.z / count};
  }

  std::uint64_t rays() const { return rays_; }

 private:
  // The ray from the eye through image point (px, py), in pixels from the top-left corner of the image.
  Ray primary_ray(double px, double py) const {
    double sx = (2 * px / scene_.width - 1) * half_width_;
    double sy = (1 - 2 * py / scene_.height) * half_height_;
    return {scene_.camera.position, normalize(forward_ + right_ * sx + up_ * sy)};
  }

  // The nearest surface along `ray`; ties go to the object listed first, spheres before planes.
  Hit nearest_hit(const Ray& ray) const {
    ++rays_;
    Hit hit;
    const Sphere* sphere_hit = nullptr;
    const PreparedPlane* plane_hit = nullptr;
    for (const Sphere& sphere : scene_.spheres) {
      double t = intersect(sphere, ray);
      if (t < hit.t) {
        hit.t = t;
        sphere_hit = &sphere;
      }
    }
    for (const PreparedPlane& plane : planes_) {
      double t = intersect(plane, ray);
      if (t < hit.t) {
        hit.t = t;
        plane_hit = &plane;
      }
    }
    if (hit.t == no_hit) return hit;
    hit.point = ray.origin + ray.dir * hit.t;
    if (plane_hit != nullptr) {
      hit.normal = plane_hit->normal;
      hit.colour = surface_colour(*plane_hit, hit.point);
      hit.material = &plane_hit->plane->material;
    } else {
      hit.normal = (hit.point - sphere_hit->centre) * (1.0 / sphere_hit->radius);
      hit.colour = sphere_hit->material.colour;
      hit.material = &sphere_hit->material;
    }
    if (dot(hit.normal, ray.dir) > 0) hit.normal = -hit.normal;  // seen from behind or from inside
    return hit;
  }

  // Whether anything lies on `ray` closer than `distance`.
  bool is_blocked(const Ray& ray, double distance) const {
    ++rays_;
    for (const Sphere& sphere : scene_.spheres) {
      if (intersect(sphere, ray) < distance) return true;
    }
    for (const PreparedPlane& plane : planes_) {
      if (intersect(plane, ray) < distance) return true;
    }
    return false;
  }

  // The colour seen along `ray`, which is `depth` reflections from the eye. A reflective surface mixes its own
  // colour with the mirror image by its reflect weight; at the depth limit the mirror term is dropped and the
  // surface's own colour takes its whole weight, so depth 0 renders every surface matte.
  Colour trace(const Ray& ray, int depth) const {
    Hit hit = nearest_hit(ray);
    if (hit.material == nullptr) return scene_.background;
    const Material& m = *hit.material;
    Colour local = direct_light(ray, hit);
    if (m.reflect <= 0 || depth >= scene_.max_depth) return local;
    Vec3 reflected = ray.dir - hit.normal * (2 * dot(ray.dir, hit.normal));
    Colour mirror = trace({hit.point + hit.normal * surface_offset, reflected}, depth + 1);
    return local * (1 - m.reflect) + mirror * m.reflect;
  }

  // Ambient plus, for every light the point sees, Lambert diffuse and a white Blinn-Phong highlight. Lights do
  // not fall off with distance, which keeps scene files easy to balance.
  Colour direct_light(const Ray& ray, const Hit& hit) const {
    const Material& m = *hit.material;
    Colour colour = hit.colour * scene_.ambient;
    Vec3 origin = hit.point + hit.normal * surface_offset;
    for (const Light& light : scene_.lights) {
      Vec3 to_light = light.position - origin;
      double distance = length(to_light);
      if (distance == 0) continue;
      Vec3 l = to_light * (1.0 / distance);
      double lambert = dot(hit.normal, l);
      if (lambert <= 0 || is_blocked({origin, l}, distance)) continue;
      Colour incoming = light.colour * light.intensity;
      Vec3 halfway = normalize(l - ray.dir);
      double highlight = power(std::max(0.0, dot(hit.normal, halfway)), m.shininess);
      colour = colour + hit.colour * incoming * (m.diffuse * lambert) + incoming * (m.specular * highlight);
    }
    return colour;
  }

  const Scene& scene_;
  Vec3 forward_;
  Vec3 right_;
  Vec3 up_;
  double half_width_ = 0;
  double half_height_ = 0;
  std::vector<PreparedPlane> planes_;
  mutable std::uint64_t rays_ = 0;  // traced so far: nearest-hit and shadow tests
};

}  // namespace

Tile full_frame(const Scene& scene) { return {0, 0, scene.width, scene.height}; }

bool tile_fits(const Scene& scene, const Tile& tile) {
  return tile.x0 >= 0 && tile.y0 >= 0 && tile.width >= 0 && tile.height >= 0 &&
         static_cast<long long>(tile.x0) + tile.width <= scene.width &&
         static_cast<long long>(tile.y0) + tile.height <= scene.height;
}

std::uint64_t render_tile(const Scene& scene, const Tile& tile, std::span<std::uint8_t> rgb) {
  if (!tile_fits(scene, tile)) {
    throw std::invalid_argument("render_tile: tile (" + std::to_string(tile.x0) + ", " +
                                std::to_string(tile.y0) + ") " + std::to_string(tile.width) + "x" +
                                std::to_string(tile.height) + " does not fit the " +
                                std::to_string(scene.width) + "x" + std::to_string(scene.height) + " image");
  }
  std::size_t expected =
      std::size_t{3} * static_cast<std::size_t>(tile.width) * static_cast<std::size_t>(tile.height);
  if (rgb.size() != expected) {
    throw std::invalid_argument("render_tile: buffer holds " + std::to_string(rgb.size()) +
                                " bytes, the tile needs " + std::to_string(expected));
  }
  Tracer tracer(scene);
  std::size_t at = 0;
  for (int y = tile.y0; y < tile.y0 + tile.height; ++y) {
    for (int x = tile.x0; x < tile.x0 + tile.width; ++x) {
      Colour c = tracer.pixel(x, y);
      rgb[at++] = to_byte(c.x);
      rgb[at++] = to_byte(c.y);
      rgb[at++] = to_byte(c.z);
    }
  }
  return tracer.rays();
}

std::vector<std::uint8_t> render_tile(const Scene& scene, const Tile& tile, std::uint64_t* rays) {
  std::vector<std::uint8_t> rgb;
  if (tile_fits(scene, tile)) {
    rgb.resize(std::size_t{3} * static_cast<std::size_t>(tile.width) * static_cast<std::size_t>(tile.height));
  }
  const std::uint64_t traced = render_tile(scene, tile, std::span<std::uint8_t>(rgb));  // throws: does not fit
  if (rays) *rays += traced;
  return rgb;
}

std::vector<std::uint8_t> render_image(const Scene& scene, std::uint64_t* rays) {
  return render_tile(scene, full_frame(scene), rays);
}

std::uint64_t fnv1a_64(std::span<const std::uint8_t> bytes) {
  std::uint64_t hash = 14695981039346656037ull;
  for (std::uint8_t b : bytes) {
    hash ^= b;
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace phoenix::raytrace
