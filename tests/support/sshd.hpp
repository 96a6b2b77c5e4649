// A private OpenSSH server for tests: /usr/sbin/sshd on 127.0.0.1 at a free high port, with its own config,
// host key, authorized_keys and a client key, all in a temp_dir. Ended (with every process it forked) by PID
// when the object goes, whatever happened in the test. Only loopback traffic — or, with sshd_options::netns,
// only traffic inside that network namespace (tests/netns/).
#pragma once

#include <fcntl.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asio.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/temp_dir.hpp"

namespace phoenix::test {

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs a shell command, returns its standard output ("" on failure).
inline std::string run_command(const std::string& command) {
  std::string out;
  if (FILE* f = ::popen(command.c_str(), "r")) {
    char buffer[512];
    std::size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) out.append(buffer, n);
    ::pclose(f);
  }
  return out;
}

// A fresh ed25519 key pair at `path` (and path.pub), no passphrase.
inline bool make_ssh_key(const std::filesystem::path& path) {
  return std::system(("ssh-keygen -q -t ed25519 -N '' -C phoenix-test -f '" + path.string() + "' </dev/null")
                         .c_str()) == 0;
}

// "SHA256:..." as ssh-keygen -l prints it for a public key file.
inline std::string ssh_fingerprint(const std::filesystem::path& pub) {
  std::istringstream line(run_command("ssh-keygen -l -E sha256 -f '" + pub.string() + "'"));
  std::string bits, fp;
  line >> bits >> fp;
  return fp;
}

// "TYPE BASE64" of a .pub file (without the comment).
inline std::string public_key_text(const std::filesystem::path& pub) {
  std::istringstream line(read_text(pub));
  std::string type, key;
  line >> type >> key;
  return type + " " + key;
}

inline std::string current_user() {
  if (const passwd* pw = ::getpwuid(::getuid())) return pw->pw_name;
  return "root";
}

