// connection.hpp — one byte-stream connection to a neighbour: handshake, framing, one write in flight.
//
// A connection owns its stream (a TCP socket, or a local socket pair for in-process links with the same
// framing), lives by shared_from_this, and runs entirely on its node's I/O context (whichever thread holds the
// node's progress token): no locks. It
//   1. exchanges HELLO and AUTH (handshake.hpp) and refuses a peer with another version, L, key or the same
//      role, sending a REFUSE frame so that both ends log the reason; until then it buffers at most
//      handshake_buffer_bytes for the peer;
//   2. then checks every frame's tag (frame_protection.hpp), reads frames, checks link sequence numbers against
//      the neighbour's link_session and hands data, acks and routing frames to its owner (the overlay);
//   3. writes control frames first, then data packets pulled from the session, gathering many frames into one
//      write, with exactly one write in flight; every data frame carries the current cumulative ack.
//
// A malformed frame, a frame whose tag does not verify, a sequence gap or an ack for something never sent
// closes the connection; the owner logs
// it and redials if it dialled. stop() is idempotent and after it the owner hears nothing more.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <asio.hpp>

#include "overlay/links/frame.hpp"
#include "overlay/links/frame_protection.hpp"
#include "overlay/links/handshake.hpp"
#include "overlay/links/link_session.hpp"
#include "overlay/packet.hpp"

namespace phoenix::overlay {

class connection;

// Where a new connection to a peer takes up the link session this node already has with it.
struct link_resume {
  std::uint64_t ack = 0;                      // the highest sequence number received in order (0 if none)
  std::optional<secret_bytes> session_secret;  // the session's secret, if there is a session
};

// What a connection reports to the overlay that owns it. Called on the I/O context only.
class connection_owner {
 public:
  virtual ~connection_owner() = default;
  // The peer's HELLO arrived: how far this node received from that peer, and the session's secret.
  virtual link_resume resume_for(node_id peer) = 0;
  virtual void on_connection_up(const std::shared_ptr<connection>& c) = 0;
  virtual void on_connection_down(const std::shared_ptr<connection>& c, const std::string& reason) = 0;
  virtual void on_data(connection& c, const data_head& head, phoenix::Bytes body) = 0;
  // Acknowledged packets left the session: `bytes` of memory are free again (for the node's bound).
  virtual void on_freed(connection& c, std::uint64_t bytes) = 0;
  virtual void on_control(connection& c, frame_type type, std::span<const std::byte> payload) = 0;
  // Every frame of one read was dispatched (or the connection failed among them): what they changed can go
  // out together, in one frame per neighbour instead of one per frame that arrived.
  virtual void on_frames_done(connection&) {}
};

struct connection_params {
  std::vector<std::byte> cluster_key;
  std::uint64_t space_size = 0;
  node_id self = 0;
  std::string name;
  std::uint32_t max_payload = 0;         // after authentication
  std::uint64_t ack_every_bytes = 1 << 20;  // send an ack frame after this many unacknowledged bytes
  // Otherwise at most this late. Not shorter: the timer is armed again behind every burst of traffic, and on a
  // virtual machine arming and firing a short timer costs microseconds each (docs/overlay.md, "Reliable links").
  std::chrono::microseconds ack_delay{4000};
  std::chrono::milliseconds handshake_timeout{5000};  // one round trip; short, since it holds a cap slot
  std::uint64_t window_bytes = 8ull << 20;  // announced: what this node accepts unacknowledged
  bool ignore_peer_window = false;          // fault injection (tests): send beyond the window the peer announced
  protection_mode protection = protection_mode::integrity;  // the link takes the stronger of both ends'
};

class connection : public std::enable_shared_from_this<connection> {
 public:
  enum class state { handshake, up, closing, closed };  // closing: flushing a REFUSE frame

  connection(connection_owner& owner, const connection_params& params, bool outbound, std::string remote);
  virtual ~connection() = default;
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  void start();  // send HELLO and start reading
  void stop();   // close the stream and cancel timers; the owner is not called any more

  // Data: the session to pull packets from and to check incoming sequence numbers against. Set by the owner
  // once the link is up (and cleared when it gives the session to another connection).
  void attach(link_session* session) { session_ = session; }
  link_session* session() const { return session_; }
  void send_control(std::vector<std::byte> frame);  // a whole frame (header + payload)
  void send_pending();                                       // the session has something new to send
  // This node is going for good: tell the peer how far it received (the goodbye frame) and accept no data
  // after it, so that the peer sends everything beyond another way and nothing is both kept here and resent
  // (normally nothing comes: the peer acknowledged `leaving` before and routes nothing more to this node).
  void send_goodbye();

