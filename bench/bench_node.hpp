// bench/bench_node.hpp — what every phoenix node of the ping-pong benchmark shares: the settings, the protocol
// between the roles (virtual nodes and tags), and helpers that bound every wait and turn phoenix errors into
// exceptions. Each role runs as the whole life of one forked child (process_group.hpp), on that child's one
// application thread; an exception out of a role is reported to the launcher as an ERROR line.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <phoenix/config.hpp>
#include <phoenix/node.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "phoenix/launch/process_group.hpp"

namespace phoenix::bench {

using launch::ChildEvent;
using launch::ChildPipes;
using launch::Clock;
using launch::ProcessGroup;
using launch::install_interrupt_handlers;
using launch::interrupted;
using launch::report_line;
using launch::stop_requested;

// The line layout's ends: A (vnode 0) and B (vnode 1). In the star, the receiver is vnode 0 and sender i
// assumes vnode 1 + i.
inline constexpr vp_t k_vnode_a = 0;
inline constexpr vp_t k_vnode_b = 1;

enum Tag : int {
  tag_ping = 1,      // A -> B, echoed
  tag_pong,          // B -> A
  tag_rate_request,  // A -> B: body = number of windows to send
  tag_data,          // 64-byte rate messages
  tag_ack,           // closes a rate window
  tag_probe,         // rate4 sender -> receiver: "my route to you works"; body = sender index
  tag_go,            // rate4 receiver -> sender: start sending
  tag_stop,          // rate4 receiver -> sender: stop sending
  tag_done,          // rate4 sender -> receiver: body = the sender's tally
};

inline constexpr int k_rate_window = 64;  // as in mpi_pingpong.c
inline constexpr std::size_t k_rate_msg_bytes = 64;
inline constexpr std::chrono::seconds k_message_timeout{10};   // one message later than this fails the run
inline constexpr std::chrono::seconds k_converge_timeout{10};  // first round trip: links up, routes converged

struct Settings {
  int hops = 1;
  int reps = 5;
  bool quick = false;
  bool latency = false, bandwidth = false, rate = false, rate4 = false;
  std::string key_file;
  std::string protection = "integrity";  // Config::link_protection of every node

  double calib_s() const { return quick ? 0.005 : 0.05; }  // a warm-up run this long is trusted for scaling
  double target_s() const { return quick ? 0.02 : 0.3; }   // each timed run lasts about this long
  std::chrono::duration<double> rate4_warmup() const {
    return std::chrono::duration<double>(quick ? 0.05 : 0.3);
  }
  std::chrono::duration<double> rate4_window() const {
    return std::chrono::duration<double>(quick ? 0.1 : 0.5);
  }
  std::chrono::seconds run_timeout() const { return std::chrono::seconds(quick ? 60 : 600); }  // one layout
  // "phoenix-1hop"; with protection off "phoenix-1hop-off".
  std::string system() const {
    return "phoenix-" + std::to_string(hops) + "hop" + (protection == "off" ? "-off" : "");
  }
};

// A failed phoenix call, keeping its code so that callers can tell PH_ETOOBIG from a broken run.
struct PhoenixError : std::runtime_error {
  PhoenixError(const std::string& what, std::error_code code)
      : std::runtime_error(what + ": " + code.message()), ec(code) {}
  std::error_code ec;
};

void check(std::error_code ec, const std::string& what);  // throws PhoenixError if ec
bool is_code(std::error_code ec, int ph_code);
double seconds_since(Clock::time_point t0);
double median(std::vector<double> v);
std::string node_name(char prefix, std::uint64_t n);  // "r1", "s4"
// A benchmark node's configuration: its name, the cluster key file, quiet logging, the given retry interval.
Config bench_config(const std::string& name, const std::string& key_file, std::uint32_t retry_interval_ms);
// "RESULT <system> <test> <size_bytes> <value> <unit>"
std::string result_line(std::string_view system, std::string_view test, std::size_t size, double value,
                        int precision, std::string_view unit);

template <class T>
std::span<const std::byte> bytes_of(const T& value) {
  return std::as_bytes(std::span(&value, 1));
}

template <class T>
T read_body(const Message& m) {
  T value{};
  if (m.size() != sizeof value)
    throw std::runtime_error("message with tag " + std::to_string(m.tag()) + " has a bad size");
  std::memcpy(&value, m.data(), sizeof value);
  return value;
}

// Sends, retrying after a short pause on PH_EAGAIN (bounded by k_message_timeout); returns the retries.
std::uint64_t send_msg(Node& node, vp_t dest, int tag, std::span<const std::byte> body);
std::uint64_t send_msg(Node& node, vp_t dest, int tag, Bytes&& body);  // without a copy
// The next message with `tag`; throws if none comes within `timeout`.
Message recv_msg(Node& node, int tag, std::chrono::milliseconds timeout = k_message_timeout);

// Creates, binds tcp://127.0.0.1:0, assumes `vnodes`, dials `left` (unless empty), and reports
// "PORT <endpoint>" to the launcher. The node is never destroyed, on purpose: see bench_node.cpp.
Node& start_node(const Settings& s, const ChildPipes& pipes, const std::string& name, const std::string& left,
                 std::optional<Interval> vnodes, std::optional<std::uint64_t> max_waiting_bytes = std::nullopt);
// Keeps the node up (relays keep forwarding) until the launcher says stop, then finalizes it; returns 0.
int finish_node(Node& node, const ChildPipes& pipes, const Settings& s);

// The roles. Line (line.cpp): A drives and reports RESULT lines, B echoes, relays only forward.
int line_a_main(const Settings& s, const ChildPipes& pipes);
int line_b_main(const Settings& s, const ChildPipes& pipes, const std::string& left);
int line_relay_main(const Settings& s, const ChildPipes& pipes, const std::string& name,
                    const std::string& left);
// Star (star.cpp): the receiver measures rate4 and reports it; senders send until told to stop.
inline constexpr int k_star_senders = 4;
int star_receiver_main(const Settings& s, const ChildPipes& pipes);
int star_sender_main(const Settings& s, const ChildPipes& pipes, std::uint64_t index, const std::string& left);

}  // namespace phoenix::bench
