// overlay/routing/seqno.hpp — DSDV destination sequence numbers: even ones a source issues, odd ones mark a
// route someone found broken. Internal to route_table (route_table.cpp, route_input.cpp).
//
// All saturate below max_plausible_seqno (route_table.hpp), so nothing this node originates is ever beyond
// what its neighbours accept, and a hostile seqno cannot wrap anything back to 0.
#pragma once

#include <cstdint>

#include "overlay/routing/route_table.hpp"

namespace phoenix::overlay::seqno {

inline constexpr std::uint64_t max_even = max_plausible_seqno - 1;

constexpr std::uint64_t even_at_least(std::uint64_t s) { return s >= max_even ? max_even : s + (s & 1); }
constexpr std::uint64_t next_even_above(std::uint64_t s) {
  return s >= max_even ? max_even : even_at_least(s + 1);
}
// DSDV: seq+1 if even, else seq. For s <= max_even the result is plausible.
constexpr std::uint64_t odd_at_least(std::uint64_t s) { return s | 1; }

}  // namespace phoenix::overlay::seqno
