// phoenix/random_bits.hpp — 64 unpredictable bits, for what a peer must not guess: a resource name, the number
// of a migration attempt (a forged refuse or done must name it).
#pragma once

#include <openssl/rand.h>

#include <cstdint>
#include <random>

namespace phoenix {

// From libcrypto's generator; should it fail, from the system's (std::random_device, getrandom on Linux), all
// 64 bits drawn: a 32-bit draw would make the value guessable in 2^32 tries.
inline std::uint64_t random_bits() {
  std::uint64_t r = 0;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&r), sizeof r) == 1) return r;
  std::random_device rd;
  return (std::uint64_t{rd()} << 32) ^ std::uint64_t{rd()};
}

}  // namespace phoenix
