// The sender log of one replica: messages named by stream and virtual timestamp, kept until every live replica
// of the receiving rank consumed them, with replicas that fall past the capacity told so explicitly.
#include <doctest/doctest.h>

#include <string>

#include "phoenix/volpex/sender_log.hpp"
#include "support/volpex_objects.hpp"

using namespace phoenix::volpex;
using phoenix::volpex::test::as_text;
using phoenix::volpex::test::text;

namespace {

using status = sender_log::status;

sender_log make_log(unsigned replicas, std::uint64_t capacity_bytes = 1 << 20) {
  return sender_log({.capacity_bytes = capacity_bytes, .replicas = replicas});
}

}  // namespace

TEST_CASE("sender log: a message is found under its stream and timestamp, and not_yet past the latest sent") {
  auto log = make_log(2);
  CHECK(log.append(1, 5, text("a")) == 1);
  CHECK(log.append(1, 5, text("b")) == 2);
  const auto got = log.lookup(1, 0, 5, 1);
  CHECK(got.result == status::found);
  CHECK(as_text(got.body) == "a");
  CHECK(got.tag == 5);
  CHECK(got.ts == 1);
  CHECK(got.latest == 2);
  CHECK(as_text(log.lookup(1, 1, 5, 2).body) == "b");
  const auto ahead = log.lookup(1, 0, 5, 3);  // this replica lags the receiver
  CHECK(ahead.result == status::not_yet);
  CHECK(ahead.latest == 2);
  CHECK_FALSE(ahead.body);
  CHECK(log.lookup(2, 0, 5, 1).result == status::not_yet);  // nothing sent to rank 2
  CHECK(log.lookup(2, 0, 5, 1).latest == 0);
}

TEST_CASE("sender log: timestamps count per stream, independently across tags and destinations") {
  auto log = make_log(1);
  CHECK(log.append(1, 5, text("1/5 #1")) == 1);
  CHECK(log.append(1, 6, text("1/6 #1")) == 1);
  CHECK(log.append(2, 5, text("2/5 #1")) == 1);
  CHECK(log.append(1, 5, text("1/5 #2")) == 2);
  CHECK(log.latest(1, 5) == 2);
  CHECK(log.latest(1, 6) == 1);
  CHECK(log.latest(2, 5) == 1);
  CHECK(log.latest(2, 6) == 0);
  CHECK(as_text(log.lookup(1, 0, 6, 1).body) == "1/6 #1");
  CHECK(as_text(log.lookup(2, 0, 5, 1).body) == "2/5 #1");
  CHECK(as_text(log.lookup(1, 0, 5, 2).body) == "1/5 #2");
}

TEST_CASE("sender log: an entry stays until every replica consumed it, by lookup or by report of progress") {
  auto log = make_log(2);
  for (int n = 1; n <= 3; ++n) log.append(1, 0, text("m" + std::to_string(n)));
  REQUIRE(log.lookup(1, 0, 0, 1).result == status::found);  // replica 0 consumed 1
  CHECK(log.trim().empty());
  CHECK(log.statistics().entries == 3);  // replica 1, never heard from, has consumed nothing
  log.note_consumed(1, 1, 0, 1);         // replica 1 pulled 1 from another replica of this rank
  CHECK(log.trim().empty());
  CHECK(log.statistics().entries == 2);
  CHECK(log.lookup(1, 1, 0, 1).result == status::trimmed);
  // Asking for 3 says 1..2 were consumed, and found counts 3 too.
  REQUIRE(log.lookup(1, 0, 0, 3).result == status::found);
  log.trim();
  CHECK(log.statistics().entries == 2);  // replica 1 is still at 1
  log.note_consumed(1, 1, 0, 3);
  log.trim();
  CHECK(log.drained());
}

