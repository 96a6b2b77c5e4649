// phoenix/shell/observe.cpp — the session's view of the overlay: which nodes its routing table knows, their
// "status" replies, control requests by node name, and what the views (views.hpp) are drawn from.
#include <algorithm>
#include <future>
#include <set>

#include "phoenix/shell/log.hpp"
#include "phoenix/shell/node_launch.hpp"
#include "phoenix/shell/session.hpp"

namespace phoenix::shell {
namespace {

constexpr auto status_timeout = std::chrono::milliseconds(2000);

// n2 before n10.
bool natural_less(const std::string& a, const std::string& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

}  // namespace

std::vector<Session::Observed> Session::observe() {
  const auto snapshot = node_->routing_snapshot();
  std::set<vp_t> resources;
  for (const auto& route : snapshot.routes)
    if (route.destination != snapshot.self && route.metric != 0xFFFF) resources.insert(route.destination);
  std::vector<std::pair<vp_t, std::future<std::optional<Node::ControlReply>>>> asked;
  for (vp_t resource : resources) {
    asked.emplace_back(resource, std::async(std::launch::async, [this, resource] {
                         const SignalsBlocked blocked;  // Ctrl-C is for the main thread
                         return node_->control(resource, "status", status_timeout);
                       }));
  }
  std::vector<Observed> out;
  discovered_.clear();
  for (auto& [resource, reply] : asked) {
    auto r = reply.get();
    if (!r || !r->ok) continue;
    auto status = parse_status(r->text);
    if (!status) {
      logger()->warn("phsh: node {} sent a status that does not parse", resource);
      continue;
    }
    if (auto* rec = find(status->name); rec && alive(*rec)) {
      rec->resource = resource;
      rec->remote_pid = status->pid;
    } else if (!find(status->name)) {
      discovered_[status->name] = resource;
    }
    out.push_back({resource, std::move(*status)});
  }
  return out;
}

vp_t Session::resource_of(const std::string& name) {
  if (auto* r = find(name); r && r->resource) return r->resource;
  if (auto it = discovered_.find(name); it != discovered_.end()) return it->second;
  observe();
  if (auto* r = find(name); r && r->resource) return r->resource;
  if (auto it = discovered_.find(name); it != discovered_.end()) return it->second;
  return 0;
}

std::string Session::control(const std::string& name, const std::string& request,
                             std::chrono::milliseconds timeout) {
  auto* r = find(name);
  if (!r && !discovered_.count(name) && !resource_of(name)) throw CommandError("unknown node '" + name + "'");
  if (r && !alive(*r)) throw CommandError(name + ": not running (" + state_text(*r) + ")");
  const vp_t resource = resource_of(name);
  if (!resource) throw CommandError(name + ": not in the overlay yet (no route to it, no status reply)");
  std::error_code ec;
  auto reply = node_->control(resource, request, timeout, &ec);
  if (!reply) {
    if (r) r->resource = 0;  // ask the routing table again next time
    if (ec == make_error_code(PH_ETIMEDOUT))
      throw CommandError(name + ": no reply in " + std::to_string(timeout.count() / 1000) + " s (unreachable)");
    if (ec == make_error_code(PH_EUNREACH)) throw CommandError(name + ": unreachable (no route to it)");
    throw CommandError(name + ": " + ec.message());
  }
  if (!reply->ok) throw CommandError(name + ": " + reply->text);
  return reply->text;
}

std::string Session::name_of(vp_t resource) const {
  if (resource == node_->resource_name()) return options_.config.name.empty() ? "phsh" : options_.config.name;
  for (const auto& r : records_)
    if (r.resource == resource || (!r.resource && r.exited_resource == resource)) return r.name;
  for (const auto& [name, res] : discovered_)
    if (res == resource) return name;
  return "#" + std::to_string(resource);
}

std::vector<NodeView> Session::views(const std::vector<Observed>& observed) const {
  // Owners that went without leaving, with what they held that nobody assumes now.
  std::map<vp_t, std::vector<Interval>> orphaned;
  for (const auto& o : node_->orphaned()) orphaned[o.owner].push_back(o.span);
  std::vector<NodeView> out;
  std::set<vp_t> shown;
  for (const auto& r : records_) {
    NodeView v;
    v.name = r.name;
    v.host = r.host.empty() ? "local" : r.host;
    v.endpoint = r.endpoint;
    v.state = state_text(r);
    v.present = alive(r);
    const auto seen = std::find_if(observed.begin(), observed.end(),
                                   [&](const Observed& o) { return o.status.name == r.name; });
    if (alive(r) && seen != observed.end()) {
      shown.insert(seen->resource);
      v.assumed = seen->status.assumed;
      v.queued = seen->status.queued;
      v.rate = seen->status.rate;
      if (!seen->status.endpoint.empty()) v.endpoint = with_host(seen->status.endpoint, r.host);
      // What phsh asked for (leaving, suspending) says more than the node's own word until it is done.
      if (r.state != NodeState::leaving && r.state != NodeState::suspending && !seen->status.state.empty())
        v.state = seen->status.state;
    } else if (alive(r) && r.state != NodeState::starting) {
      v.state += " (no reply)";
    }
    const vp_t incarnation = r.resource ? r.resource : r.exited_resource;
    if (const auto it = incarnation ? orphaned.find(incarnation) : orphaned.end(); it != orphaned.end()) {
      // Gone without leaving, unless this shell killed it.
      if (r.state != NodeState::killed && (!v.present || v.state.ends_with("(no reply)"))) v.state = "crashed";
      v.orphaned = std::move(it->second);
      orphaned.erase(it);
    }
    out.push_back(std::move(v));
  }
  for (const auto& o : observed) {
    if (shown.count(o.resource) || find(o.status.name)) continue;
    NodeView v;
    v.name = o.status.name;
    v.host = o.status.host;
    v.endpoint = o.status.endpoint;
    v.assumed = o.status.assumed;
    v.queued = o.status.queued;
    v.rate = o.status.rate;
    v.state = o.status.state.empty() ? "running" : o.status.state;
    out.push_back(std::move(v));
  }
  for (auto& [owner, intervals] : orphaned) {  // crashed nodes this shell did not start
    NodeView v;
    v.name = name_of(owner);
    v.state = "crashed";
    v.present = false;
    v.orphaned = std::move(intervals);
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<LinkView> Session::link_views(const std::vector<Observed>& observed) const {
  std::vector<LinkView> out;
  LinkView self{name_of(node_->resource_name()), {}};
  for (const auto& l : node_->routing_snapshot().links)
    if (l.state == "up" && l.peer != 0) self.peers.push_back(name_of(l.peer));
  std::sort(self.peers.begin(), self.peers.end(), natural_less);
  out.push_back(std::move(self));
  for (const auto& o : observed) {
    LinkView v{o.status.name, {}};
    for (vp_t p : o.status.peers) v.peers.push_back(name_of(p));
    std::sort(v.peers.begin(), v.peers.end(), natural_less);
    out.push_back(std::move(v));
  }
  std::sort(out.begin() + 1, out.end(), [](auto& a, auto& b) { return natural_less(a.name, b.name); });
  return out;
}

}  // namespace phoenix::shell
