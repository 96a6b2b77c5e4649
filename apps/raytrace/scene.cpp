// apps/raytrace/scene.cpp — the scene file parser and writer; see scene.hpp for the grammar.
#include "apps/raytrace/scene.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <system_error>
#include <utility>

namespace phoenix::raytrace {
namespace {

struct KeySpec {
  std::string_view name;
  int arity;
};

constexpr KeySpec camera_keys[] = {{"pos", 3}, {"look", 3}, {"up", 3}, {"fov", 1}};
constexpr KeySpec image_keys[] = {{"width", 1}, {"height", 1},     {"samples", 1},
                                  {"depth", 1}, {"background", 3}, {"ambient", 1}};
constexpr KeySpec light_keys[] = {{"pos", 3}, {"colour", 3}, {"intensity", 1}};
constexpr KeySpec sphere_keys[] = {{"centre", 3},   {"radius", 1},    {"colour", 3}, {"diffuse", 1},
                                   {"specular", 1}, {"shininess", 1}, {"reflect", 1}};
constexpr KeySpec plane_keys[] = {{"point", 3},    {"normal", 3},    {"colour", 3},  {"diffuse", 1},
                                  {"specular", 1}, {"shininess", 1}, {"reflect", 1}, {"checker", 4}};

constexpr int max_arity = 4;

std::string format_number(double value) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);  // shortest form that reads back exactly
  return ec == std::errc() ? std::string(buf, end) : std::string("?");
}

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::vector<std::string_view> split_tokens(std::string_view line) {
  std::vector<std::string_view> tokens;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_blank(line[i])) ++i;
    std::size_t start = i;
    while (i < line.size() && !is_blank(line[i])) ++i;
    if (i > start) tokens.push_back(line.substr(start, i - start));
  }
  return tokens;
}

// One statement as read — its object word and the numbers of each key present — with checked accessors that
// fall back to the default when a key is absent and report out-of-range values with the line number.
class Statement {
 public:
  Statement(std::string_view source, int line, std::span<const std::string_view> tokens,
            std::span<const KeySpec> keys)
      : source_(source), line_(line), word_(tokens[0]) {
    for (std::size_t i = 1; i < tokens.size();) {
      const KeySpec* spec = find_spec(keys, tokens[i]);
      if (spec == nullptr) {
        fail("unknown key '" + std::string(tokens[i]) + "' (expected" + key_list(keys) + ")");
      }
      if (find(spec->name) != nullptr) fail("key '" + std::string(spec->name) + "' given twice");
      Entry entry{spec->name, spec->arity, {}};
      for (int k = 0; k < spec->arity; ++k) {
        std::size_t at = i + 1 + static_cast<std::size_t>(k);
        if (at >= tokens.size()) fail(arity_message(*spec, "found " + std::to_string(k)));
        entry.values[static_cast<std::size_t>(k)] = to_number(*spec, tokens[at]);
      }
      entries_.push_back(entry);
      i += 1 + static_cast<std::size_t>(spec->arity);
    }
  }

  bool has(std::string_view key) const { return find(key) != nullptr; }

  [[noreturn]] void fail(const std::string& message) const {
    throw SceneError(source_, line_, std::string(word_) + ": " + message);
  }

  Vec3 vec(std::string_view key, Vec3 fallback) const {
    const Entry* e = find(key);
    return e ? Vec3{e->values[0], e->values[1], e->values[2]} : fallback;
  }

  Vec3 required_vec(std::string_view key) const {
    if (!has(key)) fail("missing key '" + std::string(key) + "'");
    return vec(key, {});
  }

  Colour colour(std::string_view key, Colour fallback) const {
    Colour c = vec(key, fallback);
    if (c.x < 0 || c.y < 0 || c.z < 0) fail(std::string(key) + " components must be >= 0");
    return c;
  }

  double real(std::string_view key, double fallback) const {
    const Entry* e = find(key);
    return e ? e->values[0] : fallback;
  }

  double at_least(std::string_view key, double fallback, double lo) const {
    double v = real(key, fallback);
    if (v < lo) fail(std::string(key) + " must be >= " + format_number(lo) + ", got " + format_number(v));
    return v;
  }

  double positive(std::string_view key, double fallback) const {
    double v = real(key, fallback);
    if (!(v > 0)) fail(std::string(key) + " must be > 0, got " + format_number(v));
    return v;
  }

  double between(std::string_view key, double fallback, double lo, double hi) const {
    double v = real(key, fallback);
    if (v < lo || v > hi) fail(range_message(key, lo, hi, v));
    return v;
  }

  int whole(std::string_view key, int fallback, int lo, int hi) const {
    double v = real(key, fallback);
    if (v != std::floor(v) || v < lo || v > hi) fail(range_message(key, lo, hi, v) + " (a whole number)");
    return static_cast<int>(v);
  }

  // All numbers of `key` (empty when the key is absent).
  std::span<const double> values(std::string_view key) const {
    const Entry* e = find(key);
    return e ? std::span<const double>(e->values, static_cast<std::size_t>(e->arity))
             : std::span<const double>();
  }

