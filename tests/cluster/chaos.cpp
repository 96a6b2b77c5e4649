#include "chaos.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <phoenix/config.hpp>
#include <phoenix/node.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "chaos_check.hpp"
#include "overlay/log.hpp"
#include "phoenix/launch/process_group.hpp"
#include "support/temp_dir.hpp"

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

// statics assume a share at once, joiners join, resume takes up a suspended process, relay assumes nothing and
// neither joins nor migrates (a process restarted after a kill, only forwarding).
enum class role { statics, joiner, resume, relay };

struct member_args {
  std::string name;   // stable across a suspension
  std::string child;  // unique per process: names its files
  role how = role::statics;
  int index = 0;                             // origin number, share number
  bool origin = false;                       // sends spec.messages messages
  std::string listen = "tcp://127.0.0.1:0";  // a restarted process listens on its victim's port
  std::vector<std::string> peers;
  bool leaves = false, suspends = false;
  bool killable = false;  // may be killed: not a process that has its leave or its suspension to make
  std::optional<Clock::time_point> chaos_until;  // default: chaos_for after it started
};

// A record file (chaos_check.hpp) written with one write(2) per line: whatever a process recorded before it
// was SIGKILLed is in the file, whole (a stdio buffer would die with it).
class record_file {
 public:
  explicit record_file(const std::filesystem::path& file, bool append = false)
      : fd_(::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (append ? 0 : O_TRUNC), 0644)) {
    if (fd_ < 0) throw std::runtime_error("cannot open " + file.string());
  }
  ~record_file() { ::close(fd_); }
  record_file(const record_file&) = delete;
  record_file& operator=(const record_file&) = delete;

  __attribute__((format(printf, 2, 3))) void line(const char* format, ...) {
    char text[256];
    va_list args;
    va_start(args, format);
    const int n = std::vsnprintf(text, sizeof text, format, args);
    va_end(args);
    if (n <= 0 || static_cast<std::size_t>(n) >= sizeof text ||
        ::write(fd_, text, static_cast<std::size_t>(n)) != n)
      throw std::runtime_error("a record could not be written");
  }

 private:
  int fd_;
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
  if (node.set_state_handlers([&](Interval i) { return app.pack(i); },
                              [&](Interval i, std::span<const std::byte> d) { return app.unpack(i, d); }))
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
    // The partner kill (chaos_check.hpp): the parent arms it with a file; the first process that finds itself
    // holding a migration lock claims it, says so and stops itself, to be killed stopped, the lock still held.
    if (a.killable && s.kills > 0 && now < chaos_until && ::access(arm.c_str(), F_OK) == 0) {
      const auto snap = node.routing_snapshot();
      if (snap.migration_locked && std::rename(arm.c_str(), (dir / ("claimed-" + a.child)).c_str()) == 0) {
        report_line(pipes.report_fd, "LOCKED " + a.child + " " + std::to_string(snap.migration_lock_holder) +
                                         " " + std::to_string(snap.migration_attempting));
        ::raise(SIGSTOP);
      }
    }
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

enum class kill_kind { owner, partner, relay };

const char* kind_name(kill_kind k) {
  switch (k) {
    case kill_kind::owner:
      return "owner";
    case kill_kind::partner:
      return "partner";
    case kill_kind::relay:
      return "relay";
  }
  return "?";
}

std::string since(std::int64_t t0) {
  char text[32];
  std::snprintf(text, sizeof text, "+%.3fs", static_cast<double>(now_ns() - t0) / 1e9);
  return text;
}

}  // namespace

