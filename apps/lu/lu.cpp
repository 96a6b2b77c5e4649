// apps/lu/lu.cpp — see lu.hpp: the problem's checks, the RESULT line, the sequential baseline.
#include "apps/lu/lu.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>

#include "apps/lu/layout.hpp"

namespace phoenix::apps::lu {

std::string validate(const Problem& p, std::uint64_t space_size) {
  if (p.n == 0 || p.block == 0) return "the matrix and its blocks must not be empty";
  if (p.n % p.block != 0) return "the block size must divide N";
  if (!Layout::make(p.n, p.block, space_size)) return "too many blocks for the virtual node space";
  return "";
}

std::uint32_t default_block(std::uint32_t n) {
  constexpr std::uint32_t largest = 512, min_side = 8;
  const std::uint32_t smallest = std::clamp(n / 16, 1u, 32u);
  for (std::uint32_t nb = std::clamp(n / min_side, 1u, largest); nb >= smallest; --nb)
    if (n % nb == 0) return nb;
  return 0;
}

double Summary::gflops() const {
  const double flops = 2.0 / 3.0 * n * static_cast<double>(n) * n;
  return seconds > 0 ? flops / seconds * 1e-9 : 0;
}

void record_residual(Summary& s, double residual) {
  s.checked = true;
  s.residual = residual;
  s.scaled = residual / (s.n * std::numeric_limits<double>::epsilon());
  s.passed = s.scaled < residual_threshold;
}

std::string describe(const Summary& s) {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "n=%u block=%u pivoting=%s seconds=%.6f residual=%.3e scaled=%.4f check=%s migrations=%llu",
                s.n, s.block, s.pivoting ? "partial" : "none", s.seconds, s.residual, s.scaled,
                !s.checked ? "skipped"
                : s.passed ? "pass"
                           : "FAIL",
                static_cast<unsigned long long>(s.migrations));
  return buf;
}

std::optional<Summary> parse_summary(const std::string& text) {
  std::map<std::string, std::string> fields;
  std::istringstream in(text);
  for (std::string item; in >> item;) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) return std::nullopt;
    fields[item.substr(0, eq)] = item.substr(eq + 1);
  }
  for (const char* key : {"n", "block", "pivoting", "seconds", "residual", "scaled", "check", "migrations"}) {
    if (!fields.contains(key)) return std::nullopt;
  }
  Summary s;
  try {
    s.n = static_cast<std::uint32_t>(std::stoul(fields["n"]));
    s.block = static_cast<std::uint32_t>(std::stoul(fields["block"]));
    s.seconds = std::stod(fields["seconds"]);
    s.residual = std::stod(fields["residual"]);
    s.scaled = std::stod(fields["scaled"]);
    s.migrations = std::stoull(fields["migrations"]);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const std::string& pivoting = fields["pivoting"];
  const std::string& check = fields["check"];
  if ((pivoting != "partial" && pivoting != "none") ||
      (check != "pass" && check != "FAIL" && check != "skipped"))
    return std::nullopt;
  s.pivoting = pivoting == "partial";
  s.checked = check != "skipped";
  s.passed = check == "pass";
  return s;
}

Summary sequential(const Problem& problem) {
  use_one_blas_thread();
  const std::vector<double> a = generate_matrix(matrix_of(problem));
  std::vector<double> lu = a;
  std::vector<std::uint32_t> pivots;
  const auto t0 = std::chrono::steady_clock::now();
  factor_panel(lu, problem.n, problem.n, true, pivots);
  Summary s;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.n = problem.n;
  s.block = problem.n;
  s.pivoting = true;
  if (problem.check) record_residual(s, relative_residual(a, lu, pivots, problem.n));
  return s;
}

}  // namespace phoenix::apps::lu
