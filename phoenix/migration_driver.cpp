#include "phoenix/migration_driver.hpp"

#include <openssl/rand.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "phoenix/log.hpp"
#include "phoenix/progress.hpp"

namespace phoenix {

using migration::interval;
using migration::kind;
using migration::message;

namespace {
std::uint64_t random_seed() {
  std::uint64_t s = 0;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&s), sizeof s) != 1) s = std::random_device{}();
  return s;
}
}  // namespace

migration_driver::migration_driver(std::string name, vp_t self, vp_t space_size, node_ops ops)
    : name_(std::move(name)),
      ops_(std::move(ops)),
      protocol_(self, space_size),
      rng_(random_seed()),
      space_size_(space_size) {}

void migration_driver::set_handlers(Node::PackFn pack, Node::UnpackFn unpack) {
  pack_ = std::move(pack);
  unpack_ = std::move(unpack);
}

// --- sending ------------------------------------------------------------------------------------------------

void migration_driver::send_message(vp_t dest, const message& m) {
  overlay::packet p;
  p.dest = dest;
  p.tag = migration::protocol_tag;
  p.body = migration::encode(m);
  ops_.send(std::move(p));
}

bool migration_driver::begin(const migration::plan& p) {
  const auto effects = protocol_.begin(p, std::uniform_int_distribution<vp_t>(0, space_size_ - 1)(rng_));
  if (effects) apply(*effects);
  return effects.has_value();
}

void migration_driver::apply(const migration::effects& effects) {
  for (const migration::effect& e : effects) {
    switch (e.what) {
      case migration::effect::type::send_to_vnode:  // a virtual node and a resource name travel alike
      case migration::effect::type::send_to_node:
        send_message(e.to, e.m);
        break;
      case migration::effect::type::give:
        give(e.m.span, e.to);
        break;
      case migration::effect::type::expect:
        logger()->debug("{}: expecting [{}, {}) from {:x}", name_, e.m.span.lo, e.m.span.hi, e.to);
        break;
    }
  }
}

// --- the giver ----------------------------------------------------------------------------------------------

void migration_driver::give(interval t, vp_t taker) {
  if (!pack_) return give_now(t, taker);
  queue_step({step_kind::give, t, taker});
}

void migration_driver::adopted(Interval span, vp_t owner) {
  if (adoption_handler_) queue_step(step{step_kind::adopted, span, owner});
}

void migration_driver::queue_step(const step& s) {
  std::lock_guard lock(steps_mu_);
  steps_.push_back(s);
  pending_.fetch_add(1, std::memory_order_release);
}

void migration_driver::give_now(interval t, vp_t taker) {
  ops_.release(t);
  protocol_.released(t);
  start_stream(t, taker, {});
}

void migration_driver::start_stream(interval t, vp_t taker, Bytes state) {
  message begin;
  begin.what = kind::state_begin;
  begin.from = protocol_.self();
  begin.span = t;
  begin.number = state.size();
  send_message(taker, begin);
  logger()->info("{}: giving [{}, {}) with {} bytes of state to {:x}", name_, t.lo, t.hi, state.size(), taker);
  out_ = outgoing{t, taker, std::move(state), 0, 0};
  send_chunks();
}

// Sends chunks while fewer than window_chunks are unacknowledged.
void migration_driver::send_chunks() {
  if (!out_) return;
  const std::uint64_t chunks = (out_->state.size() + chunk_bytes - 1) / chunk_bytes;
  while (out_->next < chunks && out_->next - out_->acked < window_chunks) {
    const std::uint64_t offset = out_->next * chunk_bytes;
    const std::size_t n =
        static_cast<std::size_t>(std::min<std::uint64_t>(chunk_bytes, out_->state.size() - offset));
    message m;
    m.what = kind::state_chunk;
    m.from = protocol_.self();
    m.span = out_->what;
    m.number = out_->next;
    m.chunk = std::span<const std::byte>(out_->state).subspan(offset, n);
    send_message(out_->taker, m);
    ++out_->next;
  }
  if (out_->acked == chunks) out_.reset();  // all of it arrived; the taker's done frees the lock
}

