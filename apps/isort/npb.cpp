// apps/isort/npb.cpp — see npb.hpp.
#include "apps/isort/npb.hpp"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <vector>

namespace phoenix::apps::isort {
namespace {

constexpr double r23 = 0x1p-23, t23 = 0x1p23, r46 = 0x1p-46, t46 = 0x1p46;

// The integer part of a non-negative double below 2^63, as a double.
double whole(double x) { return static_cast<double>(static_cast<std::int64_t>(x)); }

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// NPB's rank() for one iteration over the whole key array, with its bucketed counting: key_rank[v] becomes the
// number of keys <= v. Returns how many of the five partial checks passed.
struct SequentialWork {
  explicit SequentialWork(const NpbClass& cls)
      : c(cls), keys(cls.keys), by_bucket(cls.keys), key_rank(cls.max_key), bucket_end(cls.buckets) {}

  std::uint64_t rank(int it) {
    modify_keys(c, it, 0, keys);
    std::array<std::uint32_t, test_keys> test_values{};
    for (std::size_t t = 0; t < test_keys; ++t) test_values[t] = keys[c.test_index[t]];
    sort_into_buckets();
    rank_within_buckets();
    std::uint64_t passed = 0;
    for (std::size_t t = 0; t < test_keys; ++t) {
      const std::uint32_t k = test_values[t];
      if (test_applies(c, k) && key_rank[k - 1] == expected_rank(c, t, it)) ++passed;
    }
    return passed;
  }

  void sort_into_buckets() {
    std::vector<std::uint64_t> size(c.buckets, 0);
    for (std::uint32_t k : keys) ++size[c.bucket_of(k)];
    std::uint64_t start = 0;
    for (std::uint32_t j = 0; j < c.buckets; ++j) {
      bucket_end[j] = start;  // the next free place in bucket j until the scatter below ends
      start += size[j];
    }
    for (std::uint32_t k : keys) by_bucket[bucket_end[c.bucket_of(k)]++] = k;
  }

  void rank_within_buckets() {
    const std::uint32_t width = c.bucket_width();
    for (std::uint32_t j = 0; j < c.buckets; ++j) {
      const std::uint64_t begin = j > 0 ? bucket_end[j - 1] : 0;
      std::uint64_t* r = key_rank.data() + std::uint64_t{j} * width;
      std::fill(r, r + width, 0);
      for (std::uint64_t i = begin; i < bucket_end[j]; ++i) ++key_rank[by_bucket[i]];
      r[0] += begin;
      for (std::uint32_t v = 1; v < width; ++v) r[v] += r[v - 1];
    }
  }

  // NPB's full_verify: places every key by its rank, then checks the order. Adds the sorted checksum.
  bool full_verify(std::uint64_t& checksum) {
    for (std::uint64_t i = 0; i < c.keys; ++i) keys[--key_rank[by_bucket[i]]] = by_bucket[i];
    bool sorted = true;
    for (std::uint64_t i = 0; i < c.keys; ++i) {
      if (i > 0 && keys[i - 1] > keys[i]) sorted = false;
      checksum += placed_checksum(i, keys[i]);
    }
    return sorted;
  }

