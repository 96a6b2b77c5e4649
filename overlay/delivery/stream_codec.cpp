#include "overlay/delivery/stream_codec.hpp"

#include <algorithm>
#include <array>

#include "base/wire.hpp"

namespace phoenix::overlay {

namespace {

// A u32 count, then records of N u64 fields each; fields(item) gives an item's, make(fields) an item back.
template <std::size_t N, class T, class Fields>
Bytes encode_records(std::span<const T> items, Fields fields) {
  Bytes out(4 + items.size() * N * 8);
  std::byte* p = out.data();
  base::store_le<std::uint32_t>(p, static_cast<std::uint32_t>(items.size()));
  p += 4;
  for (const T& item : items) {
    for (const std::uint64_t f : fields(item)) {
      base::store_le<std::uint64_t>(p, f);
      p += 8;
    }
  }
  return out;
}

// The count is checked against the length first: nothing is allocated for a count the body does not carry.
template <std::size_t N, class T, class Make>
std::optional<std::vector<T>> decode_records(std::span<const std::byte> body, Make make) {
  base::reader r(body);
  std::uint32_t n = 0;
  if (!r.get_u32(n) || r.remaining() != std::uint64_t{n} * N * 8) return std::nullopt;
  std::vector<T> items;
  items.reserve(n);
  const std::byte* p = body.data() + 4;
  for (std::uint32_t i = 0; i < n; ++i) {
    std::array<std::uint64_t, N> f{};
    for (auto& x : f) {
      x = base::load_le<std::uint64_t>(p);
      p += 8;
    }
    items.push_back(make(f));
  }
  return items;
}

}  // namespace

Bytes encode_acks(std::span<const stream_ack> acks) {
  return encode_records<2>(acks, [](const stream_ack& a) { return std::array{a.vnode, a.upto}; });
}

std::optional<std::vector<stream_ack>> decode_acks(std::span<const std::byte> body) {
  return decode_records<2, stream_ack>(body, [](const auto& f) { return stream_ack{f[0], f[1]}; });
}

Bytes encode_acks_for(node_id source, std::span<const stream_ack> acks) {
  const Bytes records = encode_acks(acks);
  Bytes out(8 + records.size());
  base::store_le<std::uint64_t>(out.data(), source);
  std::copy(records.begin(), records.end(), out.begin() + 8);
  return out;
}

std::optional<std::pair<node_id, std::vector<stream_ack>>> decode_acks_for(std::span<const std::byte> body) {
  if (body.size() < 8) return std::nullopt;
  auto acks = decode_acks(body.subspan(8));
  if (!acks) return std::nullopt;
  return std::pair{base::load_le<std::uint64_t>(body.data()), std::move(*acks)};
}

std::optional<node_id> ack_to_of(const packet& p) {
  if (!(p.flags & packet::ack_to_follows) || p.body.size() < 8) return std::nullopt;
  return base::load_le<std::uint64_t>(p.body.data() + p.body.size() - 8);
}

void strip_ack_to(packet& p) {
  if (!(p.flags & packet::ack_to_follows)) return;
  p.body.resize(p.body.size() >= 8 ? p.body.size() - 8 : 0);
  p.flags &= static_cast<std::uint8_t>(~packet::ack_to_follows);
}

void set_ack_to(packet& p, node_id to) {
  strip_ack_to(p);
  const std::size_t n = p.body.size();
  p.body.resize(n + 8);
  base::store_le<std::uint64_t>(p.body.data() + n, to);
  p.flags |= packet::ack_to_follows;
}

Bytes encode_states(std::span<const stream_state> states) {
  return encode_records<3>(states, [](const stream_state& s) { return std::array{s.source, s.vnode, s.last}; });
}

std::optional<std::vector<stream_state>> decode_states(std::span<const std::byte> body) {
  return decode_records<3, stream_state>(body, [](const auto& f) { return stream_state{f[0], f[1], f[2]}; });
}

}  // namespace phoenix::overlay
