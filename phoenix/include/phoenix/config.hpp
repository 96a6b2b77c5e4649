// phoenix/config.hpp — a node's configuration: defaults, TOML files, PHOENIX_* environment variables.
//
// The paper (section 3.3) leaves "a more convenient interface ... from a configuration file" to the layer above
// ph_initialize / ph_add_port; this is that layer. Precedence, lowest first:
//   defaults < the file's top-level keys < its [node.NAME] table < PHOENIX_* environment < ph_initialize's port
// (the last one is applied by the node itself, not here). config/README.md documents every key and variable.
//
// Errors are values: no function here throws. An error is one line that names the file, line and key (or the
// environment variable) at fault, so it can be logged or shown as is.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <phoenix/node.hpp>  // Interval
#include <string>
#include <string_view>
#include <vector>

namespace phoenix {

// The i-th (index) of `count` equal consecutive parts of [0, L): a static partition for tests and demos.
struct Share {
  std::uint64_t index = 0;
  std::uint64_t count = 1;
  friend bool operator==(const Share&, const Share&) = default;
};

struct Config {
  // Short name at the start of every log line. Empty means default_node_name() ("n" + pid); load_config with a
  // node name sets it to that name, config_from_environment never leaves it empty.
  std::string name;
  std::string listen = "tcp://127.0.0.1:0";           // endpoint to bind (ph_initialize's port argument wins)
  std::vector<std::string> peers;                     // endpoints to keep links to (as ph_add_port)
  std::uint64_t space_size = std::uint64_t{1} << 62;  // L
  std::string log_level = "warn";                     // trace, debug, info, warn, error, critical, off
  std::string cluster_key_file;                       // empty: a development key, on loopback only
  // What protects every frame of a link after its handshake: "integrity" (an AES-256-GMAC tag on every frame)
  // or "off" (nothing: for links the user trusts). A link takes the stronger of its two ends' settings.
  std::string link_protection = "integrity";
  // The controller's Ed25519 keys, PEM (docs/shell.md, "Who may control a node"). control_key_file: its public
  // key, with which this node checks kill, leave, suspend and log requests; empty: it refuses them all.
  // controller_key_file: its private key, with which this node signs such requests (Node::control).
  std::string control_key_file;
  std::string controller_key_file;
  std::uint32_t retry_interval_ms = 1000;             // reconnect interval for broken/unreachable links
  std::uint64_t max_waiting_bytes = 256ull
                                    << 20;        // bound on messages held for lack of a route (then PH_EAGAIN)
  std::uint64_t max_message_bytes = 64ull << 20;  // largest message body
  std::uint64_t link_window_bytes = 8ull << 20;   // unacknowledged bytes in flight per link
  std::uint32_t full_dump_interval_ms = 10000;    // period of routing summaries (docs/overlay.md)
  std::uint32_t hop_limit = 64;                   // per forwarded message
  // An owner that has been unreachable this long, and held intervals when it went, is presumed crashed: its
  // intervals are reported as orphaned (Node::orphaned, ph_orphaned, phsh nodes and map).
  std::uint32_t orphan_after_ms = 10000;
  // What happens to orphaned intervals: "wait" (they stay nobody's: the owner may come back from a log) or
  // "adopt" (the node whose interval ends where one begins assumes it, and its application is told: see
  // Node::set_adoption_handler). Adopting presumes the owner crashed: one only cut off would find its
  // intervals assumed twice when it comes back.
  std::string orphan_policy = "wait";
  // Migration leases (docs/migration.md, decision 8): a lock, or an attempt, that waits this long for a partner
  // that does not answer is given up, where that is safe against a partner that is only slow; so a crashed
  // partner's lock is back within about this long. A giver waiting for a taker that has been unreachable for
  // orphan_after_ms frees its lock too.
  std::uint32_t migration_lease_ms = 3000;
  // End-to-end delivery (docs/overlay.md): a message its virtual node's owner has not acknowledged goes out
  // again after end_to_end_resend_ms, then after twice as long each time, up to a minute; an owner
  // acknowledges within end_to_end_ack_delay_ms, or at once when 64 messages or 1 MiB are owed to one sender.
  std::uint32_t end_to_end_resend_ms = 2000;
  std::uint32_t end_to_end_ack_delay_ms = 10;
  // ssh:// links. Empty identity: ~/.ssh/id_ed25519, then ~/.ssh/id_rsa, then the ssh-agent (SSH_AUTH_SOCK).
  // Empty known_hosts: ~/.ssh/known_hosts. Policy "strict" refuses an unknown gateway key, "accept-new" records
  // it; a changed key is refused either way. A leading "~/" is the home directory.
  std::string ssh_identity;
  std::string ssh_known_hosts;
  std::string ssh_host_key_policy = "strict";
  // Intervals assumed right after initialize. Already contains the part named by `share`, so a node only
  // needs to assume every element of this vector.
  std::vector<Interval> assume;
  // Where the share part of `assume` came from (the file's `share` key or PHOENIX_SHARE). Kept so that a later
  // PHOENIX_SPACE_SIZE or PHOENIX_SHARE replaces that part instead of leaving one computed for another L.
  // Informational for hand-built Configs: setting it does not change `assume` (use share_part()).
  std::optional<Share> share;
};

struct ConfigResult {
  Config config;      // meaningful only when ok()
  std::string error;  // one line; empty on success
  bool ok() const { return error.empty(); }
};

// Reads a TOML file. Top-level keys apply to every node; a [node.NAME] table overrides them key by key for node
// NAME (whole values: a node's `peers` replaces the top-level `peers`, it does not append). With an empty
// node_name only top-level keys apply; a node_name without a [node.NAME] table is an error. Every [node.*]
// table is checked, not only the selected one, so a typo anywhere in a shared file stops every node.
// Relative key file paths (cluster_key_file, control_key_file, controller_key_file, ssh_*) are taken relative
// to the file's directory (and returned absolute).
// The result is parsed, not validated: call validate() (config_from_environment does).
PH_API ConfigResult load_config(const std::filesystem::path& file, std::string_view node_name = {});

// Applies the PHOENIX_* overrides to `config`; `lookup` returns nullptr when a variable is unset (default:
// std::getenv). An empty value counts as unset. Returns "" or an error naming the variable; on error `config`
// is left unchanged.
using EnvLookup = std::function<const char*(const char*)>;
PH_API std::string apply_environment(Config& config, const EnvLookup& lookup = {});

// What a node uses when no Config is given: the file named by PHOENIX_CONFIG (optional) with the [node.NAME]
// table named by PHOENIX_NODE, then the environment overrides, then validate(). PHOENIX_NODE without
// PHOENIX_CONFIG is an error (it would select nothing).
PH_API ConfigResult config_from_environment(const EnvLookup& lookup = {});

// "" or the first problem found, e.g. "hop_limit must be in 1..255 (got 0)".
PH_API std::string validate(const Config& config);

// [index * (L / count), (index + 1) * (L / count)), the last part ending at L (it takes the remainder).
// Requires 1 <= count <= space_size and index < count (load_config and apply_environment check this).
PH_API Interval share_part(std::uint64_t space_size, Share share);

// "n" followed by the process id: the name of a node whose configuration names none.
PH_API std::string default_node_name();

}  // namespace phoenix
