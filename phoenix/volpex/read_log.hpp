// read_log.hpp — the objects a dataspace shard delivered, by the call that received them (paper 000, V-A, V-D).
//
// When the first instance of a logical get or read (process, request) is served, the object it received is
// logged under that name; the same call from another replica is answered from the log, so every replica
// receives the same object whenever it asks (the identical-get rule), even after the tag was overwritten or
// removed.
//
// Bounds (paper V-D): at most `capacity` entries stay in memory. When an entry would exceed it, the older half
// is appended to a spill file and read back from there when asked for, so nothing is lost to a lagging replica
// for the life of the shard. An entry is forgotten (in memory or spilled) once `replicas` distinct replicas
// were served it: no other replica of its process can ask again. With replicas 0 (unknown) entries are only
// ever spilled, never forgotten.
//
// Entries carry the virtual node of their tag, so the log splits with the interval it serves (extract/insert,
// for migration). Single-threaded: the shard's owner serialises every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <vector>

#include "phoenix/volpex/object.hpp"

namespace phoenix::volpex {

using replica_name = std::uint64_t;  // the resource name of the node a replica runs on

struct log_entry {
  call_id id;
  std::uint64_t vnode = 0;  // of the tag the call named
  object data;
  std::vector<replica_name> served;  // distinct replicas that received it, the first instance's first
};

class read_log {
 public:
  struct options {
    std::size_t capacity = 4096;  // entries kept in memory (at least 2)
    unsigned replicas = 0;        // replicas per process; 0: unknown, entries are kept
    // Where the spill file is made, on first use (empty: $TMPDIR, else /tmp). It is unlinked as soon as it is
    // open, so it goes with the process however that ends.
    std::filesystem::path spill_dir;
  };
  explicit read_log(options o);
  ~read_log();
  read_log(const read_log&) = delete;
  read_log& operator=(const read_log&) = delete;

  // Log what the first instance of `id` received (served by `first`). An entry already logged for `id` is a
  // programming error of the caller (it asserts).
  void add(call_id id, std::uint64_t vnode, object data, replica_name first);

  // What `id` received, for `replica`; counts `replica` as served. nullopt if `id` is not (or no longer)
  // logged. Throws std::runtime_error if the spill file cannot be read back.
  std::optional<object> serve(call_id id, replica_name replica);
  bool contains(call_id id) const;

  // Migration: remove and return every entry whose vnode lies in [lo, hi), spilled ones read back; add
  // entries taken from another shard (an id already here keeps the entry here).
  std::vector<log_entry> extract(std::uint64_t lo, std::uint64_t hi);
  void insert(std::vector<log_entry> entries);

  struct stats {
    std::size_t in_memory = 0;
    std::size_t spilled = 0;        // entries in the spill file now
    std::uint64_t spills = 0;       // times the older half went to disk
    std::uint64_t spill_bytes = 0;  // bytes written to the spill file
    std::uint64_t forgotten = 0;    // entries dropped after every replica was served
    std::uint64_t read_back = 0;    // entries served from the spill file
  };
  stats statistics() const;

 private:
  struct spilled_entry {
    std::uint64_t vnode = 0;
    std::uint64_t offset = 0;  // of the body in the spill file
    std::uint64_t length = 0;
    std::vector<replica_name> served;
  };
  bool done_with(const std::vector<replica_name>& served) const;
  void spill_older_half();
  void open_spill_file();
  Bytes read_spilled(const spilled_entry& s);

  options options_;
  std::map<call_id, log_entry> memory_;
  std::deque<call_id> order_;  // insertion order of memory_'s entries; ids no longer there are skipped
  std::map<call_id, spilled_entry> spilled_;
  int spill_fd_ = -1;
  std::uint64_t spill_end_ = 0;
  stats stats_;
};

}  // namespace phoenix::volpex
