// phoenix/shell/reports.cpp — see reports.hpp.
#include "phoenix/shell/reports.hpp"

#include <cstdlib>
#include <sstream>

#include "base/text.hpp"

namespace phoenix::shell {
namespace {

using base::parse_number;
using base::trim;

bool parse_double(std::string_view text, double& out) {
  if (text.empty()) return false;
  const std::string s(text);
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

}  // namespace

std::optional<std::vector<Interval>> parse_intervals(std::string_view text) {
  std::vector<Interval> out;
  text = trim(text);
  if (text == "-") return out;
  while (!(text = trim(text)).empty()) {
    const auto close = text.find(')');
    const auto comma = text.find(',');
    if (text[0] != '[' || close == std::string_view::npos || comma == std::string_view::npos || comma > close)
      return std::nullopt;
    Interval i;
    if (!parse_number(trim(text.substr(1, comma - 1)), i.lo) ||
        !parse_number(trim(text.substr(comma + 1, close - comma - 1)), i.hi) || i.lo > i.hi)
      return std::nullopt;
    out.push_back(i);
    text.remove_prefix(close + 1);
  }
  return out;
}

std::string format_intervals(const std::vector<Interval>& intervals) {
  if (intervals.empty()) return "-";
  std::string out;
  for (const auto& i : intervals) {
    if (!out.empty()) out += ' ';
    out += "[" + std::to_string(i.lo) + ", " + std::to_string(i.hi) + ")";
  }
  return out;
}

std::optional<NodeStatus> parse_status(std::string_view text) {
  NodeStatus s;
  bool named = false;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string_view key = trim(std::string_view(line).substr(0, eq));
    const std::string_view value = trim(std::string_view(line).substr(eq + 1));
    bool ok = true;
    if (key == "name") {
      s.name = value;
      named = !value.empty();
    } else if (key == "host") {
      s.host = value;
    } else if (key == "endpoint") {
      s.endpoint = value;
    } else if (key == "state") {
      s.state = value;
    } else if (key == "pid") {
      ok = parse_number(value, s.pid);
    } else if (key == "resource") {
      ok = parse_number(value, s.resource);
    } else if (key == "assumed") {
      auto v = parse_intervals(value);
      ok = v.has_value();
      if (ok) s.assumed = std::move(*v);
    } else if (key == "queued") {
      ok = parse_number(value, s.queued);
    } else if (key == "waiting") {
      ok = parse_number(value, s.waiting);
    } else if (key == "sent") {
      ok = parse_number(value, s.sent);
    } else if (key == "received") {
      ok = parse_number(value, s.received);
    } else if (key == "rate") {
      ok = parse_double(value, s.rate);
    } else if (key == "links") {
      ok = parse_number(value, s.links);
    } else if (key == "peers") {
      std::string_view rest = value;
      while (!rest.empty()) {
        const auto comma = rest.find(',');
        vp_t peer = 0;
        if (!parse_number(trim(rest.substr(0, comma)), peer)) return std::nullopt;
        s.peers.push_back(peer);
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
    }
    if (!ok) return std::nullopt;
  }
  if (!named) return std::nullopt;
  return s;
}


}  // namespace phoenix::shell
