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
#include "chaos_member.hpp"
#include "overlay/log.hpp"
#include "phoenix/launch/process_group.hpp"
#include "support/temp_dir.hpp"


namespace phoenix::test::chaos {
namespace {

using launch::ChildPipes;
using launch::Clock;
using namespace std::chrono_literals;

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
  // kinds in turn, the partner kill first: it waits for a process to claim it, and a lock is held only now and
  // then (armed in the second slot, it once went unclaimed to the end of 8 s of chaos). Each victim is
  // restarted at once on its port as "kN", alternately a relay and a joiner.
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
          constexpr kill_kind kinds[] = {kill_kind::partner, kill_kind::owner, kill_kind::relay};
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
