// Tests of phoenix/shell/views.hpp and reports.hpp: the nodes table, the map bar of [0, L), the link list and
// the Graphviz text drawn from what the shell observed, and the parsing of status replies and of the lines
// node processes write to stdout. No network, no processes.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "phoenix/shell/reports.hpp"
#include "phoenix/shell/views.hpp"

using phoenix::Interval;
using namespace phoenix::shell;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

NodeView node(std::string name, std::vector<Interval> assumed) {
  NodeView v;
  v.name = std::move(name);
  v.assumed = std::move(assumed);
  return v;
}

}  // namespace

TEST_CASE("map bar: three intervals of a space of 1024 over 60 characters") {
  const std::vector<NodeView> nodes = {node("n1", {{0, 512}}), node("n2", {{512, 768}}),
                                       node("n3", {{768, 1024}})};
  const auto lines = lines_of(map_bar(1024, nodes, 60));
  REQUIRE(lines.size() >= 5);
  CHECK(lines[0] == "|" + std::string(30, 'A') + std::string(15, 'B') + std::string(15, 'C') + "|");
  // The scale: 0 under the left end, L ending under the right '|'.
  CHECK(lines[1].rfind(" 0", 0) == 0);
  CHECK(lines[1].size() == lines[0].size());
  CHECK(lines[1].substr(lines[1].size() - 4) == "1024");
  // The legend: letter, name, exact interval, share of L; nobody line absent since the cover is complete.
  CHECK(lines[2].find("A") != std::string::npos);
  CHECK(lines[2].find("n1") != std::string::npos);
  CHECK(lines[2].find("[0, 512)") != std::string::npos);
  CHECK(lines[2].find("50.0%") != std::string::npos);
  CHECK(lines[3].find("[512, 768)") != std::string::npos);
  CHECK(lines[4].find("[768, 1024)") != std::string::npos);
  CHECK(lines[4].find("25.0%") != std::string::npos);
  CHECK(lines.size() == 5);
}

TEST_CASE("map bar: parts nobody assumes are dots and listed exactly") {
  const std::vector<NodeView> nodes = {node("n1", {{0, 300}}), node("n2", {{600, 1000}})};
  const auto lines = lines_of(map_bar(1000, nodes, 10));
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] == "|AAA...BBBB|");
  CHECK(lines[4].find("nobody") != std::string::npos);
  CHECK(lines[4].find("[300, 600)") != std::string::npos);
  CHECK(lines[4].find("30.0%") != std::string::npos);
}

TEST_CASE("map bar: a node keeps its letter, nodes assuming nothing have no legend row") {
  const std::vector<NodeView> nodes = {node("n1", {{0, 8}}), node("n2", {}), node("n3", {{8, 16}})};
  const auto lines = lines_of(map_bar(16, nodes, 16));
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == "|AAAAAAAACCCCCCCC|");
  CHECK(lines[2].find("A  n1") != std::string::npos);
  CHECK(lines[3].find("C  n3") != std::string::npos);
}

TEST_CASE("map bar: a node with several intervals, a huge space and a space smaller than the bar") {
  const std::vector<NodeView> nodes = {node("n1", {{0, 256}, {768, 1024}}), node("n2", {{256, 768}})};
  CHECK(lines_of(map_bar(1024, nodes, 8))[0] == "|AABBBBAA|");
  const std::uint64_t big = std::uint64_t{1} << 62;
  const auto huge = lines_of(map_bar(big, {node("n1", {{0, big / 2}}), node("n2", {{big / 2, big}})}, 60));
  CHECK(huge[0] == "|" + std::string(30, 'A') + std::string(30, 'B') + "|");
  CHECK(lines_of(map_bar(4, {node("n1", {{0, 4}})}, 60))[0] == "|AAAA|");
  CHECK(map_letter(0) == 'A');
  CHECK(map_letter(26) == 'a');
  CHECK(map_letter(1000) == '*');
}

