// bench/ssh_link.cpp — ssh_link_bench: a phoenix link through an SSH gateway beside OpenSSH's own port
// forwarding to the same sshd, plain TCP and a phoenix TCP link, all in one invocation. Over 600 lines as one
// file: one program whose four paths share the sshd, the driver and the table they are compared in.
//
// A private sshd on 127.0.0.1 (tests/support/sshd.hpp: own host key, authorized_keys and client key in a temp
// dir, ended by PID). Four paths, each measured by a driver process against a server process:
//
//   tcp              a TCP client and an echo/sink server, directly;
//   openssh-forward  the same client and server through `ssh -N -L` (forked by this program, ended by PID),
//                    with the cipher and MAC that libssh2 negotiates with this sshd (found out below);
//   phoenix-ssh      two phoenix nodes; the driver dials ssh://USER@127.0.0.1:SSHPORT/127.0.0.1:NODEPORT,
//                    host key checked strictly against a known_hosts file written here;
//   phoenix-tcp      the same two nodes linked by tcp://, for reference.
//
// In every path the driver is on the SSH client's side (what `ssh -L` or libssh2 encrypts), and it measures
//   rtt         round trips of 8-byte messages, timed one by one; a run's figure is their median;
//   throughput  a one-way stream of 1 MiB messages (or writes) to the server, timed until the server
//               acknowledges the last byte; MB/s = 10^6 bytes per second.
// One warm-up run, then --reps runs; each printed figure is the median of those runs. Output: RESULT lines
// ("RESULT <path> <test> <size_bytes> <value> <unit>"), then a markdown table with ratios against
// openssh-forward measured in the same run. Nothing is asserted (the machines are shared and noisy).
//
// Usage: ssh_link_bench [--reps N] [--quick] [--only PATH]   (--only: one path alone, for profiling)
#include <fcntl.h>
#include <libssh2.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <phoenix/config.hpp>
#include <phoenix/node.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "phoenix/launch/process_group.hpp"
#include "bench_node.hpp"
#include "support/sshd.hpp"
#include "support/temp_dir.hpp"

namespace {

using namespace phoenix;
using namespace phoenix::bench;
using namespace std::chrono_literals;

constexpr std::size_t k_small = 8;
constexpr std::size_t k_chunk = 1 << 20;
constexpr auto k_io_timeout = 10s;  // any single read or write; then the run fails

struct Options {
  int reps = 5;
  bool quick = false;
  std::string only;  // --only PATH: run that path alone (for profiling); no ratios then
  int round_trips() const { return quick ? 200 : 3000; }                    // per rtt run
  std::uint64_t stream_chunks() const { return quick ? 8 : 128; }           // 1 MiB each, per throughput run
  std::chrono::seconds path_timeout() const { return quick ? 60s : 600s; }  // one path, setup included
};

// Paths, in the order they run and appear in the table.
const char* const k_tcp = "tcp";
const char* const k_openssh = "openssh-forward";
const char* const k_phoenix_ssh = "phoenix-ssh";
const char* const k_phoenix_tcp = "phoenix-tcp";

double median_of(std::vector<double> v) { return v.empty() ? 0.0 : median(std::move(v)); }

std::string join(const std::vector<double>& v, int precision) {
  std::string out;
  char buf[32];
  for (double x : v) {
    std::snprintf(buf, sizeof buf, "%s%.*f", out.empty() ? "" : " ", precision, x);
    out += buf;
  }
  return out;
}

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// --- plain TCP: an echo/sink server and its client (blocking sockets, every call bounded) --------------------

// Header the client sends on a fresh connection: 'p' and a count of 8-byte round trips, or 's' and a count of
// bytes to sink, answered by one byte once all arrived.
struct Header {
  char kind = 0;
  std::uint64_t count = 0;
};

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

void set_socket_options(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{};
  tv.tv_sec = std::chrono::duration_cast<std::chrono::seconds>(k_io_timeout).count();
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// False on a clean end of stream before any byte; throws on errors, timeouts and a stream cut mid-way.
bool read_all(int fd, void* data, std::size_t n) {
  auto* p = static_cast<char*>(data);
  for (std::size_t got = 0; got < n;) {
    const ssize_t r = ::read(fd, p + got, n - got);
    if (r > 0) {
      got += static_cast<std::size_t>(r);
    } else if (r == 0) {
      if (got == 0) return false;
      throw std::runtime_error("connection closed mid-message");
    } else if (errno != EINTR) {
      throw_errno("read");
    }
  }
  return true;
}

void write_all(int fd, const void* data, std::size_t n) {
  const auto* p = static_cast<const char*>(data);
  for (std::size_t put = 0; put < n;) {
    const ssize_t r = ::write(fd, p + put, n - put);
    if (r > 0)
      put += static_cast<std::size_t>(r);
    else if (errno != EINTR)
      throw_errno("write");
  }
}

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(Fd&& other) noexcept : fd(std::exchange(other.fd, -1)) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&&) = delete;
};

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

