// overlay/transports/ssh_session.cpp — one SSH connection to a gateway: its TCP socket, the handshake, the host
// key check, authentication, and the rounds of libssh2 calls that move every channel of it (ssh_session.hpp);
// the channels themselves are in ssh_channel.cpp.
#include "overlay/transports/ssh_session.hpp"

#include <fcntl.h>
#include <libssh2.h>
#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "overlay/log.hpp"
#include "overlay/transports/ssh_known_hosts.hpp"
#include "overlay/transports/tcp_connect.hpp"

namespace phoenix::overlay {

namespace {

using clock = std::chrono::steady_clock;
constexpr std::size_t send_batch_bytes = 128 * 1024;  // output written during a retry round once this much waits

void init_libssh2_once() {
  static std::once_flag once;
  std::call_once(once, [] { libssh2_init(0); });
}

std::string home_dir() {
  if (const char* h = std::getenv("HOME"); h && *h) return h;
  if (const passwd* pw = ::getpwuid(::getuid())) return pw->pw_dir;
  return "/";
}

std::string expand_home(const std::string& path) {
  if (path == "~") return home_dir();
  if (path.rfind("~/", 0) == 0) return home_dir() + path.substr(1);
  return path;
}

std::string default_user() {
  if (const char* u = std::getenv("USER"); u && *u) return u;
  if (const passwd* pw = ::getpwuid(::getuid())) return pw->pw_name;
  return "root";
}

bool is_readable(const std::string& path) { return ::access(path.c_str(), R_OK) == 0; }

}  // namespace

// --- session -----------------------------------------------------------------------------------------------

std::string ssh_session::session_key(const address& a) {
  return (a.ssh_user.empty() ? default_user() : a.ssh_user) + "@" + a.ssh_gateway + ":" +
         std::to_string(a.ssh_port);
}

ssh_session::ssh_session(asio::io_context& io, const address& target, ssh_options options, std::string log_name)
    : io_(io),
      options_(std::move(options)),
      log_name_(std::move(log_name)),
      user_(target.ssh_user.empty() ? default_user() : target.ssh_user),
      gateway_(target.ssh_gateway),
      name_(session_key(target)),
      port_(target.ssh_port),
      socket_(io),
      resolver_(io),
      tick_(io) {}

ssh_session::~ssh_session() { teardown(); }

void ssh_session::open_channel(const std::string& host, std::uint16_t port, open_handler h) {
  if (has_failed()) return deliver(std::move(h), nullptr, {"SSH session to " + name_ + " has failed"});
  opens_.push_back(pending_open{host, port, std::move(h)});
  if (phase_ == phase::idle)
    start();
  else
    schedule_retry();
}

// Posted, and dropped if the session is closed by then (its owner is going away).
void ssh_session::deliver(open_handler h, std::shared_ptr<ssh_channel> channel, ssh_failure f) {
  asio::post(io_,
             [self = shared_from_this(), h = std::move(h), channel = std::move(channel), f = std::move(f)] {
               if (self->phase_ != phase::closed) h(channel, f);
             });
}

void ssh_session::start() {
  init_libssh2_once();
  phase_ = phase::connecting;
  started_ = clock::now();
  arm_tick();
  resolver_.async_resolve(
      gateway_, std::to_string(port_),
      [this, self = shared_from_this()](std::error_code ec, asio::ip::tcp::resolver::results_type results) {
        if (phase_ != phase::connecting) return;
        if (ec) return fail({"cannot resolve SSH gateway " + gateway_ + ": " + ec.message()});
        // Each address of the gateway gets part of the setup time (tcp_connect.hpp).
        std::vector<asio::ip::tcp::endpoint> endpoints(results.begin(), results.end());
        const auto each = std::chrono::duration_cast<std::chrono::milliseconds>(options_.setup_timeout) /
                          std::max<std::size_t>(1, std::min(endpoints.size(), max_connect_addresses));
        connect_first(io_, std::move(endpoints), each,
                      [this, self](std::optional<asio::ip::tcp::socket> s, const std::string& why) {
                        if (phase_ != phase::connecting) return;
                        if (!s) return fail({"cannot connect to SSH gateway " + name_ + ": " + why});
                        socket_ = std::move(*s);
                        on_connected();
                      });
      });
}

void ssh_session::on_connected() {
  std::error_code ignored;
  socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
  socket_.non_blocking(true, ignored);
  session_ = libssh2_session_init_ex(nullptr, nullptr, nullptr, this);
  if (!session_) return fail({"cannot create an SSH session (libssh2)"});
  // Every byte libssh2 sends goes through on_send into out_ (see the header: why it never returns EAGAIN).
  libssh2_session_callback_set(session_, LIBSSH2_CALLBACK_SEND, reinterpret_cast<void*>(&ssh_session::on_send));
  libssh2_session_callback_set(session_, LIBSSH2_CALLBACK_RECV, reinterpret_cast<void*>(&ssh_session::on_recv));
  libssh2_session_set_blocking(session_, 0);
  libssh2_keepalive_config(session_, 1, static_cast<unsigned>(options_.keepalive_interval.count()));
  phase_ = phase::handshake;
  last_input_ = clock::now();
  schedule_retry();
}

// Appends to out_; once a burst has put send_batch_bytes there, writes it out at once (so the gateway starts on
// those packets while the next are encrypted) instead of after the whole retry round. Smaller output waits for
// the end of the round, so that one write (and one wake-up of sshd) carries all of it. Errors are left to
// flush(), outside libssh2's call.
ssize_t ssh_session::on_send(int, const void* buffer, std::size_t length, int, void** abstract) {
  auto* self = static_cast<ssh_session*>(*abstract);
  const auto* p = static_cast<const std::byte*>(buffer);
  self->out_.insert(self->out_.end(), p, p + length);
  if (self->out_.size() - self->out_sent_ >= send_batch_bytes) self->write_out();
  return static_cast<ssize_t>(length);
}

// libssh2 reads until the socket says EAGAIN, and every channel read or write begins by reading: without this,
// a round trip would cost several recv calls that find nothing. Once a read has come back short (the socket had
// nothing more) or with EAGAIN, the socket counts as drained until the next readiness event, and reads until
// then report EAGAIN without a system call. Nothing is missed: data arriving meanwhile makes the next
// async_wait(wait_read) complete (Asio re-arms the descriptor when the wait starts).
ssize_t ssh_session::on_recv(int socket, void* buffer, std::size_t length, int flags, void** abstract) {
  auto* self = static_cast<ssh_session*>(*abstract);
  if (self->input_drained_) return -EAGAIN;
  const ssize_t n = ::recv(socket, buffer, length, flags);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) self->input_drained_ = true;
    return -errno;
  }
  if (static_cast<std::size_t>(n) < length) self->input_drained_ = true;
  return n;
}

