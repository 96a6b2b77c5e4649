#include "phoenix/volpex/target_selection.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace phoenix::volpex {

namespace {

constexpr std::array<std::pair<selection, const char*>, 5> selection_names{{
    {selection::team, "team"},
    {selection::timeout, "timeout"},
    {selection::timestamp, "timestamp"},
    {selection::network, "network"},
    {selection::hybrid, "hybrid"},
}};

}  // namespace

const char* to_string(selection s) {
  for (const auto& [value, name] : selection_names)
    if (value == s) return name;
  return "unknown";
}

std::optional<selection> parse_selection(std::string_view text) {
  for (const auto& [value, name] : selection_names)
    if (text == name) return value;
  return std::nullopt;
}

// Every policy starts as team (paper 004, section 3): replica (self mod K) of the source, one per team.
target_selector::target_selector(selection_options o, replica_index self, unsigned source_replicas)
    : options_(o), self_(self), source_replicas_(source_replicas) {
  options_.probe_messages = std::max(1u, options_.probe_messages);
  for (replica_index i = 0; i < source_replicas; ++i) replicas_.emplace(i, replica{});
  if (source_replicas > 0) target_ = self % source_replicas;
}

std::optional<replica_index> target_selector::choose() const { return target_; }

bool target_selector::alive(replica_index j) const {
  const auto it = replicas_.find(j);
  return it != replicas_.end() && it->second.alive;
}

std::uint64_t target_selector::switches() const { return switches_; }

void target_selector::set_target(std::optional<replica_index> j) {
  if (j == target_) return;
  target_ = j;
  ++switches_;
}

// Replicas with a ping first, the quickest first; then the rest by index.
bool target_selector::ping_before(replica_index a, replica_index b) const {
  const auto& pa = replicas_.at(a).ping;
  const auto& pb = replicas_.at(b).ping;
  if (pa.has_value() != pb.has_value()) return pa.has_value();
  if (pa && *pa != *pb) return *pa < *pb;
  return a < b;
}

// The alive replicas in this policy's cyclic order, starting after j, with j itself last if alive: by index,
// or for hybrid once the pings are in, by ping.
std::vector<replica_index> target_selector::cyclic_after(replica_index j) const {
  std::vector<replica_index> order;
  for (const auto& [i, r] : replicas_) order.push_back(i);
  if (options_.policy == selection::hybrid && ping_order_applied_)
    std::ranges::sort(order, [this](replica_index a, replica_index b) { return ping_before(a, b); });
  if (const auto at = std::ranges::find(order, j); at != order.end())
    std::rotate(order.begin(), at + 1, order.end());
  std::erase_if(order, [this](replica_index i) { return !replicas_.at(i).alive; });
  return order;
}

std::vector<replica_index> target_selector::others_after(replica_index j) const {
  auto order = cyclic_after(j);
  if (!order.empty() && order.back() == j) order.pop_back();
  return order;
}

std::optional<replica_index> target_selector::next_alive_after(replica_index j) const {
  const auto order = cyclic_after(j);
  if (order.empty()) return std::nullopt;
  return order.front();
}

void target_selector::add_replica(replica_index j) {
  if (!replicas_.try_emplace(j).second) return;  // known already: death is final
  if (!target_) set_target(j);
}

void target_selector::on_dead(replica_index j) {
  replicas_[j].alive = false;
  if (options_.policy == selection::network) {
    network_death(j);
    return;
  }
  if (target_ == j) set_target(next_alive_after(j));
  // Hybrid: it may have been the last replica whose ping was missing.
  if (options_.policy == selection::hybrid) apply_ping_order_when_complete();
}

void target_selector::on_back(replica_index j) {
  const auto it = replicas_.find(j);
  if (it == replicas_.end() || it->second.alive) return;
  it->second.alive = true;
  it->second.samples.clear();
  if (!target_ || (options_.policy == selection::team && j == self_ % std::max(1u, source_replicas_)))
    set_target(j);
}