void serve_connection(int fd) {
  set_socket_options(fd);
  Header h;
  if (!read_all(fd, &h, sizeof h)) return;  // a probe that only connected (ssh -L readiness check)
  if (h.kind == 'p') {
    std::array<char, k_small> buf{};
    for (std::uint64_t i = 0; i < h.count; ++i) {
      if (!read_all(fd, buf.data(), buf.size())) throw std::runtime_error("client left mid-run");
      write_all(fd, buf.data(), buf.size());
    }
  } else if (h.kind == 's') {
    std::vector<char> buf(k_chunk);
    for (std::uint64_t left = h.count; left > 0;) {
      const ssize_t r = ::read(fd, buf.data(), std::min<std::uint64_t>(left, buf.size()));
      if (r > 0)
        left -= static_cast<std::uint64_t>(r);
      else if (r == 0)
        throw std::runtime_error("client left mid-stream");
      else if (errno != EINTR)
        throw_errno("read");
    }
    const char ack = 1;
    write_all(fd, &ack, 1);
  } else {
    throw std::runtime_error("bad header");
  }
}

// One connection at a time, until the launcher says stop.
int tcp_server_main(const ChildPipes& pipes) {
  Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (listener.fd < 0) throw_errno("socket");
  auto addr = loopback(0);
  socklen_t len = sizeof addr;
  if (::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener.fd, 8) != 0 ||
      ::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw_errno("bind/listen");
  report_line(pipes.report_fd, "PORT " + std::to_string(ntohs(addr.sin_port)));
  for (;;) {
    std::array<pollfd, 2> fds{pollfd{listener.fd, POLLIN, 0}, pollfd{pipes.control_fd, POLLIN, 0}};
    if (::poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) throw_errno("poll");
    if (fds[1].revents) return 0;  // the control pipe closed (or its end of file is readable): stop
    if (fds[0].revents & POLLIN) {
      Fd conn(::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC));
      if (conn.fd >= 0) serve_connection(conn.fd);
    }
  }
}

Fd connect_to(std::uint16_t port) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.fd < 0) throw_errno("socket");
  const auto addr = loopback(port);
  if (::connect(fd.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
    throw_errno("connect 127.0.0.1:" + std::to_string(port));
  set_socket_options(fd.fd);
  return fd;
}

// A new connection per run, as a run of the phoenix paths reuses its link: the connection setup (through ssh,
// a channel open) happens before the clock starts, with the header.
double tcp_rtt_run(std::uint16_t port, int round_trips) {
  const Fd fd = connect_to(port);
  const Header h{'p', static_cast<std::uint64_t>(round_trips)};
  write_all(fd.fd, &h, sizeof h);
  std::array<char, k_small> buf{};
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(round_trips));
  for (int i = 0; i < round_trips; ++i) {
    const auto t0 = Clock::now();
    write_all(fd.fd, buf.data(), buf.size());
    if (!read_all(fd.fd, buf.data(), buf.size())) throw std::runtime_error("server closed");
    us.push_back(micros(Clock::now() - t0));
  }
  return median_of(std::move(us));
}

