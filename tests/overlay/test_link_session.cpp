// The reliable link layer: sequence numbers, cumulative acks, window, resending after a broken connection.
#include <doctest/doctest.h>

#include "overlay/links/link_session.hpp"

using namespace phoenix::overlay;

namespace {

packet make_packet(std::uint64_t dest, std::size_t bytes = 10) {
  packet p;
  p.dest = dest;
  p.body.resize(bytes);
  return p;
}

// Sends everything the window allows and returns the sequence numbers sent.
std::vector<std::uint64_t> send_all(link_session& s) {
  std::vector<std::uint64_t> seqs;
  while (const auto* sp = s.next_to_send()) seqs.push_back(sp->seq);
  return seqs;
}

}  // namespace

TEST_CASE("link_session: numbers packets in order and frees them on cumulative ack once written") {
  link_session s(1 << 20);
  for (int i = 0; i < 5; ++i) s.enqueue(make_packet(static_cast<std::uint64_t>(i)));
  CHECK(send_all(s) == std::vector<std::uint64_t>{1, 2, 3, 4, 5});
  CHECK(s.unacked_count() == 5);
  CHECK(s.on_ack(3) == 0u);  // acknowledged, but the write is still in progress: nothing freed yet
  CHECK(s.unacked_count() == 5);
  CHECK(s.mark_written(5) > 0u);
  CHECK(s.unacked_count() == 2);
  CHECK(s.on_ack(5) > 0u);
  CHECK(s.is_idle());
  CHECK(s.bytes_held() == 0);
}

TEST_CASE("link_session: an ack for a number never sent is refused") {
  link_session s(1 << 20);
  s.enqueue(make_packet(1));
  send_all(s);
  CHECK_FALSE(s.on_ack(2).has_value());
  CHECK(s.on_ack(1).has_value());
}

