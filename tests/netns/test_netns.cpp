// The overlay across real network boundaries: three LANs and a NATed host as network namespaces
// (tests/netns/netns.hpp), a router whose firewall lets only TCP to the LANs' SSH gateways through, a real
// OpenSSH server as the gateway of each LAN, and phoenix nodes as processes inside the namespaces.
//
//   LAN i (10.77.i.2):  gateway sshd :22,  node a<i> :7001,  node b<i> :7002 (b<i> dials a<i> by tcp://)
//   a1 -> a2 -> a3 -> a1 by ssh:// through the next LAN's gateway; the NATed node n (10.77.4.2) dials b2
//   through gateway 2 and cannot be dialled. A prober h in LAN 3 trusts another host key for gateway 1.
//
// Every node owns a seventh of [0, L) and sends to virtual nodes in every share; each message must arrive
// exactly once at its owner, also while the SSH server process of the a2 -> a3 tunnel is killed mid-stream.
// Where namespaces cannot be created (no root / CAP_SYS_ADMIN) the test says why and CTest reports it skipped
// (SKIP_REGULAR_EXPRESSION "NETNS-SKIPPED"); tests/overlay/test_ssh.cpp is the loopback variant.
#include <doctest/doctest.h>
#include <spdlog/sinks/ringbuffer_sink.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <phoenix/config.hpp>
#include <phoenix/node.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "phoenix/launch/process_group.hpp"
#include "netns/netns.hpp"
#include "overlay/log.hpp"
#include "support/nodes.hpp"
#include "support/sshd.hpp"
#include "support/temp_dir.hpp"

using namespace std::chrono_literals;
using phoenix::launch::ChildPipes;
using phoenix::launch::Clock;
using phoenix::launch::ProcessGroup;
namespace ns = phoenix::test::netns;

namespace {

constexpr int share_count = 7;  // two nodes per LAN and the NATed one
constexpr std::uint64_t space = 7000;
constexpr int per_share = 100;  // messages from each sender to each share
constexpr int messages_per_node = per_share * share_count;

struct member {
  std::string name;
  int subnet = 1;  // 1..3 a LAN, ns::nat_subnet the NAT side
  std::uint16_t port = 0;
  std::vector<std::string> peers;
  int share = -1;  // index into the share_count parts, -1 for none
  bool wrong_host_key = false;
};

struct wire_message {
  std::uint32_t sender;
  std::uint32_t k;
  std::uint64_t vnode;
};

// What every child needs besides its member entry.
struct setup {
  std::string lan_namespace[ns::lan_count + 1];
  std::string nat_namespace;
  std::string cluster_key, identity, known_hosts, wrong_known_hosts, go_file;
};

phoenix::Interval share_of(int i) {
  return phoenix::share_part(space, {static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(share_count)});
}

// The k-th destination of sender s: share k % 7, a spread of virtual nodes inside it.
std::uint64_t target(int s, int k) {
  const auto part = share_of(k % share_count);
  return part.lo +
         (static_cast<std::uint64_t>(k) * 31 + static_cast<std::uint64_t>(s) * 17) % (part.hi - part.lo);
}

std::string tcp(int subnet, std::uint16_t port) {
  return "tcp://" + ns::host_ip(subnet) + ":" + std::to_string(port);
}

// ssh://USER@GATEWAY/HOST:PORT: through the gateway of `lan` to a node of that LAN (port 22 is the default).
std::string ssh_to(int lan, std::uint16_t port) {
  return "ssh://" + phoenix::test::current_user() + "@" + ns::host_ip(lan) + "/" + ns::host_ip(lan) + ":" +
         std::to_string(port);
}

std::vector<member> members() {
  std::vector<member> m;
  for (int i = 1; i <= ns::lan_count; ++i) {
    m.push_back({"a" + std::to_string(i), i, 7001, {ssh_to(i % ns::lan_count + 1, 7001)}, 2 * (i - 1)});
    m.push_back({"b" + std::to_string(i), i, 7002, {tcp(i, 7001)}, 2 * (i - 1) + 1});
  }
  m.push_back({"n", ns::nat_subnet, 7001, {ssh_to(2, 7002)}, 6});
  m.push_back({"h", 3, 7003, {ssh_to(1, 7001)}, -1, true});
  return m;
}

struct log_capture {
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink =
      std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256);
  log_capture() { phoenix::overlay::logger()->sinks().push_back(sink); }
  std::string find(const std::string& text) const {
    for (const auto& line : sink->last_formatted())
      if (line.find(text) != std::string::npos) return line;
    return "";
  }
};

