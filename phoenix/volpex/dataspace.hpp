// dataspace.hpp — the server side of the Volpex dataspace for the tags of some virtual nodes (paper 000, V-A).
//
// Tags are spread over the virtual node space by hash (vnode_of); whoever assumes a virtual node serves its
// tags with one of these, and hands the part of an interval to the next owner when the interval migrates
// (pack/unpack). Pure logic: no I/O besides the read log's spill file, no clock, single-threaded.
//
// The rules, for a call (p, n) on tag t (current[p] is the highest request number of p served here):
//   put   n > current[p]: the object replaces t's (a new put; it satisfies waiting gets and reads of t, oldest
//         first); current[p] = n. Otherwise a replica's put: no effect (single-put rule). Either way: stored.
//   get   n > current[p]: t's object is delivered, logged under (p, n), and removed from the table; if t has
//   read  none the call waits for a put. read leaves the object in the table. Otherwise a replica's call:
//         answered from the read log (identical-get rule), or `lost` if the log no longer holds (p, n).
//   A call identical to one already waiting (a replica asked before the first instance was served) waits
//   beside it and is answered from the log once the first is served.
//   decide  (unnumbered) t's object if it has one (delivered); else a non-empty proposal becomes t's object and
//         is delivered; else absent. Never waits.
// Atomic per tag: each call is handled whole before the next.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <phoenix/bytes.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "phoenix/volpex/object.hpp"
#include "phoenix/volpex/read_log.hpp"

namespace phoenix::volpex {

// decide is the runtime's own (the directory of replicas, the choices of wildcard receives; docs/volpex.md):
// the first proposal for a tag takes effect and every call is answered with the value in effect, or `absent`
// when there is none and the call proposed nothing. It carries no request number (request 0): replicas may
// issue different numbers of decides, so numbering them would set their numbering apart.
enum class op : std::uint8_t { put = 1, get = 2, read = 3, decide = 4 };
const char* to_string(op o);

struct request {
  op kind = op::put;
  call_id id;
  std::string tag;
  object data;                // put
  replica_name reply_to = 0;  // the replica that asked
};

enum class outcome : std::uint8_t {
  stored = 1,     // put: the object is in the dataspace (or, for a replica's put, was already)
  ignored = 2,    // put: a replica's, without effect (the single-put rule); the reply says stored to the caller
  delivered = 3,  // get/read: the first instance, from the table
  from_log = 4,   // get/read: a replica's, from the read log
  lost = 5,       // get/read: a replica's whose entry the log no longer holds (an error for the caller)
  absent = 6,     // decide: nothing decided, nothing proposed
};
const char* to_string(outcome o);

struct reply {
  replica_name to = 0;
  op kind = op::put;
  call_id id;
  outcome result = outcome::stored;
  object data;  // get/read, when delivered
};

// How delivered objects enter the read log (docs/volpex.md, "Logging"). copy: a copy of every object delivered
// (the paper's pessimistic logging, V-A). share: the log refers to the delivered object itself, which is
// immutable; its memory is kept only while the table or the log needs it, and nothing is ever copied (the
// paper's optimistic logging, V-C, whose copy on overwrite immutability makes unnecessary).
enum class logging : std::uint8_t { copy, share };

class dataspace {
 public:
  struct options {
    std::uint64_t space_size = 0;  // L, to place tags (vnode_of)
    logging mode = logging::share;
    read_log::options log;
    // false: every call counts as a first instance (no single put, no identical get). Only for the tests that
    // show the rules are what keeps replicas consistent.
    bool replica_rules = true;
  };
  explicit dataspace(options o);

  // Handles one call; appends the replies it makes due (a put may also answer waiting gets and reads).
  void handle(request r, std::vector<reply>& out);

  // Migration: everything of the tags whose virtual node lies in [lo, hi) — objects, waiting calls, read log
  // entries — removed from here and encoded, with every process's current request number (which stays here
  // too: a later request of the same process may still come to either part). unpack merges such a pack in;
  // false (nothing changed) if it is malformed.
  Bytes pack(std::uint64_t lo, std::uint64_t hi);
  bool unpack(std::span<const std::byte> packed);

  struct stats {
    std::uint64_t puts = 0, replica_puts = 0;
    std::uint64_t delivered = 0, from_log = 0, lost = 0;
    std::uint64_t waiting = 0;       // calls waiting for a put now
    std::uint64_t objects = 0;       // tags holding an object now
    std::uint64_t copied_bytes = 0;  // bytes copied into the read log (logging::copy)
    read_log::stats log;
  };
  stats statistics() const;
  std::optional<request_number> current(process_id p) const;

 private:
  bool is_replica(call_id id) const;
  void note_served(call_id id);
  void deliver(const request& r, std::vector<reply>& out);
  void answer_from_log(const request& r, std::vector<reply>& out);
  void serve_waiting(const std::string& tag, std::vector<reply>& out);
  void decide(request& r, std::vector<reply>& out);

  options options_;
  std::unordered_map<std::string, object> table_;
  std::unordered_map<std::string, std::deque<request>> waiting_;  // per tag, oldest first
  std::map<process_id, request_number> current_;
  read_log log_;
  stats stats_;
};

}  // namespace phoenix::volpex
