// phoenix/shell/reports.cpp — see reports.hpp.
#include "phoenix/shell/reports.hpp"

#include <charconv>
#include <cstdlib>
#include <sstream>

namespace phoenix::shell {
namespace {

template <typename T>
bool parse_number(std::string_view text, T& out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

bool parse_double(std::string_view text, double& out) {
  if (text.empty()) return false;
  const std::string s(text);
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

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

NodeLine parse_node_line(std::string_view line) {
  NodeLine l;
  line = trim(line);
  l.text = line;
  auto arg = [&](std::string_view keyword) -> std::optional<std::string_view> {
    if (line == keyword) return std::string_view{};
    if (starts_with(line, keyword) && line.size() > keyword.size() && line[keyword.size()] == ' ')
      return trim(line.substr(keyword.size() + 1));
    return std::nullopt;
  };
  if (auto a = arg("PORT"); a && !a->empty()) {
    l.kind = NodeLine::Kind::port;
    l.text = *a;
  } else if (auto j = arg("JOINED")) {
    const auto space = j->find(' ');
    if (space != std::string_view::npos && parse_number(j->substr(0, space), l.interval.lo) &&
        parse_number(trim(j->substr(space + 1)), l.interval.hi))
      l.kind = NodeLine::Kind::joined;
  } else if (auto v = arg("REPLICA")) {
    const auto space = v->find(' ');
    std::uint64_t process = 0, replica = 0;
    if (space != std::string_view::npos && parse_number(v->substr(0, space), process) &&
        parse_number(trim(v->substr(space + 1)), replica)) {
      l.kind = NodeLine::Kind::replica;
      l.text = "replica " + std::to_string(replica) + " of process " + std::to_string(process);
    }
  } else if (auto u = arg("UNITS")) {
    if (parse_number(*u, l.units)) l.kind = NodeLine::Kind::units;
  } else if (line == "LEFT") {
    l.kind = NodeLine::Kind::left;
  } else if (auto f = arg("SUSPENDED")) {
    l.kind = NodeLine::Kind::suspended;
    l.text = *f;
  } else if (line == "COMPLETED") {
    l.kind = NodeLine::Kind::completed;
  } else if (line == "FINISHED") {
    l.kind = NodeLine::Kind::finished;
  } else if (auto r = arg("RESULT")) {
    l.kind = NodeLine::Kind::result;
    l.text = *r;
  } else if (auto e = arg("ERROR")) {
    l.kind = NodeLine::Kind::error;
    const auto colon = e->find(": ");  // "ERROR <name>: <what>"
    l.text = colon == std::string_view::npos ? *e : e->substr(colon + 2);
  }
  return l;
}

}  // namespace phoenix::shell
