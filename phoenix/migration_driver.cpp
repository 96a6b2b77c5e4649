#include "phoenix/migration_driver.hpp"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "base/wire.hpp"
#include "phoenix/log.hpp"
#include "phoenix/progress.hpp"
#include "phoenix/random_bits.hpp"

namespace phoenix {

using migration::interval;
using migration::kind;
using migration::message;

migration_driver::migration_driver(std::string name, vp_t self, vp_t space_size, node_ops ops,
                                   lease_config leases)
    : name_(std::move(name)),
      ops_(std::move(ops)),
      protocol_(self, space_size, 1, leases.lease),  // begin() draws each attempt's number
      rng_(random_bits()),
      space_size_(space_size),
      leases_(leases) {}

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
  // A fresh random number per attempt (lock_protocol::begin): only who sees the attempt's messages can name it.
  const std::uint64_t number = std::max<std::uint64_t>(1, random_bits() >> 1);
  const auto effects =
      protocol_.begin(p, std::uniform_int_distribution<vp_t>(0, space_size_ - 1)(rng_), number);
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
        give(e.m.span, e.to, e.m.attempt);
        break;
      case migration::effect::type::give_back:  // complete() streams it, from the bytes it has
        break;
      case migration::effect::type::expect:
        logger()->debug("{}: expecting [{}, {}) from {:x}", name_, e.m.span.lo, e.m.span.hi, e.to);
        break;
    }
  }
}

// --- the giver ----------------------------------------------------------------------------------------------

void migration_driver::give(interval t, vp_t taker, std::uint64_t attempt) {
  if (!pack_) return give_now(t, taker, attempt);
  queue_step({step_kind::give, t, taker, attempt});
}

void migration_driver::adopted(Interval span, vp_t owner) {
  if (adoption_handler_) queue_step(step{step_kind::adopted, span, owner});
}

void migration_driver::queue_step(const step& s) {
  std::lock_guard lock(steps_mu_);
  steps_.push_back(s);
  pending_.fetch_add(1, std::memory_order_release);
}

void migration_driver::give_now(interval t, vp_t taker, std::uint64_t attempt) {
  settle_transit();
  Bytes tail = state_tail(ops_.release(t));
  protocol_.released(t);
  transit_ = t;
  start_stream(kind::state_begin, t, taker, attempt, Bytes(), std::move(tail));
}

Bytes migration_driver::state_tail(const Bytes& streams) {
  Bytes tail(streams.size() + 8);
  std::copy(streams.begin(), streams.end(), tail.begin());
  base::store_le<std::uint64_t>(tail.data() + streams.size(), streams.size());
  return tail;
}

migration_driver::state_parts migration_driver::split_state(const Bytes& state, vp_t giver) const {
  const std::span<const std::byte> all(state);
  if (all.size() >= 8) {
    const std::uint64_t n = base::load_le<std::uint64_t>(all.data() + all.size() - 8);
    if (n <= all.size() - 8) return {all.first(all.size() - 8 - n), all.subspan(all.size() - 8 - n, n)};
  }
  logger()->error("{}: a state from {:x} without the streams' part; all of it goes to the application", name_,
                  giver);
  return {all, {}};
}

void migration_driver::start_stream(kind begin_kind, interval t, vp_t to, std::uint64_t attempt, Bytes state,
                                    Bytes tail) {
  message begin;
  begin.what = begin_kind;
  begin.from = protocol_.self();
  begin.span = t;
  begin.number = state.size() + tail.size();
  begin.attempt = attempt;
  send_message(to, begin);
  logger()->info("{}: {} [{}, {}) with {} bytes of state to {:x}", name_,
                 begin_kind == kind::give_back ? "giving back" : "giving", t.lo, t.hi, begin.number, to);
  out_.push_back(
      outgoing{t, to, attempt, std::move(state), std::move(tail), 0, 0, begin_kind == kind::give_back});
  send_chunks(out_.back());
}

