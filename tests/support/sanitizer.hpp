// sanitizer.hpp — whether this test program was built with a sanitizer.
#pragma once

namespace phoenix::test {

// Sanitized builds (ASan, TSan) run several times slower: there, tests run the same paths at smaller sizes.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool sanitized_build = true;
#else
inline constexpr bool sanitized_build = false;
#endif

}  // namespace phoenix::test