void ssh_session::schedule_retry() {
  if (retry_posted_ || retrying_ || has_failed() || !session_) return;
  retry_posted_ = true;
  asio::post(io_, [self = shared_from_this()] {
    self->retry_posted_ = false;
    self->retry_pending();
  });
}

// Retries every pending libssh2 call, round after round while any progresses (what one call reads from the
// socket may be another channel's data, which no readiness event would announce again).
void ssh_session::retry_pending() {
  if (has_failed() || !session_ || retrying_) return;
  retrying_ = true;
  auto self = shared_from_this();
  int rounds = 0;
  for (bool progress = true; progress && rounds < 64 && !has_failed(); ++rounds) {
    progress = false;
    if (phase_ != phase::ready) {
      progress = step_setup();
    } else {
      progress = step_open();
      for (std::size_t i = 0; i < channels_.size() && !has_failed(); ++i) progress |= channels_[i]->step();
      std::erase_if(channels_, [](const auto& c) { return c->is_finished(); });
    }
    if (!has_failed()) flush();
  }
  retrying_ = false;
  if (has_failed()) return;
  if (rounds == 64) schedule_retry();  // more to do: after the other handlers
  arm_waits();
}

bool ssh_session::step_setup() {
  if (phase_ == phase::handshake) return step_handshake();
  if (phase_ == phase::authenticating) return step_auth();
  return false;
}

