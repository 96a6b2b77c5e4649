// Tests of phoenix/handover.hpp: what goes with an interval beside its state, decoded as bytes from the network.
#include <doctest/doctest.h>

#include "phoenix/handover.hpp"

using namespace phoenix;

namespace {

Bytes bytes_of(std::initializer_list<int> v) {
  Bytes b;
  for (int x : v) b.push_back(static_cast<std::byte>(x));
  return b;
}

}  // namespace

TEST_CASE("handover: the streams' part and the inbox's messages come back as they went, in order") {
  const std::vector<overlay::stream_state> streams{{7, 100, 12}, {8, 199, 3}};
  const std::vector<handed_message> inbox{{100, 7, 5, bytes_of({9, 9})}, {150, 8, -6, {}}, {100, 7, 5, bytes_of({1})}};
  const std::vector<handed_loss> losses{{1ull << 40, {50, 100}, 1200}, {(1ull << 40) + 1, {200, 210}, 0}};
  const Bytes encoded = encode_handover(streams, inbox, losses);
  std::string error;
  const auto h = decode_handover(encoded, {100, 200}, error);
  REQUIRE(h);
  CHECK(h->streams == streams);
  CHECK(h->inbox == inbox);
  CHECK(h->losses == losses);
  const auto empty = decode_handover(encode_handover({}, {}), {100, 200}, error);
  REQUIRE(empty);
  CHECK(empty->streams.empty());
  CHECK(empty->inbox.empty());
}

TEST_CASE("handover: truncated or padded bytes, lengths past the end, streams and messages outside the interval and tags no inbox holds are refused") {
  const Bytes encoded = encode_handover({{7, 100, 12}}, {{100, 7, 5, bytes_of({9, 9})}, {150, 8, 6, {}}});
  std::string error;
  for (std::size_t n = 0; n < encoded.size(); ++n) {
    CAPTURE(n);
    CHECK_FALSE(decode_handover(std::span(encoded).first(n), {100, 200}, error));
  }
  Bytes padded = encoded;
  padded.push_back(std::byte{0});
  CHECK_FALSE(decode_handover(padded, {100, 200}, error));
  CHECK(error == "a malformed losses' part");
  CHECK_FALSE(decode_handover(encoded, {100, 150}, error));  // the second message is for 150
  CHECK(error.find("outside the interval") != std::string::npos);
  for (const std::int32_t tag : {-2, -3, -8, -1000}) {  // the runtime's protocols' tags, and none at all
    CAPTURE(tag);
    CHECK_FALSE(decode_handover(encode_handover({}, {{100, 7, tag, {}}}), {100, 200}, error));
    CHECK(error.find("no inbox holds") != std::string::npos);
  }
  CHECK(decode_handover(encode_handover({}, {{100, 7, -5, {}}}), {100, 200}, error));  // a service's
  // A stream's state outside the interval: another interval's, or this node's resource name's.
  for (const std::uint64_t vnode : {99ull, 200ull, 1ull << 40}) {
    CAPTURE(vnode);
    CHECK_FALSE(decode_handover(encode_handover({{7, vnode, ~0ull}}, {}), {100, 200}, error));
    CHECK(error.find("outside the interval") != std::string::npos);
  }
  const std::vector<overlay::stream_state> too_many(overlay::stream_limits{}.max_streams + 1, {7, 150, 1});
  CHECK_FALSE(decode_handover(encode_handover(too_many, {}), {100, 200}, error));
  CHECK(error == "more streams than a node keeps");
  Bytes huge_count = encode_handover({}, {});
  huge_count[8 + 7] = std::byte{0x7f};  // a message count near 2^63
  CHECK_FALSE(decode_handover(huge_count, {100, 200}, error));
  Bytes huge_length = encode_handover({}, {{100, 7, 5, bytes_of({1})}});
  huge_length[16 + 20 + 7] = std::byte{0x7f};  // the message's length
  CHECK_FALSE(decode_handover(huge_length, {100, 200}, error));
  // Losses: only next to the interval, never empty, never more than a node passes on.
  for (const Interval far : {Interval{10, 20}, Interval{201, 210}, Interval{150, 250}, Interval{100, 100}}) {
    CAPTURE(far.lo);
    CHECK_FALSE(decode_handover(encode_handover({}, {}, {{9, far, 0}}), {100, 200}, error));
    CHECK(error == "a loss not next to the interval");
  }
  const std::vector<handed_loss> many(max_handed_losses + 1, {9, {200, 201}, 0});
  CHECK_FALSE(decode_handover(encode_handover({}, {}, many), {100, 200}, error));
  CHECK(error == "a malformed losses' part");
}