 private:
  struct Entry {
    std::string_view key;
    int arity;
    double values[max_arity];
  };

  static const KeySpec* find_spec(std::span<const KeySpec> keys, std::string_view name) {
    auto it = std::find_if(keys.begin(), keys.end(), [&](const KeySpec& k) { return k.name == name; });
    return it == keys.end() ? nullptr : &*it;
  }

  static std::string key_list(std::span<const KeySpec> keys) {
    std::string list;
    for (const KeySpec& k : keys) list += " " + std::string(k.name);
    return list;
  }

  static std::string arity_message(const KeySpec& spec, const std::string& found) {
    return "'" + std::string(spec.name) + "' takes " + std::to_string(spec.arity) +
           (spec.arity == 1 ? " number" : " numbers") + ", " + found;
  }

  static std::string range_message(std::string_view key, double lo, double hi, double v) {
    return std::string(key) + " must be in [" + format_number(lo) + ", " + format_number(hi) + "], got " +
           format_number(v);
  }

  double to_number(const KeySpec& spec, std::string_view token) const {
    double v = 0;
    auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
    if (ec != std::errc() || end != token.data() + token.size() || !std::isfinite(v)) {
      fail(arity_message(spec, "and '" + std::string(token) + "' is not a finite number"));
    }
    return v;
  }

  const Entry* find(std::string_view key) const {
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == key; });
    return it == entries_.end() ? nullptr : &*it;
  }

  std::string_view source_;
  int line_;
  std::string_view word_;
  std::vector<Entry> entries_;
};

void read_camera(const Statement& s, Camera& camera) {
  camera.position = s.vec("pos", camera.position);
  camera.look_at = s.vec("look", camera.look_at);
  camera.up = s.vec("up", camera.up);
  camera.fov_deg = s.real("fov", camera.fov_deg);
  if (!(camera.fov_deg > 0 && camera.fov_deg < 180)) {
    s.fail("fov must be between 0 and 180 degrees (exclusive), got " + format_number(camera.fov_deg));
  }
  // The renderer builds its view basis from these; a degenerate basis would give NaN pixels.
  Vec3 forward = camera.look_at - camera.position;
  if (length(forward) == 0) s.fail("look must differ from pos");
  if (length(cross(normalize(forward), camera.up)) <= 1e-9 * length(camera.up)) {
    s.fail("up must not be zero or parallel to the viewing direction");
  }
}

void read_image(const Statement& s, Scene& scene) {
  scene.width = s.whole("width", scene.width, 1, 16384);
  scene.height = s.whole("height", scene.height, 1, 16384);
  scene.samples = s.whole("samples", scene.samples, 1, 16);
  scene.max_depth = s.whole("depth", scene.max_depth, 0, 32);
  scene.background = s.colour("background", scene.background);
  scene.ambient = s.at_least("ambient", scene.ambient, 0);
}

Light read_light(const Statement& s) {
  Light light;
  light.position = s.required_vec("pos");
  light.colour = s.colour("colour", light.colour);
  light.intensity = s.at_least("intensity", light.intensity, 0);
  return light;
}

Material read_material(const Statement& s) {
  Material m;
  m.colour = s.colour("colour", m.colour);
  m.diffuse = s.at_least("diffuse", m.diffuse, 0);
  m.specular = s.at_least("specular", m.specular, 0);
  m.shininess = s.whole("shininess", m.shininess, 0, 10000);
  m.reflect = s.between("reflect", m.reflect, 0, 1);
  return m;
}

Sphere read_sphere(const Statement& s) {
  Sphere sphere;
  sphere.centre = s.required_vec("centre");
  if (!s.has("radius")) s.fail("missing key 'radius'");
  sphere.radius = s.positive("radius", sphere.radius);
  sphere.material = read_material(s);
  return sphere;
}

Plane read_plane(const Statement& s) {
  Plane plane;
  plane.point = s.required_vec("point");
  plane.normal = s.required_vec("normal");
  if (length(plane.normal) == 0) s.fail("normal must not be zero");
  plane.material = read_material(s);
  if (std::span<const double> v = s.values("checker"); !v.empty()) {
    Checker checker{v[0], {v[1], v[2], v[3]}};
    if (!(checker.size > 0)) s.fail("checker size must be > 0, got " + format_number(checker.size));
    if (checker.colour.x < 0 || checker.colour.y < 0 || checker.colour.z < 0) {
      s.fail("checker colour components must be >= 0");
    }
    plane.checker = checker;
  }
  return plane;
}

struct ObjectSpec {
  std::string_view word;
  std::span<const KeySpec> keys;
};

constexpr ObjectSpec objects[] = {{"camera", camera_keys},
                                  {"image", image_keys},
                                  {"light", light_keys},
                                  {"sphere", sphere_keys},
                                  {"plane", plane_keys}};

const ObjectSpec* find_object(std::string_view word) {
  for (const ObjectSpec& o : objects) {
    if (o.word == word) return &o;
  }
  return nullptr;
}

