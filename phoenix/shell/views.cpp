// phoenix/shell/views.cpp — see views.hpp.
#include "phoenix/shell/views.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include "phoenix/shell/reports.hpp"

namespace phoenix::shell {
namespace {

std::string pad(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string rate_text(double rate) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", rate);
  return buf;
}

std::string percent(std::uint64_t part, std::uint64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%",
                whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0);
  return buf;
}

// floor(space * i / width) without overflow: space = q * width + r.
std::uint64_t boundary(std::uint64_t space, std::size_t width, std::size_t i) {
  const std::uint64_t q = space / width, r = space % width;
  return q * i + r * i / width;
}

std::uint64_t overlap(Interval a, std::uint64_t lo, std::uint64_t hi) {
  const auto l = std::max(a.lo, lo), h = std::min(a.hi, hi);
  return h > l ? h - l : 0;
}

// The parts of [0, space) that no interval of any node covers.
std::vector<Interval> gaps(std::uint64_t space, const std::vector<NodeView>& nodes) {
  std::vector<Interval> all;
  for (const auto& n : nodes) {
    for (const auto& i : n.assumed)
      if (!i.empty()) all.push_back(i);
    for (const auto& i : n.orphaned)
      if (!i.empty()) all.push_back(i);
  }
  std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.lo < b.lo; });
  std::vector<Interval> out;
  std::uint64_t covered = 0;
  for (const auto& i : all) {
    if (i.lo > covered) out.push_back({covered, std::min(i.lo, space)});
    covered = std::max(covered, i.hi);
  }
  if (covered < space) out.push_back({covered, space});
  return out;
}

std::string dot_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

std::string dot_quote(const std::string& s) { return "\"" + dot_escape(s) + "\""; }

}  // namespace

std::string nodes_table(const std::vector<NodeView>& nodes) {
  const std::vector<std::string> header = {"NAME", "HOST", "ENDPOINT", "ASSUMED", "QUEUED", "MSG/S", "STATE"};
  std::vector<std::vector<std::string>> rows{header};
  for (const auto& n : nodes) {
    rows.push_back({n.name, n.host.empty() ? "-" : n.host, n.endpoint.empty() ? "-" : n.endpoint,
                    format_intervals(n.assumed), n.queued ? std::to_string(*n.queued) : "-",
                    n.rate ? rate_text(*n.rate) : "-", n.state.empty() ? "-" : n.state});
  }
  std::vector<std::size_t> width(header.size(), 0);
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t c = 0; c < r.size(); ++c) line += c + 1 < r.size() ? pad(r[c], width[c] + 2) : r[c];
    out += line + "\n";
  }
  if (nodes.empty()) out += "(no nodes)\n";
  return out;
}

char map_letter(std::size_t index) {
  static constexpr char letters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  return index < sizeof letters - 1 ? letters[index] : '*';
}

std::string map_bar(std::uint64_t space_size, const std::vector<NodeView>& nodes, std::size_t width) {
  if (space_size == 0 || width == 0) return "(empty space)\n";
  width = static_cast<std::size_t>(std::min<std::uint64_t>(width, space_size));
  std::string bar = "|";
  for (std::size_t c = 0; c < width; ++c) {
    const auto lo = boundary(space_size, width, c), hi = boundary(space_size, width, c + 1);
    std::uint64_t covered = 0, best = 0, orphaned = 0;
    char letter = '.';
    for (std::size_t k = 0; k < nodes.size(); ++k) {
      std::uint64_t mine = 0;
      for (const auto& i : nodes[k].assumed) mine += overlap(i, lo, hi);
      for (const auto& i : nodes[k].orphaned) orphaned += overlap(i, lo, hi);
      covered += mine;
      if (mine > best) {
        best = mine;
        letter = map_letter(k);
      }
    }
    if (orphaned > best) {
      best = orphaned;
      letter = '!';
    }
    covered += orphaned;
    if (hi - lo > covered && hi - lo - covered > best) letter = '.';  // mostly nobody's
    bar += letter;
  }
  bar += "|\n";
  const std::string end = std::to_string(space_size);
  std::string scale = " 0";
  scale += std::string(width > end.size() ? width - end.size() : 1, ' ') + end + "\n";
  // The legend: letter, name, intervals, share; columns aligned.
  std::vector<std::array<std::string, 4>> rows;
  auto add_row = [&](char letter, const std::string& name, const std::vector<Interval>& intervals) {
    std::uint64_t total = 0;
    for (const auto& i : intervals) total += i.hi > i.lo ? i.hi - i.lo : 0;
    rows.push_back({std::string(1, letter), name, format_intervals(intervals), percent(total, space_size)});
  };
  for (std::size_t k = 0; k < nodes.size(); ++k)
    if (!nodes[k].assumed.empty()) add_row(map_letter(k), nodes[k].name, nodes[k].assumed);
  for (const auto& n : nodes)
    if (!n.orphaned.empty()) add_row('!', n.name + " (crashed)", n.orphaned);
  if (const auto nobody = gaps(space_size, nodes); !nobody.empty()) add_row('.', "nobody", nobody);
  std::size_t name_width = 0, intervals_width = 0;
  for (const auto& r : rows) {
    name_width = std::max(name_width, r[1].size());
    intervals_width = std::max(intervals_width, r[2].size());
  }
  std::string out = bar + scale;
  for (const auto& r : rows)
    out += "  " + r[0] + "  " + pad(r[1], name_width) + "  " + pad(r[2], intervals_width) + "  " + r[3] + "\n";
  return out;
}

std::string links_text(const std::vector<LinkView>& links) {
  std::set<std::pair<std::string, std::string>> edges;
  std::size_t name_width = 0;
  for (const auto& l : links) name_width = std::max(name_width, l.name.size());
  std::string out;
  for (const auto& l : links) {
    out += pad(l.name, name_width) + " --";
    if (l.peers.empty()) out += " (no links)";
    for (const auto& p : l.peers) {
      out += " " + p;
      edges.insert(std::minmax(l.name, p));
    }
    out += "\n";
  }
  out += std::to_string(edges.size()) + (edges.size() == 1 ? " link\n" : " links\n");
  return out;
}

std::string dot_text(const std::vector<NodeView>& nodes, const std::vector<LinkView>& links) {
  std::string out = "graph overlay {\n  node [shape=box, fontname=\"monospace\"];\n";
  std::set<std::string> known;
  for (const auto& n : nodes) {
    if (!n.present) continue;
    known.insert(n.name);
    std::string label = dot_escape(n.name) + "\\n" + format_intervals(n.assumed);
    if (!n.state.empty()) label += "\\n" + dot_escape(n.state);
    out += "  " + dot_quote(n.name) + " [label=\"" + label + "\"];\n";
  }
  std::set<std::pair<std::string, std::string>> edges;
  for (const auto& l : links)
    for (const auto& p : l.peers) edges.insert(std::minmax(l.name, p));
  for (const auto& [a, b] : edges) {
    for (const auto& v : {a, b})
      if (known.insert(v).second) out += "  " + dot_quote(v) + " [shape=ellipse];\n";
  }
  for (const auto& [a, b] : edges) out += "  " + dot_quote(a) + " -- " + dot_quote(b) + ";\n";
  return out + "}\n";
}

}  // namespace phoenix::shell