bool outbound_links_up(const phoenix::Node& node, const std::vector<std::string>& peers) {
  const auto links = node.routing_snapshot().links;
  for (const auto& p : peers) {
    bool up = false;
    for (const auto& l : links) up = up || (l.address == p && l.state == "up");
    if (!up) return false;
  }
  return true;
}

void report(const ChildPipes& pipes, const std::string& line) {
  phoenix::launch::report_line(pipes.report_fd, line);
}

// The prober: its node must be refused by gateway 1 for the host key; it reports the warning.
int run_prober(phoenix::Node& node, const member& m, const log_capture& log, const ChildPipes& pipes) {
  const auto deadline = Clock::now() + 15s;
  while (log.find("CHANGED").empty() && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
  std::string line = log.find("CHANGED");
  std::replace(line.begin(), line.end(), '\n', ' ');
  report(pipes, "HOSTKEY " + (line.empty() ? std::string("none") : line));
  report(pipes, std::string("HOSTKEY-LINK ") + (outbound_links_up(node, m.peers) ? "up" : "down"));
  while (!phoenix::launch::stop_requested(pipes.control_fd, 50ms)) {
  }
  return 0;
}

// Sends messages_per_node messages paced over about three seconds, then receives its share's.
int run_sender(phoenix::Node& node, const member& m, const setup& s, const ChildPipes& pipes) {
  const auto deadline = Clock::now() + 45s;
  while (!outbound_links_up(node, m.peers) && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
  if (Clock::now() >= deadline) {
    report(pipes, "ERROR " + m.name + ": outbound links not up");
    return 1;
  }
  report(pipes, "READY " + m.name);
  while (!std::filesystem::exists(s.go_file) && Clock::now() < deadline) std::this_thread::sleep_for(10ms);

  std::uint64_t eagain = 0;
  for (int k = 0; k < messages_per_node; ++k) {
    const wire_message w{static_cast<std::uint32_t>(m.share), static_cast<std::uint32_t>(k),
                         target(m.share, k)};
    while (node.send(w.vnode, 1, &w, sizeof w).value() == PH_EAGAIN && Clock::now() < deadline) {
      ++eagain;
      std::this_thread::sleep_for(1ms);
    }
    std::this_thread::sleep_for(4ms);
  }

  const auto mine = share_of(m.share);
  const int expected = per_share * share_count;  // per_share from every sender
  int received = 0, duplicates = 0, misdelivered = 0;
  std::set<std::pair<std::uint32_t, std::uint32_t>> seen;
  auto take = [&](const phoenix::Message& msg) {
    wire_message w;
    if (msg.size() != sizeof w) return void(++misdelivered);
    std::memcpy(&w, msg.data(), sizeof w);
    if (w.vnode != msg.dest() || !mine.contains(msg.dest())) ++misdelivered;
    if (seen.insert({w.sender, w.k}).second)
      ++received;
    else
      ++duplicates;
  };
  while (received < expected && Clock::now() < deadline)
    if (auto msg = node.recv_for(1, 50ms)) take(*msg);
  // Anything arriving a second time would most likely come now, from a resend after the tunnel broke.
  const auto linger = Clock::now() + 1s;
  while (Clock::now() < linger)
    if (auto msg = node.recv_for(1, 50ms)) take(*msg);

  std::ostringstream out;
  out << "DONE " << m.name << " received " << received << " expected " << expected << " duplicates "
      << duplicates << " misdelivered " << misdelivered << " links_lost " << node.routing_snapshot().links_lost
      << " eagain " << eagain;
  report(pipes, out.str());
  while (!phoenix::launch::stop_requested(pipes.control_fd)) (void)node.recv_for(2, 20ms);  // keep forwarding
  node.finalize();
  return 0;
}

// A child process: enters its namespace before any socket exists, then runs one node.
int run_member(const member& m, const setup& s, const ChildPipes& pipes) {
  const std::string netns = m.subnet == ns::nat_subnet ? s.nat_namespace : s.lan_namespace[m.subnet];
  if (auto why = phoenix::test::enter_netns(netns); !why.empty()) {
    report(pipes, "ERROR " + m.name + ": " + why);
    return 1;
  }
  log_capture log;
  auto c = phoenix::test::node_config(m.name, s.cluster_key, space);
  c.retry_interval_ms = 100;
  c.ssh_identity = s.identity;
  c.ssh_known_hosts = m.wrong_host_key ? s.wrong_known_hosts : s.known_hosts;
  phoenix::Node node(c);
  bool failed = static_cast<bool>(node.initialize(tcp(m.subnet, m.port)));
  for (const auto& p : m.peers) failed = failed || node.add_port(p);
  if (m.share >= 0) failed = failed || node.assume(share_of(m.share));
  if (failed) {
    report(pipes, "ERROR " + m.name + ": could not start");
    return 1;
  }
  return m.wrong_host_key ? run_prober(node, m, log, pipes) : run_sender(node, m, s, pipes);
}

// "DONE a1 received 700 expected 700 ..." -> {"received": 700, ...}
std::map<std::string, long> fields(const std::string& line) {
  std::istringstream in(line);
  std::string word, name;
  in >> word >> name;
  std::map<std::string, long> out;
  long value = 0;
  while (in >> word >> value) out[word] = value;
  return out;
}

// One SSH gateway: an sshd inside a LAN's namespace, on that LAN's address, port 22.
struct gateway {
  phoenix::test::temp_dir dir;
  phoenix::test::sshd server;
  gateway(const std::string& netns, int lan)
      : server(dir, phoenix::test::sshd_options{netns, ns::host_ip(lan), ns::ssh_port}) {}
};

// Kills the sshd process serving one connection, and what it forked.
pid_t kill_one_session(const phoenix::test::sshd& server) {
  const auto sessions = server.sessions();
  if (sessions.size() != 1) return -1;
  for (pid_t p : phoenix::test::descendants(sessions.front())) ::kill(p, SIGKILL);
  ::kill(sessions.front(), SIGKILL);
  return sessions.front();
}

void check_firewall(const ns::lab& lab) {
  using phoenix::test::tcp_connects;
  const auto lan = [&](int i) { return lab.lan(i); };
  // Inside a LAN every port answers: what fails below is the router's doing.
  CHECK(tcp_connects(lan(2), ns::host_ip(2), 7001, 1s));
  CHECK(tcp_connects(lab.nat(), ns::host_ip(ns::nat_subnet), 7001, 1s));
  // Across LANs only the gateways' SSH port.
  CHECK(tcp_connects(lan(1), ns::host_ip(2), ns::ssh_port, 1s));
  CHECK(tcp_connects(lab.nat(), ns::host_ip(1), ns::ssh_port, 1s));
  CHECK_FALSE(tcp_connects(lan(1), ns::host_ip(2), 7001, 800ms));
  CHECK_FALSE(tcp_connects(lan(3), ns::host_ip(1), 7002, 800ms));
  CHECK_FALSE(tcp_connects(lab.nat(), ns::host_ip(3), 7001, 800ms));
  // Nothing gets in behind the NAT, not even from the router's own LAN side.
  CHECK_FALSE(tcp_connects(lan(1), ns::host_ip(ns::nat_subnet), 7001, 800ms));
}

}  // namespace

TEST_CASE("netns: three LANs joined only by SSH gateways, and a node behind NAT: every message once") {
  phoenix::launch::install_interrupt_handlers();  // SIGINT/SIGTERM end the wait below, and the guards tear down
  ns::lab lab;
  if (const std::string why = lab.build(); !why.empty()) {
    MESSAGE("NETNS-SKIPPED: cannot create network namespaces here (needs root or CAP_SYS_ADMIN): " << why);
    return;
  }
  if (!ns::have_program("nft") && !ns::have_program("iptables")) {
    MESSAGE("NETNS-SKIPPED: neither nft nor iptables is installed (scripts/setup.sh installs nftables)");
    return;
  }
  phoenix::test::temp_dir dir;
  std::string ruleset;
  REQUIRE_MESSAGE(lab.install_firewall(dir.path(), ruleset).empty(), ruleset);
  MESSAGE("router firewall:\n" << ruleset);

  std::vector<std::unique_ptr<gateway>> gateways;
  for (int i = 1; i <= ns::lan_count; ++i) {
    gateways.push_back(std::make_unique<gateway>(lab.lan(i), i));
    REQUIRE_MESSAGE(gateways.back()->server.ok(), gateways.back()->server.error());
  }
  // One client key for every gateway; known_hosts written here, checked strictly.
  setup s;
  for (int i = 1; i <= ns::lan_count; ++i) s.lan_namespace[i] = lab.lan(i);
  s.nat_namespace = lab.nat();
  s.cluster_key = dir.make_key();
  s.identity = gateways[0]->server.client_key().string();
  s.known_hosts = (dir / "known_hosts").string();
  s.wrong_known_hosts = (dir / "wrong_known_hosts").string();
  s.go_file = (dir / "go").string();
  {
    std::ofstream known(s.known_hosts);
    for (const auto& g : gateways) {
      g->server.authorize(gateways[0]->server.client_key().string() + ".pub");
      known << g->server.known_hosts_line();
    }
  }
  REQUIRE(phoenix::test::make_ssh_key(dir / "other_ed25519"));
  std::ofstream(s.wrong_known_hosts) << gateways[0]->server.known_hosts_line(dir / "other_ed25519.pub");
  const std::string presented = phoenix::test::ssh_fingerprint(gateways[0]->server.host_key_pub());
  const std::string known = phoenix::test::ssh_fingerprint(dir / "other_ed25519.pub");

  // Forked while this process has no thread besides its own.
  ProcessGroup group;
  const auto all = members();
  for (const auto& m : all) group.spawn(m.name, [&m, &s](const ChildPipes& p) { return run_member(m, s, p); });

  const int senders = static_cast<int>(all.size()) - 1;
  int ready = 0;
  std::vector<std::string> done;
  std::string hostkey_line, hostkey_link;
  pid_t killed = -1;
  auto kill_at = Clock::time_point::max();
  const auto deadline = Clock::now() + 50s;
  while ((static_cast<int>(done.size()) < senders || hostkey_link.empty()) && Clock::now() < deadline) {
    const auto ev = group.next_event(std::min(deadline, kill_at));
    if (!ev) {
      if (phoenix::launch::interrupted()) break;
      if (Clock::now() >= kill_at) {
        // Mid-stream: the senders are about a third through. Gateway 3 serves only the a2 -> a3 tunnel.
        CHECK(done.empty());  // nobody has finished: the stream is flowing
        killed = kill_one_session(gateways[2]->server);
        MESSAGE("killed the sshd process " << killed << " of the a2 -> a3 tunnel");
        kill_at = Clock::time_point::max();
      }
      continue;
    }
    REQUIRE_MESSAGE(!ev->eof, group.name(ev->child) << " exited early");
    const std::string& line = ev->line;
    if (line.rfind("READY ", 0) == 0) {
      if (++ready < senders) continue;
      // Every node is listening and its links are up: the firewall is checked against real listeners.
      check_firewall(lab);
      std::ofstream(s.go_file) << "go\n";
      kill_at = Clock::now() + 1s;
    } else if (line.rfind("DONE ", 0) == 0) {
      done.push_back(line);
      MESSAGE(line);
    } else if (line.rfind("HOSTKEY ", 0) == 0) {
      hostkey_line = line;
    } else if (line.rfind("HOSTKEY-LINK ", 0) == 0) {
      hostkey_link = line;
    } else {
      FAIL_CHECK(line);
    }
  }
  REQUIRE_FALSE_MESSAGE(phoenix::launch::interrupted(), "interrupted");
  REQUIRE(static_cast<int>(done.size()) == senders);
  for (const auto& line : done) {
    CAPTURE(line);
    auto f = fields(line);
    CHECK(f["received"] == f["expected"]);
    CHECK(f["duplicates"] == 0);
    CHECK(f["misdelivered"] == 0);
    if (line.rfind("DONE a2 ", 0) == 0) CHECK(f["links_lost"] >= 1);  // the killed tunnel was a2's
  }
  CHECK(killed > 0);
  // The tunnel came back: a new server process on gateway 3.
  CHECK(phoenix::test::wait_for(
      [&] {
        const auto now = gateways[2]->server.sessions();
        return now.size() == 1 && now.front() != killed;
      },
      10s));

  // The NATed node reached gateway 2 as the router's address: its own never showed beyond the NAT.
  const std::string log2 = gateways[1]->server.log();
  CHECK(log2.find("Connection from " + ns::router_ip(2) + " ") != std::string::npos);
  CHECK(log2.find(ns::host_ip(ns::nat_subnet)) == std::string::npos);

  // The prober trusted another key for gateway 1: refused, naming the host and both fingerprints.
  MESSAGE(hostkey_line);
  CHECK(hostkey_line.find("CHANGED") != std::string::npos);
  CHECK(hostkey_line.find("[warning]") != std::string::npos);
  CHECK(hostkey_line.find("host key of SSH gateway " + ns::host_ip(1) + " ") != std::string::npos);
  CHECK(hostkey_line.find(presented) != std::string::npos);
  CHECK(hostkey_line.find(known) != std::string::npos);
  CHECK(hostkey_link == "HOSTKEY-LINK down");
  CHECK(group.stop_all(10s));
}
