// apps/bintree/bintree.cpp — see bintree.hpp.
#include "apps/bintree/bintree.hpp"

#include <cinttypes>
#include <cstdio>

#include "apps/steal/byte_codec.hpp"
#include "apps/steal/pool_node.hpp"

namespace phoenix::apps::bintree {

std::uint64_t leaf(std::uint64_t index, std::uint32_t work) {
  // splitmix64's finaliser, iterated: cheap, deterministic and impossible for the compiler to fold away.
  std::uint64_t x = index;
  for (std::uint32_t i = 0; i <= work; ++i) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
  }
  return x;
}

Value sequential(std::uint32_t depth, std::uint32_t work, std::uint64_t index) {
  if (depth == 0) return Value{1, leaf(index, work)};
  const Value a = sequential(depth - 1, work, 2 * index);
  const Value b = sequential(depth - 1, work, 2 * index + 1);
  return Value{a.leaves + b.leaves, a.checksum + b.checksum};
}

std::string describe(const Value& v) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "leaves %" PRIu64 " checksum %016" PRIx64, v.leaves, v.checksum);
  return buf;
}

Bytes encode_task(std::uint32_t depth, std::uint64_t index) {
  ByteWriter w(12);
  w.u32(depth);
  w.u64(index);
  return std::move(w).take();
}

Bytes encode_value(const Value& v) {
  ByteWriter w(16);
  w.u64(v.leaves);
  w.u64(v.checksum);
  return std::move(w).take();
}

bool decode_value(std::span<const std::byte> b, Value& v) {
  ByteReader r(b);
  return r.u64(v.leaves) && r.u64(v.checksum) && r.at_end();
}

Outcome Tree::run(std::span<const std::byte> task) {
  ByteReader r(task);
  std::uint32_t depth = 0;
  std::uint64_t index = 0;
  if (!r.u32(depth) || !r.u64(index) || !r.at_end() || depth > 62) {
    ++bad_tasks_;  // not a task of ours: counted (the program reports it) and valued as an empty subtree
    return Outcome::value(encode_value(Value{}));
  }
  ++tasks_;
  if (depth <= grain_) return Outcome::value(encode_value(sequential(depth, work_, index)));
  return Outcome::divide({encode_task(depth - 1, 2 * index), encode_task(depth - 1, 2 * index + 1)}, {});
}

Bytes Tree::combine(std::span<const std::byte>, std::vector<Bytes>& values) {
  Value sum;
  for (const auto& b : values) {
    Value v;
    if (decode_value(b, v)) {
      sum.leaves += v.leaves;
      sum.checksum += v.checksum;
    }
  }
  return encode_value(sum);
}

int run_node(launch::NodeProcess& process, std::uint32_t depth, std::uint32_t work, std::uint32_t grain) {
  Tree tree(work, grain);
  PoolNodeParts parts;
  parts.app = &tree;
  parts.root_task = encode_task(depth, 1);
  parts.units = [&] { return tree.tasks(); };
  parts.errors = [&] { return tree.bad_tasks(); };
  parts.describe = [](const Bytes& b) {
    Value v;
    return decode_value(b, v) ? describe(v) : std::string("malformed value");
  };
  return run_pool_node(process, parts);
}

}  // namespace phoenix::apps::bintree
