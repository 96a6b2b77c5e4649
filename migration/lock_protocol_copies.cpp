// migration/lock_protocol_copies.cpp — copies of a query (docs/migration.md, "Copies of a query"). A query goes
// to a virtual node and is not numbered end to end; a link that finds a new incarnation at the address it
// dialled sends again what the old one never acknowledged, though the old one may have passed it on. So a query
// may arrive twice, at the node that answered it or at whoever assumes its virtual node by then. Only the first
// reply is the attempt's answer; the rest of lock_protocol is in lock_protocol.cpp.
#include <algorithm>

#include "migration/lock_protocol.hpp"
#include "migration/log.hpp"

namespace phoenix::migration {

// Called for current messages only (decision 8): a reply to this attempt's query after its first reply. The
// cleanup_ack of the cleanup such a reply got is stale (current() takes only the one cleanup_to_ awaits).
bool lock_protocol::is_copy(const message& m) const {
  switch (m.what) {
    case kind::lock_you_first:
    case kind::ok1:
    case kind::fail1:
      return replied_;
    default:
      return false;
  }
}

// Answered as a stale reply is, and nothing of the attempt changes: its own lock, taken for the first reply,
// stays until the lock2 it sent is answered.
void lock_protocol::on_copy(const message& m) {
  const vp_t q = m.from;
  switch (m.what) {
    case kind::lock_you_first:
      send(q, kind::withdraw, m.attempt);  // q counted an invitation for it
      break;
    case kind::ok1:
      send(q, kind::cleanup, m.attempt);  // q granted its lock for the copy
      break;
    default:  // fail1: it ends nothing
      break;
  }
}

// The record of answered queries is bounded, so a copy may come after its query was forgotten. While the grant
// made for it is held (for a transfer too) or pending, the copy is dropped all the same: granted again under
// the same number, it would make a late give_request of the first grant pass for the second's. Otherwise it
// is answered again, and its initiator takes the reply for a copy's or a stale one.
bool lock_protocol::holds_grant_for(vp_t q, std::uint64_t n) const {
  return (locked_ && holder_ == q && grant_attempt_ == n) || has_pending(q, n);
}

bool lock_protocol::answered_before(vp_t q, std::uint64_t n) {
  const std::pair<vp_t, std::uint64_t> query{q, n};
  if (std::find(answered_.begin(), answered_.end(), query) != answered_.end()) return true;
  if (answered_.size() == max_answered) answered_.pop_front();
  answered_.push_back(query);
  return false;
}

}  // namespace phoenix::migration
