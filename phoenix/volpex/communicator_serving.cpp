// communicator_serving.cpp — the serving side of replicated message passing (communicator.hpp): the sender
// log, the serving thread that answers pulls from it, and the receivers it keeps track of.
#include <signal.h>

#include <algorithm>
#include <string>

#include "phoenix/volpex/communicator.hpp"
#include "phoenix/volpex/communicator_parts.hpp"
#include "phoenix/volpex/log.hpp"

namespace phoenix::volpex {

using namespace communicator_parts;

// --- sending and serving ------------------------------------------------------------------------------------

std::error_code communicator::send(rank_id dst, std::int32_t tag, std::span<const std::byte> data) {
  if (dst >= options_.ranks || tag < 0) return make_error_code(PH_EINVAL);
  std::lock_guard lock(mu_);
  log_.append(dst, tag, make_object(Bytes(data.begin(), data.end())));
  ++stats_.sent;
  answer_pending(dst);
  trim_log();  // at once, not at the next housekeeping: the capacity bounds what the log holds at any time
  return {};
}

// Drops what no live receiver replica needs and, past the capacity, the oldest entries. Holds mu_.
void communicator::trim_log() {
  for (const auto& [r, j] : log_.trim())
    logger()->warn("replica {} of rank {} fell behind the full sender log: it will get an error", j, r);
}

void communicator::post(vp_t to, const comm_answer& a) {
  // An answer may not be dropped: the receiver would wait for it. Back-pressure is waited out.
  Bytes body = encode(a);
  for (int tries = 0; tries < 30000; ++tries) {
    const auto ec = service_messages::send(node_, to, comm_answer_tag, std::move(body));
    if (!ec) return;
    if (ec != make_error_code(PH_EAGAIN)) {
      logger()->warn("answer to {} not sent: {}", to, ec.message());
      return;
    }
    std::this_thread::sleep_for(1ms);
  }
  logger()->error("answer to {} not sent: the node's send buffer stayed full", to);
}

// Answers r from the lookup; false when the message is not there yet (r waits).
bool communicator::answer_lookup(const comm_request& r, const sender_log::lookup_result& res) {
  comm_answer a;
  a.id = r.id;
  a.source = options_.rank;
  a.source_replica = options_.replica;
  a.tag = res.tag;
  a.ts = res.ts;
  a.latest = res.latest;
  switch (res.result) {
    case sender_log::status::found:
      a.what = comm_answer::kind::data;
      a.body = res.body;
      ++stats_.served;
      if (!options_.sender_log) forget(r.receiver, res.tag, res.ts);
      if (options_.crash_on_serve != 0 && stats_.served == options_.crash_on_serve) {
        logger()->warn("crash point serve:{} reached: killing this process", options_.crash_on_serve);
        ::raise(SIGKILL);
      }
      break;
    case sender_log::status::not_yet:
      if (r.what == comm_request::kind::pull) {
        a.what = comm_answer::kind::not_yet;  // tells the receiver's selection this replica lags
        a.tag = r.tag;
        a.ts = r.ts;
        post(r.reply_to, a);
      }
      return false;
    case sender_log::status::trimmed:
      a.what = comm_answer::kind::trimmed;
      break;
    case sender_log::status::fallen_behind:
      a.what = comm_answer::kind::fallen_behind;
      break;
  }
  post(r.reply_to, a);
  return true;
}

void communicator::handle(const comm_request& r) {
  const auto who = std::make_pair(r.receiver, r.receiver_replica);
  std::lock_guard lock(mu_);
  receivers_[who].name = r.reply_to;
  switch (r.what) {
    case comm_request::kind::pull:
    case comm_request::kind::probe:
      if (!answer_lookup(r, look_up(r))) pending_[who] = r;
      return;
    case comm_request::kind::progress:
      for (const auto& [tag, ts] : r.consumed) {
        log_.note_consumed(r.receiver, r.receiver_replica, tag, ts);
        if (!options_.sender_log) forget(r.receiver, tag, ts);
      }
      return;
    case comm_request::kind::ping: {
      comm_answer a;
      a.what = comm_answer::kind::pong;
      a.id = r.id;
      a.source = options_.rank;
      a.source_replica = options_.replica;
      post(r.reply_to, a);
      return;
    }
  }
}

// Without sender-based logging (comm_options::sender_log false): a message one replica of the receiver took,
// here or (by its progress report) from another replica of this rank, counts as taken by all of them, so it is
// dropped at once. Holds mu_.
void communicator::forget(rank_id dst, std::int32_t tag, timestamp ts) {
  for (replica_index j = 0; j < options_.replicas; ++j) log_.note_consumed(dst, j, tag, ts);
  trim_log();
}

// What the log holds for a pull (the named message) or a probe (the first unconsumed that matches). Holds mu_.
sender_log::lookup_result communicator::look_up(const comm_request& r) {
  if (r.what == comm_request::kind::pull) return log_.lookup(r.receiver, r.receiver_replica, r.tag, r.ts);
  const std::map<std::int32_t, timestamp> consumed(r.consumed.begin(), r.consumed.end());
  return log_.first_unconsumed(r.receiver, r.receiver_replica, consumed, r.tag);
}

// After a send to dst: the pulls and probes of dst's replicas that waited for it. Holds mu_.
void communicator::answer_pending(rank_id dst) {
  for (auto it = pending_.lower_bound({dst, 0}); it != pending_.end() && it->first.first == dst;) {
    const comm_request& r = it->second;
    const auto res = look_up(r);
    // A pull still not there was told "not yet" when it came: no second notice.
    if (res.result == sender_log::status::not_yet) {
      ++it;
      continue;
    }
    answer_lookup(r, res);
    it = pending_.erase(it);
  }
}

void communicator::serve_loop() {
  auto next_housekeeping = clock::now() + housekeeping;
  while (!stop_) {
    if (auto m = service_messages::recv_for(node_, comm_request_tag, answer_slice)) {
      if (auto r = decode_comm_request(m->bytes())) {
        handle(*r);
      } else {
        logger()->warn("malformed message-passing request from {} ({} bytes): dropped", m->source(), m->size());
      }
    }
    if (clock::now() >= next_housekeeping) {
      track_receivers();
      next_housekeeping = clock::now() + housekeeping;
    }
  }
}

// Receivers without a route for give_up_after are given up: they hold nothing back in the log any more. One
// whose route comes back holds back what the log still has from then on.
void communicator::track_receivers() {
  std::vector<std::pair<std::pair<rank_id, replica_index>, vp_t>> known;
  {
    std::lock_guard lock(mu_);
    for (const auto& [who, r] : receivers_)
      if (!r.finished) known.emplace_back(who, r.name);
  }
  std::vector<std::pair<std::pair<rank_id, replica_index>, bool>> reachable;
  for (const auto& [who, name] : known) reachable.emplace_back(who, service_messages::reachable(node_, name));
  const auto now = clock::now();
  std::lock_guard lock(mu_);
  for (const auto& [who, up] : reachable) {
    const auto [r, j] = who;
    switch (receivers_[who].health.observe(up, now, options_.liveness)) {
      case liveness::change::given_up:
        logger()->info(
            "replica {} of rank {} has had no route for {} ms: given up, it no longer holds back the "
            "log",
            j, r, options_.liveness.give_up_after.count());
        log_.mark_dead(r, j);
        pending_.erase(who);
        break;
      case liveness::change::back:
        if (log_.is_dead(r, j)) {
          logger()->info("replica {} of rank {} is reachable again: it holds back the log again", j, r);
          log_.mark_alive(r, j);
        }
        break;
      case liveness::change::suspected:
      case liveness::change::none:
        break;
    }
  }
  trim_log();
}

// What the directory says of the receiver replicas that the log waits for (only ranks it holds entries for are
// looked at): those that registered but never asked this replica for anything (they died early, or took
// everything from this rank's other replicas) are watched from now on, like those it heard from; one without a
// route that said it finished needs nothing more, and is not waited for.
void communicator::look_up_receivers() {
  std::vector<std::pair<rank_id, replica_index>> silent, quiet;
  {
    std::lock_guard lock(mu_);
    for (rank_id r = 0; r < options_.ranks; ++r) {
      if (!log_.holds_for(r)) continue;
      for (replica_index j = 0; j < options_.replicas; ++j) {
        const auto it = receivers_.find({r, j});
        if (it == receivers_.end())
          silent.emplace_back(r, j);
        else if (it->second.health.suspected() && !it->second.finished && !log_.is_dead(r, j))
          quiet.emplace_back(r, j);
      }
    }
  }
  for (const auto& who : silent) {
    const auto name = look_up_name(who.first, who.second);
    if (!name) continue;
    std::lock_guard lock(mu_);
    receivers_.try_emplace(who).first->second.name = *name;
  }
  for (const auto& who : quiet) {
    std::error_code ec;
    const auto done = dataspace_.decide(finished_tag(who.first, who.second), {}, &ec, 10s);
    if (!done || done->empty()) continue;
    std::lock_guard lock(mu_);
    logger()->info("replica {} of rank {} finished: it no longer holds back the log", who.second, who.first);
    receivers_[who].finished = true;
    log_.mark_dead(who.first, who.second);
    pending_.erase(who);
  }
}

void communicator::look_up_receivers_every(std::chrono::milliseconds every) {
  if (clock::now() < next_receiver_lookup_) return;
  look_up_receivers();
  next_receiver_lookup_ = clock::now() + every;
}

}  // namespace phoenix::volpex
