// The wire form of migration messages (migration/message.hpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "migration/message.hpp"

using namespace phoenix::migration;

TEST_CASE("migration message: every kind round-trips, a chunk keeps its bytes") {
  for (int k = 1; k <= 17; ++k) {
    message m;
    m.what = static_cast<kind>(k);
    m.from = 0x1122334455667788ull;
    m.span = {7, 1ull << 62};
    m.number = 42 + static_cast<std::uint64_t>(k);
    m.attempt = 0xfedcba9876543210ull - static_cast<std::uint64_t>(k);
    const std::vector<std::byte> data(1000, std::byte{0xab});
    if (m.what == kind::state_chunk) m.chunk = data;
    const auto bytes = encode(m);
    CHECK(bytes.size() == message_head_bytes + m.chunk.size());
    const auto back = decode(bytes);
    REQUIRE(back);
    CHECK(back->what == m.what);
    CHECK(back->from == m.from);
    CHECK(back->span == m.span);
    CHECK(back->number == m.number);
    CHECK(back->attempt == m.attempt);
    CHECK(std::equal(back->chunk.begin(), back->chunk.end(), m.chunk.begin(), m.chunk.end()));
    CHECK(to_string(m.what) != "unknown");
  }
}

TEST_CASE("migration message: unknown kinds, short bodies and trailing bytes are refused") {
  message m;
  m.what = kind::ok1;
  auto bytes = encode(m);
  CHECK_FALSE(decode(std::span(bytes).first(message_head_bytes - 1)));
  bytes.push_back(std::byte{0});
  CHECK_FALSE(decode(bytes));  // trailing bytes on a message without a chunk
  bytes.pop_back();
  bytes[0] = std::byte{0};
  CHECK_FALSE(decode(bytes));
  bytes[0] = std::byte{18};
  CHECK_FALSE(decode(bytes));
  CHECK_FALSE(decode({}));
}