void migration_driver::on_state_ack(const message& m) {
  if (!out_ || m.from != out_->taker || m.span != out_->what) return;
  out_->acked = std::max(out_->acked, m.number + 1);
  send_chunks();
}

// --- the taker ----------------------------------------------------------------------------------------------

bool migration_driver::locked_for(vp_t giver) const {
  return protocol_.locked() && (protocol_.holder() == giver || protocol_.holder() == protocol_.self());
}

void migration_driver::on_state_begin(const message& m) {
  if (in_ || !locked_for(m.from)) {
    logger()->error("{}: state for [{}, {}) from {:x} not expected here; ignored", name_, m.span.lo, m.span.hi,
                    m.from);
    return;
  }
  const auto early = std::exchange(early_chunks_, {});
  if (m.number == migration::declined_length) {
    logger()->warn("{}: {:x} could not pack the state of [{}, {}); nothing moves", name_, m.from, m.span.lo,
                   m.span.hi);
    apply(protocol_.declined(m.span, m.from));
    return;
  }
  in_ = incoming{m.span, m.from, m.number, 0, Bytes(m.number)};
  if (m.number == 0) return finish_arrival(false);
  for (const auto& c : early) {
    if (c.giver != m.from || c.what != m.span) continue;
    logger()->debug("{}: state chunk {} of [{}, {}) came before its state_begin", name_, c.index, c.what.lo,
                    c.what.hi);
    if (take_chunk(c.index, c.bytes)) return;  // the last one: arrived
  }
}

// The overlay keeps the order of one sender's packets only while their route stays the same (docs/overlay.md,
// "Order"): after a link cut, a chunk may overtake the state_begin the cut held back. Such a chunk is kept
// (at most window_chunks of them: the giver sends no more before they are acknowledged) until its
// state_begin comes.
void migration_driver::on_state_chunk(const message& m) {
  if (in_ && m.from == in_->giver && m.span == in_->what) {
    take_chunk(m.number, m.chunk);
  } else if (!in_ && locked_for(m.from) && early_chunks_.size() < window_chunks) {
    early_chunks_.push_back({m.span, m.from, m.number, Bytes(m.chunk.begin(), m.chunk.end())});
  } else {
    logger()->error("{}: state chunk {} for [{}, {}) from {:x} not expected here; ignored", name_, m.number,
                    m.span.lo, m.span.hi, m.from);
  }
}

// Returns whether it was the last chunk (the state arrived).
bool migration_driver::take_chunk(std::uint64_t index, std::span<const std::byte> chunk) {
  const std::uint64_t offset = index * chunk_bytes;
  if (offset + chunk.size() > in_->length ||
      (chunk.size() != chunk_bytes && offset + chunk.size() != in_->length)) {
    logger()->error("{}: state chunk {} from {:x} does not fit a state of {} bytes; ignored", name_, index,
                    in_->giver, in_->length);
    return false;
  }
  std::memcpy(in_->state.data() + offset, chunk.data(), chunk.size());
  in_->received += chunk.size();
  message ack;
  ack.what = kind::state_ack;
  ack.from = protocol_.self();
  ack.span = in_->what;
  ack.number = index;
  send_message(in_->giver, ack);
  if (in_->received != in_->length) return false;
  finish_arrival(false);
  return true;
}

// All of the state is here: check the paper's assertion, then unpack (on an application thread, if there are
// handlers) and assume.
void migration_driver::finish_arrival(bool unpacked) {
  if (!protocol_.acceptable(in_->what)) {
    assertion_failed_ = true;
    logger()->critical("{}: migration assertion failed: [{}, {}) is not adjacent to this node's interval",
                       name_, in_->what.lo, in_->what.hi);
#ifndef NDEBUG
    std::abort();
#endif
  }
  if (unpack_ && !unpacked) {
    arrival_ready_ = true;
    queue_step({step_kind::arrive, in_->what, in_->giver});
    return;
  }
  const incoming done = std::move(*in_);
  in_.reset();
  arrival_ready_ = false;
  if (const auto effects = protocol_.arrived(done.what, done.giver)) {
    apply(*effects);
    ops_.assume(done.what);
    logger()->info("{}: assumed [{}, {}) from {:x} with {} bytes of state", name_, done.what.lo, done.what.hi,
                   done.giver, done.length);
  }
}