bool ssh_session::step_handshake() {
  const int rc = libssh2_session_handshake(session_, socket_.native_handle());
  if (rc == LIBSSH2_ERROR_EAGAIN) return false;
  if (rc) {
    fail({"SSH handshake with " + name_ + " failed: " + last_error()});
    return true;
  }
  if (auto refusal = check_host_key(); !refusal.empty()) {
    fail({refusal, true});
    return true;
  }
  if (!choose_auth()) return true;
  phase_ = phase::authenticating;
  return true;
}

// The gateway's key against known_hosts (ssh_known_hosts.hpp). Never skipped.
std::string ssh_session::check_host_key() {
  const std::string file =
      expand_home(options_.known_hosts.empty() ? "~/.ssh/known_hosts" : options_.known_hosts);
  return check_gateway_host_key(session_, port_ == 22 ? gateway_ : "[" + gateway_ + "]:" + std::to_string(port_),
                                file, options_.accept_new_host_keys, log_name_);
}

// Identity files first (the configured one, or OpenSSH's defaults), then the agent.
bool ssh_session::choose_auth() {
  const std::vector<std::string> candidates =
      options_.identity_file.empty()
          ? std::vector<std::string>{expand_home("~/.ssh/id_ed25519"), expand_home("~/.ssh/id_rsa")}
          : std::vector<std::string>{expand_home(options_.identity_file)};
  for (const auto& f : candidates)
    if (is_readable(f)) key_files_.push_back(f);
  const char* agent_socket = std::getenv("SSH_AUTH_SOCK");
  use_agent_ = agent_socket && *agent_socket;
  if (key_files_.empty() && !use_agent_) {
    fail({"no SSH identity for " + name_ + ": " + candidates.front() +
              " is not readable and SSH_AUTH_SOCK is not set",
          true});
    return false;
  }
  return true;
}

bool ssh_session::step_auth() {
  while (!key_files_.empty()) {
    const std::string& file = key_files_.front();
    const int rc = libssh2_userauth_publickey_fromfile_ex(
        session_, user_.c_str(), static_cast<unsigned>(user_.size()), nullptr, file.c_str(), "");
    if (rc == LIBSSH2_ERROR_EAGAIN) return false;
    if (rc == 0) {
      logger()->debug("{}: authenticated to {} with {}", log_name_, name_, file);
      phase_ = phase::ready;
      return true;
    }
    if (is_session_error(rc) && rc != LIBSSH2_ERROR_FILE && rc != LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED) {
      fail({"SSH authentication to " + name_ + " failed: " + last_error()});
      return true;
    }
    auth_errors_ += (auth_errors_.empty() ? "" : "; ") + file + ": " + last_error();
    key_files_.erase(key_files_.begin());
  }
  if (use_agent_) {
    if (!agent_) {
      agent_ = libssh2_agent_init(session_);
      // Local, short exchanges with the agent: these block briefly, like OpenSSH's own.
      if (!agent_ || libssh2_agent_connect(agent_) != 0 || libssh2_agent_list_identities(agent_) != 0) {
        auth_errors_ += (auth_errors_.empty() ? "" : "; ") + std::string("ssh-agent: ") + last_error();
        use_agent_ = false;
      } else if (libssh2_agent_get_identity(agent_, &agent_identity_, nullptr) != 0) {
        agent_identity_ = nullptr;
      }
    }
    while (use_agent_ && agent_identity_) {
      libssh2_agent_publickey* id = agent_identity_;
      const int rc = libssh2_agent_userauth(agent_, user_.c_str(), id);
      if (rc == LIBSSH2_ERROR_EAGAIN) return false;
      if (rc == 0) {
        logger()->debug("{}: authenticated to {} with an ssh-agent key", log_name_, name_);
        phase_ = phase::ready;
        return true;
      }
      libssh2_agent_publickey* next = nullptr;
      agent_identity_ = libssh2_agent_get_identity(agent_, &next, id) == 0 ? next : nullptr;
      if (!agent_identity_)
        auth_errors_ += (auth_errors_.empty() ? "" : "; ") + std::string("no ssh-agent key accepted");
    }
  }
  fail({"SSH authentication as " + user_ + " to " + gateway_ + ":" + std::to_string(port_) + " failed (" +
            auth_errors_ + ")",
        true});
  return true;
}