double tcp_stream_run(std::uint16_t port, std::uint64_t chunks) {
  const Fd fd = connect_to(port);
  const Header h{'s', chunks * k_chunk};
  write_all(fd.fd, &h, sizeof h);
  std::vector<char> chunk(k_chunk, 0x33);
  const auto t0 = Clock::now();
  for (std::uint64_t i = 0; i < chunks; ++i) write_all(fd.fd, chunk.data(), chunk.size());
  char ack = 0;
  if (!read_all(fd.fd, &ack, 1)) throw std::runtime_error("no acknowledgement from the server");
  return static_cast<double>(chunks * k_chunk) / seconds_since(t0) / 1e6;
}

// --- phoenix: a server node (vnode 0) and a driver node (vnode 1)
// ---------------------------------------------

enum LinkTag : int {
  tag_rtt = 201,   // driver -> server, echoed as tag_rtt_back
  tag_rtt_back,    //
  tag_stream,      // driver -> server, 1 MiB
  tag_stream_end,  // driver -> server: body = u64 number of tag_stream messages sent; answered by
                   // tag_stream_ack
  tag_stream_ack,  //
};

Config node_config(const std::string& name, const std::string& key) { return bench_config(name, key, 200); }

int phoenix_server_main(const ChildPipes& pipes, const std::string& key) {
  Node& node = *new Node(node_config("server", key));  // leaked on purpose, as bench_node.cpp explains
  check(node.initialize("tcp://127.0.0.1:0"), "initialize");
  check(node.assume({k_vnode_a, k_vnode_a + 1}), "assume");
  report_line(pipes.report_fd, "PORT " + node.local_port());
  std::uint64_t streamed = 0;
  while (!stop_requested(pipes.control_fd)) {
    auto m = node.recv_for(any_tag, 200ms);
    if (!m) continue;
    if (m->tag() == tag_rtt) {
      send_msg(node, m->source(), tag_rtt_back, std::move(*m).take_body());
    } else if (m->tag() == tag_stream) {
      ++streamed;
    } else if (m->tag() == tag_stream_end) {
      for (const auto sent = read_body<std::uint64_t>(*m); streamed < sent; ++streamed)
        recv_msg(node, tag_stream);
      streamed = 0;
      send_msg(node, m->source(), tag_stream_ack, std::span<const std::byte>());
    } else {
      throw std::runtime_error("unexpected tag " + std::to_string(m->tag()));
    }
  }
  check(node.finalize(), "finalize");
  return 0;
}

double phoenix_rtt_run(Node& node, int round_trips) {
  std::array<std::byte, k_small> body{};
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(round_trips));
  for (int i = 0; i < round_trips; ++i) {
    const auto t0 = Clock::now();
    send_msg(node, k_vnode_a, tag_rtt, body);
    if (recv_msg(node, tag_rtt_back).size() != body.size()) throw std::runtime_error("echo of the wrong size");
    us.push_back(micros(Clock::now() - t0));
  }
  return median_of(std::move(us));
}

double phoenix_stream_run(Node& node, std::uint64_t chunks) {
  std::vector<std::byte> chunk(k_chunk, std::byte{0x33});
  const auto t0 = Clock::now();
  for (std::uint64_t i = 0; i < chunks; ++i) send_msg(node, k_vnode_a, tag_stream, chunk);
  send_msg(node, k_vnode_a, tag_stream_end, bytes_of(chunks));
  recv_msg(node, tag_stream_ack, 60s);
  return static_cast<double>(chunks * k_chunk) / seconds_since(t0) / 1e6;
}