  state current_state() const { return state_; }
  bool is_up() const { return state_ == state::up; }
  bool is_outbound() const { return outbound_; }
  const std::string& remote() const { return remote_; }
  node_id peer() const { return peer_; }
  const std::string& peer_name() const { return peer_name_; }
  std::uint64_t peer_resume_ack() const { return hs_.peer_resume_ack(); }
  std::uint64_t resume_ack_sent() const { return resume_ack_sent_; }  // ours, in the AUTH we sent
  // Once up: the mode protecting this connection's frames, the secret of the link session it began (kept by
  // the owner for later connections), and whether the peer proved it holds `secret` (handshake.hpp).
  protection_mode protection() const { return hs_.keys().mode; }
  const secret_bytes& session_secret() const { return hs_.keys().session_secret; }
  bool proves_continuity(const secret_bytes& secret) const { return hs_.proves_continuity(secret); }
  // The window to send within on this connection: the least of this node's and the peer's.
  std::uint64_t send_window() const;
  std::uint64_t bytes_queued() const;
  bool was_refused() const { return refused_; }  // the handshake failed: a key, L or version mismatch
  bool was_forged() const { return forged_; }    // closed for a frame whose tag did not verify

  // Direct reads. While an application thread spins waiting for a message (phoenix/progress.hpp), it reads
  // the link the message will likely come by itself, with non-blocking reads, instead of asking epoll_wait
  // which sockets are ready and then reading: on a virtual machine that saves a system call of 1-2 us on the
  // way of every message (bench/socket_pingpong --spin-read). Only socket connections can.
  //   begin_direct()  takes reading from the event loop (cancelling its read in flight) and reports whether
  //                   this connection reads directly now or as soon as that cancelled read has returned;
  //   read_direct()   one non-blocking read, handled like any read; the bytes read (0: nothing, or not yet),
  //                   or direct_reads_stopped once the read began a large body: the event loop reads the
  //                   rest, since non-blocking reads repeated on a socket the sender is filling contend for
  //                   the socket's lock (docs/overlay.md, "Direct reads");
  //   end_direct()    gives reading back to the event loop by a posted handler; the progress engine calls it
  //                   only when it is about to run the loop without reading this link directly, and a
  //                   begin_direct() before the handler ran takes the link back at no cost.
  static constexpr std::size_t direct_reads_stopped = std::numeric_limits<std::size_t>::max();
  bool begin_direct();
  std::size_t read_direct();
  void end_direct();

 protected:
  using read_handler = std::function<void(std::error_code, std::size_t)>;
  // The stream, provided by the concrete connection type.
  virtual void stream_read(std::span<std::byte> into, read_handler h) = 0;
  // Writes all of `buffers`, which stay valid and unchanged until h runs.
  virtual void stream_write(std::span<const asio::const_buffer> buffers, read_handler h) = 0;
  virtual void stream_close() = 0;
  virtual asio::any_io_executor executor() = 0;
  // Direct reads (see begin_direct): whether the stream supports them; abandoning the read in flight (its
  // handler then runs with operation_aborted, or with the bytes it had read if it was complete already); one
  // non-blocking read (asio::error::would_block when nothing is there).
  virtual bool stream_can_read_direct() const { return false; }
  virtual void stream_cancel_read() {}
  virtual std::size_t stream_try_read(std::span<std::byte>, std::error_code& ec) {
    ec = asio::error::operation_not_supported;
    return 0;
  }
  // One non-blocking write, with no write in flight (asio::error::would_block when the stream takes nothing);
  // operation_not_supported where the stream has none (then every write goes through stream_write).
  virtual std::size_t stream_try_write(std::span<const std::byte>, std::error_code& ec) {
    ec = asio::error::operation_not_supported;
    return 0;
  }

 private:
  void read_more();
  void on_read(std::error_code ec, std::size_t n);
  std::span<std::byte> read_buffer();  // where the next read goes: decoder_.prepare(), at most max_read_bytes
  void fail_read(std::error_code ec);
  bool take_read(std::size_t n);  // n bytes arrived in read_buffer(): decode and dispatch them
  bool dispatch_all();             // every whole frame buffered; false if the connection failed or closes
  bool dispatch(frame_view& f);
  bool verify(const frame_view& f);  // the frame's tag, when frames are protected
  void check_large_arrived();        // feed what arrived of a large frame to its tag check
  void seal_control(std::vector<std::byte>& frame);  // append the tag to a control frame about to be written
  bool on_handshake_frame(frame_view& f);
  bool on_data_frame(frame_view& f);
  void write_more();
  bool write_large_slices();
  std::span<const std::byte> next_large_slice();
  void seal_large_slice();
  void on_written(std::error_code ec, std::size_t n);
  void note_received(std::size_t bytes);
  bool handle_ack(std::uint64_t ack);
  void fail(const std::string& reason);
  void refuse(const refusal& r);

