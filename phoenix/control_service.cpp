// phoenix/control_service.cpp — a node's remote control (control.hpp): the requests it answers, the ones it
// sends, who may send the guarded ones, and its status text.
#include <openssl/rand.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>

#include "base/log.hpp"
#include "phoenix/control_key_file.hpp"
#include "phoenix/log.hpp"
#include "phoenix/node_impl.hpp"

namespace phoenix {

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

// How long Node::control waits for a route to the node it asks before it says PH_EUNREACH.
constexpr auto control_route_wait = std::chrono::seconds(1);
// How many lines `log` returns when the request names no number, and at most.
constexpr std::size_t default_log_lines = 50;
constexpr std::size_t max_log_lines = 1000;

std::uint64_t wall_clock_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace

std::optional<Node::ControlReply> Node::Impl::control(vp_t node, std::string_view request,
                                                      std::chrono::milliseconds timeout, std::error_code* ec) {
  auto failed = [&](int code) -> std::optional<ControlReply> {
    if (ec) *ec = make_error_code(code);
    return std::nullopt;
  };
  if (!running_) return failed(PH_ESTATE);
  const auto deadline = clock::now() + std::max(timeout, std::chrono::milliseconds(0));
  // A node just linked may not have advertised its route yet: wait a little for it, not for the whole timeout.
  progress_->drive_until([&] { return node == resource_name_ || overlay_->can_reach(node); },
                         std::min(deadline, clock::now() + control_route_wait));
  const auto id = progress_->call([&]() -> std::optional<std::uint64_t> {
    if (node != resource_name_ && !overlay_->can_reach(node)) return std::nullopt;
    const auto call = ++next_control_id_;
    control_calls_.emplace(call, std::nullopt);
    overlay::packet p;
    p.dest = node;
    p.tag = control_tag;
    control_packet c{control_packet::kind::request, true, call, std::string(request), std::nullopt};
    if (control_signer_.can_sign() && is_guarded(request)) {
      control_nonce nonce;
      if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) == 1)
        control_signer_.seal(c, node, wall_clock_ms(), nonce);  // else unsealed: the node refuses it
    }
    p.body = encode_control(c);
    overlay_->send_unbounded(std::move(p));
    return call;
  });
  if (!id) return failed(PH_EUNREACH);
  std::optional<control_packet> reply;
  progress_->drive_until([&] { return control_calls_.at(*id).has_value(); }, deadline);
  progress_->call([&] {  // answered or not, the call is over: a late reply finds nobody waiting
    reply = std::move(control_calls_.at(*id));
    control_calls_.erase(*id);
  });
  if (!reply) return failed(PH_ETIMEDOUT);
  if (ec) ec->clear();
  return ControlReply{reply->ok, std::move(reply->text)};
}

std::error_code Node::Impl::load_control_keys() {
  control_guard_ = control_guard();
  control_signer_ = controller_key();
  if (!config_.control_key_file.empty()) {
    auto k = load_controller_key(config_.control_key_file, false);
    if (!k.error.empty()) return fail(PH_EKEY, k.error);
    control_guard_ = control_guard(std::move(k.key));
  }
  if (!config_.controller_key_file.empty()) {
    auto k = load_controller_key(config_.controller_key_file, true);
    if (!k.error.empty()) return fail(PH_EKEY, k.error);
    if (!k.warning.empty()) logger()->warn("{}: {}", config_.name, k.warning);
    control_signer_ = std::move(k.key);
  }
  control_malformed_ = 0;
  control_refused_ = 0;
  return {};
}

// A tag no application and no service can receive: held, it would stay in the inbox for ever.
void Node::Impl::drop_unreceivable(std::int32_t tag, vp_t source) {
  ++unreceivable_dropped_;
  if (!drop_warnings_.pass(std::chrono::steady_clock::now())) return;
  logger()->warn("{}: dropped a message with tag {} from {}, which nothing can receive ({} so far)", config_.name,
                 tag, source, unreceivable_dropped_);
}

void Node::Impl::warn_control(const std::string& what) {
  const auto suppressed = control_warnings_.pass(std::chrono::steady_clock::now());
  if (!suppressed) return;
  if (*suppressed)
    logger()->warn("{}: {} ({} more control warnings suppressed; {} malformed, {} refused so far)",
                   config_.name, what, *suppressed, control_malformed_, control_refused_);
  else
    logger()->warn("{}: {}", config_.name, what);
}

