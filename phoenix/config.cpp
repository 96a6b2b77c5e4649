// phoenix/config.cpp — loading and checking a node's Config (see phoenix/config.hpp, config/README.md).
//
// toml11 reports problems by throwing, with multi-line, ASCII-art messages; everything here catches them at the
// boundary and turns them into one-line "file:line: key: problem" texts, because these errors end up in log
// lines and in ph_initialize's PH_ECONFIG diagnostics.
#include <phoenix/config.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>
#include <system_error>
#include <tuple>
#include <utility>

#include <toml.hpp>

#include "overlay/handshake.hpp"  // protection_mode_from
#include "phoenix/config_file.hpp"

namespace phoenix {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kGiB = kKiB * kKiB * kKiB;
constexpr std::uint64_t kU32Max = std::numeric_limits<std::uint32_t>::max();

constexpr std::array<std::string_view, 7> kLogLevels = {"trace", "debug",    "info", "warn",
                                                        "error", "critical", "off"};

// Keys a top-level table or a [node.NAME] table may hold ("node" only at the top). Kept in one place so that
// the unknown-key error can suggest the nearest one.
constexpr std::array<std::string_view, 20> kKeys = {"name",
                                                    "listen",
                                                    "peers",
                                                    "space_size",
                                                    "log_level",
                                                    "cluster_key_file",
                                                    "link_protection",
                                                    "control_key_file",
                                                    "controller_key_file",
                                                    "retry_interval_ms",
                                                    "hop_limit",
                                                    "max_waiting_bytes",
                                                    "max_message_bytes",
                                                    "link_window_bytes",
                                                    "full_dump_interval_ms",
                                                    "assume",
                                                    "share",
                                                    "ssh_identity",
                                                    "ssh_known_hosts",
                                                    "ssh_host_key_policy"};

std::string interval_text(Interval s) { return "[" + std::to_string(s.lo) + ", " + std::to_string(s.hi) + ")"; }

// ---- numbers -----------------------------------------------------------------------------------------------

// Sizes accept binary suffixes and powers because "268435456" and "4611686018427387904" are unreadable and
// easy to get wrong; counts and milliseconds accept digits only, where a suffix would be nonsense.
enum class NumberKind { plain, size };

bool mul_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
  return __builtin_mul_overflow(a, b, &out);
}

// Digits only; "" on success.
std::string parse_digits(std::string_view text, std::uint64_t& out) {
  if (text.empty()) return "expected digits";
  std::uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return "expected digits";
    if (mul_overflows(v, 10, v) || __builtin_add_overflow(v, static_cast<std::uint64_t>(c - '0'), &v))
      return "too large (max 18446744073709551615)";
  }
  out = v;
  return "";
}

