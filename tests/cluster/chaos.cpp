#include "chaos.hpp"

#include <signal.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <phoenix/config.hpp>
#include <phoenix/node.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "phoenix/launch/process_group.hpp"
#include "overlay/log.hpp"
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

enum class role { statics, joiner, resume };

struct member_args {
  std::string name;   // stable across a suspension
  std::string child;  // unique per process: names its files
  role how = role::statics;
  int index = 0;        // origin number, share number
  bool origin = false;  // sends spec.messages messages
  std::vector<std::string> peers;
  bool leaves = false, suspends = false;
};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

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
  Config c;
  c.name = a.name;
  c.space_size = s.space;
  c.cluster_key_file = key;
  c.retry_interval_ms = 30;
  Node node(c);
  app_state app;
  std::mutex own_mu;
  std::FILE* own = std::fopen((dir / ("own-" + a.child)).c_str(), "w");
  std::FILE* receipts = std::fopen((dir / ("receipts-" + a.child)).c_str(), "w");
  if (!own || !receipts) throw std::runtime_error("cannot open the record files");
  auto record_ownership = [&](bool assumed, Interval i) {
    std::lock_guard lock(own_mu);
    std::fprintf(own, "%" PRId64 " %c %" PRIu64 " %" PRIu64 "\n", now_ns(), assumed ? '+' : '-', i.lo, i.hi);
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
  if (node.initialize("tcp://127.0.0.1:0", a.how == role::resume ? log_file.c_str() : nullptr))
    throw std::runtime_error("initialize failed");
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
  const auto chaos_until = started + s.chaos_for;
  auto next_action = started;
  auto next_report = started;
  std::uint64_t count = 0, finals = 0, migrations = 0, cuts = 0;
  int pauses_left = s.pauses;
  auto next_pause = started + 500ms;
  // quiet: the chaos is over here and no migration involves this process (no attempt, no lock).
  auto report_count = [&] {
    std::fflush(receipts);  // what a process killed at the end received still counts
    const auto snap = node.running() ? node.routing_snapshot() : RoutingSnapshot{};
    const bool quiet = Clock::now() >= chaos_until && !snap.migration_locked && !snap.migration_attempting;
    report_line(pipes.report_fd, "COUNT " + a.child + " " + std::to_string(count) + " " +
                                     std::to_string(finals) + " " + std::to_string(migrations) + " " +
                                     std::to_string(cuts) + " " + (quiet ? "1" : "0") + " " +
                                     std::to_string(snap.out_of_hops));
  };
  for (;;) {
    if (auto m = node.recv_for(tag_data, 5ms)) {
      wire w;
      if (m->size() != sizeof w) throw std::runtime_error("a message of the wrong size");
      std::memcpy(&w, m->data(), sizeof w);
      // A message hops on while the chaos lasts, and at least s.hops times; the receipt that ends it says so.
      const bool last = static_cast<int>(w.hop) >= s.hops && Clock::now() >= chaos_until;
      std::fprintf(receipts, "%u %u %u %" PRIu64 " %d\n", w.origin, w.seq, w.hop, m->dest(), last ? 1 : 0);
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
      } else {
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
    if (a.leaves && now >= started + s.leave_at) {
      if (auto ec = node.leave(30s)) throw std::runtime_error("leave: " + ec.message());
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
          // Still this name's while it is away: marked given up now, taken up again by the resuming process.
          std::fprintf(own, "%" PRId64 " - %" PRIu64 " %" PRIu64 "\n", now_ns(), app.mine.lo, app.mine.hi);
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
      if (auto ec = node.finalize()) throw std::runtime_error("finalize: " + ec.message());
      save_events(dir, a.child);
      app.save(dir / ("final-" + a.child));
      break;
    }
  }
  std::fclose(receipts);
  std::fclose(own);
  return 0;
}

// --- checking -----------------------------------------------------------------------------------------------

struct own_event {
  std::int64_t t;
  bool assumed;
  std::uint64_t lo, hi;
  std::string child;
};

void check_ownership(const temp_dir& dir, result& r) {
  std::vector<own_event> events;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    const auto name = entry.path().filename().string();
    if (name.rfind("own-", 0) != 0) continue;
    std::ifstream in(entry.path());
    own_event e;
    char sign;
    e.child = name.substr(4);
    while (in >> e.t >> sign >> e.lo >> e.hi) {
      e.assumed = sign == '+';
      events.push_back(e);
    }
  }
  // At one instant a release sorts before an assumption: the giver's release precedes the taker's assume.
  std::sort(events.begin(), events.end(), [](const own_event& a, const own_event& b) {
    return std::tie(a.t, a.assumed) < std::tie(b.t, b.assumed);
  });
  r.ownership_events = events.size();
  std::map<std::uint64_t, std::pair<std::uint64_t, std::string>> owned;  // lo -> (hi, child)
  for (const auto& e : events) {
    if (e.assumed) {
      auto it = owned.upper_bound(e.lo);
      bool overlap = it != owned.end() && it->first < e.hi;
      if (it != owned.begin() && std::prev(it)->second.first > e.lo) overlap = true;
      if (overlap) {
        if (++r.overlaps <= 20)
          r.errors.push_back(e.child + " assumed [" + std::to_string(e.lo) + ", " + std::to_string(e.hi) +
                             ") while another process assumed part of it");
      }
      owned[e.lo] = {e.hi, e.child};
    } else {
      // A release may cut an interval assumed in pieces (or a piece of one): remove [lo, hi) exactly.
      std::vector<std::tuple<std::uint64_t, std::uint64_t, std::string>> keep;
      for (auto it = owned.begin(); it != owned.end();) {
        const auto [lo, rest] = *it;
        const auto [hi, child] = rest;
        if (child == e.child && lo < e.hi && e.lo < hi) {
          if (lo < e.lo) keep.emplace_back(lo, e.lo, child);
          if (e.hi < hi) keep.emplace_back(e.hi, hi, child);
          it = owned.erase(it);
        } else {
          ++it;
        }
      }
      for (auto& [lo, hi, child] : keep) owned[lo] = {hi, child};
    }
  }
}

