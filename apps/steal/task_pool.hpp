// apps/steal/task_pool.hpp — parallel divide-and-conquer by lazy task creation over phoenix (paper,
// section 4.2).
//
// Each node keeps a local deque of tasks. It runs the task at the head; a task either yields a value (a leaf)
// or divides into children, which go to the head of the deque (the first child runs next, depth first) while a
// *join* waits for their values and combines them. A node whose deque is empty sends a steal request to a
// random virtual node; whoever assumes it hands over the task at the tail of its deque, the oldest and so the
// largest. The task tree is thus split near its root, and each node walks a subtree depth first.
//
// Names instead of processors. A join is named by (virtual node, creator's resource name, serial): it lives at
// whichever node assumes that virtual node, and a child's value is sent there. Steal replies go to a virtual
// node of the thief, not to its resource name. So a node may join or leave at any moment: its joins and its
// deque move with its virtual nodes (the migration protocol's pack/unpack), and every message follows the
// virtual node it was sent to, which is what makes the paper's race between a steal request and a leaving
// processor disappear.
//
// Decisions where the paper is silent:
// - Joins are named at the lowest virtual node the creator assumes, and the deque travels with that virtual
// node:
//   when a node gives away the upper half of its interval (a fresh node joins) it keeps its work and the
//   newcomer steals; when it leaves, everything goes to the neighbour that takes its lowest virtual node.
// - A steal request unanswered after `steal_timeout` is replaced by a new one (the reply may have gone to a
// node
//   that took the thief's virtual node); a reply to an older request is still accepted if it carries a task, so
//   no task is ever lost, and an idle node only ever has one request outstanding at a time otherwise.
// - The root's value is sent to virtual node 0; the node that receives it multicasts "done" over [0, L)
//   (apps/multicast), so every node that assumes a virtual node stops.
//
// Threads: a TaskPool belongs to one application thread, which calls run(); the Application's functions and the
// state handlers run on that thread, between tasks.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <phoenix/node.hpp>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "phoenix/launch/run_control.hpp"

namespace phoenix::apps {

// A synchronisation object's global name (paper 4.2: virtual node + local identifier).
struct JoinName {
  vp_t vnode = 0;
  vp_t creator = 0;  // resource name of the node that created it: makes serial unique across the run
  std::uint64_t serial = 0;
  bool is_root() const { return creator == 0; }
  friend auto operator<=>(const JoinName&, const JoinName&) = default;
};

// What running one task produced: its value, or children and the context their values are combined with.
struct Outcome {
  static Outcome value(Bytes v) { return Outcome{std::move(v), {}, {}, false}; }
  static Outcome divide(std::vector<Bytes> children, Bytes context) {
    return Outcome{{}, std::move(children), std::move(context), true};
  }
  Bytes result;
  std::vector<Bytes> children;  // run in this order on this node unless stolen
  Bytes context;
  bool divided = false;
};

// The problem: what a task is and how values combine. Tasks and values are opaque bytes, so they can travel.
class Application {
 public:
  virtual ~Application() = default;
  virtual Outcome run(std::span<const std::byte> task) = 0;
  // The children's values, in the order the children were listed.
  virtual Bytes combine(std::span<const std::byte> context, std::vector<Bytes>& values) = 0;
};

struct PoolOptions {
  int first_tag = 1000;                          // uses tags first_tag .. first_tag + 4
  std::chrono::microseconds poll_interval{200};  // how often a busy node looks at the network between tasks
  std::chrono::milliseconds steal_timeout{200};
  std::chrono::microseconds steal_backoff_max{20000};  // after "no task", wait up to this before asking again
  // One leave attempt; between attempts the node handles its messages (near the end of a run the "done" that
  // ends it may be waiting while the neighbours have stopped and cannot take its interval).
  std::chrono::milliseconds leave_timeout{2000};
  std::chrono::milliseconds leave_retry{200};
  std::uint64_t seed = 0;  // 0: from the resource name
};

struct PoolStats {
  std::uint64_t tasks_run = 0;
  std::uint64_t steals_sent = 0;
  std::uint64_t tasks_stolen_from_me = 0;
  std::uint64_t tasks_received = 0;   // by steals
  std::uint64_t results_sent = 0;     // values sent to a join on another node
  std::uint64_t state_moved_out = 0;  // tasks and joins packed for migration
  std::uint64_t state_moved_in = 0;
  std::uint64_t bad_messages = 0;  // malformed, or a value for a join this node does not have
};

class TaskPool {
 public:
  // Installs the node's state handlers: construct it before the node joins or assumes anything it may give
  // away.
  TaskPool(Node& node, Application& app, PoolOptions options = {});
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  // Puts the root task in this node's deque; its value goes to virtual node 0's node, which ends the run.
  void start(Bytes root_task);

  using Hooks = launch::RunHooks;
  using End = launch::RunEnd;
  End run(const Hooks& hooks);

  // The root's value, on the node that received it.
  const std::optional<Bytes>& result() const { return result_; }
  const PoolStats& stats() const { return stats_; }
  std::size_t queued() const { return deque_.size(); }
  std::size_t joins() const { return joins_.size(); }

 private:
  struct Task {
    Bytes body;
    JoinName parent;
    std::uint32_t slot = 0;
  };
  struct Join {
    JoinName parent;
    std::uint32_t parent_slot = 0;
    Bytes context;
    std::vector<std::optional<Bytes>> values;
    std::uint32_t missing = 0;
  };
  enum Tag : int { tag_steal = 0, tag_task = 1, tag_no_task = 2, tag_result = 3, tag_done = 4 };

  void run_head();
  void deliver(const JoinName& j, std::uint32_t slot, Bytes value);
  void apply(std::map<JoinName, Join>::iterator it, std::uint32_t slot, Bytes value);
  void finish(Bytes value);
  void handle(const Message& m);
  void on_steal(const Message& m);
  void on_task(const Message& m);
  void on_no_task(const Message& m);
  void on_result(const Message& m);
  void maybe_steal();
  std::optional<vp_t> home() const;  // the lowest virtual node this node assumes
  void refresh_home();               // home_ = home() if pack or unpack ran since it was last set
  std::optional<Bytes> pack(Interval s);
  bool unpack(Interval s, std::span<const std::byte> state);

  Node& node_;
  Application& app_;
  PoolOptions options_;
  std::mt19937_64 rng_;
  std::deque<Task> deque_;  // front: head (newest), back: tail (oldest)
  std::map<JoinName, Join> joins_;
  // home() as of the last change of this node's intervals: they change only by migration, which calls pack or
  // unpack (marking home_ stale), and asking the node takes its progress token, too dear once per poll.
  std::optional<vp_t> home_;
  bool home_stale_ = true;
  std::uint64_t next_serial_ = 1;
  std::uint64_t steal_id_ = 0;  // the outstanding request, 0 if none
  std::chrono::steady_clock::time_point steal_sent_{};
  std::chrono::steady_clock::time_point next_steal_{};
  std::chrono::microseconds backoff_{0};
  std::optional<Bytes> result_;
  bool done_ = false;
  PoolStats stats_;
};

}  // namespace phoenix::apps
