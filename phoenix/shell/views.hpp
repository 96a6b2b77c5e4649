// phoenix/shell/views.hpp — what phsh draws: the nodes table, the map of [0, L), the link graph and its
// Graphviz form. Pure functions of what the session observed; no I/O, no network.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <phoenix/node.hpp>
#include <string>
#include <vector>

namespace phoenix::shell {

// One node as the views show it: what phsh knows of it, with its last status reply where there was one.
struct NodeView {
  std::string name;
  std::string host;      // "" when unknown
  std::string endpoint;  // "" when unknown
  std::vector<Interval> assumed;
  std::optional<std::uint64_t> queued;  // unknown without a status reply
  std::optional<double> rate;           // messages per second
  std::string state;
  bool present = true;  // in the overlay now (false: it left, was suspended, killed, or exited)
  // What it held when it went without leaving (crashed, or cut off) and nobody assumes now (Node::orphaned).
  std::vector<Interval> orphaned;
};

// A table with one row per node: NAME HOST ENDPOINT ASSUMED QUEUED MSG/S STATE, columns aligned, a header
// line first. Unknown values are "-". With no nodes, the header and "(no nodes)".
std::string nodes_table(const std::vector<NodeView>& nodes);

// The letter standing for the i-th node in the map: A..Z, a..z, 0..9, then '*'.
char map_letter(std::size_t index);

// [0, L) as a bar of `width` characters between '|', each the letter of the node assuming most of that part
// ('!' where a crashed node's orphaned intervals are most of it, '.' where nobody's), the ends of the space
// under it, then a legend: letter, name, exact intervals and share of L, the orphaned parts by crashed node,
// and the parts nobody assumes. The i-th node is map_letter(i) whether or not it assumes
// anything, so that a node keeps its letter from one map to the next; nodes assuming nothing have no row.
std::string map_bar(std::uint64_t space_size, const std::vector<NodeView>& nodes, std::size_t width = 60);

// One node's links: the names of the peers it has a link up to.
struct LinkView {
  std::string name;
  std::vector<std::string> peers;
};

// "n1 -- phsh n2 n3" per node, then how many distinct links there are.
std::string links_text(const std::vector<LinkView>& links);

// The overlay as an undirected Graphviz graph: a vertex per node labelled with its name and intervals, one
// edge per pair of linked nodes (however many sides reported it). Nodes no longer present are left out;
// peers that are not in `nodes` (the shell) get a plain vertex.
std::string dot_text(const std::vector<NodeView>& nodes, const std::vector<LinkView>& links);

}  // namespace phoenix::shell
