// ssh_session.hpp — one SSH connection to a gateway (libssh2, non-blocking), shared by every ssh:// link that
// goes through that gateway as the same user; each link is a direct-tcpip channel (what `ssh -L` opens).
//
// Contract: everything runs on the node's I/O context (the thread holding the progress token); no locks, no
// thread per session, nothing blocks except the short local exchanges with ssh-agent during authentication.
//
// Readiness: libssh2 reads the TCP socket itself (non-blocking). After every round of libssh2 calls the
// session asks libssh2_session_block_directions and waits with socket.async_wait(wait_read) while some call
// is waiting for input; when the socket becomes readable it retries every pending call of every channel
// (handshake, authentication, channel open, reads, writes, closes), round after round while any makes progress.
//
// Writes: libssh2 has a single half-sent-packet slot per session, and its rule is that a call whose send
// returned EAGAIN must be repeated, with the same buffer, before any other call sends. With many channels on
// one session that rule cannot be kept locally (a read may send a window adjustment, a keepalive may be due),
// and breaking it loses data silently (libssh2 1.10's send_existing reports the next caller's packet as sent
// while it only finished the old one). So libssh2's send callback never returns EAGAIN: it appends the
// encrypted bytes to the session's output buffer, which the session writes at the end of every retry round and,
// during a burst, whenever send_batch_bytes wait; what the socket does not take waits for wait_write readiness.
// Channel writes pause while that buffer holds more than a high-water mark (back-pressure). A channel write
// that returns EAGAIN (its SSH window is full) is retried later with exactly the same buffer.
//
// Reads: libssh2's receive callback remembers that the socket was drained (a short read or EAGAIN) and answers
// EAGAIN without a system call until the next wait_read readiness (every libssh2 call reads first).
//
// Failure: a session that fails (gateway unreachable, handshake, host key, authentication, socket error, or no
// data from the gateway for `dead_after` while keepalives were due) fails every channel and pending open;
// the owner makes a new session at its next dial.
#pragma once

#include <sys/types.h>

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "overlay/transports/address.hpp"

// libssh2.h's types, without including it in every user of the overlay.
struct _LIBSSH2_SESSION;
struct _LIBSSH2_CHANNEL;
struct _LIBSSH2_AGENT;
struct libssh2_agent_publickey;

namespace phoenix::overlay {

struct ssh_options {
  // Private key for public key authentication. Empty: ~/.ssh/id_ed25519, then ~/.ssh/id_rsa; when none of
  // them is readable, the ssh-agent named by SSH_AUTH_SOCK. A leading "~/" is the home directory.
  std::string identity_file;
  std::string known_hosts;            // empty: ~/.ssh/known_hosts
  bool accept_new_host_keys = false;  // "accept-new": record an unknown key (a changed key is always refused)
  std::chrono::seconds keepalive_interval{5};
  std::chrono::milliseconds dead_after{12000};     // no data from the gateway for this long: the session failed
  std::chrono::milliseconds setup_timeout{30000};  // connect + handshake + authentication
};

// Why a session or a channel open failed. `refused` marks configuration problems (host key, authentication,
// forwarding prohibited) that retrying soon will not fix.
struct ssh_failure {
  std::string text;
  bool refused = false;
};

class ssh_session;

// One direct-tcpip channel: a byte stream with asio-like completion handlers (always posted, never called
// from inside the initiating call). At most one read and one write in flight.
class ssh_channel {
 public:
  using handler = std::function<void(std::error_code, std::size_t)>;

  ssh_channel(ssh_session& session, _LIBSSH2_CHANNEL* channel, std::string target);
  ~ssh_channel();
  ssh_channel(const ssh_channel&) = delete;
  ssh_channel& operator=(const ssh_channel&) = delete;

  void async_read(std::span<std::byte> into, handler h);
  // Writes all of `buffers`, which stay valid and unchanged until h runs.
  void async_write(std::span<const asio::const_buffer> buffers, handler h);
  // Closes the channel (in the background); pending handlers run with operation_aborted.
  void close();
  asio::any_io_executor executor() const { return executor_; }
  const std::string& target() const { return target_; }

 private:
  friend class ssh_session;
  bool step();  // one channel's part of retry_pending: try pending calls; true if something progressed
  bool step_write();
  bool step_read();
  bool wants_input() const;  // a pending call will read from the session (so the socket is worth waiting on)
  bool is_finished() const { return channel_ == nullptr; }
  void next_piece();
  void complete(handler& h, std::error_code ec, std::size_t n);
  void fail(std::error_code ec);
  void detach();  // the session is gone: libssh2 freed the channel with it