struct SshSettings {
  std::string identity, known_hosts;
};

// A driver node in the launcher (vnode 1), linked to a server node through `peer`; returns once a first
// round trip worked, which waits for the link (for ssh://: TCP connect, SSH handshake, host key check,
// authentication, channel open; then the phoenix handshake) and the routes.
std::unique_ptr<Node> make_driver(const std::string& name, const std::string& key, const std::string& peer,
                                  const std::optional<SshSettings>& ssh) {
  Config c = node_config(name, key);
  if (ssh) {
    c.ssh_identity = ssh->identity;
    c.ssh_known_hosts = ssh->known_hosts;
    c.ssh_host_key_policy = "strict";
  }
  auto node = std::make_unique<Node>(c);
  check(node->initialize("tcp://127.0.0.1:0"), "initialize");
  check(node->assume({k_vnode_b, k_vnode_b + 1}), "assume");
  check(node->add_port(peer), "add_port " + peer);
  std::array<std::byte, k_small> probe{};
  send_msg(*node, k_vnode_a, tag_rtt, probe);
  if (!node->recv_for(tag_rtt_back, 30s))
    throw std::runtime_error("no round trip through " + peer + " in 30 s");
  return node;
}

// --- the launcher: sshd, ssh -L, the cipher, and the paths ---------------------------------------------------

struct Negotiated {
  std::string cipher, mac;
};

// What libssh2 (the library phoenix's SSH links use, with the same defaults: ssh_session.cpp sets no method
// preferences) negotiates with this sshd: a handshake, the host key checked against known_hosts, and no login.
Negotiated probe_libssh2(std::uint16_t ssh_port, const std::string& known_hosts) {
  if (libssh2_init(0) != 0) throw std::runtime_error("libssh2_init failed");
  const Fd fd = connect_to(ssh_port);
  LIBSSH2_SESSION* s = libssh2_session_init();
  if (!s) throw std::runtime_error("libssh2_session_init failed");
  struct free_session {
    LIBSSH2_SESSION* s;
    ~free_session() {
      libssh2_session_disconnect(s, "probe done");
      libssh2_session_free(s);
    }
  } guard{s};
  libssh2_session_set_blocking(s, 1);
  libssh2_session_set_timeout(s, 10000);
  if (libssh2_session_handshake(s, fd.fd) != 0) throw std::runtime_error("libssh2 handshake with sshd failed");
  std::size_t key_len = 0;
  int key_type = 0;
  const char* host_key = libssh2_session_hostkey(s, &key_len, &key_type);
  LIBSSH2_KNOWNHOSTS* kh = libssh2_knownhost_init(s);
  const bool known = host_key && kh &&
                     libssh2_knownhost_readfile(kh, known_hosts.c_str(), LIBSSH2_KNOWNHOST_FILE_OPENSSH) > 0 &&
                     libssh2_knownhost_checkp(kh, "127.0.0.1", ssh_port, host_key, key_len,
                                              LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW,
                                              nullptr) == LIBSSH2_KNOWNHOST_CHECK_MATCH;
  if (kh) libssh2_knownhost_free(kh);
  if (!known) throw std::runtime_error("the sshd's host key does not match known_hosts");
  const char* cipher = libssh2_session_methods(s, LIBSSH2_METHOD_CRYPT_CS);
  const char* mac = libssh2_session_methods(s, LIBSSH2_METHOD_MAC_CS);
  if (!cipher || !mac) throw std::runtime_error("libssh2 reports no negotiated cipher");
  return {cipher, mac};
}

