// The dataspace shard's rules (Volpex paper, sections IV and V-A): single put, identical get, blocking calls,
// atomic per tag, both logging modes, and the pack/unpack that moves tags with their virtual nodes.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "phoenix/volpex/dataspace.hpp"
#include "support/volpex_objects.hpp"

using namespace phoenix;
using namespace phoenix::volpex;
using phoenix::volpex::test::as_text;
using phoenix::volpex::test::text;

namespace {

constexpr std::uint64_t L = 1 << 20;

struct shard {
  dataspace ds;
  explicit shard(logging mode = logging::share, unsigned replicas = 0)
      : ds({.space_size = L, .mode = mode, .log = {.capacity = 64, .replicas = replicas, .spill_dir = {}}}) {}

  std::vector<reply> call(op kind, process_id p, request_number n, const std::string& tag, replica_name from,
                          const std::string& data = {}) {
    std::vector<reply> out;
    ds.handle(request{kind, {p, n}, tag, kind == op::put ? text(data) : nullptr, from}, out);
    return out;
  }
  reply one(op kind, process_id p, request_number n, const std::string& tag, replica_name from,
            const std::string& data = {}) {
    auto out = call(kind, p, n, tag, from, data);
    REQUIRE(out.size() == 1);
    return out.front();
  }
};

}  // namespace

TEST_CASE("dataspace: tags are placed by a hash every process agrees on, spread over the whole space") {
  // Fixed by XXH64 (seed 0) alone: these values may never change, or processes of two versions would disagree.
  CHECK(vnode_of("a", L) == 0xD24EC4F1A98C6E5Bull % L);
  CHECK(vnode_of("", 1ull << 63) == (0xEF46DB3751D8E999ull % (1ull << 63)));
  std::vector<int> buckets(8);
  for (int i = 0; i < 8000; ++i) ++buckets[vnode_of("tag" + std::to_string(i), 8)];
  for (int b : buckets) CHECK((b > 800 && b < 1200));
}

TEST_CASE("dataspace: single put, only the first instance of a logical put takes effect") {
  shard s;
  CHECK(s.one(op::put, 1, 1, "t", 100, "first").result == outcome::stored);
  // Process 2 overwrites; then process 1's lagging replica repeats its put 1: no effect.
  CHECK(s.one(op::put, 2, 1, "t", 200, "second").result == outcome::stored);
  CHECK(s.one(op::put, 1, 1, "t", 101, "first").result == outcome::ignored);
  const auto r = s.one(op::read, 3, 1, "t", 300);
  CHECK(r.result == outcome::delivered);
  CHECK(as_text(r.data) == "second");
  CHECK(s.ds.statistics().puts == 2);
  CHECK(s.ds.statistics().replica_puts == 1);
}

TEST_CASE("dataspace: identical get, a replica receives what the first instance did, whatever happened since") {
  for (const auto mode : {logging::share, logging::copy}) {
    CAPTURE(static_cast<int>(mode));
    shard s(mode);
    s.one(op::put, 1, 1, "t", 100, "v1");
    const auto first = s.one(op::get, 2, 1, "t", 200);  // removes it
    CHECK(first.result == outcome::delivered);
    CHECK(as_text(first.data) == "v1");
    s.one(op::put, 1, 2, "t", 100, "v2");  // a new object under the same tag
    const auto replica = s.one(op::get, 2, 1, "t", 201);
    CHECK(replica.result == outcome::from_log);
    CHECK(as_text(replica.data) == "v1");
    // The replica's get removed nothing: v2 is still there for the next logical get.
    CHECK(as_text(s.one(op::get, 2, 2, "t", 200).data) == "v2");
    CHECK(s.ds.statistics().copied_bytes == (mode == logging::copy ? 4u : 0u));
  }
}

TEST_CASE(
    "dataspace: read leaves the object, get removes it, and a call with nothing to match waits for a put") {
  shard s;
  CHECK(s.call(op::get, 1, 1, "t", 100).empty());
  CHECK(s.call(op::read, 2, 1, "t", 200).empty());
  CHECK(s.ds.statistics().waiting == 2);
  // The put answers the waiting calls oldest first: the get takes the object, so the read waits on.
  auto out = s.call(op::put, 3, 1, "t", 300, "x");
  REQUIRE(out.size() == 2);
  CHECK(out[0].result == outcome::stored);
  CHECK(out[1].to == 100);
  CHECK(as_text(out[1].data) == "x");
  CHECK(s.ds.statistics().waiting == 1);
  out = s.call(op::put, 3, 2, "t", 300, "y");
  REQUIRE(out.size() == 2);
  CHECK(out[1].to == 200);
  CHECK(as_text(out[1].data) == "y");
  CHECK(s.ds.statistics().objects == 1);  // read left it
  CHECK(as_text(s.one(op::read, 1, 2, "t", 100).data) == "y");
}

