// apps/multicast/multicast.hpp — the multicasting idiom of the Phoenix paper (section 4.3.1).
//
// The problem: given a range I = [p, q) of application indices and a map f: I -> [0, L) to virtual nodes, send
// one payload to every physical node that assumes f(j) for some j in I, without sending q - p messages (the
// paper uses it to send a bucket range in integer sort, and a matrix element to every node holding part of its
// row or column in LU factorization).
//
// The method: the range travels with the payload. A node that receives it removes every index j for which it
// assumes f(j), handles those itself, and forwards the rest, as ranges, to the virtual nodes responsible for
// them, in the same way. Where the paper sends a range to f(first index), this library sends it to f(middle
// index): with a non-decreasing f the receiver's own indices then form a run around the middle and what remains
// is at most two ranges, one on each side, each at most half as long. So the messages form a binary tree:
//  * with a monotonic f, stable ownership and each node assuming one interval, every node assuming some f(j)
//    receives exactly one message, and nobody else receives any: the total is the number of distinct owners of
//    f(I) (a node assuming several intervals receives one message per run of indices it owns);
//  * no index travels more than floor(log2(q - p)) + 1 hops, nor more hops than there are owners (the paper's
//    "forwarded O(log P) times along the multicasting tree").
// A non-monotonic f (e.g. the paper's cyclic v(i) = K i mod L) scatters indices: every receiver examines each
// index of its message, and the rest, a list of runs, is split into two halves sent on as two messages. Each
// index still reaches its owner exactly once; a message involving k owners causes at most 2^k - 1 messages.
//
// Nothing is dropped when virtual nodes move. Each index is carried by exactly one message at a time, and it
// goes to the node that assumes f(j) when accept_multicast runs there: a receiver that no longer assumes any of
// its indices (they moved away after the message arrived) sends everything on to the same virtual node again,
// which now reaches the new owner.
//
// Wire format (all integers little-endian), followed by the payload:
//   u8 magic 'M' (0x4d), u8 version 1, u16 zero, u32 n (>= 1),
//   n x (u64 lo, u64 hi): non-empty ranges [lo, hi), in increasing order, disjoint.
//
// Threads: call these on an application thread, as Node::send and Node::recv. multicast() never blocks.
// accept_multicast() forwards with Node::send and, while the node's bound on waiting messages is reached
// (PH_EAGAIN), retries for up to forward_patience before it gives up and reports the error.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <phoenix/node.hpp>
#include <span>
#include <system_error>
#include <vector>

namespace phoenix::apps {

// Half-open range [lo, hi) of application indices (not virtual nodes).
struct IndexRange {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  bool empty() const { return lo >= hi; }
  std::uint64_t size() const { return empty() ? 0 : hi - lo; }
  friend bool operator==(const IndexRange&, const IndexRange&) = default;
};

// f maps an index to the virtual node responsible for it, in [0, L). Both ends must use the same map for a tag.
// monotonic: f is non-decreasing over the multicast range, so the indices a node assumes form one run per
// interval it assumes, found by binary search (O(log n) calls of f per interval). Otherwise every index of a
// message is examined, which suits small ranges (e.g. the blocks of one matrix row).
struct VnodeMap {
  std::function<vp_t(std::uint64_t)> f;
  bool monotonic = true;
};

// A non-monotonic multicast examines each index on each receiver: ranges longer than this are refused.
inline constexpr std::uint64_t max_scanned_indices = std::uint64_t{1} << 24;

// How long accept_multicast keeps retrying a forward refused with PH_EAGAIN.
inline constexpr std::chrono::milliseconds forward_patience{10'000};

// Sends `payload` with tag `tag` to every node assuming f(j) for some j in r: one message, to f(middle of r),
// which may be this node itself (it then receives it like any other). An empty r sends nothing. Returns
// Node::send's error (then nothing was sent), or PH_EINVAL if lo > hi, f is unset, f maps the middle of r
// outside [0, L) (for a monotonic f: either end too, or the ends and middle are not in order), or a
// non-monotonic r is longer than max_scanned_indices: the checks every receiver would make, made at the source.
std::error_code multicast(Node& node, int tag, IndexRange r, const VnodeMap& map,
                          std::span<const std::byte> payload);

// A sender that holds the payload as an object can hand it to its own indices without encoding it: it splits
// the range by owner, uses `mine` itself, and multicasts `rest` (which holds no index this node assumes).
struct IndexSplit {
  std::vector<IndexRange> mine;  // in increasing order
  std::vector<IndexRange> rest;
};
// nullopt, as multicast() returns PH_EINVAL, for a range its receivers would refuse.
std::optional<IndexSplit> split_by_owner(const Node& node, IndexRange r, const VnodeMap& map);
// As multicast(), for disjoint runs in increasing order (split_by_owner's rest): at most two messages, each
// with half of the runs, as accept_multicast sends a remainder on. Sends nothing for no runs.
std::error_code multicast_runs(Node& node, int tag, std::span<const IndexRange> runs, const VnodeMap& map,
                               std::span<const std::byte> payload);

// What one received multicast message means for this node.
struct MulticastDelivery {
  std::vector<IndexRange> mine;        // the indices this node handles, in increasing order; empty when the
                                       // message was for virtual nodes that have left (it was sent on whole)
  std::span<const std::byte> payload;  // a view into the message: valid while it lives
  std::error_code forward_error;       // the first error sending the rest on; those indices are then lost
};

// For a message m received with a multicast tag: sends on, with m's tag, the indices whose virtual nodes this
// node does not assume, and returns those it does. Returns nullopt, and sends nothing, if m is malformed: bad
// header, a range count the body cannot hold, an empty or out-of-order range, an index f maps outside [0, L),
// a range over which a monotonic f decreases (as its ends show), or more than max_scanned_indices indices for a
// non-monotonic f. m's payload is passed on as it is: m stays the caller's.
std::optional<MulticastDelivery> accept_multicast(Node& node, const Message& m, const VnodeMap& map);

}  // namespace phoenix::apps
