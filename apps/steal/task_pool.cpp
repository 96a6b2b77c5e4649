// apps/steal/task_pool.cpp — see task_pool.hpp.
#include "apps/steal/task_pool.hpp"

#include <algorithm>

#include "apps/multicast/multicast.hpp"
#include "apps/steal/byte_codec.hpp"
#include "apps/steal/log.hpp"

namespace phoenix::apps {
namespace {

using clock = std::chrono::steady_clock;
constexpr std::uint32_t state_version = 1;

void write_name(ByteWriter& w, const JoinName& j) {
  w.u64(j.vnode);
  w.u64(j.creator);
  w.u64(j.serial);
}
bool read_name(ByteReader& r, JoinName& j) { return r.u64(j.vnode) && r.u64(j.creator) && r.u64(j.serial); }

VnodeMap identity_map() {
  return VnodeMap{[](std::uint64_t j) { return static_cast<vp_t>(j); }, true};
}

}  // namespace

TaskPool::TaskPool(Node& node, Application& app, PoolOptions options)
    : node_(node), app_(app), options_(options), rng_(options.seed ? options.seed : node.resource_name()) {
  node_.set_state_handlers([this](Interval s) { return pack(s); },
                           [this](Interval s, std::span<const std::byte> state) { return unpack(s, state); });
}

void TaskPool::start(Bytes root_task) { deque_.push_front(Task{std::move(root_task), JoinName{}, 0}); }

std::optional<vp_t> TaskPool::home() const {
  const auto mine = node_.assumed();
  if (mine.empty()) return std::nullopt;
  return std::min_element(mine.begin(), mine.end(), [](auto& a, auto& b) { return a.lo < b.lo; })->lo;
}

// --- running ------------------------------------------------------------------------------------------------

TaskPool::End TaskPool::run(const Hooks& hooks) {
  auto last_poll = clock::now();
  auto last_look = last_poll;
  launch::RunControl control(node_, hooks, options_.leave_timeout, options_.leave_retry, steal_log());
  // Reading the clock can cost as much as a small task (in a virtual machine especially), so a busy node reads
  // it once every `stride` tasks: the stride doubles while the clock shows looks much closer together than the
  // poll interval, and halves when they are further apart.
  std::uint32_t stride = 1, countdown = 1;
  home_ = home();
  home_stale_ = false;
  for (;;) {
    if (done_) return End::done;
    if (control.stop()) return End::stopped;
    if (!deque_.empty() && --countdown > 0) {
      run_head();
      continue;
    }
    const auto now = clock::now();
    if (now - last_look < options_.poll_interval / 4) {
      stride = std::min<std::uint32_t>(stride * 2, 1024);
    } else if (now - last_look > options_.poll_interval && stride > 1) {
      stride /= 2;
    }
    last_look = now;
    countdown = stride;
    if (const auto end = control.tick_and_leave(now)) return *end;
    refresh_home();  // a leave that did not finish may have moved part of it
    if (deque_.empty()) {
      maybe_steal();
      if (auto m = node_.recv_for(any_tag, std::chrono::milliseconds(2))) handle(*m);
      while (auto m = node_.try_recv(any_tag)) handle(*m);
      refresh_home();
      last_poll = clock::now();
      stride = countdown = 1;
      continue;
    }
    if (now - last_poll >= options_.poll_interval) {
      while (auto m = node_.try_recv(any_tag)) handle(*m);
      refresh_home();
      last_poll = clock::now();
      if (deque_.empty()) continue;  // a thief took the last task
    }
    run_head();
  }
}

void TaskPool::run_head() {
  Task t = std::move(deque_.front());
  deque_.pop_front();
  ++stats_.tasks_run;
  Outcome out = app_.run(t.body);
  if (!out.divided) {
    deliver(t.parent, t.slot, std::move(out.result));
    return;
  }
  const auto at = home_;
  if (out.children.empty() || !at) {
    // Nothing to wait for (or nowhere to name a join: this node gave everything away meanwhile, which run()
    // never lets happen between tasks): combine at once.
    std::vector<Bytes> none;
    deliver(t.parent, t.slot, app_.combine(out.context, none));
    return;
  }
  const JoinName name{*at, node_.resource_name(), next_serial_++};
  Join j;
  j.parent = t.parent;
  j.parent_slot = t.slot;
  j.context = std::move(out.context);
  j.values.resize(out.children.size());
  j.missing = static_cast<std::uint32_t>(out.children.size());
  joins_.emplace(name, std::move(j));
  for (std::size_t i = out.children.size(); i-- > 0;) {
    deque_.push_front(Task{std::move(out.children[i]), name, static_cast<std::uint32_t>(i)});
  }
}

// A value for slot `slot` of join j: combined here if the join is here, otherwise sent to its virtual node.
void TaskPool::deliver(const JoinName& j, std::uint32_t slot, Bytes value) {
  if (j.is_root()) {
    const auto mine = node_.assumed();
    const bool here = std::any_of(mine.begin(), mine.end(), [](const Interval& s) { return s.contains(0); });
    if (here) return finish(std::move(value));
  } else if (auto it = joins_.find(j); it != joins_.end()) {
    return apply(it, slot, std::move(value));
  }
  ByteWriter w;
  write_name(w, j);
  w.u32(slot);
  w.bytes(value);
  ++stats_.results_sent;
  if (auto ec = node_.send(j.vnode, options_.first_tag + Tag::tag_result, std::move(w).take())) {
    steal_log()->error("sending a value to virtual node {} failed: {}", j.vnode, ec.message());
  }
}

void TaskPool::apply(std::map<JoinName, Join>::iterator it, std::uint32_t slot, Bytes value) {
  Join& j = it->second;
  if (slot >= j.values.size() || j.values[slot]) {
    ++stats_.bad_messages;
    steal_log()->error("value for slot {} of a join with {} slots{}", slot, j.values.size(),
                       slot < j.values.size() ? " arrived twice" : "");
    return;
  }
  j.values[slot] = std::move(value);
  if (--j.missing > 0) return;
  std::vector<Bytes> values;
  values.reserve(j.values.size());
  for (auto& v : j.values) values.push_back(std::move(*v));
  Bytes combined = app_.combine(j.context, values);
  const JoinName parent = j.parent;
  const std::uint32_t parent_slot = j.parent_slot;
  joins_.erase(it);
  deliver(parent, parent_slot, std::move(combined));
}

// The root's value is here. The run ends on every node, this one included, when the "done" multicast reaches
// it: the first hop may be this node itself, and it must send the rest on.
void TaskPool::finish(Bytes value) {
  result_ = std::move(value);
  if (auto ec = multicast(node_, options_.first_tag + Tag::tag_done, IndexRange{0, node_.space_size()},
                          identity_map(), {})) {
    steal_log()->error("announcing the end failed: {}", ec.message());
  }
}

// --- messages -----------------------------------------------------------------------------------------------

void TaskPool::handle(const Message& m) {
  switch (m.tag() - options_.first_tag) {
    case Tag::tag_steal:
      return on_steal(m);
    case Tag::tag_task:
      return on_task(m);
    case Tag::tag_no_task:
      return on_no_task(m);
    case Tag::tag_result:
      return on_result(m);
    case Tag::tag_done:
      if (accept_multicast(node_, m, identity_map()))
        done_ = true;
      else
        ++stats_.bad_messages;
      return;
    default:
      ++stats_.bad_messages;
      steal_log()->warn("message with tag {} ignored", m.tag());
  }
}

void TaskPool::maybe_steal() {
  const auto now = clock::now();
  if (steal_id_ != 0 && now - steal_sent_ < options_.steal_timeout) return;
  if (now < next_steal_) return;
  const auto mine = node_.assumed();
  const auto at = home();
  if (!at) return;  // assumes nothing (joining or left): nowhere to receive a task
  // A random virtual node outside this node's own intervals (it has only one in practice).
  std::uint64_t own = 0;
  for (const auto& s : mine) own += s.hi - s.lo;
  const std::uint64_t space = node_.space_size();
  if (own >= space) return;  // alone: nobody to steal from
  std::uint64_t pick = std::uniform_int_distribution<std::uint64_t>(0, space - own - 1)(rng_);
  auto sorted = mine;
  std::sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.lo < b.lo; });
  for (const auto& s : sorted) {
    if (pick >= s.lo) pick += s.hi - s.lo;
  }
  // Unique per thief, so a reply meant for the node that held the thief's virtual node before is told apart.
  steal_id_ = (node_.resource_name() * 0x9e3779b97f4a7c15ULL) ^ (stats_.steals_sent + 1);
  if (steal_id_ == 0) steal_id_ = 1;
  steal_sent_ = now;
  ByteWriter w;
  w.u64(*at);
  w.u64(steal_id_);
  ++stats_.steals_sent;
  if (auto ec = node_.send(pick, options_.first_tag + Tag::tag_steal, std::move(w).take())) {
    steal_log()->error("sending a steal request failed: {}", ec.message());
  }
}