// Channel opens share one state in libssh2's session: one at a time, retried until done.
bool ssh_session::step_open() {
  if (opens_.empty()) return false;
  pending_open& o = opens_.front();
  LIBSSH2_CHANNEL* ch = libssh2_channel_direct_tcpip_ex(session_, o.host.c_str(), o.port, "127.0.0.1", 0);
  if (!ch) {
    const int rc = libssh2_session_last_errno(session_);
    if (rc == LIBSSH2_ERROR_EAGAIN) return false;
    if (is_session_error(rc)) {
      fail({"SSH connection to " + name_ + " failed: " + last_error()});
      return true;
    }
    const std::string why = last_error();
    ssh_failure f{"SSH gateway " + name_ + " cannot open a channel to " + o.host + ":" +
                      std::to_string(o.port) + ": " + why,
                  why.find("prohibited") != std::string::npos};  // AllowTcpForwarding no: configuration
    deliver(std::move(o.handler), nullptr, f);
    opens_.pop_front();
    return true;
  }
  auto channel = std::make_shared<ssh_channel>(*this, ch, o.host + ":" + std::to_string(o.port));
  channels_.push_back(channel);
  deliver(std::move(o.handler), channel, {});
  opens_.pop_front();
  return true;
}

bool ssh_session::is_session_error(int rc) const {
  switch (rc) {
    case LIBSSH2_ERROR_CHANNEL_OUTOFORDER:
    case LIBSSH2_ERROR_CHANNEL_FAILURE:
    case LIBSSH2_ERROR_CHANNEL_REQUEST_DENIED:
    case LIBSSH2_ERROR_CHANNEL_UNKNOWN:
    case LIBSSH2_ERROR_CHANNEL_WINDOW_EXCEEDED:
    case LIBSSH2_ERROR_CHANNEL_PACKET_EXCEEDED:
    case LIBSSH2_ERROR_CHANNEL_CLOSED:
    case LIBSSH2_ERROR_CHANNEL_EOF_SENT:
    case LIBSSH2_ERROR_CHANNEL_WINDOW_FULL:
    case LIBSSH2_ERROR_REQUEST_DENIED:
    case LIBSSH2_ERROR_EAGAIN:
      return false;
    default:
      return true;
  }
}

std::string ssh_session::last_error() const {
  if (!session_) return "no session";
  char* message = nullptr;
  int len = 0;
  const int rc = libssh2_session_last_error(session_, &message, &len, 0);
  return (message && len > 0 ? std::string(message, static_cast<std::size_t>(len)) : std::string("error")) +
         " (" + std::to_string(rc) + ")";
}

// Waits for input while a pending call waits for it (every such call read the socket until EAGAIN, so a
// wake-up always finds a reader), and for writability while output is buffered.
void ssh_session::arm_waits() {
  if (!session_ || has_failed()) return;
  bool wants_input = phase_ != phase::ready || !opens_.empty();
  for (const auto& c : channels_) wants_input = wants_input || c->wants_input();
  // Every call that returned EAGAIN waits for input (libssh2_session_block_directions says INBOUND: our send
  // callback never blocks, so OUTBOUND never comes from libssh2; output waits on out_ below). A pending call
  // that got 0 without EAGAIN is waited for the same way.
  if (wants_input && !read_waiting_) {
    read_waiting_ = true;
    socket_.async_wait(asio::socket_base::wait_read, [this, self = shared_from_this()](std::error_code ec) {
      read_waiting_ = false;
      if (ec || has_failed()) return;
      input_drained_ = false;
      last_input_ = clock::now();
      retry_pending();
    });
  }
  if (out_sent_ < out_.size() && !write_waiting_) {
    write_waiting_ = true;
    socket_.async_wait(asio::socket_base::wait_write, [this, self = shared_from_this()](std::error_code ec) {
      write_waiting_ = false;
      if (ec || has_failed()) return;
      const bool was_backlogged = is_backlogged();
      flush();
      if (was_backlogged && !is_backlogged())
        retry_pending();  // paused channel writes may go on
      else
        arm_waits();
    });
  }
}

