#include "overlay/delivery/receive_streams.hpp"

#include <algorithm>

#include "overlay/delivery/stream_codec.hpp"

namespace phoenix::overlay {

receive_streams::result receive_streams::check(const packet& p) {
  // Only a numbered packet names where its acknowledgement goes, in a body long enough for it, and a resource
  // name, never a virtual node (an acknowledgement to one would wait for its owner).
  const auto ack_to = ack_to_of(p);
  if ((p.flags & packet::ack_to_follows) &&
      (!ack_to || *ack_to < limits_.space_size || p.stream_seq == 0 || (p.flags & packet::handed_over)))
    return {verdict::malformed};
  // Not numbered (a runtime packet to a virtual node, or a control message), or handed over by the previous
  // owner, which delivered it already.
  if (p.stream_seq == 0 || (p.flags & packet::handed_over)) return {verdict::deliver};
  if (p.stream_prev >= p.stream_seq) return {verdict::malformed};
  const key k{p.source, p.dest};
  stream& s = find_or_add(k);
  if (p.stream_seq <= s.last) {
    owe(k, s, 0, ack_to.value_or(0));  // its sender has not heard of it: acknowledged again
    return {verdict::duplicate};
  }
  if (p.stream_prev > s.last) return {verdict::hold};
  s.last = p.stream_seq;
  return {verdict::deliver, owe(k, s, p.footprint(), ack_to.value_or(0))};
}

bool receive_streams::hold(packet p) {
  const auto it = streams_.find(key{p.source, p.dest});
  // Past max_streams nothing is held: a stream with held packets is never forgotten, so holding is what the
  // bound on their number rests on.
  if (it == streams_.end() || held_bytes_ + p.footprint() > limits_.max_held_bytes ||
      streams_.size() > limits_.max_streams)
    return false;
  const std::uint64_t bytes = p.footprint();
  if (it->second.held.try_emplace(p.stream_seq, std::move(p)).second) held_bytes_ += bytes;
  return true;  // a second copy of a held packet is dropped: the first stands for it
}

std::optional<packet> receive_streams::next_held(node_id source, std::uint64_t vnode) {
  const key k{source, vnode};
  const auto it = streams_.find(k);
  if (it == streams_.end()) return std::nullopt;
  stream& s = it->second;
  while (!s.held.empty() && s.held.begin()->first <= s.last) {  // delivered meanwhile by another copy
    held_bytes_ -= s.held.begin()->second.footprint();
    s.held.erase(s.held.begin());
  }
  if (s.held.empty() || s.held.begin()->second.stream_prev > s.last) return std::nullopt;
  packet p = std::move(s.held.begin()->second);
  s.held.erase(s.held.begin());
  held_bytes_ -= p.footprint();
  s.last = p.stream_seq;
  owe(k, s, p.footprint(), ack_to_of(p).value_or(0));
  return p;
}

std::vector<node_id> receive_streams::owing() const {
  std::vector<node_id> out;
  out.reserve(owed_.size());
  for (const auto& [source, d] : owed_) out.push_back(source);
  return out;
}

node_id receive_streams::ack_to(node_id source) const {
  const auto d = owed_.find(source);
  return d == owed_.end() || d->second.ack_to == 0 ? source : d->second.ack_to;
}

std::vector<stream_ack> receive_streams::take_acks(node_id source, clock::time_point now) {
  latest_ = std::max(latest_, now);
  const auto d = owed_.find(source);
  if (d == owed_.end()) return {};
  last_debt_ = nullptr;
  std::vector<stream_ack> acks = std::move(d->second.left);
  for (const std::uint64_t vnode : d->second.vnodes) {
    const auto it = streams_.find(key{source, vnode});
    if (it == streams_.end() || !it->second.owed) continue;
    it->second.owed = false;
    it->second.seen = now;
    acks.push_back({vnode, it->second.last});
  }
  owed_.erase(d);
  return acks;
}

std::pair<std::vector<stream_state>, std::vector<packet>> receive_streams::take_interval(std::uint64_t lo,
                                                                                         std::uint64_t hi) {
  std::vector<stream_state> states;
  std::vector<packet> held;
  last_stream_ = nullptr;
  for (auto it = streams_.begin(); it != streams_.end();) {
    const auto& [source, vnode] = it->first;
    stream& s = it->second;
    if (vnode < lo || vnode >= hi) {
      ++it;
      continue;
    }
    states.push_back({source, vnode, s.last});
    for (auto& [seq, p] : s.held) {
      held_bytes_ -= p.footprint();
      held.push_back(std::move(p));
    }
    if (s.owed) owed_[source].left.push_back({vnode, s.last});  // what this node delivered, it acknowledges
    it = streams_.erase(it);
  }
  std::sort(held.begin(), held.end(),
            [](const packet& a, const packet& b) { return a.stream_seq < b.stream_seq; });
  return {std::move(states), std::move(held)};
}

std::size_t receive_streams::adopt(const std::vector<stream_state>& states, clock::time_point now) {
  // No more than the table holds: a giver (or a log) with more is broken or hostile, and the rest would only
  // be forgotten again at once.
  const std::size_t n = std::min(states.size(), limits_.max_streams);
  for (std::size_t i = 0; i < n; ++i) {
    const stream_state& st = states[i];
    const key k{st.source, st.vnode};
    latest_ = std::max(latest_, now);
    stream& s = find_or_add(k);
    s.last = std::max(s.last, st.last);
    s.seen = now;
    owe(k, s, 0, 0);
  }
  return states.size() - n;
}

std::size_t receive_streams::expire(clock::time_point now) {
  latest_ = std::max(latest_, now);
  last_stream_ = nullptr;
  return std::erase_if(streams_, [&](const auto& entry) {
    const stream& s = entry.second;
    return !s.owed && s.held.empty() && now - s.seen >= limits_.idle;
  });
}

std::optional<std::uint64_t> receive_streams::last(node_id source, std::uint64_t vnode) const {
  const auto it = streams_.find(key{source, vnode});
  if (it == streams_.end()) return std::nullopt;
  return it->second.last;
}

receive_streams::stream& receive_streams::find_or_add(const key& k) {
  if (last_stream_ && last_key_ == k) return *last_stream_;
  if (const auto it = streams_.find(k); it != streams_.end()) {
    last_key_ = k;
    return *(last_stream_ = &it->second);
  }
  if (streams_.size() >= limits_.max_streams) make_room();
  stream& s = streams_[k];
  s.seen = latest_;
  last_key_ = k;
  return *(last_stream_ = &s);
}

bool receive_streams::owe(const key& k, stream& s, std::uint64_t bytes, node_id ack_to) {
  if (!last_debt_ || last_source_ != k.first) {
    last_source_ = k.first;
    last_debt_ = &owed_[k.first];
  }
  debt& d = *last_debt_;
  if (ack_to != 0) d.ack_to = ack_to;
  if (!s.owed) {
    s.owed = true;
    d.vnodes.push_back(k.second);
  }
  d.bytes += bytes;
  ++d.packets;
  return d.bytes >= limits_.ack_bytes || d.packets >= limits_.ack_packets;
}

// At max_streams: the idle ones go first, then the eighth that was seen longest ago, of those with nothing
// held or owed (which become so within an acknowledgement delay, so the table passes the bound only briefly).
void receive_streams::make_room() {
  last_stream_ = nullptr;
  if (expire(latest_) > 0 && streams_.size() < limits_.max_streams) return;
  std::vector<std::pair<clock::time_point, key>> idle;
  for (const auto& [k, s] : streams_) {
    if (!s.owed && s.held.empty()) idle.emplace_back(s.seen, k);
  }
  const std::size_t drop = std::min(idle.size(), std::max<std::size_t>(1, limits_.max_streams / 8));
  std::nth_element(idle.begin(), idle.begin() + static_cast<std::ptrdiff_t>(drop), idle.end());
  for (std::size_t i = 0; i < drop; ++i) streams_.erase(idle[i].second);
}

}  // namespace phoenix::overlay