  const NpbClass& c;
  std::vector<std::uint32_t> keys;
  std::vector<std::uint32_t> by_bucket;
  std::vector<std::uint64_t> key_rank;    // NPB's key_buff1
  std::vector<std::uint64_t> bucket_end;  // NPB's bucket_ptrs after the scatter
};

}  // namespace

std::optional<NpbClass> npb_class(char name) {
  switch (name) {
    case 'S':
      return NpbClass{
          'S', 1u << 16, 1u << 11, 1u << 9, {48427, 17148, 23627, 62548, 4431}, {0, 18, 346, 64917, 65463}};
    case 'W':
      return NpbClass{'W',
                      1u << 20,
                      1u << 16,
                      1u << 10,
                      {357773, 934767, 875723, 898999, 404505},
                      {1249, 11698, 1039987, 1043896, 1048018}};
    case 'A':
      return NpbClass{'A',
                      1u << 23,
                      1u << 19,
                      1u << 10,
                      {2112377, 662041, 5336171, 3642833, 4250760},
                      {104, 17523, 123928, 8288932, 8388264}};
    default:
      return std::nullopt;
  }
}

// a = 2^23 a1 + a2 and x = 2^23 x1 + x2; then a x mod 2^46 = 2^23 ((a1 x2 + a2 x1) mod 2^23) + a2 x2 mod 2^46.
// Every product has at most 46 significant bits and every sum at most 48, so doubles hold them exactly.
double randlc(double& x, double a) {
  const double a1 = whole(r23 * a);
  const double a2 = a - t23 * a1;
  const double x1 = whole(r23 * x);
  const double x2 = x - t23 * x1;
  const double t1 = a1 * x2 + a2 * x1;
  const double z = t1 - t23 * whole(r23 * t1);
  const double t3 = t23 * z + a2 * x2;
  x = t3 - t46 * whole(r46 * t3);
  return r46 * x;
}

double skip_ahead(double seed, double a, std::uint64_t n) {
  if (n == 0) return seed;
  double x = seed, power = a;
  while (n > 1) {
    if (n % 2 == 0) {
      randlc(power, power);  // power <- power^2
      n /= 2;
    } else {
      randlc(x, power);  // x <- x power
      n -= 1;
    }
  }
  randlc(x, power);
  return x;
}

void generate_keys(const NpbClass& c, std::uint64_t first, std::span<std::uint32_t> out) {
  double s = skip_ahead(npb_seed, npb_multiplier, 4 * first);
  const double k = c.max_key / 4;
  for (std::uint32_t& key : out) {
    double x = randlc(s, npb_multiplier);
    x += randlc(s, npb_multiplier);
    x += randlc(s, npb_multiplier);
    x += randlc(s, npb_multiplier);
    key = static_cast<std::uint32_t>(k * x);
  }
}

void modify_keys(const NpbClass& c, int it, std::uint64_t first, std::span<std::uint32_t> keys) {
  const auto set = [&](std::uint64_t i, std::uint32_t value) {
    if (i >= first && i - first < keys.size()) keys[i - first] = value;
  };
  set(static_cast<std::uint64_t>(it), static_cast<std::uint32_t>(it));
  set(static_cast<std::uint64_t>(it) + max_iterations, c.max_key - static_cast<std::uint32_t>(it));
}

bool test_applies(const NpbClass& c, std::uint32_t k) { return 0 < k && k <= c.keys - 1; }

// NPB's per-class switch in rank(): which test ranks move up and which down as the iterations change keys.
std::uint64_t expected_rank(const NpbClass& c, std::size_t t, int it) {
  const std::int64_t base = static_cast<std::int64_t>(c.test_rank[t]);
  std::int64_t shift = 0;
  switch (c.name) {
    case 'S':
      shift = t <= 2 ? it : -it;
      break;
    case 'W':
      shift = t < 2 ? it - 2 : -it;
      break;
    case 'A':
      shift = t <= 2 ? it - 1 : -(it - 1);
      break;
  }
  return static_cast<std::uint64_t>(base + shift);
}

std::uint64_t key_checksum(std::uint32_t key) { return mix(key); }
std::uint64_t placed_checksum(std::uint64_t position, std::uint32_t key) { return mix((position << 32) ^ key); }

bool Verification::successful() const {
  return rounds > 0 && partial_passed == std::uint64_t{rounds} * test_keys * max_iterations &&
         full_passed == rounds;
}

std::string describe(const Verification& v) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "class %c, %u round%s of %d iterations: partial verification %" PRIu64 "/%" PRIu64
                ", full verification %" PRIu64 "/%u, sorted checksum %016" PRIx64 ", %s",
                v.problem, v.rounds, v.rounds == 1 ? "" : "s", max_iterations, v.partial_passed,
                std::uint64_t{v.rounds} * test_keys * max_iterations, v.full_passed, v.rounds,
                v.sorted_checksum, v.successful() ? "SUCCESSFUL" : "UNSUCCESSFUL");
  return buf;
}

Verification sequential(const NpbClass& c, std::uint32_t rounds, double* ranking_seconds) {
  Verification v{c.name, rounds};
  SequentialWork w(c);
  std::chrono::steady_clock::duration ranking{};
  for (std::uint32_t r = 0; r < rounds; ++r) {
    generate_keys(c, 0, w.keys);
    const auto t0 = std::chrono::steady_clock::now();
    for (int it = 1; it <= max_iterations; ++it) v.partial_passed += w.rank(it);
    ranking += std::chrono::steady_clock::now() - t0;
    if (w.full_verify(v.sorted_checksum)) ++v.full_passed;
  }
  if (ranking_seconds) *ranking_seconds = std::chrono::duration<double>(ranking).count();
  return v;
}

}  // namespace phoenix::apps::isort
