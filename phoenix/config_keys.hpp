// config_keys.hpp — the keys of a node's configuration, one row each (config/README.md documents them).
//
// A row gives the key's name in a file, its PHOENIX_* variable, its kind and its Config field. The kind says
// how the value is read from TOML and from the variable and what validate() checks of it, beyond the row's
// range and rule. The loader, the environment overrides, the unknown-key suggestions and validate() all walk
// these rows.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <phoenix/config.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace phoenix {

enum class KeyKind {
  text,       // a string
  endpoint,   // a string that must start with tcp:// or ssh://
  endpoints,  // a list of them: a TOML array of strings, a comma-separated variable
  path,       // a file path; in a file, relative to the file's directory (from a variable: to the working one)
  ssh_path,   // the same, except that a path starting with '/' or '~' stays as written (the ssh link expands ~)
  size,       // a 64-bit number that may have a binary suffix or be a power: "256MiB", "2^62"
  count,      // a 32-bit number, digits only
  intervals,  // [{lo = ..., hi = ...}, ...]
  share,      // [i, n] or "i/n": its part of [0, L) joins `assume` once every layer is in
  tables,     // the [node.NAME] tables, top level only
};

// The Config member a key sets: std::monostate for share and node, which the loader handles itself.
using KeyField =
    std::variant<std::monostate, std::string Config::*, std::vector<std::string> Config::*,
                 std::uint64_t Config::*, std::uint32_t Config::*, std::vector<Interval> Config::*>;

// The values validate() accepts of a size or count: lo..hi (hi 0: any; hi 2^64-1: at least lo). `note` follows
// the bounds in the message, e.g. " (1 GiB)".
struct KeyRange {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  std::string_view note = {};
};

struct ConfigKey {
  std::string_view name;  // in a file
  const char* variable;   // PHOENIX_*; nullptr: none
  KeyKind kind;
  KeyField field = {};
  KeyRange range = {};
  std::string (*rule)(const Config&) = nullptr;  // validate()'s further check: "" or the problem
};

// validate()'s rules for single keys (config_keys.cpp).
std::string validate_name(const Config& c);
std::string validate_log_level(const Config& c);
std::string validate_ssh_host_key_policy(const Config& c);
std::string validate_link_protection(const Config& c);
std::string validate_orphan_policy(const Config& c);
std::string validate_assume(const Config& c);

namespace key_bounds {
constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t GiB = KiB * KiB * KiB;
constexpr std::uint64_t u32_max = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();
// Resource names are drawn from [L, 2^64 - 1): at most 2^63 virtual nodes leave 2^63 - 1 of them, so two
// incarnations hardly ever draw the same name (a larger L left too few, and 2^64 - 1 none: a division by zero).
constexpr std::uint64_t space_max = std::uint64_t{1} << 63;
}  // namespace key_bounds

