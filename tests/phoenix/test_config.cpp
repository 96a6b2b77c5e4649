// Tests of phoenix/config.hpp: the shipped example configs, layering, share arithmetic, number syntax,
// strictness (unknown keys, wrong types), environment overrides and validate(). Over 600 lines as one file:
// every case reads the same table of keys (phoenix/config_keys.hpp) through one entry point.
#include <phoenix/config.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <toml.hpp>

#include "phoenix/config_file.hpp"
#include "phoenix/config_keys.hpp"

#ifndef PHOENIX_SOURCE_DIR
#define PHOENIX_SOURCE_DIR "/work/main"  // the build defines it; this is only for building the test by hand
#endif

namespace fs = std::filesystem;
using phoenix::Config;
using phoenix::Interval;
using phoenix::Share;

namespace {

constexpr std::uint64_t kL62 = std::uint64_t{1} << 62;

// A fresh directory per test, removed at the end, so tests never see each other's files.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "phoenix-config-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) FAIL("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, const std::string& text) const {
    const fs::path file = path_ / name;
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file;
  }

 private:
  fs::path path_;
};

// A fake environment: lookup returns nullptr for unset variables, like getenv.
struct FakeEnv {
  std::map<std::string, std::string> vars;
  phoenix::EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Loads `text` as a file and returns the error ("" when it loaded).
std::string load_error(const std::string& text, std::string_view node = {}) {
  TempDir dir;
  return phoenix::load_config(dir.write("c.toml", text), node).error;
}

Config load_ok(const std::string& text, std::string_view node = {}) {
  TempDir dir;
  auto r = phoenix::load_config(dir.write("c.toml", text), node);
  INFO(r.error);
  REQUIRE(r.ok());
  return r.config;
}

// True when the intervals cover [0, L) exactly once.
bool disjoint_cover(std::vector<Interval> parts, std::uint64_t space_size) {
  std::sort(parts.begin(), parts.end(), [](Interval a, Interval b) { return a.lo < b.lo; });
  std::uint64_t next = 0;
  for (Interval s : parts) {
    if (s.lo != next || s.empty()) return false;
    next = s.hi;
  }
  return next == space_size;
}

}  // namespace

TEST_CASE("config: defaults are valid and documented values") {
  Config c;
  CHECK(phoenix::validate(c) == "");
  CHECK(c.name.empty());
  CHECK(c.listen == "tcp://127.0.0.1:0");
  CHECK(c.space_size == kL62);
  CHECK(c.log_level == "warn");
  CHECK(c.retry_interval_ms == 1000);
  CHECK(c.max_waiting_bytes == 256ull << 20);
  CHECK(c.max_message_bytes == 64ull << 20);
  CHECK(c.link_window_bytes == 8ull << 20);
  CHECK(c.full_dump_interval_ms == 10000);
  CHECK(c.hop_limit == 64);
  CHECK(c.assume.empty());
  CHECK_FALSE(c.share.has_value());
  CHECK(c.ssh_identity.empty());
  CHECK(c.ssh_known_hosts.empty());
  CHECK(c.ssh_host_key_policy == "strict");
  CHECK(phoenix::default_node_name() == "n" + std::to_string(::getpid()));

  // An empty file is the defaults.
  Config f = load_ok("");
  CHECK(f.listen == c.listen);
  CHECK(f.space_size == c.space_size);
  CHECK(f.hop_limit == c.hop_limit);
}

TEST_CASE("config: shipped examples load and validate for every node") {
  struct Example {
    std::string file;
    std::vector<std::string> nodes;
  };
  const std::vector<Example> examples = {
      {"local-3.toml", {"n0", "n1", "n2"}},
      {"line-5.toml", {"n0", "n1", "n2", "n3", "n4"}},
      {"star-5.toml", {"n0", "n1", "n2", "n3", "n4"}},
  };
  const fs::path dir = fs::path(PHOENIX_SOURCE_DIR) / "config";
  for (const auto& ex : examples) {
    const fs::path file = dir / ex.file;
    CAPTURE(file);
    REQUIRE(fs::exists(file));

    // The file's sections are exactly the expected nodes (the README and these tests name them).
    const toml::value root = toml::parse(file);
    std::set<std::string> sections;
    for (const auto& [name, t] : toml::find(root, "node").as_table()) sections.insert(name);
    CHECK(sections == std::set<std::string>(ex.nodes.begin(), ex.nodes.end()));

    // Top level alone is fine too (a node that is not one of the listed ones).
    auto top = phoenix::load_config(file);
    CHECK_MESSAGE(top.ok(), top.error);
    CHECK(phoenix::validate(top.config) == "");

    std::vector<Interval> all;
    std::map<std::string, std::string> listen_of;  // endpoint -> node
    std::map<std::string, std::vector<std::string>> peers_of;
    std::uint64_t space_size = 0;
    for (const auto& node : ex.nodes) {
      CAPTURE(node);
      auto r = phoenix::load_config(file, node);
      REQUIRE_MESSAGE(r.ok(), r.error);
      CHECK(phoenix::validate(r.config) == "");
      CHECK(r.config.name == node);
      CHECK(r.config.cluster_key_file == (fs::absolute(dir) / "cluster.key").lexically_normal().string());
      CHECK(r.config.share.has_value());
      CHECK(r.config.assume.size() == 1);
      all.insert(all.end(), r.config.assume.begin(), r.config.assume.end());
      CHECK(listen_of.emplace(r.config.listen, node).second);  // every node binds its own port
      peers_of[node] = r.config.peers;
      if (space_size == 0) space_size = r.config.space_size;
      CHECK(r.config.space_size == space_size);  // L must agree across the cluster
    }
    // The shares cover [0, L) exactly once: the static partition of the paper's section 3.5.
    CHECK(disjoint_cover(all, space_size));

    // Every peer is another node of the file, and the links connect all nodes (the paper's one requirement
    // on ph_add_port: a single connected component).
    std::map<std::string, std::set<std::string>> adjacent;
    for (const auto& entry : peers_of) {  // named, not bound: REQUIRE_MESSAGE captures them
      const auto& node = entry.first;
      const auto& peers = entry.second;
      for (const auto& p : peers) {
        REQUIRE_MESSAGE(listen_of.count(p) == 1, node << " dials " << p << ", which no node of the file binds");
        CHECK(listen_of[p] != node);
        adjacent[node].insert(listen_of[p]);
        adjacent[listen_of[p]].insert(node);
      }
    }
    std::set<std::string> seen = {ex.nodes.front()};
    std::vector<std::string> todo = {ex.nodes.front()};
    while (!todo.empty()) {
      const std::string n = todo.back();
      todo.pop_back();
      for (const auto& m : adjacent[n])
        if (seen.insert(m).second) todo.push_back(m);
    }
    CHECK(seen.size() == ex.nodes.size());

    // A node name the file does not have is an error that lists the ones it has.
    auto missing = phoenix::load_config(file, "n9");
    CHECK_FALSE(missing.ok());
    CHECK(contains(missing.error, "[node.n9]"));
    CHECK(contains(missing.error, "n0"));
  }
}

