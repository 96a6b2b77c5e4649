// base/buffer_pool.cpp — the process-wide pool behind phoenix::Bytes' large blocks (see phoenix/bytes.hpp).
//
// One free list per power-of-two size class. A block is mapped with mmap in its class's size: the part beyond
// what the vector asked for is never touched, so it never becomes resident. Classes of 2 MiB and more ask for
// transparent huge pages (one fault per 2 MiB instead of 512). The pool caches at most `limit` bytes; a block
// freed beyond that is unmapped at once.
//
// Below the huge-page classes (lead_of), a block's data starts data_lead bytes into its mapping: where a message
// body sits in a write, behind its frame header and data head. The kernel copies a write into the socket's page
// fragments from the start of a page on, so the body lands data_lead bytes past a page boundary on both ends;
// stored at the same offset, it is copied between equally aligned addresses, which the CPU's string copy does
// much faster than between addresses some bytes apart (docs/overlay.md, "Reliable links"; bench/README.md, the
// socket floor).
#include <sys/mman.h>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <phoenix/bytes.hpp>
#include <vector>

#include "base/buffer_pool.hpp"

namespace phoenix {
namespace {

constexpr std::size_t huge_page_bytes = 2u << 20;
constexpr std::size_t data_lead = base::pool_data_lead_bytes;
static_assert(data_lead % alignof(std::max_align_t) == 0, "a body must stay aligned for any type");
constexpr int class_count = 48;  // classes 2^0 .. 2^47: anything a 64-bit size can reasonably ask for

struct pool {
  std::mutex mu;
  std::array<std::vector<void*>, class_count> free;
  std::size_t cached = 0;
  std::size_t limit = 64u << 20;
};

pool& the_pool() {
  static pool* p = new pool;  // never destroyed: Bytes may be freed by static destructors after main
  return *p;
}

std::size_t class_bytes(std::size_t n) { return std::bit_ceil(n); }
int class_index(std::size_t n) { return std::countr_zero(class_bytes(n)); }

// Where a block's data starts in its mapping. Blocks of huge-page classes start at the mapping: the kernel
// places a mapping on a 2 MiB boundary (so that it can use huge pages throughout) only if its length is a
// multiple of 2 MiB, and without that a 16 MiB ping-pong lost a tenth of its speed.
std::size_t lead_of(std::size_t bytes) { return bytes >= huge_page_bytes ? 0 : data_lead; }

// Maps a block for `bytes` (a class size) of data and returns where the data starts.
void* map_block(std::size_t bytes) {
  const std::size_t mapped = bytes + lead_of(bytes);
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (bytes >= huge_page_bytes) ::madvise(p, mapped, MADV_HUGEPAGE);  // advice only: failure changes nothing
#endif
  return static_cast<std::byte*>(p) + lead_of(bytes);
}

void unmap_block(void* data, std::size_t bytes) {
  ::munmap(static_cast<std::byte*>(data) - lead_of(bytes), bytes + lead_of(bytes));
}

// Releases the oldest cached blocks until the cache fits the limit. Called with the lock held.
void trim_locked(pool& pl) {
  for (int c = class_count - 1; c >= 0 && pl.cached > pl.limit; --c) {
    auto& list = pl.free[static_cast<std::size_t>(c)];
    while (!list.empty() && pl.cached > pl.limit) {
      unmap_block(list.back(), std::size_t{1} << c);
      list.pop_back();
      pl.cached -= std::size_t{1} << c;
    }
  }
}

}  // namespace

namespace detail {

void* pool_allocate(std::size_t n) {
  if (n > (std::size_t{1} << (class_count - 1))) throw std::bad_alloc();
  auto& pl = the_pool();
  const int c = class_index(n);
  {
    std::lock_guard lock(pl.mu);
    auto& list = pl.free[static_cast<std::size_t>(c)];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      pl.cached -= class_bytes(n);
      return p;
    }
  }
  return map_block(class_bytes(n));
}

void pool_deallocate(void* p, std::size_t n) noexcept {
  if (!p) return;
  auto& pl = the_pool();
  const std::size_t bytes = class_bytes(n);
  {
    std::lock_guard lock(pl.mu);
    if (pl.cached + bytes <= pl.limit) {
      try {
        pl.free[static_cast<std::size_t>(class_index(n))].push_back(p);
        pl.cached += bytes;
        return;
      } catch (const std::bad_alloc&) {
        // no room to remember it: unmap it below
      }
    }
  }
  unmap_block(p, bytes);
}

}  // namespace detail

void set_buffer_pool_limit(std::size_t bytes) {
  auto& pl = the_pool();
  std::lock_guard lock(pl.mu);
  pl.limit = bytes;
  trim_locked(pl);
}

std::size_t buffer_pool_cached_bytes() {
  auto& pl = the_pool();
  std::lock_guard lock(pl.mu);
  return pl.cached;
}

}  // namespace phoenix
