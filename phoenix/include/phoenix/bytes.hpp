// phoenix/bytes.hpp — the byte buffer that carries message bodies from the wire to the application.
//
// A std::vector whose growth leaves new bytes uninitialised: a 16 MiB message is read from the socket straight
// into its buffer, and zero-filling it first would cost a third of the transfer time.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <vector>

namespace phoenix {

template <class T>
struct default_init_allocator : std::allocator<T> {
  using std::allocator<T>::allocator;
  template <class U>
  struct rebind {
    using other = default_init_allocator<U>;
  };
  template <class U>
  void construct(U* p) noexcept(noexcept(::new(static_cast<void*>(p)) U)) {
    ::new (static_cast<void*>(p)) U;  // default-initialise: no zero fill
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

using Bytes = std::vector<std::byte, default_init_allocator<std::byte>>;

}  // namespace phoenix