// "" on success, else why `text` is not a number of this kind (without naming the key: callers do).
std::string parse_number(std::string_view text, NumberKind kind, std::uint64_t& out) {
  const std::string shown = "\"" + std::string(text) + "\"";
  const std::string expected = kind == NumberKind::size
                                   ? "is not a size (examples: 1048576, \"256MiB\", \"8KiB\", \"2^62\")"
                                   : "is not a non-negative integer";
  if (kind == NumberKind::plain) {
    std::string err = parse_digits(text, out);
    if (err.empty()) return "";
    return shown + (err == "expected digits" ? " " + expected : " is " + err);
  }
  if (auto caret = text.find('^'); caret != std::string_view::npos) {
    std::uint64_t base = 0, exponent = 0;
    if (!parse_digits(text.substr(0, caret), base).empty() ||
        !parse_digits(text.substr(caret + 1), exponent).empty())
      return shown + " " + expected;
    std::uint64_t v = 1;
    for (std::uint64_t i = 0; i < exponent; ++i) {
      if (mul_overflows(v, base, v)) return shown + " is too large (max 2^64-1)";
      if (v == 0 || v == 1) break;  // 0^n and 1^n: no need to loop up to a huge exponent
    }
    out = v;
    return "";
  }
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::string_view suffix = text.substr(digits);
  while (!suffix.empty() && suffix.front() == ' ') suffix.remove_prefix(1);  // "256 MiB" reads fine too
  std::uint64_t unit = 1;
  if (!suffix.empty()) {
    // Binary (IEC) suffixes only: "MB" is ambiguous between 10^6 and 2^20, and a silent factor of 1.05 in a
    // memory bound is exactly the kind of mistake strict parsing is for.
    static constexpr std::array<std::pair<std::string_view, unsigned>, 7> kSuffixes = {
        {{"B", 0}, {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}, {"PiB", 50}, {"EiB", 60}}};
    auto it =
        std::find_if(kSuffixes.begin(), kSuffixes.end(), [&](const auto& s) { return s.first == suffix; });
    if (it == kSuffixes.end() || digits == 0)
      return shown + " " + expected + (digits > 0 ? "; suffixes are B, KiB, MiB, GiB, TiB, PiB, EiB" : "");
    unit = std::uint64_t{1} << it->second;
  }
  std::uint64_t v = 0;
  std::string err = parse_digits(text.substr(0, digits), v);
  if (!err.empty()) return shown + (err == "expected digits" ? " " + expected : " is " + err);
  if (mul_overflows(v, unit, v)) return shown + " is too large (max 2^64-1)";
  out = v;
  return "";
}

// ---- TOML --------------------------------------------------------------------------------------------------

// Where a value sits, "file:line: ", from toml11's record of the value's source region.
struct Context {
  std::string file;  // as given by the caller, so messages match what the user typed
  fs::path dir;      // absolute directory of the file: base of relative cluster_key_file paths
};

std::string where(const Context& ctx, const toml::value& v) {
  const toml::source_location loc = v.location();
  if (loc.file_name() == "unknown file") return ctx.file + ": ";
  return ctx.file + ":" + std::to_string(loc.line()) + ": ";
}

std::string type_name(const toml::value& v) {
  std::ostringstream os;
  os << v.type();
  return os.str();
}

// toml11 iterates an unordered_map; sorting by position makes "the first error" the first one in the file.
std::vector<std::pair<std::string, const toml::value*>> entries_in_file_order(const toml::value& table) {
  std::vector<std::pair<std::string, const toml::value*>> out;
  for (const auto& [key, value] : table.as_table()) out.emplace_back(key, &value);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    const auto la = a.second->location(), lb = b.second->location();
    return std::tuple(la.line(), la.column(), a.first) < std::tuple(lb.line(), lb.column(), b.first);
  });
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string unknown_key_message(std::string_view key, bool top_level) {
  std::string best;
  std::size_t best_distance = 3;  // more than two edits away is no longer a typo of that key
  auto consider = [&](std::string_view candidate) {
    std::size_t d = edit_distance(key, candidate);
    // "listen_on", "peer": one key extending or cutting another is a typo too, however many letters apart.
    if (std::min(key.size(), candidate.size()) >= 4 &&
        (key.substr(0, candidate.size()) == candidate || candidate.substr(0, key.size()) == key))
      d = std::min<std::size_t>(d, 2);
    if (d < best_distance) best_distance = d, best = candidate;
  };
  for (auto k : kKeys) consider(k);
  if (top_level) consider("node");
  if (!best.empty()) return "unknown key (did you mean " + best + "?)";
  return top_level ? "unknown key (see config/README.md for the keys)"
                   : "unknown key (a [node.NAME] table takes the top-level keys except node)";
}

// Reads an unsigned integer given as a TOML integer or as a string of the given kind. "" on success.
std::string read_number(const toml::value& v, NumberKind kind, std::uint64_t max, std::uint64_t& out) {
  std::uint64_t value = 0;
  if (v.is_integer()) {
    const std::int64_t i = v.as_integer();
    if (i < 0) return "must not be negative (got " + std::to_string(i) + ")";
    value = static_cast<std::uint64_t>(i);
  } else if (v.is_string()) {
    std::string err = parse_number(v.as_string().str, kind, value);
    if (!err.empty()) return err;
  } else {
    return std::string("expected an integer or a string like ") +
           (kind == NumberKind::size ? "\"256MiB\" or \"2^62\"" : "\"64\"") + ", got " + type_name(v);
  }
  if (value > max) return std::to_string(value) + " is out of range (max " + std::to_string(max) + ")";
  out = value;
  return "";
}