// Sends chunks while fewer than window_chunks are unacknowledged.
void migration_driver::send_chunks(outgoing& o) {
  const std::uint64_t chunks = (o.length() + chunk_bytes - 1) / chunk_bytes;
  while (o.next < chunks && o.next - o.acked < window_chunks) {
    const std::uint64_t offset = o.next * chunk_bytes;
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_bytes, o.length() - offset));
    message m;
    m.what = kind::state_chunk;
    m.from = protocol_.self();
    m.span = o.what;
    m.number = o.next;
    m.attempt = o.attempt;
    Bytes straddling;  // the one chunk with the end of the state and the start of the tail
    if (offset + n <= o.state.size()) {
      m.chunk = std::span<const std::byte>(o.state).subspan(static_cast<std::size_t>(offset), n);
    } else if (offset >= o.state.size()) {
      const auto at = static_cast<std::size_t>(offset - o.state.size());
      m.chunk = std::span<const std::byte>(o.tail).subspan(at, n);
    } else {
      const auto in_state = static_cast<std::size_t>(o.state.size() - offset);
      straddling = copy_bytes(std::span<const std::byte>(o.state).subspan(static_cast<std::size_t>(offset)));
      straddling.insert(straddling.end(), o.tail.begin(),
                        o.tail.begin() + static_cast<std::ptrdiff_t>(n - in_state));
      m.chunk = straddling;
    }
    send_message(o.taker, m);  // encodes the chunk into the packet's body now
    ++o.next;
  }
  // A state given back is over once all of it arrived. A give keeps its bytes until done: a taker that can
  // take it no more refuses it, and the bytes come back to this node's application (take_back).
  if (o.acked == chunks && o.back) std::erase_if(out_, [&](const outgoing& x) { return &x == &o; });
}

// The taker refused a state this node released to it (it had nothing left that expects it): nothing of it was
// assumed there, so it comes back here, from the bytes still kept, as a state given back would. Only a refusal
// that names the state (refuse_state) does: the lock protocol's refuse, which answers a give_request, names
// none, and one forged in the taker's name while the state is on its way must not make two owners of it.
bool migration_driver::take_back(const message& refuse) {
  const auto o = std::find_if(out_.begin(), out_.end(), [&](const outgoing& x) {
    return !x.back && x.taker == refuse.from && x.attempt == refuse.attempt && x.what == refuse.span;
  });
  if (o == out_.end() || protocol_.releasing_to() != refuse.from) return false;
  logger()->warn("{}: {:x} refused [{}, {}): taking it back", name_, refuse.from, o->what.lo, o->what.hi);
  const std::uint64_t chunks = (o->length() + chunk_bytes - 1) / chunk_bytes;
  o->state.insert(o->state.end(), o->tail.begin(), o->tail.end());  // whole again, as it arrives (rare)
  in_.push_back(incoming{o->what, o->taker, o->attempt, o->state.size(), o->state.size(), std::move(o->state),
                         std::vector<bool>(chunks, true), true});
  out_.erase(o);
  complete(std::prev(in_.end()));
  return true;
}

void migration_driver::on_state_ack(const message& m) {
  for (auto& o : out_) {
    if (o.taker != m.from || o.what != m.span || o.attempt != m.attempt) continue;
    if (m.number >= o.next) return;  // an ack of a chunk never sent
    o.acked = std::max(o.acked, m.number + 1);
    return send_chunks(o);
  }
}

// --- the taker ----------------------------------------------------------------------------------------------

std::list<migration_driver::incoming>::iterator migration_driver::find_incoming(vp_t from, interval t,
                                                                                std::uint64_t attempt) {
  return std::find_if(in_.begin(), in_.end(), [&](const incoming& i) {
    return i.giver == from && i.what == t && i.attempt == attempt;
  });
}

void migration_driver::refuse_state(vp_t giver, interval t, std::uint64_t attempt) {
  std::erase_if(early_chunks_,
                [&](const early_chunk& c) { return c.giver == giver && c.what == t && c.attempt == attempt; });
  message refuse;
  refuse.what = kind::refuse;
  refuse.from = protocol_.self();
  refuse.span = t;
  refuse.attempt = attempt;
  send_message(giver, refuse);
}

