// The multicasting idiom (apps/multicast, paper section 4.3.1) over small clusters of phoenix::Nodes in one
// process, linked in a line over loopback TCP.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "apps/multicast/multicast.hpp"
#include "support/nodes.hpp"

using namespace std::chrono_literals;
using phoenix::Node;
using phoenix::apps::IndexRange;
using phoenix::apps::VnodeMap;

namespace {

constexpr std::uint64_t L = 1024;
constexpr int tag = 5;

// A cluster key in a file of its own, removed at the end. (tests/support/temp_dir.hpp would need
// phoenix::launch for this one file.)
class key_file {
 public:
  key_file() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("phoenix-multicast-" + std::to_string(::getpid()) + "-" + std::to_string(rd()) + ".key");
    std::ofstream(path_) << "";
    std::filesystem::permissions(path_,
                                 std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    std::ofstream out(path_, std::ios::trunc);
    for (int i = 0; i < 48; ++i) out << static_cast<char>('a' + rd() % 26);
    out << "\n";
  }
  ~key_file() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  key_file(const key_file&) = delete;
  key_file& operator=(const key_file&) = delete;
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// n nodes, node i linked to node i - 1. Node i assumes the intervals shares[i].
struct line_cluster {
  key_file key;
  std::vector<std::unique_ptr<Node>> nodes;

  explicit line_cluster(const std::vector<std::vector<phoenix::Interval>>& shares) {
    for (std::size_t i = 0; i < shares.size(); ++i) {
      auto& node = *nodes.emplace_back(
          std::make_unique<Node>(phoenix::test::node_config("m" + std::to_string(i), key.path(), L)));
      REQUIRE_FALSE(node.initialize("tcp://127.0.0.1:0"));
      if (i > 0) REQUIRE_FALSE(node.add_port(nodes[i - 1]->local_port()));
      for (const auto& s : shares[i]) REQUIRE_FALSE(node.assume(s));
    }
  }
  // Equal consecutive shares of [0, L).
  static std::vector<std::vector<phoenix::Interval>> equal_shares(std::size_t n) {
    std::vector<std::vector<phoenix::Interval>> shares;
    for (std::size_t i = 0; i < n; ++i) shares.push_back({{L * i / n, L * (i + 1) / n}});
    return shares;
  }
  std::size_t owner_of(phoenix::vp_t v) const {
    for (std::size_t i = 0; i < nodes.size(); ++i)
      for (const auto& s : nodes[i]->assumed())
        if (s.contains(v)) return i;
    FAIL("nobody assumes virtual node " << v);
    return 0;
  }
};

std::span<const std::byte> as_bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

std::string as_text(std::span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// What the nodes of a cluster did with one multicast.
struct outcome {
  std::vector<int> messages;                     // per node: multicast messages received
  std::vector<int> deliveries;                   // per node: of those, with indices of its own
  std::vector<std::vector<IndexRange>> handled;  // per node: every index range it handled
  int total_messages() const { return std::accumulate(messages.begin(), messages.end(), 0); }
};

// Runs every node's receive loop, in turn, until `expected` indices were handled (or 10 s passed), then for
// another 200 ms to catch any message too many. Every delivery must carry `payload` and be well formed.
outcome collect(line_cluster& c, const VnodeMap& map, std::uint64_t expected, const std::string& payload) {
  const std::size_t n = c.nodes.size();
  outcome out{std::vector<int>(n), std::vector<int>(n), std::vector<std::vector<IndexRange>>(n)};
  std::uint64_t handled = 0;
  auto turn = [&](std::chrono::milliseconds wait) {
    for (std::size_t i = 0; i < n; ++i) {
      auto m = c.nodes[i]->recv_for(tag, wait);
      if (!m) continue;
      ++out.messages[i];
      auto d = phoenix::apps::accept_multicast(*c.nodes[i], *m, map);
      REQUIRE(d);
      CHECK_FALSE(d->forward_error);
      CHECK(as_text(d->payload) == payload);
      if (!d->mine.empty()) ++out.deliveries[i];
      for (const auto& r : d->mine) {
        out.handled[i].push_back(r);
        handled += r.size();
      }
    }
  };
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (handled < expected && std::chrono::steady_clock::now() < deadline) turn(5ms);
  const auto linger = std::chrono::steady_clock::now() + 200ms;
  while (std::chrono::steady_clock::now() < linger) turn(20ms);
  return out;
}

// Every index of r handled exactly once, by the node that assumes f(index).
void check_each_index_once(const line_cluster& c, const outcome& out, IndexRange r, const VnodeMap& map) {
  std::vector<int> seen(r.size(), 0);
  for (std::size_t i = 0; i < out.handled.size(); ++i) {
    for (const auto& h : out.handled[i]) {
      REQUIRE(r.lo <= h.lo);
      REQUIRE(h.hi <= r.hi);
      for (std::uint64_t j = h.lo; j < h.hi; ++j) {
        ++seen[j - r.lo];
        CHECK(c.owner_of(map.f(j)) == i);
      }
    }
  }
  CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<std::ptrdiff_t>(r.size()));
}

// Little-endian header fields, written by hand so the tests check the documented format, not the encoder.
void put_le(std::vector<std::byte>& b, std::uint64_t v, int width) {
  for (int i = 0; i < width; ++i) b.push_back(static_cast<std::byte>(v >> (8 * i)));
}
phoenix::Bytes body_of(const std::vector<std::byte>& b) { return phoenix::copy_bytes(b); }
std::vector<std::byte> header(std::uint32_t count, std::uint8_t magic = 0x4d, std::uint8_t version = 1,
                              std::uint16_t zero = 0) {
  std::vector<std::byte> b;
  put_le(b, magic, 1);
  put_le(b, version, 1);
  put_le(b, zero, 2);
  put_le(b, count, 4);
  return b;
}
std::vector<std::byte> message(std::vector<IndexRange> ranges, const std::string& payload = "x") {
  auto b = header(static_cast<std::uint32_t>(ranges.size()));
  for (const auto& r : ranges) {
    put_le(b, r.lo, 8);
    put_le(b, r.hi, 8);
  }
  for (char ch : payload) b.push_back(static_cast<std::byte>(ch));
  return b;
}

}  // namespace

TEST_CASE("multicast: the identity map over all of 0..L on 4 equal shares: one message per node, each once") {
  line_cluster c(line_cluster::equal_shares(4));
  const VnodeMap map{[](std::uint64_t j) { return j; }, true};
  const std::string payload = "row 17";
  REQUIRE_FALSE(phoenix::apps::multicast(*c.nodes[0], tag, {0, L}, map, as_bytes(payload)));

  const outcome out = collect(c, map, L, payload);
  check_each_index_once(c, out, {0, L}, map);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(out.deliveries[i] == 1);
    CHECK(out.messages[i] == 1);
    // Each share is one run, so the node gets it as one range.
    REQUIRE(out.handled[i].size() == 1);
    CHECK(out.handled[i][0] == IndexRange{L * i / 4, L * (i + 1) / 4});
  }
  // One message per owner (multicast.hpp), far from one per index.
  CHECK(out.total_messages() == 4);
}