void target_selector::on_answer(replica_index from, std::size_t bytes, std::chrono::nanoseconds round_trip,
                                timestamp their_latest, timestamp mine) {
  const auto it = replicas_.find(from);
  if (it == replicas_.end()) return;
  it->second.latest = their_latest;
  if (options_.policy == selection::network) network_answer(from, bytes, round_trip);
  const bool by_timestamp = options_.policy == selection::timestamp || options_.policy == selection::hybrid;
  if (by_timestamp && target_ == from) apply_lead_rule(their_latest, mine);
}

void target_selector::on_not_yet(replica_index from, timestamp their_latest, timestamp mine) {
  const auto it = replicas_.find(from);
  if (it == replicas_.end()) return;
  it->second.latest = their_latest;
  const bool by_timestamp = options_.policy == selection::timestamp || options_.policy == selection::hybrid;
  if (by_timestamp && target_ == from) apply_lag_rule(their_latest, mine);
}

// Paper 004, section 3, "Timeout Based": past the timeout, ask the next replica and stay with it. Network:
// past the timeout, the wait is the target's measure (see network_censored).
void target_selector::on_waiting(replica_index target, std::chrono::nanoseconds waited) {
  if (target_ != target || waited < options_.timeout) return;
  if (options_.policy == selection::timeout) set_target(next_alive_after(target));
  if (options_.policy == selection::network) network_censored(target, waited);
}

void target_selector::on_ping(replica_index from, std::chrono::nanoseconds round_trip) {
  const auto it = replicas_.find(from);
  if (it == replicas_.end()) return;
  auto& ping = it->second.ping;
  if (!ping || round_trip < *ping) ping = round_trip;
  if (options_.policy == selection::hybrid) apply_ping_order_when_complete();
}

// Paper 004, section 3, "Virtual Time Stamp Based" (and the second step of "Hybrid"): the target lags the
// receiver too far; go to a replica known to have the message — timestamp: the one closest to the receiver's
// state; hybrid: the quickest to reach. None known: the next in cyclic order.
void target_selector::apply_lag_rule(timestamp their_latest, timestamp mine) {
  if (mine <= their_latest || mine - their_latest <= options_.threshold) return;
  const auto others = others_after(*target_);
  std::optional<replica_index> best;
  for (const replica_index j : others) {
    const auto& latest = replicas_.at(j).latest;
    if (!latest || *latest < mine) continue;
    const bool better = !best || (options_.policy == selection::hybrid ? ping_before(j, *best)
                                                                       : *latest < *replicas_.at(*best).latest);
    if (better) best = j;
  }
  if (!best && !others.empty()) best = others.front();
  if (best) set_target(best);
}

// The target leads the receiver too far: spare it for a replica closer to the receiver's own execution state
// that still has the message ("choose the replica closest to its own execution state"; hybrid: "it changes
// its target to the slower one").
void target_selector::apply_lead_rule(timestamp their_latest, timestamp mine) {
  if (their_latest <= mine || their_latest - mine <= options_.threshold) return;
  std::optional<replica_index> best;
  for (const replica_index j : others_after(*target_)) {
    const auto& latest = replicas_.at(j).latest;
    if (!latest || *latest < mine || *latest >= their_latest) continue;
    if (!best || *latest < *replicas_.at(*best).latest) best = j;
  }
  if (best) set_target(best);
}

// Paper 004, section 3, "Hybrid": the pairwise step of init decides the preferred target, once every replica
// still alive has answered its ping.
void target_selector::apply_ping_order_when_complete() {
  if (ping_order_applied_) return;
  std::optional<replica_index> quickest;
  for (const auto& [i, r] : replicas_) {
    if (!r.alive) continue;
    if (!r.ping) return;
    if (!quickest || ping_before(i, *quickest)) quickest = i;
  }
  if (!quickest) return;
  ping_order_applied_ = true;
  set_target(quickest);
}

// Paper 004, section 3, "Network Performance Based": time the replies of each replica in turn, then keep the
// one predicted quickest, and measure again after a while.