// Writes out_ until the socket takes no more; returns the socket's error, if any (would_block is none).
std::error_code ssh_session::write_out() {
  while (out_sent_ < out_.size()) {
    std::error_code ec;
    const std::size_t n = socket_.send(asio::buffer(out_.data() + out_sent_, out_.size() - out_sent_), 0, ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) break;
    if (ec) return ec;
    out_sent_ += n;
  }
  if (out_sent_ == out_.size()) {
    out_.clear();
    out_sent_ = 0;
  } else if (out_sent_ > (1u << 16) && out_sent_ * 2 > out_.size()) {
    out_.erase(out_.begin(), out_.begin() + static_cast<std::ptrdiff_t>(out_sent_));
    out_sent_ = 0;
  }
  return {};
}

void ssh_session::flush() {
  if (const auto ec = write_out()) fail({"SSH connection to " + name_ + " failed: " + ec.message()});
}

void ssh_session::arm_tick() {
  tick_.expires_after(std::chrono::seconds(1));
  tick_.async_wait([this, self = shared_from_this()](std::error_code ec) {
    if (!ec && !has_failed()) on_tick();
  });
}

// Once a second: the setup deadline; keepalives (libssh2 sends one when due, every keepalive_interval); a
// gateway silent for dead_after while we wait for it is dead (its replies to keepalives would have come).
void ssh_session::on_tick() {
  const auto now = clock::now();
  if (phase_ != phase::ready) {
    if (now - started_ > options_.setup_timeout) return fail({"SSH connection to " + name_ + " timed out"});
  } else if (!read_waiting_ || channels_.empty()) {
    last_input_ = now;  // not listening: silence means nothing
  } else if (now - last_input_ > options_.dead_after) {
    return fail({"SSH gateway " + name_ + " sent nothing for " +
                 std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - last_input_).count()) +
                 " s (keepalives unanswered)"});
  } else {
    int next = 0;
    const int rc = libssh2_keepalive_send(session_, &next);
    if (rc && rc != LIBSSH2_ERROR_EAGAIN)
      return fail({"SSH connection to " + name_ + " failed: " + last_error()});
    flush();
    arm_waits();
  }
  arm_tick();
}

void ssh_session::fail(ssh_failure f) {
  if (has_failed()) return;
  logger()->log(f.refused ? spdlog::level::debug : spdlog::level::info, "{}: {}", log_name_, f.text);
  phase_ = phase::failed;
  for (auto& o : opens_) deliver(std::move(o.handler), nullptr, f);
  opens_.clear();
  teardown();
}

void ssh_session::close() {
  if (phase_ == phase::closed) return;
  phase_ = phase::closed;
  opens_.clear();
  teardown();
}

// Frees libssh2's session without waiting for the gateway: the socket is shut down first, so every call
// libssh2 makes while freeing fails at once instead of waiting for input (our send callback never blocks).
void ssh_session::teardown() {
  std::error_code ignored;
  tick_.cancel();
  resolver_.cancel();
  socket_.shutdown(asio::socket_base::shutdown_both, ignored);
  input_drained_ = false;  // every read now fails at once: libssh2 stops waiting
  for (auto& c : channels_) c->detach();
  channels_.clear();
  if (session_) {
    if (agent_) {
      libssh2_agent_disconnect(agent_);
      libssh2_agent_free(agent_);
      agent_ = nullptr;
    }
    for (int i = 0; i < 100 && libssh2_session_free(session_) == LIBSSH2_ERROR_EAGAIN; ++i) {
    }
    session_ = nullptr;
  }
  socket_.close(ignored);
  out_.clear();
  out_sent_ = 0;
}

}  // namespace phoenix::overlay
