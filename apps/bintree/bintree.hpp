// apps/bintree/bintree.hpp — the binary task tree of the paper's Bintree (section 6): a task of depth d divides
// into two of depth d - 1; a task of depth 0 is a leaf that does `work` rounds of arithmetic and yields a
// checksum of its position in the tree. A node's value is (leaves, checksum): leaf count and the wrapping sum
// of the leaves' checksums, so any order of evaluation — sequential, stolen, moved — gives the same value.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "phoenix/launch/app_cluster.hpp"
#include "apps/steal/task_pool.hpp"

namespace phoenix::apps::bintree {

struct Value {
  std::uint64_t leaves = 0;
  std::uint64_t checksum = 0;
  friend bool operator==(const Value&, const Value&) = default;
};

// The leaf's computation: `work` rounds of a 64-bit mixing function seeded by the leaf's index.
std::uint64_t leaf(std::uint64_t index, std::uint32_t work);

// The same tree by plain recursion, on one core: the baseline and the check.
Value sequential(std::uint32_t depth, std::uint32_t work, std::uint64_t index = 1);

// "leaves N checksum HEX": how results are printed and compared.
std::string describe(const Value& v);

Bytes encode_task(std::uint32_t depth, std::uint64_t index);
Bytes encode_value(const Value& v);
bool decode_value(std::span<const std::byte> b, Value& v);

// The tree for the task pool. Counts the tasks it ran (the paper's unit of progress for Bintree).
class Tree final : public Application {
 public:
  explicit Tree(std::uint32_t work, std::uint32_t grain = 0) : work_(work), grain_(grain) {}
  Outcome run(std::span<const std::byte> task) override;
  Bytes combine(std::span<const std::byte> context, std::vector<Bytes>& values) override;
  std::uint64_t tasks() const { return tasks_; }
  std::uint64_t bad_tasks() const { return bad_tasks_; }  // malformed tasks, run as empty subtrees

 private:
  std::uint32_t work_;
  std::uint32_t grain_;  // subtrees of this depth or less run as one task, by plain recursion
  std::uint64_t tasks_ = 0;
  std::uint64_t bad_tasks_ = 0;
};

// The node process of a bintree run under the launcher (the root task is the whole tree of this depth).
int run_node(launch::NodeProcess& process, std::uint32_t depth, std::uint32_t work, std::uint32_t grain = 0);

}  // namespace phoenix::apps::bintree
