// bench/migration.cpp — migration_bench: how fast application state moves with its virtual nodes.
//
// Two node processes on loopback. The owner assumes all of [0, L) and holds S bytes of application state; the
// joiner's ph_join takes the upper half with all of that state (pack hands the buffer over without a copy),
// and ph_leave gives it back. For each S (1, 64 and 512 MiB by default) the joiner measures, in the same run:
//
//   raw        the owner streams S bytes to the joiner as 1 MiB messages: the one-hop bandwidth anchor;
//   join       ph_join with S bytes of state, the links otherwise quiet; also leave (the state going back);
//   ratio      join throughput / raw throughput;
//   first      time from calling ph_join to the first message the joiner receives for its new half, from a
//              third node that sends one every millisecond to the top virtual node;
//   loaded     ph_join again while that third node ping-pongs with the owner (vnode 0) as fast as it can,
//              and that ping-pong's round trip (median, 99th percentile, maximum) while the state moves,
//              beside its median when nothing moves.
//
// Printed as RESULT lines and a markdown table; nothing is asserted (the machines are shared and noisy).
// Usage: migration_bench [--sizes MIB[,MIB...]] [--quick]
#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <phoenix/config.hpp>
#include <phoenix/node.hpp>
#include <sstream>
#include <thread>
#include <utility>

#include "phoenix/launch/key_file.hpp"
#include "phoenix/launch/process_group.hpp"
#include "bench_node.hpp"

namespace {

using namespace phoenix;
using namespace phoenix::bench;
using namespace std::chrono_literals;

constexpr vp_t k_space = 1 << 20;
constexpr vp_t k_top = k_space - 1;  // in the joiner's half once it joined
constexpr std::size_t k_chunk = 1 << 20;

enum MigrationTag : int {
  tag_state = 101,  // joiner -> owner: body = u64 state size; answered by tag_ready
  tag_ready,
  tag_raw,    // joiner -> owner: body = u64 bytes; the owner streams them as tag_chunk messages
  tag_chunk,  // owner -> joiner
  tag_probe,  // prober -> top vnode
  tag_echo,   // prober -> owner (vnode 0), echoed with tag_echoed
  tag_echoed,
};

Config node_config(const std::string& name, const std::string& key) {
  Config c = bench_config(name, key, 50);
  c.space_size = k_space;
  return c;
}

// --- the owner
// -------------------------------------------------------------------------------------------------

int owner_main(const ChildPipes& pipes, const std::string& key) {
  Node node(node_config("owner", key));
  check(node.initialize("tcp://127.0.0.1:0"), "initialize");
  check(node.assume({0, k_space}), "assume");
  std::mutex mu;
  Bytes state;  // the application state of the upper half; handed over by pack, taken back by unpack
  check(node.set_state_handlers(
            [&](Interval) -> std::optional<Bytes> {
              std::lock_guard lock(mu);
              return std::exchange(state, {});
            },
            [&](Interval, std::span<const std::byte> d) {
              std::lock_guard lock(mu);
              state = copy_bytes(d);
              return true;
            }),
        "set_state_handlers");
  report_line(pipes.report_fd, "PORT " + node.local_port());
  while (!stop_requested(pipes.control_fd)) {
    auto m = node.recv_for(any_tag, 20ms);
    if (!m) continue;
    if (m->tag() == tag_echo) {
      send_msg(node, m->source(), tag_echoed, std::move(*m).take_body());
    } else if (m->tag() == tag_state) {
      const auto n = read_body<std::uint64_t>(*m);
      {
        std::lock_guard lock(mu);
        state = Bytes(n);
        std::fill(state.begin(), state.end(), std::byte{0x5a});  // touched: resident, as real state is
      }
      send_msg(node, m->source(), tag_ready, std::span<const std::byte>());
    } else if (m->tag() == tag_raw) {
      const auto n = read_body<std::uint64_t>(*m);
      Bytes chunk(k_chunk);
      std::fill(chunk.begin(), chunk.end(), std::byte{0x33});
      for (std::uint64_t sent = 0; sent < n; sent += k_chunk) send_msg(node, m->source(), tag_chunk, chunk);
    }
  }
  check(node.finalize(), "finalize");
  return 0;
}

// --- the joiner (and the third node, a thread in the same process)
// ----------------------------------------------

struct Stats {
  double p50 = 0, p99 = 0, max = 0;
};
Stats stats_us(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.p50 = v[v.size() / 2];
  s.p99 = v[std::min(v.size() - 1, v.size() * 99 / 100)];
  s.max = v.back();
  return s;
}

double mb_per_s(std::uint64_t bytes, double seconds) { return static_cast<double>(bytes) / seconds / 1e6; }

struct Prober {
  enum class mode { idle, probe_top, pingpong };
  explicit Prober(Node& n) : node(n) {}
  Node& node;
  std::atomic<mode> what{mode::idle};
  std::atomic<bool> quit{false};
  std::mutex mu;
  std::vector<std::pair<Clock::time_point, double>> rtts;  // when a round trip ended, and its microseconds