  ssh_session* session_;
  asio::any_io_executor executor_;
  _LIBSSH2_CHANNEL* channel_;
  std::string target_;
  bool closing_ = false;
  std::error_code error_;  // set once the channel failed; later calls complete with it

  std::span<std::byte> read_into_;
  handler read_handler_;

  std::vector<asio::const_buffer> write_buffers_;
  std::size_t write_index_ = 0;   // next buffer to take a piece from
  std::size_t write_offset_ = 0;  // within it
  std::size_t write_total_ = 0;
  handler write_handler_;
  std::vector<std::byte> stage_;  // small frames coalesced into SSH packets
  // What libssh2_channel_write is given: stage_, or a large buffer in place. Unchanged while a write is EAGAIN.
  std::span<const std::byte> piece_;
  std::size_t piece_sent_ = 0;
};

class ssh_session : public std::enable_shared_from_this<ssh_session> {
 public:
  using open_handler = std::function<void(std::shared_ptr<ssh_channel>, const ssh_failure&)>;

  // target: the ssh:// address (user, gateway, port are used); log_name starts every log line.
  ssh_session(asio::io_context& io, const address& target, ssh_options options, std::string log_name);
  ~ssh_session();
  ssh_session(const ssh_session&) = delete;
  ssh_session& operator=(const ssh_session&) = delete;

  // Opens a direct-tcpip channel to host:port as the gateway sees it; connects the session first if needed.
  // h runs later on the I/O context with the channel, or with nullptr and the reason.
  void open_channel(const std::string& host, std::uint16_t port, open_handler h);
  bool has_failed() const { return phase_ == phase::failed || phase_ == phase::closed; }
  // Drops everything: no open_handler runs any more; channels fail with operation_aborted.
  void close();
  const std::string& name() const { return name_; }  // user@gateway:port
  std::size_t channel_count() const { return channels_.size(); }

  static std::string session_key(const address& a);  // sessions are shared per user, gateway and port

 private:
  friend class ssh_channel;
  enum class phase { idle, connecting, handshake, authenticating, ready, failed, closed };
  struct pending_open {
    std::string host;
    std::uint16_t port = 0;
    open_handler handler;
  };

  void start();
  void deliver(open_handler h, std::shared_ptr<ssh_channel> channel, ssh_failure f);
  void on_connected();
  void schedule_retry();
  void retry_pending();
  bool step_setup();
  bool step_handshake();
  bool step_auth();
  bool step_open();
  bool choose_auth();
  std::string check_host_key();
  void arm_waits();
  void flush();
  std::error_code write_out();
  void on_tick();
  void arm_tick();
  void fail(ssh_failure f);
  void teardown();
  bool is_backlogged() const { return out_.size() - out_sent_ > out_high_water; }
  bool is_session_error(int rc) const;
  std::string last_error() const;
  static ssize_t on_send(int socket, const void* buffer, std::size_t length, int flags, void** abstract);
  static ssize_t on_recv(int socket, void* buffer, std::size_t length, int flags, void** abstract);

  static constexpr std::size_t out_high_water = 1u << 20;

  asio::io_context& io_;
  ssh_options options_;
  std::string log_name_;
  std::string user_, gateway_, name_;
  std::uint16_t port_;
  phase phase_ = phase::idle;
  asio::ip::tcp::socket socket_;
  asio::ip::tcp::resolver resolver_;
  asio::steady_timer tick_;
  std::chrono::steady_clock::time_point started_, last_input_;
  _LIBSSH2_SESSION* session_ = nullptr;
  _LIBSSH2_AGENT* agent_ = nullptr;
  libssh2_agent_publickey* agent_identity_ = nullptr;  // the agent's key being tried
  std::vector<std::string> key_files_;                 // readable identity files still to try
  bool use_agent_ = false;
  std::string auth_errors_;

  std::deque<pending_open> opens_;
  std::vector<std::shared_ptr<ssh_channel>> channels_;

  std::vector<std::byte> out_;  // encrypted bytes libssh2 sent, not yet written to the socket
  std::size_t out_sent_ = 0;
  bool retry_posted_ = false, retrying_ = false;
  bool read_waiting_ = false, write_waiting_ = false;
  bool input_drained_ = false;  // the socket had nothing more to read since the last readiness event
};

}  // namespace phoenix::overlay
