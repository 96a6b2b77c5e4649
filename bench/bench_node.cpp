// bench/bench_node.cpp — see bench_node.hpp.
#include "bench_node.hpp"

#include <algorithm>
#include <cstdio>
#include <phoenix/config.hpp>
#include <thread>

namespace phoenix::bench {

void check(std::error_code ec, const std::string& what) {
  if (ec) throw PhoenixError(what, ec);
}

bool is_code(std::error_code ec, int ph_code) { return ec == make_error_code(ph_code); }

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Built by append, since GCC 12 gives a false -Wrestrict on "r" + std::to_string(n) (GCC bug 105329).
std::string node_name(char prefix, std::uint64_t n) { return std::string(1, prefix).append(std::to_string(n)); }

Config bench_config(const std::string& name, const std::string& key_file, std::uint32_t retry_interval_ms) {
  Config c;
  c.name = name;
  c.cluster_key_file = key_file;
  c.retry_interval_ms = retry_interval_ms;
  c.log_level = "error";
  return c;
}

std::string result_line(std::string_view system, std::string_view test, std::size_t size, double value,
                        int precision, std::string_view unit) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "RESULT %.*s %.*s %zu %.*f %.*s", int(system.size()), system.data(),
                int(test.size()), test.data(), size, precision, value, int(unit.size()), unit.data());
  return buf;
}

// ph_send never blocks on the network; PH_EAGAIN is back-pressure (the node holds max_waiting_bytes of unsent
// or unacknowledged messages). Pause briefly and retry, bounded in time.
namespace {
// Retries send() while it reports back-pressure, bounded in time; returns the number of retries.
template <class Send>
std::uint64_t send_retrying(Send send, vp_t dest, int tag) {
  auto ec = send();
  std::uint64_t retries = 0;
  for (auto deadline = Clock::now() + k_message_timeout; is_code(ec, PH_EAGAIN) && Clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    ++retries;
    ec = send();
  }
  check(ec, "send to vnode " + std::to_string(dest) + " tag " + std::to_string(tag));
  return retries;
}
}  // namespace

std::uint64_t send_msg(Node& node, vp_t dest, int tag, std::span<const std::byte> body) {
  return send_retrying([&] { return node.send(dest, tag, body); }, dest, tag);
}

std::uint64_t send_msg(Node& node, vp_t dest, int tag, Bytes&& body) {
  return send_retrying([&] { return node.send(dest, tag, std::move(body)); }, dest, tag);
}

Message recv_msg(Node& node, int tag, std::chrono::milliseconds timeout) {
  auto m = node.recv_for(tag, timeout);
  if (!m) {
    throw std::runtime_error("no message with tag " + std::to_string(tag) + " within " +
                             std::to_string(timeout.count()) + " ms");
  }
  return std::move(*m);
}

// The node is leaked on purpose. The happy path finalizes it in finish_node; on an error, ~Node would finalize
// while the exception unwinds -- under a flood that takes seconds -- before the child could report the error.
// Leaked, the child reports at once and _exits (ProcessGroup::run_child), and the launcher stops the others.
Node& start_node(const Settings& s, const ChildPipes& pipes, const std::string& name, const std::string& left,
                 std::optional<Interval> vnodes, std::optional<std::uint64_t> max_waiting_bytes) {
  Config config;
  config.name = name;
  config.cluster_key_file = s.key_file;
  config.link_protection = s.protection;
  if (max_waiting_bytes) config.max_waiting_bytes = *max_waiting_bytes;
  auto& node = *new Node(config);
  check(node.initialize("tcp://127.0.0.1:0"), "initialize");
  if (vnodes) check(node.assume(*vnodes), "assume");
  if (!left.empty()) check(node.add_port(left), "add_port " + left);
  report_line(pipes.report_fd, "PORT " + node.local_port());
  return node;
}

int finish_node(Node& node, const ChildPipes& pipes, const Settings& s) {
  if (!stop_requested(pipes.control_fd, s.run_timeout())) throw std::runtime_error("never told to stop");
  check(node.finalize(), "finalize");
  return 0;
}

}  // namespace phoenix::bench