// A guarded request that control_guard refuses: *reply says why. Open requests pass.
bool Node::Impl::refused_control(const control_packet& c, const overlay::packet& p, control_packet& reply) {
  if (!is_guarded(c.text)) return false;
  auto verdict = control_guard_.check(c, resource_name_, p.dest, wall_clock_ms());
  if (verdict.admitted()) return false;
  ++control_refused_;
  warn_control("refused a control request from " + std::to_string(p.source) + ": " + verdict.text);
  reply.ok = false;
  reply.text = std::move(verdict.text);
  return true;
}

void Node::Impl::on_control(overlay::packet&& p) {
  auto c = decode_control(p.body);
  if (!c) {
    ++control_malformed_;
    warn_control("malformed control message from " + std::to_string(p.source) + " dropped");
    return;
  }
  if (c->what == control_packet::kind::reply) {
    const auto call = control_calls_.find(c->id);
    if (call != control_calls_.end()) call->second = std::move(*c);
    return;
  }
  control_packet reply;
  if (!refused_control(*c, p, reply)) reply = answer(c->text, p.source);
  reply.what = control_packet::kind::reply;
  reply.id = c->id;
  overlay::packet out;
  out.dest = p.source;
  out.tag = control_tag;
  out.body = encode_control(reply);
  overlay_->send_unbounded(std::move(out));
}

control_packet Node::Impl::answer(const std::string& request, vp_t from) {
  std::istringstream in(request);
  std::string verb;
  in >> verb;
  control_packet r;
  // on_control checked the seal of every request is_guarded() names; a guarded verb it did not see as one
  // (parsed another way) must not run unchecked.
  if (is_guarded(verb) && !is_guarded(request)) {
    r.ok = false;
    r.text = "malformed request";
    return r;
  }
  if (verb == "status") {
    r.text = status_text();
  } else if (verb == "routes") {
    r.text = describe(snapshot());
  } else if (verb == "log") {
    std::size_t n = default_log_lines;
    if (!(in >> n)) n = default_log_lines;
    const auto lines = base::recent_lines()->last_formatted(std::min(n, max_log_lines));
    for (const auto& l : lines) r.text += l;
  } else if (verb == "leave" || verb == "suspend") {
    ControlRequest q;
    q.kind = verb == "leave" ? ControlRequest::Kind::leave : ControlRequest::Kind::suspend;
    q.from = from;
    if (q.kind == ControlRequest::Kind::suspend && !(in >> q.file)) {
      r.ok = false;
      r.text = "suspend needs a file";
      return r;
    }
    std::lock_guard lock(requests_mu_);
    requests_.push_back(std::move(q));
    r.text = verb + " requested";
    logger()->info("{}: {} requested by {}", config_.name, verb, from);
  } else if (verb == "kill") {
    logger()->warn("{}: killed by a control request from {}", config_.name, from);
    ::kill(::getpid(), SIGKILL);  // a crash, on purpose: nothing is flushed or handed over
  } else {
    r.ok = false;
    r.text = "unknown request '" + verb + "'";
  }
  return r;
}

std::string Node::Impl::status_text() {
  const auto s = snapshot();
  const auto now = clock::now();
  std::uint64_t received = 0;
  std::size_t queued = 0;
  {
    std::lock_guard lock(inbox_mu_);
    queued = inbox_.size();
    received = received_total_;
  }
  const std::uint64_t total = sent_total_ + received;
  const double dt = std::chrono::duration<double>(now - rate_since_).count();
  if (dt >= 0.5) {  // per second since the previous status, or since initialize
    rate_ = static_cast<double>(total - rate_base_) / dt;
    rate_base_ = total;
    rate_since_ = now;
  }
  std::string state;
  {
    std::lock_guard lock(requests_mu_);
    state = app_status_;
  }
  if (state.empty()) state = s.migration_attempting || s.migration_locked ? "migrating" : "running";
  std::string peers;
  std::size_t links_up = 0;
  for (const auto& l : s.links) {
    if (l.state != "up" || l.peer == 0) continue;
    ++links_up;
    if (!peers.empty()) peers += ',';
    peers += std::to_string(l.peer);
  }
  std::ostringstream out;
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.1f", rate_);
  out << "name=" << config_.name << "\nhost=" << host_name() << "\npid=" << ::getpid()
      << "\nendpoint=" << local_port_ << "\nresource=" << resource_name_
      << "\nassumed=" << (s.assumed.empty() ? "" : describe(s.assumed)) << "\nqueued=" << queued
      << "\nwaiting=" << s.waiting_messages << "\ndropped=" << unreceivable_dropped_ << "\nsent=" << sent_total_ << "\nreceived=" << received
      << "\nrate=" << rate << "\nstate=" << state << "\nlinks=" << links_up << "\npeers=" << peers << "\n";
  return out.str();
}

}  // namespace phoenix