  connection_owner& owner_;
  connection_params params_;
  const bool outbound_;
  const std::string remote_;
  state state_ = state::handshake;
  bool refused_ = false;
  bool forged_ = false;
  bool goodbye_sent_ = false;
  handshake hs_;
  frame_protection protection_;  // off until the peer's AUTH verified
  std::size_t large_checked_ = 0;  // bytes of the large frame in progress already fed to its tag check
  std::uint64_t resume_ack_sent_ = 0;
  node_id peer_ = 0;
  std::string peer_name_;
  frame_decoder decoder_;
  std::size_t read_capacity_ = 0;  // the size of the buffer given to the read in flight
  // Who reads: the event loop (an async read in flight, or about to be started by a posted read_more), or,
  // while direct_wanted_, the spinning thread by read_direct() once no async read is in flight any more.
  enum class async_read { none, in_flight, cancelled };
  async_read async_read_ = async_read::none;
  bool direct_wanted_ = false;
  bool handback_posted_ = false;
  link_session* session_ = nullptr;

  // Writing: control frames go first; one write in flight.
  std::deque<std::vector<std::byte>> control_;
  bool writing_ = false;
  std::size_t control_in_write_ = 0;
  std::uint64_t last_seq_in_write_ = 0;
  std::vector<std::array<std::byte, frame_header_bytes + data_head_bytes>> heads_;
  std::vector<frame_tag> tags_;  // the data frames' tags of the write in flight
  // A large data frame is written slice by slice, its tag (when frames are protected) computed over each slice
  // once that slice's write is on its way (write_more): the body not written yet, the frame's sequence number,
  // and the slice in the write.
  std::span<const std::byte> large_rest_;
  std::uint64_t large_seq_ = 0;
  std::span<const std::byte> large_slice_;
  // The tag of a large frame, which the write after its last slice begins with, and where that tag stays
  // while that write is in flight.
  std::optional<frame_tag> pending_tag_;
  frame_tag tag_in_write_{};
  std::vector<asio::const_buffer> iov_;
  std::unique_ptr<asio::steady_timer> ack_timer_;
  bool ack_timer_armed_ = false;
  std::unique_ptr<asio::steady_timer> handshake_timer_;
};

// A connection over any Asio stream socket (tcp::socket, local::stream_protocol::socket).
template <class Socket>
class socket_connection final : public connection {
 public:
  socket_connection(connection_owner& owner, const connection_params& params, bool outbound, std::string remote,
                    Socket socket)
      : connection(owner, params, outbound, std::move(remote)), socket_(std::move(socket)) {}

 protected:
  void stream_read(std::span<std::byte> into, read_handler h) override {
    socket_.async_read_some(asio::buffer(into.data(), into.size()),
                            asio::bind_cancellation_slot(read_cancel_.slot(), std::move(h)));
  }
  void stream_write(std::span<const asio::const_buffer> buffers, read_handler h) override {
    // asio::transfer_all() hands the socket at most 64 KiB per write_some, so a 16 MiB message would cost 256
    // sendmsg calls, each waiting for the receiver to drain the last; the socket takes as much as it can.
    asio::async_write(socket_, buffers, [](std::error_code ec, std::size_t) -> std::size_t {
      return ec ? 0 : std::numeric_limits<std::size_t>::max();
    }, std::move(h));
  }
  void stream_close() override {
    std::error_code ignored;
    socket_.shutdown(Socket::shutdown_both, ignored);
    socket_.close(ignored);
  }
  asio::any_io_executor executor() override { return socket_.get_executor(); }
  bool stream_can_read_direct() const override { return true; }
  void stream_cancel_read() override { read_cancel_.emit(asio::cancellation_type::terminal); }
  std::size_t stream_try_read(std::span<std::byte> into, std::error_code& ec) override {
    if (!socket_.non_blocking()) {
      socket_.non_blocking(true, ec);  // for read_some only: Asio's own operations do not depend on it
      if (ec) return 0;
    }
    return socket_.read_some(asio::buffer(into.data(), into.size()), ec);
  }
  std::size_t stream_try_write(std::span<const std::byte> from, std::error_code& ec) override {
    if (!socket_.non_blocking()) {
      socket_.non_blocking(true, ec);
      if (ec) return 0;
    }
    return socket_.write_some(asio::buffer(from.data(), from.size()), ec);
  }

 private:
  Socket socket_;
  asio::cancellation_signal read_cancel_;
};

using tcp_connection = socket_connection<asio::ip::tcp::socket>;
using local_connection = socket_connection<asio::local::stream_protocol::socket>;

}  // namespace phoenix::overlay