// Latency: the quickest answer; per byte: what the answers took beyond it, per byte they carried (the inverse
// bandwidth, weighted towards the large answers). See the header for the reasoning.
double target_selector::predicted_ns(const std::vector<sample>& samples, double size) {
  auto latency = samples.front().round_trip;
  for (const auto& s : samples) latency = std::min(latency, s.round_trip);
  double excess_ns = 0, bytes = 0;
  for (const auto& s : samples) {
    excess_ns += static_cast<double>((s.round_trip - latency).count());
    bytes += static_cast<double>(s.bytes);
  }
  const double per_byte_ns = bytes > 0 ? excess_ns / bytes : 0;
  return static_cast<double>(latency.count()) + size * per_byte_ns;
}

void target_selector::network_answer(replica_index from, std::size_t bytes,
                                     std::chrono::nanoseconds round_trip) {
  ++answers_;
  answer_bytes_ += bytes;
  if (!measuring_) {
    if (options_.reevaluate_every != 0 && ++answers_since_choice_ >= options_.reevaluate_every) start_round();
    return;
  }
  auto& samples = replicas_.at(from).samples;
  if (samples.size() < options_.probe_messages) samples.push_back({bytes, round_trip});
  if (round_complete())
    finish_round();
  else if (target_ == from)
    set_target(next_to_measure_after(from));
}

// A replica that lags the receiver answers only once it has computed the message: measuring it would hold
// the receiver back to its pace for the whole round (and the round robin would come back to it probe_messages
// times). Past the timeout, the wait itself is its measure — a lower bound, and enough to rank it behind every
// replica that answered sooner — and the round goes on without it. A chosen target that makes the receiver
// wait that long has slowed down since it was measured: a new round starts, with this measure for it.
void target_selector::network_censored(replica_index j, std::chrono::nanoseconds waited) {
  if (!measuring_) start_round();
  replicas_.at(j).samples.assign(options_.probe_messages, sample{0, waited});
  if (round_complete())
    finish_round();
  else
    set_target(next_to_measure_after(j));
}

void target_selector::network_death(replica_index j) {
  if (measuring_) {
    if (round_complete())
      finish_round();
    else if (target_ == j)
      set_target(next_to_measure_after(j));
    return;
  }
  if (target_ != j) return;
  if (const auto best = best_measured()) {
    set_target(best);
    return;
  }
  start_round();
  set_target(next_alive_after(j));
}

// The round robin starts at the current target, so a new round costs no switch by itself.
void target_selector::start_round() {
  measuring_ = true;
  answers_since_choice_ = 0;
  for (auto& [i, r] : replicas_) r.samples.clear();
}

bool target_selector::round_complete() const {
  return std::ranges::all_of(replicas_, [this](const auto& item) {
    return !item.second.alive || item.second.samples.size() >= options_.probe_messages;
  });
}

void target_selector::finish_round() {
  measuring_ = false;
  answers_since_choice_ = 0;
  set_target(best_measured());
}

std::optional<replica_index> target_selector::next_to_measure_after(replica_index j) const {
  for (const replica_index i : cyclic_after(j))
    if (replicas_.at(i).samples.size() < options_.probe_messages) return i;
  return std::nullopt;
}

// Lowest predicted time for the average answer size; ties to the first in cyclic order from (self mod K).
std::optional<replica_index> target_selector::best_measured() const {
  const replica_index team = self_ % std::max(1u, source_replicas_);
  auto order = others_after(team);
  if (alive(team)) order.insert(order.begin(), team);
  const double size = answers_ == 0 ? 0 : static_cast<double>(answer_bytes_) / static_cast<double>(answers_);
  std::optional<replica_index> best;
  double best_ns = 0;
  for (const replica_index i : order) {
    const auto& samples = replicas_.at(i).samples;
    if (samples.empty()) continue;
    const double ns = predicted_ns(samples, size);
    if (best && ns >= best_ns) continue;
    best = i;
    best_ns = ns;
  }
  return best;
}

}  // namespace phoenix::volpex