TEST_CASE("dataspace: replicas waiting beside the first instance all receive the object it receives") {
  shard s;
  // Three replicas of process 1 ask before anything was put; so does process 2, after them.
  for (replica_name r : {100, 101, 102}) CHECK(s.call(op::get, 1, 1, "t", r).empty());
  CHECK(s.call(op::get, 2, 1, "t", 200).empty());
  auto out = s.call(op::put, 9, 1, "t", 900, "only one");
  REQUIRE(out.size() == 4);  // stored, then the three replicas; process 2 waits on (the get took it)
  for (std::size_t i = 1; i < 4; ++i) {
    CHECK(out[i].id == call_id{1, 1});
    CHECK(as_text(out[i].data) == "only one");
  }
  CHECK(out[1].result == outcome::delivered);
  CHECK(out[2].result == outcome::from_log);
  CHECK(out[3].result == outcome::from_log);
  CHECK(s.ds.statistics().waiting == 1);
}

TEST_CASE("dataspace: a replica whose entry the log no longer holds is told so, not given another object") {
  shard s(logging::share, 2);  // two replicas per process: the log forgets after both
  s.one(op::put, 1, 1, "t", 100, "x");
  CHECK(s.one(op::read, 2, 1, "t", 200).result == outcome::delivered);
  CHECK(s.one(op::read, 2, 1, "t", 201).result == outcome::from_log);
  const auto third = s.one(op::read, 2, 1, "t", 202);  // a third replica the configuration did not expect
  CHECK(third.result == outcome::lost);
  CHECK(third.data == nullptr);
}

TEST_CASE(
    "dataspace: request numbers are per process, and one process's numbers never mark another's as replicas") {
  shard s;
  s.one(op::put, 1, 50, "a", 100, "x");
  CHECK(s.one(op::put, 2, 1, "a", 200, "y").result == outcome::stored);
  CHECK(s.ds.current(1) == 50u);
  CHECK(s.ds.current(2) == 1u);
  CHECK_FALSE(s.ds.current(3));
}

TEST_CASE(
    "dataspace: pack moves an interval's tags, waiting calls and log, and the rules hold across the move") {
  shard from, to;
  // Enough tags that both halves of the space hold some.
  for (int i = 0; i < 40; ++i)
    from.one(op::put, 1, static_cast<request_number>(i + 1), "t" + std::to_string(i), 100,
             "v" + std::to_string(i));
  from.one(op::get, 2, 1, "t0", 200);                       // logged
  CHECK(from.call(op::get, 3, 1, "missing", 300).empty());  // waiting
  const std::uint64_t lo = 0, hi = L / 2;
  const auto inside = [&](const std::string& tag) { return vnode_of(tag, L) < hi; };
  const Bytes packed = from.ds.pack(lo, hi);
  REQUIRE(to.ds.unpack(packed));
  int moved = 0;
  for (int i = 1; i < 40; ++i) {
    const std::string tag = "t" + std::to_string(i);
    shard& owner = inside(tag) ? to : from;
    moved += inside(tag);
    CHECK(as_text(owner.one(op::read, 4, static_cast<request_number>(i), tag, 400).data) ==
          "v" + std::to_string(i));
  }
  CHECK(moved > 5);
  CHECK(moved < 35);
  // The request numbers went along: process 1's lagging replica puts nothing on either side.
  CHECK(to.one(op::put, 1, 3, "t3", 101, "late").result == outcome::ignored);
  CHECK(from.one(op::put, 1, 3, "t3", 101, "late").result == outcome::ignored);
  // The log entry and the waiting call are where their tag is.
  shard& t0_owner = inside("t0") ? to : from;
  CHECK(as_text(t0_owner.one(op::get, 2, 1, "t0", 201).data) == "v0");
  shard& missing_owner = inside("missing") ? to : from;
  const auto out = missing_owner.call(op::put, 5, 1, "missing", 500, "found");
  REQUIRE(out.size() == 2);
  CHECK(out[1].to == 300);
  CHECK(as_text(out[1].data) == "found");
}

TEST_CASE("dataspace: unpack refuses malformed input and changes nothing") {
  shard from, to;
  from.one(op::put, 1, 1, "t", 100, "x");
  const Bytes packed = from.ds.pack(0, L);
  for (std::size_t cut = 0; cut < packed.size(); ++cut)
    CHECK_FALSE(to.ds.unpack(std::span(packed.data(), cut)));
  CHECK(to.ds.statistics().objects == 0);
  CHECK_FALSE(to.ds.current(1));
  Bytes longer = packed;
  longer.push_back(std::byte{0});
  CHECK_FALSE(to.ds.unpack(longer));
  Bytes other_version = packed;
  other_version[0] = std::byte{99};
  CHECK_FALSE(to.ds.unpack(other_version));
  REQUIRE(to.ds.unpack(packed));
  CHECK(as_text(to.one(op::read, 2, 1, "t", 200).data) == "x");
}