TEST_CASE("nodes table: a header, one aligned row per node, dashes for what is unknown") {
  NodeView a = node("n1", {{0, 512}});
  a.host = "local";
  a.endpoint = "tcp://127.0.0.1:40001";
  a.queued = 3;
  a.rate = 1234.56;
  a.state = "running";
  NodeView b = node("n10", {});
  b.host = "alice@far.example";
  b.state = "suspended";
  const auto lines = lines_of(nodes_table({a, b}));
  REQUIRE(lines.size() == 3);
  const std::vector<std::string> columns = {"NAME", "HOST", "ENDPOINT", "ASSUMED", "QUEUED", "MSG/S", "STATE"};
  std::size_t previous = 0;
  for (const auto& c : columns) {
    const auto at = lines[0].find(c);
    REQUIRE(at != std::string::npos);
    CHECK((c == "NAME" || at > previous));
    previous = at;
  }
  // Every column starts at the same position in every row.
  CHECK(lines[1].substr(lines[0].find("HOST"), 5) == "local");
  CHECK(lines[2].substr(lines[0].find("HOST"), 17) == "alice@far.example");
  CHECK(lines[1].substr(lines[0].find("ASSUMED"), 8) == "[0, 512)");
  CHECK(lines[1].substr(lines[0].find("QUEUED"), 1) == "3");
  CHECK(lines[1].substr(lines[0].find("MSG/S"), 6) == "1234.6");
  CHECK(lines[1].substr(lines[0].find("STATE")) == "running");
  CHECK(lines[2].substr(lines[0].find("ENDPOINT"), 2) == "- ");
  CHECK(lines[2].substr(lines[0].find("ASSUMED"), 2) == "- ");
  CHECK(lines[2].substr(lines[0].find("STATE")) == "suspended");
}

TEST_CASE("nodes table: with no nodes, the header and a note") {
  const auto lines = lines_of(nodes_table({}));
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].rfind("NAME", 0) == 0);
  CHECK(lines[1] == "(no nodes)");
}

TEST_CASE("links and dot: one edge per linked pair, the shell as a plain vertex") {
  const std::vector<LinkView> links = {{"phsh", {"n1", "n2"}}, {"n1", {"n2", "phsh"}}, {"n2", {"n1", "phsh"}}};
  const std::string text = links_text(links);
  CHECK(text.find("n1   -- n2 phsh") != std::string::npos);
  CHECK(text.find("3 links") != std::string::npos);
  CHECK(links_text({{"n1", {}}}).find("(no links)") != std::string::npos);

  const std::string dot = dot_text({node("n1", {{0, 8}}), node("n2", {{8, 16}})}, links);
  CHECK(dot.rfind("graph overlay {", 0) == 0);
  CHECK(dot.find("\"n1\" [label=\"n1\\n[0, 8)\"];") != std::string::npos);
  CHECK(dot.find("\"phsh\" [shape=ellipse];") != std::string::npos);
  CHECK(dot.find("\"n1\" -- \"n2\";") != std::string::npos);
  CHECK(dot.find("\"n1\" -- \"phsh\";") != std::string::npos);
  CHECK(dot.find("\"n2\" -- \"phsh\";") != std::string::npos);
  const auto edges = std::count(dot.begin(), dot.end(), '-') / 2;
  CHECK(edges == 3);
  CHECK(dot.substr(dot.size() - 2) == "}\n");
}