result run(const spec& s, void (*progress)(const std::string&)) {
  temp_dir dir;
  const std::string key = dir.make_key();
  result r;
  run_records records{dir.path(), {}, now_ns()};
  launch::ProcessGroup group;
  std::map<std::string, std::string> ports;     // child -> port
  std::map<std::size_t, member_args> args;      // process index -> how it was started
  std::map<std::size_t, std::uint64_t> counts;  // process index -> messages it retired
  std::map<std::size_t, std::uint64_t> received, migrations, cuts, out_of_hops;
  std::map<std::size_t, bool> owns;  // process index -> its last COUNT said it assumes something
  std::set<std::size_t> ready;       // reported its port, and joined if it joins
  std::set<std::size_t> killed;
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  auto spawn = [&](member_args a) {
    const auto i = group.spawn(
        a.child, [&s, a, &dir, &key](const ChildPipes& p) { return run_member(s, a, dir, key, p); });
    args[i] = std::move(a);
    return i;
  };
  auto member = [&](int i, role how, const std::string& child) {
    member_args a;
    a.name = "m" + std::to_string(i);
    a.child = child;
    a.how = how;
    a.index = i;
    a.origin = how != role::resume && i < s.origins;
    if (ports.count("m0")) a.peers.push_back(ports["m0"]);
    const std::string before = "m" + std::to_string(i - 1);
    if (i > 1 && ports.count(before)) a.peers.push_back(ports[before]);
    a.leaves = how != role::resume && i == 5;
    a.suspends = how != role::resume && i == 2;
    a.killable = !a.leaves && !a.suspends;
    return a;
  };

  spawn(member(0, role::statics, "m0"));
  int next = 1;
  const auto deadline = Clock::now() + s.deadline;
  bool stopped = false;
  std::multimap<Clock::time_point, std::size_t> resume_at;  // paused processes and when to continue them
  std::map<std::size_t, bool> quiet;                        // process index -> its last COUNT said so
  std::set<std::size_t> exited;
  auto continue_due = [&](Clock::time_point now) {
    while (!resume_at.empty() && resume_at.begin()->first <= now) {
      group.signal(resume_at.begin()->second, SIGCONT);
      resume_at.erase(resume_at.begin());
    }
  };

  // The kills: the chaos split into `kills` equal slots, one kill at a random moment of each (seeded), the
  // kinds in turn. Each victim is restarted at once on its port as "kN", alternately a relay and a joiner.
  std::mt19937_64 kill_rng(s.seed * 7919 + 13);
  std::vector<std::pair<Clock::time_point, kill_kind>> plan;
  std::size_t planned = 0;  // plan[planned] is the next kill
  bool armed = false;       // the partner kill waits for a process holding a lock to claim it
  std::optional<Clock::time_point> chaos_end;
  Clock::time_point last_kill{};
  int restarts = 0;
  auto kill_and_restart = [&](std::size_t victim, kill_kind kind, const std::string& why) {
    const std::string name = group.name(victim);
    if (!group.signal(victim, SIGKILL)) {
      say("could not kill " + name + ": it has ended");
      return;
    }
    const auto reaped_by = Clock::now() + 10s;
    while (group.signal(victim, 0) && Clock::now() < reaped_by) std::this_thread::sleep_for(1ms);
    const kill_record k{name, now_ns(), kind_name(kind)};
    killed.insert(victim);
    // What it assumed is released at its death: an adopter's assumption must come after it.
    const auto lost = owned_at_end(dir / ("own-" + name));
    std::string lost_text;
    {
      record_file own(dir / ("own-" + name), true);
      for (auto i : lost) {
        own.line("%" PRId64 " k %" PRIu64 " %" PRIu64 "\n", k.t, i.lo, i.hi);
        lost_text += " [" + std::to_string(i.lo) + ", " + std::to_string(i.hi) + ")";
      }
    }
    records.kills.push_back(k);
    ++r.kills;
    ++(kind == kill_kind::owner ? r.owner_kills : kind == kill_kind::partner ? r.partner_kills : r.relay_kills);
    last_kill = Clock::now();
    member_args a;
    a.name = a.child = "k" + std::to_string(++restarts);
    a.how = restarts % 2 ? role::relay : role::joiner;
    a.index = 100 + restarts;
    a.listen = ports[name];
    a.peers = args[victim].peers;
    a.killable = true;
    a.chaos_until = chaos_end;
    say(since(records.t0) + ": SIGKILLed " + name + " (" + kind_name(kind) + ": " + why + "), assuming" +
        (lost_text.empty() ? " nothing" : lost_text) + "; " + a.child + " starts on its port, " +
        (a.how == role::relay ? "assuming nothing" : "joining"));
    spawn(std::move(a));
  };
  // An owner: a process whose last COUNT said it assumes an interval. A relay: a restarted process that assumes
  // nothing, else one that said it assumed nothing, else an owner (all of them forward for the others).
  auto choose = [&](kill_kind kind) -> std::optional<std::size_t> {
    std::vector<std::size_t> owners, idle, relays;
    for (auto i : ready) {
      if (killed.count(i) || exited.count(i) || !args[i].killable) continue;
      (args[i].how == role::relay ? relays : owns[i] ? owners : idle).push_back(i);
    }
    const auto& pool = kind == kill_kind::owner ? owners
                       : !relays.empty()        ? relays
                       : !idle.empty()          ? idle
                                                : owners;
    if (pool.empty()) return std::nullopt;
    return pool[kill_rng() % pool.size()];
  };
  const auto arm = dir / "arm-partner";
  auto disarm = [&] {
    // Unless a process claims it this very moment: then its LOCKED line is on its way.
    if (armed && std::rename(arm.c_str(), (dir / "arm-expired").c_str()) == 0) {
      armed = false;
      say("no process held a migration lock while the partner kill was armed");
    }
  };
  auto next_kill = [&](Clock::time_point now) {
    if (!chaos_end) return;
    if (armed && now >= *chaos_end) disarm();
    if (armed || planned >= plan.size() || now < plan[planned].first) return;
    const auto kind = plan[planned].second;
    if (kind == kill_kind::partner) {
      std::ofstream(arm) << "armed\n";
      armed = true;
      ++planned;
      say(since(records.t0) + ": the next process found holding a migration lock is killed");
    } else if (const auto victim = choose(kind)) {
      ++planned;
      kill_and_restart(*victim, kind, owns[*victim] ? "it assumes an interval" : "it assumes nothing");
    } else if (now >= *chaos_end) {
      ++planned;
      say(std::string("nobody to kill as ") + kind_name(kind));
    } else {
      plan[planned].first = now + 200ms;
    }
  };

  // With kills some messages end early, so the run stops once every message has ended or a kill explains its
  // end (checked once a second), or nothing has been received for 10 s (20 s if a migration is still under
  // way: it is stuck, and the stop reports it); not before the orphaned intervals of the last kill had time to
  // be adopted (4 orphan_after: orphan_adoption.hpp).
  std::uint64_t last_total = 0;
  auto last_progress = Clock::now();
  std::optional<Clock::time_point> settled_at;
  auto next_account = Clock::now();
  auto may_stop = [&] {
    const auto now = Clock::now();
    std::uint64_t retired = 0, total = 0;
    for (auto [c, n] : counts) retired += n;
    for (auto [c, n] : received) total += n;
    if (total != last_total) {
      last_total = total;
      last_progress = now;
    }
    // Stop only once no migration is under way anywhere: a process that finalized while another's query
    // to its virtual nodes was in flight would leave that attempt waiting for its return.
    const bool all_quiet = std::all_of(quiet.begin(), quiet.end(), [&](const auto& q) {
      return q.second || exited.count(q.first) || killed.count(q.first);
    });
    if (!r.rejoined || !r.resumed || !resume_at.empty()) return false;
    if (s.kills == 0) {
      if (!all_quiet || retired < static_cast<std::uint64_t>(s.origins) * s.messages) return false;
      say("every message retired: stopping");
      return true;
    }
    if (!chaos_end || now < *chaos_end || armed || planned < plan.size()) return false;
    for (const auto& [i, a] : args)
      if (a.child[0] == 'k' && !killed.count(i) && !exited.count(i) && !ready.count(i)) return false;
    if (now < last_kill + 4 * s.orphan_after + 2s) return false;
    if (!settled_at) settled_at = now;
    // A migration still under way after 20 s without a receipt anywhere is stuck: the stop shows it.
    const auto idle = now - std::max(last_progress, *settled_at);
    if (idle >= 20s) {
      say("nothing received for 20 s: stopping");
      return true;
    }
    if (!all_quiet) return false;
    if (idle >= 10s) {
      say("nothing received for 10 s: stopping");
      return true;
    }
    if (now < next_account) return false;
    next_account = now + 1s;
    if (const auto left = unaccounted(s, records)) {
      say(since(records.t0) + ": " + std::to_string(left) + " hops not accounted for yet");
      return false;
    }
    say("every message ended, or a kill explains where it ended: stopping");
    return true;
  };

  while (Clock::now() < deadline && !stopped) {
    auto wake = std::min(deadline, Clock::now() + 50ms);
    if (!resume_at.empty()) wake = std::min(wake, resume_at.begin()->first);
    const auto ev = group.next_event(wake);
    continue_due(Clock::now());
    next_kill(Clock::now());
    if (!ev) {
      if (launch::interrupted()) break;
      continue;
    }
    if (ev->eof) {
      exited.insert(ev->child);
      continue;
    }
    std::istringstream line(ev->line);
    std::string word, child;
    line >> word >> child;
    if (word == "PORT") {
      line >> ports[child];
      if (args[ev->child].how != role::joiner) ready.insert(ev->child);
      if (next < s.origins) {
        const int i = next++;
        spawn(member(i, i < s.statics ? role::statics : role::joiner, "m" + std::to_string(i)));
      } else if (!chaos_end && child == "m" + std::to_string(s.origins - 1)) {
        // Every first process is up: the chaos begins about now.
        const auto start = Clock::now();
        chaos_end = start + s.chaos_for;
        const auto slot = s.chaos_for / std::max(1, s.kills);
        for (int k = 0; k < s.kills; ++k) {
          std::uniform_int_distribution<long> at(slot.count() * 15 / 100, slot.count() * 85 / 100);
          constexpr kill_kind kinds[] = {kill_kind::owner, kill_kind::partner, kill_kind::relay};
          plan.emplace_back(start + slot * k + std::chrono::milliseconds(at(kill_rng)), kinds[k % 3]);
        }
      }
    } else if (word == "COUNT") {
      int is_quiet = 0, owning = 0;
      line >> received[ev->child] >> counts[ev->child] >> migrations[ev->child] >> cuts[ev->child] >>
          is_quiet >> out_of_hops[ev->child] >> owning;
      quiet[ev->child] = is_quiet == 1;
      owns[ev->child] = owning == 1;
      stopped = may_stop();
    } else if (word == "LEFT") {
      r.left = true;
      say(child + " left for good; a fresh process joins");
      spawn(member(s.origins, role::joiner, "m" + std::to_string(s.origins)));
    } else if (word == "JOINED") {
      ready.insert(ev->child);
      if (child == "m" + std::to_string(s.origins)) r.rejoined = true;
    } else if (word == "SUSPENDED") {
      r.suspended = true;
      say(child + " left temporarily; resuming it from its log on another port");
      spawn(member(2, role::resume, "m2-resumed"));
    } else if (word == "PAUSE") {
      ++r.paused_holding_lock;
      say(child + " stopped itself holding a migration lock");
      resume_at.emplace(Clock::now() + s.pause_for, ev->child);
    } else if (word == "LOCKED") {
      armed = false;
      std::string holder, attempting;
      line >> holder >> attempting;
      kill_and_restart(ev->child, kill_kind::partner,
                       "it holds its migration lock, for " + holder +
                           (attempting == "1" ? ", in an attempt of its own" : ""));
    } else if (word == "ERROR") {
      r.errors.push_back(ev->line);
      say(ev->line);
    }
    if (word == "PORT" && child == "m2-resumed") r.resumed = true;
  }
  if (!stopped) {
    std::uint64_t retired = 0;
    std::string per_process;
    for (auto [c, n] : counts) {
      retired += n;
      per_process += " " + group.name(c) + "=" + std::to_string(n);
    }
    std::string busy;
    for (auto [c, q] : quiet)
      if (!q && !exited.count(c) && !killed.count(c)) busy += " " + group.name(c);
    r.errors.push_back("the run did not end before the deadline: " + std::to_string(retired) + " of " +
                       std::to_string(s.origins * s.messages) + " messages retired (" + per_process +
                       " ), rejoined " + std::to_string(r.rejoined) + ", resumed " + std::to_string(r.resumed) +
                       ", still migrating or locked:" + (busy.empty() ? " none" : busy));
  }
  disarm();
  continue_due(Clock::time_point::max());  // nobody stays stopped
  bool clean = group.stop_all(30s);
  if (!clean && !killed.empty()) {
    // stop_all counts the killed among those that did not end cleanly: every other one must have.
    clean = std::all_of(args.begin(), args.end(), [&](const auto& a) {
      return killed.count(a.first) || std::filesystem::exists(dir / ("done-" + a.second.child));
    });
  }
  if (!clean) r.errors.push_back("a process did not finish cleanly");
  for (auto [c, n] : migrations) r.migrations += n;
  for (auto [c, n] : cuts) r.cuts += n;
  for (auto [c, n] : out_of_hops) r.out_of_hops += n;
  check_deliveries(s, records, r);
  check_ownership(records, r);
  // Diagnostics: the processes stuck in a migration, and (when a message went missing) what each still held.
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    const auto name = entry.path().filename().string();
    const bool stuck = name.rfind("stuck-", 0) == 0;
    if (!stuck && (r.missing == 0 || name.rfind("holds-", 0) != 0)) continue;
    std::ostringstream file;
    file << std::ifstream(entry.path()).rdbuf();
    const std::string text = file.str();
    r.errors.push_back(name.substr(6) + (stuck ? " still in a migration at the end: " : " held at the end: ") +
                       text);
  }
  const bool failed = !r.errors.empty() || r.missing || r.duplicates || r.counter_mismatches || r.overlaps ||
                      !r.covered;
  if (failed) r.events = recent_events(records);
  return r;
}

}  // namespace phoenix::test::chaos