  void run() {
    std::uint64_t n = 0;
    while (!quit) {
      switch (what.load()) {
        case mode::idle:
          (void)node.recv_for(any_tag, 1ms);
          break;
        case mode::probe_top:
          send_msg(node, k_top, tag_probe, bytes_of(++n));
          (void)node.recv_for(any_tag, 1ms);
          break;
        case mode::pingpong: {
          const auto t0 = Clock::now();
          send_msg(node, k_vnode_a, tag_echo, bytes_of(++n));
          if (!node.recv_for(tag_echoed, 10s)) throw std::runtime_error("no echo from the owner within 10 s");
          const auto t1 = Clock::now();
          std::lock_guard lock(mu);
          rtts.emplace_back(t1, std::chrono::duration<double, std::micro>(t1 - t0).count());
          break;
        }
      }
    }
  }
  std::vector<double> between(Clock::time_point a, Clock::time_point b) {
    std::lock_guard lock(mu);
    std::vector<double> out;
    for (auto [t, us] : rtts)
      if (t >= a && t <= b) out.push_back(us);
    return out;
  }
};

int joiner_main(const ChildPipes& pipes, const std::string& key, const std::string& owner_port,
                const std::vector<std::uint64_t>& sizes_mib) {
  Node node(node_config("joiner", key));
  Node third(node_config("third", key));
  check(node.initialize("tcp://127.0.0.1:0"), "initialize");
  check(third.initialize("tcp://127.0.0.1:0"), "initialize");
  check(node.add_port(owner_port), "add_port");
  check(third.add_port(owner_port), "add_port");
  std::size_t unpacked = 0;
  Bytes held;  // the state of the half it joined with, until it leaves
  check(node.set_state_handlers([&](Interval) -> std::optional<Bytes> { return std::exchange(held, {}); },
                                [&](Interval, std::span<const std::byte> d) {
                                  unpacked = d.size();
                                  held = copy_bytes(d);  // the application takes the state, as a real one would
                                  return true;
                                }),
        "set_state_handlers");
  Prober prober{third};
  std::thread prober_thread([&] { prober.run(); });
  struct stop_prober {  // on the way out by exception
    Prober& p;
    std::thread& t;
    ~stop_prober() {
      p.quit = true;
      if (t.joinable()) t.join();
    }
  } stopper{prober, prober_thread};

  auto result = [&](std::string_view test, std::size_t size, double value, int precision,
                    std::string_view unit) {
    report_line(pipes.report_fd, result_line("phoenix", test, size, value, precision, unit));
  };
  // A first round trip: links up and routes known.
  send_msg(node, k_vnode_a, tag_state, bytes_of(std::uint64_t{0}));
  if (!node.recv_for(tag_ready, k_converge_timeout))
    throw std::runtime_error("the owner did not answer in 10 s");

  // The ping-pong round trip while nothing moves.
  prober.what = Prober::mode::pingpong;
  const auto idle_from = Clock::now();
  std::this_thread::sleep_for(300ms);
  prober.what = Prober::mode::idle;
  const auto idle = stats_us(prober.between(idle_from, Clock::now()));
  result("pingpong_idle_p50", 8, idle.p50, 1, "us");

  for (const auto mib : sizes_mib) {
    const std::uint64_t bytes = mib << 20;
    // raw: the same bytes as 1 MiB messages, owner to joiner
    auto t0 = Clock::now();
    send_msg(node, k_vnode_a, tag_raw, bytes_of(bytes));
    for (std::uint64_t got = 0; got < bytes; got += k_chunk) {
      if (!node.recv_for(tag_chunk, 60s)) throw std::runtime_error("raw stream stalled");
    }
    const double raw = mb_per_s(bytes, seconds_since(t0));
    result("raw", bytes, raw, 1, "MB/s");

    for (int loaded = 0; loaded < 2; ++loaded) {
      send_msg(node, k_vnode_a, tag_state, bytes_of(bytes));
      if (!node.recv_for(tag_ready, 60s)) throw std::runtime_error("the owner did not make its state");
      prober.what = loaded ? Prober::mode::pingpong : Prober::mode::probe_top;
      unpacked = 0;
      t0 = Clock::now();
      check(node.join(300s), "join");
      const auto t1 = Clock::now();
      if (unpacked != bytes)
        throw std::runtime_error("the joiner unpacked " + std::to_string(unpacked) + " bytes");
      const double join = mb_per_s(bytes, std::chrono::duration<double>(t1 - t0).count());
      if (!loaded) {
        if (!node.recv_for(tag_probe, 10s)) throw std::runtime_error("no probe reached the new half in 10 s");
        result("first_message_after_join", bytes,
               std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), 1, "ms");
        result("join", bytes, join, 1, "MB/s");
        result("join_vs_raw", bytes, join / raw, 2, "ratio");
      } else {
        const auto during = stats_us(prober.between(t0, t1));
        result("join_loaded", bytes, join, 1, "MB/s");
        result("pingpong_during_join_p50", bytes, during.p50, 1, "us");
        result("pingpong_during_join_p99", bytes, during.p99, 1, "us");
        result("pingpong_during_join_max", bytes, during.max, 1, "us");
      }
      prober.what = Prober::mode::idle;
      while (node.try_recv(tag_probe)) {
      }
      t0 = Clock::now();
      check(node.leave(300s), "leave");
      if (!loaded) result("leave", bytes, mb_per_s(bytes, seconds_since(t0)), 1, "MB/s");
    }
  }
  report_line(pipes.report_fd, "DONE");
  while (!stop_requested(pipes.control_fd, 100ms)) {
  }
  prober.quit = true;  // before finalize: no call may run concurrently with it
  prober_thread.join();
  check(third.finalize(), "finalize");
  check(node.finalize(), "finalize");
  return 0;
}