// state_begin (a giver's) or give_back (a taker's, with the state that came after its lease).
void migration_driver::on_stream_begin(const message& m) {
  const bool back = m.what == kind::give_back;
  if (!back && m.number == migration::declined_length) {
    logger()->log(peer_line(spdlog::level::warn),
                  "{}: {:x} could not pack the state of [{}, {}); nothing moves", name_, m.from, m.span.lo,
                  m.span.hi);
    apply(protocol_.declined(m.span, m.from, m.attempt));
    return;
  }
  // One stream per attempt and partner: a grant or a pending record stands for one state.
  if (std::any_of(in_.begin(), in_.end(),
                  [&](const incoming& i) { return i.giver == m.from && i.attempt == m.attempt; })) {
    logger()->log(peer_line(spdlog::level::err), "{}: a second state for attempt {} from {:x}; ignored", name_,
                  m.attempt, m.from);
    return;
  }
  if (!protocol_.expects_state(m.from, m.span, m.attempt) || m.number > max_state_bytes) {
    // Nothing here waits for it any more (a pending record forgotten, its partner long unreachable), or it is
    // longer than any state taken here: refused, so that its giver takes it back rather than wait for a done
    // that will not come.
    logger()->log(peer_line(spdlog::level::warn),
                  "{}: state of {} bytes for [{}, {}) from {:x} not taken here; refused", name_, m.number,
                  m.span.lo, m.span.hi, m.from);
    if (!back) refuse_state(m.from, m.span, m.attempt);
    return;
  }
  const std::uint64_t chunks = (m.number + chunk_bytes - 1) / chunk_bytes;
  in_.push_back(incoming{m.span, m.from, m.attempt, m.number, 0, {}, std::vector<bool>(chunks), back});
  const auto in = std::prev(in_.end());
  if (m.number == 0) return complete(in);
  const auto early = std::exchange(early_chunks_, {});
  for (const auto& c : early) {
    if (c.giver != m.from || c.what != m.span || c.attempt != m.attempt) {
      early_chunks_.push_back(c);  // another stream's
      continue;
    }
    logger()->debug("{}: state chunk {} of [{}, {}) came before its state_begin", name_, c.index, c.what.lo,
                    c.what.hi);
    if (take_chunk(in, c.index, c.bytes)) return;  // the last one: arrived (or dropped)
  }
}

// The overlay keeps the order of one sender's packets only while their route stays the same (docs/overlay.md,
// "Order"): after a link cut, a chunk may overtake the state_begin the cut held back. Such a chunk is kept
// (at most window_chunks per stream: the giver sends no more before they are acknowledged) until its
// state_begin comes, or until nothing expects it any more (tick).
void migration_driver::on_state_chunk(const message& m) {
  const auto in = find_incoming(m.from, m.span, m.attempt);
  if (in != in_.end()) {
    take_chunk(in, m.number, m.chunk);
    return;
  }
  const auto same_stream = std::count_if(early_chunks_.begin(), early_chunks_.end(), [&](const early_chunk& c) {
    return c.giver == m.from && c.what == m.span && c.attempt == m.attempt;
  });
  if (protocol_.expects_state(m.from, m.span, m.attempt) && same_stream < static_cast<long>(window_chunks) &&
      m.chunk.size() <= chunk_bytes) {
    early_chunks_.push_back({m.span, m.from, m.attempt, m.number, Bytes(m.chunk.begin(), m.chunk.end())});
  } else {
    logger()->log(peer_line(spdlog::level::err),
                  "{}: state chunk {} for [{}, {}) from {:x} not expected here; ignored", name_, m.number,
                  m.span.lo, m.span.hi, m.from);
  }
}

// Returns whether the stream ended here (complete, or dropped).
bool migration_driver::take_chunk(std::list<incoming>::iterator in, std::uint64_t index,
                                  std::span<const std::byte> chunk) {
  const std::uint64_t chunks = in->got.size();
  const std::uint64_t expected =
      index + 1 < chunks ? chunk_bytes : in->length - static_cast<std::uint64_t>(chunks - 1) * chunk_bytes;
  if (in->ready || index >= chunks || chunk.size() != expected) {
    logger()->log(peer_line(spdlog::level::err),
                  "{}: state chunk {} of {} bytes from {:x} does not fit a state of {} bytes; ignored", name_,
                  index, chunk.size(), in->giver, in->length);
    return false;
  }
  if (!in->got[index]) {
    if (in->state.empty()) {
      try {
        in->state.resize(in->length);
      } catch (const std::bad_alloc&) {
        logger()->error("{}: no memory for a state of {} bytes from {:x}; refused", name_, in->length,
                        in->giver);
        if (!in->back) refuse_state(in->giver, in->what, in->attempt);
        in_.erase(in);
        return true;
      }
    }
    std::memcpy(in->state.data() + index * chunk_bytes, chunk.data(), chunk.size());
    in->got[index] = true;
    in->received += chunk.size();
  }
  message ack;
  ack.what = kind::state_ack;
  ack.from = protocol_.self();
  ack.span = in->what;
  ack.number = index;
  ack.attempt = in->attempt;
  send_message(in->giver, ack);
  if (in->received < in->length) return false;
  complete(in);
  return true;
}

