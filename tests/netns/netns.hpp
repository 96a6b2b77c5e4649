// Network namespaces for tests: three "LANs" and one host behind a NAT, joined by a router namespace, with a
// firewall on the router that lets only TCP to the SSH gateways through. Built with iproute2 and nftables
// (iptables where nft is missing) by the test itself, and torn down by the destructor whatever happened.
//
//                     10.77.1.0/24  phxPID-lan1 (eth0 10.77.1.2: gateway sshd :22, nodes :7001 :7002)
//   phxPID-router --- 10.77.2.0/24  phxPID-lan2 (eth0 10.77.2.2)
//   (lanN 10.77.N.1)  10.77.3.0/24  phxPID-lan3 (eth0 10.77.3.2)
//                     10.77.4.0/24  phxPID-nat  (eth0 10.77.4.2: masqueraded, nothing gets in)
//
// Every interface is created inside a namespace (`ip -n`), never in the host's: deleting the namespaces
// removes the veth pairs with them, and no packet can leave towards the host's network.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace phoenix::test::netns {

struct command_result {
  int status = -1;  // exit status, -1 if it did not run or was killed
  std::string output;
};

// Runs a shell command with stdout and stderr captured.
inline command_result run(const std::string& command) {
  command_result r;
  std::FILE* f = ::popen((command + " 2>&1").c_str(), "r");
  if (!f) return r;
  char buffer[512];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) r.output.append(buffer, n);
  const int st = ::pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline bool have_program(const std::string& name) { return run("command -v " + name).status == 0; }

// The address plan. LAN i (1..3) is 10.77.i.0/24, the NAT side 10.77.4.0/24; the router is .1, the host .2.
inline std::string host_ip(int subnet) { return "10.77." + std::to_string(subnet) + ".2"; }
inline std::string router_ip(int subnet) { return "10.77." + std::to_string(subnet) + ".1"; }
constexpr int nat_subnet = 4;
constexpr int lan_count = 3;
constexpr std::uint16_t ssh_port = 22;

class lab {
 public:
  lab() : prefix_("phx" + std::to_string(::getpid())) {}
  ~lab() { tear_down(); }
  lab(const lab&) = delete;
  lab& operator=(const lab&) = delete;

  std::string router() const { return prefix_ + "-router"; }
  std::string lan(int i) const { return prefix_ + "-lan" + std::to_string(i); }
  std::string nat() const { return prefix_ + "-nat"; }
  // The namespace of a subnet: lan(1..3) or nat().
  std::string side(int subnet) const { return subnet == nat_subnet ? nat() : lan(subnet); }

  // Creates the namespaces, links and routes. "" or the first failure (command and its output).
  std::string build() {
    // The first `ip netns add` tells whether this machine lets us (root / CAP_SYS_ADMIN).
    for (const auto& name : {router(), lan(1), lan(2), lan(3), nat()}) {
      if (auto why = add_namespace(name); !why.empty()) return why;
    }
    std::vector<std::string> steps;
    for (const auto& name : created_) steps.push_back("ip -n " + name + " link set lo up");
    for (int s = 1; s <= nat_subnet; ++s) {
      const std::string inside = side(s), port = s == nat_subnet ? "nat" : "lan" + std::to_string(s);
      steps.push_back("ip -n " + router() + " link add " + port + " type veth peer name eth0 netns " + inside);
      steps.push_back("ip -n " + router() + " addr add " + router_ip(s) + "/24 dev " + port);
      steps.push_back("ip -n " + router() + " link set " + port + " up");
      steps.push_back("ip -n " + inside + " addr add " + host_ip(s) + "/24 dev eth0");
      steps.push_back("ip -n " + inside + " link set eth0 up");
      steps.push_back("ip -n " + inside + " route add default via " + router_ip(s));
    }
    steps.push_back("ip netns exec " + router() + " sysctl -q -w net.ipv4.ip_forward=1");
    for (const auto& step : steps)
      if (auto r = run(step); r.status != 0) return step + ": " + r.output;
    return "";
  }

  // The router's firewall: across subnets only new TCP connections to a gateway's SSH port, and what belongs
  // to connections already accepted; the NAT side is masqueraded. Returns "" or why it failed; `ruleset` gets
  // what was installed (nft list ruleset, or iptables-save).
  std::string install_firewall(const std::filesystem::path& dir, std::string& ruleset) {
    std::string gateways;
    for (int i = 1; i <= lan_count; ++i) gateways += (i > 1 ? ", " : "") + host_ip(i);
    if (have_program("nft")) {
      const auto file = dir / "router.nft";
      std::ofstream(file) << "table inet phoenix_test {\n"
                          << "  chain forward {\n"
                          << "    type filter hook forward priority filter; policy drop;\n"
                          << "    ct state established,related accept\n"
                          << "    ip daddr { " << gateways << " } tcp dport " << ssh_port
                          << " ct state new accept\n"
                          << "  }\n"
                          << "  chain input {\n"
                          << "    type filter hook input priority filter; policy drop;\n"
                          << "    ct state established,related accept\n"
                          << "  }\n"
                          << "  chain postrouting {\n"
                          << "    type nat hook postrouting priority srcnat; policy accept;\n"
                          << "    ip saddr 10.77." << nat_subnet << ".0/24 oifname != \"nat\" masquerade\n"
                          << "  }\n"
                          << "}\n";
      if (auto r = run("ip netns exec " + router() + " nft -f " + file.string()); r.status != 0)
        return "nft -f: " + r.output;
      ruleset = run("ip netns exec " + router() + " nft list ruleset").output;
      return "";
    }
    if (!have_program("iptables"))
      return "neither nft nor iptables is installed (scripts/setup.sh installs nftables)";
    const std::string ipt = "ip netns exec " + router() + " iptables ";
    std::vector<std::string> steps = {
        ipt + "-P FORWARD DROP", ipt + "-P INPUT DROP",
        ipt + "-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
        ipt + "-A FORWARD -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
        ipt + "-t nat -A POSTROUTING -s 10.77." + std::to_string(nat_subnet) + ".0/24 ! -o nat -j MASQUERADE"};
    for (int i = 1; i <= lan_count; ++i)
      steps.push_back(ipt + "-A FORWARD -p tcp -d " + host_ip(i) + " --dport " + std::to_string(ssh_port) +
                      " -m conntrack --ctstate NEW -j ACCEPT");
    for (const auto& step : steps)
      if (auto r = run(step); r.status != 0) return step + ": " + r.output;
    ruleset = run("ip netns exec " + router() + " iptables-save").output;
    return "";
  }

  // Deleting a namespace removes its end of every veth pair, and with it the other end.
  void tear_down() {
    for (auto it = created_.rbegin(); it != created_.rend(); ++it) run("ip netns del " + *it);
    created_.clear();
  }

 private:
  std::string add_namespace(const std::string& name) {
    auto r = run("ip netns add " + name);
    if (r.status != 0) return "ip netns add " + name + " failed: " + r.output;
    created_.push_back(name);
    return "";
  }

  std::string prefix_;
  std::vector<std::string> created_;
};

}  // namespace phoenix::test::netns
