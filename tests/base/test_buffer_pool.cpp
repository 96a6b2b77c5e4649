// The pool behind phoenix::Bytes' large blocks: reuse, the cache limit, and plain vector behaviour.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
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
  // Every byte can be written: the mapping covers the lead too (without it the last bytes would fault, or run
  // into the next block). Two live blocks filled with different bytes keep them.
  Bytes full(1 << 20), next(1 << 20);
  std::fill(full.begin(), full.end(), std::byte{3});
  std::fill(next.begin(), next.end(), std::byte{5});
  CHECK(std::all_of(full.begin(), full.end(), [](std::byte b) { return b == std::byte{3}; }));
  CHECK(std::all_of(next.begin(), next.end(), [](std::byte b) { return b == std::byte{5}; }));
}

TEST_CASE("threads allocating and freeing at once leave a consistent cache") {
  pool_reset reset;
  std::vector<std::thread> threads;
  std::atomic<int> overwritten{0};  // blocks whose bytes changed while their thread held them: handed out twice
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &overwritten] {
      const auto mine = static_cast<std::byte>(t + 1);
      for (int i = 0; i < 200; ++i) {
        Bytes b(static_cast<std::size_t>(64 << 10) << ((i + t) % 6));
        std::fill(b.begin(), b.end(), mine);
        std::this_thread::yield();
        if (!std::all_of(b.begin(), b.end(), [mine](std::byte x) { return x == mine; })) ++overwritten;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(overwritten == 0);
  CHECK(phoenix::buffer_pool_cached_bytes() <= (64u << 20));
  CHECK(phoenix::buffer_pool_cached_bytes() > 0);
}
