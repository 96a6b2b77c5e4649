#!/usr/bin/env bash
# bench/compare_builds.sh — what a change costs: phoenix's 1-hop ping-pong (latency, bandwidth, rate) from two
# builds, alternating in one invocation (before, after, before, after, ...), then a markdown table of the
# medians over the rounds and the ratio after / before. Alternating runs share the machine's noise, as
# run_pingpong.sh's anchor does.
#
# Usage: bench/compare_builds.sh BEFORE_BUILD AFTER_BUILD   (ROUNDS=N, default 4; REPS=N per run, default 5)
# Progress goes to stderr, the table to stdout. Exits non-zero if a run failed.
set -euo pipefail

before=${1:?usage: compare_builds.sh BEFORE_BUILD AFTER_BUILD}
after=${2:?usage: compare_builds.sh BEFORE_BUILD AFTER_BUILD}
rounds=${ROUNDS:-4}
reps=${REPS:-5}
for build in "$before" "$after"; do
  if [ ! -x "$build/bench/phoenix_pingpong" ]; then
    echo "compare_builds: $build/bench/phoenix_pingpong not found; build it first" >&2
    exit 1
  fi
done

out=$(mktemp "${TMPDIR:-/tmp}/compare.XXXXXX")
trap 'rm -f "$out"' EXIT
for ((round = 1; round <= rounds; ++round)); do
  for side in before after; do
    build=$before
    [ "$side" = after ] && build=$after
    echo "compare_builds: round $round of $rounds, $side ($build)" >&2
    timeout 900 "$build/bench/phoenix_pingpong" --hops 1 --reps "$reps" --test latency,bandwidth,rate |
      awk -v side="$side" '$1 == "RESULT" { print side, $3, $4, $5, $6 }' >>"$out"
  done
done

# Lines "<side> <test> <size> <value> <unit>": the median per side, test and size.
sort -k2,2 -k3,3n -k1,1 -k4,4g "$out" | awk '
  function median(k,   c) { c = count[k]; return c % 2 ? v[k, (c + 1) / 2] : (v[k, c / 2] + v[k, c / 2 + 1]) / 2 }
  {
    key = $1 SUBSEP $2 SUBSEP $3
    v[key, ++count[key]] = $4; unit[$2 " " $3] = $5
    if (!(($2 " " $3) in seen)) { seen[$2 " " $3] = 1; order[++n] = $2 " " $3 }
  }
  END {
    print "| test | size (bytes) | before | after | after / before |"
    print "| --- | --- | --- | --- | --- |"
    for (i = 1; i <= n; ++i) {
      split(order[i], part, " ")
      b = median("before" SUBSEP part[1] SUBSEP part[2]); a = median("after" SUBSEP part[1] SUBSEP part[2])
      printf "| %s | %s | %.3f %s | %.3f %s | %.3f |\n", part[1], part[2], b, unit[order[i]], a, unit[order[i]], (b > 0 ? a / b : 0)
    }
  }'
echo
echo "Medians of $rounds alternating runs per build, each the median of $reps repetitions (latency: lower is better; bandwidth and rate: higher is better)."
echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -m), $(nproc) CPUs."
