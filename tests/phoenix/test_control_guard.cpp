// The control plane's pure part: the sealed request on the wire (control.hpp), the controller's signature
// (controller_key.hpp), the checks a node makes before it carries out a guarded request (control_guard.hpp),
// and the key files (control_key_file.hpp). No network; times are given.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <fstream>
#include <random>

#include "phoenix/control_guard.hpp"
#include "phoenix/control_key_file.hpp"
#include "phoenix/message_log.hpp"
#include "phoenix/service_messages.hpp"
#include "support/temp_dir.hpp"

using namespace phoenix;

namespace {

constexpr std::uint64_t self = 5'000'000;  // a resource name
constexpr std::uint64_t now = 1'700'000'000'000;

control_nonce nonce_of(std::uint8_t n) {
  control_nonce x{};
  x[0] = static_cast<std::byte>(n);
  return x;
}

control_packet sealed(const controller_key& key, std::string text, std::uint64_t target = self,
                      std::uint64_t at = now, std::uint8_t nonce = 1) {
  control_packet p{control_packet::kind::request, true, 42, std::move(text), std::nullopt};
  key.seal(p, target, at, nonce_of(nonce));
  return p;
}

controller_key public_of(const controller_key& k) {
  std::string error;
  auto pub = controller_key::from_pem(k.public_pem(), false, &error);
  REQUIRE_MESSAGE(!pub.empty(), error);
  return pub;
}

}  // namespace

TEST_CASE("control wire: a sealed request survives encode and decode, and every truncation is malformed") {
  const auto key = controller_key::generate();
  const auto p = sealed(key, "kill");
  const auto bytes = encode_control(p);
  const auto back = decode_control(bytes);
  REQUIRE(back);
  CHECK(back->what == control_packet::kind::request);
  CHECK(back->id == 42);
  CHECK(back->text == "kill");
  REQUIRE(back->seal);
  CHECK(back->seal->target == self);
  CHECK(back->seal->timestamp_ms == now);
  CHECK(back->seal->nonce == p.seal->nonce);
  CHECK(back->seal->signature == p.seal->signature);
  // A sealed header cut short is malformed, never read past its end.
  for (std::size_t n = 0; n < 10 + 96; ++n) CHECK_FALSE(decode_control(std::span(bytes.data(), n)));
  // Random bodies decode or not, and never crash.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    Bytes junk(rng() % 200);
    for (auto& b : junk) b = static_cast<std::byte>(rng());
    (void)decode_control(junk);
  }
}

TEST_CASE("control seal: it verifies with the controller's public key only, and not after any field changes") {
  const auto key = controller_key::generate();
  const auto pub = public_of(key);
  CHECK_FALSE(pub.can_sign());
  const auto p = sealed(key, "leave");
  CHECK(pub.verifies(p));
  CHECK_FALSE(public_of(controller_key::generate()).verifies(p));
  auto changed = p;
  changed.text = "kill";
  CHECK_FALSE(pub.verifies(changed));
  changed = p;
  changed.seal->target += 1;
  CHECK_FALSE(pub.verifies(changed));
  changed = p;
  changed.seal->timestamp_ms += 1;
  CHECK_FALSE(pub.verifies(changed));
  changed = p;
  changed.seal->nonce[15] = std::byte{1};
  CHECK_FALSE(pub.verifies(changed));
  changed = p;
  changed.seal.reset();
  CHECK_FALSE(pub.verifies(changed));
}

TEST_CASE("control guard: kill, leave, suspend and log are guarded, status and routes are open") {
  for (const char* g : {"kill", "leave", "suspend /tmp/x", "log", "log 20", "  kill now"}) CHECK(is_guarded(g));
  // Behind any white space the node's answer skips, and followed by any of it.
  for (const char* g : {"\rkill", "\vkill", "\fkill", "\t\nleave", "kill\r", "log\v20"}) CHECK_MESSAGE(is_guarded(g), g);
  for (const char* o : {"status", "routes", "", "killall", "reboot"}) CHECK_FALSE(is_guarded(o));
}

TEST_CASE("control guard: a node without a controller key refuses guarded requests and says how to set one") {
  control_guard guard;
  const auto v = guard.check(sealed(controller_key::generate(), "kill"), self, self, now);
  CHECK(v.why == control_verdict::refusal::no_key);
  CHECK(v.text.find("control_key_file") != std::string::npos);
  CHECK(v.text.find("PHOENIX_CONTROL_KEY_FILE") != std::string::npos);
}

TEST_CASE("control guard: a request signed by the controller for this node, sent to its resource name, passes") {
  const auto key = controller_key::generate();
  control_guard guard(public_of(key));
  CHECK(guard.check(sealed(key, "kill"), self, self, now).admitted());
  CHECK(guard.check(sealed(key, "leave", self, now + 5, 2), self, self, now + 10).admitted());
}

