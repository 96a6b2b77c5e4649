// Tests of overlay/links/cluster_key.hpp: loading the cluster key file (errors that name the fix), the public
// development key, and two nodes that load one file completing a handshake.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <string_view>

#include "overlay/links/cluster_key.hpp"
#include "overlay/links/handshake.hpp"
#include "support/temp_dir.hpp"

using namespace phoenix::overlay;
using phoenix::test::temp_dir;

namespace {

bool mentions(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

namespace {

constexpr std::string_view key44 = "q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq83=";

}  // namespace

TEST_CASE("cluster key: missing file names the path, the OS error and how to make one") {
  temp_dir dir;
  const auto file = dir.path() / "no-such-key";
  const key_result r = load_cluster_key(file);
  CHECK_FALSE(r.is_ok());
  CHECK(r.key.empty());
  CHECK(mentions(r.error, file.string()));
  CHECK(mentions(r.error, "No such file or directory"));
  CHECK(mentions(r.error, "head -c 32 /dev/urandom | base64 > " + file.string()));
}

TEST_CASE("cluster key: unreadable path (a directory) names the path and the OS error") {
  temp_dir dir;
  const key_result r = load_cluster_key(dir.path());
  CHECK_FALSE(r.is_ok());
  CHECK(r.key.empty());
  CHECK(mentions(r.error, dir.path().string()));
  CHECK(mentions(r.error, "Is a directory"));
}

TEST_CASE("cluster key: shorter than 16 bytes is refused with advice") {
  temp_dir dir;
  SUBCASE("15 bytes and a newline") {
    const auto file = dir.write("short", "0123456789abcde\n");
    const key_result r = load_cluster_key(file);
    CHECK_FALSE(r.is_ok());
    CHECK(r.key.empty());
    CHECK(mentions(r.error, file.string()));
    CHECK(mentions(r.error, "15 bytes"));
    CHECK(mentions(r.error, "head -c 32 /dev/urandom | base64 > " + file.string()));
  }
  SUBCASE("empty file") {
    const auto file = dir.write("empty", "");
    const key_result r = load_cluster_key(file);
    CHECK_FALSE(r.is_ok());
    CHECK(mentions(r.error, "0 bytes"));
  }
  SUBCASE("a lone newline") { CHECK_FALSE(load_cluster_key(dir.write("nl", "\n")).is_ok()); }
  SUBCASE("exactly 16 bytes is enough") {
    const key_result r = load_cluster_key(dir.write("sixteen", "0123456789abcdef"));
    CHECK(r.is_ok());
    CHECK(r.key == bytes_of("0123456789abcdef"));
  }
}

TEST_CASE("cluster key: strips exactly one trailing newline") {
  temp_dir dir;
  CHECK(load_cluster_key(dir.write("lf", std::string(key44) + "\n")).key == bytes_of(key44));
  CHECK(load_cluster_key(dir.write("crlf", std::string(key44) + "\r\n")).key == bytes_of(key44));
  CHECK(load_cluster_key(dir.write("none", key44)).key == bytes_of(key44));
  CHECK(load_cluster_key(dir.write("two", std::string(key44) + "\n\n")).key ==
        bytes_of(std::string(key44) + "\n"));
  CHECK(load_cluster_key(dir.write("cr", std::string(key44) + "\r")).key ==
        bytes_of(std::string(key44) + "\r"));
  // A key file written on one machine loads identically elsewhere regardless of line ending.
  const key_result r = load_cluster_key(dir.write("ok", std::string(key44) + "\n"));
  CHECK(r.is_ok());
  CHECK(r.error.empty());
  CHECK(r.warning.empty());
}

TEST_CASE("cluster key: accessible to group or others loads with a warning") {
  temp_dir dir;
  for (mode_t mode : {mode_t{0640}, mode_t{0604}, mode_t{0620}, mode_t{0644}}) {
    CAPTURE(mode);
    const auto file = dir.write("open-" + std::to_string(mode), key44, mode);
    const key_result r = load_cluster_key(file);
    CHECK(r.is_ok());
    CHECK(r.key == bytes_of(key44));
    CHECK(mentions(r.warning, file.string()));
    CHECK(mentions(r.warning, "chmod 600"));
  }
  const auto r = load_cluster_key(dir.write("g", key44, 0640));
  CHECK(mentions(r.warning, "0640"));
  CHECK(load_cluster_key(dir.write("private", key44, 0600)).warning.empty());
  CHECK(load_cluster_key(dir.write("readonly", key44, 0400)).warning.empty());
}

TEST_CASE("cluster key: file too large is refused") {
  temp_dir dir;
  const auto file = dir.write("big", std::string(max_cluster_key_file_bytes + 1, 'k'));
  const key_result r = load_cluster_key(file);
  CHECK_FALSE(r.is_ok());
  CHECK(r.key.empty());
  CHECK(mentions(r.error, file.string()));
  CHECK(load_cluster_key(dir.write("max", std::string(max_cluster_key_file_bytes, 'k'))).is_ok());
}

TEST_CASE("cluster key: development_key is the documented public text, long enough") {
  // Fixed across builds and versions: nodes of different builds without a configured key must still link.
  const std::string_view documented = "phoenix-development-cluster-key-INSECURE-do-not-use-in-production";
  const auto key = development_key();
  CHECK(std::string(reinterpret_cast<const char*>(key.data()), key.size()) == documented);
  CHECK(key.size() >= min_cluster_key_bytes);
}

TEST_CASE("cluster key: two nodes loading the same key file complete the handshake") {
  temp_dir dir;
  const auto file = dir.write("cluster.key", std::string(key44) + "\n");
  const auto key_on_a = load_cluster_key(file);
  const auto key_on_b = load_cluster_key(file);
  REQUIRE(key_on_a.is_ok());
  REQUIRE(key_on_b.is_ok());
  handshake a(key_on_a.key, 1u << 20, 0xA1, "alpha", link_role::dialler, protection_mode::integrity);
  handshake b(key_on_b.key, 1u << 20, 0xB2, "beta", link_role::acceptor, protection_mode::integrity);
  REQUIRE_FALSE(b.on_hello(a.hello_payload()).has_value());
  REQUIRE_FALSE(a.on_hello(b.hello_payload()).has_value());
  CHECK_FALSE(b.on_auth(a.auth_payload(0)).has_value());
  CHECK_FALSE(a.on_auth(b.auth_payload(0)).has_value());
  CHECK(a.is_complete());
  CHECK(b.is_complete());
}
