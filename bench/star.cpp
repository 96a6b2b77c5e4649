// bench/star.cpp — the star layout for rate4: four senders, each linked to one receiver, send 64-byte messages
// as fast as ph_send allows; the receiver counts what reaches its application over fixed windows.
//
// The receiver assumes [0, 1), sender i assumes [1+i, 2+i) so that GO and STOP can reach it. Every message
// carries (sender, sequence number): the receiver checks that each sender's messages arrive once, in send
// order, and that the totals match what the senders report at the end -- the delivery guarantee of API.md,
// checked under load.
#include <algorithm>
#include <array>

#include "bench_node.hpp"

namespace phoenix::bench {
namespace {

// A sender's bound on bytes it holds (Config::max_waiting_bytes; past it ph_send returns PH_EAGAIN). The
// default, 256 MiB, would let four senders queue about a gigabyte ahead of the receiver and end the run in a
// long drain; twice the link window (8 MiB) still keeps every link full.
constexpr std::uint64_t k_sender_waiting_bytes = 16 << 20;
constexpr int k_stop_check_every = 256;  // sends between looks for STOP
constexpr std::chrono::seconds k_drain_timeout{30};

struct DataHeader {  // the first bytes of every data message
  std::uint64_t sender;
  std::uint64_t seq;
};
struct SenderTally {  // a sender's DONE message
  std::uint64_t sender = 0;
  std::uint64_t sent = 0;
  std::uint64_t eagain = 0;  // PH_EAGAIN retries
};

SenderTally blast(Node& node, std::uint64_t index, const Settings& s) {
  SenderTally tally{.sender = index};
  std::array<std::byte, k_rate_msg_bytes> body{};
  for (auto deadline = Clock::now() + s.run_timeout();;) {
    DataHeader header{index, tally.sent};
    std::memcpy(body.data(), &header, sizeof header);
    tally.eagain += send_msg(node, k_vnode_a, tag_data, body);
    if (++tally.sent % k_stop_check_every != 0) continue;
    if (node.try_recv(tag_stop)) return tally;
    if (Clock::now() > deadline) throw std::runtime_error("no STOP before the run timeout");
  }
}

class Receiver {
 public:
  Receiver(Node& node, const Settings& s) : node_(node), s_(s) {}

  void run(int report_fd) {
    await_probes();
    for (vp_t i = 0; i < k_star_senders; ++i) send_msg(node_, k_vnode_b + i, tag_go, std::span<const std::byte>());
    count_for(s_.rate4_warmup());
    std::vector<double> rates;
    for (int r = 0; r < s_.reps; ++r) rates.push_back(count_for(s_.rate4_window()));
    for (vp_t i = 0; i < k_star_senders; ++i) send_msg(node_, k_vnode_b + i, tag_stop, std::span<const std::byte>());
    drain();
    report_line(report_fd, result_line("phoenix-rate4", "rate", k_rate_msg_bytes, median(rates), 0, "msg/s"));
    report_line(report_fd, summary());
  }

 private:
  // Every sender's first message proves its route to us; GO goes out only once all four have one.
  void await_probes() {
    auto deadline = Clock::now() + k_converge_timeout;
    for (int seen = 0; seen < k_star_senders; ++seen) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      auto m = node_.recv_for(tag_probe, std::max(left, std::chrono::milliseconds(1)));
      if (!m) throw std::runtime_error("not every sender reached the receiver within 10 s");
      if (read_body<std::uint64_t>(*m) >= k_star_senders) throw std::runtime_error("bad probe");
    }
  }

  // Counts data messages for `duration`; returns messages per second. Each wait ends at the window's end, so
  // the window closes on time even when messages stop coming.
  double count_for(std::chrono::duration<double> duration) {
    std::uint64_t count = 0;
    auto t0 = Clock::now();
    auto end = t0 + std::chrono::duration_cast<Clock::duration>(duration);
    for (auto now = t0; now < end; now = Clock::now()) {
      if (auto m = node_.recv_for(tag_data, std::chrono::ceil<std::chrono::milliseconds>(end - now))) {
        account(*m);
        ++count;
      }
    }
    return static_cast<double>(count) / seconds_since(t0);
  }

  void account(const Message& m) {
    DataHeader h{};
    if (m.size() != k_rate_msg_bytes) throw std::runtime_error("data message of the wrong size");
    std::memcpy(&h, m.data(), sizeof h);
    if (h.sender >= k_star_senders) throw std::runtime_error("data message from an unknown sender");
    if (h.seq != received_[h.sender]) {
      throw std::runtime_error("sender " + std::to_string(h.sender) + "'s message " + std::to_string(h.seq) +
                               " arrived where " + std::to_string(received_[h.sender]) +
                               " was due: messages lost or reordered");
    }
    ++received_[h.sender];
  }

  // Takes what the senders sent before STOP, until every DONE is in and matches what arrived.
  void drain() {
    auto deadline = Clock::now() + k_drain_timeout;
    for (int done = 0; done < k_star_senders;) {
      if (Clock::now() > deadline) throw std::runtime_error("senders not drained within 30 s");
      auto m = recv_msg(node_, any_tag);
      if (m.tag() == tag_data) {
        account(m);
      } else if (m.tag() == tag_done) {
        auto tally = read_body<SenderTally>(m);
        if (tally.sender >= k_star_senders) throw std::runtime_error("bad DONE");
        tallies_[tally.sender] = tally;
        ++done;
      } else {
        throw std::runtime_error("unexpected tag " + std::to_string(m.tag()));
      }
    }
    for (int i = 0; i < k_star_senders; ++i) {
      if (received_[i] != tallies_[i].sent) {
        throw std::runtime_error("sender " + std::to_string(i) + " sent " + std::to_string(tallies_[i].sent) +
                                 ", received " + std::to_string(received_[i]));
      }
    }
  }

  std::string summary() const {
    SenderTally sum;
    for (const auto& t : tallies_) {
      sum.sent += t.sent;
      sum.eagain += t.eagain;
    }
    return "# phoenix-rate4: " + std::to_string(sum.sent) + " messages sent and received in order, " +
           std::to_string(sum.eagain) + " PH_EAGAIN retries (max_waiting_bytes " +
           std::to_string(k_sender_waiting_bytes >> 20) + " MiB per sender)";
  }

  Node& node_;
  const Settings& s_;
  std::array<std::uint64_t, k_star_senders> received_{};
  std::array<SenderTally, k_star_senders> tallies_{};
};

}  // namespace

int star_receiver_main(const Settings& s, const ChildPipes& pipes) {
  Node& node = start_node(s, pipes, "recv", "", Interval{k_vnode_a, k_vnode_a + 1});
  Receiver(node, s).run(pipes.report_fd);
  report_line(pipes.report_fd, "DONE");
  return finish_node(node, pipes, s);
}

int star_sender_main(const Settings& s, const ChildPipes& pipes, std::uint64_t index, const std::string& left) {
  vp_t vnode = k_vnode_b + index;
  Node& node =
      start_node(s, pipes, node_name('s', index + 1), left, Interval{vnode, vnode + 1}, k_sender_waiting_bytes);
  send_msg(node, k_vnode_a, tag_probe, bytes_of(index));
  recv_msg(node, tag_go, k_converge_timeout);
  SenderTally tally = blast(node, index, s);
  send_msg(node, k_vnode_a, tag_done, bytes_of(tally));
  return finish_node(node, pipes, s);
}

}  // namespace phoenix::bench