void TaskPool::on_steal(const Message& m) {
  ByteReader r(m.bytes());
  std::uint64_t reply_to = 0, id = 0;
  if (!r.u64(reply_to) || !r.u64(id) || !r.at_end()) {
    ++stats_.bad_messages;
    return;
  }
  ByteWriter w;
  w.u64(id);
  int tag = options_.first_tag + Tag::tag_no_task;
  if (!deque_.empty()) {
    Task t = std::move(deque_.back());
    deque_.pop_back();
    ++stats_.tasks_stolen_from_me;
    write_name(w, t.parent);
    w.u32(t.slot);
    w.bytes(t.body);
    tag = options_.first_tag + Tag::tag_task;
  }
  if (auto ec = node_.send(reply_to, tag, std::move(w).take())) {
    steal_log()->error("answering a steal request failed: {}", ec.message());
  }
}

void TaskPool::on_task(const Message& m) {
  ByteReader r(m.bytes());
  std::uint64_t id = 0;
  Task t;
  if (!r.u64(id) || !read_name(r, t.parent) || !r.u32(t.slot) || !r.bytes(t.body) || !r.at_end()) {
    ++stats_.bad_messages;
    steal_log()->error("malformed task message dropped");
    return;
  }
  if (id == steal_id_) steal_id_ = 0;
  backoff_ = std::chrono::microseconds(0);
  ++stats_.tasks_received;
  deque_.push_back(std::move(t));
}

