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
// The pool keeps what it was given until the process ends: at most the peak of each size class (sizes are
// rounded up to 64 KiB, so a block size has one class and interchange rows a few). Threads: any (a mutex).
#pragma once

#include <cstddef>
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