void check_receipts(const spec& s, const temp_dir& dir, result& r) {
  std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> seen;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint32_t> final_hop;  // message -> its last hop
  std::map<std::uint64_t, std::uint64_t> per_vnode;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::string> last_seen;  // message -> its latest receipt
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint32_t> last_hop;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    const auto name = entry.path().filename().string();
    if (name.rfind("receipts-", 0) != 0) continue;
    std::ifstream in(entry.path());
    std::uint32_t origin, seq, hop;
    std::uint64_t dest;
    int last;
    while (in >> origin >> seq >> hop >> dest >> last) {
      ++r.receipts;
      ++per_vnode[dest];
      if (!seen.insert({origin, seq, hop}).second) ++r.duplicates;
      if (last) final_hop[{origin, seq}] = hop;
      if (auto& h = last_hop[{origin, seq}]; hop >= h) {
        h = hop;
        last_seen[{origin, seq}] = "hop " + std::to_string(hop) + " received by " + name.substr(9) +
                                   " for virtual node " + std::to_string(dest);
      }
    }
  }
  // Every message's chain of receipts runs from hop 1 to the hop that ended it, each hop once; a message lost
  // on the way leaves a chain without an end (or a gap).
  for (int o = 0; o < s.origins; ++o) {
    for (int k = 0; k < s.messages; ++k) {
      const auto id = std::make_pair(static_cast<std::uint32_t>(o), static_cast<std::uint32_t>(k));
      const auto end = final_hop.find(id);
      const std::uint32_t hops = end == final_hop.end() ? 0 : end->second;
      if (end == final_hop.end()) {
        if (++r.missing <= 10)
          r.errors.push_back("message " + std::to_string(o) + "/" + std::to_string(k) +
                             " never retired; last " +
                             (last_seen.count(id) ? last_seen[id] : std::string("receipt: none")));
      }
      r.expected += hops;
      for (std::uint32_t h = 1; h <= hops; ++h) r.missing += !seen.count({id.first, id.second, h});
    }
  }

  // The application state: the final processes' counters, per virtual node, equal the receipts.
  std::map<std::uint64_t, std::uint64_t> counters;
  std::vector<Interval> finals;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    if (entry.path().filename().string().rfind("final-", 0) != 0) continue;
    std::ifstream in(entry.path());
    Interval i;
    in >> i.lo >> i.hi;
    if (!i.empty()) finals.push_back(i);
    std::uint64_t v, c;
    while (in >> v >> c) counters[v] += c;
  }
  for (std::uint64_t v = 0; v < s.space; ++v) r.counter_mismatches += counters[v] != per_vnode[v];
  std::sort(finals.begin(), finals.end(), [](Interval a, Interval b) { return a.lo < b.lo; });
  std::uint64_t next = 0;
  r.covered = true;
  for (auto i : finals) {
    r.covered = r.covered && i.lo == next;
    next = i.hi;
  }
  r.covered = r.covered && next == s.space;
}

// What each process's runtime said last about migrations and leaving (the [phoenix] and [migration] lines of
// its events- file; link noise left out), newest last. Indented, so that a filter of the runtime's own log
// lines on stderr (scripts/chaos-soak.sh drops lines starting with "[20") keeps them.
std::string recent_events(const temp_dir& dir) {
  constexpr std::size_t per_process = 40;
  std::string out;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    const auto name = entry.path().filename().string();
    if (name.rfind("events-", 0) != 0) continue;
    std::ifstream in(entry.path());
    std::vector<std::string> kept;
    for (std::string line; std::getline(in, line);)
      if (line.find("] [phoenix] ") != std::string::npos || line.find("] [migration] ") != std::string::npos)
        kept.push_back(line);
    out += "--- " + name.substr(7) + ": last " + std::to_string(std::min(kept.size(), per_process)) + " of " +
           std::to_string(kept.size()) + " runtime events\n";
    for (std::size_t i = kept.size() > per_process ? kept.size() - per_process : 0; i < kept.size(); ++i)
      out += "  " + kept[i] + '\n';
  }
  return out;
}

}  // namespace