TEST_CASE("control guard: unsigned, other-key, other-target and virtual-node requests are refused") {
  const auto key = controller_key::generate();
  control_guard guard(public_of(key));
  control_packet bare{control_packet::kind::request, true, 1, "kill", std::nullopt};
  CHECK(guard.check(bare, self, self, now).why == control_verdict::refusal::unsealed);
  CHECK(guard.check(sealed(controller_key::generate(), "kill"), self, self, now).why ==
        control_verdict::refusal::bad_signature);
  CHECK(guard.check(sealed(key, "kill", self + 1), self, self, now).why == control_verdict::refusal::other_target);
  // Sealed for this node but sent to a virtual node (which whoever assumes it would receive).
  CHECK(guard.check(sealed(key, "kill", self, now, 3), self, 17, now).why ==
        control_verdict::refusal::not_to_resource_name);
  // None of the refusals used up the nonce: the genuine request still passes.
  CHECK(guard.check(sealed(key, "kill", self, now, 3), self, self, now).admitted());
}

TEST_CASE("control guard: a replayed request is refused, within the window and after the clock is set back") {
  const auto key = controller_key::generate();
  control_guard guard(public_of(key), 120'000, 16);
  const auto p = sealed(key, "leave");
  REQUIRE(guard.check(p, self, self, now).admitted());
  const auto again = guard.check(p, self, self, now + 1000);
  CHECK(again.why == control_verdict::refusal::replayed);
  CHECK(again.text.find("replay") != std::string::npos);
  // Past the window it is stale; setting the clock back afterwards does not make it acceptable again.
  CHECK(guard.check(p, self, self, now + 121'000).why == control_verdict::refusal::stale);
  CHECK(guard.check(p, self, self, now + 500).why == control_verdict::refusal::stale);
}

TEST_CASE("control guard: a timestamp outside the window is refused, and the text says how far and what to do") {
  const auto key = controller_key::generate();
  control_guard guard(public_of(key));
  const auto ahead = guard.check(sealed(key, "kill", self, now + 300'000), self, self, now);
  CHECK(ahead.why == control_verdict::refusal::future);
  CHECK(ahead.text.find("300.0 s ahead") != std::string::npos);
  CHECK(ahead.text.find("NTP") != std::string::npos);
  const auto behind = guard.check(sealed(key, "kill", self, now - 200'000, 2), self, self, now);
  CHECK(behind.why == control_verdict::refusal::stale);
  CHECK(behind.text.find("200.0 s behind") != std::string::npos);
  // Within the window either way: accepted.
  CHECK(guard.check(sealed(key, "kill", self, now + 100'000, 3), self, self, now).admitted());
  CHECK(guard.check(sealed(key, "kill", self, now - 100'000, 4), self, self, now).admitted());
}

TEST_CASE("replay cache: full of live entries it refuses new ones, and admits again once they expired") {
  replay_cache cache(1000, 3);
  CHECK(cache.admit(nonce_of(1), now, now) == replay_cache::result::fresh);
  CHECK(cache.admit(nonce_of(2), now, now) == replay_cache::result::fresh);
  CHECK(cache.admit(nonce_of(3), now + 500, now) == replay_cache::result::fresh);
  CHECK(cache.admit(nonce_of(1), now, now) == replay_cache::result::replayed);
  CHECK(cache.admit(nonce_of(4), now, now) == replay_cache::result::full);
  CHECK(cache.size() == 3);
  CHECK(cache.admit(nonce_of(4), now + 1001, now + 1001) == replay_cache::result::fresh);  // 1 and 2 expired
  CHECK(cache.size() == 2);
}

TEST_CASE("control key file: keys load from PEM, a private key open to others is warned about, and bad files "
          "name the fix") {
  test::temp_dir dir;
  const auto keys = dir.make_controller_keys();
  auto priv = load_controller_key(keys.private_file, true);
  REQUIRE_MESSAGE(priv.error.empty(), priv.error);
  CHECK(priv.key.can_sign());
  CHECK(priv.warning.empty());
  auto pub = load_controller_key(keys.public_file, false);
  REQUIRE_MESSAGE(pub.error.empty(), pub.error);
  CHECK_FALSE(pub.key.can_sign());
  CHECK(pub.key.verifies(sealed(priv.key, "kill")));

  ::chmod(keys.private_file.c_str(), 0644);
  CHECK(load_controller_key(keys.private_file, true).warning.find("chmod 600") != std::string::npos);

  const auto missing = load_controller_key(dir / "nope.pub", false);
  CHECK(missing.key.empty());
  CHECK(missing.error.find("controller.pub") != std::string::npos);
  CHECK(load_controller_key(keys.public_file, true).error.find("no PEM private key") != std::string::npos);
  std::ofstream(dir / "big.pub") << std::string(70 * 1024, 'k');
  CHECK(load_controller_key(dir / "big.pub", false).error.find("64 KiB") != std::string::npos);
  std::ofstream(dir / "rsa.pub") << "-----BEGIN PUBLIC KEY-----\nnot base64 at all\n-----END PUBLIC KEY-----\n";
  CHECK_FALSE(load_controller_key(dir / "rsa.pub", false).error.empty());
}

TEST_CASE("message log: records with the runtime's own tags are dropped, applications' and services' stay") {
  std::vector<overlay::packet> records(6);
  const std::int32_t tags[] = {0, -1, -2, control_tag, first_service_tag, 7};
  for (std::size_t i = 0; i < records.size(); ++i) records[i].tag = tags[i];
  CHECK(drop_runtime_records(records) == 3);
  REQUIRE(records.size() == 3);
  CHECK(records[0].tag == 0);
  CHECK(records[1].tag == first_service_tag);
  CHECK(records[2].tag == 7);
}