std::uint16_t free_port() {
  const Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  auto addr = loopback(0);
  socklen_t len = sizeof addr;
  if (fd.fd < 0 || ::bind(fd.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd.fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw_errno("free port");
  return ntohs(addr.sin_port);
}

// `ssh -N -L LOCAL:127.0.0.1:TARGET` to the private sshd, forked here and ended by its PID.
class SshForward {
 public:
  SshForward(const test::sshd& server, const std::filesystem::path& dir, const Negotiated& with,
             std::uint16_t target)
      : local_(free_port()), log_((dir / "ssh-forward.log").string()) {
    std::vector<std::string> args{"ssh",
                                  "-N",
                                  "-F",
                                  "/dev/null",
                                  "-p",
                                  std::to_string(server.port()),
                                  "-i",
                                  server.client_key().string(),
                                  "-L",
                                  std::to_string(local_) + ":127.0.0.1:" + std::to_string(target),
                                  "-c",
                                  with.cipher,
                                  "-o",
                                  "MACs=" + with.mac,
                                  "-o",
                                  "Compression=no",
                                  "-o",
                                  "UserKnownHostsFile=" + (dir / "known_hosts").string(),
                                  "-o",
                                  "GlobalKnownHostsFile=/dev/null",
                                  "-o",
                                  "StrictHostKeyChecking=yes",
                                  "-o",
                                  "BatchMode=yes",
                                  "-o",
                                  "IdentitiesOnly=yes",
                                  "-o",
                                  "ExitOnForwardFailure=yes",
                                  "-o",
                                  "ControlMaster=no",
                                  "-o",
                                  "ControlPath=none",
                                  "-o",
                                  "ServerAliveInterval=5",
                                  test::current_user() + "@127.0.0.1"};
    command_ = "";
    for (const auto& a : args) command_ += (command_.empty() ? "" : " ") + a;
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) throw_errno("fork");
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with the launcher, whatever happens to it
      const int log = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (log >= 0) ::dup2(log, STDERR_FILENO);
      const int null = ::open("/dev/null", O_RDWR);
      if (null >= 0) ::dup2(null, STDIN_FILENO);
      ::execvp("ssh", argv.data());
      ::_exit(127);
    }
    await_listening();
  }
  ~SshForward() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 200 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i) std::this_thread::sleep_for(10ms);
    if (::waitpid(pid_, &status, WNOHANG) == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
  }
  SshForward(const SshForward&) = delete;
  SshForward& operator=(const SshForward&) = delete;
  std::uint16_t local_port() const { return local_; }
  const std::string& command() const { return command_; }

 private:
  // ssh binds the forwarded port once it has logged in; a connection that only connects opens a channel to
  // the server, which closes it.
  void await_listening() {
    for (const auto deadline = Clock::now() + 15s; Clock::now() < deadline;) {
      const Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      const auto addr = loopback(local_);
      if (::connect(fd.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) return;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("ssh -L exited: " + test::read_text(log_));
      }
      std::this_thread::sleep_for(20ms);
    }
    throw std::runtime_error("ssh -L did not listen within 15 s: " + test::read_text(log_));
  }

  std::uint16_t local_;
  std::string log_, command_;
  pid_t pid_ = -1;
};

using Results = std::map<std::string, double>;  // "<path> <test>" -> value

// Reads the children's lines until `child` reports `keyword` and returns the rest of that line; RESULT and
// remark lines are printed (RESULT values kept) on the way. Errors, early exits and the deadline throw.
std::string await_line(ProcessGroup& group, std::size_t child, std::string_view keyword,
                       Clock::time_point deadline, Results& results) {
  for (;;) {
    const auto ev = group.next_event(deadline);
    if (!ev)
      throw std::runtime_error(interrupted() ? "interrupted" : "timed out waiting for " + group.name(child));
    if (ev->eof) throw std::runtime_error(group.name(ev->child) + " exited early");
    const std::string& line = ev->line;
    if (line.starts_with("ERROR ")) throw std::runtime_error(line.substr(6));
    if (line.starts_with("RESULT ") || line.starts_with("# ")) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
      std::istringstream in(line);
      std::string word, path, test;
      double value = 0;
      std::size_t size = 0;
      if (in >> word >> path >> test >> size >> value && word == "RESULT") results[path + " " + test] = value;
    } else if (ev->child == child && line.starts_with(keyword)) {
      return line.size() > keyword.size() ? line.substr(keyword.size() + 1) : std::string();
    } else {
      throw std::runtime_error("unexpected line from " + group.name(ev->child) + ": " + line);
    }
  }
}