// Builds a Scene one line at a time; remembers where camera and image were set, as each may appear once.
class SceneReader {
 public:
  explicit SceneReader(std::string_view source) : source_(source) {}

  void read_line(std::string_view line, int line_number) {
    line = line.substr(0, line.find('#'));
    std::vector<std::string_view> tokens = split_tokens(line);
    if (tokens.empty()) return;
    const ObjectSpec* object = find_object(tokens[0]);
    if (object == nullptr) {
      throw SceneError(
          source_, line_number,
          "unknown object '" + std::string(tokens[0]) + "' (expected camera image light sphere plane)");
    }
    Statement s(source_, line_number, tokens, object->keys);
    if (object->word == "camera") {
      claim_once(object->word, camera_line_, line_number);
      read_camera(s, scene_.camera);
    } else if (object->word == "image") {
      claim_once(object->word, image_line_, line_number);
      read_image(s, scene_);
    } else if (object->word == "light") {
      scene_.lights.push_back(read_light(s));
    } else if (object->word == "sphere") {
      scene_.spheres.push_back(read_sphere(s));
    } else {
      scene_.planes.push_back(read_plane(s));
    }
  }

  Scene take() { return std::move(scene_); }

 private:
  void claim_once(std::string_view word, int& first_line, int line_number) const {
    if (first_line != 0) {
      throw SceneError(
          source_, line_number,
          "second " + std::string(word) + " line (the first is line " + std::to_string(first_line) + ")");
    }
    first_line = line_number;
  }

  std::string_view source_;
  Scene scene_;
  int camera_line_ = 0;
  int image_line_ = 0;
};

void append_vec(std::string& out, std::string_view key, Vec3 v) {
  out += ' ';
  out += key;
  for (double c : {v.x, v.y, v.z}) out += ' ' + format_number(c);
}

void append_number(std::string& out, std::string_view key, double v) {
  out += ' ';
  out += key;
  out += ' ' + format_number(v);
}

void append_material(std::string& out, const Material& m) {
  append_vec(out, "colour", m.colour);
  append_number(out, "diffuse", m.diffuse);
  append_number(out, "specular", m.specular);
  append_number(out, "shininess", m.shininess);
  append_number(out, "reflect", m.reflect);
}

}  // namespace

SceneError::SceneError(std::string_view source_name, int line, std::string_view message)
    : std::runtime_error(std::string(source_name) + ":" + std::to_string(line) + ": " + std::string(message)),
      line_(line) {}

Scene parse_scene(std::string_view text, std::string_view source_name) {
  SceneReader reader(source_name);
  int line_number = 0;
  for (std::size_t pos = 0; pos <= text.size();) {
    std::size_t end = std::min(text.find('\n', pos), text.size());
    reader.read_line(text.substr(pos, end - pos), ++line_number);
    pos = end + 1;
  }
  return reader.take();
}

Scene load_scene(const std::filesystem::path& file) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(file.c_str(), "rb"), &std::fclose);
  if (!f) {
    throw std::system_error(errno, std::generic_category(), "cannot open scene file '" + file.string() + "'");
  }
  std::string text;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) text.append(buf, n);
  if (std::ferror(f.get())) {
    throw std::system_error(errno, std::generic_category(), "cannot read scene file '" + file.string() + "'");
  }
  return parse_scene(text, file.string());
}

std::string format_scene(const Scene& scene) {
  std::string out = "camera";
  append_vec(out, "pos", scene.camera.position);
  append_vec(out, "look", scene.camera.look_at);
  append_vec(out, "up", scene.camera.up);
  append_number(out, "fov", scene.camera.fov_deg);
  out += "\nimage";
  append_number(out, "width", scene.width);
  append_number(out, "height", scene.height);
  append_number(out, "samples", scene.samples);
  append_number(out, "depth", scene.max_depth);
  append_vec(out, "background", scene.background);
  append_number(out, "ambient", scene.ambient);
  out += '\n';
  for (const Light& l : scene.lights) {
    out += "light";
    append_vec(out, "pos", l.position);
    append_vec(out, "colour", l.colour);
    append_number(out, "intensity", l.intensity);
    out += '\n';
  }
  for (const Sphere& s : scene.spheres) {
    out += "sphere";
    append_vec(out, "centre", s.centre);
    append_number(out, "radius", s.radius);
    append_material(out, s.material);
    out += '\n';
  }
  for (const Plane& p : scene.planes) {
    out += "plane";
    append_vec(out, "point", p.point);
    append_vec(out, "normal", p.normal);
    append_material(out, p.material);
    if (p.checker) {
      append_number(out, "checker", p.checker->size);
      for (double c : {p.checker->colour.x, p.checker->colour.y, p.checker->colour.z})
        out += ' ' + format_number(c);
    }
    out += '\n';
  }
  return out;
}

std::vector<std::uint8_t> scene_to_bytes(const Scene& scene) {
  std::string text = format_scene(scene);
  return {text.begin(), text.end()};
}

Scene scene_from_bytes(std::span<const std::uint8_t> bytes) {
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return parse_scene(text, "<scene bytes>");
}

}  // namespace phoenix::raytrace