// The order is validate()'s order of checks and the order the environment is read in (the first error found is
// the one reported); of two equally near suggestions for an unknown key, the earlier row's wins.
// clang-format off
inline constexpr std::array kConfigKeys = {
    ConfigKey{"name", "PHOENIX_NAME", KeyKind::text, &Config::name, {}, validate_name},
    ConfigKey{"listen", "PHOENIX_LISTEN", KeyKind::endpoint, &Config::listen},
    ConfigKey{"peers", "PHOENIX_PEERS", KeyKind::endpoints, &Config::peers},
    ConfigKey{"space_size", "PHOENIX_SPACE_SIZE", KeyKind::size, &Config::space_size, {1, key_bounds::space_max, " (2^63)"}},
    ConfigKey{"log_level", "PHOENIX_LOG_LEVEL", KeyKind::text, &Config::log_level, {}, validate_log_level},
    ConfigKey{"cluster_key_file", "PHOENIX_CLUSTER_KEY_FILE", KeyKind::path, &Config::cluster_key_file},
    ConfigKey{"control_key_file", "PHOENIX_CONTROL_KEY_FILE", KeyKind::path, &Config::control_key_file},
    ConfigKey{"controller_key_file", "PHOENIX_CONTROLLER_KEY_FILE", KeyKind::path,
              &Config::controller_key_file},
    ConfigKey{"ssh_identity", "PHOENIX_SSH_IDENTITY", KeyKind::ssh_path, &Config::ssh_identity},
    ConfigKey{"ssh_known_hosts", "PHOENIX_SSH_KNOWN_HOSTS", KeyKind::ssh_path, &Config::ssh_known_hosts},
    ConfigKey{"ssh_host_key_policy", "PHOENIX_SSH_HOST_KEY_POLICY", KeyKind::text,
              &Config::ssh_host_key_policy, {}, validate_ssh_host_key_policy},
    ConfigKey{"link_protection", "PHOENIX_LINK_PROTECTION", KeyKind::text, &Config::link_protection, {},
              validate_link_protection},
    ConfigKey{"retry_interval_ms", "PHOENIX_RETRY_INTERVAL_MS", KeyKind::count, &Config::retry_interval_ms,
              {10, 3'600'000}},
    ConfigKey{"max_waiting_bytes", "PHOENIX_MAX_WAITING_BYTES", KeyKind::size, &Config::max_waiting_bytes},
    ConfigKey{"max_message_bytes", "PHOENIX_MAX_MESSAGE_BYTES", KeyKind::size, &Config::max_message_bytes,
              {1, key_bounds::GiB, " (1 GiB)"}},
    // Below 64 KiB a link stalls on every few frames; above 4 GiB the number is surely a typo.
    ConfigKey{"link_window_bytes", "PHOENIX_LINK_WINDOW_BYTES", KeyKind::size, &Config::link_window_bytes,
              {64 * key_bounds::KiB, 4 * key_bounds::GiB, " (64 KiB..4 GiB)"}},
    ConfigKey{"full_dump_interval_ms", "PHOENIX_FULL_DUMP_INTERVAL_MS", KeyKind::count,
              &Config::full_dump_interval_ms, {10, 86'400'000}},
    ConfigKey{"hop_limit", "PHOENIX_HOP_LIMIT", KeyKind::count, &Config::hop_limit, {1, 255}},
    ConfigKey{"orphan_after_ms", "PHOENIX_ORPHAN_AFTER_MS", KeyKind::count, &Config::orphan_after_ms,
              {10, 86'400'000}},
    ConfigKey{"orphan_policy", "PHOENIX_ORPHAN_POLICY", KeyKind::text, &Config::orphan_policy, {},
              validate_orphan_policy},
    ConfigKey{"migration_lease_ms", "PHOENIX_MIGRATION_LEASE_MS", KeyKind::count, &Config::migration_lease_ms,
              {10, 86'400'000}},
    // An owner's acknowledgement must come well before the sender's copy would: the delay stays under 1 s, the
    // resend over it.
    ConfigKey{"end_to_end_resend_ms", "PHOENIX_END_TO_END_RESEND_MS", KeyKind::count, &Config::end_to_end_resend_ms,
              {1000, 60'000}},
    ConfigKey{"end_to_end_ack_delay_ms", "PHOENIX_END_TO_END_ACK_DELAY_MS", KeyKind::count,
              &Config::end_to_end_ack_delay_ms, {1, 999}},
    ConfigKey{"assume", nullptr, KeyKind::intervals, &Config::assume, {}, validate_assume},
    ConfigKey{"share", "PHOENIX_SHARE", KeyKind::share},
    ConfigKey{"node", nullptr, KeyKind::tables},
};
// clang-format on

// A row's field has the type its kind reads and writes, and only sizes and counts have ranges.
constexpr bool config_key_is_consistent(const ConfigKey& k) {
  if (k.range.hi != 0 && k.kind != KeyKind::size && k.kind != KeyKind::count) return false;
  switch (k.kind) {
    case KeyKind::text:
    case KeyKind::endpoint:
    case KeyKind::path:
    case KeyKind::ssh_path:
      return std::holds_alternative<std::string Config::*>(k.field);
    case KeyKind::endpoints:
      return std::holds_alternative<std::vector<std::string> Config::*>(k.field);
    case KeyKind::size:
      return std::holds_alternative<std::uint64_t Config::*>(k.field);
    case KeyKind::count:
      return std::holds_alternative<std::uint32_t Config::*>(k.field);
    case KeyKind::intervals:
      return std::holds_alternative<std::vector<Interval> Config::*>(k.field);
    case KeyKind::share:
    case KeyKind::tables:
      return std::holds_alternative<std::monostate>(k.field);
  }
  return false;
}
static_assert(std::all_of(kConfigKeys.begin(), kConfigKeys.end(), config_key_is_consistent));

// The row of the one key of a kind (share, node).
constexpr const ConfigKey& config_key_of_kind(KeyKind kind) {
  return *std::find_if(kConfigKeys.begin(), kConfigKeys.end(),
                       [&](const ConfigKey& k) { return k.kind == kind; });
}

// The field of `c` a row names; T is the type its kind implies (config_key_is_consistent).
template <typename T>
T& key_field(const ConfigKey& k, Config& c) {
  return c.*std::get<T Config::*>(k.field);
}
template <typename T>
const T& key_field(const ConfigKey& k, const Config& c) {
  return c.*std::get<T Config::*>(k.field);
}

}  // namespace phoenix