TEST_CASE("sender log: trimmed for a dropped timestamp and for timestamp 0, found for the next") {
  auto log = make_log(1);
  log.append(3, 2, text("x"));
  log.append(3, 2, text("y"));
  REQUIRE(log.lookup(3, 0, 2, 1).result == status::found);
  log.trim();
  const auto gone = log.lookup(3, 0, 2, 1);
  CHECK(gone.result == status::trimmed);
  CHECK(gone.latest == 2);
  CHECK_FALSE(gone.body);
  CHECK(log.lookup(3, 0, 2, 0).result == status::trimmed);
  CHECK(as_text(log.lookup(3, 0, 2, 2).body) == "y");
}

TEST_CASE("sender log: a replica given up and back holds back what is left, and hears trimmed for the rest") {
  auto log = make_log(2);
  log.append(1, 0, text("a"));
  log.note_consumed(1, 0, 0, 1);
  log.mark_dead(1, 1);
  log.trim();
  CHECK(log.drained());  // "a" went: replica 0 took it and replica 1 was given up
  log.mark_alive(1, 1);
  CHECK_FALSE(log.is_dead(1, 1));
  log.append(1, 0, text("b"));
  log.note_consumed(1, 0, 0, 2);
  log.trim();
  CHECK(log.statistics().entries == 1);  // "b" waits for replica 1 again
  CHECK(log.lookup(1, 1, 0, 1).result == status::trimmed);
  const auto b = log.lookup(1, 1, 0, 2);
  REQUIRE(b.result == status::found);
  CHECK(as_text(b.body) == "b");
  log.trim();
  CHECK(log.drained());
}

TEST_CASE("sender log: holds_for names the ranks some entry is still held for") {
  auto log = make_log(1);
  CHECK_FALSE(log.holds_for(1));
  log.append(1, 3, text("a"));
  log.append(2, 0, text("b"));
  CHECK(log.holds_for(1));
  CHECK(log.holds_for(2));
  CHECK_FALSE(log.holds_for(0));
  log.note_consumed(1, 0, 3, 1);
  log.trim();
  CHECK_FALSE(log.holds_for(1));  // its stream is still known, but empty
  CHECK(log.holds_for(2));
}

TEST_CASE("sender log: a dead replica holds nothing back") {
  auto log = make_log(2);
  log.append(1, 0, text("a"));
  log.append(1, 0, text("b"));
  log.note_consumed(1, 0, 0, 2);
  log.trim();
  CHECK(log.statistics().entries == 2);
  log.mark_dead(1, 1);
  CHECK(log.is_dead(1, 1));
  CHECK_FALSE(log.is_dead(1, 0));
  CHECK_FALSE(log.is_fallen_behind(1, 1));
  log.trim();
  CHECK(log.drained());
  log.append(1, 0, text("c"));  // from now on replica 0 alone decides
  REQUIRE(log.lookup(1, 0, 0, 3).result == status::found);
  log.trim();
  CHECK(log.drained());
  SUBCASE("when every replica of the rank is dead, what is sent to it goes at the next trim") {
    log.mark_dead(1, 0);
    log.append(1, 0, text("d"));
    CHECK_FALSE(log.drained());  // append never drops
    log.trim();
    CHECK(log.drained());
  }
}

TEST_CASE("sender log: a replica started late (index at least K) holds entries from when it is first seen") {
  auto log = make_log(2);
  for (int n = 1; n <= 3; ++n) log.append(1, 0, text("m" + std::to_string(n)));
  log.note_consumed(1, 0, 0, 1);
  log.note_consumed(1, 1, 0, 1);
  log.trim();  // replica 2 is not known yet: message 1 goes
  CHECK(log.statistics().entries == 2);
  CHECK(log.lookup(1, 2, 0, 1).result == status::trimmed);
  REQUIRE(log.lookup(1, 2, 0, 2).result == status::found);  // seen now, consumed 2
  log.note_consumed(1, 0, 0, 3);
  log.note_consumed(1, 1, 0, 3);
  log.trim();
  CHECK(log.statistics().entries == 1);  // message 3: replica 2 has not consumed it
  CHECK(as_text(log.lookup(1, 2, 0, 3).body) == "m3");
  log.trim();
  CHECK(log.drained());
  SUBCASE("a late replica seen by a report of progress holds entries too") {
    log.note_consumed(1, 7, 0, 3);
    log.append(1, 0, text("m4"));
    for (replica_index who : {0, 1, 2}) log.note_consumed(1, who, 0, 4);
    log.trim();
    CHECK(log.statistics().entries == 1);  // replica 7 has not consumed m4
    log.note_consumed(1, 7, 0, 4);
    log.trim();
    CHECK(log.drained());
  }
}

