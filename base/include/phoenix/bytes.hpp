// phoenix/bytes.hpp — the byte buffer that carries message bodies from the wire to the application.
//
// A std::vector whose growth leaves new bytes uninitialised (a 16 MiB message is read from the socket straight
// into its buffer, and zero-filling it first would cost a third of the transfer time), and whose large blocks
// come from a process-wide pool: a fresh 16 MiB block costs 4,096 page faults, each zeroing a page, on every
// message; a recycled one costs none (MPI libraries keep registered-buffer free lists for the same reason).
#pragma once

#include <phoenix/visibility.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <vector>

namespace phoenix {

namespace detail {
// Blocks of at least pooled_bytes_min come from the pool (size classes of powers of two, mapped with mmap so
// that a class's unused tail is never touched); smaller ones from operator new. Thread-safe.
inline constexpr std::size_t pooled_bytes_min = 64 * 1024;
PH_API void* pool_allocate(std::size_t n);
PH_API void pool_deallocate(void* p, std::size_t n) noexcept;
}  // namespace detail

// How many bytes the pool keeps cached, at most (default 64 MiB), and what it holds now. Blocks beyond the
// limit go back to the system when freed.
PH_API void set_buffer_pool_limit(std::size_t bytes);
PH_API std::size_t buffer_pool_cached_bytes();

template <class T>
struct default_init_allocator {
  using value_type = T;
  default_init_allocator() noexcept = default;
  template <class U>
  default_init_allocator(const default_init_allocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes >= detail::pooled_bytes_min) return static_cast<T*>(detail::pool_allocate(bytes));
    return static_cast<T*>(::operator new(bytes));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    if (bytes >= detail::pooled_bytes_min)
      detail::pool_deallocate(p, bytes);
    else
      ::operator delete(p);
  }
  template <class U>
  void construct(U* p) noexcept(noexcept(::new (static_cast<void*>(p)) U)) {
    ::new (static_cast<void*>(p)) U;  // default-initialise: no zero fill
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <class U>
  bool operator==(const default_init_allocator<U>&) const noexcept {
    return true;
  }
};

using Bytes = std::vector<std::byte, default_init_allocator<std::byte>>;

// A copy of `data` made by one memcpy. (Building a Bytes from an iterator range would construct byte by byte
// through the allocator, several times slower for the large bodies this buffer exists for.)
inline Bytes copy_bytes(std::span<const std::byte> data) {
  Bytes b(data.size());
  if (!data.empty()) std::memcpy(b.data(), data.data(), data.size());
  return b;
}

}  // namespace phoenix
