// overlay/transports/ssh_channel.cpp — one direct-tcpip channel of an SSH session: a byte stream whose reads
// and writes move when the session's rounds of libssh2 calls step them (ssh_session.hpp).
#include <libssh2.h>

#include <algorithm>
#include <cstring>

#include "overlay/transports/ssh_session.hpp"

namespace phoenix::overlay {

namespace {
constexpr std::size_t stage_bytes = 64 * 1024;     // coalesces small frames; libssh2 cuts packets of 32 KiB
constexpr std::size_t in_place_bytes = 16 * 1024;  // a buffer at least this large is written without a copy
}  // namespace

ssh_channel::ssh_channel(ssh_session& session, LIBSSH2_CHANNEL* channel, std::string target)
    : session_(&session),
      executor_(session.io_.get_executor()),
      channel_(channel),
      target_(std::move(target)) {}

ssh_channel::~ssh_channel() = default;  // the session frees the libssh2 channel (close() or its own teardown)

void ssh_channel::complete(handler& h, std::error_code ec, std::size_t n) {
  if (!h) return;
  asio::post(executor_, [h = std::move(h), ec, n] { h(ec, n); });
  h = nullptr;
}

void ssh_channel::async_read(std::span<std::byte> into, handler h) {
  read_into_ = into;
  read_handler_ = std::move(h);
  if (error_ || closing_ || !session_)
    return complete(read_handler_, error_ ? error_ : asio::error::operation_aborted, 0);
  session_->schedule_retry();
}

void ssh_channel::async_write(std::span<const asio::const_buffer> buffers, handler h) {
  write_buffers_.assign(buffers.begin(), buffers.end());
  write_index_ = write_offset_ = write_total_ = 0;
  stage_.clear();
  piece_ = {};
  piece_sent_ = 0;
  write_handler_ = std::move(h);
  if (error_ || closing_ || !session_)
    return complete(write_handler_, error_ ? error_ : asio::error::operation_aborted, 0);
  session_->schedule_retry();
}

void ssh_channel::close() {
  if (closing_) return;
  closing_ = true;
  complete(read_handler_, asio::error::operation_aborted, 0);
  complete(write_handler_, asio::error::operation_aborted, 0);
  if (session_) session_->schedule_retry();  // frees the libssh2 channel in retry_pending
}

void ssh_channel::fail(std::error_code ec) {
  if (!error_) error_ = ec;
  complete(read_handler_, error_, 0);
  complete(write_handler_, error_, 0);
}

void ssh_channel::detach() {
  session_ = nullptr;
  channel_ = nullptr;
  fail(closing_ ? std::error_code(asio::error::operation_aborted)
                : std::error_code(asio::error::connection_reset));
}

bool ssh_channel::wants_input() const {
  if (!channel_) return false;
  if (closing_) return true;
  if (error_) return false;
  return read_handler_ || (write_handler_ && !session_->is_backlogged());
}

bool ssh_channel::step() {
  if (!channel_) return false;
  if (closing_) {
    // Sends CLOSE and waits for the peer's (EAGAIN until then); the session frees the rest with itself.
    const int rc = libssh2_channel_free(channel_);
    if (rc == LIBSSH2_ERROR_EAGAIN) return false;
    channel_ = nullptr;
    return true;
  }
  if (error_) return false;
  bool progress = step_write();
  if (!error_) progress |= step_read();
  return progress;
}

// The next piece to hand libssh2: the rest of a large buffer in place (its bytes stay valid and unchanged
// until the write completes, so an EAGAIN retry sees the same memory), or small frames coalesced into the stage,
// so that a burst of small frames makes full SSH packets instead of one packet each.
void ssh_channel::next_piece() {
  stage_.clear();
  piece_sent_ = 0;
  while (write_index_ < write_buffers_.size() && stage_.size() < stage_bytes) {
    const auto& b = write_buffers_[write_index_];
    const auto* p = static_cast<const std::byte*>(b.data()) + write_offset_;
    const std::size_t left = b.size() - write_offset_;
    if (left >= in_place_bytes) {
      if (!stage_.empty()) break;  // what is staged goes first
      piece_ = {p, left};
      ++write_index_, write_offset_ = 0;
      return;
    }
    const std::size_t n = std::min(left, stage_bytes - stage_.size());
    stage_.insert(stage_.end(), p, p + n);
    write_offset_ += n;
    if (write_offset_ == b.size()) ++write_index_, write_offset_ = 0;
  }
  piece_ = stage_;
}

bool ssh_channel::step_write() {
  bool progress = false;
  while (write_handler_) {
    if (piece_sent_ == piece_.size()) {
      write_total_ += piece_.size();
      next_piece();
      if (piece_.empty()) {
        complete(write_handler_, {}, write_total_);
        return true;
      }
    }
    if (session_->is_backlogged()) break;  // the flush of the session's output resumes us
    // After EAGAIN this is called again with exactly the same pointer and length (libssh2's rule).
    const auto rc = libssh2_channel_write(channel_, reinterpret_cast<const char*>(piece_.data() + piece_sent_),
                                          piece_.size() - piece_sent_);
    if (rc == LIBSSH2_ERROR_EAGAIN || rc == 0) break;  // the SSH window is full: wait for an adjustment
    if (rc < 0) {
      if (session_->is_session_error(static_cast<int>(rc))) {
        session_->fail({"SSH connection to " + session_->name() + " failed: " + session_->last_error()});
      } else {
        fail(asio::error::connection_reset);
      }
      return true;
    }
    piece_sent_ += static_cast<std::size_t>(rc);
    progress = true;
  }
  return progress;
}

bool ssh_channel::step_read() {
  if (!read_handler_) return false;
  const auto rc = libssh2_channel_read(channel_, reinterpret_cast<char*>(read_into_.data()), read_into_.size());
  if (rc > 0) {
    complete(read_handler_, {}, static_cast<std::size_t>(rc));
    return true;
  }
  if (rc == LIBSSH2_ERROR_EAGAIN) return false;
  if (rc == 0) {
    if (!libssh2_channel_eof(channel_)) return false;
    fail(asio::error::eof);
    return true;
  }
  if (session_->is_session_error(static_cast<int>(rc))) {
    session_->fail({"SSH connection to " + session_->name() + " failed: " + session_->last_error()});
  } else {
    fail(asio::error::connection_reset);
  }
  return true;
}

}  // namespace phoenix::overlay