TEST_CASE("config: examples with the shipped key path find a key created next to them") {
  // As the README says: copy the example, create cluster.key beside it, and the node finds it wherever it runs.
  TempDir dir;
  const fs::path copy = dir.path() / "local-3.toml";
  fs::copy_file(fs::path(PHOENIX_SOURCE_DIR) / "config" / "local-3.toml", copy);
  dir.write("cluster.key", "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3I=\n");
  fs::permissions(dir.path() / "cluster.key", fs::perms::owner_read | fs::perms::owner_write);
  auto r = phoenix::load_config(copy, "n1");
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(fs::path(r.config.cluster_key_file).is_absolute());
  CHECK(fs::exists(r.config.cluster_key_file));
  CHECK(fs::equivalent(r.config.cluster_key_file, dir.path() / "cluster.key"));
}

TEST_CASE("config: precedence defaults < top level < [node.NAME] < environment") {
  TempDir dir;
  const fs::path file = dir.write("c.toml", R"(
hop_limit = 10
log_level = "info"
peers = ["tcp://top:1"]
retry_interval_ms = 500

[node.a]
hop_limit = 20
peers = ["tcp://a:1", "tcp://a:2"]

[node.b]
name = "bee"
)");
  // Top level only.
  auto top = phoenix::load_config(file);
  REQUIRE_MESSAGE(top.ok(), top.error);
  CHECK(top.config.hop_limit == 10);
  CHECK(top.config.name.empty());
  CHECK(top.config.full_dump_interval_ms == 10000);  // untouched default

  // The node table overrides key by key; a list is replaced, not appended to.
  auto a = phoenix::load_config(file, "a");
  REQUIRE_MESSAGE(a.ok(), a.error);
  CHECK(a.config.name == "a");
  CHECK(a.config.hop_limit == 20);
  CHECK(a.config.log_level == "info");
  CHECK(a.config.retry_interval_ms == 500);
  CHECK(a.config.peers == std::vector<std::string>{"tcp://a:1", "tcp://a:2"});

  // A table may name its node differently; keys it does not set come from the top level.
  auto b = phoenix::load_config(file, "b");
  REQUIRE_MESSAGE(b.ok(), b.error);
  CHECK(b.config.name == "bee");
  CHECK(b.config.hop_limit == 10);
  CHECK(b.config.peers == std::vector<std::string>{"tcp://top:1"});

  // The environment wins over both.
  FakeEnv env;
  env.vars = {{"PHOENIX_CONFIG", file.string()}, {"PHOENIX_NODE", "a"}, {"PHOENIX_HOP_LIMIT", "30"}};
  auto e = phoenix::config_from_environment(env.lookup());
  REQUIRE_MESSAGE(e.ok(), e.error);
  CHECK(e.config.name == "a");
  CHECK(e.config.hop_limit == 30);
  CHECK(e.config.log_level == "info");
  CHECK(e.config.peers.size() == 2);
}

TEST_CASE("config: share partition arithmetic") {
  // L divisible by n.
  CHECK(phoenix::share_part(12, {0, 3}) == Interval{0, 4});
  CHECK(phoenix::share_part(12, {1, 3}) == Interval{4, 8});
  CHECK(phoenix::share_part(12, {2, 3}) == Interval{8, 12});
  // L not divisible: the last part takes the remainder.
  CHECK(phoenix::share_part(10, {0, 3}) == Interval{0, 3});
  CHECK(phoenix::share_part(10, {1, 3}) == Interval{3, 6});
  CHECK(phoenix::share_part(10, {2, 3}) == Interval{6, 10});
  CHECK(phoenix::share_part(7, {3, 4}) == Interval{3, 7});
  // One part is everything; as many parts as virtual nodes is one each.
  CHECK(phoenix::share_part(kL62, {0, 1}) == Interval{0, kL62});
  CHECK(phoenix::share_part(5, {4, 5}) == Interval{4, 5});
  // The default L and the largest L: no overflow, and the parts cover the space exactly once.
  for (std::uint64_t L : {kL62, std::numeric_limits<std::uint64_t>::max(), std::uint64_t{1000003}}) {
    for (std::uint64_t n : {1u, 2u, 3u, 5u, 7u, 64u}) {
      std::vector<Interval> parts;
      for (std::uint64_t i = 0; i < n; ++i) parts.push_back(phoenix::share_part(L, {i, n}));
      CAPTURE(L);
      CAPTURE(n);
      CHECK(disjoint_cover(parts, L));
    }
  }
  CHECK(phoenix::share_part(kL62, {1, 3}) == Interval{kL62 / 3, 2 * (kL62 / 3)});
  CHECK(phoenix::share_part(kL62, {2, 3}).hi == kL62);

  // In a file: resolved with the final space_size, even when the node table sets L after a top-level share.
  Config c = load_ok("share = [2, 3]\n[node.x]\nspace_size = 10\n", "x");
  CHECK(c.assume == std::vector<Interval>{{6, 10}});
  CHECK(c.share == Share{2, 3});
  CHECK(load_ok("space_size = 10\nshare = \"1/3\"\n").assume == std::vector<Interval>{{3, 6}});
  // Explicit intervals and a share together.
  c = load_ok("space_size = 100\nshare = [1, 2]\nassume = [{lo = 0, hi = 10}, {lo = \"2^4\", hi = 20}]\n");
  CHECK(c.assume == std::vector<Interval>{{0, 10}, {16, 20}, {50, 100}});
  CHECK(phoenix::validate(c) == "");

  // Bad shares are load errors naming the key.
  std::string err = load_error("share = [3, 3]\n");
  CHECK(contains(err, "c.toml:1: share:"));
  CHECK(contains(err, "i < n"));
  CHECK(contains(load_error("share = [0, 0]\n"), "n >= 1"));
  CHECK(contains(load_error("share = [0, 1, 2]\n"), "share: expected [i, n]"));
  CHECK(contains(load_error("share = [-1, 2]\n"), "must not be negative"));
  CHECK(contains(load_error("share = \"1-3\"\n"), "i/n"));
  err = load_error("space_size = 2\nshare = [0, 3]\n");
  CHECK(contains(err, "c.toml:2: share:"));
  CHECK(contains(err, "more parts than space_size"));
}