TEST_CASE("multicast: buckets onto virtual nodes, a sub-range from the middle, sent by one of its owners") {
  line_cluster c(line_cluster::equal_shares(4));
  constexpr std::uint64_t buckets = 64;
  const VnodeMap map{[](std::uint64_t j) { return j * L / buckets; }, true};
  const IndexRange r{21, 60};  // vnodes 336 .. 944: nodes 1, 2 and 3
  // The middle of r is bucket 40, vnode 640: node 2 sends, and receives the first message itself.
  REQUIRE(c.owner_of(map.f(40)) == 2);
  const std::string payload = "buckets 21..59";
  REQUIRE_FALSE(phoenix::apps::multicast(*c.nodes[2], tag, r, map, as_bytes(payload)));

  const outcome out = collect(c, map, r.size(), payload);
  check_each_index_once(c, out, r, map);
  CHECK(out.messages == std::vector<int>{0, 1, 1, 1});
  CHECK(out.deliveries == std::vector<int>{0, 1, 1, 1});
  CHECK(out.handled[1] == std::vector<IndexRange>{{21, 32}});
  CHECK(out.handled[2] == std::vector<IndexRange>{{32, 48}});
  CHECK(out.handled[3] == std::vector<IndexRange>{{48, 60}});
}

TEST_CASE("multicast: a scattering map K j mod L reaches every index's owner exactly once") {
  line_cluster c(line_cluster::equal_shares(4));
  constexpr std::uint64_t K = 7;  // prime to L = 1024
  const VnodeMap map{[](std::uint64_t j) { return K * j % L; }, false};
  const IndexRange r{100, 400};
  const std::string payload = "A[i][k]";
  REQUIRE_FALSE(phoenix::apps::multicast(*c.nodes[3], tag, r, map, as_bytes(payload)));

  const outcome out = collect(c, map, r.size(), payload);
  check_each_index_once(c, out, r, map);
  for (std::size_t i = 0; i < 4; ++i) CHECK(out.deliveries[i] >= 1);
  // Each hop removes at least one owner from a message's indices and sends at most two: with 4 owners, at most
  // 1 + 2 + 4 + 8 messages (multicast.hpp).
  MESSAGE("messages for " << r.size() << " scattered indices over 4 nodes: " << out.total_messages());
  CHECK(out.total_messages() <= 15);
}

