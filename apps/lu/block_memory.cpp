// apps/lu/block_memory.cpp — see block_memory.hpp.
#include "apps/lu/block_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>

namespace phoenix::apps::lu {
namespace {

// Smaller: malloc. Under AddressSanitizer everything is, so that it sees every buffer's bounds and lifetime.
#if defined(__SANITIZE_ADDRESS__)
constexpr std::size_t pooled_from = static_cast<std::size_t>(-1);
#else
constexpr std::size_t pooled_from = std::size_t{64} << 10;
#endif
constexpr std::size_t smallest_class = std::size_t{64} << 10;  // of the rest of a buffer split
constexpr std::size_t huge_page = std::size_t{2} << 20;
constexpr std::size_t arena_bytes = std::size_t{64} << 20;  // mapped at a time (more for a larger buffer)

// n rounded up to a multiple of `to`; bad_alloc where that does not fit in a size_t (a size no one can map).
std::size_t round_up(std::size_t n, std::size_t to) {
  if (n > static_cast<std::size_t>(-1) - (to - 1)) throw std::bad_alloc();
  return (n + to - 1) / to * to;
}

// Size classes (BlockPool): eight steps per doubling, whole pages, so at most an eighth of a buffer unused.
std::size_t class_step(std::size_t bytes) { return std::max(std::bit_floor(bytes) / 8, std::size_t{4096}); }
std::size_t class_of(std::size_t bytes) { return round_up(std::max(bytes, std::size_t{1}), class_step(bytes)); }
// The largest class that fits in `bytes`.
std::size_t class_within(std::size_t bytes) { return bytes / class_step(bytes) * class_step(bytes); }

// Writes to every page of [p, p + bytes) so that the kernel backs it now (MADV_POPULATE_WRITE where the
// kernel has it, Linux 5.14 on; else one write per 4 KiB page).
void populate(void* p, std::size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  if (::madvise(p, bytes, MADV_POPULATE_WRITE) == 0) return;
#endif
  auto* at = static_cast<volatile char*>(p);
  for (std::size_t i = 0; i < bytes; i += 4096) at[i] = 0;
}

}  // namespace

void* BlockPool::allocate(std::size_t bytes) {
  const std::size_t size = class_of(bytes);
  std::lock_guard lock(mutex_);
  if (auto& list = free_[size]; !list.empty()) {
    void* p = list.back();
    list.pop_back();
    free_bytes_ -= size;
    return p;
  }
  if (size > arena_end_ - arena_next_) {
    if (void* p = split_larger(size)) return p;
    map_arena(size);
  }
  void* p = reinterpret_cast<void*>(arena_next_);
  arena_next_ += size;
  return p;
}

void BlockPool::free(void* p, std::size_t bytes) {
  const std::size_t size = class_of(bytes);
  std::lock_guard lock(mutex_);
  file(p, size);
}

void BlockPool::reserve(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  if (arena_end_ - arena_next_ >= bytes) return;
  map_arena(bytes);
  populate(reinterpret_cast<void*>(arena_next_), arena_end_ - arena_next_);
}

BlockMemoryStats BlockPool::stats() {
  std::lock_guard lock(mutex_);
  return {mapped_bytes_, free_bytes_};
}

void BlockPool::file(void* p, std::size_t size) {
  try {
    free_[size].push_back(p);
    free_bytes_ += size;
  } catch (const std::bad_alloc&) {
    // No memory to note it in: the buffer stays mapped, unused (freeing must not throw).
  }
}

void* BlockPool::split_larger(std::size_t size) {
  for (auto it = free_.upper_bound(size); it != free_.end(); ++it) {
    if (it->second.empty()) continue;
    auto* p = static_cast<std::byte*>(it->second.back());
    it->second.pop_back();
    free_bytes_ -= it->first;
    if (const std::size_t rest = class_within(it->first - size); rest >= smallest_class) file(p + size, rest);
    return p;
  }
  return nullptr;
}

void BlockPool::map_arena(std::size_t at_least) {
  const std::size_t bytes = round_up(std::max(at_least, arena_bytes), huge_page);
  void* m = ::mmap(nullptr, bytes + huge_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(m);
  const std::uintptr_t aligned = round_up(start, huge_page);
  if (aligned > start) ::munmap(m, aligned - start);
  if (const std::uintptr_t end = start + bytes + huge_page; end > aligned + bytes)
    ::munmap(reinterpret_cast<void*>(aligned + bytes), end - (aligned + bytes));
  ::madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);  // a hint: without it, 4 KiB pages
  arena_next_ = aligned;
  arena_end_ = aligned + bytes;
  mapped_bytes_ += bytes;
}

namespace {

// Never destroyed: buffers may be freed by static destructors after main.
BlockPool& pool() {
  static BlockPool* p = new BlockPool;
  return *p;
}

}  // namespace

void* block_memory_allocate(std::size_t bytes) {
  if (bytes < pooled_from) {
    if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
    throw std::bad_alloc();
  }
  return pool().allocate(bytes);
}

void block_memory_free(void* p, std::size_t bytes) {
  if (!p) return;
  if (bytes < pooled_from) return std::free(p);
  pool().free(p, bytes);
}

void block_memory_reserve(std::size_t bytes) {
  if (pooled_from == static_cast<std::size_t>(-1)) return;
  const long free_pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (free_pages > 0 && page > 0)
    bytes = std::min(bytes, static_cast<std::size_t>(free_pages) / 2 * static_cast<std::size_t>(page));
  try {
    pool().reserve(bytes);
  } catch (const std::bad_alloc&) {
    // A hint: the buffers are mapped when needed instead.
  }
}

BlockMemoryStats block_memory_stats() { return pool().stats(); }

}  // namespace phoenix::apps::lu
