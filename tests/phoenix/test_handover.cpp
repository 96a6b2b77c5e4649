// Tests of phoenix/handover.hpp: what goes with an interval beside its state, decoded as bytes from the network.
#include <doctest/doctest.h>

#include <algorithm>

#include "base/wire.hpp"
#include "overlay/delivery/stream_codec.hpp"
#include "phoenix/handover.hpp"

using namespace phoenix;

namespace {

constexpr vp_t L = 1ull << 20;

Bytes bytes_of(std::initializer_list<int> v) {
  Bytes b;
  for (int x : v) b.push_back(static_cast<std::byte>(x));
  return b;
}

}  // namespace

TEST_CASE("handover: the streams' part and the inbox's messages come back as they went, in order") {
  const std::vector<overlay::stream_state> streams{{7, 100, 12}, {8, 199, 3}};
  const std::vector<handed_message> inbox{{100, 7, 5, bytes_of({9, 9})}, {150, 8, -6, {}}, {100, 7, 5, bytes_of({1})}};
  const std::vector<handed_loss> losses{{1ull << 40, {50, 100}}, {(1ull << 40) + 1, {200, 210}}};
  const Bytes encoded = encode_handover(streams, inbox, losses);
  std::string error;
  const auto h = decode_handover(encoded, {100, 200}, L, error);
  REQUIRE(h);
  CHECK(h->streams == streams);
  CHECK(h->inbox == inbox);
  CHECK(h->losses == losses);
  const auto empty = decode_handover(encode_handover({}, {}), {100, 200}, L, error);
  REQUIRE(empty);
  CHECK(empty->streams.empty());
  CHECK(empty->inbox.empty());
}

TEST_CASE("handover: truncated or padded bytes, lengths past the end, streams and messages outside the interval and tags no inbox holds are refused") {
  const Bytes encoded = encode_handover({{7, 100, 12}}, {{100, 7, 5, bytes_of({9, 9})}, {150, 8, 6, {}}});
  std::string error;
  for (std::size_t n = 0; n < encoded.size(); ++n) {
    CAPTURE(n);
    CHECK_FALSE(decode_handover(std::span(encoded).first(n), {100, 200}, L, error));
  }
  Bytes padded = encoded;
  padded.push_back(std::byte{0});
  CHECK_FALSE(decode_handover(padded, {100, 200}, L, error));
  CHECK(error == "a malformed losses' part");
  CHECK_FALSE(decode_handover(encoded, {100, 150}, L, error));  // the second message is for 150
  CHECK(error.find("outside the interval") != std::string::npos);
  for (const std::int32_t tag : {-2, -3, -8, -1000}) {  // the runtime's protocols' tags, and none at all
    CAPTURE(tag);
    CHECK_FALSE(decode_handover(encode_handover({}, {{100, 7, tag, {}}}), {100, 200}, L, error));
    CHECK(error.find("no inbox holds") != std::string::npos);
  }
  CHECK(decode_handover(encode_handover({}, {{100, 7, -5, {}}}), {100, 200}, L, error));  // a service's
  // A stream's state outside the interval: another interval's, or this node's resource name's.
  for (const std::uint64_t vnode : {99ull, 200ull, 1ull << 40}) {
    CAPTURE(vnode);
    CHECK_FALSE(decode_handover(encode_handover({{7, vnode, ~0ull}}, {}), {100, 200}, L, error));
    CHECK(error.find("outside the interval") != std::string::npos);
  }
  // More streams than a node keeps, which no giver of this build sends (encode_handover cuts them).
  const Bytes states = overlay::encode_states(
      std::vector<overlay::stream_state>(overlay::stream_limits{}.max_streams + 1, {7, 150, 1}));
  Bytes forged(8 + states.size() + 16);
  base::store_le<std::uint64_t>(forged.data(), states.size());
  std::copy(states.begin(), states.end(), forged.begin() + 8);
  CHECK_FALSE(decode_handover(forged, {100, 200}, L, error));
  CHECK(error == "more streams than a node keeps");
  Bytes huge_count = encode_handover({}, {});
  huge_count[8 + 7] = std::byte{0x7f};  // a message count near 2^63
  CHECK_FALSE(decode_handover(huge_count, {100, 200}, L, error));
  Bytes huge_length = encode_handover({}, {{100, 7, 5, bytes_of({1})}});
  huge_length[16 + 20 + 7] = std::byte{0x7f};  // the message's length
  CHECK_FALSE(decode_handover(huge_length, {100, 200}, L, error));
  // Losses: only next to the interval, never empty, never past L; the others are skipped, the messages kept.
  const std::vector<handed_loss> some{{9, {10, 20}}, {9, {201, 210}}, {9, {150, 250}}, {9, {100, 100}},
                                      {9, {200, L + 1}}, {9, {0, 100}}};
  const auto kept = decode_handover(encode_handover({}, {{150, 8, 6, {}}}, some), {100, 200}, L, error);
  REQUIRE(kept);
  CHECK(kept->inbox.size() == 1);
  CHECK(kept->losses == std::vector<handed_loss>{{9, {0, 100}}});
  CHECK(kept->losses_skipped == 5);
  // More than a handover carries: the encoder sends max_handed_losses; more is refused.
  const std::vector<handed_loss> many(max_handed_losses + 1, {9, {200, 201}});
  const auto capped = decode_handover(encode_handover({}, {}, many), {100, 200}, L, error);
  REQUIRE(capped);
  CHECK(capped->losses.size() == max_handed_losses);
  Bytes too_many = encode_handover({}, {}, many);
  too_many[too_many.size() - 8 * 3 * max_handed_losses - 8] = static_cast<std::byte>(max_handed_losses + 1);
  too_many.resize(too_many.size() + 24);
  CHECK_FALSE(decode_handover(too_many, {100, 200}, L, error));
  CHECK(error == "a malformed losses' part");
}

TEST_CASE("handover: a giver's streams past what a node keeps are cut to it, so that the messages still go") {
  const std::vector<overlay::stream_state> too_many(overlay::stream_limits{}.max_streams + 1, {7, 150, 1});
  std::string error;
  const auto h = decode_handover(encode_handover(too_many, {{150, 8, 6, {}}}), {100, 200}, L, error);
  REQUIRE(h);
  CHECK(h->streams.size() == overlay::stream_limits{}.max_streams);
  CHECK(h->inbox.size() == 1);
}
