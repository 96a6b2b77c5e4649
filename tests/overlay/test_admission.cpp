// The pure parts of the accept path (overlay/links/admission.hpp): backoff, handshake caps, log gate.
#include <doctest/doctest.h>

#include <chrono>
#include <vector>

#include "overlay/links/admission.hpp"

using namespace phoenix::overlay;
using namespace std::chrono_literals;

TEST_CASE("admission: failing accepts wait longer each time up to the most, and one success resets it") {
  accept_backoff b(50ms, 1000ms);
  auto s = b.on_failure();
  CHECK(s.episode_began);
  CHECK(s.delay == 50ms);
  std::vector<std::chrono::milliseconds> delays;
  for (int i = 0; i < 6; ++i) {
    s = b.on_failure();
    CHECK_FALSE(s.episode_began);
    delays.push_back(s.delay);
  }
  CHECK(delays == std::vector<std::chrono::milliseconds>{100ms, 200ms, 400ms, 800ms, 1000ms, 1000ms});
  CHECK(b.on_success() == 7);
  CHECK(b.on_success() == 0);
  s = b.on_failure();
  CHECK(s.episode_began);
  CHECK(s.delay == 50ms);
}

TEST_CASE("admission: handshakes are capped per address and in total, and released slots are reusable") {
  handshake_caps caps(3, 2);
  CHECK(caps.try_admit("10.0.0.1") == handshake_caps::verdict::admitted);
  CHECK(caps.try_admit("10.0.0.1") == handshake_caps::verdict::admitted);
  CHECK(caps.try_admit("10.0.0.1") == handshake_caps::verdict::over_address);
  CHECK(caps.try_admit("10.0.0.2") == handshake_caps::verdict::admitted);
  CHECK(caps.try_admit("10.0.0.3") == handshake_caps::verdict::over_total);
  CHECK(caps.in_progress() == 3);
  caps.release("10.0.0.9");  // never admitted: nothing changes
  CHECK(caps.in_progress() == 3);
  caps.release("10.0.0.1");
  CHECK(caps.try_admit("10.0.0.3") == handshake_caps::verdict::admitted);
  CHECK(caps.try_admit("10.0.0.3") == handshake_caps::verdict::over_total);
}

TEST_CASE("admission: address_part drops the port of IPv4 and IPv6 endpoints") {
  CHECK(address_part("127.0.0.2:4000") == "127.0.0.2");
  CHECK(address_part("::1:4000") == "::1");
  CHECK(address_part("local") == "local");
}