std::uint16_t port_of(const std::string& endpoint) {  // "tcp://127.0.0.1:40123" or "40123"
  const auto colon = endpoint.rfind(':');
  const std::string_view digits =
      colon == std::string::npos ? endpoint : std::string_view(endpoint).substr(colon + 1);
  std::uint16_t port = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (ec != std::errc() || end != digits.data() + digits.size() || port == 0)
    throw std::runtime_error("bad endpoint " + endpoint);
  return port;
}

// One path: how to run each figure, and what its runs gave.
struct Path {
  explicit Path(const char* n) : name(n) {}
  const char* name;
  std::function<double(int)> rtt_run;
  std::function<double(std::uint64_t)> stream_run;
  std::vector<double> rtts, rates;
  std::string failure;   // why its setup or a run failed; it is then left out of the later rounds
  bool skipped = false;  // not selected by --only
  bool ok() const { return failure.empty() && !skipped; }
};

// A run that fails marks its path (printed at once); the other paths go on.
void run_guarded(Path& path, const std::function<void()>& run) {
  if (!path.ok() || interrupted()) return;
  try {
    run();
  } catch (const std::exception& e) {
    path.failure = e.what();
    std::fprintf(stderr, "ssh_link: FAILED: %s: %s\n", path.name, e.what());
  }
}

// Reads what the server processes reported since the last call, without waiting: an ERROR line or a server
// that exited fails the path it serves.
void check_servers(ProcessGroup& group, const std::map<std::size_t, Path*>& serves) {
  while (auto ev = group.next_event(Clock::now())) {
    Path& path = *serves.at(ev->child);
    if (ev->eof || ev->line.starts_with("ERROR ")) {
      run_guarded(path, [&] {
        throw std::runtime_error(ev->eof ? group.name(ev->child) + " exited early" : ev->line.substr(6));
      });
    }
  }
  if (interrupted()) throw std::runtime_error("interrupted");
}

std::string fixed(double v, int precision) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", precision, v);
  return buf;
}

// The median over rounds of (this path's run / OpenSSH's run in the same round): runs of one round are
// seconds apart, so their quotient is less exposed to the load of this shared machine than a quotient of
// medians taken over the whole invocation.
double paired_ratio(const std::vector<double>& path, const std::vector<double>& anchor) {
  std::vector<double> q;
  for (std::size_t i = 0; i < path.size() && i < anchor.size(); ++i)
    if (anchor[i] > 0) q.push_back(path[i] / anchor[i]);
  return median_of(std::move(q));
}

