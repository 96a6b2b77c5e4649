// bench/app_bench.hpp — what the application benchmarks share: variants of one computation (the sequential
// anchor first, then other implementations and phoenix on N node processes), each run --reps times, the median
// wall time printed with its speedup over the anchor's, and every result compared with the anchor's.
//
// Output: `RESULT <app> <variant> <size> <seconds> s speedup <x>` per variant, then a markdown table.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "phoenix/launch/app_cluster.hpp"

namespace phoenix::bench {

struct AppVariant {
  std::string name;
  std::function<std::optional<std::string>()> run;  // the result as text; nullopt if the run failed
};

// Runs `body` on `nodes` local node processes through the app launcher; the RESULT line's text.
inline std::optional<std::string> run_app_cluster(const std::string& app, int nodes,
                                                  const launch::NodeBody& body) {
  launch::ClusterOptions o;
  o.app = app + "-bench";
  o.nodes = nodes;
  o.quiet = true;
  o.timeout_s = 3600;
  const auto out = launch::run_cluster(o, body);
  if (!out.ok) return std::nullopt;
  return out.result;
}

// Returns the exit status: 0, or 1 after a "<app>_bench: FAILED" line when a variant failed or disagreed.
inline int run_app_variants(const std::string& app, const std::string& size, const std::vector<AppVariant>& vs,
                            int reps) {
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  std::string reference;  // the anchor's result
  std::vector<std::pair<std::string, double>> table;
  for (const auto& v : vs) {
    std::vector<double> times;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto result = v.run();
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (!result) {
        std::printf("%s_bench: FAILED: %s did not produce a result\n", app.c_str(), v.name.c_str());
        return 1;
      }
      if (reference.empty()) reference = *result;
      if (*result != reference) {
        std::printf("%s_bench: FAILED: %s computed \"%s\", %s \"%s\"\n", app.c_str(), v.name.c_str(),
                    result->c_str(), vs.front().name.c_str(), reference.c_str());
        return 1;
      }
    }
    table.emplace_back(v.name, median(times));
    std::printf("RESULT %s %s %s %.3f s speedup %.2f\n", app.c_str(), v.name.c_str(), size.c_str(),
                table.back().second, table.front().second / table.back().second);
    std::fflush(stdout);
  }
  std::printf("# every variant computed %s\n", reference.c_str());
  std::printf("\n| %s variant | time (s) | speedup over %s |\n| --- | --- | --- |\n", app.c_str(),
              vs.front().name.c_str());
  for (const auto& [name, s] : table) {
    std::printf("| %s | %.3f | %.2f |\n", name.c_str(), s, table.front().second / s);
  }
  return 0;
}

}  // namespace phoenix::bench