TEST_CASE("sender log: past capacity the slowest replica falls behind, explicitly, and only it") {
  auto log = make_log(3, 10);
  for (int n = 1; n <= 3; ++n) log.append(1, 0, text("m" + std::to_string(n) + "__"));  // 4 bytes each
  log.append(2, 0, text("r2"));  // another rank, needed by all its replicas
  log.note_consumed(1, 0, 0, 3);
  log.note_consumed(1, 1, 0, 1);
  // Replica 2 of rank 1 was never heard from: it needs 1..3, replica 1 needs 2..3.
  const auto fallen = log.trim();
  REQUIRE(fallen.size() == 1);
  CHECK(fallen[0] == std::pair<rank_id, replica_index>{1, 2});
  CHECK(log.is_fallen_behind(1, 2));
  CHECK(log.statistics().bytes == 10);  // message 1 (which only replica 2 needed) went: within capacity again
  for (timestamp ts : {1, 2, 4, 100}) CHECK(log.lookup(1, 2, 0, ts).result == status::fallen_behind);
  CHECK(log.first_unconsumed(1, 2, {}, -1).result == status::fallen_behind);
  // The others are unaffected.
  CHECK_FALSE(log.is_fallen_behind(1, 1));
  CHECK(as_text(log.lookup(1, 1, 0, 2).body) == "m2__");
  CHECK_FALSE(log.is_fallen_behind(2, 2));
  CHECK(as_text(log.lookup(2, 2, 0, 1).body) == "r2");
  // A fallen-behind replica no longer holds anything back.
  log.note_consumed(1, 1, 0, 3);
  log.trim();
  CHECK(log.statistics().entries == 1);  // rank 2's message
  CHECK(log.statistics().fallen_behind == 1);
  CHECK(log.trim().empty());  // declared once
}

TEST_CASE("sender log: capacity examines the oldest entry held across streams, past entries already consumed") {
  auto log = make_log(2, 100);
  log.append(1, 1, text("held by replica 1"));  // 17 bytes, the oldest entry held from here on
  log.note_consumed(1, 0, 1, 1);
  for (int n = 1; n <= 5000; ++n) {
    log.append(1, 0, text("x"));
    log.note_consumed(1, 0, 0, static_cast<timestamp>(n));
    log.note_consumed(1, 1, 0, static_cast<timestamp>(n));
    CHECK(log.trim().empty());
  }
  CHECK(log.statistics().entries == 1);
  CHECK(log.statistics().dropped == 5000);
  log.append(1, 0, text(std::string(60, 'a')));
  log.append(1, 0, text(std::string(60, 'b')));
  log.note_consumed(1, 0, 0, 5001);  // replica 0 needs only the second
  const auto fallen = log.trim();    // 137 bytes: the tag-1 entry is the oldest, replica 1 alone needs it
  REQUIRE(fallen.size() == 1);
  CHECK(fallen[0] == std::pair<rank_id, replica_index>{1, 1});
  CHECK(log.statistics().entries == 1);  // the first 60 went with it: nobody else needed it
  CHECK(log.statistics().bytes == 60);
  CHECK(as_text(log.lookup(1, 0, 0, 5002).body) == std::string(60, 'b'));
}