TEST_CASE("config: sizes accept binary suffixes and powers, and nothing vague") {
  Config c = load_ok(R"(
max_waiting_bytes = "256MiB"
link_window_bytes = "8KiB"
max_message_bytes = "1 GiB"
space_size = "2^62"
)");
  CHECK(c.max_waiting_bytes == 256ull << 20);
  CHECK(c.link_window_bytes == 8ull << 10);
  CHECK(c.max_message_bytes == 1ull << 30);
  CHECK(c.space_size == kL62);
  CHECK(load_ok("space_size = \"2^63\"").space_size == std::uint64_t{1} << 63);
  // Beyond 2^63 too few resource names would be left above L to draw from, and none at 2^64 - 1.
  CHECK(phoenix::validate(load_ok("space_size = \"2^63\"")).empty());
  CHECK(contains(phoenix::validate(load_ok("space_size = \"18446744073709551615\"")), "space_size must be in 1.."));
  CHECK(contains(phoenix::validate(load_ok("space_size = \"15EiB\"")), "(2^63)"));
  CHECK(load_ok("space_size = \"10^18\"").space_size == 1000000000000000000ull);
  CHECK(load_ok("space_size = 1_000_000").space_size == 1000000);  // TOML's own integer syntax
  CHECK(load_ok("max_waiting_bytes = \"3B\"").max_waiting_bytes == 3);
  CHECK(load_ok("max_waiting_bytes = \"2TiB\"").max_waiting_bytes == 2ull << 40);
  CHECK(load_ok("hop_limit = \"12\"").hop_limit == 12);

  CHECK(contains(load_error("space_size = \"2^64\""), "too large"));
  CHECK(contains(load_error("space_size = \"18446744073709551616\""), "too large"));
  CHECK(contains(load_error("max_waiting_bytes = \"16EiB\""), "too large"));
  std::string err = load_error("max_waiting_bytes = \"256MB\"");  // 10^6 or 2^20? refused
  CHECK(contains(err, "max_waiting_bytes"));
  CHECK(contains(err, "MiB"));
  CHECK(contains(load_error("max_message_bytes = \"1.5MiB\""), "is not a size"));
  CHECK(contains(load_error("max_message_bytes = \"MiB\""), "is not a size"));
  CHECK(contains(load_error("max_message_bytes = \"-1\""), "is not a size"));
  CHECK(contains(load_error("max_message_bytes = -1"), "must not be negative"));
  CHECK(contains(load_error("max_message_bytes = 1.5"), "got floating"));
  // Suffixes make no sense for counts and milliseconds.
  CHECK(contains(load_error("retry_interval_ms = \"1KiB\""),
                 "retry_interval_ms: \"1KiB\" is not a non-negative integer"));
  CHECK(contains(load_error("hop_limit = \"2^3\""), "hop_limit"));
  // 32-bit fields refuse what does not fit instead of wrapping.
  CHECK(contains(load_error("hop_limit = 4294967296"), "out of range"));
  CHECK(load_ok("full_dump_interval_ms = 4294967295").full_dump_interval_ms == 4294967295u);
}

TEST_CASE("config: unknown keys are errors with file, line and a suggestion") {
  std::string err = load_error("hop_limit = 3\n\nhop_limt = 4\n");
  CHECK(contains(err, "c.toml:3: hop_limt: unknown key"));
  CHECK(contains(err, "did you mean hop_limit?"));
  CHECK(err.find('\n') == std::string::npos);

  CHECK(contains(load_error("frobnicate = 1\n"), "frobnicate: unknown key"));
  CHECK(contains(load_error("[nodes.a]\nlisten = \"tcp://x:1\"\n"), "did you mean node?"));

  // A typo in any node table fails every node, not only the node it belongs to.
  const std::string file = "[node.a]\nhop_limit = 1\n[node.b]\nlisten_on = \"tcp://x:1\"\n";
  err = load_error(file, "a");
  CHECK(contains(err, "c.toml:4: node.b.listen_on: unknown key"));
  CHECK(contains(err, "did you mean listen?"));
  CHECK(contains(load_error(file), "node.b.listen_on"));

  CHECK(contains(load_error("[node.a.node.b]\nhop_limit = 1\n", "a"), "node.a.node: node tables cannot nest"));
  CHECK(contains(load_error("assume = [{lo = 1, high = 2}]\n"), "assume[0].high: unknown key"));
}

