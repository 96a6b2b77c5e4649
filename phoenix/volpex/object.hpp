// object.hpp — what the Volpex dataspace stores and how its calls are named (paper 000, sections III-V).
//
// Every logical call is named by (process, request): the process's id and the count of calls it has issued so
// far. The replicas of one process issue the same sequence of calls, so the k-th call of every replica carries
// the same name: that is how a server tells the first instance of a logical call (which takes effect) from
// its replicas (which must have no side effect, or receive what the first received).
//
// Objects are immutable once stored, and shared: the table, the read log and the replies in flight refer to the
// same bytes, so delivering an object or logging it never copies it (docs/volpex.md, "Logging").
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <phoenix/bytes.hpp>
#include <string>
#include <string_view>

namespace phoenix::volpex {

using process_id = std::uint32_t;
using request_number = std::uint64_t;

struct call_id {
  process_id process = 0;
  request_number request = 0;
  friend auto operator<=>(const call_id&, const call_id&) = default;
};

using object = std::shared_ptr<const Bytes>;

inline object make_object(Bytes bytes) { return std::make_shared<const Bytes>(std::move(bytes)); }

// The virtual node that serves `tag` in a space of `space_size` virtual nodes: XXH64 of the tag's bytes (seed
// 0), modulo the space. Fixed by the algorithm alone, so every process on every host agrees.
std::uint64_t vnode_of(std::string_view tag, std::uint64_t space_size);

}  // namespace phoenix::volpex
