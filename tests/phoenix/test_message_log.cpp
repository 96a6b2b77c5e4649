#include <doctest/doctest.h>

#include <fstream>

#include "phoenix/message_log.hpp"
#include "support/temp_dir.hpp"

using phoenix::overlay::packet;

namespace {
packet make(std::uint64_t dest, int tag, std::size_t n) {
  packet p;
  p.dest = dest;
  p.source = 1ull << 63;
  p.tag = tag;
  p.body.resize(n);
  for (std::size_t i = 0; i < n; ++i) p.body[i] = static_cast<std::byte>(i * 7 + dest);
  return p;
}
}  // namespace

TEST_CASE("message_log: round trip keeps every message and its order") {
  phoenix::test::temp_dir dir;
  const auto file = dir / "node.log";
  std::vector<packet> in;
  for (int i = 0; i < 50; ++i) in.push_back(make(static_cast<std::uint64_t>(i * 1000), i, static_cast<std::size_t>(i * 37)));
  REQUIRE(phoenix::write_message_log(file, in) == "");
  std::vector<packet> out;
  REQUIRE(phoenix::read_message_log(file, out) == "");
  REQUIRE(out.size() == in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    CHECK(out[i].dest == in[i].dest);
    CHECK(out[i].source == in[i].source);
    CHECK(out[i].tag == in[i].tag);
    CHECK(out[i].body == in[i].body);
  }
}

TEST_CASE("message_log: a packet its writer numbered and kept is marked so, and its flags come back") {
  phoenix::test::temp_dir dir;
  const auto file = dir / "node.log";
  std::vector<packet> in{make(7, 1, 10), make(8, 2, 20)};
  in[0].numbered_here = true;
  in[0].stream_seq = 12;
  in[0].stream_prev = 11;
  in[1].flags = packet::ack_to_follows;
  REQUIRE(phoenix::write_message_log(file, in) == "");
  std::vector<packet> out;
  REQUIRE(phoenix::read_message_log(file, out) == "");
  REQUIRE(out.size() == 2);
  CHECK(out[0].numbered_here);
  CHECK(out[0].flags == 0);
  CHECK(out[0].stream_seq == 12);
  CHECK(out[0].stream_prev == 11);
  CHECK_FALSE(out[1].numbered_here);
  CHECK(out[1].flags == packet::ack_to_follows);
}

TEST_CASE("message_log: a truncated or foreign file is rejected, not half-read") {
  phoenix::test::temp_dir dir;
  const auto file = dir / "node.log";
  REQUIRE(phoenix::write_message_log(file, {make(1, 1, 100), make(2, 2, 100)}) == "");
  const auto size = std::filesystem::file_size(file);
  std::filesystem::resize_file(file, size - 5);
  std::vector<packet> out;
  CHECK(phoenix::read_message_log(file, out) != "");
  CHECK(out.empty());
  std::ofstream(dir / "other") << "hello world, not a log";
  CHECK(phoenix::read_message_log(dir / "other", out) != "");
  CHECK(phoenix::read_message_log(dir / "missing", out).find("missing") != std::string::npos);
}

TEST_CASE("message_log: a suspend's log keeps its intervals and their state, and a truncated one is rejected") {
  phoenix::test::temp_dir dir;
  const auto file = dir / "node.log";
  std::vector<phoenix::suspended_interval> state(2);
  state[0].span = {0, 100};
  state[0].state = make(0, 0, 300).body;
  state[1].span = {200, 250};  // an interval with empty state is kept too
  REQUIRE(phoenix::write_message_log(file, {make(7, 3, 10)}, state) == "");
  std::vector<packet> out;
  std::vector<phoenix::suspended_interval> back;
  REQUIRE(phoenix::read_message_log(file, out, &back) == "");
  REQUIRE(out.size() == 1);
  CHECK(out[0].dest == 7);
  REQUIRE(back.size() == 2);
  CHECK(back[0].span == phoenix::Interval{0, 100});
  CHECK(back[0].state == state[0].state);
  CHECK(back[1].span == phoenix::Interval{200, 250});
  CHECK(back[1].state.empty());

  std::filesystem::resize_file(file, 8 + 8 + 24 + 100);  // inside the first state record
  back.clear();
  CHECK(phoenix::read_message_log(file, out, &back) != "");
  CHECK(back.empty());
}

TEST_CASE("message_log: a device or FIFO is rejected at once, not read") {
  std::vector<phoenix::overlay::packet> out;
  const auto err = phoenix::read_message_log("/dev/zero", out);
  CHECK(err.find("/dev/zero: not a regular file") != std::string::npos);
  CHECK(out.empty());
}

TEST_CASE("message_log: what the writer alone knew of an owner that crashed comes back, a record of what it held besides is skipped, and a malformed record rejects the log") {
  phoenix::test::temp_dir dir;
  const auto file = dir / "node.log";
  const std::vector<phoenix::logged_loss> losses{{0xabcdull, {300, 400}}, {0xabcdull, {0, 300}}};
  REQUIRE(phoenix::write_message_log(file, {make(7, 3, 10)}, {}, {}, losses) == "");
  std::vector<packet> out;
  std::vector<phoenix::logged_loss> back;
  REQUIRE(phoenix::read_message_log(file, out, nullptr, nullptr, &back) == "");
  CHECK(back == losses);
  REQUIRE(out.size() == 1);
  CHECK(out[0].dest == 7);

  // Records start after 8 magic, 8 + 0 intervals, 8 + 0 streams, 8 count: owner, lo, hi, kind, 32 bytes each.
  // The second one's kind made 0 (what the owner held besides): read, and not returned.
  {
    std::fstream f(file, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(8 + 8 + 8 + 8 + 32 + 24);
    const unsigned char zero[8] = {};
    f.write(reinterpret_cast<const char*>(zero), 8);
  }
  back.clear();
  REQUIRE(phoenix::read_message_log(file, out, nullptr, nullptr, &back) == "");
  CHECK(back == std::vector<phoenix::logged_loss>{losses[0]});

  // An empty interval (lo == hi) where the first loss's hi is.
  {
    std::fstream f(file, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(8 + 8 + 8 + 8 + 16);
    const unsigned char lo300[8] = {0x2c, 0x01, 0, 0, 0, 0, 0, 0};
    f.write(reinterpret_cast<const char*>(lo300), 8);
  }
  back.clear();
  CHECK(phoenix::read_message_log(file, out, nullptr, nullptr, &back).find("malformed lost interval") !=
        std::string::npos);
  CHECK(back.empty());
}
