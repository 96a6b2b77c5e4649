#include <doctest/doctest.h>

#include "overlay/transports/address.hpp"

using namespace phoenix::overlay;

TEST_CASE("address: tcp and ssh forms parse and print back") {
  auto a = parse_address("tcp://127.0.0.1:4000");
  REQUIRE(a);
  CHECK(a->host == "127.0.0.1");
  CHECK(a->port == 4000);
  CHECK(a->to_string() == "tcp://127.0.0.1:4000");
  a = parse_address("tcp://[::1]:0");
  REQUIRE(a);
  CHECK(a->host == "::1");
  CHECK(a->to_string() == "tcp://[::1]:0");
  a = parse_address("ssh://alice@gw.example:2222/10.0.0.5:7000");
  REQUIRE(a);
  CHECK(a->scheme == address::scheme_t::ssh);
  CHECK(a->ssh_user == "alice");
  CHECK(a->ssh_gateway == "gw.example");
  CHECK(a->ssh_port == 2222);
  CHECK(a->host == "10.0.0.5");
  CHECK(a->port == 7000);
  CHECK(a->to_string() == "ssh://alice@gw.example:2222/10.0.0.5:7000");
  a = parse_address("ssh://gw/h:1");
  REQUIRE(a);
  CHECK(a->ssh_port == 22);
}

TEST_CASE("address: bad forms are rejected with a reason") {
  for (const char* bad : {"", "127.0.0.1:4000", "tcp://", "tcp://host", "tcp://host:", "tcp://host:65536",
                          "tcp://host:-1", "tcp://:80", "udp://h:1", "ssh://gw", "ssh:///h:1", "tcp://[::1:5"}) {
    CAPTURE(bad);
    std::string error;
    CHECK_FALSE(parse_address(bad, &error));
    CHECK_FALSE(error.empty());
  }
}