std::string read_string(const toml::value& v, std::string& out) {
  if (!v.is_string()) return "expected a string, got " + type_name(v);
  out = v.as_string().str;
  return "";
}

std::string check_share(Share s) {
  if (s.count == 0) return "a share [i, n] needs n >= 1";
  if (s.index >= s.count)
    return "a share [i, n] needs i < n, i counting from 0 (got [" + std::to_string(s.index) + ", " +
           std::to_string(s.count) + "])";
  return "";
}

// "i/n": the environment's form, also accepted for the file's `share`.
std::string parse_share_text(std::string_view text, Share& out) {
  const auto slash = text.find('/');
  Share s;
  if (slash == std::string_view::npos || !parse_digits(text.substr(0, slash), s.index).empty() ||
      !parse_digits(text.substr(slash + 1), s.count).empty())
    return "\"" + std::string(text) + "\" is not of the form \"i/n\" (e.g. \"0/3\")";
  if (std::string err = check_share(s); !err.empty()) return err;
  out = s;
  return "";
}

// One table's keys, applied over `config` (a later table overrides an earlier one key by key). The share is
// kept aside and resolved once every layer is in, because it depends on the final space_size.
struct Pending {
  std::optional<Share> share;
  std::string share_where;  // "file:line: " of the share key, for an error found only when resolving
};

