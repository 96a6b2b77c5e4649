// The chaos test's node process: forwards hops, migrates, cuts links, leaves or suspends, and records what it
// does (chaos_check.hpp).
#include "chaos_member.hpp"

#include <signal.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <phoenix/config.hpp>
#include <phoenix/node.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "chaos_check.hpp"
#include "overlay/log.hpp"

namespace phoenix::test::chaos {
namespace {

using launch::ChildPipes;
using launch::Clock;
using launch::report_line;
using namespace std::chrono_literals;

constexpr int tag_data = 1;

struct wire {
  std::uint32_t origin;
  std::uint32_t seq;
  std::uint32_t hop;
  std::uint32_t unused;
};

// The application: a counter per virtual node, moving with the virtual nodes.
struct app_state {
  std::mutex mu;
  std::map<std::uint64_t, std::uint64_t> counters;
  Interval mine;  // tracked from the ownership records

  std::optional<Bytes> pack(Interval s) {
    std::lock_guard lock(mu);
    std::vector<std::uint64_t> words;
    for (auto it = counters.lower_bound(s.lo); it != counters.end() && it->first < s.hi;
         it = counters.erase(it)) {
      words.push_back(it->first);
      words.push_back(it->second);
    }
    Bytes b(words.size() * 8);
    if (!words.empty()) std::memcpy(b.data(), words.data(), b.size());
    return b;
  }
  bool unpack(Interval s, std::span<const std::byte> d) {
    std::lock_guard lock(mu);
    for (std::size_t i = 0; i + 16 <= d.size(); i += 16) {
      std::uint64_t v = 0, c = 0;
      std::memcpy(&v, d.data() + i, 8);
      std::memcpy(&c, d.data() + i + 8, 8);
      if (!s.contains(v)) return false;
      counters[v] += c;
    }
    return true;
  }
  void save(const std::filesystem::path& file) {
    std::lock_guard lock(mu);
    std::ofstream out(file);
    out << mine.lo << ' ' << mine.hi << '\n';
    for (auto [v, c] : counters) out << v << ' ' << c << '\n';
  }
  void load(const std::filesystem::path& file) {
    std::lock_guard lock(mu);
    std::ifstream in(file);
    in >> mine.lo >> mine.hi;
    std::uint64_t v, c;
    while (in >> v >> c) counters[v] = c;
  }
};

// What a process still holds for sending when it stops: messages waiting for a route, and packets queued or
// unacknowledged on each link. After every message retired, all of it is in flight or stuck.
std::string holdings(const RoutingSnapshot& snap) {
  std::string out = "waiting=" + std::to_string(snap.waiting_messages);
  for (const auto& l : snap.links)
    if (l.bytes_queued > 0)
      out += " link:" + std::to_string(l.peer) + "(" + l.state + ")=" + std::to_string(l.frames_unacked) +
             "unacked/" + std::to_string(l.bytes_queued) + "B";
  return out;
}

// The runtime's recent log lines (info and above, whatever stderr prints), for the parent to show on failure.
void save_events(const temp_dir& dir, const std::string& child) {
  std::ofstream out(dir / ("events-" + child));
  for (const auto& line : base::recent_lines()->last_formatted()) out << line << '\n';
}

}  // namespace

int run_member(const spec& s, const member_args& a, const temp_dir& dir, const std::string& key,
               const ChildPipes& pipes) {
  // Declared before the node: its observer and state handlers use them until it is gone.
  app_state app;
  std::mutex own_mu;
  record_file own(dir / ("own-" + a.child));
  record_file receipts(dir / ("receipts-" + a.child));
  record_file sent(dir / ("sent-" + a.child));
  Config c;
  c.name = a.name;
  c.space_size = s.space;
  c.cluster_key_file = key;
  c.retry_interval_ms = 30;
  if (s.kills > 0) {
    c.orphan_policy = "adopt";
    c.orphan_after_ms = static_cast<std::uint32_t>(s.orphan_after.count());
    c.migration_lease_ms = static_cast<std::uint32_t>(s.migration_lease.count());
  }
  Node node(c);
  auto record_ownership = [&](bool assumed, Interval i) {
    std::lock_guard lock(own_mu);
    own.line("%" PRId64 " %c %" PRIu64 " %" PRIu64 "\n", now_ns(), assumed ? '+' : '-', i.lo, i.hi);
    std::lock_guard lock2(app.mu);
    if (assumed) {
      app.mine = app.mine.empty() ? i : Interval{std::min(app.mine.lo, i.lo), std::max(app.mine.hi, i.hi)};
    } else if (i == app.mine) {
      app.mine = {};
    } else if (i.lo == app.mine.lo) {
      app.mine.lo = i.hi;
    } else {
      app.mine.hi = i.lo;
    }
  };
  node.set_ownership_observer(record_ownership);

  const auto log_file = dir / ("log-" + a.name);
  const auto saved_file = dir / ("saved-" + a.name);
  if (a.how == role::resume) app.load(saved_file);
  const Interval resumed = app.mine;
  app.mine = {};
  if (node.initialize(a.listen, a.how == role::resume ? log_file.c_str() : nullptr))
    throw std::runtime_error("initialize on " + a.listen + " failed");
  for (const auto& p : a.peers)
    if (node.add_port(p)) throw std::runtime_error("add_port " + p + " failed");
  // The partner kill (below), tried also in unpack, where a migration lock is held for certain: between two
  // migrate() calls of its own a process holds one rarely, and a run could end with the kill unclaimed. (Not in
  // pack: an interval on its way from a giver that crashed is not reported, a known fault.)
  std::function<void()> claim_partner_kill;
  if (node.set_state_handlers([&](Interval i) { return app.pack(i); },
                              [&](Interval i, std::span<const std::byte> d) {
                                if (claim_partner_kill) claim_partner_kill();
                                return app.unpack(i, d);
                              }))
    throw std::runtime_error("set_state_handlers failed");
  if (a.how == role::statics) {
    if (node.assume(
            share_part(s.space, {static_cast<std::uint64_t>(a.index), static_cast<std::uint64_t>(s.statics)})))
      throw std::runtime_error("assume failed");
  } else if (a.how == role::resume && !resumed.empty()) {
    if (node.assume(resumed)) throw std::runtime_error("assume of the resumed interval failed");
  }
  report_line(pipes.report_fd, "PORT " + a.child + " " + node.local_port());
  if (a.how == role::joiner) {
    if (auto ec = node.join(30s)) throw std::runtime_error("join: " + ec.message());
    report_line(pipes.report_fd, "JOINED " + a.child);
  }

  std::mt19937_64 rng(s.seed * 1000 + static_cast<std::uint64_t>(a.index) * 17 + (a.how == role::resume));
  auto random_vnode = [&] { return std::uniform_int_distribution<std::uint64_t>(0, s.space - 1)(rng); };
  auto send = [&](const wire& w) {
    const auto dest = random_vnode();
    sent.line("%" PRId64 " %u %u %u %" PRIu64 "\n", now_ns(), w.origin, w.seq, w.hop, dest);
    for (int i = 0; i < 100000; ++i) {
      const auto ec = node.send(dest, tag_data, &w, sizeof w);
      if (!ec) return;
      if (ec.value() != PH_EAGAIN) throw std::runtime_error("send: " + ec.message());
      (void)node.poll();
      std::this_thread::sleep_for(1ms);
    }
    throw std::runtime_error("send: back-pressure for 100 s");
  };
  if (a.origin) {
    for (int k = 0; k < s.messages; ++k)
      send(wire{static_cast<std::uint32_t>(a.index), static_cast<std::uint32_t>(k), 1, 0});
  }

  const auto started = Clock::now();
  const auto chaos_until = a.chaos_until.value_or(started + s.chaos_for);
  const auto arm = dir / "arm-partner";
  // The partner kill (chaos_check.hpp): the parent arms it with a file; the first process that finds itself
  // holding a migration lock claims it, says so and stops itself, to be killed stopped, the lock still held.
  claim_partner_kill = [&] {
    if (!a.killable || s.kills == 0 || Clock::now() >= chaos_until || ::access(arm.c_str(), F_OK) != 0) return;
    const auto snap = node.routing_snapshot();
    if (snap.migration_locked && std::rename(arm.c_str(), (dir / ("claimed-" + a.child)).c_str()) == 0) {
      report_line(pipes.report_fd, "LOCKED " + a.child + " " + std::to_string(snap.migration_lock_holder) + " " +
                                       std::to_string(snap.migration_attempting));
      ::raise(SIGSTOP);
    }
  };
  auto next_action = started;
  auto next_report = started;
  std::uint64_t count = 0, finals = 0, migrations = 0, cuts = 0;
  int pauses_left = s.pauses;
  auto next_pause = started + 500ms;
  // quiet: the chaos is over here and no migration involves this process (no attempt, no lock).
  auto report_count = [&] {
    const auto snap = node.running() ? node.routing_snapshot() : RoutingSnapshot{};
    const bool quiet = Clock::now() >= chaos_until && !snap.migration_locked && !snap.migration_attempting;
    report_line(pipes.report_fd,
                "COUNT " + a.child + " " + std::to_string(count) + " " + std::to_string(finals) + " " +
                    std::to_string(migrations) + " " + std::to_string(cuts) + " " + (quiet ? "1" : "0") + " " +
                    std::to_string(snap.out_of_hops) + " " + (snap.assumed.empty() ? "0" : "1"));
  };
  for (;;) {
    if (auto m = node.recv_for(tag_data, 5ms)) {
      wire w;
      if (m->size() != sizeof w) throw std::runtime_error("a message of the wrong size");
      std::memcpy(&w, m->data(), sizeof w);
      // A message hops on while the chaos lasts, and at least s.hops times; the receipt that ends it says so.
      const bool last = static_cast<int>(w.hop) >= s.hops && Clock::now() >= chaos_until;
      receipts.line("%" PRId64 " %u %u %u %" PRIu64 " %d\n", now_ns(), w.origin, w.seq, w.hop, m->dest(),
                    last ? 1 : 0);
      {
        std::lock_guard lock(app.mu);
        ++app.counters[m->dest()];
      }
      ++count;
      finals += last;
      if (!last) send(wire{w.origin, w.seq, w.hop + 1, 0});
    }
    const auto now = Clock::now();
    if (now >= next_report) {
      report_count();
      next_report = now + 200ms;
    }
    if (now < chaos_until && now >= next_action) {
      next_action = now + std::chrono::milliseconds(std::uniform_int_distribution<int>(
                              0, 2 * static_cast<int>(s.action_every.count()))(rng));
      const int dice = std::uniform_int_distribution<int>(0, 9)(rng);
      if (dice == 0) {
        cuts += node.drop_links() > 0;
      } else if (a.how != role::relay) {
        const auto action = dice < 5 ? Node::MigrationAction::give : Node::MigrationAction::take;
        const auto side = rng() % 2 ? Node::Side::below : Node::Side::above;
        const auto count_vn = std::uniform_int_distribution<std::uint64_t>(1, s.space / 16)(rng);
        migrations += !node.migrate(action, side, count_vn, 500ms);
      }
    }
    if (pauses_left > 0 && now < chaos_until && now >= next_pause) {
      const auto snap = node.routing_snapshot();
      if (snap.migration_locked) {
        --pauses_left;
        next_pause = now + 1s;
        report_line(pipes.report_fd, "PAUSE " + a.child);
        ::raise(SIGSTOP);  // the parent sends SIGCONT after pause_for
      }
    }
    claim_partner_kill();
    if (a.leaves && now >= started + s.leave_at) {
      if (auto ec = node.leave(30s)) {
        save_events(dir, a.child);  // unwinding finalizes the node, and nothing else would keep them
        throw std::runtime_error("leave: " + ec.message());
      }
      report_count();
      const auto ec = node.finalize();
      save_events(dir, a.child);
      if (ec) throw std::runtime_error("finalize after leave: " + ec.message());
      report_line(pipes.report_fd, "LEFT " + a.child);
      break;
    }
    if (a.suspends && now >= started + s.suspend_at) {
      report_count();
      const auto ec = node.finalize(log_file.c_str());
      save_events(dir, a.child);
      if (ec) throw std::runtime_error("finalize to a log: " + ec.message());
      {
        std::lock_guard lock(own_mu);
        if (!app.mine.empty()) {
          // Still this name's while it is away: marked given up now ('s'), taken up again by the resuming
          // process.
          own.line("%" PRId64 " s %" PRIu64 " %" PRIu64 "\n", now_ns(), app.mine.lo, app.mine.hi);
        }
      }
      app.save(saved_file);
      report_line(pipes.report_fd, "SUSPENDED " + a.child);
      break;
    }
    if (launch::stop_requested(pipes.control_fd)) {
      // Every attempt ends, committed or aborted, and every lock is free again (no deadlock).
      const auto settle = Clock::now() + 10s;
      auto busy = [&] {
        const auto snap = node.routing_snapshot();
        return snap.migration_locked || snap.migration_attempting;
      };
      while (busy() && Clock::now() < settle) (void)node.recv_for(tag_data + 1, 5ms);
      if (busy()) {
        // Written at once: unwinding finalizes the node, which waits for the migration first.
        const auto snap = node.routing_snapshot();
        std::ofstream(dir / ("stuck-" + a.child))
            << "resource " << snap.self << ": locked " << snap.migration_locked << " by "
            << snap.migration_lock_holder << ", attempting " << snap.migration_attempting << '\n'
            << describe(snap);
        save_events(dir, a.child);
        throw std::runtime_error("a migration attempt or lock outlived the chaos by 10 s");
      }
      report_count();
      const auto snap = node.routing_snapshot();
      std::ofstream(dir / ("holds-" + a.child))
          << "resource " << snap.self << ": " << holdings(snap) << '\n'
          << (snap.waiting_messages > 0 ? describe(snap) : std::string());
      save_events(dir, a.child);  // before finalize, which a process stuck in it may never leave
      {
        std::ofstream out(dir / ("orphaned-" + a.child));
        for (const auto& o : node.orphaned()) out << o.span.lo << ' ' << o.span.hi << ' ' << o.owner << '\n';
      }
      if (auto ec = node.finalize()) throw std::runtime_error("finalize: " + ec.message());
      save_events(dir, a.child);
      app.save(dir / ("final-" + a.child));
      break;
    }
  }
  std::ofstream(dir / ("done-" + a.child)) << "0\n";
  return 0;
}

}  // namespace phoenix::test::chaos
