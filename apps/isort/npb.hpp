// apps/isort/npb.hpp — the NAS Parallel Benchmarks' integer sort (IS, NPB 3.x), written from its specification:
// the classes, the random number generator and key generation, the per-iteration key changes and partial
// verification, and the sequential benchmark that is the reference for the parallel one.
//
// The generator is NPB's randlc: x_{k+1} = a x_k mod 2^46 with a = 5^13, returning x_{k+1} 2^-46, computed in
// double arithmetic on 23-bit halves (every product is exact, so the sequence is the same on every machine).
// Key i is MAX_KEY/4 times the sum of the generator's values 4i+1 .. 4i+4 from seed 314159265, truncated;
// a holder of keys [a, b) jumps to value 4a by NPB's find_my_seed (a^n by repeated squaring).
//
// An iteration it (1..MAX_ITERATIONS) first sets key[it] = it and key[it + MAX_ITERATIONS] = MAX_KEY - it, then
// ranks every key. Partial verification: for each of five test keys, value k = key[test_index[t]], NPB checks
// the number of keys <= k - 1 against test_rank[t] shifted by the iteration as its per-class switch says (only
// when 0 < k <= N - 1). Full verification after the last iteration: the keys placed by their ranks are
// non-decreasing. NPB counts 5 x MAX_ITERATIONS partial passes plus one for the full verification.
//
// Threads: plain functions of their arguments.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace phoenix::apps::isort {

inline constexpr int max_iterations = 10;    // NPB's MAX_ITERATIONS
inline constexpr std::size_t test_keys = 5;  // NPB's TEST_ARRAY_SIZE
inline constexpr double npb_seed = 314159265.0;
inline constexpr double npb_multiplier = 1220703125.0;  // 5^13

struct NpbClass {
  char name = 'S';
  std::uint64_t keys = 0;     // N, NPB's TOTAL_KEYS
  std::uint32_t max_key = 0;  // keys lie in [0, max_key)
  std::uint32_t buckets = 0;  // NPB's NUM_BUCKETS
  std::array<std::uint64_t, test_keys> test_index{};
  std::array<std::uint64_t, test_keys> test_rank{};

  // Key values per bucket, a power of two: NPB's 2^(MAX_KEY_LOG_2 - NUM_BUCKETS_LOG_2).
  std::uint32_t bucket_shift() const { return std::countr_zero(max_key) - std::countr_zero(buckets); }
  std::uint32_t bucket_width() const { return 1u << bucket_shift(); }
  std::uint32_t bucket_of(std::uint32_t key) const { return key >> bucket_shift(); }
};

// Classes S, W and A; nullopt for any other name.
std::optional<NpbClass> npb_class(char name);

// One step of the generator: x <- a x mod 2^46; returns the new x times 2^-46.
double randlc(double& x, double a);
// seed a^n mod 2^46 (NPB's find_my_seed): the state after n steps from seed.
double skip_ahead(double seed, double a, std::uint64_t n);

// Keys [first, first + out.size()) of the class's key sequence.
void generate_keys(const NpbClass& c, std::uint64_t first, std::span<std::uint32_t> out);
// The changes iteration `it` makes, to those of keys [first, first + keys.size()) they touch.
void modify_keys(const NpbClass& c, int it, std::uint64_t first, std::span<std::uint32_t> keys);

// Whether NPB checks a test key of value k (0 < k <= N - 1), and the rank it expects for test key t at
// iteration it: the number of keys <= k - 1.
bool test_applies(const NpbClass& c, std::uint32_t k);
std::uint64_t expected_rank(const NpbClass& c, std::size_t t, int it);

// Checksums for the full verification: of a multiset of keys (a sum, so any order gives the same), and of
// the sorted sequence (a sum over positions, so only the right key at the right place does).
std::uint64_t key_checksum(std::uint32_t key);
std::uint64_t placed_checksum(std::uint64_t position, std::uint32_t key);

// What a run established, in NPB's terms, over `rounds` repetitions of the MAX_ITERATIONS-iteration benchmark.
struct Verification {
  char problem = 'S';
  std::uint32_t rounds = 0;
  std::uint64_t partial_passed = 0;   // of 5 x MAX_ITERATIONS per round
  std::uint64_t full_passed = 0;      // rounds whose final ranking sorted the keys
  std::uint64_t sorted_checksum = 0;  // sum over rounds of placed_checksum over the sorted keys
  bool successful() const;
  friend bool operator==(const Verification&, const Verification&) = default;
};
// One line, as the RESULT of a parallel run and the sequential reference print it.
std::string describe(const Verification& v);

// The benchmark on one thread, NPB's way (bucketed ranking). ranking_seconds: the time spent ranking (NPB's
// timed part: iterations only, without key generation and full verification).
Verification sequential(const NpbClass& c, std::uint32_t rounds, double* ranking_seconds = nullptr);

}  // namespace phoenix::apps::isort