// Children of pid (what pgrep -P lists), from /proc.
inline std::vector<pid_t> child_processes(pid_t parent) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_text(e.path() / "stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

inline std::vector<pid_t> descendants(pid_t root) {
  std::vector<pid_t> out = child_processes(root);
  for (std::size_t i = 0; i < out.size(); ++i)
    for (pid_t p : child_processes(out[i])) out.push_back(p);
  return out;
}

// Moves the calling thread into the network namespace /run/netns/NAME (as `ip netns exec` does for the network
// only). Sockets created afterwards belong to it. Returns "" or why it failed.
inline std::string enter_netns(const std::string& name) {
  const std::string path = "/run/netns/" + name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "open " + path + ": " + std::strerror(errno);
  const int rc = ::setns(fd, CLONE_NEWNET);
  const int err = errno;
  ::close(fd);
  return rc == 0 ? "" : "setns " + path + ": " + std::strerror(err);
}

// Whether a TCP connection to host:port is accepted within `limit`, tried from network namespace `netns`
// ("" = this one) by a short-lived thread, so that the caller's own namespace does not change.
inline bool tcp_connects(const std::string& netns, const std::string& host, std::uint16_t port,
                         std::chrono::milliseconds limit) {
  bool ok = false;
  std::thread probe([&] {
    if (!netns.empty() && !enter_netns(netns).empty()) return;
    asio::io_context io;
    asio::ip::tcp::socket s(io);
    asio::steady_timer timer(io, limit);
    s.async_connect(asio::ip::tcp::endpoint(asio::ip::make_address(host), port), [&](std::error_code ec) {
      ok = !ec;
      timer.cancel();
    });
    timer.async_wait([&](std::error_code ec) {
      if (!ec) s.close();
    });
    io.run();
  });
  probe.join();
  return ok;
}

// Where a private sshd listens. The defaults are the loopback server of tests/overlay/test_ssh.cpp.
struct sshd_options {
  std::string netns;                  // "" = this process's namespace; else /run/netns/NAME
  std::string address = "127.0.0.1";  // ListenAddress
  std::uint16_t port = 0;             // 0 = a free port on 127.0.0.1 (only without netns)
};

class sshd {
 public:
  explicit sshd(const temp_dir& dir, sshd_options options = {}) : dir_(dir), options_(std::move(options)) {
    ok_ = setup() && start();
  }
  ~sshd() { stop(); }
  sshd(const sshd&) = delete;
  sshd& operator=(const sshd&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  std::uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::filesystem::path client_key() const { return dir_ / "client_ed25519"; }
  std::filesystem::path host_key_pub() const { return dir_ / "host_ed25519.pub"; }
  const std::string& address() const { return options_.address; }
  // As in known_hosts: "HOST" for port 22, else "[HOST]:PORT".
  std::string host_name() const {
    return port_ == 22 ? options_.address : "[" + options_.address + "]:" + std::to_string(port_);
  }
  // Lets the holder of another client key log in too (sshd reads authorized_keys at each login).
  void authorize(const std::filesystem::path& pub) const {
    std::ofstream(dir_ / "authorized_keys", std::ios::app) << read_text(pub);
  }
  // A known_hosts line for this server, with `pub` (default: its real host key).
  std::string known_hosts_line(const std::filesystem::path& pub = {}) const {
    return host_name() + " " + public_key_text(pub.empty() ? host_key_pub() : pub) + "\n";
  }
  // ssh://USER@ADDRESS:PORT/HOST:PORT
  std::string url_to(const std::string& host, std::uint16_t port) const {
    return "ssh://" + current_user() + "@" + options_.address + ":" + std::to_string(port_) + "/" + host + ":" +
           std::to_string(port);
  }
  // The per-connection processes (one per SSH session): what serves the tunnels.
  std::vector<pid_t> sessions() const { return child_processes(pid_); }
  std::string log() const { return read_text(dir_ / "sshd.log"); }

  // SIGKILLs every process serving a connection (the child and what it forked): the tunnels break.
  std::size_t kill_sessions() const {
    auto all = descendants(pid_);
    for (pid_t p : all) ::kill(p, SIGKILL);
    return all.size();
  }

  void stop() {
    if (pid_ <= 0) return;
    for (pid_t p : descendants(pid_)) ::kill(p, SIGKILL);
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  bool setup() {
    if (::access("/usr/sbin/sshd", X_OK) != 0)
      return fail("/usr/sbin/sshd is missing (apt-get install openssh-server)");
    if (::getuid() == 0) {
      std::error_code ec;
      std::filesystem::create_directories("/run/sshd", ec);  // privilege separation directory
      ::chmod("/run/sshd", 0755);
    }
    if (!make_ssh_key(dir_ / "host_ed25519") || !make_ssh_key(client_key())) return fail("ssh-keygen failed");
    std::ofstream(dir_ / "authorized_keys") << read_text(dir_ / "client_ed25519.pub");
    port_ = options_.port;
    if (port_ == 0) {
      if (!options_.netns.empty()) return fail("sshd_options: a namespaced sshd needs a port");
      asio::io_context io;
      asio::ip::tcp::acceptor probe(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
      port_ = probe.local_endpoint().port();
    }
    std::ofstream cfg(dir_ / "sshd_config");
    cfg << "Port " << port_ << "\n"
        << "ListenAddress " << options_.address << "\n"
        << "HostKey " << (dir_ / "host_ed25519").string() << "\n"
        << "PidFile " << (dir_ / "sshd.pid").string() << "\n"
        << "AuthorizedKeysFile " << (dir_ / "authorized_keys").string() << "\n"
        << "UsePAM no\nStrictModes no\nAllowTcpForwarding yes\nPubkeyAuthentication yes\n"
        << "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
        << "LogLevel VERBOSE\n";
    return true;
  }

  bool start() {
    const std::string cfg = (dir_ / "sshd_config").string(), log = (dir_ / "sshd.log").string();
    pid_ = ::fork();
    if (pid_ < 0) return fail("fork failed");
    if (pid_ == 0) {
      std::FILE* out = std::freopen(log.c_str(), "w", stderr);
      (void)out;
      if (!options_.netns.empty()) {
        const std::string why = enter_netns(options_.netns);
        if (!why.empty()) {
          std::fprintf(stderr, "%s\n", why.c_str());
          ::_exit(126);
        }
      }
      ::execl("/usr/sbin/sshd", "/usr/sbin/sshd", "-D", "-e", "-f", cfg.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Ready once it accepts connections (bounded).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (tcp_connects(options_.netns, options_.address, port_, std::chrono::milliseconds(500))) return true;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return fail("sshd exited: " + read_text(log));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return fail("sshd did not start listening: " + read_text(log));
  }

  bool fail(std::string why) {
    error_ = std::move(why);
    return false;
  }

  const temp_dir& dir_;
  sshd_options options_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
  bool ok_ = false;
  std::string error_;
};

}  // namespace phoenix::test