void print_results(const std::vector<Path>& paths, const Options& o, const Negotiated& negotiated) {
  const Path& anchor = paths[1];
  for (const Path& p : paths) {
    if (!p.failure.empty() || p.rates.size() != static_cast<std::size_t>(o.reps)) continue;
    std::printf("# %s runs: rtt_p50 us [%s], MB/s [%s]\n", p.name, join(p.rtts, 1).c_str(),
                join(p.rates, 1).c_str());
    std::printf("%s\n", result_line(p.name, "rtt_p50", k_small, median_of(p.rtts), 1, "us").c_str());
    std::printf("%s\n", result_line(p.name, "throughput", k_chunk, median_of(p.rates), 1, "MB/s").c_str());
  }
  const auto complete = [&](const Path& p) {
    return p.failure.empty() && p.rates.size() == static_cast<std::size_t>(o.reps);
  };
  std::printf(
      "\n| path | RTT p50, 8 B (µs) | throughput, 1 MiB (MB/s) | RTT / OpenSSH | throughput / OpenSSH |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: |\n");
  for (const Path& p : paths) {
    if (!complete(p)) {
      std::printf("| %s | %s | — | — | — |\n", p.name, p.skipped ? "not run" : "—");
      continue;
    }
    const double rtt = median_of(p.rtts), rate = median_of(p.rates);
    const bool with_anchor = complete(anchor);
    std::printf("| %s | %.1f | %.1f | %s | %s |\n", p.name, rtt, rate,
                with_anchor ? fixed(paired_ratio(p.rtts, anchor.rtts), 2).c_str() : "—",
                with_anchor ? fixed(paired_ratio(p.rates, anchor.rates), 2).c_str() : "—");
  }
  std::printf(
      "\nSSH cipher %s, MAC %s: what libssh2 %s negotiates with this sshd (OpenSSH %s); ssh -L is given the "
      "same. "
      "Medians of %d runs per path, the paths taking turns round by round; ratios are medians of the "
      "per-round quotients. RTT: lower is better; throughput: higher is better. Goal: phoenix-ssh / "
      "OpenSSH >= 0.90 for throughput, <= 1.10 for RTT.\n",
      negotiated.cipher.c_str(), negotiated.mac.c_str(), LIBSSH2_VERSION, "9.2 (Debian 12)", o.reps);
}

bool parse_args(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--quick") {
      o.quick = true;
    } else if (arg == "--only" && i + 1 < argc) {
      o.only = argv[++i];
      if (o.only != k_tcp && o.only != k_openssh && o.only != k_phoenix_ssh && o.only != k_phoenix_tcp)
        return false;
    } else if (arg == "--reps" && i + 1 < argc) {
      const std::string_view v = argv[++i];
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), o.reps);
      if (ec != std::errc() || end != v.data() + v.size() || o.reps < 1 || o.reps > 101) return false;
    } else {
      return false;
    }
  }
  return true;
}