TEST_CASE("config: wrong types name the key and the line") {
  std::string err = load_error("listen = \"tcp://x:1\"\nhop_limit = true\n");
  CHECK(contains(err, "c.toml:2: hop_limit:"));
  CHECK(contains(err, "got boolean"));
  CHECK(err.find('\n') == std::string::npos);

  CHECK(contains(load_error("listen = 5\n"), "listen: expected a string, got integer"));
  CHECK(contains(load_error("peers = \"tcp://x:1\"\n"), "peers: expected an array of strings, got string"));
  CHECK(contains(load_error("peers = [\"tcp://x:1\", 2]\n"),
                 "peers: expected an array of strings, got integer in it"));
  CHECK(
      contains(load_error("[node.a]\nlog_level = 3\n", "a"), "c.toml:2: node.a.log_level: expected a string"));
  CHECK(contains(load_error("assume = {lo = 1, hi = 2}\n"), "assume: expected an array"));
  CHECK(contains(load_error("assume = [[1, 2]]\n"), "assume[0]: expected a {lo = ..., hi = ...} table"));
  CHECK(contains(load_error("assume = [{lo = 1}]\n"), "assume[0]: needs both lo and hi"));
  CHECK(contains(load_error("assume = [{lo = 1, hi = true}]\n"), "assume[0].hi:"));
  CHECK(contains(load_error("node = 3\n"), "node: expected [node.NAME] tables"));
  CHECK(
      contains(load_error("[node]\nlisten = \"tcp://x:1\"\n"), "node.listen: expected a [node.listen] table"));
  CHECK(contains(load_error("cluster_key_file = 1\n"), "cluster_key_file: expected a string"));
}

TEST_CASE("config: syntax errors and unreadable files are one-line errors") {
  std::string err = load_error("hop_limit = 3\nlisten =\n");
  CHECK(contains(err, "c.toml:2: TOML syntax error:"));
  CHECK(err.find('\n') == std::string::npos);

  err = load_error("hop_limit = 3\nhop_limit = 4\n");  // duplicate keys are TOML errors
  CHECK(contains(err, "c.toml:2:"));
  CHECK(err.find('\n') == std::string::npos);

  auto r = phoenix::load_config("/nonexistent/phoenix/c.toml");
  CHECK_FALSE(r.ok());
  CHECK(contains(r.error, "/nonexistent/phoenix/c.toml: cannot open: No such file or directory"));

  TempDir dir;
  CHECK(contains(phoenix::load_config(dir.path()).error, "is a directory"));
}

TEST_CASE("config: a file nested deeper than the limit is an error naming the file, line and limit") {
  const std::size_t deep = 10000;
  std::string err = load_error("x = " + std::string(deep, '[') + std::string(deep, ']') + "\n");
  CHECK(contains(err, "c.toml:1: nested deeper than 32 levels"));
  err = load_error("hop_limit = 3\nx = " + std::string(deep, '{') + "\n");
  CHECK(contains(err, "c.toml:2: nested deeper than 32"));
  std::string dotted = "a";
  for (int i = 0; i < 100; ++i) dotted += ".a";
  CHECK(contains(load_error(dotted + " = 1\n"), "nested deeper than 32"));
  // Nor can a string that ends in a quote of its own hide nesting after it; line continuations count as lines.
  CHECK(contains(load_error("a = [\"\"\"x\"\"\"\", " + std::string(deep, '[') + std::string(deep, ']') + "]\n"),
                 "c.toml:1: nested deeper than 32"));
  CHECK(contains(load_error("s = \"\"\"a\\\nb\"\"\"\nx = 1\na = " + std::string(40, '[') + std::string(40, ']') + "\n"),
                 "c.toml:4: nested deeper than 32"));
  // Brackets in strings and comments, and dots in values, are not nesting.
  const std::string quoted(100, '[');
  CHECK_FALSE(contains(load_error("# " + quoted + "\nname = \"" + quoted + "\"\nx = '" + quoted + "'\n"), "nested"));
}

TEST_CASE("config: a table header or dotted key through an empty array is an error, not a crash") {
  // toml11 alone dereferences the empty array's first element here (phoenix/config_file.hpp).
  CHECK(contains(load_error("peers = []\n[peers.b]\n"), "c.toml:1: peers: is an empty array"));
  CHECK(contains(load_error("peers = [ ]\npeers.b = 1\n"), "c.toml:1: peers: is an empty array"));
  CHECK(contains(load_error("[node.a]\npeers = []\n[node.a.peers.c]\n"), "c.toml:2: node.a.peers: is an empty"));
  CHECK(contains(load_error("peers = []\n[[peers.b]]\n"), "peers: is an empty array"));
  // Empty arrays still read as empty, and lines keep their numbers past one that spans lines.
  const Config c = load_ok("peers = [ # none yet\n\n]\nassume = []\n[node.a]\n", "a");
  CHECK(c.peers.empty());
  CHECK(c.assume.empty());
  CHECK(contains(load_error("peers = [\n# none\n]\nhop_limit = -1\n"), "c.toml:4: hop_limit:"));
  CHECK(contains(load_error("x = [[], [1]]\n"), "c.toml:1: x: unknown key"));
  // A multi-line string may end in one or two quotes of its own: what follows it is still scanned.
  CHECK(contains(load_error("t = {s = \"\"\"x\"\"\"\", e = [], e.f = 1}\n"), "t.e: is an empty array"));
  CHECK(contains(load_error("t = {s = '''x'''', e = [], e.f = 1}\n"), "t.e: is an empty array"));
  // The marker is phoenix's: a file that writes it gets an error, not an array read as empty.
  CHECK(contains(load_error("peers = [{\"\\u0001phoenix: an empty array\" = true}]\n"), "reserves"));
}

