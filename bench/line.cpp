// bench/line.cpp — the line layout: A - B, or A - R1 - R2 - B. A drives latency, bandwidth and rate the way
// bench/mpi_pingpong.c does (A plays rank 0, B rank 1), so that the two programs' figures divide.
//
// A assumes [0, 1) and sends to vnode 1; B assumes [1, 2) and replies to vnode 0. Relays assume nothing: every
// message crosses them through the overlay's routing (paper section 5).
#include <algorithm>
#include <array>

#include "bench_node.hpp"

namespace phoenix::bench {
namespace {

constexpr std::size_t k_sizes_latency[] = {8, 1024};
constexpr std::size_t k_sizes_bandwidth[] = {64 << 10, 1 << 20, 16 << 20};
constexpr long k_max_iters = 1L << 26;

// Routes converge a while after the links come up (DSDV updates, paper section 5). A message sent before that
// waits in the overlay and is not lost, so one probe suffices; its echo proves a working round trip.
void await_round_trip(Node& node) {
  std::array<std::byte, 8> probe{};
  send_msg(node, k_vnode_b, tag_ping, probe);
  if (!node.recv_for(tag_pong, k_converge_timeout)) {
    throw std::runtime_error("no round trip to vnode 1 within 10 s: the routes did not converge");
  }
}

// --- timing: as in mpi_pingpong.c ----------------------------------------------------------------------------

// Doubles the iteration count until a run (never the first, which may still be opening connections) lasts
// calib_s, then scales it so that a timed run lasts about target_s. These runs are the warm-up.
template <class Run>
long calibrate(const Settings& s, Run& run) {
  long iters = 1;
  for (int attempt = 0; attempt < 40 && iters < k_max_iters; ++attempt, iters *= 2) {
    double elapsed = run(iters);
    if (attempt > 0 && elapsed >= s.calib_s()) {
      return std::clamp(static_cast<long>(static_cast<double>(iters) * s.target_s() / elapsed), 1L,
                        k_max_iters);
    }
  }
  return iters;
}

// The median over s.reps timed runs of the seconds per iteration; run(iters) returns a run's seconds.
template <class Run>
double median_iteration_s(const Settings& s, Run run) {
  long iters = calibrate(s, run);
  std::vector<double> per_iter;
  for (int r = 0; r < s.reps; ++r) per_iter.push_back(run(iters) / static_cast<double>(iters));
  return median(std::move(per_iter));
}

// --- A -------------------------------------------------------------------------------------------------------

// Each ping hands its buffer over, the pong's buffer becomes the next ping: no copy in the application, as
// MPI sends from and receives into the program's own buffer.
double run_pingpong(Node& node, std::span<const std::byte> payload, long iters) {
  Bytes buffer(payload.begin(), payload.end());
  auto t0 = Clock::now();
  for (long i = 0; i < iters; ++i) {
    send_msg(node, k_vnode_b, tag_ping, std::move(buffer));
    buffer = recv_msg(node, tag_pong).take_body();
    if (buffer.size() != payload.size()) throw std::runtime_error("pong of the wrong size");
  }
  return seconds_since(t0);
}

// A receives, B sends: the direction of mpi_pingpong.c (rank 1 to rank 0).
double run_rate(Node& node, long windows) {
  const std::byte ack{1};
  auto t0 = Clock::now();
  send_msg(node, k_vnode_b, tag_rate_request, bytes_of(static_cast<std::int64_t>(windows)));
  for (long i = 0; i < windows; ++i) {
    for (int w = 0; w < k_rate_window; ++w) {
      if (recv_msg(node, tag_data).size() != k_rate_msg_bytes)
        throw std::runtime_error("rate message of the wrong size");
    }
    send_msg(node, k_vnode_b, tag_ack, std::span(&ack, 1));
  }
  return seconds_since(t0);
}

void measure_pingpong(const Settings& s, Node& node, int report_fd, std::string_view test, std::size_t size) {
  std::vector<std::byte> payload(size, std::byte{0x5a});
  double one_way_s;
  try {
    one_way_s = median_iteration_s(s, [&](long iters) { return run_pingpong(node, payload, iters); }) / 2;
  } catch (const PhoenixError& e) {
    if (!is_code(e.ec, PH_ETOOBIG)) throw;
    report_line(report_fd, "# " + s.system() + " " + std::string(test) + " " + std::to_string(size) +
                               " skipped: larger than this build's max_message_bytes");
    return;
  }
  bool latency = test == "latency";
  double value = latency ? one_way_s * 1e6 : static_cast<double>(size) / one_way_s / 1e6;
  report_line(report_fd, result_line(s.system(), test, size, value, latency ? 2 : 1, latency ? "us" : "MB/s"));
}

void measure_rate(const Settings& s, Node& node, int report_fd) {
  double window_s = median_iteration_s(s, [&](long windows) { return run_rate(node, windows); });
  report_line(report_fd,
              result_line(s.system(), "rate", k_rate_msg_bytes, k_rate_window / window_s, 0, "msg/s"));
}

// --- B
// ---------------------------------------------------------------------------------------------------------

void send_rate_windows(Node& node, const Message& request) {
  auto windows = read_body<std::int64_t>(request);
  std::array<std::byte, k_rate_msg_bytes> body{};
  for (std::int64_t i = 0; i < windows; ++i) {
    for (int w = 0; w < k_rate_window; ++w) send_msg(node, k_vnode_a, tag_data, body);
    recv_msg(node, tag_ack);
  }
}

// Echoes pings and serves rate requests until the launcher says stop (it does once A is done).
void serve_b(Node& node, const ChildPipes& pipes, const Settings& s) {
  for (auto deadline = Clock::now() + s.run_timeout(); Clock::now() < deadline;) {
    auto m = node.recv_for(any_tag, std::chrono::milliseconds(200));
    if (!m) {
      if (stop_requested(pipes.control_fd)) return;
      continue;
    }
    if (m->tag() == tag_ping) {
      send_msg(node, k_vnode_a, tag_pong, std::move(*m).take_body());  // as MPI echoes from its buffer
    } else if (m->tag() == tag_rate_request) {
      send_rate_windows(node, *m);
    } else {
      throw std::runtime_error("unexpected tag " + std::to_string(m->tag()));
    }
  }
  throw std::runtime_error("still serving after the run timeout");
}

}  // namespace

int line_a_main(const Settings& s, const ChildPipes& pipes) {
  Node& node = start_node(s, pipes, "a", "", Interval{k_vnode_a, k_vnode_a + 1});
  await_round_trip(node);
  if (s.latency) {
    for (auto size : k_sizes_latency) measure_pingpong(s, node, pipes.report_fd, "latency", size);
  }
  if (s.bandwidth) {
    for (auto size : k_sizes_bandwidth) measure_pingpong(s, node, pipes.report_fd, "bandwidth", size);
  }
  if (s.rate) measure_rate(s, node, pipes.report_fd);
  report_line(pipes.report_fd, "DONE");
  return finish_node(node, pipes, s);
}

int line_b_main(const Settings& s, const ChildPipes& pipes, const std::string& left) {
  Node& node = start_node(s, pipes, "b", left, Interval{k_vnode_b, k_vnode_b + 1});
  serve_b(node, pipes, s);
  return finish_node(node, pipes, s);
}

int line_relay_main(const Settings& s, const ChildPipes& pipes, const std::string& name,
                    const std::string& left) {
  Node& node = start_node(s, pipes, name, left, std::nullopt);
  return finish_node(node, pipes, s);
}

}  // namespace phoenix::bench
