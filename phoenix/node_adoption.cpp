// node_adoption.cpp — what a node does with orphaned intervals under orphan_policy "adopt": the node whose
// interval touches one assumes it (orphan_adoption.hpp decides which) and its application is told through the
// adoption handler before any message for it is received (Node::set_adoption_handler; docs/overlay.md,
// "Owners that go away without leaving").
#include "phoenix/log.hpp"
#include "phoenix/node_impl.hpp"
#include "phoenix/orphan_adoption.hpp"

namespace phoenix {

std::error_code Node::Impl::set_adoption_handler(Node::AdoptionHandler handler) {
  if (!handler) return make_error_code(PH_EINVAL);
  if (!running_) return make_error_code(PH_ESTATE);
  progress_->call([&] { migration_->set_adoption_handler(std::move(handler)); });
  return {};
}

void Node::Impl::arm_adoption() {
  const auto period = std::max(std::chrono::milliseconds(config_.orphan_after_ms) / 4, std::chrono::milliseconds(10));
  adoption_timer_->expires_after(period);
  adoption_timer_->async_wait([this](std::error_code ec) {
    if (ec || !running_) return;
    adopt_orphan();
    arm_adoption();
  });
}

// Holding the token. Not while a migration involves this node: the protocol's interval must not change under
// it (the same rule as ph_assume); not once it is finalizing or suspending (its protocol is closed).
void Node::Impl::adopt_orphan() {
  if (!running_ || migration_->protocol().closing() || migration_involved()) return;
  prune_given_lost();
  const auto listed = orphans();
  if (listed.empty()) return;
  const auto owned = [this](vp_t v) { return overlay_->assumes(v) || overlay_->owner_of(v).has_value(); };
  const auto o = adoption_for(overlay_->assumed().intervals(), listed,
                              std::chrono::milliseconds(config_.orphan_after_ms), owned, given_lost_);
  if (!o) return;
  if (migration_->tells_adoptions()) {
    std::lock_guard lock(inbox_mu_);
    adoption_untold_.push_back(o->span);
  }
  if (!assume_now(o->span)) {
    std::lock_guard lock(inbox_mu_);
    std::erase(adoption_untold_, o->span);
    return;
  }
  sync_migration_interval();
  logger()->warn("{}: adopted [{}, {}) of node {}, unreachable for {} ms (orphan_policy adopt): its state is lost",
                 config_.name, o->span.lo, o->span.hi, o->owner, o->lost_for.count());
  migration_->adopted(o->span, o->owner);
}

// The adoption timer adopts a given-lost interval once the rules allow (four times orphan_after for a node that
// assumes nothing), or forgets it once others own it; until then, or the deadline, the node stays.
bool Node::Impl::adopt_given_lost(clock::time_point deadline) {
  if (!adoption_timer_) return false;
  drive_migration([&] { return given_lost_.empty() || !overlay_->assumed().empty(); }, deadline);
  return progress_->call([&] { return !overlay_->assumed().empty(); });
}

}  // namespace phoenix