// Messages for t that another application thread received before the release may still be in its hands: their
// effect belongs in the state that pack is about to take (messages_in_hand.hpp).
void migration_driver::wait_for_handling(progress_engine& progress, interval t) {
  if (!ops_.handling) return;
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + handling_wait;
  while (ops_.handling(t)) {
    if (clock::now() >= deadline) {
      logger()->warn("{}: an application thread still handles a message for [{}, {}) after {} s; packing anyway",
                     name_, t.lo, t.hi, handling_wait.count());
      return;
    }
    // In short slices: a thread coming back wakes nothing here.
    progress.drive_until([&] { return !ops_.handling(t); },
                         std::min(deadline, clock::now() + std::chrono::milliseconds(1)));
  }
}

// --- dispatch -----------------------------------------------------------------------------------------------

void migration_driver::on_packet(const overlay::packet& p) {
  const auto m = migration::decode(p.body);
  if (!m) {
    logger()->error("{}: malformed migration message from {:x}; ignored", name_, p.source);
    return;
  }
  switch (m->what) {
    case kind::state_begin:
      return on_state_begin(*m);
    case kind::state_chunk:
      return on_state_chunk(*m);
    case kind::state_ack:
      return on_state_ack(*m);
    case kind::done:
      // done may overtake the last state_ack (see on_state_chunk): the stream is over all the same.
      if (out_ && out_->taker == m->from && out_->what == m->span) out_.reset();
      [[fallthrough]];
    default:
      return apply(protocol_.on_message(*m));
  }
}

// --- application steps --------------------------------------------------------------------------------------

int migration_driver::run_pending(progress_engine& progress) {
  int ran = 0;
  while (has_pending()) {
    step s;
    {
      std::lock_guard lock(steps_mu_);
      if (steps_.empty()) break;  // another application thread took it
      s = steps_.front();
      steps_.pop_front();
      pending_.fetch_sub(1, std::memory_order_relaxed);
    }
    ++ran;
    if (s.what == step_kind::adopted) {
      Node::AdoptionHandler handler;
      progress.call([&] { handler = adoption_handler_; });  // set_adoption_handler may replace it meanwhile
      try {
        handler(s.span, s.partner);
      } catch (...) {
        progress.call([&] { ops_.adoption_told(s.span); });
        throw;
      }
      progress.call([&] { ops_.adoption_told(s.span); });
    } else if (s.what == step_kind::give) {
      // Release first, so that no message for the interval reaches the application while it packs.
      progress.call([&] {
        ops_.release(s.span);
        protocol_.released(s.span);
      });
      wait_for_handling(progress, s.span);
      std::optional<Bytes> state = pack_(s.span);
      progress.call([&] {
        if (state) return start_stream(s.span, s.partner, std::move(*state));
        logger()->error("{}: pack failed for [{}, {}); the interval stays here", name_, s.span.lo, s.span.hi);
        ops_.assume(s.span);
        protocol_.decline(s.span);
        message declined;
        declined.what = kind::state_begin;
        declined.from = protocol_.self();
        declined.span = s.span;
        declined.number = migration::declined_length;
        send_message(s.partner, declined);
      });
    } else {
      // in_ stays put until finish_arrival: the protocol's lock keeps every other transfer away from it.
      const Bytes* state = nullptr;
      progress.call([&] { state = in_ && arrival_ready_ ? &in_->state : nullptr; });
      if (!state) continue;
      if (!unpack_(s.span, std::span<const std::byte>(*state))) {
        logger()->error("{}: unpack failed for [{}, {}); assuming it anyway (the state is the application's)",
                        name_, s.span.lo, s.span.hi);
      }
      progress.call([&] { finish_arrival(true); });
    }
  }
  return ran;
}

}  // namespace phoenix
