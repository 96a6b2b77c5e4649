// messages_in_hand.hpp — which messages a node handed to application threads that may still be handling them.
//
// API.md: state handlers never run concurrently with the application's handling of a message. With one
// application thread that holds by construction (pack runs inside that thread's receive call). With several, a
// thread can be applying a message for an interval while another, inside ph_leave say, releases the interval
// and packs its state: the message's effect would miss the packed state and stay behind. So a thread counts as
// handling a message from the moment a receive call hands it over until the thread next enters a receive call,
// ph_poll or a migration call of that node (or exits); the giver of an interval packs only once no thread
// handles a message for a virtual node in it (migration_driver.cpp).
//
// Thread-safe. Nothing is recorded until start() (the node calls it when state handlers are set: without them
// nothing is packed), so until then a receive costs one relaxed atomic load; after, a thread-local lookup and,
// when a message is handed over, one uncontended lock.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <phoenix/node.hpp>
#include <set>

namespace phoenix {

class messages_in_hand {
 public:
  messages_in_hand();
  void start() { recording_.store(true, std::memory_order_relaxed); }  // from now on, and for good
  // A receive call of the calling thread hands it an application message for `dest`.
  void handed_out(vp_t dest);
  // The calling thread entered a receive call, ph_poll or a migration call: it is done with what it had.
  void came_back();
  // Whether a thread still handles a message for a virtual node in s.
  bool handling(Interval s) const;

  // The records of one node, shared with the threads' own records (which outlive the node when a thread does).
  struct records {
    mutable std::mutex mu;
    std::multiset<vp_t> held;  // one entry per thread handling a message: its virtual node
  };

 private:
  bool recording() const { return recording_.load(std::memory_order_relaxed); }

  std::shared_ptr<records> records_;
  std::atomic<bool> recording_{false};
};

}  // namespace phoenix
