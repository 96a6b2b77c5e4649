// communicator.cpp — replicated message passing (communicator.hpp): starting and finishing, and the receiving
// side (pulling each message from one replica of its sender, chosen by the target selection). The serving side
// is communicator_serving.cpp.
#include "phoenix/volpex/communicator.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "phoenix/volpex/communicator_parts.hpp"
#include "phoenix/volpex/error_out.hpp"
#include "phoenix/volpex/log.hpp"

namespace phoenix::volpex {

using namespace communicator_parts;

communicator::communicator(Node& node, client& dataspace, comm_options o)
    : node_(node),
      dataspace_(dataspace),
      options_(o),
      log_(sender_log::options{o.log_capacity_bytes, std::max(1u, o.replicas)}) {}

communicator::~communicator() { stop_serving(); }

void communicator::stop_serving() {
  stop_ = true;
  if (serving_.joinable()) serving_.join();
}

std::error_code communicator::start(std::chrono::milliseconds timeout) {
  if (options_.rank >= options_.ranks || options_.replicas == 0) return make_error_code(PH_EINVAL);
  std::error_code ec;
  const auto mine = u64_bytes(node_.resource_name());
  const auto in_effect = dataspace_.decide(directory_tag(options_.rank, options_.replica), mine, &ec, timeout);
  if (!in_effect) return ec;
  if (*in_effect != mine) {
    // Another incarnation registered as this replica: two processes claiming one replica would serve diverging
    // logs under one name. A restarted replica takes a new index.
    logger()->error("replica {} of rank {} is registered already, by another process", options_.replica,
                    options_.rank);
    return make_error_code(PH_ESTATE);
  }
  serving_ = std::thread([this] { serve_loop(); });
  return {};
}

// --- receiving ----------------------------------------------------------------------------------------------

comm_request communicator::request_to(rank_id s, comm_request::kind what) const {
  comm_request r;
  r.what = what;
  r.source = s;
  r.receiver = options_.rank;
  r.receiver_replica = options_.replica;
  r.reply_to = node_.resource_name();
  return r;
}

communicator::source_state& communicator::state_of(rank_id s) {
  auto it = sources_.find(s);
  if (it == sources_.end()) {
    it = sources_
             .emplace(s, source_state(target_selector(options_.selection, options_.replica, options_.replicas)))
             .first;
    for (replica_index j = 0; j < options_.replicas; ++j) it->second.replicas.try_emplace(j);
  }
  return it->second;
}

// The resource name replica j of rank r registered in the directory, if it did.
std::optional<vp_t> communicator::look_up_name(rank_id r, replica_index j) {
  std::error_code ec;
  const auto name = dataspace_.decide(directory_tag(r, j), {}, &ec, 10s);
  if (!name || name->size() != 8) return std::nullopt;
  std::uint64_t v = 0;
  std::memcpy(&v, name->data(), 8);
  return v;
}

// Looks for the replicas of s not registered yet (every lookup_every), and tells the selection which replicas
// lost their routes and which got them back (liveness.hpp). Hybrid selection pings them once all are known.
void communicator::track_replicas(source_state& st, rank_id s) {
  const auto now = clock::now();
  if (now < st.next_look) return;
  st.next_look = now + answer_slice;
  for (auto& [j, r] : st.replicas) {
    if (!r.name && now >= r.next_lookup) {
      r.name = look_up_name(s, j);
      r.next_lookup = clock::now() + (r.health.given_up() ? 8 * lookup_every : lookup_every);
    }
    const bool up = r.name && service_messages::reachable(node_, *r.name);
    switch (r.health.observe(up, clock::now(), options_.liveness)) {
      case liveness::change::suspected:
      case liveness::change::given_up:
        if (!st.selector.alive(j)) break;
        if (r.name)
          logger()->info("replica {} of rank {} has no route: asking another", j, s);
        else
          logger()->info("replica {} of rank {} has not registered: asking another", j, s);
        st.selector.on_dead(j);
        {
          std::lock_guard lock(mu_);
          ++stats_.dead_detected;
        }
        break;
      case liveness::change::back:
        logger()->info("replica {} of rank {} is reachable again", j, s);
        st.selector.on_back(j);
        break;
      case liveness::change::none:
        break;
    }
  }
  if (options_.selection.policy == selection::hybrid && !st.pinged &&
      std::ranges::all_of(st.replicas, [](const auto& item) { return item.second.name.has_value(); }))
    ping_all(st, s);
}

// Hybrid selection's pairwise step: one ping to each replica of s, the round trips to the selection.
void communicator::ping_all(source_state& st, rank_id s) {
  st.pinged = true;
  std::map<std::uint64_t, std::pair<replica_index, clock::time_point>> pings;
  for (const auto& [j, r] : st.replicas) {
    comm_request req = request_to(s, comm_request::kind::ping);
    req.id = next_request_++;
    pings[req.id] = {j, clock::now()};
    service_messages::send(node_, *r.name, comm_request_tag, encode(req));
  }
  const auto until = clock::now() + ping_wait;
  while (!pings.empty() && clock::now() < until) {
    auto m = service_messages::recv_for(node_, comm_answer_tag, answer_slice);
    if (!m) continue;
    const auto a = decode_comm_answer(m->bytes());
    if (!a || a->what != comm_answer::kind::pong) continue;  // a late answer to an abandoned request
    const auto it = pings.find(a->id);
    if (it == pings.end()) continue;
    st.selector.on_ping(it->second.first, clock::now() - it->second.second);
    pings.erase(it);
  }
}

// The policy's choice, unless it is refused for this message or not resolvable: then any other live replica.
std::optional<replica_index> communicator::pick(source_state& st, rank_id s,
                                                const std::set<replica_index>& refused) {
  track_replicas(st, s);
  const auto usable = [&](replica_index j) {
    return st.selector.alive(j) && !refused.contains(j) && st.replicas.at(j).name.has_value();
  };
  if (const auto j = st.selector.choose(); j && usable(*j)) return j;
  for (const auto& [j, r] : st.replicas)
    if (usable(j)) return j;
  return std::nullopt;
}

bool communicator::issue(attempt& a, comm_request r) {
  auto& st = state_of(a.source);
  a.target = pick(st, a.source, a.refused);
  if (!a.target) return false;
  r.id = a.id = next_request_++;
  a.sent = clock::now();
  const auto ec = service_messages::send(node_, *st.replicas.at(*a.target).name, comm_request_tag, encode(r));
  if (ec) logger()->warn("request to replica {} of rank {} not sent: {}", *a.target, a.source, ec.message());
  std::lock_guard lock(mu_);
  ++stats_.requests;
  return true;
}

// While waiting: the policy hears how long, and a target that lost its route is left (track_replicas).
void communicator::watch_target(attempt& a, source_state& st) {
  track_replicas(st, a.source);
  if (!a.target) return;
  st.selector.on_waiting(*a.target, clock::now() - a.sent);
  // Its answer, if one still comes, is taken all the same (recv_from).
  if (!st.selector.alive(*a.target)) a.target.reset();
}

bool communicator::all_given_up(const source_state& st) const {
  return std::ranges::all_of(st.replicas, [](const auto& item) { return item.second.health.given_up(); });
}

// Every replica of the source that may still hold the message answered this attempt trimmed or fallen behind:
// this replica lagged too far. One without a route, or not registered yet, may still hold it until given up.
bool communicator::all_refused(const source_state& st, const attempt& a) const {
  if (a.refused.empty()) return false;
  return std::ranges::all_of(st.replicas, [&](const auto& item) {
    return item.second.health.given_up() || a.refused.contains(item.first);
  });
}

// Whether the policy now prefers another replica that can be asked: registered and not refused. A preferred
// replica not registered yet is no reason to ask again (each new request would make the answers to the
// previous one stale).
bool communicator::wants_switch(source_state& st, const attempt& a) const {
  const auto c = st.selector.choose();
  return a.target && c && *c != *a.target && st.replicas.at(*c).name && !a.refused.contains(*c);
}

std::optional<communicator::received> communicator::recv(int source, std::int32_t tag, std::error_code* ec,
                                                         std::chrono::milliseconds timeout) {
  if (source < any_source || source >= static_cast<int>(options_.ranks) || tag < any_tag) {
    set_error(ec, make_error_code(PH_EINVAL));
    return std::nullopt;
  }
  const auto deadline = clock::now() + timeout;
  look_up_receivers_every(receiver_lookup_every);
  if (source == any_source || tag == any_tag) return recv_wildcard(source, tag, ec, deadline);
  return recv_from(static_cast<rank_id>(source), tag, ec, deadline);
}

void communicator::note_received(rank_id s, source_state& st, std::int32_t tag, timestamp ts) {
  st.consumed[tag] = ts;
  {
    std::lock_guard lock(mu_);
    ++stats_.received;
  }
  if (++st.received % options_.progress_every == 0) report_progress(s, st);
}

// Tells every known replica of s how far this replica consumed its streams, so their logs can let go.
void communicator::report_progress(rank_id s, source_state& st) {
  comm_request r = request_to(s, comm_request::kind::progress);
  r.consumed.assign(st.consumed.begin(), st.consumed.end());
  const Bytes body = encode(r);
  // Not to a replica without a route: it may have died, and the report would wait in the overlay for nobody.
  for (const auto& [j, source] : st.replicas)
    if (source.name && !source.health.suspected())
      service_messages::send(node_, *source.name, comm_request_tag, Bytes(body));
}

std::optional<communicator::received> communicator::recv_from(rank_id s, std::int32_t tag, std::error_code* ec,
                                                              clock::time_point deadline) {
  auto& st = state_of(s);
  const timestamp ts = st.consumed[tag] + 1;
  comm_request pull = request_to(s, comm_request::kind::pull);
  pull.tag = tag;
  pull.ts = ts;
  attempt a;
  a.source = s;
  for (;;) {
    if (!a.target && !issue(a, pull)) {
      if (all_given_up(st)) {
        // Every replica of s is gone: the computation cannot go on.
        set_error(ec, make_error_code(PH_EUNREACH));
        return std::nullopt;
      }
      if (all_refused(st, a)) {
        set_error(ec, make_error_code(PH_ELOST));  // every live replica refused: this replica lagged too far
        return std::nullopt;
      }
      // No replica of s can be asked now, but one without a route or not registered yet may come (back): wait
      // for it until it is given up.
    }
    if (clock::now() >= deadline) {
      set_error(ec, make_error_code(PH_ETIMEDOUT));
      return std::nullopt;
    }
    auto m = service_messages::recv_for(node_, comm_answer_tag, answer_slice);
    if (m) {
      const auto ans = decode_comm_answer(m->bytes());
      if (!ans) continue;
      // Any replica's copy of this very message will do: they are identical (deterministic replicas).
      if (ans->what == comm_answer::kind::data && ans->source == s && ans->tag == tag && ans->ts == ts) {
        st.selector.on_answer(ans->source_replica, ans->body ? ans->body->size() : 0, clock::now() - a.sent,
                              ans->latest, ts);
        note_received(s, st, tag, ts);
        set_error(ec, {});
        return received{s, tag, ans->body ? Bytes(*ans->body) : Bytes()};
      }
      if (ans->id != a.id || !a.target) continue;  // for an earlier request
      if (ans->what == comm_answer::kind::not_yet) {
        std::lock_guard lock(mu_);
        ++stats_.not_yet;
      }
      if (ans->what == comm_answer::kind::not_yet) st.selector.on_not_yet(ans->source_replica, ans->latest, ts);
      if (ans->what == comm_answer::kind::trimmed || ans->what == comm_answer::kind::fallen_behind) {
        a.refused.insert(*a.target);
        a.target.reset();
        continue;
      }
    } else {
      watch_target(a, st);
    }
    if (wants_switch(st, a)) {
      std::lock_guard lock(mu_);
      ++stats_.reissued;
      ++stats_.switches;
      a.target.reset();  // the policy moved on: ask its new choice (the old may still answer; either will do)
    }
  }
}

std::optional<std::pair<rank_id, std::int32_t>> communicator::decided(const std::string& tag,
                                                                      std::span<const std::byte> proposal,
                                                                      std::error_code* ec) {
  const auto v = dataspace_.decide(tag, proposal, ec, 30s);
  if (!v || v->size() != 8) return std::nullopt;
  rank_id s = 0;
  std::int32_t t = 0;
  std::memcpy(&s, v->data(), 4);
  std::memcpy(&t, v->data() + 4, 4);
  return std::make_pair(s, t);
}

// Probes the candidate sources for the first message that matches; the first found is proposed as this
// wildcard receive's choice, and whatever was decided (by this replica or another of the rank) is received.
std::optional<communicator::received> communicator::recv_wildcard(int source, std::int32_t tag,
                                                                  std::error_code* ec,
                                                                  clock::time_point deadline) {
  const auto name = decision_tag(options_.rank, ++wildcards_);
  {
    std::lock_guard lock(mu_);
    ++stats_.wildcards;
  }
  std::error_code dec;
  if (auto d = decided(name, {}, &dec)) {
    {
      std::lock_guard lock(mu_);
      ++stats_.wildcards_decided_elsewhere;
    }
    return recv_from(d->first, d->second, ec, deadline);
  }
  if (dec) {
    set_error(ec, dec);
    return std::nullopt;
  }
  std::map<rank_id, attempt> probes;
  const auto probe = [&](rank_id s) {
    auto& st = state_of(s);
    comm_request r = request_to(s, comm_request::kind::probe);
    r.tag = tag;
    r.consumed.assign(st.consumed.begin(), st.consumed.end());
    attempt& a = probes[s];
    a.source = s;
    issue(a, r);
  };
  for (rank_id s = 0; s < options_.ranks; ++s)
    if (source == any_source || static_cast<int>(s) == source) probe(s);
  auto next_look = clock::now() + 200ms;
  while (clock::now() < deadline) {
    auto m = service_messages::recv_for(node_, comm_answer_tag, answer_slice);
    if (m) {
      const auto ans = decode_comm_answer(m->bytes());
      if (!ans) continue;
      const auto it = probes.find(ans->source);
      if (it == probes.end() || it->second.id != ans->id) continue;
      auto& st = state_of(ans->source);
      if (ans->what == comm_answer::kind::trimmed || ans->what == comm_answer::kind::fallen_behind) {
        attempt& a = it->second;  // that replica no longer has what this one needs: ask another
        if (a.target) a.refused.insert(*a.target);
        a.target.reset();
        probe(ans->source);
        continue;
      }
      if (ans->what != comm_answer::kind::data) continue;
      if (ans->ts != st.consumed[ans->tag] + 1) continue;  // not this replica's next on that stream
      const auto choice = decided(name, choice_bytes(ans->source, ans->tag), &dec);
      if (!choice) break;
      if (*choice != std::make_pair(ans->source, ans->tag))
        return recv_from(choice->first, choice->second, ec, deadline);
      note_received(ans->source, st, ans->tag, ans->ts);
      set_error(ec, {});
      return received{ans->source, ans->tag, ans->body ? Bytes(*ans->body) : Bytes()};
    }
    for (auto& [s, a] : probes) {
      auto& st = state_of(s);
      watch_target(a, st);
      if (!a.target || wants_switch(st, a)) probe(s);
      // Every live replica of s refused: the next message from s that this replica should see is gone (a
      // sender keeps it while this replica lives and keeps up), so no receive from s can be right any more.
      if (!a.target && all_refused(st, a)) {
        set_error(ec, make_error_code(PH_ELOST));
        return std::nullopt;
      }
    }
    if (clock::now() >= next_look) {  // another replica of this rank may have decided meanwhile
      if (auto d = decided(name, {}, &dec)) return recv_from(d->first, d->second, ec, deadline);
      next_look = clock::now() + 200ms;
    }
  }
  set_error(ec, dec ? dec : make_error_code(PH_ETIMEDOUT));
  return std::nullopt;
}

std::error_code communicator::finish(std::chrono::milliseconds linger) {
  for (auto& [s, st] : sources_) report_progress(s, st);
  std::error_code ec;
  dataspace_.decide(finished_tag(options_.rank, options_.replica), u64_bytes(1), &ec, 10s);
  if (ec) logger()->warn("could not say in the directory that this replica finished: {}", ec.message());
  const auto until = clock::now() + linger;
  next_receiver_lookup_ = {};  // at once, then more often than while computing
  while (clock::now() < until) {
    {
      std::lock_guard lock(mu_);
      trim_log();
      if (log_.drained()) break;
    }
    look_up_receivers_every(lookup_every);
    std::this_thread::sleep_for(50ms);
  }
  stop_serving();
  std::lock_guard lock(mu_);
  if (!log_.drained()) {
    logger()->warn("finished with {} messages still logged for replicas that did not take them",
                   log_.statistics().entries);
    return make_error_code(PH_ETIMEDOUT);
  }
  return {};
}

communicator::stats communicator::statistics() const {
  std::lock_guard lock(mu_);
  stats s = stats_;
  s.log = log_.statistics();
  for (const auto& [r, st] : sources_) s.switches += st.selector.switches();
  return s;
}

}  // namespace phoenix::volpex
