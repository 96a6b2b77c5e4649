// apps/lu/block.cpp — see block.hpp.
#include "apps/lu/block.hpp"

namespace phoenix::apps::lu {
namespace {

bool known_kind(std::uint8_t k) {
  return k >= static_cast<std::uint8_t>(InputKind::panel) && k <= static_cast<std::uint8_t>(InputKind::start);
}
bool known_stage(std::uint8_t s) { return s <= static_cast<std::uint8_t>(Stage::factored); }

}  // namespace

const Payload* BlockRecord::input(InputKind kind, std::uint32_t at_step, std::uint32_t from) const {
  const auto it = inputs.find(InputKey{kind, at_step, from});
  return it == inputs.end() ? nullptr : it->second.get();
}

void BlockRecord::next_step() {
  std::erase_if(inputs, [this](const auto& entry) { return entry.first.step == step; });
  ++step;
  stage = Stage::begin;
}

namespace {

void write_record(ByteWriter& w, const BlockRecord& r, const std::map<const Payload*, std::uint64_t>& table) {
  w.u64(r.index);
  w.u32(r.step);
  w.u8(static_cast<std::uint8_t>(r.stage));
  w.u8(r.final ? 1 : 0);
  w.u32(r.migrations);
  write_doubles(w, r.data);
  w.u64(r.inputs.size());
  for (const auto& [key, payload] : r.inputs) {
    w.u8(static_cast<std::uint8_t>(key.kind));
    w.u32(key.step);
    w.u32(key.from);
    w.u64(table.at(payload.get()));
  }
}

bool read_record(ByteReader& r, BlockRecord& out, std::uint32_t nb,
                 const std::vector<std::shared_ptr<const Payload>>& table) {
  std::uint8_t stage = 0, final = 0;
  std::uint64_t count = 0;
  if (!r.u64(out.index) || !r.u32(out.step) || !r.u8(stage) || !known_stage(stage) || !r.u8(final) ||
      final > 1 || !r.u32(out.migrations) || !read_doubles(r, out.data) ||
      (!out.data.empty() && out.data.size() != std::size_t{nb} * nb) || !r.u64(count))
    return false;
  out.stage = static_cast<Stage>(stage);
  out.final = final == 1;
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint8_t kind = 0;
    InputKey key;
    std::uint64_t at = 0;
    if (!r.u8(kind) || !known_kind(kind) || !r.u32(key.step) || !r.u32(key.from) || !r.u64(at) ||
        at >= table.size())
      return false;
    key.kind = static_cast<InputKind>(kind);
    if (!out.inputs.emplace(key, table[at]).second) return false;
  }
  return true;
}

}  // namespace

void write_records(ByteWriter& w, const std::vector<const BlockRecord*>& records) {
  std::map<const Payload*, std::uint64_t> table;
  std::vector<const Payload*> payloads;
  for (const BlockRecord* r : records) {
    for (const auto& [key, payload] : r->inputs) {
      if (table.emplace(payload.get(), payloads.size()).second) payloads.push_back(payload.get());
    }
  }
  // The state of many blocks is hundreds of MiB: one allocation, not a doubling series of copies.
  std::size_t bytes = 64;  // the counts, and the packer's header before them
  for (const Payload* p : payloads)
    bytes += 28 + p->rows.size() * sizeof(std::uint32_t) + p->data.size() * sizeof(double);
  for (const BlockRecord* r : records) bytes += 34 + r->data.size() * sizeof(double) + r->inputs.size() * 17;
  w.reserve(bytes);
  w.u64(payloads.size());
  for (const Payload* p : payloads) w.bytes(encode(*p));
  w.u64(records.size());
  for (const BlockRecord* r : records) write_record(w, *r, table);
}

std::optional<std::vector<BlockRecord>> read_records(ByteReader& r, std::uint32_t nb,
                                                     std::uint64_t max_records) {
  std::uint64_t count = 0;
  if (!r.u64(count)) return std::nullopt;
  std::vector<std::shared_ptr<const Payload>> table;
  for (std::uint64_t i = 0; i < count; ++i) {
    std::span<const std::byte> encoded;
    if (!r.view(encoded)) return std::nullopt;
    auto payload = decode_payload(encoded);
    if (!payload) return std::nullopt;
    table.push_back(std::make_shared<const Payload>(std::move(*payload)));
  }
  if (!r.u64(count) || count > max_records) return std::nullopt;
  std::vector<BlockRecord> records(count);
  for (BlockRecord& record : records) {
    if (!read_record(r, record, nb, table)) return std::nullopt;
  }
  return records;
}

}  // namespace phoenix::apps::lu