TEST_CASE("link_session: the window bounds unacknowledged bytes") {
  const std::size_t one = make_packet(0, 40'000).footprint();
  link_session s(3 * one);
  for (int i = 0; i < 10; ++i) s.enqueue(make_packet(static_cast<std::uint64_t>(i), 40'000));
  CHECK(send_all(s).size() == 3);
  s.mark_written(3);
  s.on_ack(2);
  CHECK(send_all(s) == std::vector<std::uint64_t>{4, 5});
}

TEST_CASE("link_session: a few small frames in flight do not hold a body larger than the window back") {
  link_session s(1 << 20);
  s.enqueue(make_packet(1, 100));
  s.enqueue(make_packet(2, 100));
  s.enqueue(make_packet(3, 4 << 20));  // four times the window
  s.enqueue(make_packet(4, 100));
  CHECK(send_all(s) == std::vector<std::uint64_t>{1, 2, 3});  // the next waits for an ack
  // The receiving end's check agrees: two small packets beyond its last ack, then the large one, are allowed.
  link_session r(1 << 20);
  for (const std::size_t body : {100, 100}) {
    REQUIRE_FALSE(r.would_exceed_window(make_packet(0, body).footprint(), 1 << 20));
    r.count_beyond_ack(make_packet(0, body).footprint());
  }
  CHECK_FALSE(r.would_exceed_window(make_packet(0, 4 << 20).footprint(), 1 << 20));
  r.count_beyond_ack(make_packet(0, 4 << 20).footprint());
  CHECK(r.would_exceed_window(make_packet(0, 100).footprint(), 1 << 20));
}

TEST_CASE("link_session: resume resends exactly what the peer did not get, in order, before new packets") {
  link_session s(1 << 20);
  for (int i = 0; i < 6; ++i) s.enqueue(make_packet(static_cast<std::uint64_t>(100 + i)));
  CHECK(send_all(s).size() == 6);
  s.mark_written(6);
  s.on_ack(2);
  s.enqueue(make_packet(200));
  // The connection broke; the new one's handshake says the peer has everything up to 4.
  s.resume(4);
  std::vector<std::uint64_t> dests;
  while (const auto* sp = s.next_to_send()) dests.push_back(sp->pkt.dest);
  CHECK(dests == std::vector<std::uint64_t>{104, 105, 200});
}

TEST_CASE("link_session: receiver accepts the next number, drops duplicates, reports gaps") {
  link_session r(1 << 20);
  CHECK(r.on_receive(1) == link_session::receipt::accept);
  CHECK(r.on_receive(2) == link_session::receipt::accept);
  CHECK(r.on_receive(2) == link_session::receipt::duplicate);
  CHECK(r.on_receive(1) == link_session::receipt::duplicate);
  CHECK(r.on_receive(4) == link_session::receipt::gap);
  CHECK(r.received() == 2);
}

TEST_CASE("link_session: the ack to send is the last number received in order, and it frees exactly those") {
  link_session a(1 << 20), b(1 << 20);
  for (int i = 0; i < 5; ++i) a.enqueue(make_packet(static_cast<std::uint64_t>(i)));
  const auto seqs = send_all(a);
  REQUIRE(seqs.size() == 5);
  a.mark_written(seqs.back());
  CHECK(b.ack_to_send() == 0);
  CHECK_FALSE(b.ack_owed());
  for (std::size_t i = 0; i < 3; ++i) REQUIRE(b.on_receive(seqs[i]) == link_session::receipt::accept);
  CHECK(b.ack_to_send() == seqs[2]);  // the third packet's number: not one more
  CHECK(b.ack_owed());
  const auto freed = a.on_ack(b.ack_to_send());
  REQUIRE(freed.has_value());
  CHECK(*freed == 3 * make_packet(0).footprint());
  CHECK(a.unacked_count() == 2);
  b.note_ack_sent(b.ack_to_send());
  CHECK_FALSE(b.ack_owed());
  // Held back (forwarder::hold), the ack stays at the last one sent while more arrives.
  b.hold_acks(true);
  REQUIRE(b.on_receive(seqs[3]) == link_session::receipt::accept);
  CHECK(b.ack_to_send() == seqs[2]);
  CHECK_FALSE(b.ack_owed());
  b.hold_acks(false);
  CHECK(b.ack_to_send() == seqs[3]);
  CHECK(b.ack_owed());
}

namespace {

// A model of the link: packets in flight on a connection are lost when it breaks, and sometimes the ack too.
void exchange_with_reconnects(std::uint64_t first) {
  CAPTURE(first);
  link_session a(4096, first), b(4096, first);
  std::vector<std::uint64_t> delivered;
  std::uint64_t next = 0;
  for (int round = 0; round < 1500; ++round) {
    for (int i = 0; i < 7; ++i) a.enqueue(make_packet(next++, 50));
    std::vector<std::uint64_t> wire;  // seqs on this connection
    std::vector<std::uint64_t> dests;
    while (const auto* sp = a.next_to_send()) {
      wire.push_back(sp->seq);
      dests.push_back(sp->pkt.dest);
    }
    // Only a prefix arrives before the connection breaks.
    const std::size_t arrive = wire.size() * static_cast<std::size_t>(round % 4) / 3;
    for (std::size_t i = 0; i < arrive && i < wire.size(); ++i)
      if (b.on_receive(wire[i]) == link_session::receipt::accept) delivered.push_back(dests[i]);
    if (!wire.empty()) a.mark_written(wire.back());
    if (round % 2) a.on_ack(b.received());  // sometimes the ack makes it
    a.resume(b.received());                 // reconnect
  }
  // Drain on a healthy connection.
  for (int i = 0; i < 100000 && !a.is_idle(); ++i) {
    std::uint64_t last = 0;
    while (const auto* sp = a.next_to_send()) {
      if (b.on_receive(sp->seq) == link_session::receipt::accept) delivered.push_back(sp->pkt.dest);
      last = sp->seq;
    }
    if (last) a.mark_written(last);
    a.on_ack(b.received());
  }
  REQUIRE(a.is_idle());
  REQUIRE(delivered.size() == next);  // 10,500 packets
  for (std::uint64_t i = 0; i < next; ++i) REQUIRE(delivered[i] == i);
  CHECK(b.received() == first + next - 1);
}

}  // namespace

TEST_CASE("link_session: sender and receiver pair loses and duplicates nothing across many reconnects") {
  // Sequence numbers from 1, from just below 2^32 (where a 32-bit field would wrap), and from above 2^63.
  exchange_with_reconnects(1);
  exchange_with_reconnects((std::uint64_t{1} << 32) - 5000);
  exchange_with_reconnects(std::uint64_t{1} << 63);
}

TEST_CASE("link_session: take_unsent returns pending packets, keeps the unacknowledged ones") {
  link_session s(make_packet(0, 40'000).footprint() * 2);
  for (int i = 0; i < 5; ++i) s.enqueue(make_packet(static_cast<std::uint64_t>(i), 40'000));
  send_all(s);
  const auto unsent = s.take_unsent();
  REQUIRE(unsent.size() == 3);
  CHECK(unsent.front().dest == 2);
  CHECK(s.unacked_count() == 2);
  const auto all = s.take_all();
  CHECK(all.size() == 2);
  CHECK(s.bytes_held() == 0);
}
