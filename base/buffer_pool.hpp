// base/buffer_pool.hpp — what the buffer pool behind phoenix::Bytes (<phoenix/bytes.hpp>) promises the links.
#pragma once

#include <cstddef>

namespace phoenix::base {

// Blocks below 2 MiB start their data this many bytes into a page: where a message body sits in a link's write,
// behind the frame header and data head (overlay/links/frame.hpp checks that the two agree; buffer_pool.cpp
// says why).
inline constexpr std::size_t pool_data_lead_bytes = 64;

}  // namespace phoenix::base
