#include "phoenix/config_toml.hpp"

#include <algorithm>
#include <limits>
#include <sstream>
#include <tuple>

#include "phoenix/config_file.hpp"

namespace phoenix {
namespace {

constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();

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

}  // namespace

std::string where(const std::string& file, const toml::value& v) {
  const toml::source_location loc = v.location();
  if (loc.file_name() == "unknown file") return file + ": ";
  return file + ":" + std::to_string(loc.line()) + ": ";
}

std::string type_name(const toml::value& v) {
  std::ostringstream os;
  os << v.type();
  return os.str();
}

namespace {
std::string restore_empty_arrays_in(const std::string& file, toml::value& v, const std::string& path,
                                    std::size_t& restored) {
  if (v.is_table()) {
    for (auto& [key, x] : v.as_table())
      if (auto err = restore_empty_arrays_in(file, x, path.empty() ? key : path + "." + key, restored);
          !err.empty())
        return err;
  } else if (v.is_array()) {
    auto& elements = v.as_array();
    if (elements.size() == 1 && elements[0].is_table() &&
        elements[0].as_table().count(std::string(empty_array_marker)) == 1) {
      if (elements[0].as_table().size() != 1)
        return where(file, v) + path + ": is an empty array; no table header or dotted key can go on through it";
      elements.clear();
      ++restored;
      return "";
    }
    for (std::size_t i = 0; i < elements.size(); ++i)
      if (auto err = restore_empty_arrays_in(file, elements[i], path + "[" + std::to_string(i) + "]", restored);
          !err.empty())
        return err;
  }
  return "";
}
}  // namespace

std::string restore_empty_arrays(const std::string& file, toml::value& root, std::size_t marked) {
  std::size_t restored = 0;
  if (auto err = restore_empty_arrays_in(file, root, "", restored); !err.empty()) return err;
  // More than were marked: the file itself wrote the marker, and the array it holds is not empty.
  if (restored != marked)
    return file + ": a key is named \"\\u0001phoenix: an empty array\", which phoenix reserves for its own use";
  return "";
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

std::string unknown_key_message(std::string_view key, std::span<const std::string_view> keys, bool top_level) {
  std::string best;
  std::size_t best_distance = 3;             // more than two edits away is no longer a typo of that key
  for (std::string_view candidate : keys) {  // on a tie the earlier key wins
    std::size_t d = edit_distance(key, candidate);
    // "listen_on", "peer": one key extending or cutting another is a typo too, however many letters apart.
    if (std::min(key.size(), candidate.size()) >= 4 &&
        (key.substr(0, candidate.size()) == candidate || candidate.substr(0, key.size()) == key))
      d = std::min<std::size_t>(d, 2);
    if (d < best_distance) best_distance = d, best = candidate;
  }
  if (!best.empty()) return "unknown key (did you mean " + best + "?)";
  return top_level ? "unknown key (see config/README.md for the keys)"
                   : "unknown key (a [node.NAME] table takes the top-level keys except node)";
}

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

std::string read_share(const toml::value& v, Share& out) {
  Share s;
  std::string err;
  if (v.is_string()) {
    err = parse_share_text(v.as_string().str, s);
  } else if (v.is_array() && v.as_array().size() == 2) {
    std::uint64_t parts[2] = {0, 0};
    for (std::size_t i = 0; i < 2 && err.empty(); ++i)
      err = read_number(v.as_array()[i], NumberKind::plain, kU64Max, parts[i]);
    if (err.empty()) err = check_share(s = Share{parts[0], parts[1]});
  } else {
    err = "expected [i, n] (the i-th of n equal parts of [0, L)), got " +
          (v.is_array() ? "an array of " + std::to_string(v.as_array().size()) : type_name(v));
  }
  if (err.empty()) out = s;
  return err;
}

std::string read_strings(const std::string& file, const std::string& name, const toml::value& v,
                         std::vector<std::string>& out) {
  if (!v.is_array()) return where(file, v) + name + ": expected an array of strings, got " + type_name(v);
  std::vector<std::string> list;
  for (const toml::value& e : v.as_array()) {
    if (!e.is_string())
      return where(file, e) + name + ": expected an array of strings, got " + type_name(e) + " in it";
    list.push_back(e.as_string().str);
  }
  out = std::move(list);
  return "";
}

std::string read_intervals(const std::string& file, const std::string& name, const toml::value& v,
                           std::vector<Interval>& out) {
  if (!v.is_array())
    return where(file, v) + name + ": expected an array of {lo = ..., hi = ...} tables, got " + type_name(v);
  std::vector<Interval> intervals;
  const auto& elements = v.as_array();
  for (std::size_t i = 0; i < elements.size(); ++i) {
    const toml::value& e = elements[i];
    const std::string path = name + "[" + std::to_string(i) + "]";
    if (!e.is_table())
      return where(file, e) + path + ": expected a {lo = ..., hi = ...} table, got " + type_name(e);
    Interval s;
    bool has_lo = false, has_hi = false;
    for (const auto& [k, x] : entries_in_file_order(e)) {
      if (k != "lo" && k != "hi")
        return where(file, *x) + path + "." + k + ": unknown key (an interval has lo and hi)";
      std::uint64_t bound = 0;
      if (std::string err = read_number(*x, NumberKind::size, kU64Max, bound); !err.empty())
        return where(file, *x) + path + "." + k + ": " + err;
      (k == "lo" ? s.lo : s.hi) = bound;
      (k == "lo" ? has_lo : has_hi) = true;
    }
    if (!has_lo || !has_hi) return where(file, e) + path + ": needs both lo and hi (the interval is [lo, hi))";
    intervals.push_back(s);
  }
  out = std::move(intervals);
  return "";
}

}  // namespace phoenix