void TaskPool::on_no_task(const Message& m) {
  ByteReader r(m.bytes());
  std::uint64_t id = 0;
  if (!r.u64(id) || !r.at_end()) {
    ++stats_.bad_messages;
    return;
  }
  if (id != steal_id_) return;  // an answer to a request of the node that had this virtual node before
  steal_id_ = 0;
  // Back off exponentially while nobody has work, so idle nodes near the end do not flood the busy ones.
  backoff_ = std::min(options_.steal_backoff_max, std::max(std::chrono::microseconds(50), backoff_ * 2));
  next_steal_ = clock::now() + backoff_;
}

void TaskPool::on_result(const Message& m) {
  ByteReader r(m.bytes());
  JoinName j;
  std::uint32_t slot = 0;
  Bytes value;
  if (!read_name(r, j) || !r.u32(slot) || !r.bytes(value) || !r.at_end()) {
    ++stats_.bad_messages;
    steal_log()->error("malformed value message dropped");
    return;
  }
  if (j.is_root()) return finish(std::move(value));
  auto it = joins_.find(j);
  if (it == joins_.end()) {
    const auto mine = node_.assumed();
    if (std::none_of(mine.begin(), mine.end(), [&](const Interval& s) { return s.contains(j.vnode); })) {
      // The virtual node moved after the message arrived: send it on to the join's new place.
      return deliver(j, slot, std::move(value));
    }
    ++stats_.bad_messages;
    steal_log()->error("value for an unknown join ({}, {}, {})", j.vnode, j.creator, j.serial);
    return;
  }
  apply(it, slot, std::move(value));
}

