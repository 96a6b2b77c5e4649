#include "phoenix/messages_in_hand.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace phoenix {

namespace {
void forget(messages_in_hand::records& r, vp_t dest) {
  std::lock_guard lock(r.mu);
  if (const auto it = r.held.find(dest); it != r.held.end()) r.held.erase(it);
}

// Per thread: the message of each node it may still be handling. A thread that exits handles nothing.
struct held_by_thread {
  std::vector<std::pair<std::shared_ptr<messages_in_hand::records>, vp_t>> held;
  ~held_by_thread() {
    for (auto& [r, dest] : held) forget(*r, dest);
  }
};
thread_local held_by_thread this_thread_holds;
}  // namespace

messages_in_hand::messages_in_hand() : records_(std::make_shared<records>()) {}

void messages_in_hand::handed_out(vp_t dest) {
  if (!recording()) return;
  came_back();  // one message per thread and node: the last one handed over
  auto& held = this_thread_holds.held;
  // Records of nodes that are gone (this thread's is the only reference left) go first.
  std::erase_if(held, [](const auto& h) { return h.first.use_count() == 1; });
  {
    std::lock_guard lock(records_->mu);
    records_->held.insert(dest);
  }
  held.emplace_back(records_, dest);
}

void messages_in_hand::came_back() {
  if (!recording()) return;
  auto& held = this_thread_holds.held;
  const auto it = std::find_if(held.begin(), held.end(), [&](const auto& h) { return h.first == records_; });
  if (it == held.end()) return;
  forget(*records_, it->second);
  held.erase(it);
}

bool messages_in_hand::handling(Interval s) const {
  std::lock_guard lock(records_->mu);
  const auto it = records_->held.lower_bound(s.lo);
  return it != records_->held.end() && *it < s.hi;
}

}  // namespace phoenix
