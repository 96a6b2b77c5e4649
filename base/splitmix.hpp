// base/splitmix.hpp — splitmix64's finaliser (Steele, Lea, Flood 2014): every input bit reaches every output
// bit. Deterministic and the same on every platform, so what it feeds may be part of a wire protocol.
#pragma once

#include <cstdint>

namespace phoenix::base {

constexpr std::uint64_t splitmix64_mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace phoenix::base
