// tests/security/tamper_proxy.hpp — attackers on the path of a link, for the security tests: a TCP proxy that
// forwards whole phoenix frames and tampers with the dialler's data frames once, and a relay without the
// cluster key that splices two connections it opened itself. Both run on a thread of their own with blocking
// sockets and poll() deadlines, on 127.0.0.1 only; their destructors stop the thread and close every socket.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "overlay/links/frame.hpp"

namespace phoenix::test {

inline int loopback_listener(std::uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    throw std::runtime_error("cannot listen on 127.0.0.1");
  }
  port = ntohs(a.sin_port);
  return fd;
}

inline int loopback_connect(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

inline bool send_all(int fd, const std::byte* p, std::size_t n) {
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

// Splits a byte stream into phoenix frames (8-byte header, u32 little-endian length at offset 4).
struct frame_splitter {
  std::vector<std::byte> buf;
  std::optional<std::vector<std::byte>> next() {
    if (buf.size() < 8) return std::nullopt;
    std::uint32_t len = 0;
    for (int i = 0; i < 4; ++i) len |= static_cast<std::uint32_t>(buf[4 + i]) << (8 * i);
    if (buf.size() < 8 + std::size_t{len}) return std::nullopt;
    std::vector<std::byte> f(buf.begin(), buf.begin() + 8 + len);
    buf.erase(buf.begin(), buf.begin() + 8 + len);
    return f;
  }
};

inline std::uint8_t frame_type_of(const std::vector<std::byte>& f) { return static_cast<std::uint8_t>(f[3]); }

// The next whole frame from a blocking socket, waiting at most `timeout`; nullopt at its end or the deadline.
inline std::optional<std::vector<std::byte>> read_frame(int fd, frame_splitter& in, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::byte> chunk(1 << 16);
  for (;;) {
    if (auto f = in.next()) return f;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    const ssize_t n = ::recv(fd, chunk.data(), chunk.size(), 0);
    if (n <= 0) return std::nullopt;
    in.buf.insert(in.buf.end(), chunk.begin(), chunk.begin() + n);
  }
}
constexpr std::uint8_t data_frame_type = 16;

// Forwards a dialler's connections to 127.0.0.1:target, frame by frame. On its first connection (for `foreign`,
// its second) it tampers once with the dialler's data frames; later connections it forwards faithfully.
class tamper_proxy {
 public:
  enum class attack {
    none,            // faithful, but for swallow()
    flip_body_byte,  // one bit of a data frame's body flipped
    replay,          // a data frame sent twice
    reorder,         // two data frames swapped
    foreign,         // a data frame recorded on the first connection injected into the second
  };

  tamper_proxy(std::uint16_t target, attack a) : target_(target), attack_(a) {
    listener_ = loopback_listener(port_);
    thread_ = std::thread([this] { run(); });
  }
  ~tamper_proxy() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  tamper_proxy(const tamper_proxy&) = delete;
  tamper_proxy& operator=(const tamper_proxy&) = delete;

  std::uint16_t port() const { return port_; }
  bool attacked() const { return attacked_; }
  // While set, every frame of the dialler's is dropped: its data frames were written and are never
  // acknowledged. Its control frames go too: a link's tags number all frames, so one let through after a
  // dropped data frame fails authentication at the target and ends the link before the test does.
  void swallow(bool on) { swallow_ = on; }
  int connections() const { return connections_; }

 private:
  static constexpr int target_frame = 5;  // the dialler's data frame tampered with (counting from 1)

  void run() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int dialler = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (dialler < 0) continue;
      const int target = loopback_connect(target_);
      if (target >= 0) relay(dialler, target, connections_++);
      ::close(dialler);
      if (target >= 0) ::close(target);
    }
  }

  // Returns when either side closes, when the proxy cuts the connection, or at stop.
  void relay(int dialler, int target, int index) {
    frame_splitter from_dialler;
    int data_frames = 0;
    std::optional<std::vector<std::byte>> held;
    std::vector<std::byte> chunk(1 << 16);
    while (!stop_) {
      pollfd p[2] = {{dialler, POLLIN, 0}, {target, POLLIN, 0}};
      if (::poll(p, 2, 50) < 0) return;
      if (p[1].revents) {  // the target's side: forwarded as it comes
        const ssize_t n = ::recv(target, chunk.data(), chunk.size(), 0);
        if (n <= 0 || !send_all(dialler, chunk.data(), static_cast<std::size_t>(n))) return;
      }
      if (!p[0].revents) continue;
      const ssize_t n = ::recv(dialler, chunk.data(), chunk.size(), 0);
      if (n <= 0) return;
      from_dialler.buf.insert(from_dialler.buf.end(), chunk.begin(), chunk.begin() + n);
      while (auto f = from_dialler.next()) {
        std::vector<std::vector<std::byte>> out{*f};
        if (swallow_) continue;
        if (frame_type_of(*f) == data_frame_type && attack_ != attack::none) {
          ++data_frames;
          if (!tamper(index, data_frames, out, held)) return;  // cut: the dialler will come back
        }
        for (const auto& o : out)
          if (!send_all(target, o.data(), o.size())) return;
      }
    }
  }

  // Changes `out` (the frames to forward for this data frame); false: cut the connection here.
  bool tamper(int index, int nth, std::vector<std::vector<std::byte>>& out,
              std::optional<std::vector<std::byte>>& held) {
    if (attack_ == attack::foreign) {
      if (index == 0 && nth == 3) recorded_ = out.front();
      if (index == 0 && nth == target_frame) return false;
      if (index == 1 && nth == 1 && recorded_) {
        out.insert(out.begin(), *recorded_);
        attacked_ = true;
      }
      return true;
    }
    if (index != 0) return true;
    constexpr std::size_t body_at = overlay::frame_header_bytes + overlay::data_head_bytes;
    if (attack_ == attack::flip_body_byte && nth == target_frame && out.front().size() > body_at) {
      out.front()[body_at] ^= std::byte{0x01};
      attacked_ = true;
    } else if (attack_ == attack::replay && nth == target_frame) {
      out.push_back(out.front());
      attacked_ = true;
    } else if (attack_ == attack::reorder && nth == target_frame) {
      held = out.front();
      out.clear();
    } else if (attack_ == attack::reorder && nth == target_frame + 1 && held) {
      out.push_back(*held);
      attacked_ = true;
    }
    return true;
  }

  std::uint16_t target_;
  attack attack_;
  std::uint16_t port_ = 0;
  int listener_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> attacked_{false};
  std::atomic<bool> swallow_{false};
  std::atomic<int> connections_{0};
  std::optional<std::vector<std::byte>> recorded_;
  std::thread thread_;
};

