// The pool behind phoenix::Bytes' large blocks: reuse, the cache limit, and plain vector behaviour.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <phoenix/bytes.hpp>
#include <thread>
#include <vector>

#include "base/buffer_pool.hpp"

using phoenix::Bytes;

namespace {
// Every test starts from an empty cache and leaves the default limit behind.
struct pool_reset {
  pool_reset() {
    phoenix::set_buffer_pool_limit(0);
    phoenix::set_buffer_pool_limit(64u << 20);
  }
  ~pool_reset() {
    phoenix::set_buffer_pool_limit(0);
    phoenix::set_buffer_pool_limit(64u << 20);
  }
};
}  // namespace

TEST_CASE("a freed large block is handed out again for a request of the same class") {
  pool_reset reset;
  const std::byte* first = nullptr;
  {
    Bytes a(1 << 20);
    first = a.data();
    a[0] = std::byte{1};
    a[a.size() - 1] = std::byte{2};
  }
  CHECK(phoenix::buffer_pool_cached_bytes() == (1u << 20));
  Bytes b((1 << 20) - 100);  // the same power-of-two class
  CHECK(b.data() == first);
  CHECK(phoenix::buffer_pool_cached_bytes() == 0);
}

TEST_CASE("blocks of another class, and small blocks, do not come from the cache") {
  pool_reset reset;
  { Bytes a(1 << 20); }
  Bytes larger((1 << 20) + 1);  // next class up
  Bytes small(1000);            // operator new
  CHECK(phoenix::buffer_pool_cached_bytes() == (1u << 20));
}

TEST_CASE("the cache never holds more than its limit") {
  pool_reset reset;
  phoenix::set_buffer_pool_limit(3u << 20);
  {
    std::vector<Bytes> v;
    for (int i = 0; i < 5; ++i) v.emplace_back(1 << 20);
  }
  CHECK(phoenix::buffer_pool_cached_bytes() == (3u << 20));
  phoenix::set_buffer_pool_limit(1u << 20);  // lowering the limit releases the surplus at once
  CHECK(phoenix::buffer_pool_cached_bytes() == (1u << 20));
  phoenix::set_buffer_pool_limit(0);
  CHECK(phoenix::buffer_pool_cached_bytes() == 0);
  { Bytes a(1 << 20); }
  CHECK(phoenix::buffer_pool_cached_bytes() == 0);
}

TEST_CASE("pooled buffers behave as vectors: growth keeps the contents, copies are independent") {
  pool_reset reset;
  Bytes a = phoenix::copy_bytes(std::vector<std::byte>(100'000, std::byte{7}));
  a.resize(3'000'000);  // moves to a larger class
  CHECK(std::all_of(a.begin(), a.begin() + 100'000, [](std::byte b) { return b == std::byte{7}; }));
  Bytes b = a;
  b[0] = std::byte{9};
  CHECK(a[0] == std::byte{7});
  a.clear();
  a.shrink_to_fit();
  CHECK(a.capacity() == 0);
}

TEST_CASE("a pooled body starts where it sits on the wire, behind its heads, and a huge-page block at its page") {
  pool_reset reset;
  const auto page_offset = [](const Bytes& b) { return reinterpret_cast<std::uintptr_t>(b.data()) % 4096; };
  const Bytes body(1 << 20);
  CHECK(page_offset(body) == phoenix::base::pool_data_lead_bytes);
  const Bytes huge(4 << 20);
  CHECK(page_offset(huge) == 0);
  // Every byte can be written: the mapping covers the lead too (without it the last bytes would fault).
  Bytes full(1 << 20);
  std::fill(full.begin(), full.end(), std::byte{3});
  CHECK(full.back() == std::byte{3});
}

TEST_CASE("threads allocating and freeing at once leave a consistent cache") {
  pool_reset reset;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 200; ++i) {
        Bytes b(static_cast<std::size_t>(64 << 10) << ((i + t) % 6));
        b.front() = std::byte{1};
        b.back() = std::byte{2};
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(phoenix::buffer_pool_cached_bytes() <= (64u << 20));
  CHECK(phoenix::buffer_pool_cached_bytes() > 0);
}
