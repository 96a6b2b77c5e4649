// phoenix/launch/node_line.cpp — see node_line.hpp.
#include "phoenix/launch/node_line.hpp"

#include "base/text.hpp"

namespace phoenix::launch {
namespace {
using base::parse_number;
using base::trim;
}  // namespace

NodeLine parse_node_line(std::string_view line) {
  NodeLine l;
  line = trim(line);
  l.text = line;
  auto arg = [&](std::string_view keyword) -> std::optional<std::string_view> {
    if (line == keyword) return std::string_view{};
    if (line.starts_with(keyword) && line.size() > keyword.size() && line[keyword.size()] == ' ')
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

}  // namespace phoenix::launch
