// libFuzzer harness: the link handshake on arbitrary HELLO, AUTH and REFUSE payloads. The first two bytes split
// the input into a HELLO and an AUTH for a node that holds a key the input cannot know; whatever comes, the
// handshake must refuse without crashing, and must never complete (that would be a forged AUTH).
// Built with -fsanitize=fuzzer,address by clang (PHOENIX_BUILD_FUZZ), and as a corpus-replay test otherwise.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "overlay/links/handshake.hpp"

using namespace phoenix::overlay;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const auto input = std::as_bytes(std::span(data, size));
  (void)handshake::decode_refuse(input);
  const std::size_t hello_len = std::min<std::size_t>(size - 2, (std::size_t{data[0]} << 8) | data[1]);
  const auto hello = input.subspan(2, hello_len);
  const auto auth = input.subspan(2 + hello_len);

  static constexpr std::string_view key = "fuzzing key the input cannot know 0123456789";
  nonce_bytes nonce{};
  nonce.fill(0x5A);
  handshake hs(std::as_bytes(std::span(key)), 1000, 1002, "target", link_role::acceptor,
               protection_mode::integrity, nonce);
  if (hs.on_hello(hello)) return 0;
  (void)hs.auth_payload(1, secret_bytes{});
  if (!hs.on_auth(auth) || hs.is_complete()) __builtin_trap();  // an AUTH nobody with the key made verified
  return 0;
}