TEST_CASE("status reply: every key parsed, intervals and peers lists") {
  const std::string text =
      "name=n3\nhost=box\npid=4242\nendpoint=tcp://127.0.0.1:4000\nresource=123456789\n"
      "assumed=[0,512) [768,1024)\nqueued=7\nwaiting=1\nsent=100\nreceived=90\nrate=12.5\nstate=running\n"
      "links=2\npeers=11,22\n";
  const auto s = parse_status(text);
  REQUIRE(s.has_value());
  CHECK(s->name == "n3");
  CHECK(s->host == "box");
  CHECK(s->pid == 4242);
  CHECK(s->endpoint == "tcp://127.0.0.1:4000");
  CHECK(s->resource == 123456789u);
  CHECK(s->assumed == std::vector<Interval>{{0, 512}, {768, 1024}});
  CHECK(s->queued == 7);
  CHECK(s->rate == doctest::Approx(12.5));
  CHECK(s->state == "running");
  CHECK(s->links == 2);
  CHECK(s->peers == std::vector<phoenix::vp_t>{11, 22});

  const auto empty = parse_status("name=n1\nassumed=-\npeers=\n");
  REQUIRE(empty.has_value());
  CHECK(empty->assumed.empty());
  CHECK(empty->peers.empty());
  CHECK_FALSE(parse_status("host=box\n").has_value());           // no name
  CHECK_FALSE(parse_status("name=n1\nqueued=x\n").has_value());  // a value that does not parse
  CHECK_FALSE(parse_intervals("[5,3)").has_value());
  CHECK_FALSE(parse_intervals("[0,1) junk").has_value());
  CHECK(format_intervals({{0, 512}, {768, 1024}}) == "[0, 512) [768, 1024)");
  CHECK(format_intervals({}) == "-");
}

TEST_CASE("node process lines: every keyword, and malformed keyword lines as remarks") {
  CHECK(parse_node_line("REPLICA 2 1").kind == NodeLine::Kind::replica);
  CHECK(parse_node_line("REPLICA 2 1").text == "replica 1 of process 2");
  CHECK(parse_node_line("REPLICA two 1").kind == NodeLine::Kind::remark);
  CHECK(parse_node_line("PORT tcp://127.0.0.1:4000").kind == NodeLine::Kind::port);
  CHECK(parse_node_line("PORT tcp://127.0.0.1:4000").text == "tcp://127.0.0.1:4000");
  const auto joined = parse_node_line("JOINED 512 1024");
  CHECK(joined.kind == NodeLine::Kind::joined);
  CHECK(joined.interval == Interval{512, 1024});
  CHECK(parse_node_line("UNITS 99").units == 99);
  CHECK(parse_node_line("LEFT").kind == NodeLine::Kind::left);
  CHECK(parse_node_line("SUSPENDED /tmp/x.suspend").text == "/tmp/x.suspend");
  CHECK(parse_node_line("COMPLETED").kind == NodeLine::Kind::completed);
  CHECK(parse_node_line("FINISHED").kind == NodeLine::Kind::finished);
  CHECK(parse_node_line("RESULT checksum 00ff").text == "checksum 00ff");
  const auto error = parse_node_line("ERROR n2: join: timed out");
  CHECK(error.kind == NodeLine::Kind::error);
  CHECK(error.text == "join: timed out");
  CHECK(parse_node_line("n1: 40 rows done").kind == NodeLine::Kind::remark);
  CHECK(parse_node_line("JOINED x y").kind == NodeLine::Kind::remark);
  CHECK(parse_node_line("LEFTOVER").kind == NodeLine::Kind::remark);
}

TEST_CASE("node process lines: what the writers write reads back as what they said") {
  namespace l = phoenix::launch;
  CHECK(parse_node_line(l::port_line("tcp://127.0.0.1:4000")).text == "tcp://127.0.0.1:4000");
  const auto joined = parse_node_line(l::joined_line(7, 1ull << 62));
  CHECK(joined.kind == NodeLine::Kind::joined);
  CHECK(joined.interval == Interval{7, 1ull << 62});
  CHECK(parse_node_line(l::units_line(123)).units == 123);
  CHECK(parse_node_line(l::replica_line(3, 2)).text == "replica 2 of process 3");
  CHECK(parse_node_line(l::suspended_line("/tmp/n.suspend")).text == "/tmp/n.suspend");
  CHECK(parse_node_line(l::result_line("sum 42")).text == "sum 42");
  const auto error = parse_node_line(l::error_line("n1", "join: timed out"));
  CHECK(error.kind == NodeLine::Kind::error);
  CHECK(error.text == "join: timed out");
  CHECK(parse_node_line(l::left_line).kind == NodeLine::Kind::left);
  CHECK(parse_node_line(l::completed_line).kind == NodeLine::Kind::completed);
  CHECK(parse_node_line(l::finished_line).kind == NodeLine::Kind::finished);
}
