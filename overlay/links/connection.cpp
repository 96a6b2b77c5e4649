#include "overlay/links/connection.hpp"

#include <spdlog/spdlog.h>

#include "overlay/log.hpp"

namespace phoenix::overlay {

namespace {
constexpr std::size_t max_frames_per_write = 64;
constexpr std::uint64_t max_bytes_per_write = 4u << 20;
// One read takes at most this much, even when a large body could take more: while a large message streams in
// over loopback, reads of 32-64 KiB keep the sender's pipeline full (the receiver gives the socket back and
// opens the window after every skb or two), where reads of whatever has arrived hold the sender back
// (docs/overlay.md, "Reliable links"; bench/README.md, the socket floor).
constexpr std::size_t max_read_bytes = 64u << 10;
// A data frame with at least this much body is written in slices of at most large_slice_bytes. A slice the
// socket takes at once is followed by the next in the same thread, without waiting for the event loop (which a
// spinning receiver runs only every few looks); with protection on, the tag takes in each slice while the
// socket and the receiver work on it, and follows the last slice in the next write.
constexpr std::size_t large_body_bytes = 64u << 10;
constexpr std::size_t large_slice_bytes = 512u << 10;
}  // namespace

connection::connection(connection_owner& owner, const connection_params& params, bool outbound, std::string remote)
    : owner_(owner),
      params_(params),
      outbound_(outbound),
      remote_(std::move(remote)),
      hs_(params.cluster_key, params.space_size, params.self, params.name,
          outbound ? link_role::dialler : link_role::acceptor, params.protection, protocol_version,
          params.window_bytes),
      decoder_(max_handshake_payload, handshake_buffer_bytes) {}

void connection::start() {
  ack_timer_ = std::make_unique<asio::steady_timer>(executor());
  handshake_timer_ = std::make_unique<asio::steady_timer>(executor());
  handshake_timer_->expires_after(params_.handshake_timeout);
  handshake_timer_->async_wait([self = shared_from_this()](std::error_code ec) {
    if (!ec && self->state_ == state::handshake) self->fail("handshake timed out");
  });
  send_control(make_control_frame(frame_type::hello, hs_.hello_payload()));
  read_more();
}

void connection::stop() {
  if (state_ == state::closed) return;
  state_ = state::closed;
  session_ = nullptr;
  if (ack_timer_) ack_timer_->cancel();
  if (handshake_timer_) handshake_timer_->cancel();
  stream_close();
}

std::uint64_t connection::send_window() const {
  if (params_.ignore_peer_window || !hs_.has_peer_hello()) return params_.window_bytes;
  return std::min(params_.window_bytes, hs_.peer().window_bytes);
}

std::uint64_t connection::bytes_queued() const {
  std::uint64_t n = 0;
  for (const auto& f : control_) n += f.size();
  return n + (session_ ? session_->bytes_held() : 0);
}

// --- reading ------------------------------------------------------------------------------------------------

void connection::read_more() {
  if (state_ == state::closed || state_ == state::closing) return;
  if (direct_wanted_ || async_read_ != async_read::none) return;  // the spinning thread reads, or one is on
  const auto into = read_buffer();
  read_capacity_ = into.size();
  async_read_ = async_read::in_flight;
  stream_read(into, [self = shared_from_this()](std::error_code ec, std::size_t n) {
    self->on_read(ec, n);
  });
}

void connection::on_read(std::error_code ec, std::size_t n) {
  const bool cancelled = async_read_ == async_read::cancelled;
  async_read_ = async_read::none;
  if (state_ == state::closed || state_ == state::closing) return;
  if (cancelled && ec == asio::error::operation_aborted) {
    read_more();  // begin_direct() cancelled it: the spinning thread reads now, or, if it stopped, the loop
    return;
  }
  if (ec) return fail_read(ec);
  if (!take_read(n)) return;
  // A short read emptied the socket, so a read started now would find nothing: a wasted system call (about a
  // microsecond on a virtual machine) between the message just delivered and the thread waiting for it. The
  // next read starts in a handler of its own instead, after the receiving thread, which asks after every
  // handler, has taken its message (phoenix/progress.hpp).
  if (n < read_capacity_) {
    asio::post(executor(), [self = shared_from_this()] { self->read_more(); });
  } else {
    read_more();
  }
}

std::span<std::byte> connection::read_buffer() {
  const auto into = decoder_.prepare();
  return into.first(std::min(into.size(), max_read_bytes));
}

void connection::fail_read(std::error_code ec) { fail(ec == asio::error::eof ? "closed by peer" : ec.message()); }

bool connection::take_read(std::size_t n) {
  decoder_.commit(n);
  check_large_arrived();
  const bool ok = dispatch_all();
  owner_.on_frames_done(*this);
  return ok;
}

bool connection::dispatch_all() {
  frame_view f;
  for (;;) {
    const auto st = decoder_.next(f);
    if (st == frame_decoder::status::need_more) {
      check_large_arrived();  // a large frame may have begun with what was buffered
      return true;
    }
    if (st == frame_decoder::status::error) {
      fail(std::string("protocol error: ") + to_string(decoder_.error()));
      return false;
    }
    if (!dispatch(f) || state_ == state::closed || state_ == state::closing) return false;
  }
}

// --- direct reads ---------------------------------------------------------------------------------------------

bool connection::begin_direct() {
  if (state_ != state::up || !stream_can_read_direct()) return false;
  direct_wanted_ = true;
  if (async_read_ == async_read::in_flight) {
    async_read_ = async_read::cancelled;
    stream_cancel_read();
  }
  return true;
}

std::size_t connection::read_direct() {
  if (!direct_wanted_) return direct_reads_stopped;
  if (async_read_ != async_read::none || state_ != state::up) return 0;
  std::error_code ec;
  const std::size_t n = stream_try_read(read_buffer(), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) return 0;
  if (ec) {
    fail_read(ec);
    return 0;
  }
  if (!take_read(n)) return n;
  if (decoder_.large_in_progress() && direct_wanted_) {
    direct_wanted_ = false;  // the event loop reads the rest of this body
    read_more();
  }
  return n;
}

void connection::end_direct() {
  if (!direct_wanted_) return;
  direct_wanted_ = false;
  if (async_read_ != async_read::none || handback_posted_ || state_ != state::up) return;
  handback_posted_ = true;
  asio::post(executor(), [self = shared_from_this()] {
    self->handback_posted_ = false;
    self->read_more();  // nothing, if a begin_direct() came first
  });
}

// A large body is read in place over many reads; its tag check runs as it arrives, between reads, rather than
// over the whole body at the end (for a 1 MiB message that is about 80 us off the receiver's critical path).
void connection::check_large_arrived() {
  if (!protection_.is_on() || state_ != state::up) return;
  const auto large = decoder_.large_in_progress();
  if (!large || is_handshake_frame(large->header.type)) return;
  if (!protection_.is_opening()) {
    std::array<std::byte, frame_header_bytes> header{};
    encode_frame_header(header.data(), large->header.type, large->header.length);
    const std::array<std::span<const std::byte>, 2> pieces{std::span<const std::byte>(header), large->head};
    protection_.open_begin(pieces);
    large_checked_ = 0;
  }
  protection_.open_more(large->arrived.subspan(large_checked_));
  large_checked_ = large->arrived.size();
}

bool connection::verify(const frame_view& f) {
  if (protection_.is_opening()) {  // a large frame, checked as it arrived: add anything not fed yet, finish
    if (f.body && large_checked_ < f.body->size()) protection_.open_more(std::span(*f.body).subspan(large_checked_));
    return protection_.open_finish(f.trailer);
  }
  std::array<std::byte, frame_header_bytes> header{};
  encode_frame_header(header.data(), f.header.type, f.header.length);  // the bytes the tag covered, exactly
  std::array<std::span<const std::byte>, 3> pieces{std::span<const std::byte>(header), f.payload, {}};
  std::size_t n = 2;
  if (f.body && f.header.type == frame_type::data) pieces[n++] = *f.body;  // a large data frame's body
  return protection_.open(std::span(pieces).first(n), f.trailer);
}

bool connection::dispatch(frame_view& f) {
  if (state_ == state::handshake) return on_handshake_frame(f);
  if (!is_handshake_frame(f.header.type) && !verify(f)) {
    forged_ = true;
    fail(std::string("protocol error: ") + to_string(f.header.type) +
         " frame failed authentication (forged, altered, replayed or reordered)");
    return false;
  }
  switch (f.header.type) {
    case frame_type::data:
      return on_data_frame(f);
    case frame_type::ack: {
      const auto ack = decode_ack_payload(f.payload);
      if (!ack) {
        fail("protocol error: malformed ack frame");
        return false;
      }
      return handle_ack(*ack);
    }
    case frame_type::route_update:
    case frame_type::route_request:
    case frame_type::route_summary:
    case frame_type::route_dump_request:
    case frame_type::goodbye:
    case frame_type::leaving:
    case frame_type::leaving_ack:
    case frame_type::goodbye_ack:
      owner_.on_control(*this, f.header.type, f.payload);
      return state_ != state::closed;
    case frame_type::refuse:
    case frame_type::hello:
    case frame_type::auth:
      break;
  }
  fail(std::string("protocol error: unexpected ") + to_string(f.header.type) + " frame on an open link");
  return false;
}

bool connection::on_handshake_frame(frame_view& f) {
  switch (f.header.type) {
    case frame_type::hello: {
      if (hs_.has_peer_hello()) break;
      if (auto r = hs_.on_hello(f.payload)) {
        refuse(*r);
        return false;
      }
      peer_ = hs_.peer().resource_name;
      peer_name_ = hs_.peer().name;
      const link_resume resume = owner_.resume_for(peer_);
      resume_ack_sent_ = resume.ack;
      send_control(make_control_frame(frame_type::auth, hs_.auth_payload(resume.ack, resume.session_secret)));
      return true;
    }
    case frame_type::auth: {
      if (!hs_.has_peer_hello()) break;
      if (auto r = hs_.on_auth(f.payload)) {
        refuse(*r);
        return false;
      }
      state_ = state::up;
      handshake_timer_->cancel();
      protection_ = frame_protection(hs_.keys());
      decoder_.set_trailer_bytes(protection_.tag_bytes());
      decoder_.set_max_payload(params_.max_payload + static_cast<std::uint32_t>(protection_.tag_bytes()));
      decoder_.reserve(link_buffer_bytes);
      owner_.on_connection_up(shared_from_this());
      return state_ != state::closed;
    }
    case frame_type::refuse: {
      const auto r = handshake::decode_refuse(f.payload);
      refused_ = true;
      fail(r ? std::string("refused by peer: ") + r->text : std::string("refused by peer (unreadable reason)"));
      return false;
    }
    default:
      break;
  }
  fail(std::string("protocol error: ") + to_string(f.header.type) + " frame during the handshake");
  return false;
}

void connection::send_goodbye() {
  goodbye_sent_ = true;
  send_control(make_ack_frame(frame_type::goodbye, session_ ? session_->received() : 0));
}

bool connection::on_data_frame(frame_view& f) {
  data_head head;
  if (decode_data_head(f.payload, head) != frame_error::none || !session_) {
    fail(session_ ? "protocol error: malformed data frame" : "data frame before the link was attached");
    return false;
  }
  if (goodbye_sent_) return handle_ack(head.ack);  // the peer sends it elsewhere (send_goodbye)
  // The peer may have in flight what the window this node announced allows (or one packet of any size). A
  // packet beyond it is refused before it is taken: the peer keeps it, and nothing is lost.
  const std::size_t body_size = f.body ? f.body->size() : f.payload.size() - data_head_bytes;
  const std::uint64_t footprint = packet::footprint_of(body_size);
  if (head.seq == session_->received() + 1 && session_->would_exceed_window(footprint, params_.window_bytes)) {
    fail("protocol error: the peer sent " + std::to_string(session_->bytes_beyond_ack() + footprint) +
         " bytes beyond the last acknowledgement, over the window of " + std::to_string(params_.window_bytes));
    return false;
  }
  switch (session_->on_receive(head.seq)) {
    case link_session::receipt::duplicate:
      return handle_ack(head.ack);
    case link_session::receipt::gap:
      fail("protocol error: link sequence gap (expected " + std::to_string(session_->received() + 1) + ", got " +
           std::to_string(head.seq) + ")");
      return false;
    case link_session::receipt::accept:
      break;
  }
  phoenix::Bytes body = f.body ? std::move(*f.body) : phoenix::copy_bytes(f.payload.subspan(data_head_bytes));
  session_->count_beyond_ack(footprint);
  note_received(frame_header_bytes + f.header.length);
  if (!handle_ack(head.ack)) return false;
  owner_.on_data(*this, head, std::move(body));
  return state_ != state::closed;
}

bool connection::handle_ack(std::uint64_t ack) {
  if (!session_) return state_ != state::closed;
  const auto freed = session_->on_ack(ack);
  if (!freed) {
    fail("protocol error: ack " + std::to_string(ack) + " for a packet never sent");
    return false;
  }
  if (*freed) {
    owner_.on_freed(*this, *freed);
    send_pending();  // the window moved
  }
  return state_ != state::closed;
}

// Cumulative acks ride on reverse data frames; without reverse traffic an ack frame goes out after
// ack_every_bytes or ack_delay, whichever comes first, so the sender's window keeps moving.
void connection::note_received(std::size_t bytes) {
  session_->count_received_bytes(bytes);
  if (session_->bytes_since_ack() >= params_.ack_every_bytes) {
    send_pending();
    return;
  }
  if (ack_timer_armed_) return;
  ack_timer_armed_ = true;
  ack_timer_->expires_after(params_.ack_delay);
  ack_timer_->async_wait([self = shared_from_this()](std::error_code ec) {
    self->ack_timer_armed_ = false;
    if (!ec && self->state_ == state::up) self->send_pending();
  });
}

// --- writing ------------------------------------------------------------------------------------------------

void connection::send_control(std::vector<std::byte> frame) {
  if (state_ == state::closed) return;
  control_.push_back(std::move(frame));
  write_more();
}

void connection::send_pending() {
  if (state_ == state::up) write_more();
}

void connection::seal_control(std::vector<std::byte>& frame) {
  const auto type = static_cast<frame_type>(frame[3]);
  if (!protection_.is_on() || is_handshake_frame(type)) return;
  encode_frame_header(frame.data(), type, static_cast<std::uint32_t>(frame.size() - frame_header_bytes + frame_tag_bytes));
  const std::span<const std::byte> whole(frame);
  const frame_tag tag = protection_.seal(std::span(&whole, 1));
  frame.insert(frame.end(), tag.begin(), tag.end());
}

// A large frame under way goes on alone: nothing may come between the slices of one frame on the stream. Each
// slice the socket takes at once is added to the tag before the next is offered, in this thread, so the frame
// does not wait for the event loop between slices (a spinning receiver runs it only every few looks). Returns
// whether the frame is complete and its tag pending; otherwise a write is in flight, or the connection failed.
bool connection::write_large_slices() {
  while (!large_rest_.empty()) {
    const auto slice = next_large_slice();
    std::error_code ec;
    const std::size_t n = stream_try_write(slice, ec);
    if (!ec && n == slice.size()) {
      seal_large_slice();
      continue;
    }
    if (ec && ec != asio::error::would_block && ec != asio::error::operation_not_supported) {
      fail(ec.message());
      return false;
    }
    const auto rest = slice.subspan(ec ? 0 : n);
    iov_.push_back(asio::buffer(rest.data(), rest.size()));
    writing_ = true;
    stream_write(iov_, [self = shared_from_this()](std::error_code ec2, std::size_t k) { self->on_written(ec2, k); });
    seal_large_slice();  // the write above is on its way: the completion cannot run before this returns
    return false;
  }
  // Every slice went at once: what the frame's write would have marked on completion is written now.
  if (session_ && last_seq_in_write_) {
    if (const std::uint64_t freed = session_->mark_written(last_seq_in_write_)) owner_.on_freed(*this, freed);
  }
  last_seq_in_write_ = 0;
  return true;
}

// The next slice of a large frame, taken off large_rest_ into large_slice_.
std::span<const std::byte> connection::next_large_slice() {
  large_slice_ = large_rest_.first(std::min(large_rest_.size(), large_slice_bytes));
  large_rest_ = large_rest_.subspan(large_slice_.size());
  return large_slice_;
}

// Once a slice's write is on its way: add it to the tag; after the last one the tag is ready for the next write.
void connection::seal_large_slice() {
  protection_.seal_more(large_slice_);
  large_slice_ = {};
  if (large_rest_.empty()) {
    if (protection_.is_sealing()) pending_tag_ = protection_.seal_finish();
    last_seq_in_write_ = large_seq_;
  }
}

void connection::write_more() {
  if (writing_ || state_ == state::closed) return;
  iov_.clear();
  heads_.clear();
  tags_.clear();
  std::uint64_t bytes = 0;
  control_in_write_ = 0;
  last_seq_in_write_ = 0;
  if (!large_rest_.empty() && !write_large_slices()) return;
  // The tag of the last frame of the previous write comes before anything else: it ends that frame.
  if (pending_tag_) {
    tag_in_write_ = *pending_tag_;  // its own storage: this write may leave a new pending tag behind
    pending_tag_.reset();
    iov_.push_back(asio::buffer(tag_in_write_));
    bytes += frame_tag_bytes;
  }
  for (auto& f : control_) {
    if (iov_.size() >= max_frames_per_write) break;
    seal_control(f);  // once: a frame goes into one write only, and leaves control_ when it is written
    iov_.push_back(asio::buffer(f));
    bytes += f.size();
    ++control_in_write_;
  }
  const std::byte* large_head = nullptr;  // a large frame begun in this write, whose tag is computed after it
  if (state_ == state::up && session_) {
    heads_.reserve(max_frames_per_write);
    tags_.reserve(max_frames_per_write);  // no reallocation: iov_ points into it
    const std::size_t tag_bytes = protection_.tag_bytes();
    while (heads_.size() < max_frames_per_write && bytes < max_bytes_per_write && !large_head) {
      const sequenced_packet* sp = session_->next_to_send();
      if (!sp) break;
      auto& h = heads_.emplace_back();
      const std::size_t length = data_head_bytes + sp->pkt.body.size() + tag_bytes;
      encode_frame_header(h.data(), frame_type::data, static_cast<std::uint32_t>(length));
      encode_data_head(h.data() + frame_header_bytes,
                       data_head{sp->seq, session_->ack_to_send(), sp->pkt.dest, sp->pkt.source, sp->pkt.tag,
                                 sp->pkt.hops_left, sp->pkt.flags, sp->pkt.stream_seq, sp->pkt.stream_prev});
      iov_.push_back(asio::buffer(h));
      const std::span<const std::byte> body(sp->pkt.body.data(), sp->pkt.body.size());
      bytes += frame_header_bytes + length;
      if (body.size() >= large_body_bytes) {  // written (and sealed) slice by slice; ends this write
        large_head = h.data();
        large_seq_ = sp->seq;
        large_rest_ = body;
        const auto slice = next_large_slice();
        iov_.push_back(asio::buffer(slice.data(), slice.size()));
        break;
      }
      if (!body.empty()) iov_.push_back(asio::buffer(body.data(), body.size()));
      if (tag_bytes) {
        const std::array<std::span<const std::byte>, 2> pieces{std::span<const std::byte>(h), body};
        iov_.push_back(asio::buffer(tags_.emplace_back(protection_.seal(pieces))));
      }
      last_seq_in_write_ = sp->seq;
    }
    // Data frames carry the ack. Without any, an ack frame goes on its own once the delay has passed or
    // enough bytes arrived; otherwise the ack timer will come back here. It joins this write only behind every
    // queued control frame, since a write takes control frames from the front.
    bool ack_carried = !heads_.empty();
    if (!ack_carried && session_->ack_owed() && control_in_write_ == control_.size() &&
        (!ack_timer_armed_ || session_->bytes_since_ack() >= params_.ack_every_bytes)) {
      control_.push_back(make_ack_frame(frame_type::ack, session_->ack_to_send()));
      seal_control(control_.back());
      iov_.push_back(asio::buffer(control_.back()));
      ++control_in_write_;
      ack_carried = true;
    }
    if (ack_carried) {
      session_->note_ack_sent(session_->ack_to_send());
      session_->reset_ack_counter();
    }
  }
  if (iov_.empty()) return;
  writing_ = true;
  stream_write(iov_, [self = shared_from_this()](std::error_code ec, std::size_t n) { self->on_written(ec, n); });
  // The socket has taken what it could (Asio writes at once, in this thread); the completion handler cannot
  // run before this returns, so the large frame's first slice is in its tag before the next slice is written.
  if (large_head) {
    const std::array<std::span<const std::byte>, 1> head{
        std::span<const std::byte>(large_head, frame_header_bytes + data_head_bytes)};
    protection_.seal_begin(head);
    seal_large_slice();
  }
}

void connection::on_written(std::error_code ec, std::size_t) {
  writing_ = false;
  if (state_ == state::closed) return;
  if (ec) {
    if (state_ == state::closing) stop();
    else fail(ec.message());
    return;
  }
  control_.erase(control_.begin(), control_.begin() + static_cast<std::ptrdiff_t>(control_in_write_));
  control_in_write_ = 0;
  if (state_ == state::closing) {
    if (control_.empty()) stop();
    else write_more();
    return;
  }
  if (last_seq_in_write_ && session_) {
    // An ack may have come before the write completed; what it covered can be freed only now.
    if (const std::uint64_t freed = session_->mark_written(last_seq_in_write_)) owner_.on_freed(*this, freed);
  }
  write_more();
}

// --- closing ------------------------------------------------------------------------------------------------

// Say why before closing, so that the other side logs a clear error too: the REFUSE frame is flushed (after
// any write already in flight), then the stream closes. A peer that never reads cannot hold us: the handshake
// timer closes the stream regardless.
void connection::refuse(const refusal& r) {
  refused_ = true;
  // A large frame under way is abandoned: its body belongs to the session, which this connection lets go.
  large_rest_ = {};
  control_.erase(control_.begin() + static_cast<std::ptrdiff_t>(control_in_write_), control_.end());
  control_.push_back(make_control_frame(frame_type::refuse, handshake::refuse_payload(r)));
  state_ = state::closing;
  session_ = nullptr;
  if (ack_timer_) ack_timer_->cancel();
  handshake_timer_->expires_after(std::chrono::seconds(2));
  handshake_timer_->async_wait([self = shared_from_this()](std::error_code ec) {
    if (!ec) self->stop();
  });
  owner_.on_connection_down(shared_from_this(), std::string("refusing it (") + to_string(r.reason) + "): " + r.text);
  write_more();
}

void connection::fail(const std::string& reason) {
  if (state_ == state::closed || state_ == state::closing) return;
  auto self = shared_from_this();
  stop();
  owner_.on_connection_down(self, reason);
}

}  // namespace phoenix::overlay