std::string apply_table(const Context& ctx, const toml::value& table, std::string_view prefix, bool top_level,
                        Config& config, Pending& pending) {
  for (const auto& [key, vp] : entries_in_file_order(table)) {
    const toml::value& v = *vp;
    const std::string at = where(ctx, v) + std::string(prefix) + key + ": ";
    std::string err;
    std::uint64_t n = 0;
    if (key == "node") {
      if (!top_level) return at + "node tables cannot nest: [node.NAME] takes the top-level keys except node";
      continue;  // the caller handles the sections
    } else if (key == "name") {
      err = read_string(v, config.name);
    } else if (key == "listen") {
      err = read_string(v, config.listen);
    } else if (key == "log_level") {
      err = read_string(v, config.log_level);
    } else if (key == "ssh_host_key_policy") {
      err = read_string(v, config.ssh_host_key_policy);
    } else if (key == "link_protection") {
      err = read_string(v, config.link_protection);
    } else if (key == "ssh_identity" || key == "ssh_known_hosts") {
      // Relative paths are taken relative to the file, like cluster_key_file; "~/..." is left for the link.
      std::string path;
      err = read_string(v, path);
      if (err.empty()) {
        if (!path.empty() && path[0] != '/' && path[0] != '~') path = (ctx.dir / path).lexically_normal().string();
        (key == "ssh_identity" ? config.ssh_identity : config.ssh_known_hosts) = path;
      }
    } else if (key == "cluster_key_file" || key == "control_key_file" || key == "controller_key_file") {
      std::string path;
      err = read_string(v, path);
      // Relative to the file, not to the working directory: the key usually lives next to the config, and a
      // node started from anywhere must find the same key.
      std::string& field = key == "cluster_key_file"   ? config.cluster_key_file
                           : key == "control_key_file" ? config.control_key_file
                                                       : config.controller_key_file;
      if (err.empty()) field = path.empty() ? path : (ctx.dir / path).lexically_normal().string();
    } else if (key == "peers") {
      if (!v.is_array()) {
        err = "expected an array of strings, got " + type_name(v);
      } else {
        std::vector<std::string> peers;
        for (const toml::value& p : v.as_array()) {
          if (!p.is_string())
            return where(ctx, p) + std::string(prefix) + key + ": expected an array of strings, got " +
                   type_name(p) + " in it";
          peers.push_back(p.as_string().str);
        }
        config.peers = std::move(peers);
      }
    } else if (key == "space_size") {
      if (err = read_number(v, NumberKind::size, std::numeric_limits<std::uint64_t>::max(), n); err.empty())
        config.space_size = n;
    } else if (key == "max_waiting_bytes" || key == "max_message_bytes" || key == "link_window_bytes") {
      if (err = read_number(v, NumberKind::size, std::numeric_limits<std::uint64_t>::max(), n); err.empty())
        (key == "max_waiting_bytes"   ? config.max_waiting_bytes
         : key == "max_message_bytes" ? config.max_message_bytes
                                      : config.link_window_bytes) = n;
    } else if (key == "retry_interval_ms" || key == "full_dump_interval_ms" || key == "hop_limit") {
      if (err = read_number(v, NumberKind::plain, kU32Max, n); err.empty())
        (key == "retry_interval_ms"       ? config.retry_interval_ms
         : key == "full_dump_interval_ms" ? config.full_dump_interval_ms
                                          : config.hop_limit) = static_cast<std::uint32_t>(n);
    } else if (key == "assume") {
      if (!v.is_array()) {
        err = "expected an array of {lo = ..., hi = ...} tables, got " + type_name(v);
      } else {
        std::vector<Interval> intervals;
        const auto& elements = v.as_array();
        for (std::size_t i = 0; i < elements.size(); ++i) {
          const toml::value& e = elements[i];
          const std::string path = std::string(prefix) + key + "[" + std::to_string(i) + "]";
          if (!e.is_table())
            return where(ctx, e) + path + ": expected a {lo = ..., hi = ...} table, got " + type_name(e);
          Interval s;
          bool has_lo = false, has_hi = false;
          for (const auto& [k, x] : entries_in_file_order(e)) {
            if (k != "lo" && k != "hi")
              return where(ctx, *x) + path + "." + k + ": unknown key (an interval has lo and hi)";
            std::uint64_t bound = 0;
            if (std::string berr =
                    read_number(*x, NumberKind::size, std::numeric_limits<std::uint64_t>::max(), bound);
                !berr.empty())
              return where(ctx, *x) + path + "." + k + ": " + berr;
            (k == "lo" ? s.lo : s.hi) = bound;
            (k == "lo" ? has_lo : has_hi) = true;
          }
          if (!has_lo || !has_hi)
            return where(ctx, e) + path + ": needs both lo and hi (the interval is [lo, hi))";
          intervals.push_back(s);
        }
        config.assume = std::move(intervals);
      }
    } else if (key == "share") {
      Share s;
      if (v.is_string()) {
        err = parse_share_text(v.as_string().str, s);
      } else if (v.is_array() && v.as_array().size() == 2) {
        std::uint64_t parts[2] = {0, 0};
        for (std::size_t i = 0; i < 2 && err.empty(); ++i)
          err = read_number(v.as_array()[i], NumberKind::plain, std::numeric_limits<std::uint64_t>::max(),
                            parts[i]);
        if (err.empty()) err = check_share(s = Share{parts[0], parts[1]});
      } else {
        err = "expected [i, n] (the i-th of n equal parts of [0, L)), got " +
              (v.is_array() ? "an array of " + std::to_string(v.as_array().size()) : type_name(v));
      }
      if (err.empty()) pending.share = s, pending.share_where = at;
    } else {
      err = unknown_key_message(key, top_level);
    }
    if (!err.empty()) return at + err;
  }
  return "";
}

// Puts the pending share's part into config.assume, computed with the final space_size.
std::string resolve_share(const Pending& pending, Config& config) {
  if (!pending.share) return "";
  if (pending.share->count > config.space_size)
    return pending.share_where + "share [" + std::to_string(pending.share->index) + ", " +
           std::to_string(pending.share->count) + "] has more parts than space_size (" +
           std::to_string(config.space_size) + ") has virtual nodes";
  config.assume.push_back(share_part(config.space_size, *pending.share));
  config.share = pending.share;
  return "";
}