bool parse_sizes(std::string_view list, std::vector<std::uint64_t>& out) {
  out.clear();
  while (!list.empty()) {
    const auto comma = list.find(',');
    const auto item = list.substr(0, comma);
    std::uint64_t v = 0;
    const auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || p != item.data() + item.size() || v == 0 || v > 4096) return false;
    out.push_back(v);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return !out.empty();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::uint64_t> sizes{1, 64, 512};
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--quick") {
      sizes = {1, 8};
    } else if (arg == "--sizes" && i + 1 < argc && parse_sizes(argv[i + 1], sizes)) {
      ++i;
    } else {
      std::fprintf(stderr, "usage: %s [--sizes MIB[,MIB...]] [--quick]\n", argv[0]);
      return 2;
    }
  }
  install_interrupt_handlers();
  try {
    const auto dir =
        std::filesystem::temp_directory_path() / ("phoenix-migration-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    struct remove_dir {
      std::filesystem::path p;
      ~remove_dir() {
        std::error_code ec;
        std::filesystem::remove_all(p, ec);
      }
    } cleanup{dir};
    const std::string key = launch::write_cluster_key(dir / "cluster.key");
    ProcessGroup group;
    group.spawn("owner", [&](const ChildPipes& p) { return owner_main(p, key); });
    std::map<std::string, double> results;
    const auto deadline = Clock::now() + 30min;
    bool done = false;
    while (!done && Clock::now() < deadline) {
      const auto ev = group.next_event(deadline);
      if (!ev || ev->eof)
        throw std::runtime_error(ev ? group.name(ev->child) + " exited early" : "interrupted");
      std::istringstream line(ev->line);
      std::string word;
      line >> word;
      if (word == "PORT") {
        std::string port;
        line >> port;
        group.spawn("joiner", [&, port](const ChildPipes& p) { return joiner_main(p, key, port, sizes); });
      } else if (word == "RESULT") {
        std::printf("%s\n", ev->line.c_str());
        std::fflush(stdout);
        std::string system, test, unit;
        std::size_t size = 0;
        double value = 0;
        line >> system >> test >> size >> value >> unit;
        results[test + " " + std::to_string(size)] = value;
      } else if (word == "DONE") {
        done = true;
      } else {
        std::fprintf(stderr, "%s\n", ev->line.c_str());
        if (word == "ERROR") throw std::runtime_error(ev->line);
      }
    }
    if (!group.stop_all(10s)) throw std::runtime_error("a node did not exit cleanly");
    if (!done) throw std::runtime_error("the run did not finish in 30 minutes");
    auto get = [&](const std::string& test, std::uint64_t bytes) {
      const auto it = results.find(test + " " + std::to_string(bytes));
      return it == results.end() ? 0.0 : it->second;
    };
    std::printf(
        "\n| state | raw one hop | join | join / raw | leave | join, loaded | first message after join "
        "| ping-pong RTT during join (p50 / p99 / max) |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (const auto mib : sizes) {
      const std::uint64_t b = mib << 20;
      std::printf(
          "| %llu MiB | %.0f MB/s | %.0f MB/s | %.2f | %.0f MB/s | %.0f MB/s | %.1f ms | %.0f / %.0f / %.0f us "
          "|\n",
          static_cast<unsigned long long>(mib), get("raw", b), get("join", b), get("join_vs_raw", b),
          get("leave", b), get("join_loaded", b), get("first_message_after_join", b),
          get("pingpong_during_join_p50", b), get("pingpong_during_join_p99", b),
          get("pingpong_during_join_max", b));
    }
    std::printf("\nPing-pong round trip through the owner while nothing moves: %.0f us (median).\n",
                get("pingpong_idle_p50", 8));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "migration: FAILED: %s\n", e.what());
    return 1;
  }
}
