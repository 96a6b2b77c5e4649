// config_keys.cpp — validate(): what each row of kConfigKeys demands of its value.
#include "phoenix/config_keys.hpp"

#include "overlay/links/handshake.hpp"  // protection_mode_from

namespace phoenix {
namespace {

constexpr std::array<std::string_view, 7> kLogLevels = {"trace", "debug",    "info", "warn",
                                                        "error", "critical", "off"};

std::string interval_text(Interval s) { return "[" + std::to_string(s.lo) + ", " + std::to_string(s.hi) + ")"; }

bool is_endpoint(std::string_view s) {
  for (std::string_view scheme : {"tcp://", "ssh://"})
    if (s.size() > scheme.size() && s.substr(0, scheme.size()) == scheme) return true;
  return false;
}

// By the key's kind, its range and its rule: "" or the problem.
std::string check_key(const ConfigKey& k, const Config& c) {
  const std::string name(k.name);
  if (k.kind == KeyKind::endpoint) {
    const std::string& s = key_field<std::string>(k, c);
    if (!is_endpoint(s)) return name + " \"" + s + "\" must start with tcp:// or ssh://";
  }
  if (k.kind == KeyKind::endpoints) {
    const auto& list = key_field<std::vector<std::string>>(k, c);
    for (std::size_t i = 0; i < list.size(); ++i)
      if (!is_endpoint(list[i]))
        return name + "[" + std::to_string(i) + "] \"" + list[i] + "\" must start with tcp:// or ssh://";
  }
  if (k.range.hi != 0) {
    const std::uint64_t v =
        k.kind == KeyKind::size ? key_field<std::uint64_t>(k, c) : key_field<std::uint32_t>(k, c);
    if (k.range.hi == key_bounds::u64_max && v < k.range.lo)
      return name + " must be at least " + std::to_string(k.range.lo);
    if (v < k.range.lo || v > k.range.hi)
      return name + " must be in " + std::to_string(k.range.lo) + ".." + std::to_string(k.range.hi) +
             std::string(k.range.note) + " (got " + std::to_string(v) + ")";
  }
  return k.rule != nullptr ? k.rule(c) : "";
}

}  // namespace

std::string validate_name(const Config& c) {
  if (c.name.size() > 64)
    return "name must be at most 64 characters (got " + std::to_string(c.name.size()) + ")";
  for (char ch : c.name) {
    // It starts every log line: no spaces or control characters that would make logs ambiguous.
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                    ch == '.' || ch == '_' || ch == '-';
    if (!ok) return "name \"" + c.name + "\" may only contain letters, digits, '.', '_' and '-'";
  }
  return "";
}

std::string validate_log_level(const Config& c) {
  if (std::find(kLogLevels.begin(), kLogLevels.end(), c.log_level) != kLogLevels.end()) return "";
  return "log_level \"" + c.log_level + "\" must be one of trace, debug, info, warn, error, critical, off";
}

std::string validate_ssh_host_key_policy(const Config& c) {
  if (c.ssh_host_key_policy == "strict" || c.ssh_host_key_policy == "accept-new") return "";
  return "ssh_host_key_policy \"" + c.ssh_host_key_policy +
         "\" must be \"strict\" or \"accept-new\" (host key checking cannot be turned off)";
}

std::string validate_link_protection(const Config& c) {
  if (overlay::protection_mode_from(c.link_protection)) return "";
  return "link_protection \"" + c.link_protection + "\" must be \"integrity\" or \"off\"";
}

std::string validate_orphan_policy(const Config& c) {
  if (c.orphan_policy == "wait" || c.orphan_policy == "adopt") return "";
  return "orphan_policy \"" + c.orphan_policy + "\" must be \"wait\" or \"adopt\"";
}

// Non-empty, within [0, L), pairwise disjoint (touching is fine).
std::string validate_assume(const Config& c) {
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
}

std::string validate(const Config& c) {
  try {
    for (const ConfigKey& k : kConfigKeys)
      if (std::string err = check_key(k, c); !err.empty()) return err;
    return "";
  } catch (const std::exception& e) {
    return std::string("cannot validate configuration: ") + e.what();
  }
}

}  // namespace phoenix
