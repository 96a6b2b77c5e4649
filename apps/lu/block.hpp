// apps/lu/block.hpp — a block's record: everything about one nb×nb block of the matrix, which lives at the
// block's virtual node and moves with it (docs/lu.md): its data, where it is in the algorithm, and the inputs that
// arrived before it could use them. Records travel in pack/unpack as written here.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "apps/lu/payload.hpp"

namespace phoenix::apps::lu {

// start: the run has begun (the first panel's blocks wait for it, so that the nodes of the start have their
// records before the clock starts).
enum class InputKind : std::uint8_t { panel = 1, row, left, column, rows, start };

// Inputs are told apart by kind and step, and by sender where one step brings several of a kind: the panel's
// block rows (at the diagonal), the block rows that send interchanged rows.
struct InputKey {
  InputKind kind = InputKind::panel;
  std::uint32_t step = 0;
  std::uint32_t from = 0;
  friend auto operator<=>(const InputKey&, const InputKey&) = default;
};

// How far into its current step a block is.
enum class Stage : std::uint8_t {
  begin,     // nothing done yet
  sent,      // its panel data, or its rows for the step's interchanges, have been sent
  swapped,   // the step's interchanges are applied
  factored,  // (diagonal block) the panel is factored and multicast
};

struct BlockRecord {
  std::uint64_t index = 0;  // b = I·B + J
  std::uint32_t step = 0;
  Stage stage = Stage::begin;
  bool final = false;
  std::uint32_t migrations = 0;  // times this record moved to another node
  // nb×nb, column-major. Empty until first needed (it is generated then: a record that has not started moves
  // cheaply), while a panel block's data is at the diagonal, and once final (the data went to the collector).
  Doubles data;
  // Shared: one multicast message feeds every block of a node in its row or column.
  std::map<InputKey, std::shared_ptr<const Payload>> inputs;

  const Payload* input(InputKind kind, std::uint32_t step, std::uint32_t from = 0) const;
  // Drops the inputs of the current step and moves on to the next.
  void next_step();
};

// Records travel together, and the inputs they share (one multicast feeds every block of a node in its row or
// column) are written once: a table of payloads, then the records, whose inputs refer to the table.
void write_records(ByteWriter& w, const std::vector<const BlockRecord*>& records);
// Checks what can be checked without the layout: known kinds and stages, data of nb² values or none, inputs
// that refer to the table, no more than max_records records. nullopt if anything is wrong.
std::optional<std::vector<BlockRecord>> read_records(ByteReader& r, std::uint32_t nb,
                                                     std::uint64_t max_records);

}  // namespace phoenix::apps::lu
