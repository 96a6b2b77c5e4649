// libFuzzer harness: the frame decoder and the data-head decoder on arbitrary bytes, fed in varying chunks.
// Built with -fsanitize=fuzzer,address by clang (PHOENIX_BUILD_FUZZ), and as a corpus-replay test otherwise.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>

#include "overlay/links/frame.hpp"

using namespace phoenix::overlay;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  // The first byte picks the chunking and whether the handshake limit applies, so both paths get explored.
  const std::size_t chunk = 1 + data[0] % 97;
  const std::uint32_t max_payload = (data[0] & 0x80) ? max_handshake_payload : 1u << 20;
  frame_decoder d(max_payload, 1024);
  std::size_t pos = 1;
  while (pos < size) {
    auto space = d.prepare();
    const std::size_t n = std::min({chunk, space.size(), size - pos});
    std::memcpy(space.data(), data + pos, n);
    d.commit(n);
    pos += n;
    frame_view f;
    for (;;) {
      const auto st = d.next(f);
      if (st == frame_decoder::status::error) return 0;
      if (st == frame_decoder::status::need_more) break;
      if (f.header.type == frame_type::data) {
        data_head h;
        (void)decode_data_head(f.payload, h);
      } else if (f.header.type == frame_type::ack) {
        (void)decode_ack_payload(f.payload);
      }
    }
  }
  return 0;
}
