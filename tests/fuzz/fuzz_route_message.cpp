// libFuzzer harness: the routing-update, summary, dump-request and route-request parsers; whatever decodes must
// re-encode to the same bytes (the format has one encoding per value).
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <span>

#include "overlay/routing/route_message.hpp"

using namespace phoenix::overlay;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  if (const auto u = decode_update(in)) {
    const auto out = encode_update(*u, 1u << 30);
    if (out.size() != 1 || !std::equal(out[0].begin(), out[0].end(), in.begin(), in.end())) std::abort();
  }
  if (const auto s = decode_summary(in)) {
    const auto out = encode_summary(*s);
    if (!std::equal(out.begin(), out.end(), in.begin(), in.end())) std::abort();
  }
  if (decode_dump_request(in) && size != 0) std::abort();
  if (const auto r = decode_request(in)) {
    const auto out = encode_request(*r);
    if (!std::equal(out.begin(), out.end(), in.begin(), in.end())) std::abort();
  }
  return 0;
}
