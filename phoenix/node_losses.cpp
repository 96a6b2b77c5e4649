// node_losses.cpp — intervals lost in transit that this node alone knows of (given_lost_): it released them to a
// taker that crashed before anyone heard it assume them, or they came with an interval next to them from a
// giver that had (phoenix/handover.hpp, "losses"). The node records each as the crashed taker's in its routing
// table, so that it is reported orphaned; advertises it in transit, so that it is reported should this node
// crash too; adopts it under orphan_policy "adopt" (orphan_adoption.hpp); and hands it on with the interval next
// to it, which its taker's interval touches where this node's no longer does. docs/overlay.md, "Owners that go
// away without leaving". Everything here holds the progress token.
#include <algorithm>

#include "base/interval_set.hpp"
#include "phoenix/log.hpp"
#include "phoenix/node_impl.hpp"

namespace phoenix {

namespace {
// What came with an interval and whose taker stays reachable from here this long is forgotten: the giver was
// wrong, or the taker came back.
constexpr int handed_in_patience = 4;  // times orphan_after_ms
constexpr std::size_t max_handed_out = 4;
}  // namespace

void Node::Impl::note_given_lost(Interval s) {
  if (std::find(given_lost_.begin(), given_lost_.end(), s) != given_lost_.end()) return;
  if (given_lost_.size() == max_given_lost) {
    overlay_->transit_over(given_lost_.front());
    given_lost_.erase(given_lost_.begin());
  }
  given_lost_.push_back(s);
  overlay_->hold_in_transit(s);
}

void Node::Impl::forget_given_lost(const std::function<bool(const Interval&)>& gone) {
  std::erase_if(given_lost_, [&](const Interval& g) {
    if (!gone(g)) return false;
    overlay_->transit_over(g);
    return true;
  });
}

// A given-lost interval ends once no record holds any of it, however young (others own it, or its taker came
// back); a record not yet reported (this node was alone lately) keeps it.
void Node::Impl::prune_given_lost() {
  const auto records = overlay_->orphaned(true);
  forget_given_lost([&](const Interval& g) {
    return std::none_of(records.begin(), records.end(), [&](const overlay::overlay_view::lost_owner& l) {
      return std::any_of(l.intervals.begin(), l.intervals.end(),
                         [&](const auto& i) { return i.lo < g.hi && g.lo < i.hi; });
    });
  });
}

// The migration driver gave up on the taker of s: s is the taker's, and what went with s comes back here.
void Node::Impl::lost_in_transit(vp_t taker, Interval s, std::chrono::steady_clock::duration gone) {
  overlay_->note_lost_in_transit(taker, s, gone);
  note_given_lost(s);
  for (auto it = handed_out_.begin(); it != handed_out_.end(); ++it) {
    if (it->first != s) continue;
    for (const auto& l : it->second) {
      overlay_->note_lost_in_transit(l.taker, l.span, {});
      note_given_lost(l.span);
    }
    handed_out_.erase(it);
    break;
  }
}

// The transfer of s is over. s stays advertised in transit while it is given-lost (its taker crashed).
void Node::Impl::transit_over(Interval s) {
  std::erase_if(handed_out_, [&](const auto& h) { return h.first == s; });
  if (std::find(given_lost_.begin(), given_lost_.end(), s) == given_lost_.end()) overlay_->transit_over(s);
}

// The parts of given_lost_ next to s that some record of a crashed taker holds go with s; kept in handed_out_
// until the transfer of s is over.
std::vector<handed_loss> Node::Impl::hand_over_losses(Interval s) {
  std::vector<handed_loss> out;
  const auto records = overlay_->orphaned(true);
  forget_given_lost([&](const Interval& g) {
    if (g.hi != s.lo && g.lo != s.hi) return false;
    for (const auto& l : records)
      for (const auto& i : l.intervals) {
        const Interval part{std::max(g.lo, i.lo), std::min(g.hi, i.hi)};
        if (part.lo < part.hi && (part.hi == s.lo || part.lo == s.hi) && out.size() < max_handed_losses)
          out.push_back({l.source, part});
      }
    return true;
  });
  if (!out.empty()) {
    if (handed_out_.size() == max_handed_out) handed_out_.erase(handed_out_.begin());
    handed_out_.emplace_back(s, out);
  }
  return out;
}

void Node::Impl::take_handed_losses(Interval s, const std::vector<handed_loss>& losses, std::size_t skipped) {
  if (skipped > 0)
    logger()->warn("{}: {} lost intervals that came with [{}, {}) are not next to it, or past L; ignored",
                   config_.name, skipped, s.lo, s.hi);
  const auto now = clock::now();
  for (const auto& l : losses) {
    if (l.taker == resource_name_) continue;
    if (handed_in_.size() == max_given_lost) handed_in_.erase(handed_in_.begin());
    handed_in_.push_back({l, now});
  }
  record_handed_losses();
}

// The parts of the records of crashed takers that this node gave them (given_lost_), then what came with an
// interval and waits for its taker to be unreachable here (handed_in_). Not what those takers held besides: other
// nodes saw them go and hold their records, and may have adopted it since; a next incarnation that took it up
// again could assume an interval twice.
std::vector<logged_loss> Node::Impl::losses_for_log() const {
  std::vector<logged_loss> out;
  std::size_t cut = 0;
  const auto add = [&](logged_loss l) {
    if (std::find(out.begin(), out.end(), l) != out.end()) return;
    if (out.size() < max_logged_losses) out.push_back(l);
    else ++cut;
  };
  for (const auto& l : overlay_->orphaned(true)) {
    base::interval_set held;
    for (const auto& i : l.intervals) held.add(i);
    for (const auto& g : given_lost_)
      for (const auto& part : held.intersection(g).intervals()) add({l.source, part});
  }
  for (const auto& h : handed_in_) add({h.loss.taker, h.loss.span});
  if (cut > 0)
    logger()->warn("{}: {} intervals lost on their way to takers that crashed do not fit in the log (at most {}); "
                   "its next incarnation will not know of them",
                   config_.name, cut, max_logged_losses);
  return out;
}

// Taken up as losses that come with an interval: the writer's word on when the taker was lost counts for nothing
// here, and a taker unreachable from this new incarnation (none is reachable yet) is recorded as lost now.
void Node::Impl::restore_logged_losses(const std::vector<logged_loss>& losses) {
  std::size_t skipped = 0;
  const auto now = clock::now();
  for (const auto& l : losses) {
    if (l.span.hi > config_.space_size || l.owner == resource_name_) {
      ++skipped;
      continue;
    }
    if (handed_in_.size() == max_given_lost) handed_in_.erase(handed_in_.begin());
    handed_in_.push_back({{l.owner, l.span}, now});
  }
  if (skipped > 0)
    logger()->warn("{}: {} lost intervals in the log are past L or named as this node's; ignored", config_.name,
                   skipped);
  if (losses.size() > skipped)
    logger()->info("{}: the log names {} intervals lost on their way to owners that crashed; reported orphaned",
                   config_.name, losses.size() - skipped);
  record_handed_losses();
}

// A loss that came with an interval is recorded once its taker is unreachable from here too, as if it had been
// lost just now: how long ago it was lost is not the giver's to say.
void Node::Impl::record_handed_losses() {
  const auto now = clock::now();
  const auto patience = handed_in_patience * std::chrono::milliseconds(config_.orphan_after_ms);
  std::erase_if(handed_in_, [&](const handed_in& h) {
    if (overlay_->can_reach(h.loss.taker)) return now - h.at >= patience;
    overlay_->note_lost_in_transit(h.loss.taker, h.loss.span, {});
    note_given_lost(h.loss.span);
    return true;
  });
  prune_given_lost();
}

}  // namespace phoenix
