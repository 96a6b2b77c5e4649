// phoenix/config.cpp — loading a node's Config from a file and the environment (see phoenix/config.hpp,
// config/README.md).
//
// Every key is a row of kConfigKeys (config_keys.hpp): reading a value goes by the row's kind. Errors are
// one-line "file:line: key: problem" texts (config_toml.hpp), because they end up in log lines and in
// ph_initialize's PH_ECONFIG diagnostics.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <phoenix/config.hpp>
#include <sstream>
#include <system_error>
#include <utility>
#include <vector>

#include "phoenix/config_file.hpp"
#include "phoenix/config_keys.hpp"
#include "phoenix/config_number.hpp"
#include "phoenix/config_toml.hpp"

namespace phoenix {
namespace {

namespace fs = std::filesystem;
using key_bounds::u32_max;
using key_bounds::u64_max;

constexpr const ConfigKey& kShareKey = config_key_of_kind(KeyKind::share);

// ---- files -------------------------------------------------------------------------------------------------

struct Context {
  std::string file;  // as given by the caller, so messages match what the user typed
  fs::path dir;      // absolute directory of the file: base of relative paths
};

// The share, kept aside and resolved once every layer is in, because its part depends on the final space_size.
struct Pending {
  std::optional<Share> share;
  std::string share_where;  // "file:line: " of the share key, for an error found only when resolving
};

// The value `v` of key `k` (called `name`, e.g. "node.a.hop_limit") into config or pending. "" or an error.
std::string read_key(const Context& ctx, const std::string& name, const ConfigKey& k, const toml::value& v,
                     Config& config, Pending& pending) {
  const std::string at = where(ctx.file, v) + name + ": ";
  std::string err;
  std::uint64_t n = 0;
  switch (k.kind) {
    case KeyKind::text:
    case KeyKind::endpoint:
      err = read_string(v, key_field<std::string>(k, config));
      break;
    case KeyKind::path:
    case KeyKind::ssh_path: {
      // Relative to the file, not to the working directory: a key usually lives next to the config, and a node
      // started from anywhere must find the same key.
      std::string path;
      if (err = read_string(v, path); err.empty()) {
        const bool as_written =
            path.empty() || (k.kind == KeyKind::ssh_path && (path[0] == '/' || path[0] == '~'));
        key_field<std::string>(k, config) = as_written ? path : (ctx.dir / path).lexically_normal().string();
      }
      break;
    }
    case KeyKind::endpoints:
      return read_strings(ctx.file, name, v, key_field<std::vector<std::string>>(k, config));
    case KeyKind::size:
      if (err = read_number(v, NumberKind::size, u64_max, n); err.empty())
        key_field<std::uint64_t>(k, config) = n;
      break;
    case KeyKind::count:
      if (err = read_number(v, NumberKind::plain, u32_max, n); err.empty())
        key_field<std::uint32_t>(k, config) = static_cast<std::uint32_t>(n);
      break;
    case KeyKind::intervals:
      return read_intervals(ctx.file, name, v, key_field<std::vector<Interval>>(k, config));
    case KeyKind::share: {
      Share s;
      if (err = read_share(v, s); err.empty()) pending.share = s, pending.share_where = at;
      break;
    }
    case KeyKind::tables:
      break;  // the caller handles the sections
  }
  return err.empty() ? err : at + err;
}

// One table's keys, applied over `config` (a later table overrides an earlier one key by key); `prefix` names
// the table in errors, e.g. "node.a.".
std::string apply_table(const Context& ctx, const toml::value& table, std::string_view prefix, bool top_level,
                        Config& config, Pending& pending) {
  for (const auto& entry : entries_in_file_order(table)) {
    const auto& key = entry.first;
    const auto& v = entry.second;
    const std::string name = std::string(prefix) + key;
    const auto k =
        std::find_if(kConfigKeys.begin(), kConfigKeys.end(), [&](const ConfigKey& r) { return r.name == key; });
    std::string err;
    if (k == kConfigKeys.end()) {
      std::vector<std::string_view> names;  // the keys this table may hold ("node" only at the top)
      for (const ConfigKey& r : kConfigKeys)
        if (top_level || r.kind != KeyKind::tables) names.push_back(r.name);
      err = where(ctx.file, *v) + name + ": " + unknown_key_message(key, names, top_level);
    } else if (k->kind == KeyKind::tables && !top_level) {
      err = where(ctx.file, *v) + name +
            ": node tables cannot nest: [node.NAME] takes the top-level keys except node";
    } else {
      err = read_key(ctx, name, *k, *v, config, pending);
    }
    if (!err.empty()) return err;
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

ConfigResult load_config_unguarded(const fs::path& file, std::string_view node_name) {
  ConfigResult result;
  std::string text;
  // Read ourselves, within bounds: toml11's own open reports no reason, asserts on a directory, reads without
  // end, and recurses once per nesting level.
  if (result.error = read_bounded_file(file, max_config_file_bytes, text); !result.error.empty()) return result;
  const toml_depth scanned = measure_toml_depth(text);
  if (result.error = check_toml_depth(scanned, max_config_depth, file.string()); !result.error.empty())
    return result;

  Context ctx;
  ctx.file = file.string();
  std::error_code ec;
  fs::path absolute = fs::absolute(file, ec);
  ctx.dir = (ec ? file : absolute).parent_path();

  toml::value root;
  try {
    std::istringstream in(mark_empty_arrays(text, scanned));
    root = toml::parse(in, ctx.file);
  } catch (const toml::exception& e) {
    result.error = one_line_syntax_error(ctx.file, e);
    return result;
  }
  if (result.error = restore_empty_arrays(ctx.file, root, scanned.empty_arrays.size()); !result.error.empty())
    return result;

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
      result.error = where(ctx.file, nodes) + "node: expected [node.NAME] tables, got " + type_name(nodes);
      return result;
    }
    for (const auto& [name, section] : entries_in_file_order(nodes)) {
      if (!section->is_table()) {
        result.error = where(ctx.file, *section) + "node." + name + ": expected a [node." + name +
                       "] table, got " + type_name(*section);
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

// ---- the environment ---------------------------------------------------------------------------------------

// A comma-separated variable as a list; false when an item is empty.
bool split_list(std::string_view text, std::vector<std::string>& out) {
  std::vector<std::string> items;
  while (true) {
    const auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (item.empty()) return false;
    items.emplace_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  out = std::move(items);
  return true;
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
  const std::uint64_t old_space_size = c.space_size;
  std::string err;
  for (const ConfigKey& k : kConfigKeys) {
    const auto v = k.variable != nullptr ? get(k.variable) : std::nullopt;
    if (!v) continue;
    std::uint64_t n = 0;
    switch (k.kind) {
      case KeyKind::text:
      case KeyKind::endpoint:
      case KeyKind::path:  // a relative path stays relative: to the working directory
      case KeyKind::ssh_path:
        key_field<std::string>(k, c) = *v;
        break;
      case KeyKind::endpoints:
        if (!split_list(*v, key_field<std::vector<std::string>>(k, c)))
          return bad(k.variable, *v, "empty item in the comma-separated list");
        break;
      case KeyKind::size:
        if (err = parse_number(*v, NumberKind::size, n); !err.empty()) return bad(k.variable, *v, err);
        key_field<std::uint64_t>(k, c) = n;
        break;
      case KeyKind::count:
        if (err = parse_number(*v, NumberKind::plain, n); !err.empty()) return bad(k.variable, *v, err);
        if (n > u32_max) return bad(k.variable, *v, "out of range (max " + std::to_string(u32_max) + ")");
        key_field<std::uint32_t>(k, c) = static_cast<std::uint32_t>(n);
        break;
      case KeyKind::intervals:
      case KeyKind::share:  // below, once L is final
      case KeyKind::tables:
        break;
    }
  }

  std::optional<Share> share = c.share;
  const auto share_text = get(kShareKey.variable);
  if (share_text) {
    Share s;
    if (err = parse_share_text(*share_text, s); !err.empty()) return bad(kShareKey.variable, *share_text, err);
    share = s;
  }
  // The share's part depends on L: when either changes, the part computed earlier is replaced, so that a file
  // with `share` and PHOENIX_SPACE_SIZE does not leave intervals cut for another L (a silent gap or overlap).
  if (share && (share_text || c.space_size != old_space_size)) {
    if (share->count > c.space_size) {
      const std::string text =
          share_text ? *share_text : std::to_string(share->index) + "/" + std::to_string(share->count);
      return (share_text ? std::string(kShareKey.variable) + "=" : "share ") + text +
             ": more parts than space_size (" + std::to_string(c.space_size) + ") has virtual nodes";
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

}  // namespace phoenix