// All of a stream is here. The protocol decides: this node assumes it (or takes its own back), or it came
// after its lease and goes back to its giver, or it belongs to nothing here (refused: the giver takes it back).
void migration_driver::complete(std::list<incoming>::iterator in) {
  migration::effects out;
  switch (protocol_.state_complete(in->giver, in->what, in->attempt, out)) {
    case migration::state_verdict::unpack:
      return finish_arrival(in, false);
    case migration::state_verdict::give_back:
      start_stream(kind::give_back, in->what, in->giver, in->attempt, std::move(in->state));
      in_.erase(in);
      return;
    case migration::state_verdict::ignore:
      logger()->log(peer_line(spdlog::level::err),
                    "{}: state for [{}, {}) from {:x} belongs to no transfer here; {}", name_, in->what.lo,
                    in->what.hi, in->giver, in->back ? "dropped" : "refused");
      if (!in->back) refuse_state(in->giver, in->what, in->attempt);
      in_.erase(in);
      return;
  }
}

// Check the paper's assertion, then unpack (on an application thread, if there are handlers) and assume.
void migration_driver::finish_arrival(std::list<incoming>::iterator in, bool unpacked) {
  if (!protocol_.acceptable(in->what)) {
    assertion_failed_ = true;
    logger()->critical("{}: migration assertion failed: [{}, {}) is not adjacent to this node's interval",
                       name_, in->what.lo, in->what.hi);
#ifndef NDEBUG
    std::abort();
#endif
  }
  if (unpack_ && !unpacked) {
    in->ready = true;
    queue_step({step_kind::arrive, in->what, in->giver, in->attempt});
    return;
  }
  const incoming done = std::move(*in);
  in_.erase(in);
  std::erase_if(out_, [&](const outgoing& o) {  // it came back: what this node kept of its give is spent
    return !o.back && o.taker == done.giver && o.what == done.what && o.attempt == done.attempt;
  });
  if (const auto effects = protocol_.arrived(done.what, done.giver)) {
    apply(*effects);
    ops_.assume(done.what, split_state(done.state, done.giver).streams);
    logger()->info("{}: assumed [{}, {}) from {:x} with {} bytes of state", name_, done.what.lo, done.what.hi,
                   done.giver, done.length);
  }
}

// --- leases -------------------------------------------------------------------------------------------------

void migration_driver::tick(std::chrono::steady_clock::time_point now) {
  protocol_.tick(now);
  // Since when each partner this node waits on (pending records' partners, the taker of a released interval)
  // has had no route; a partner reachable again, or no longer waited on, starts afresh.
  std::map<vp_t, std::chrono::steady_clock::time_point> still;
  const auto unreachable_for = [&](vp_t p) -> std::optional<std::chrono::steady_clock::duration> {
    if (!ops_.reachable || ops_.reachable(p)) return std::nullopt;
    const auto before = unreachable_since_.find(p);
    const auto since = still.try_emplace(p, before == unreachable_since_.end() ? now : before->second).first;
    return now - since->second;
  };
  // A pending grant or take whose partner has had no route for a lease: it finalized, or crashed, and sends
  // nothing more; should it come back with the state after all, the state is refused and goes back to it.
  for (const vp_t p : protocol_.pending_partners()) {
    const auto gone = unreachable_for(p);
    if (!gone || *gone < leases_.lease) continue;
    logger()->info("{}: {:x} has had no route for {} ms; forgetting what may still come from it", name_, p,
                   leases_.lease.count());
    protocol_.forget_pending(p);
  }
  // A taker this node released an interval to, unreachable for gone_after: given up on (never on a timeout
  // alone while it is reachable: a slow taker would still assume what it was sent).
  if (const vp_t taker = protocol_.releasing_to(); taker != 0) {
    const auto gone = unreachable_for(taker);
    if (gone && *gone >= leases_.gone_after) {
      if (const auto lost = protocol_.partner_gone(taker)) {
        logger()->error(
            "{}: {:x} has been unreachable for {} ms with [{}, {}) on its way to it: reported orphaned with "
            "it, lost unless it comes back",
            name_, taker, leases_.gone_after.count(), lost->lo, lost->hi);
        if (ops_.lost_in_transit) ops_.lost_in_transit(taker, *lost, *gone);
      }
      std::erase_if(out_, [&](const outgoing& o) { return o.taker == taker; });
    }
  }
  unreachable_since_ = std::move(still);
  settle_transit();
  // Streams and early chunks whose record ended (forgotten above or at max_pending, a partner given up): the
  // states coming are refused, so that their givers take them back.
  std::erase_if(in_, [&](const incoming& in) {
    if (in.ready || protocol_.expects_state(in.giver, in.what, in.attempt)) return false;
    logger()->warn("{}: dropping [{}, {}) from {:x}, {} of {} bytes here", name_, in.what.lo, in.what.hi,
                   in.giver, in.received, in.length);
    if (!in.back) refuse_state(in.giver, in.what, in.attempt);
    return true;
  });
  std::erase_if(early_chunks_,
                [&](const early_chunk& c) { return !protocol_.expects_state(c.giver, c.what, c.attempt); });
}

