// apps/lu/payload.hpp — what the LU application's messages carry, and how they are written: one shape for every
// message between blocks (and for the inputs a block record buffers), one for a final block on its way to the
// collector. Integers are little-endian (apps/steal/byte_codec.hpp); matrix data travels as IEEE-754 doubles in
// the same byte order. Decoding checks every length against the message: malformed input yields nullopt.
//
// Payload: u32 step, u32 index, u32 n, n x u32 rows, u64 d, d bytes of doubles.
// FinalBlock: u64 block, u32 migrations, u32 n, n x u32 pivots, u64 d, d bytes of doubles.
#pragma once

#include <cstdint>
#include <optional>
#include <phoenix/bytes.hpp>
#include <span>
#include <vector>

#include "apps/lu/block_memory.hpp"
#include "apps/steal/byte_codec.hpp"

namespace phoenix::apps::lu {

// A message between blocks, by tag (factorization.hpp):
//   panel:  step k, index = block row I, data = block (I, k)          -> the diagonal block (k, k)
//   row:    step k, index = block row I, rows = pivots, data = factored block (I, k)  -> row I, J in [k, B)
//   column: step k, index = block column J, data = U_kJ               -> column J, I in (k, B)
//   rows:   step k, index = source block row, rows = destination rows, data = those rows, column-major (for
//           each of the nb columns, one value per row in the order of rows)  -> one block of the same column
struct Payload {
  std::uint32_t step = 0;
  std::uint32_t index = 0;
  std::vector<std::uint32_t> rows;
  Doubles data;
  friend bool operator==(const Payload&, const Payload&) = default;
};

// A block that is final, for the collector; data is empty when the run does not check the result.
struct FinalBlock {
  std::uint64_t block = 0;
  std::uint32_t migrations = 0;       // times the block's record moved to another node
  std::vector<std::uint32_t> pivots;  // the diagonal block's step's pivots (partial pivoting), else empty
  Doubles data;
  friend bool operator==(const FinalBlock&, const FinalBlock&) = default;
};

void write_doubles(ByteWriter& w, std::span<const double> v);
bool read_doubles(ByteReader& r, Doubles& v);

Bytes encode(const Payload& p);
std::optional<Payload> decode_payload(std::span<const std::byte> b);

void write_final(ByteWriter& w, const FinalBlock& f);
// The same from its parts, for a writer that has them elsewhere (no copy of the data into a FinalBlock).
void write_final(ByteWriter& w, std::uint64_t block, std::uint32_t migrations,
                 std::span<const std::uint32_t> pivots, std::span<const double> data);
bool read_final(ByteReader& r, FinalBlock& f);
Bytes encode(const FinalBlock& f);
std::optional<FinalBlock> decode_final(std::span<const std::byte> b);

}  // namespace phoenix::apps::lu