// A relay without the cluster key: connects to two nodes, hands each the other's HELLO and then whatever else
// comes, and records the frame types each node sends it.
class splicing_relay {
 public:
  splicing_relay(std::uint16_t x, std::uint16_t y) : x_(x), y_(y) {
    thread_ = std::thread([this] { run(); });
  }
  ~splicing_relay() {
    stop_ = true;
    thread_.join();
  }
  splicing_relay(const splicing_relay&) = delete;
  splicing_relay& operator=(const splicing_relay&) = delete;

  bool done() const { return done_; }
  // Frame types each node sent the relay, in order (read once done()).
  const std::vector<std::uint8_t>& from_x() const { return from_x_; }
  const std::vector<std::uint8_t>& from_y() const { return from_y_; }

 private:
  void run() {
    const int x = loopback_connect(x_);
    const int y = loopback_connect(y_);
    frame_splitter sx, sy;
    std::vector<std::byte> chunk(1 << 16);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    bool x_open = x >= 0, y_open = y >= 0;
    while (!stop_ && (x_open || y_open) && std::chrono::steady_clock::now() < deadline) {
      pollfd p[2] = {{x_open ? x : -1, POLLIN, 0}, {y_open ? y : -1, POLLIN, 0}};
      if (::poll(p, 2, 50) < 0) break;
      for (int i = 0; i < 2; ++i) {
        if (!p[i].revents) continue;
        const int from = i == 0 ? x : y;
        const int to = i == 0 ? y : x;
        const ssize_t n = ::recv(from, chunk.data(), chunk.size(), 0);
        if (n <= 0) {
          (i == 0 ? x_open : y_open) = false;
          continue;
        }
        auto& s = i == 0 ? sx : sy;
        s.buf.insert(s.buf.end(), chunk.begin(), chunk.begin() + n);
        while (auto f = s.next()) {
          (i == 0 ? from_x_ : from_y_).push_back(frame_type_of(*f));
          send_all(to, f->data(), f->size());
        }
      }
    }
    if (x >= 0) ::close(x);
    if (y >= 0) ::close(y);
    done_ = true;
  }

  std::uint16_t x_, y_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::vector<std::uint8_t> from_x_, from_y_;
  std::thread thread_;
};

}  // namespace phoenix::test