// Everything: sshd, servers, ssh -L, drivers, warm-up, rounds, table. False if any path failed.
bool run(const Options& o) {
  const test::temp_dir dir;
  const test::sshd server(dir);  // ended by PID (with its session processes) when it goes
  if (!server.ok()) throw std::runtime_error("cannot start sshd: " + server.error());
  const std::string known_hosts = (dir / "known_hosts").string();
  std::ofstream(known_hosts) << server.known_hosts_line();
  const std::string key = dir.make_key();
  const Negotiated negotiated = probe_libssh2(server.port(), known_hosts);
  std::printf("# sshd on 127.0.0.1:%u (pid %d); libssh2 negotiates cipher %s, MAC %s\n", server.port(),
              int(server.pid()), negotiated.cipher.c_str(), negotiated.mac.c_str());
  std::fflush(stdout);

  std::vector<Path> paths{Path(k_tcp), Path(k_openssh), Path(k_phoenix_ssh), Path(k_phoenix_tcp)};
  for (Path& p : paths) p.skipped = !o.only.empty() && o.only != p.name;
  Path &tcp = paths[0], &openssh = paths[1], &phoenix_ssh = paths[2], &phoenix_tcp = paths[3];

  // The servers, each in a process of its own. Everything that forks (these, ssh -L) comes before the first
  // phoenix::Node of this process (process_group.hpp).
  ProcessGroup group;
  Results unused;
  const auto setup_deadline = [] { return Clock::now() + 10s; };
  const auto tcp_server = group.spawn("tcp-server", [](const ChildPipes& p) { return tcp_server_main(p); });
  const std::uint16_t tcp_port = port_of(await_line(group, tcp_server, "PORT", setup_deadline(), unused));
  const auto ssh_target =
      group.spawn("node-behind-ssh", [&](const ChildPipes& p) { return phoenix_server_main(p, key); });
  const std::string ssh_target_endpoint = await_line(group, ssh_target, "PORT", setup_deadline(), unused);
  const auto tcp_target =
      group.spawn("node-on-tcp", [&](const ChildPipes& p) { return phoenix_server_main(p, key); });
  const std::string tcp_target_endpoint = await_line(group, tcp_target, "PORT", setup_deadline(), unused);
  // tcp and openssh-forward share the TCP server (one connection at a time; the paths take turns).
  const std::map<std::size_t, Path*> serves{
      {tcp_server, &tcp}, {ssh_target, &phoenix_ssh}, {tcp_target, &phoenix_tcp}};

  std::optional<SshForward> forward;
  run_guarded(openssh, [&] {
    forward.emplace(server, dir.path(), negotiated, tcp_port);
    std::printf("# %s: %s\n", openssh.name, forward->command().c_str());
  });

  tcp.rtt_run = [&](int n) { return tcp_rtt_run(tcp_port, n); };
  tcp.stream_run = [&](std::uint64_t chunks) { return tcp_stream_run(tcp_port, chunks); };
  if (forward) {
    const std::uint16_t port = forward->local_port();
    openssh.rtt_run = [port](int n) { return tcp_rtt_run(port, n); };
    openssh.stream_run = [port](std::uint64_t chunks) { return tcp_stream_run(port, chunks); };
  }
  std::unique_ptr<Node> via_ssh, via_tcp;
  const auto connect_driver = [&](Path& path, std::unique_ptr<Node>& node, const std::string& peer,
                                  const std::optional<SshSettings>& ssh) {
    path.rtt_run = [&node](int n) { return phoenix_rtt_run(*node, n); };
    path.stream_run = [&node](std::uint64_t chunks) { return phoenix_stream_run(*node, chunks); };
    std::printf("# %s: the driver dials %s\n", path.name, peer.c_str());
    run_guarded(path, [&] { node = make_driver(std::string("driver-") + path.name, key, peer, ssh); });
  };
  connect_driver(phoenix_ssh, via_ssh, server.url_to("127.0.0.1", port_of(ssh_target_endpoint)),
                 SshSettings{server.client_key().string(), known_hosts});
  connect_driver(phoenix_tcp, via_tcp, tcp_target_endpoint, std::nullopt);
  std::fflush(stdout);

  // Warm-up (not recorded), then rounds: every path runs each figure once per round, so that a slow moment
  // of this shared machine hits the paths alike rather than whichever ran then.
  for (Path& p : paths) {
    run_guarded(p, [&] {
      p.rtt_run(std::max(50, o.round_trips() / 10));
      p.stream_run(std::max<std::uint64_t>(4, o.stream_chunks() / 8));
    });
  }
  for (int r = 0; r < o.reps; ++r) {
    for (Path& p : paths) {
      run_guarded(p, [&] {
        const double rtt = p.rtt_run(o.round_trips());
        const double rate = p.stream_run(o.stream_chunks());
        p.rtts.push_back(rtt);
        p.rates.push_back(rate);
      });
      check_servers(group, serves);
    }
  }
  print_results(paths, o, negotiated);

  // Orderly ends: the drivers say goodbye to their servers, ssh -L goes, then the servers are told to stop.
  bool ok = true;
  for (auto* node : {&via_ssh, &via_tcp}) {
    if (*node && (*node)->finalize()) ok = false;
    node->reset();
  }
  forward.reset();
  if (!group.stop_all(10s)) {
    std::fprintf(stderr, "ssh_link: FAILED: a server process did not exit cleanly\n");
    ok = false;
  }
  for (const Path& p : paths) ok = ok && p.failure.empty();
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_args(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: %s [--reps N] [--quick] [--only tcp|openssh-forward|phoenix-ssh|phoenix-tcp]\n",
                 argv[0]);
    return 2;
  }
  install_interrupt_handlers();
  try {
    return run(o) ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ssh_link: FAILED: %s\n", e.what());
    return 1;
  }
}
