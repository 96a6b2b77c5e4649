// describe.cpp — a RoutingSnapshot as text, for people (the demo, the shell, logs).
#include <phoenix/node.hpp>

#include <sstream>

namespace phoenix {

std::string describe(const std::vector<Interval>& v) {
  if (v.empty()) return "-";
  std::ostringstream out;
  for (std::size_t i = 0; i < v.size(); ++i) out << (i ? " " : "") << "[" << v[i].lo << "," << v[i].hi << ")";
  return out.str();
}

std::string describe(const RoutingSnapshot& s) {
  std::ostringstream out;
  out << "node " << s.self << " seqno " << s.seqno << " assumes " << describe(s.assumed) << "; "
      << s.waiting_messages << " messages waiting for a route";
  if (!s.waiting_for.empty()) {
    out << " (to";
    for (auto d : s.waiting_for) out << " " << d;
    out << ")";
  }
  if (s.out_of_hops > 0) out << "; " << s.out_of_hops << " used up their hops here";
  out << "\n";
  out << "  links:\n";
  for (const auto& l : s.links)
    out << "    " << (l.outbound ? "-> " : "<- ") << l.address << "  " << l.state << "  peer " << l.peer
        << "  unacked " << l.frames_unacked << "\n";
  out << "  routes (destination, next hop, hops, seqno, intervals):\n";
  for (const auto& r : s.routes) {
    out << "    " << r.destination << "  via " << r.next_hop << "  ";
    if (r.metric == 0xFFFF) out << "unreachable";
    else out << r.metric;
    out << "  " << r.seqno << "  " << describe(r.intervals) << "\n";
  }
  return out.str();
}

}  // namespace phoenix
