#include "overlay/routing_driver.hpp"

#include <algorithm>

#include "overlay/links/frame.hpp"
#include "overlay/routing/route_message.hpp"

namespace phoenix::overlay {

namespace {

using clock = std::chrono::steady_clock;

route_params make_route_params(const overlay_config& c) {
  route_params p;
  p.full_dump_interval = c.full_dump_interval;
  p.split_horizon = c.split_horizon;
  return p;
}

}  // namespace

routing_driver::routing_driver(asio::io_context& io, const overlay_config& config, node_id self,
                               link_manager& links, std::function<void()> routes_changed)
    : config_(config),
      self_(self),
      links_(links),
      routes_changed_(std::move(routes_changed)),
      table_(self, make_route_params(config), clock::now()),
      timer_(io) {
  arm_timer();
}

routing_driver::~routing_driver() {
  *alive_ = false;
  timer_.cancel();
}

// An interval that comes back (taken or given back, or kept when its pack failed) is no longer in transit.
base::interval_set::result routing_driver::assume(base::interval s) {
  const auto r = own_.add(s);
  if (r == base::interval_set::result::ok) drop_transit(s);
  return advertise(r);
}

// Whatever part of s is in transit, no longer; true if anything was.
bool routing_driver::drop_transit(base::interval s) {
  bool any = false;
  for (const auto& i : transit_.intervals()) {
    const base::interval part{std::max(i.lo, s.lo), std::min(i.hi, s.hi)};
    if (part.lo < part.hi) any |= transit_.remove(part) == base::interval_set::result::ok;
  }
  return any;
}
base::interval_set::result routing_driver::release(base::interval s, bool in_transit) {
  const auto r = own_.remove(s);
  if (r == base::interval_set::result::ok && in_transit) (void)transit_.add(s);  // never overlaps: s was own
  return advertise(r);
}

void routing_driver::hold_in_transit(base::interval s) {
  for (const auto& i : own_.intervals())
    if (i.lo < s.hi && s.lo < i.hi) return;
  if (transit_.add(s) == base::interval_set::result::ok) advertise(base::interval_set::result::ok);
}

void routing_driver::transit_over(base::interval s) {
  if (drop_transit(s)) advertise(base::interval_set::result::ok);
}

void routing_driver::withdraw() {
  withdrawn_ = true;
  table_.set_local_intervals({}, clock::now());
  changed();
}

base::interval_set::result routing_driver::advertise(base::interval_set::result r) {
  if (r == base::interval_set::result::ok && !withdrawn_) {
    table_.set_local_intervals(own_.intervals(), clock::now(), transit_.intervals());
    changed();
  }
  return r;
}

bool routing_driver::is_local(std::uint64_t dest) const {
  return dest == self_ || (dest < config_.space_size && own_.contains(dest));
}

std::optional<node_id> routing_driver::next_hop_for(std::uint64_t dest) const {
  if (dest >= config_.space_size) return table_.next_hop(dest);
  const auto owner = table_.owner_of(dest);
  if (!owner || *owner == self_) return std::nullopt;
  return table_.next_hop(*owner);
}

void routing_driver::neighbour_up(node_id peer) { table_.neighbour_up(peer, clock::now()); }
void routing_driver::neighbour_down(node_id peer) { table_.neighbour_down(peer, clock::now()); }

std::optional<std::string> routing_driver::on_update(node_id from, std::span<const std::byte> payload) {
  std::string error;
  const auto u = decode_update(payload, &error);
  if (!u) return "bad routing update: " + error;
  const neighbour* nb = links_.find(from);
  if (nb && nb->leaving) return std::nullopt;  // routes through a leaving neighbour are gone for good
  table_.on_update(from, *u, clock::now());
  return std::nullopt;
}

std::optional<std::string> routing_driver::on_request(node_id from, std::span<const std::byte> payload) {
  std::string error;
  const auto r = decode_request(payload, &error);
  if (!r) return "bad route request: " + error;
  const auto action = table_.on_request(from, *r, clock::now());
  if (action.kind == route_table::request_action::forward) send_request(action.forward_to, action.forwarded);
  return std::nullopt;
}

std::optional<std::string> routing_driver::on_summary(node_id from, std::span<const std::byte> payload) {
  std::string error;
  const auto s = decode_summary(payload, &error);
  if (!s) return "bad route summary: " + error;
  const neighbour* nb = links_.find(from);
  if (nb && nb->leaving) return std::nullopt;  // as its updates: nothing more is taken from a leaver
  table_.on_summary(from, *s, clock::now());
  return std::nullopt;
}

std::optional<std::string> routing_driver::on_dump_request(node_id from, std::span<const std::byte> payload) {
  std::string error;
  if (!decode_dump_request(payload, &error)) return "bad route dump request: " + error;
  table_.on_dump_request(from, clock::now());
  return std::nullopt;
}

void routing_driver::changed() {
  const auto now = clock::now();
  if (const auto g = table_.generation(); g != seen_generation_) {
    seen_generation_ = g;
    routes_changed_();
  }
  for (const route_message& m : table_.collect_output(now)) {
    if (const auto* u = std::get_if<route_update>(&m.what)) {
      if (m.to || m.except.empty()) {
        send_update(*u, m.to);
        continue;
      }
      for (node_id n : table_.neighbours()) {  // split horizon: those in `except` got their own version
        if (!std::binary_search(m.except.begin(), m.except.end(), n)) send_update(*u, n);
      }
    } else if (const auto* r = std::get_if<route_request>(&m.what)) {
      send_request(*m.to, *r);
    } else if (const auto* s = std::get_if<route_summary>(&m.what)) {
      send_frame(m.to, make_control_frame(frame_type::route_summary, encode_summary(*s)));
    } else {
      send_frame(m.to, make_control_frame(frame_type::route_dump_request, {}));
    }
  }
  arm_timer();
}

void routing_driver::arm_timer() {
  timer_.expires_at(table_.next_deadline());
  timer_.async_wait([this, alive = alive_](std::error_code ec) {
    if (!ec && *alive) on_timer();
  });
}

void routing_driver::on_timer() {
  table_.expire(clock::now());  // before collecting: expiry may change what gets advertised
  changed();
}

std::uint64_t routing_driver::send_frame(std::optional<node_id> to, std::vector<std::byte> frame) {
  const std::uint64_t bytes = to ? links_.send_to(*to, std::move(frame)) : links_.send_to_all(frame);
  traffic_.bytes += bytes;
  return bytes;
}

void routing_driver::send_update(const route_update& u, std::optional<node_id> to) {
  if (u.entries.empty() && !u.full_dump) return;
  for (const auto& payload : encode_update(u, links_.params().max_payload)) {
    auto frame = make_control_frame(frame_type::route_update, payload);
    const std::size_t size = frame.size();
    traffic_.update_frames += send_frame(to, std::move(frame)) / size;
  }
}

void routing_driver::send_request(node_id to, const route_request& r) {
  send_frame(to, make_control_frame(frame_type::route_request, encode_request(r)));
  ++traffic_.requests;
}

}  // namespace phoenix::overlay
