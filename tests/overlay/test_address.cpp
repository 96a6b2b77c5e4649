#include <doctest/doctest.h>

#include "overlay/transports/address.hpp"

using namespace phoenix::overlay;

TEST_CASE("address: tcp and ssh forms parse and print back") {
  auto parsed = parse_address("tcp://127.0.0.1:4000");
  REQUIRE(parsed);
  CHECK(parsed->host == "127.0.0.1");
  CHECK(parsed->port == 4000);
  CHECK(parsed->to_string() == "tcp://127.0.0.1:4000");
  parsed = parse_address("tcp://[::1]:0");
  REQUIRE(parsed);
  CHECK(parsed->host == "::1");
  CHECK(parsed->to_string() == "tcp://[::1]:0");
  parsed = parse_address("ssh://alice@gw.example:2222/10.0.0.5:7000");
  REQUIRE(parsed);
  CHECK(parsed->scheme == address::scheme_t::ssh);
  CHECK(parsed->ssh_user == "alice");
  CHECK(parsed->ssh_gateway == "gw.example");
  CHECK(parsed->ssh_port == 2222);
  CHECK(parsed->host == "10.0.0.5");
  CHECK(parsed->port == 7000);
  CHECK(parsed->to_string() == "ssh://alice@gw.example:2222/10.0.0.5:7000");
  parsed = parse_address("ssh://gw/h:1");
  REQUIRE(parsed);
  CHECK(parsed->ssh_port == 22);
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