// Messages for t that another application thread received before the release may still be in its hands: their
// effect belongs in the state that pack is about to take (messages_in_hand.hpp).
void migration_driver::wait_for_handling(progress_engine& progress, interval t) {
  if (!ops_.handling) return;
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + handling_wait;
  while (ops_.handling(t)) {
    if (clock::now() >= deadline) {
      logger()->warn(
          "{}: an application thread still handles a message for [{}, {}) after {} s; packing anyway", name_,
          t.lo, t.hi, handling_wait.count());
      return;
    }
    // In short slices: a thread coming back wakes nothing here.
    progress.drive_until([&] { return !ops_.handling(t); },
                         std::min(deadline, clock::now() + std::chrono::milliseconds(1)));
  }
}

// Lines a peer can set off at will go through peer_log_ (base/log_budget.hpp); past it they are debug lines.
spdlog::level::level_enum migration_driver::peer_line(spdlog::level::level_enum wanted) {
  const auto held_back = peer_log_.pass(std::chrono::steady_clock::now());
  if (!held_back) return spdlog::level::debug;
  if (*held_back > 0) {
    logger()->warn("{}: {} more lines on peers' migration messages held back since the last one", name_,
                   *held_back);
  }
  return wanted;
}

// --- dispatch -----------------------------------------------------------------------------------------------

void migration_driver::on_packet(const overlay::packet& p) {
  dispatch(p);
  settle_transit();
}

// A released interval is advertised in transit while the protocol still has it on its way from this node, and
// while it comes back (refused or given back) until it is assumed here again (which ends the transit too).
void migration_driver::settle_transit() {
  if (!transit_ || protocol_.releasing_to() != 0) return;
  if (std::any_of(in_.begin(), in_.end(), [&](const incoming& in) { return in.back && in.what == *transit_; }))
    return;
  if (ops_.transit_over) ops_.transit_over(*transit_);
  transit_.reset();
}

void migration_driver::dispatch(const overlay::packet& p) {
  const auto m = migration::decode(p.body);
  if (!m || m->from != p.source) {
    logger()->log(peer_line(spdlog::level::err), "{}: malformed migration message from {:x}; ignored", name_,
                  p.source);
    return;
  }
  switch (m->what) {
    case kind::state_begin:
    case kind::give_back:
      return on_stream_begin(*m);
    case kind::state_chunk:
      return on_state_chunk(*m);
    case kind::state_ack:
      return on_state_ack(*m);
    case kind::refuse:
      if (take_back(*m)) return;
      return apply(protocol_.on_message(*m));
    case kind::done:
      // done may overtake the last state_ack (see on_state_chunk): the stream is over all the same.
      std::erase_if(out_, [&](const outgoing& o) {
        return o.taker == m->from && o.what == m->span && o.attempt == m->attempt;
      });
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
      Bytes streams;
      progress.call([&] {
        settle_transit();
        streams = ops_.release(s.span);
        protocol_.released(s.span);
        transit_ = s.span;
      });
      wait_for_handling(progress, s.span);
      std::optional<Bytes> state = pack_(s.span);
      progress.call([&] {
        if (state) {
          return start_stream(kind::state_begin, s.span, s.partner, s.attempt, std::move(*state),
                              state_tail(streams));
        }
        logger()->error("{}: pack failed for [{}, {}); the interval stays here", name_, s.span.lo, s.span.hi);
        ops_.assume(s.span, streams);
        protocol_.decline(s.span);
        message declined;
        declined.what = kind::state_begin;
        declined.from = protocol_.self();
        declined.span = s.span;
        declined.number = migration::declined_length;
        declined.attempt = s.attempt;
        send_message(s.partner, declined);
      });
    } else {
      // The entry stays put until finish_arrival: a ready stream is erased by nothing else, and list nodes
      // do not move.
      std::list<incoming>::iterator in;
      const Bytes* state = nullptr;
      progress.call([&] {
        in = find_incoming(s.partner, s.span, s.attempt);
        state = in != in_.end() && in->ready ? &in->state : nullptr;
      });
      if (!state) continue;
      if (!unpack_(s.span, split_state(*state, s.partner).app)) {
        logger()->error("{}: unpack failed for [{}, {}); assuming it anyway (the state is the application's)",
                        name_, s.span.lo, s.span.hi);
      }
      progress.call([&] { finish_arrival(in, true); });
    }
  }
  return ran;
}

}  // namespace phoenix