TEST_CASE("config: measure_toml_depth counts arrays, inline tables and dotted keys, not strings or floats") {
  CHECK(phoenix::measure_toml_depth("a = 1.5\nb = [[1], [2.5]]\n").depth == 2);
  CHECK(phoenix::measure_toml_depth("[a.b.c]\nx = 1\n").depth == 3);
  CHECK(phoenix::measure_toml_depth("a = { b = { c = 1 } }\n").depth == 2);
  CHECK(phoenix::measure_toml_depth("a = \"[[[\"\nb = '''\n{{{\n'''\nc = \"\"\"x]\\\"[[\"\"\"\n").depth == 0);
  const auto d = phoenix::measure_toml_depth("a = 1\n\nb = [[[0]]]\n");
  CHECK(d.depth == 3);
  CHECK(d.line == 3);
}

TEST_CASE("config: /dev/zero and oversized files fail fast naming the file and the limit") {
  auto r = phoenix::load_config("/dev/zero");
  CHECK_FALSE(r.ok());
  CHECK(contains(r.error, "/dev/zero: larger than 1048576 bytes"));
  TempDir dir;
  const auto big = dir.write("big.toml", "# " + std::string(phoenix::max_config_file_bytes, 'x') + "\n");
  CHECK(contains(phoenix::load_config(big).error, "big.toml: larger than 1048576 bytes"));
  // Exactly at the limit is accepted by the reader.
  std::string text;
  const auto exact = dir.write("exact.toml", std::string(phoenix::max_config_file_bytes, '\n'));
  CHECK(phoenix::read_bounded_file(exact, phoenix::max_config_file_bytes, text) == "");
  CHECK(text.size() == phoenix::max_config_file_bytes);
}

TEST_CASE("config: relative cluster_key_file is relative to the file's directory") {
  TempDir dir;
  const fs::path file = dir.write("sub/c.toml",
                                  "cluster_key_file = \"keys/../cluster.key\"\n[node.a]\n[node.b]\n"
                                  "cluster_key_file = \"/etc/phoenix/b.key\"\n");
  const std::string expected = (dir.path() / "sub" / "cluster.key").string();
  auto a = phoenix::load_config(file, "a");
  REQUIRE_MESSAGE(a.ok(), a.error);
  CHECK(a.config.cluster_key_file == expected);
  auto b = phoenix::load_config(file, "b");  // absolute paths stay as they are
  REQUIRE_MESSAGE(b.ok(), b.error);
  CHECK(b.config.cluster_key_file == "/etc/phoenix/b.key");

  // The file named by a path relative to the working directory: the key path still comes out absolute.
  const fs::path relative = fs::relative(file);
  REQUIRE(relative.is_relative());
  auto r = phoenix::load_config(relative, "a");
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.config.cluster_key_file == expected);

  CHECK(
      load_ok("cluster_key_file = \"\"\n").cluster_key_file.empty());  // empty still means the development key

  // From the environment a relative path is left for the node to take relative to its working directory.
  FakeEnv env;
  env.vars = {{"PHOENIX_CLUSTER_KEY_FILE", "my.key"}};
  Config c;
  CHECK(phoenix::apply_environment(c, env.lookup()) == "");
  CHECK(c.cluster_key_file == "my.key");
}

TEST_CASE("config: every environment variable overrides its key") {
  FakeEnv env;
  env.vars = {
      {"PHOENIX_NAME", "worker-7"},
      {"PHOENIX_LISTEN", "tcp://0.0.0.0:5000"},
      {"PHOENIX_PEERS", "tcp://a:1, tcp://b:2 ,ssh://user@gw/127.0.0.1:3"},
      {"PHOENIX_SPACE_SIZE", "2^40"},
      {"PHOENIX_LOG_LEVEL", "debug"},
      {"PHOENIX_CLUSTER_KEY_FILE", "/k"},
      {"PHOENIX_RETRY_INTERVAL_MS", "250"},
      {"PHOENIX_MAX_WAITING_BYTES", "1GiB"},
      {"PHOENIX_MAX_MESSAGE_BYTES", "1MiB"},
      {"PHOENIX_LINK_WINDOW_BYTES", "128KiB"},
      {"PHOENIX_FULL_DUMP_INTERVAL_MS", "2000"},
      {"PHOENIX_HOP_LIMIT", "16"},
      {"PHOENIX_END_TO_END_RESEND_MS", "5000"},
      {"PHOENIX_END_TO_END_ACK_DELAY_MS", "3"},
      {"PHOENIX_SHARE", "1/4"},
      {"PHOENIX_SSH_IDENTITY", "/keys/id"},
      {"PHOENIX_SSH_KNOWN_HOSTS", "~/kh"},
      {"PHOENIX_SSH_HOST_KEY_POLICY", "accept-new"},
  };
  Config c;
  REQUIRE(phoenix::apply_environment(c, env.lookup()) == "");
  CHECK(c.name == "worker-7");
  CHECK(c.listen == "tcp://0.0.0.0:5000");
  CHECK(c.peers == std::vector<std::string>{"tcp://a:1", "tcp://b:2", "ssh://user@gw/127.0.0.1:3"});
  CHECK(c.space_size == std::uint64_t{1} << 40);
  CHECK(c.log_level == "debug");
  CHECK(c.cluster_key_file == "/k");
  CHECK(c.retry_interval_ms == 250);
  CHECK(c.max_waiting_bytes == 1ull << 30);
  CHECK(c.max_message_bytes == 1ull << 20);
  CHECK(c.link_window_bytes == 128ull << 10);
  CHECK(c.full_dump_interval_ms == 2000);
  CHECK(c.hop_limit == 16);
  CHECK(c.end_to_end_resend_ms == 5000);
  CHECK(c.end_to_end_ack_delay_ms == 3);
  CHECK(c.share == Share{1, 4});
  CHECK(c.assume == std::vector<Interval>{{std::uint64_t{1} << 38, std::uint64_t{2} << 38}});
  CHECK(c.ssh_identity == "/keys/id");
  CHECK(c.ssh_known_hosts == "~/kh");
  CHECK(c.ssh_host_key_policy == "accept-new");
  CHECK(phoenix::validate(c) == "");

  // Unset and empty variables change nothing.
  Config d;
  env.vars = {{"PHOENIX_HOP_LIMIT", ""}, {"PHOENIX_PEERS", ""}};
  CHECK(phoenix::apply_environment(d, env.lookup()) == "");
  CHECK(d.hop_limit == 64);
  CHECK(d.peers.empty());
}