// --- state that moves with virtual nodes ---------------------------------------------------------------------

void TaskPool::refresh_home() {
  if (!home_stale_) return;
  home_ = home();
  home_stale_ = false;
}

// The joins named in s, and the deque if s holds this node's lowest virtual node (or everything goes).
std::optional<Bytes> TaskPool::pack(Interval s) {
  home_stale_ = true;
  ByteWriter w;
  w.u32(state_version);
  std::vector<std::map<JoinName, Join>::iterator> moving;
  for (auto it = joins_.begin(); it != joins_.end(); ++it) {
    if (s.contains(it->first.vnode)) moving.push_back(it);
  }
  w.u64(moving.size());
  for (auto it : moving) {
    const Join& j = it->second;
    write_name(w, it->first);
    write_name(w, j.parent);
    w.u32(j.parent_slot);
    w.bytes(j.context);
    w.u32(static_cast<std::uint32_t>(j.values.size()));
    for (const auto& v : j.values) {
      w.u8(v ? 1 : 0);
      if (v) w.bytes(*v);
    }
  }
  const auto at = home();
  const bool deque_goes = !at || s.contains(*at);
  w.u64(deque_goes ? deque_.size() : 0);
  if (deque_goes) {
    for (const auto& t : deque_) {
      write_name(w, t.parent);
      w.u32(t.slot);
      w.bytes(t.body);
    }
  }
  stats_.state_moved_out += moving.size() + (deque_goes ? deque_.size() : 0);
  for (auto it : moving) joins_.erase(it);
  if (deque_goes) deque_.clear();
  return std::move(w).take();
}

bool TaskPool::unpack(Interval s, std::span<const std::byte> state) {
  home_stale_ = true;
  ByteReader r(state);
  std::uint32_t version = 0;
  std::uint64_t njoins = 0;
  if (!r.u32(version) || version != state_version || !r.u64(njoins)) return false;
  std::vector<std::pair<JoinName, Join>> joins;
  for (std::uint64_t i = 0; i < njoins; ++i) {
    JoinName name;
    Join j;
    std::uint32_t nvalues = 0;
    if (!read_name(r, name) || !s.contains(name.vnode) || !read_name(r, j.parent) || !r.u32(j.parent_slot) ||
        !r.bytes(j.context) || !r.u32(nvalues) || nvalues > state.size()) {
      return false;
    }
    j.values.resize(nvalues);
    for (auto& v : j.values) {
      std::uint8_t present = 0;
      if (!r.u8(present)) return false;
      if (present) {
        v.emplace();
        if (!r.bytes(*v)) return false;
      } else {
        ++j.missing;
      }
    }
    joins.emplace_back(name, std::move(j));
  }
  std::uint64_t ntasks = 0;
  if (!r.u64(ntasks)) return false;
  std::vector<Task> tasks;
  for (std::uint64_t i = 0; i < ntasks; ++i) {
    Task t;
    if (!read_name(r, t.parent) || !r.u32(t.slot) || !r.bytes(t.body)) return false;
    tasks.push_back(std::move(t));
  }
  if (!r.at_end()) return false;
  for (auto& [name, j] : joins) joins_.insert_or_assign(name, std::move(j));
  for (auto& t : tasks) deque_.push_back(std::move(t));
  stats_.state_moved_in += joins.size() + tasks.size();
  return true;
}

}  // namespace phoenix::apps