TEST_CASE("multicast: a node assuming two intervals handles both runs from one message") {
  line_cluster c({{{0, 256}, {512, 768}}, {{256, 512}}, {{768, 1024}}});
  const VnodeMap map{[](std::uint64_t j) { return j; }, true};
  REQUIRE_FALSE(phoenix::apps::multicast(*c.nodes[1], tag, {0, L}, map, as_bytes(std::string("p"))));

  const outcome out = collect(c, map, L, "p");
  check_each_index_once(c, out, {0, L}, map);
  CHECK(out.messages == std::vector<int>{1, 1, 1});
  CHECK(out.handled[0] == std::vector<IndexRange>{{0, 256}, {512, 768}});
}

TEST_CASE("multicast: a sender that keeps its own indices sends the rest on, and every other index reaches its owner once") {
  line_cluster c(line_cluster::equal_shares(4));
  constexpr std::uint64_t K = 7;
  const VnodeMap map{[](std::uint64_t j) { return K * j % L; }, false};
  const IndexRange r{100, 400};
  const auto split = phoenix::apps::split_by_owner(*c.nodes[1], r, map);
  REQUIRE(split);
  std::uint64_t kept = 0;
  for (const auto& run : split->mine) {
    for (std::uint64_t j = run.lo; j < run.hi; ++j) CHECK(c.owner_of(map.f(j)) == 1);
    kept += run.size();
  }
  CHECK(kept > 0);
  REQUIRE_FALSE(phoenix::apps::multicast_runs(*c.nodes[1], tag, split->rest, map, as_bytes(std::string("q"))));
  const outcome out = collect(c, map, r.size() - kept, "q");
  CHECK(out.deliveries[1] == 0);  // nothing of node 1's comes back to it
  std::uint64_t handled = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    for (const auto& h : out.handled[i]) {
      for (std::uint64_t j = h.lo; j < h.hi; ++j) CHECK(c.owner_of(map.f(j)) == i);
      handled += h.size();
    }
  }
  CHECK(handled == r.size() - kept);
  // A range the receivers would refuse is refused here too.
  const VnodeMap identity{[](std::uint64_t j) { return j; }, true};
  CHECK_FALSE(phoenix::apps::split_by_owner(*c.nodes[1], {0, L + 1}, identity));
}

TEST_CASE("multicast: a receiver whose virtual nodes moved away sends everything on to their new owner") {
  line_cluster c({{{0, 512}}, {{512, 1024}}});
  Node& a = *c.nodes[0];
  Node& b = *c.nodes[1];
  const VnodeMap map{[](std::uint64_t j) { return j; }, true};
  REQUIRE_FALSE(phoenix::apps::multicast(b, tag, {0, 512}, map, as_bytes(std::string("moving"))));
  auto m = a.recv_for(tag, 5s);
  REQUIRE(m);

  // The indices' virtual nodes leave a between receipt and acceptance.
  REQUIRE_FALSE(a.release({0, 512}));
  REQUIRE_FALSE(b.assume({0, 512}));
  auto d = phoenix::apps::accept_multicast(a, *m, map);
  REQUIRE(d);
  CHECK(d->mine.empty());
  CHECK_FALSE(d->forward_error);

  auto m2 = b.recv_for(tag, 5s);
  REQUIRE(m2);
  auto d2 = phoenix::apps::accept_multicast(b, *m2, map);
  REQUIRE(d2);
  CHECK(d2->mine == std::vector<IndexRange>{{0, 512}});
  CHECK(as_text(d2->payload) == "moving");
  CHECK_FALSE(a.recv_for(tag, 100ms));
  CHECK_FALSE(b.recv_for(tag, 100ms));
}

