// admission.hpp — the pure parts of the accept path: backing off while accept() fails, capping handshakes in
// progress (lines a peer can trigger go through log_budget.hpp). No I/O; the clock is passed in. One thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace phoenix::overlay {

// accept() that fails (EMFILE, ENFILE, ENOBUFS, ENOMEM, ...) fails again at once while the cause lasts, and the
// listening socket stays readable: retrying at once spins a core and floods the log. An episode of failures
// waits `first`, doubling up to `most`, and ends at the next accept that works.
class accept_backoff {
 public:
  accept_backoff(std::chrono::milliseconds first, std::chrono::milliseconds most) : first_(first), most_(most) {}
  struct step {
    std::chrono::milliseconds delay;
    bool episode_began;  // the first failure since accepting worked: worth one warning
  };
  step on_failure();
  // The failures of the episode that this success ends (0: there was none).
  std::uint64_t on_success();
  bool in_episode() const { return failures_ > 0; }

 private:
  std::chrono::milliseconds first_, most_, next_{0};
  std::uint64_t failures_ = 0;
};

// Connections accepted whose handshake has not finished, at most `total` and at most `per_address` from one
// source address, so that silent connections cannot hold a node's descriptors and memory, nor crowd out
// peers from elsewhere.
class handshake_caps {
 public:
  handshake_caps(std::size_t total, std::size_t per_address) : total_(total), per_address_(per_address) {}
  enum class verdict { admitted, over_total, over_address };
  verdict try_admit(const std::string& address);
  void release(const std::string& address);  // an address never admitted is ignored
  std::size_t in_progress() const { return in_progress_; }

 private:
  std::size_t total_, per_address_;
  std::size_t in_progress_ = 0;
  std::map<std::string, std::size_t> by_address_;
};

// "1.2.3.4" of "1.2.3.4:567", "::1" of "::1:567": the address part of an endpoint text.
std::string address_part(const std::string& endpoint);

}  // namespace phoenix::overlay