TEST_CASE("config: bad environment values are errors naming the variable, and change nothing") {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"PHOENIX_HOP_LIMIT", "abc"},
      {"PHOENIX_HOP_LIMIT", "-3"},
      {"PHOENIX_HOP_LIMIT", "4294967296"},
      {"PHOENIX_RETRY_INTERVAL_MS", "1s"},
      {"PHOENIX_FULL_DUMP_INTERVAL_MS", "10.5"},
      {"PHOENIX_SPACE_SIZE", "2^64"},
      {"PHOENIX_SPACE_SIZE", "lots"},
      {"PHOENIX_MAX_WAITING_BYTES", "1MB"},
      {"PHOENIX_MAX_MESSAGE_BYTES", "0x10"},
      {"PHOENIX_LINK_WINDOW_BYTES", "8 Ki"},
      {"PHOENIX_SHARE", "3/3"},
      {"PHOENIX_SHARE", "1"},
      {"PHOENIX_SHARE", "0/0"},
      {"PHOENIX_PEERS", "tcp://a:1,,tcp://b:2"},
      {"PHOENIX_PEERS", "tcp://a:1,"},
  };
  for (const auto& entry : bad) {  // named, not bound: CAPTURE takes them in a lambda
    const auto& name = entry.first;
    const auto& value = entry.second;
    FakeEnv env;
    env.vars = {{name, value}, {"PHOENIX_NAME", "changed"}};
    Config c;
    const std::string err = phoenix::apply_environment(c, env.lookup());
    CAPTURE(name);
    CAPTURE(value);
    CHECK(contains(err, name + "=" + value + ":"));
    CHECK(c.name.empty());  // not half-applied
  }
  // A share with more parts than L has virtual nodes.
  FakeEnv env;
  env.vars = {{"PHOENIX_SPACE_SIZE", "2"}, {"PHOENIX_SHARE", "0/3"}};
  Config c;
  CHECK(contains(phoenix::apply_environment(c, env.lookup()), "PHOENIX_SHARE=0/3: more parts than space_size"));
  // Values that parse but are out of the valid range are validate()'s business, reported by
  // config_from_environment.
  env.vars = {{"PHOENIX_HOP_LIMIT", "300"}};
  auto r = phoenix::config_from_environment(env.lookup());
  CHECK_FALSE(r.ok());
  CHECK(contains(r.error, "hop_limit must be in 1..255 (got 300)"));
  // An acknowledgement delay that would let the sender's copy come first.
  env.vars = {{"PHOENIX_END_TO_END_RESEND_MS", "500"}};
  r = phoenix::config_from_environment(env.lookup());
  CHECK(contains(r.error, "end_to_end_resend_ms must be in 1000..60000 (got 500)"));
  env.vars = {{"PHOENIX_END_TO_END_ACK_DELAY_MS", "1000"}};
  r = phoenix::config_from_environment(env.lookup());
  CHECK(contains(r.error, "end_to_end_ack_delay_ms must be in 1..999 (got 1000)"));
}

TEST_CASE("config: a file's share follows PHOENIX_SPACE_SIZE and PHOENIX_SHARE") {
  TempDir dir;
  const fs::path file = dir.write("c.toml",
                                  "space_size = 300\n[node.a]\nshare = [1, 3]\n"
                                  "assume = [{lo = 0, hi = 5}]\n");
  auto r = phoenix::load_config(file, "a");
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.config.assume == std::vector<Interval>{{0, 5}, {100, 200}});

  // A new L recomputes the share's part; explicit intervals stay.
  FakeEnv env;
  env.vars = {{"PHOENIX_SPACE_SIZE", "30"}};
  Config c = r.config;
  REQUIRE(phoenix::apply_environment(c, env.lookup()) == "");
  CHECK(c.assume == std::vector<Interval>{{0, 5}, {10, 20}});

  // PHOENIX_SHARE replaces the file's share.
  env.vars = {{"PHOENIX_SHARE", "2/3"}};
  c = r.config;
  REQUIRE(phoenix::apply_environment(c, env.lookup()) == "");
  CHECK(c.assume == std::vector<Interval>{{0, 5}, {200, 300}});
  CHECK(c.share == Share{2, 3});

  // Both at once.
  env.vars = {{"PHOENIX_SHARE", "0/2"}, {"PHOENIX_SPACE_SIZE", "1000"}};
  c = r.config;
  REQUIRE(phoenix::apply_environment(c, env.lookup()) == "");
  CHECK(c.assume == std::vector<Interval>{{0, 5}, {0, 500}});
  CHECK(contains(phoenix::validate(c), "overlap"));  // [0, 5) is inside the new share: validate says so

  // Without a share, a new L leaves explicit intervals alone.
  c = Config{};
  c.assume = {{0, 10}};
  env.vars = {{"PHOENIX_SPACE_SIZE", "100"}};
  REQUIRE(phoenix::apply_environment(c, env.lookup()) == "");
  CHECK(c.assume == std::vector<Interval>{{0, 10}});
}