TEST_CASE("sender log: progress reported ahead of what this replica sent drops its messages as soon as sent") {
  auto log = make_log(2);
  log.note_consumed(4, 0, 9, 2);  // both receivers pulled 1..2 from a faster replica of this rank
  log.note_consumed(4, 1, 9, 2);
  CHECK(log.latest(4, 9) == 0);
  log.append(4, 9, text("1"));
  log.append(4, 9, text("2"));
  log.append(4, 9, text("3"));
  log.trim();
  CHECK(log.statistics().entries == 1);
  CHECK(log.lookup(4, 0, 9, 3).result == status::found);
}

TEST_CASE("sender log: first_unconsumed takes the earliest in send order, by tag filter and consumed map") {
  auto log = make_log(1);
  log.append(1, 5, text("5#1"));
  log.append(1, 6, text("6#1"));
  log.append(2, 5, text("other rank"));
  log.append(1, 5, text("5#2"));
  const auto first = log.first_unconsumed(1, 0, {}, -1);
  CHECK(first.result == status::found);
  CHECK(first.tag == 5);
  CHECK(first.ts == 1);
  CHECK(as_text(first.body) == "5#1");
  CHECK(as_text(log.first_unconsumed(1, 0, {{5, 1}}, -1).body) == "6#1");
  const auto third = log.first_unconsumed(1, 0, {{5, 1}, {6, 1}}, -1);
  CHECK(third.tag == 5);
  CHECK(third.ts == 2);
  CHECK(third.latest == 2);
  CHECK(log.first_unconsumed(1, 0, {{5, 2}, {6, 1}}, -1).result == status::not_yet);
  CHECK(as_text(log.first_unconsumed(1, 0, {}, 6).body) == "6#1");
  const auto none = log.first_unconsumed(1, 0, {{6, 1}}, 6);
  CHECK(none.result == status::not_yet);
  CHECK(none.tag == 6);
  CHECK(none.latest == 1);
  CHECK(log.first_unconsumed(1, 0, {}, 7).result == status::not_yet);
  CHECK(log.first_unconsumed(3, 0, {}, -1).result == status::not_yet);  // nothing sent to rank 3
}

TEST_CASE("sender log: first_unconsumed counts nothing consumed itself, notes the map, and reports trimmed") {
  auto log = make_log(1);
  log.append(1, 5, text("5#1"));
  log.append(1, 6, text("6#1"));
  REQUIRE(log.first_unconsumed(1, 0, {}, -1).result == status::found);
  log.trim();
  CHECK(log.statistics().entries == 2);  // the answer may not be taken: still held
  REQUIRE(log.first_unconsumed(1, 0, {{5, 1}}, -1).result == status::found);
  log.trim();
  CHECK(log.statistics().entries == 1);  // the map said 5#1 was consumed
  const auto gone = log.first_unconsumed(1, 0, {}, -1);
  CHECK(gone.result == status::trimmed);  // 5#1 would come first, and it is gone
  CHECK(gone.tag == 5);
  CHECK(gone.ts == 1);
  CHECK(log.first_unconsumed(1, 0, {}, 6).result == status::found);  // the filter skips the dropped stream
}

TEST_CASE("sender log: drained and statistics count what is held and what went") {
  auto log = make_log(1, 1000);
  CHECK(log.drained());
  log.append(1, 0, text("abc"));
  log.append(1, 0, text("de"));
  log.append(1, 0, nullptr);  // an empty message may carry no body at all
  auto s = log.statistics();
  CHECK(s.entries == 3);
  CHECK(s.bytes == 5);
  CHECK(s.appended == 3);
  CHECK(s.dropped == 0);
  CHECK_FALSE(log.drained());
  log.note_consumed(1, 0, 0, 1);
  log.trim();
  s = log.statistics();
  CHECK(s.entries == 2);
  CHECK(s.bytes == 2);
  CHECK(s.dropped == 1);
  CHECK(log.lookup(1, 0, 0, 3).result == status::found);
  log.trim();
  CHECK(log.drained());
  s = log.statistics();
  CHECK(s.bytes == 0);
  CHECK(s.appended == 3);
  CHECK(s.dropped == 3);
  CHECK(s.fallen_behind == 0);
}