// toml11's syntax errors look like
//   [error] toml::parse_key_value_pair: missing value after key-value separator '='
//    --> x.toml
//      |
//    2 | b =
//      |     ^--- expected value, but got nothing
// which becomes "x.toml:2: TOML syntax error: missing value after key-value separator '=' (expected value,
// ...)".
std::string one_line_syntax_error(const std::string& file, const toml::exception& e) {
  std::istringstream lines(e.what());
  std::string line, headline, comment;
  unsigned long line_number = e.location().line();
  bool first = true;
  while (std::getline(lines, line)) {
    if (first) {
      headline = line;
      first = false;
      continue;
    }
    const auto bar = line.find(" | ");
    if (bar == std::string::npos) continue;
    const std::string left = line.substr(0, bar);
    const auto digit = left.find_first_not_of(' ');
    if (digit != std::string::npos && std::all_of(left.begin() + static_cast<std::ptrdiff_t>(digit), left.end(),
                                                  [](char c) { return c >= '0' && c <= '9'; })) {
      line_number = std::stoul(left.substr(digit));  // the last quoted line is the offending one
    } else if (auto mark = line.find_first_of("^~", bar + 3); mark != std::string::npos) {
      const auto text = line.find(' ', mark);
      if (text != std::string::npos) comment = line.substr(text + 1);
    }
  }
  if (headline.rfind("[error] ", 0) == 0) headline.erase(0, 8);
  if (headline.rfind("toml::", 0) == 0) {  // drop toml11's internal function name
    if (auto colon = headline.find(": "); colon != std::string::npos) headline.erase(0, colon + 2);
  }
  std::string out = file + ":" + std::to_string(line_number) + ": TOML syntax error: " + headline;
  if (!comment.empty()) out += " (" + comment + ")";
  return out;
}

ConfigResult load_config_unguarded(const fs::path& file, std::string_view node_name) {
  ConfigResult result;
  std::string text;
  // Read ourselves, within bounds: toml11's own open reports no reason, asserts on a directory, reads without
  // end, and recurses once per nesting level.
  if (result.error = read_bounded_file(file, max_config_file_bytes, text); !result.error.empty()) return result;
  if (result.error = check_toml_depth(text, max_config_depth, file.string()); !result.error.empty()) return result;

  Context ctx;
  ctx.file = file.string();
  std::error_code ec;
  fs::path absolute = fs::absolute(file, ec);
  ctx.dir = (ec ? file : absolute).parent_path();

  toml::value root;
  try {
    std::istringstream in(text);
    root = toml::parse(in, ctx.file);
  } catch (const toml::exception& e) {
    result.error = one_line_syntax_error(ctx.file, e);
    return result;
  }

  Config base;
  Pending base_pending;
  if (result.error = apply_table(ctx, root, "", true, base, base_pending); !result.error.empty()) return result;

  // Every [node.*] table is applied (to a copy) so that an error anywhere in the file is reported by every
  // node.
  std::vector<std::string> names;
  bool found = false;
  if (root.contains("node")) {
    const toml::value& nodes = root.at("node");
    if (!nodes.is_table()) {
      result.error = where(ctx, nodes) + "node: expected [node.NAME] tables, got " + type_name(nodes);
      return result;
    }
    for (const auto& [name, section] : entries_in_file_order(nodes)) {
      if (!section->is_table()) {
        result.error = where(ctx, *section) + "node." + name + ": expected a [node." + name + "] table, got " +
                       type_name(*section);
        return result;
      }
      Config config = base;
      Pending pending = base_pending;
      // Selecting a section names the node after it, unless the section itself says otherwise.
      config.name = name;
      if (result.error = apply_table(ctx, *section, "node." + name + ".", false, config, pending);
          !result.error.empty())
        return result;
      if (result.error = resolve_share(pending, config); !result.error.empty()) return result;
      names.push_back(name);
      if (name == node_name) {
        result.config = std::move(config);
        found = true;
      }
    }
  }
  if (node_name.empty()) {
    if (result.error = resolve_share(base_pending, base); !result.error.empty()) return result;
    result.config = std::move(base);
  } else if (!found) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    result.error =
        ctx.file + ": no [node." + std::string(node_name) + "] table" +
        (known.empty() ? std::string(" (the file has no [node.NAME] tables)") : " (it has: " + known + ")");
  }
  return result;
}

