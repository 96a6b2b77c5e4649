// apps/lu/block_memory.hpp — where the LU application's matrix data lives. Buffers of 64 KiB and more (blocks,
// the rows of an interchange) come from a process-wide pool backed by transparent huge pages, and go back to it
// when freed, for the next buffer of their size class; smaller ones come from malloc.
//
// Why: blocks are generated when first needed (records that have not started move cheaply), so a run touches
// the whole matrix for the first time while it is timed, and on 4 KiB pages that first touch cost a fault per
// page: 48,000 faults and a fifth of a 1-process run at N = 4096 (docs/lu.md, "Block memory"). On huge pages it
// is one fault per 2 MiB, and a freed block is reused instead of unmapped and faulted in again. Blocks of
// less than 64 KiB (nb < 91) come from malloc.
//
// The pool keeps what it was given until the process ends (BlockPool below says how it hands it out).
// Threads: any (a mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace phoenix::apps::lu {

void* block_memory_allocate(std::size_t bytes);    // throws std::bad_alloc
void block_memory_free(void* p, std::size_t bytes);  // bytes as allocated
// Maps at least `bytes` more for the pool and touches it, so that the buffers carved from it later cost no page
// fault: a hint, capped at half of the free physical memory, failures ignored (nothing under ASan).
void block_memory_reserve(std::size_t bytes);

// What the pool holds: mapped in all, and free for reuse now.
struct BlockMemoryStats {
  std::size_t mapped_bytes = 0;
  std::size_t free_bytes = 0;
};
BlockMemoryStats block_memory_stats();

// The pool behind the functions above (one per process; a test makes its own). Sizes are rounded up to a size
// class, eight per doubling (2^k, 9/8·2^k .. 15/8·2^k), so that the many sizes of interchanged rows share a few
// classes and reuse each other's buffers; a power-of-two block size is its own class. A buffer comes from its
// class's free list, else from the current arena, else from the front of a free buffer of a larger class
// (memory already touched, where a new arena would fault in fresh pages), else from a new arena of at least 64
// MiB, aligned to a huge page. Freed buffers go back to their class, never to the system.
class BlockPool {
 public:
  void* allocate(std::size_t bytes);  // throws std::bad_alloc
  void free(void* p, std::size_t bytes);
  // Maps and touches a new arena unless the current one has `bytes` left.
  void reserve(std::size_t bytes);
  BlockMemoryStats stats();

 private:
  void file(void* p, std::size_t size);  // onto its class's free list (never throws)
  void* split_larger(std::size_t size);
  void map_arena(std::size_t at_least);

  std::mutex mutex_;
  std::map<std::size_t, std::vector<void*>> free_;  // by size class
  std::uintptr_t arena_next_ = 0, arena_end_ = 0;
  std::size_t mapped_bytes_ = 0, free_bytes_ = 0;
};

template <class T>
struct BlockAllocator {
  using value_type = T;
  BlockAllocator() = default;
  template <class U>
  BlockAllocator(const BlockAllocator<U>&) {}
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(block_memory_allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) { block_memory_free(p, n * sizeof(T)); }
  // Default-initialised, not zeroed: every buffer of matrix data is written in full before it is read, and
  // zeroing a block first costs a pass over it.
  template <class U>
  void construct(U* p) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <class U>
  friend bool operator==(const BlockAllocator&, const BlockAllocator<U>&) {
    return true;
  }
};

// Matrix data: a block (nb² values, column-major), a panel's part, interchanged rows.
using Doubles = std::vector<double, BlockAllocator<double>>;

}  // namespace phoenix::apps::lu