TEST_CASE("config: config_from_environment") {
  TempDir dir;
  const fs::path file = dir.write("c.toml", "[node.a]\nshare = [0, 2]\n[node.b]\nshare = [1, 2]\n");

  FakeEnv env;  // nothing set: the defaults, named after the process
  auto d = phoenix::config_from_environment(env.lookup());
  REQUIRE_MESSAGE(d.ok(), d.error);
  CHECK(d.config.name == phoenix::default_node_name());
  CHECK(d.config.listen == "tcp://127.0.0.1:0");
  CHECK(d.config.assume.empty());

  env.vars = {{"PHOENIX_CONFIG", file.string()}, {"PHOENIX_NODE", "b"}};
  auto b = phoenix::config_from_environment(env.lookup());
  REQUIRE_MESSAGE(b.ok(), b.error);
  CHECK(b.config.name == "b");
  CHECK(b.config.assume == std::vector<Interval>{phoenix::share_part(kL62, {1, 2})});

  env.vars = {{"PHOENIX_CONFIG", file.string()}};  // top level only; unnamed node
  auto t = phoenix::config_from_environment(env.lookup());
  REQUIRE_MESSAGE(t.ok(), t.error);
  CHECK(t.config.name == phoenix::default_node_name());
  CHECK(t.config.assume.empty());

  env.vars = {{"PHOENIX_NODE", "b"}};  // a section of no file
  CHECK(contains(phoenix::config_from_environment(env.lookup()).error, "PHOENIX_CONFIG is not"));

  env.vars = {{"PHOENIX_CONFIG", (dir.path() / "missing.toml").string()}};
  CHECK(contains(phoenix::config_from_environment(env.lookup()).error, "missing.toml: cannot open"));

  env.vars = {{"PHOENIX_CONFIG", file.string()}, {"PHOENIX_NODE", "c"}};
  CHECK(contains(phoenix::config_from_environment(env.lookup()).error, "no [node.c] table (it has: a, b)"));

  env.vars = {{"PHOENIX_CONFIG", file.string()}, {"PHOENIX_NODE", "a"}, {"PHOENIX_LISTEN", "udp://x:1"}};
  auto bad = phoenix::config_from_environment(env.lookup());
  CHECK(contains(bad.error, "[node.a]"));
  CHECK(contains(bad.error, "listen \"udp://x:1\" must start with tcp:// or ssh://"));

  // The real environment is the default lookup.
  ::setenv("PHOENIX_HOP_LIMIT", "7", 1);
  Config c;
  CHECK(phoenix::apply_environment(c) == "");
  ::unsetenv("PHOENIX_HOP_LIMIT");
  CHECK(c.hop_limit == 7);
}

TEST_CASE("config: validate rules") {
  auto problem = [](auto change) {
    Config c;
    change(c);
    return phoenix::validate(c);
  };
  CHECK(problem([](Config& c) { c.hop_limit = 0; }) == "hop_limit must be in 1..255 (got 0)");
  CHECK(problem([](Config& c) { c.hop_limit = 256; }) == "hop_limit must be in 1..255 (got 256)");
  CHECK(problem([](Config& c) { c.hop_limit = 1; }) == "");
  CHECK(problem([](Config& c) { c.hop_limit = 255; }) == "");
  CHECK(contains(problem([](Config& c) { c.space_size = 0; }), "space_size"));
  CHECK(problem([](Config& c) { c.space_size = 1; }) == "");
  CHECK(contains(problem([](Config& c) { c.retry_interval_ms = 9; }),
                 "retry_interval_ms must be in 10..3600000"));
  CHECK(contains(problem([](Config& c) { c.retry_interval_ms = 3600001; }), "retry_interval_ms"));
  CHECK(problem([](Config& c) { c.retry_interval_ms = 10; }) == "");
  CHECK(contains(problem([](Config& c) { c.max_message_bytes = 0; }), "max_message_bytes"));
  CHECK(contains(problem([](Config& c) { c.max_message_bytes = (1ull << 30) + 1; }), "max_message_bytes"));
  CHECK(problem([](Config& c) { c.max_message_bytes = 1ull << 30; }) == "");
  CHECK(contains(problem([](Config& c) { c.link_window_bytes = 65535; }), "link_window_bytes"));
  CHECK(problem([](Config& c) { c.link_window_bytes = 65536; }) == "");
  CHECK(contains(problem([](Config& c) { c.link_window_bytes = (4ull << 30) + 1; }), "link_window_bytes"));
  CHECK(contains(problem([](Config& c) { c.full_dump_interval_ms = 5; }), "full_dump_interval_ms"));
  CHECK(contains(problem([](Config& c) { c.log_level = "warning"; }), "log_level \"warning\" must be one of"));
  for (const char* level : {"trace", "debug", "info", "warn", "error", "critical", "off"})
    CHECK(problem([&](Config& c) { c.log_level = level; }) == "");
  CHECK(contains(problem([](Config& c) { c.name = "has space"; }), "name"));
  CHECK(contains(problem([](Config& c) { c.name = std::string(65, 'x'); }), "at most 64"));
  CHECK(problem([](Config& c) { c.name = "node-1.rack_2"; }) == "");

  // Endpoints: the scheme only (the transport parses the rest).
  CHECK(
      contains(problem([](Config& c) { c.listen = "127.0.0.1:5"; }), "listen \"127.0.0.1:5\" must start with"));
  CHECK(contains(problem([](Config& c) { c.listen = "tcp://"; }), "listen"));
  CHECK(problem([](Config& c) { c.listen = "ssh://user@gw:2222/10.0.0.5:47001"; }) == "");
  CHECK(problem([](Config& c) { c.peers = {"tcp://a:1", "ssh://b"}; }) == "");
  CHECK(contains(problem([](Config& c) { c.peers = {"tcp://a:1", "http://b"}; }), "peers[1] \"http://b\""));

  // Assumed intervals: non-empty, within [0, L), pairwise disjoint (touching is fine).
  CHECK(problem([](Config& c) {
          c.space_size = 100;
          c.assume = {{50, 100}, {0, 50}};
        }) == "");
  CHECK(problem([](Config& c) {
          c.space_size = 100;
          c.assume = {{5, 5}};
        }) == "assumed interval [5, 5) is empty (needs lo < hi)");
  CHECK(contains(problem([](Config& c) {
                   c.space_size = 100;
                   c.assume = {{7, 3}};
                 }),
                 "is empty"));
  CHECK(problem([](Config& c) {
          c.space_size = 100;
          c.assume = {{90, 101}};
        }) == "assumed interval [90, 101) is not within [0, 100) (space_size)");
  CHECK(problem([](Config& c) {
          c.space_size = 100;
          c.assume = {{40, 60}, {0, 10}, {50, 70}};
        }) == "assumed intervals [40, 60) and [50, 70) overlap");
  CHECK(contains(problem([](Config& c) {
                   c.space_size = 100;
                   c.assume = {{10, 20}, {10, 20}};
                 }),
                 "overlap"));
}

