#include "chaos_check.hpp"

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "phoenix/launch/process_group.hpp"

namespace phoenix::test::chaos {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(launch::Clock::now().time_since_epoch()).count();
}

namespace {

constexpr std::int64_t never = std::numeric_limits<std::int64_t>::max();

struct own_event {
  std::int64_t t;
  char sign;  // '+', '-', 's' or 'k'
  std::uint64_t lo, hi;
  std::string child;
  bool assumed() const { return sign == '+'; }
};

// The files of `dir` whose names start with `prefix`: the rest of the name (the child) and the path.
std::vector<std::pair<std::string, std::filesystem::path>> files(const std::filesystem::path& dir,
                                                                 const std::string& prefix) {
  std::vector<std::pair<std::string, std::filesystem::path>> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const auto name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) out.emplace_back(name.substr(prefix.size()), entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<own_event> read_own(const std::filesystem::path& file, const std::string& child) {
  std::vector<own_event> events;
  std::ifstream in(file);
  own_event e{0, '+', 0, 0, child};
  while (in >> e.t >> e.sign >> e.lo >> e.hi) events.push_back(e);
  return events;
}

// Every process's ownership records, in time order. At one instant a release sorts before an assumption: the
// giver's release precedes the taker's assume.
std::vector<own_event> read_ownership(const std::filesystem::path& dir) {
  std::vector<own_event> events;
  for (const auto& [child, path] : files(dir, "own-")) {
    auto more = read_own(path, child);
    events.insert(events.end(), more.begin(), more.end());
  }
  std::stable_sort(events.begin(), events.end(), [](const own_event& a, const own_event& b) {
    return std::make_tuple(a.t, a.assumed()) < std::make_tuple(b.t, b.assumed());
  });
  return events;
}

// lo -> (hi, child): who assumes what.
using owner_map = std::map<std::uint64_t, std::pair<std::uint64_t, std::string>>;

// A release may cut an interval assumed in pieces (or a piece of one): removes [lo, hi) exactly from `child`'s.
void release(owner_map& owned, std::uint64_t lo, std::uint64_t hi, const std::string& child) {
  std::vector<std::tuple<std::uint64_t, std::uint64_t, std::string>> keep;
  for (auto it = owned.begin(); it != owned.end();) {
    const auto [a, rest] = *it;
    const auto [b, who] = rest;
    if (who == child && a < hi && lo < b) {
      if (a < lo) keep.emplace_back(a, lo, who);
      if (hi < b) keep.emplace_back(hi, b, who);
      it = owned.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [a, b, who] : keep) owned[a] = {b, who};
}

std::string seconds_since(std::int64_t t0, std::int64_t t) {
  char text[32];
  std::snprintf(text, sizeof text, "+%.3fs", static_cast<double>(t - t0) / 1e9);
  return text;
}

// Per virtual node, what the kills excuse: a hop to it sent before `until` (INT64_MIN where no kill lost it).
struct losses {
  std::vector<std::int64_t> until;
  std::vector<std::string> by;  // the kill that lost it last
};

// The rule of chaos.hpp: at each kill, replaying every ownership record up to its instant (the victim's 'k'
// records included), the virtual nodes nobody assumes, except those away on a temporary leave, are lost until
// a live process next assumes them.
losses lost_at_kills(const spec& s, const run_records& run, const std::vector<own_event>& events) {
  losses l{std::vector<std::int64_t>(s.space, std::numeric_limits<std::int64_t>::min()),
           std::vector<std::string>(s.space)};
  std::map<std::string, int> ids;
  for (const auto& e : events) ids.emplace(e.child, static_cast<int>(ids.size()));
  for (const auto& k : run.kills) {
    std::vector<int> owner(s.space, -1);
    std::vector<bool> away(s.space, false);
    std::size_t next = 0;
    for (; next < events.size() && events[next].t <= k.t; ++next) {
      const auto& e = events[next];
      const int id = ids[e.child];
      for (auto v = e.lo; v < e.hi && v < s.space; ++v) {
        if (e.assumed()) {
          owner[v] = id;
          away[v] = false;
        } else if (owner[v] == id) {
          owner[v] = -1;
          away[v] = e.sign == 's';
        }
      }
    }
    std::vector<std::int64_t> end(s.space, 0);
    for (std::uint64_t v = 0; v < s.space; ++v)
      if (owner[v] == -1 && !away[v]) end[v] = never;
    for (; next < events.size(); ++next) {
      const auto& e = events[next];
      if (!e.assumed()) continue;
      for (auto v = e.lo; v < e.hi && v < s.space; ++v)
        if (end[v] == never) end[v] = e.t;
    }
    for (std::uint64_t v = 0; v < s.space; ++v) {
      if (end[v] == 0) continue;
      if (end[v] >= l.until[v]) l.by[v] = k.child;
      l.until[v] = std::max(l.until[v], end[v]);
    }
  }
  return l;
}

// Who assumed virtual node v from a second before `t` on: the first 12 changes, or the last 12 if `newest`.
std::string history(const run_records& run, const std::vector<own_event>& events, std::uint64_t v,
                    std::int64_t t, bool newest = false) {
  std::vector<std::string> shown;
  for (const auto& e : events)
    if (e.t >= t - 1'000'000'000 && e.lo <= v && v < e.hi)
      shown.push_back(" " + e.child + std::string(1, e.sign) + seconds_since(run.t0, e.t));
  if (shown.size() > 12)
    shown.erase(newest ? shown.begin() : shown.begin() + 12, newest ? shown.end() - 12 : shown.end());
  std::string out;
  for (const auto& e : shown) out += e;
  return out.empty() ? " no change" : out;
}

// The hops of one run, per message (origin * messages + seq): one record per hop sent (sent-CHILD) and per hop
// received (receipts-CHILD). Hundreds of thousands of each: compact records, read without iostreams.
struct hop_record {
  std::int64_t t;
  std::uint64_t dest;
  std::uint32_t hop;
  std::uint16_t child;  // index into hops::children
  bool last;
};
struct message_hops {
  std::vector<hop_record> sent, received;
};
struct hops {
  std::vector<std::string> children;
  std::vector<message_hops> messages;
  std::vector<std::string> strays;  // records of messages that do not exist
};

// Calls f with the numbers of each record of a file of records of `fields` numbers.
template <typename F>
void for_each_record(const std::filesystem::path& file, std::size_t fields, F&& f) {
  std::ifstream in(file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const char* p = text.data();
  const char* const end = p + text.size();
  std::int64_t v[8] = {};
  std::size_t k = 0;
  while (p < end) {
    if (*p == ' ' || *p == '\n') {
      ++p;
      continue;
    }
    const auto [next, ec] = std::from_chars(p, end, v[k]);
    if (ec != std::errc()) return;  // not a record: the rest is ignored
    p = next;
    if (++k == fields) {
      f(v);
      k = 0;
    }
  }
}

hops read_hops(const spec& s, const std::filesystem::path& dir) {
  hops h;
  h.messages.resize(static_cast<std::size_t>(s.origins) * static_cast<std::size_t>(s.messages));
  for (const bool receipts : {false, true}) {
    for (const auto& file : files(dir, receipts ? "receipts-" : "sent-")) {
      const std::string& child = file.first;  // named, not bound: the lambda below uses it
      const auto& path = file.second;
      const auto id =
          static_cast<std::size_t>(std::find(h.children.begin(), h.children.end(), child) - h.children.begin());
      if (id == h.children.size()) h.children.push_back(child);
      for_each_record(path, receipts ? 6 : 5, [&](const std::int64_t* v) {
        if (v[1] < 0 || v[1] >= s.origins || v[2] < 0 || v[2] >= s.messages) {
          if (h.strays.size() < 5)
            h.strays.push_back(child + (receipts ? " received" : " sent") + " a hop of message " +
                               std::to_string(v[1]) + "/" + std::to_string(v[2]) + ", which does not exist");
          return;
        }
        const hop_record rec{v[0], static_cast<std::uint64_t>(v[4]), static_cast<std::uint32_t>(v[3]),
                             static_cast<std::uint16_t>(id), receipts && v[5] == 1};
        auto& m = h.messages[static_cast<std::size_t>(v[1] * s.messages + v[2])];
        (receipts ? m.received : m.sent).push_back(rec);
      });
    }
  }
  auto by_hop = [](const hop_record& a, const hop_record& b) {
    return std::tie(a.hop, a.dest, a.t) < std::tie(b.hop, b.dest, b.t);
  };
  for (auto& m : h.messages) {
    std::sort(m.sent.begin(), m.sent.end(), by_hop);
    std::sort(m.received.begin(), m.received.end(), by_hop);
  }
  return h;
}

// The accounting of hops under the rules of chaos.hpp. `diagnose`: explain each fault in r.errors, and check
// the counters and the cover too.
void account(const spec& s, const run_records& run, result& r, bool diagnose) {
  const auto events = read_ownership(run.dir);
  const auto lost = lost_at_kills(s, run, events);
  const auto h = read_hops(s, run.dir);
  std::vector<bool> killed(h.children.size(), false);
  for (const auto& k : run.kills)
    for (std::size_t i = 0; i < h.children.size(); ++i) killed[i] = killed[i] || h.children[i] == k.child;
  int faults = 0;
  auto fault = [&](const std::string& what) {
    if (diagnose && ++faults <= 20) r.errors.push_back(what);
  };
  for (const auto& stray : h.strays) {
    ++r.duplicates;
    fault(stray);
  }
  auto where = [&](std::uint64_t v, std::int64_t t, bool newest = false) {
    if (v >= s.space) return "; virtual node " + std::to_string(v) + " is outside the space";
    std::string owners;
    for (const auto& e : events) {  // who assumed v at t, replayed (more than one: assumed twice)
      if (e.t > t) break;
      if (e.lo > v || v >= e.hi) continue;
      const auto at = owners.find(" " + e.child + " ");
      if (at != std::string::npos) owners.erase(at, e.child.size() + 1);
      if (e.assumed()) owners += (owners.empty() ? " " : "") + e.child + " ";
    }
    std::string out = "; virtual node " + std::to_string(v) + " assumed then by" +
                      (owners.size() <= 1 ? std::string(" nobody") : owners.substr(0, owners.size() - 1)) +
                      ", changes from a second before:" + history(run, events, v, t, newest);
    if (lost.until[v] != std::numeric_limits<std::int64_t>::min())
      out += "; lost at " + lost.by[v] + "'s kill until " +
             (lost.until[v] == never ? std::string("the end") : seconds_since(run.t0, lost.until[v]));
    return out;
  };
  auto excused_at = [&](const hop_record& rec) { return rec.dest < s.space && rec.t < lost.until[rec.dest]; };
  auto name = [&](const hop_record& rec) { return h.children[rec.child]; };

  std::vector<std::uint64_t> per_vnode(s.space, 0);
  for (std::size_t m = 0; m < h.messages.size(); ++m) {
    const auto& [sent, received] = h.messages[m];
    const auto messages = static_cast<std::size_t>(s.messages);
    const std::string message = std::to_string(m / messages) + "/" + std::to_string(m % messages);
    auto text = [&](std::uint32_t hop) { return message + " hop " + std::to_string(hop); };

    // Each hop, per destination: as many receipts as sends, but for what the kills excuse. Both lists are in
    // (hop, destination) order: walk them side by side.
    auto key = [](const hop_record& rec) { return std::make_pair(rec.hop, rec.dest); };
    std::size_t i = 0, j = 0;
    while (i < sent.size() || j < received.size()) {
      const auto at = i == sent.size()       ? key(received[j])
                      : j == received.size() ? key(sent[i])
                                             : std::min(key(sent[i]), key(received[j]));
      const std::size_t i0 = i, j0 = j;
      while (i < sent.size() && key(sent[i]) == at) ++i;
      while (j < received.size() && key(received[j]) == at) ++j;
      const std::size_t sends = i - i0, receipts = j - j0;
      const auto [hop, v] = at;
      const auto first = sent.begin() + static_cast<std::ptrdiff_t>(i0);
      const auto past = sent.begin() + static_cast<std::ptrdiff_t>(i);
      if (receipts > sends) {
        if (sends > 0 && std::any_of(first, past, excused_at)) {
          r.excused_duplicates += receipts - sends;
          continue;
        }
        r.duplicates += receipts - sends;
        if (!diagnose) continue;
        std::string by;
        for (auto k = j0; k < j; ++k) by += " " + name(received[k]) + seconds_since(run.t0, received[k].t);
        fault("hop " + text(hop) + " to virtual node " + std::to_string(v) +
              (sends == 0 ? std::string(", never sent,")
                          : ", sent by " + name(sent[i0]) + " at " + seconds_since(run.t0, sent[i0].t) + ",") +
              " received " + std::to_string(receipts) + " times:" + by +
              where(v, sends == 0 ? received[j0].t : sent[i0].t));
      } else if (receipts < sends) {
        const auto missing = sends - receipts;
        const auto excusable = static_cast<std::size_t>(std::count_if(
            first, past, [&](const hop_record& rec) { return killed[rec.child] || excused_at(rec); }));
        const auto excused = std::min(missing, excusable);
        r.excused_losses += excused;
        r.missing += missing - excused;
        if (missing > excused)
          fault("hop " + text(hop) + " to virtual node " + std::to_string(v) + ", sent by " + name(sent[i0]) +
                " at " + seconds_since(run.t0, sent[i0].t) + ", never received" +
                (sends > 1 ? " (" + std::to_string(missing) + " of " + std::to_string(sends) + ")"
                           : std::string()) +
                where(v, sent[i0].t));
      }
    }

    // Chains: a process that received a hop not the last sends the next one, unless it was killed first; hop 1
    // comes from the origin, once, unless the origin was killed before it sent it.
    const std::string origin = "m" + std::to_string(m / messages);
    const auto first_sends =
        std::count_if(sent.begin(), sent.end(), [](const hop_record& rec) { return rec.hop == 1; });
    const bool origin_killed = std::any_of(run.kills.begin(), run.kills.end(),
                                           [&](const kill_record& k) { return k.child == origin; });
    if (first_sends == 0 && origin_killed) {
      ++r.ended_at_killed;
    } else if (first_sends != 1 || name(sent[0]) != origin) {
      ++r.missing;
      fault("message " + message + ": hop 1 sent " + std::to_string(first_sends) + " times, not once by " +
            origin);
    }
    std::vector<std::tuple<std::uint32_t, std::uint16_t, int>> owed;  // (hop, process, +1 owed or -1 sent)
    for (const auto& rec : received)
      if (!rec.last) owed.emplace_back(rec.hop + 1, rec.child, 1);
    for (const auto& rec : sent)
      if (rec.hop > 1) owed.emplace_back(rec.hop, rec.child, -1);
    std::sort(owed.begin(), owed.end());
    for (std::size_t k = 0; k < owed.size();) {
      const auto hop = std::get<0>(owed[k]);
      const auto child = std::get<1>(owed[k]);
      int balance = 0;
      for (; k < owed.size() && std::get<0>(owed[k]) == hop && std::get<1>(owed[k]) == child; ++k)
        balance += std::get<2>(owed[k]);
      if (balance < 0) {
        r.duplicates += static_cast<std::uint64_t>(-balance);
        fault(h.children[child] + " sent " + text(hop) + " " + std::to_string(-balance) +
              " times more than it received the hop before");
      } else if (balance > 0 && killed[child]) {
        r.ended_at_killed += static_cast<std::uint64_t>(balance);
      } else if (balance > 0) {
        r.missing += static_cast<std::uint64_t>(balance);
        fault(h.children[child] + " received " + text(hop - 1) + ", not the last, and did not send hop " +
              std::to_string(hop));
      }
    }

    // The receipts the retired messages' chains add up to (without kills, all of them).
    std::uint32_t final_hop = 0;
    for (const auto& rec : received) {
      ++r.receipts;
      if (rec.dest < s.space) ++per_vnode[rec.dest];
      if (rec.last) final_hop = std::max(final_hop, rec.hop);
    }
    r.expected += final_hop;
  }
  if (!diagnose) return;

  // The application state: the counters of the processes that ended by themselves, per virtual node, equal
  // the receipts, where no kill lost the virtual node.
  std::vector<std::uint64_t> counters(s.space, 0);
  std::vector<Interval> finals;
  for (const auto& [child, path] : files(run.dir, "final-")) {
    std::ifstream in(path);
    Interval i;
    in >> i.lo >> i.hi;
    if (!i.empty()) finals.push_back(i);
    std::uint64_t v, c;
    while (in >> v >> c)
      if (v < s.space) counters[v] += c;
  }
  for (std::uint64_t v = 0; v < s.space; ++v) {
    if (lost.until[v] != std::numeric_limits<std::int64_t>::min()) {
      ++r.lost_vnodes;
      continue;
    }
    if (counters[v] == per_vnode[v]) continue;
    if (++r.counter_mismatches <= 5)
      r.errors.push_back("virtual node " + std::to_string(v) + ": counter " + std::to_string(counters[v]) +
                         ", receipts " + std::to_string(per_vnode[v]));
  }

  // The final intervals are disjoint, and cover [0, L) but for what a live process reports orphaned.
  std::vector<Interval> orphaned;
  for (const auto& [child, path] : files(run.dir, "orphaned-")) {
    std::ifstream in(path);
    Interval i;
    std::uint64_t owner;
    while (in >> i.lo >> i.hi >> owner) orphaned.push_back(i);
  }
  auto reported = [&](Interval gap) {
    std::vector<bool> seen(gap.size(), false);
    for (auto o : orphaned)
      for (auto v = std::max(o.lo, gap.lo); v < std::min(o.hi, gap.hi); ++v) seen[v - gap.lo] = true;
    return std::all_of(seen.begin(), seen.end(), [](bool b) { return b; });
  };
  std::sort(finals.begin(), finals.end(), [](Interval a, Interval b) { return a.lo < b.lo; });
  std::uint64_t at = 0;
  r.covered = true;
  finals.push_back({s.space, s.space});
  for (auto i : finals) {
    if (i.lo < at) {
      r.covered = false;
      r.errors.push_back("the final intervals overlap at [" + std::to_string(i.lo) + ", " +
                         std::to_string(std::min(i.hi, at)) + ")");
    } else if (i.lo > at) {
      const Interval gap{at, i.lo};
      if (reported(gap)) {
        r.orphaned_at_end += gap.size();
      } else {
        r.covered = false;
        r.errors.push_back("at the end nobody assumes [" + std::to_string(gap.lo) + ", " +
                           std::to_string(gap.hi) + ") and no live process reports it orphaned" +
                           where(gap.lo, run.t0, true));
      }
    }
    at = std::max(at, i.hi);
  }
}

}  // namespace

std::vector<Interval> owned_at_end(const std::filesystem::path& own_file) {
  owner_map owned;
  for (const auto& e : read_own(own_file, "")) {
    if (e.assumed()) {
      owned[e.lo] = {e.hi, ""};
    } else {
      release(owned, e.lo, e.hi, "");
    }
  }
  std::vector<Interval> out;
  for (const auto& [lo, rest] : owned) {
    if (!out.empty() && out.back().hi == lo) {
      out.back().hi = rest.first;
    } else {
      out.push_back({lo, rest.first});
    }
  }
  return out;
}

void check_ownership(const run_records& run, result& r) {
  const auto events = read_ownership(run.dir);
  r.ownership_events = events.size();
  owner_map owned;
  for (const auto& e : events) {
    if (!e.assumed()) {
      release(owned, e.lo, e.hi, e.child);
      continue;
    }
    auto it = owned.upper_bound(e.lo);
    bool overlap = it != owned.end() && it->first < e.hi;
    if (it != owned.begin() && std::prev(it)->second.first > e.lo) overlap = true;
    if (overlap && ++r.overlaps <= 20)
      r.errors.push_back(e.child + " assumed [" + std::to_string(e.lo) + ", " + std::to_string(e.hi) + ") at " +
                         seconds_since(run.t0, e.t) + " while another process assumed part of it");
    owned[e.lo] = {e.hi, e.child};
  }
}

void check_deliveries(const spec& s, const run_records& run, result& r) { account(s, run, r, true); }

std::uint64_t unaccounted(const spec& s, const run_records& run) {
  result scratch;
  account(s, run, scratch, false);
  return scratch.missing;
}

// The [phoenix] and [migration] lines of each events- file (link noise left out), newest last. Indented, so
// that a filter of the runtime's own log lines on stderr (scripts/chaos-soak.sh drops lines starting with
// "[20") keeps them.
std::string recent_events(const run_records& run) {
  constexpr std::size_t per_process = 40;
  std::string out;
  for (const auto& k : run.kills)
    out += "--- " + k.child + " was killed (" + k.kind + ") at " + seconds_since(run.t0, k.t) + "\n";
  for (const auto& [child, path] : files(run.dir, "events-")) {
    std::ifstream in(path);
    std::vector<std::string> kept;
    for (std::string line; std::getline(in, line);)
      if (line.find("] [phoenix] ") != std::string::npos || line.find("] [migration] ") != std::string::npos)
        kept.push_back(line);
    out += "--- " + child + ": last " + std::to_string(std::min(kept.size(), per_process)) + " of " +
           std::to_string(kept.size()) + " runtime events\n";
    for (std::size_t i = kept.size() > per_process ? kept.size() - per_process : 0; i < kept.size(); ++i)
      out += "  " + kept[i] + '\n';
  }
  return out;
}

}  // namespace phoenix::test::chaos
