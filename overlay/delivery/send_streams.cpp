#include "overlay/delivery/send_streams.hpp"

#include <algorithm>
#include <utility>

namespace phoenix::overlay {

namespace {
// The outstanding entry for seq in a stream (numbers grow along it), or end. A stream whose packets were
// numbered one after another (one virtual node written to) has seq at its distance from the front: tried first.
template <typename Deque>
auto find_seq(Deque& out, std::uint64_t seq) {
  if (!out.empty() && seq >= out.front().seq && seq - out.front().seq < out.size()) {
    const auto guess = out.begin() + static_cast<std::ptrdiff_t>(seq - out.front().seq);
    if (guess->seq == seq) return guess;
  }
  const auto it =
      std::lower_bound(out.begin(), out.end(), seq, [](const auto& o, std::uint64_t s) { return o.seq < s; });
  return it != out.end() && it->seq == seq ? it : out.end();
}
}  // namespace

send_streams::stream* send_streams::find(std::uint64_t vnode) {
  if (last_ && last_vnode_ == vnode) return last_;
  const auto it = streams_.find(vnode);
  if (it == streams_.end()) return nullptr;
  last_vnode_ = vnode;
  return last_ = &it->second;
}

void send_streams::erase(std::unordered_map<std::uint64_t, stream>::iterator it) {
  if (last_ == &it->second) last_ = nullptr;
  streams_.erase(it);
}

send_streams::stream& send_streams::find_or_add(std::uint64_t vnode) {
  if (stream* found = find(vnode)) return *found;
  last_vnode_ = vnode;
  return *(last_ = &streams_[vnode]);
}

void send_streams::stamp(packet& p) {
  stream& s = find_or_add(p.dest);
  p.stream_seq = next_seq_++;
  p.stream_prev = s.out.empty() ? 0 : s.out.back().seq;
  s.out.push_back(outstanding{p.stream_seq, std::nullopt, {}, {}});
}

bool send_streams::resume(const packet& p) {
  if (p.stream_seq == 0) return false;
  auto& out = find_or_add(p.dest).out;
  const auto at = std::lower_bound(out.begin(), out.end(), p.stream_seq,
                                   [](const outstanding& o, std::uint64_t s) { return o.seq < s; });
  if (at != out.end() && at->seq == p.stream_seq) return false;
  out.insert(at, outstanding{p.stream_seq, std::nullopt, {}, {}});
  next_seq_ = std::max(next_seq_, p.stream_seq + 1);
  return true;
}

std::uint64_t send_streams::keep(packet p, clock::time_point now) {
  stream* s = find(p.dest);
  if (!s) return p.footprint();
  const auto o = find_seq(s->out, p.stream_seq);
  if (o == s->out.end() || o->kept) return p.footprint();  // acknowledged meanwhile (or a stray copy)
  o->backoff =
      o->backoff == clock::duration{} ? timing_.resend_after : std::min(2 * o->backoff, timing_.resend_max);
  o->due = now + o->backoff;
  bytes_kept_ += p.footprint();
  ++packets_kept_;
  o->kept = std::move(p);
  return 0;
}

std::optional<std::uint64_t> send_streams::on_ack(std::uint64_t vnode, std::uint64_t upto) {
  if (upto >= next_seq_) return std::nullopt;
  const auto s = streams_.find(vnode);
  if (s == streams_.end()) return 0;
  std::uint64_t freed = 0;
  auto& out = s->second.out;
  while (!out.empty() && out.front().seq <= upto) {
    if (out.front().kept) {
      freed += out.front().kept->footprint();
      --packets_kept_;
    }
    out.pop_front();
  }
  bytes_kept_ -= freed;
  if (out.empty()) erase(s);
  return freed;
}

std::vector<packet> send_streams::take_due(clock::time_point now) {
  std::vector<packet> due;
  for (auto& [vnode, s] : streams_) {
    std::uint64_t prev = 0;  // the entry before it, or 0: what went before was acknowledged meanwhile
    for (auto& o : s.out) {
      if (o.kept && o.due <= now) {
        bytes_kept_ -= o.kept->footprint();
        --packets_kept_;
        o.kept->stream_prev = prev;  // an owner that lost its state must not wait for what it acknowledged
        due.push_back(std::move(*o.kept));
        o.kept.reset();
      }
      prev = o.seq;
    }
  }
  // Oldest first, so that a stream's packets go out again in their order.
  std::sort(due.begin(), due.end(),
            [](const packet& a, const packet& b) { return a.stream_seq < b.stream_seq; });
  return due;
}

// One out again (not kept) starts from resend_after too when its first hop gives it back.
void send_streams::hasten(stream& s, clock::time_point at) {
  for (auto& o : s.out) {
    o.backoff = {};  // keep() starts it from resend_after
    if (o.kept) o.due = std::min(o.due, at);
  }
}

void send_streams::hasten(std::uint64_t vnode, clock::time_point at) {
  if (stream* s = find(vnode)) hasten(*s, at);
}

void send_streams::hasten_all(clock::time_point at) {
  for (auto& [vnode, s] : streams_) hasten(s, at);
}

send_streams::clock::duration send_streams::waited(const packet& p) const {
  const auto s = streams_.find(p.dest);
  if (s == streams_.end()) return {};
  const auto o = find_seq(s->second.out, p.stream_seq);
  return o == s->second.out.end() ? clock::duration{} : o->backoff;
}

std::uint64_t send_streams::drop_stream(std::uint64_t dest) {
  const auto s = streams_.find(dest);
  if (s == streams_.end()) return 0;
  std::uint64_t freed = 0;
  for (const auto& o : s->second.out) {
    if (!o.kept) continue;
    freed += o.kept->footprint();
    --packets_kept_;
  }
  bytes_kept_ -= freed;
  erase(s);
  return freed;
}

std::optional<send_streams::clock::time_point> send_streams::next_due() const {
  std::optional<clock::time_point> next;
  for (const auto& [vnode, s] : streams_) {
    for (const auto& o : s.out) {
      if (o.kept && (!next || o.due < *next)) next = o.due;
    }
  }
  return next;
}

std::vector<packet> send_streams::take_all() {
  std::vector<packet> all;
  for (auto it = streams_.begin(); it != streams_.end();) {
    auto& out = it->second.out;
    for (auto& o : out) {
      if (o.kept) all.push_back(std::move(*o.kept));
    }
    std::erase_if(out, [](const outstanding& o) { return o.kept.has_value(); });
    if (out.empty() && last_ == &it->second) last_ = nullptr;
    it = out.empty() ? streams_.erase(it) : std::next(it);
  }
  bytes_kept_ = 0;
  packets_kept_ = 0;
  std::sort(all.begin(), all.end(),
            [](const packet& a, const packet& b) { return a.stream_seq < b.stream_seq; });
  return all;
}

}  // namespace phoenix::overlay