std::string apply_environment_unguarded(Config& config, const EnvLookup& lookup) {
  auto get = [&](const char* name) -> std::optional<std::string> {
    const char* v = lookup ? lookup(name) : std::getenv(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
  Config c = config;  // committed only when every variable is fine
  auto bad = [](const char* name, const std::string& value, const std::string& why) {
    return std::string(name) + "=" + value + ": " + why;
  };
  if (auto v = get("PHOENIX_NAME")) c.name = *v;
  if (auto v = get("PHOENIX_LISTEN")) c.listen = *v;
  if (auto v = get("PHOENIX_PEERS")) {
    c.peers.clear();
    std::string_view rest = *v;
    while (true) {
      const auto comma = rest.find(',');
      std::string_view item = rest.substr(0, comma);
      while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
      while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
      if (item.empty()) return bad("PHOENIX_PEERS", *v, "empty item in the comma-separated list");
      c.peers.emplace_back(item);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  if (auto v = get("PHOENIX_LOG_LEVEL")) c.log_level = *v;
  if (auto v = get("PHOENIX_CLUSTER_KEY_FILE")) c.cluster_key_file = *v;  // relative: to the working directory
  if (auto v = get("PHOENIX_CONTROL_KEY_FILE")) c.control_key_file = *v;
  if (auto v = get("PHOENIX_CONTROLLER_KEY_FILE")) c.controller_key_file = *v;
  if (auto v = get("PHOENIX_SSH_IDENTITY")) c.ssh_identity = *v;
  if (auto v = get("PHOENIX_SSH_KNOWN_HOSTS")) c.ssh_known_hosts = *v;
  if (auto v = get("PHOENIX_SSH_HOST_KEY_POLICY")) c.ssh_host_key_policy = *v;
  if (auto v = get("PHOENIX_LINK_PROTECTION")) c.link_protection = *v;

  const std::uint64_t old_space_size = c.space_size;
  constexpr std::uint64_t u64max = std::numeric_limits<std::uint64_t>::max();
  struct NumberVariable {
    const char* name;
    NumberKind kind;
    std::uint64_t max;
    std::uint64_t* u64;  // exactly one of u64, u32 is set
    std::uint32_t* u32;
  };
  const NumberVariable numbers[] = {
      {"PHOENIX_SPACE_SIZE", NumberKind::size, u64max, &c.space_size, nullptr},
      {"PHOENIX_RETRY_INTERVAL_MS", NumberKind::plain, kU32Max, nullptr, &c.retry_interval_ms},
      {"PHOENIX_MAX_WAITING_BYTES", NumberKind::size, u64max, &c.max_waiting_bytes, nullptr},
      {"PHOENIX_MAX_MESSAGE_BYTES", NumberKind::size, u64max, &c.max_message_bytes, nullptr},
      {"PHOENIX_LINK_WINDOW_BYTES", NumberKind::size, u64max, &c.link_window_bytes, nullptr},
      {"PHOENIX_FULL_DUMP_INTERVAL_MS", NumberKind::plain, kU32Max, nullptr, &c.full_dump_interval_ms},
      {"PHOENIX_HOP_LIMIT", NumberKind::plain, kU32Max, nullptr, &c.hop_limit},
  };
  std::string err;
  for (const NumberVariable& var : numbers) {
    const auto v = get(var.name);
    if (!v) continue;
    std::uint64_t n = 0;
    if (err = parse_number(*v, var.kind, n); !err.empty()) return bad(var.name, *v, err);
    if (n > var.max) return bad(var.name, *v, "out of range (max " + std::to_string(var.max) + ")");
    if (var.u64 != nullptr)
      *var.u64 = n;
    else
      *var.u32 = static_cast<std::uint32_t>(n);
  }

  std::optional<Share> share = c.share;
  const auto share_text = get("PHOENIX_SHARE");
  if (share_text) {
    Share s;
    if (err = parse_share_text(*share_text, s); !err.empty()) return bad("PHOENIX_SHARE", *share_text, err);
    share = s;
  }
  // The share's part depends on L: when either changes, the part computed earlier is replaced, so that a file
  // with `share` and PHOENIX_SPACE_SIZE does not leave intervals cut for another L (a silent gap or overlap).
  if (share && (share_text || c.space_size != old_space_size)) {
    if (share->count > c.space_size) {
      const std::string text =
          share_text ? *share_text : std::to_string(share->index) + "/" + std::to_string(share->count);
      return (share_text ? "PHOENIX_SHARE=" : "share ") + text + ": more parts than space_size (" +
             std::to_string(c.space_size) + ") has virtual nodes";
    }
    if (c.share) {
      const Interval old_part = share_part(old_space_size, *c.share);
      if (auto it = std::find(c.assume.begin(), c.assume.end(), old_part); it != c.assume.end())
        c.assume.erase(it);
    }
    c.assume.push_back(share_part(c.space_size, *share));
    c.share = share;
  }
  config = std::move(c);
  return "";
}

bool is_endpoint(std::string_view s) {
  for (std::string_view scheme : {"tcp://", "ssh://"})
    if (s.size() > scheme.size() && s.substr(0, scheme.size()) == scheme) return true;
  return false;
}

}  // namespace

Interval share_part(std::uint64_t space_size, Share share) {
  if (share.count == 0 || share.index >= share.count) return Interval{0, 0};
  const std::uint64_t part = space_size / share.count;
  // index * part <= (count - 1) * (L / count) < L: no overflow.
  return Interval{share.index * part, share.index + 1 == share.count ? space_size : (share.index + 1) * part};
}

std::string default_node_name() { return "n" + std::to_string(static_cast<long long>(::getpid())); }

ConfigResult load_config(const fs::path& file, std::string_view node_name) {
  // Nothing escapes: toml11 and the standard library may still throw (bad_alloc, filesystem errors).
  try {
    return load_config_unguarded(file, node_name);
  } catch (const std::exception& e) {
    return ConfigResult{Config{}, file.string() + ": cannot load configuration: " + e.what()};
  } catch (...) {
    return ConfigResult{Config{}, file.string() + ": cannot load configuration: unknown error"};
  }
}

std::string apply_environment(Config& config, const EnvLookup& lookup) {
  try {
    return apply_environment_unguarded(config, lookup);
  } catch (const std::exception& e) {
    return std::string("environment: ") + e.what();
  } catch (...) {
    return "environment: unknown error";
  }
}

ConfigResult config_from_environment(const EnvLookup& lookup) {
  try {
    auto get = [&](const char* name) -> std::string {
      const char* v = lookup ? lookup(name) : std::getenv(name);
      return v == nullptr ? std::string() : std::string(v);
    };
    const std::string file = get("PHOENIX_CONFIG");
    const std::string node = get("PHOENIX_NODE");
    ConfigResult result;
    if (!file.empty()) {
      result = load_config(file, node);
      if (!result.ok()) return result;
    } else if (!node.empty()) {
      result.error = "PHOENIX_NODE=" + node +
                     " is set but PHOENIX_CONFIG is not (it selects a [node.NAME] table of that file)";
      return result;
    }
    if (result.error = apply_environment(result.config, lookup); !result.error.empty()) return result;
    if (result.config.name.empty()) result.config.name = default_node_name();
    if (std::string err = validate(result.config); !err.empty()) {
      std::string source = file.empty() ? "defaults" : file + (node.empty() ? "" : " [node." + node + "]");
      result.error = "invalid configuration (" + source + " and PHOENIX_* environment): " + err;
    }
    return result;
  } catch (const std::exception& e) {
    return ConfigResult{Config{}, std::string("configuration from environment: ") + e.what()};
  } catch (...) {
    return ConfigResult{Config{}, "configuration from environment: unknown error"};
  }
}

std::string validate(const Config& c) {
  try {
    if (c.name.size() > 64)
      return "name must be at most 64 characters (got " + std::to_string(c.name.size()) + ")";
    for (char ch : c.name) {
      // It starts every log line: no spaces or control characters that would make logs ambiguous.
      const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                      ch == '.' || ch == '_' || ch == '-';
      if (!ok) return "name \"" + c.name + "\" may only contain letters, digits, '.', '_' and '-'";
    }
    if (!is_endpoint(c.listen)) return "listen \"" + c.listen + "\" must start with tcp:// or ssh://";
    for (std::size_t i = 0; i < c.peers.size(); ++i)
      if (!is_endpoint(c.peers[i]))
        return "peers[" + std::to_string(i) + "] \"" + c.peers[i] + "\" must start with tcp:// or ssh://";
    if (c.space_size < 1) return "space_size must be at least 1";
    if (std::find(kLogLevels.begin(), kLogLevels.end(), c.log_level) == kLogLevels.end())
      return "log_level \"" + c.log_level + "\" must be one of trace, debug, info, warn, error, critical, off";
    if (c.ssh_host_key_policy != "strict" && c.ssh_host_key_policy != "accept-new")
      return "ssh_host_key_policy \"" + c.ssh_host_key_policy +
             "\" must be \"strict\" or \"accept-new\" (host key checking cannot be turned off)";
    if (!overlay::protection_mode_from(c.link_protection))
      return "link_protection \"" + c.link_protection + "\" must be \"integrity\" or \"off\"";
    if (c.retry_interval_ms < 10 || c.retry_interval_ms > 3'600'000)
      return "retry_interval_ms must be in 10..3600000 (got " + std::to_string(c.retry_interval_ms) + ")";
    if (c.max_message_bytes < 1 || c.max_message_bytes > kGiB)
      return "max_message_bytes must be in 1..1073741824 (1 GiB) (got " + std::to_string(c.max_message_bytes) +
             ")";
    // Below 64 KiB a link stalls on every few frames; above 4 GiB the number is surely a typo.
    if (c.link_window_bytes < 64 * kKiB || c.link_window_bytes > 4 * kGiB)
      return "link_window_bytes must be in 65536..4294967296 (64 KiB..4 GiB) (got " +
             std::to_string(c.link_window_bytes) + ")";
    if (c.full_dump_interval_ms < 10 || c.full_dump_interval_ms > 86'400'000)
      return "full_dump_interval_ms must be in 10..86400000 (got " + std::to_string(c.full_dump_interval_ms) +
             ")";
    if (c.hop_limit < 1 || c.hop_limit > 255)
      return "hop_limit must be in 1..255 (got " + std::to_string(c.hop_limit) + ")";
    for (const Interval& s : c.assume) {
      if (s.empty()) return "assumed interval " + interval_text(s) + " is empty (needs lo < hi)";
      if (s.hi > c.space_size)
        return "assumed interval " + interval_text(s) + " is not within [0, " + std::to_string(c.space_size) +
               ") (space_size)";
    }
    std::vector<Interval> sorted = c.assume;
    std::sort(sorted.begin(), sorted.end(), [](Interval a, Interval b) { return a.lo < b.lo; });
    for (std::size_t i = 1; i < sorted.size(); ++i)
      if (sorted[i].lo < sorted[i - 1].hi)
        return "assumed intervals " + interval_text(sorted[i - 1]) + " and " + interval_text(sorted[i]) +
               " overlap";
    return "";
  } catch (const std::exception& e) {
    return std::string("cannot validate configuration: ") + e.what();
  }
}

}  // namespace phoenix
