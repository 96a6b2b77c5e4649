// libFuzzer harness: frame authentication on arbitrary bytes. A decoder set up as a link's is after its
// handshake (trailers on, the link buffer) reassembles the input, and every frame but a handshake frame is
// checked against the keys of a real handshake the input cannot know, as overlay/links/connection.cpp checks
// it: no input may crash the decoder or the check, and none may carry a tag that verifies. Built with
// -fsanitize=fuzzer,address by clang (PHOENIX_BUILD_FUZZ), and as a corpus-replay test otherwise.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "overlay/links/frame.hpp"
#include "overlay/links/frame_protection.hpp"

using namespace phoenix::overlay;

namespace {

link_keys receiver_keys() {
  static constexpr std::string_view key = "fuzzing key the input cannot know 0123456789";
  const auto k = std::as_bytes(std::span(key));
  handshake d(k, 1000, 1001, "d", link_role::dialler, protection_mode::integrity);
  handshake a(k, 1000, 1002, "a", link_role::acceptor, protection_mode::integrity);
  if (a.on_hello(d.hello_payload()) || d.on_hello(a.hello_payload()) || a.on_auth(d.auth_payload(0)) ||
      d.on_auth(a.auth_payload(0))) {
    __builtin_trap();
  }
  return a.keys();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const link_keys keys = receiver_keys();
  frame_protection protection(keys);
  const std::size_t chunk = 1 + data[0] % 251;
  frame_decoder d(1u << 20, 4096);
  d.set_trailer_bytes(protection.tag_bytes());
  std::size_t pos = 1;
  while (pos < size) {
    auto room = d.prepare();
    const std::size_t n = std::min({chunk, room.size(), size - pos});
    std::memcpy(room.data(), data + pos, n);
    d.commit(n);
    pos += n;
    frame_view f;
    for (;;) {
      const auto st = d.next(f);
      if (st == frame_decoder::status::error) return 0;
      if (st == frame_decoder::status::need_more) break;
      if (is_handshake_frame(f.header.type)) continue;
      std::array<std::byte, frame_header_bytes> header{};
      encode_frame_header(header.data(), f.header.type, f.header.length);
      std::array<std::span<const std::byte>, 3> pieces{std::span<const std::byte>(header), f.payload, {}};
      const std::size_t count = f.body && f.header.type == frame_type::data ? 3 : 2;
      if (count == 3) pieces[2] = *f.body;
      if (protection.open(std::span(pieces).first(count), f.trailer)) __builtin_trap();  // a forged frame passed
      return 0;  // a link closes at the first frame that fails
    }
  }
  return 0;
}