result run(const spec& s, void (*progress)(const std::string&)) {
  temp_dir dir;
  const std::string key = dir.make_key();
  result r;
  launch::ProcessGroup group;
  std::map<std::string, std::string> ports;     // child -> port
  std::map<std::size_t, std::uint64_t> counts;  // process index -> messages it retired
  std::map<std::size_t, std::uint64_t> migrations, cuts, out_of_hops;
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  auto spawn = [&](member_args a) {
    group.spawn(a.child, [&s, a, &dir, &key](const ChildPipes& p) { return run_member(s, a, dir, key, p); });
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
    return a;
  };

  spawn(member(0, role::statics, "m0"));
  int next = 1;
  const auto deadline = Clock::now() + s.deadline;
  bool stopped = false;
  std::multimap<Clock::time_point, std::size_t> resume_at;
  std::map<std::size_t, bool> quiet;  // process index -> its last COUNT said so
  std::set<std::size_t> exited;       // paused processes and when to continue them
  auto continue_due = [&](Clock::time_point now) {
    while (!resume_at.empty() && resume_at.begin()->first <= now) {
      group.signal(resume_at.begin()->second, SIGCONT);
      resume_at.erase(resume_at.begin());
    }
  };
  while (Clock::now() < deadline && !stopped) {
    const auto ev =
        group.next_event(resume_at.empty() ? deadline : std::min(deadline, resume_at.begin()->first));
    continue_due(Clock::now());
    if (!ev) {
      if (Clock::now() < deadline && !launch::interrupted()) continue;
      break;
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
      if (next < s.origins) {
        const int i = next++;
        spawn(member(i, i < s.statics ? role::statics : role::joiner, "m" + std::to_string(i)));
      }
    } else if (word == "COUNT") {
      std::uint64_t receipts = 0;
      int is_quiet = 0;
      line >> receipts >> counts[ev->child] >> migrations[ev->child] >> cuts[ev->child] >> is_quiet >>
          out_of_hops[ev->child];
      quiet[ev->child] = is_quiet == 1;
      std::uint64_t retired = 0;
      for (auto [c, n] : counts) retired += n;
      // Stop only once no migration is under way anywhere: a process that finalized while another's query
      // to its virtual nodes was in flight would leave that attempt waiting for its return.
      const bool all_quiet = std::all_of(quiet.begin(), quiet.end(),
                                         [&](const auto& q) { return q.second || exited.count(q.first); });
      if (retired >= static_cast<std::uint64_t>(s.origins) * s.messages && r.rejoined && r.resumed &&
          resume_at.empty() && all_quiet) {
        say("every message retired: stopping");
        stopped = true;
      }
    } else if (word == "LEFT") {
      r.left = true;
      say(child + " left for good; a fresh process joins");
      spawn(member(s.origins, role::joiner, "m" + std::to_string(s.origins)));
    } else if (word == "JOINED") {
      if (child == "m" + std::to_string(s.origins)) r.rejoined = true;
    } else if (word == "SUSPENDED") {
      r.suspended = true;
      say(child + " left temporarily; resuming it from its log on another port");
      spawn(member(2, role::resume, "m2-resumed"));
    } else if (word == "PAUSE") {
      ++r.paused_holding_lock;
      say(child + " stopped itself holding a migration lock");
      resume_at.emplace(Clock::now() + s.pause_for, ev->child);
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
      if (!q && !exited.count(c)) busy += " " + group.name(c);
    r.errors.push_back("the run did not end before the deadline: " + std::to_string(retired) + " of " +
                       std::to_string(s.origins * s.messages) + " messages retired (" + per_process +
                       " ), rejoined " + std::to_string(r.rejoined) + ", resumed " + std::to_string(r.resumed) +
                       ", still migrating or locked:" + (busy.empty() ? " none" : busy));
  }
  continue_due(Clock::time_point::max());  // nobody stays stopped
  if (!group.stop_all(30s)) r.errors.push_back("a process did not finish cleanly");
  for (auto [c, n] : migrations) r.migrations += n;
  for (auto [c, n] : cuts) r.cuts += n;
  for (auto [c, n] : out_of_hops) r.out_of_hops += n;
  check_receipts(s, dir, r);
  check_ownership(dir, r);
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
  if (failed) r.events = recent_events(dir);
  return r;
}

}  // namespace phoenix::test::chaos