TEST_CASE("config: ssh keys: paths relative to the file, a policy that cannot turn checking off") {
  TempDir dir;
  const fs::path file = dir.write("s.toml", R"(
ssh_identity = "keys/id_ed25519"
ssh_known_hosts = "~/.ssh/known_hosts"
ssh_host_key_policy = "accept-new"
)");
  auto r = phoenix::load_config(file);
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.config.ssh_identity == (fs::absolute(dir.path()) / "keys/id_ed25519").lexically_normal().string());
  CHECK(r.config.ssh_known_hosts == "~/.ssh/known_hosts");  // the link expands ~ (the home of the node's user)
  CHECK(r.config.ssh_host_key_policy == "accept-new");
  CHECK(phoenix::validate(r.config) == "");

  Config c;
  c.ssh_host_key_policy = "no";
  CHECK(contains(phoenix::validate(c), "ssh_host_key_policy"));
  CHECK(contains(phoenix::validate(c), "cannot be turned off"));
  CHECK(contains(load_error("ssh_identit = \"x\"\n"), "did you mean ssh_identity?"));
  CHECK(contains(load_error("ssh_known_hosts = 1\n"), "ssh_known_hosts: expected a string"));

  // The shipped example loads and validates.
  auto example = phoenix::load_config(fs::path(PHOENIX_SOURCE_DIR) / "config" / "ssh-gateway.toml", "lan-b");
  REQUIRE_MESSAGE(example.ok(), example.error);
  CHECK(phoenix::validate(example.config) == "");
  CHECK(example.config.peers.size() == 1);
}

TEST_CASE("config: link_protection is integrity by default, off on request, and nothing else") {
  CHECK(Config{}.link_protection == "integrity");
  TempDir dir;
  auto r = phoenix::load_config(dir.write("p.toml", "link_protection = \"off\"\n"));
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.config.link_protection == "off");
  CHECK(phoenix::validate(r.config) == "");
  Config c;
  for (const char* bad : {"none", "OFF", "encrypt", ""}) {
    c.link_protection = bad;
    CHECK_MESSAGE(contains(phoenix::validate(c), "link_protection"), bad);
  }
  Config env;
  CHECK(phoenix::apply_environment(env, [](const char* name) -> const char* {
          return std::string_view(name) == "PHOENIX_LINK_PROTECTION" ? "off" : nullptr;
        }) == "");
  CHECK(env.link_protection == "off");
}

TEST_CASE("config: config/README.md documents every key with its PHOENIX_ variable, and no other key") {
  std::ifstream in(fs::path(PHOENIX_SOURCE_DIR) / "config" / "README.md");
  REQUIRE(in);
  // The rows of the "Keys and variables" table: "| `key` | `PHOENIX_KEY` ... | default | meaning |".
  std::map<std::string, std::string> documented;  // key -> its variable column
  bool in_keys = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0 || line.rfind("### ", 0) == 0) in_keys = line == "## Keys and variables";
    if (!in_keys || line.rfind("| `", 0) != 0) continue;
    const auto key_end = line.find('`', 3);
    const auto column_end = line.find(" |", key_end + 3);
    REQUIRE(key_end != std::string::npos);
    REQUIRE(column_end != std::string::npos);
    documented[line.substr(3, key_end - 3)] = line.substr(key_end + 4, column_end - key_end - 4);
  }
  std::set<std::string> keys;
  for (const phoenix::ConfigKey& k : phoenix::kConfigKeys) {
    if (k.kind == phoenix::KeyKind::tables) continue;  // [node.NAME]: README's "How a node picks its section"
    const std::string name(k.name);
    CAPTURE(name);
    keys.insert(name);
    REQUIRE(documented.count(name) == 1);
    if (k.variable == nullptr) {
      CHECK(documented[name] == "—");
      continue;
    }
    std::string expected = "PHOENIX_" + name;
    std::transform(expected.begin(), expected.end(), expected.begin(),
                   [](char c) { return static_cast<char>(std::toupper(static_cast<unsigned char>(c))); });
    CHECK(std::string(k.variable) == expected);
    CHECK(documented[name].rfind("`" + expected + "`", 0) == 0);
  }
  for (const auto& entry : documented) CHECK_MESSAGE(keys.count(entry.first) == 1, entry.first << " is no key");
}

TEST_CASE("config: the order of the keys decides between equally near suggestions and between two problems") {
  CHECK(contains(load_error("ssh_ = 1\n"), "did you mean ssh_identity?"));
  CHECK(contains(load_error("link = 1\n"), "did you mean link_protection?"));
  CHECK(contains(load_error("control = 1\n"), "did you mean control_key_file?"));
  CHECK(contains(load_error("max_ = 1\n"), "did you mean max_waiting_bytes?"));
  Config c;
  c.space_size = 0;
  c.log_level = "loud";
  c.hop_limit = 0;
  CHECK(contains(phoenix::validate(c), "space_size must be in 1..9223372036854775808 (2^63) (got 0)"));
  c.space_size = 1;
  CHECK(contains(phoenix::validate(c), "log_level"));
  c.log_level = "info";
  c.link_protection = "none";
  c.ssh_host_key_policy = "none";
  CHECK(contains(phoenix::validate(c), "ssh_host_key_policy"));
}