TEST_CASE("multicast: malformed messages and bad arguments are refused and nothing is sent") {
  line_cluster c({{{0, L}}});
  Node& node = *c.nodes[0];
  const VnodeMap identity{[](std::uint64_t j) { return j; }, true};
  const VnodeMap scattering{[](std::uint64_t j) { return 7 * j % L; }, false};
  const VnodeMap decreasing{[](std::uint64_t j) { return L - 1 - j; }, true};
  // Whether a message with this body is accepted.
  auto accept = [&](const std::vector<std::byte>& body,
                    const VnodeMap& map = {[](std::uint64_t j) { return j; }}) {
    return phoenix::apps::accept_multicast(node, phoenix::Message(0, 0, tag, body_of(body)), map).has_value();
  };

  // A well-formed one first, so that what follows fails for the reason each case names. (Its payload is a view
  // into the message, which must outlive it: accept() above would leave it dangling.)
  const phoenix::Message good(0, 0, tag, body_of(message({{3, 5}, {9, 10}}, "hi")));
  auto ok = phoenix::apps::accept_multicast(node, good, identity);
  REQUIRE(ok);
  CHECK(ok->mine == std::vector<IndexRange>{{3, 5}, {9, 10}});
  CHECK(as_text(ok->payload) == "hi");
  CHECK(accept(message({{3, 5}}, "")));  // an empty payload is fine

  CHECK_FALSE(accept({}));         // empty
  CHECK_FALSE(accept(header(1)));  // the count promises a range that is not there
  auto truncated = message({{0, 4}});
  truncated.resize(7);
  CHECK_FALSE(accept(truncated));  // truncated header
  truncated = message({{0, 4}}, "");
  truncated.pop_back();
  CHECK_FALSE(accept(truncated));  // truncated range
  CHECK_FALSE(accept(header(0)));  // no range at all
  auto huge = header(0xffffffffu);
  huge.resize(huge.size() + 64);
  CHECK_FALSE(accept(huge));  // a count far beyond the body
  auto bad_magic = message({{0, 4}});
  bad_magic[0] = std::byte{0x4e};
  CHECK_FALSE(accept(bad_magic));
  auto bad_version = message({{0, 4}});
  bad_version[1] = std::byte{2};
  CHECK_FALSE(accept(bad_version));
  auto bad_reserved = message({{0, 4}});
  bad_reserved[3] = std::byte{1};
  CHECK_FALSE(accept(bad_reserved));
  CHECK_FALSE(accept(message({{4, 4}})));                                   // lo == hi
  CHECK_FALSE(accept(message({{5, 4}})));                                   // lo > hi
  CHECK_FALSE(accept(message({{0, 10}, {5, 20}})));                         // overlapping
  CHECK_FALSE(accept(message({{10, 20}, {0, 5}})));                         // out of order
  CHECK_FALSE(accept(message({{L - 2, L + 3}})));                           // f maps past L
  CHECK_FALSE(accept(message({{0, ~std::uint64_t{0}}})));                   // the same, as far as it goes
  CHECK_FALSE(accept(message({{0, 4}}), decreasing));                       // "monotonic" f that decreases
  CHECK_FALSE(accept(message({{0, std::uint64_t{1} << 25}}), scattering));  // too many indices to examine
  CHECK_FALSE(accept(message({{0, 4}}), VnodeMap{}));                       // no map

  // Bad arguments to multicast: refused before anything is sent.
  const std::string text = "x";
  const auto payload = as_bytes(text);
  CHECK(phoenix::apps::multicast(node, tag, {5, 4}, identity, payload).value() == PH_EINVAL);
  CHECK(phoenix::apps::multicast(node, tag, {0, L + 1}, identity, payload).value() == PH_EINVAL);
  CHECK(phoenix::apps::multicast(node, tag, {0, 4}, decreasing, payload).value() == PH_EINVAL);
  CHECK(phoenix::apps::multicast(node, tag, {0, 4}, VnodeMap{}, payload).value() == PH_EINVAL);
  CHECK(phoenix::apps::multicast(node, tag, {0, std::uint64_t{1} << 25}, scattering, payload).value() ==
        PH_EINVAL);
  CHECK(phoenix::apps::multicast(node, -2, {0, 4}, identity, payload).value() == PH_EINVAL);
  CHECK_FALSE(phoenix::apps::multicast(node, tag, {4, 4}, identity, payload));  // empty: nothing to send

  // The node assumes all of [0, L), so anything sent above would have come back here.
  CHECK_FALSE(node.recv_for(tag, 100ms));
}
