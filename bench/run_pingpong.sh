#!/usr/bin/env bash
# bench/run_pingpong.sh — Open MPI anchor, phoenix (1 hop with its default frame protection and with protection
# off, 3 hops, 4 senders) and the socket floor (socket_pingpong.c) in one invocation, then a markdown table of
# medians and ratios. The anchor is measured
# again here, not copied from ANCHORS.md: the machines are shared and noisy, and only figures from the same
# invocation divide meaningfully.
#
# Usage: bench/run_pingpong.sh [BUILD_DIR]     (default build/release; REPS=N sets --reps, default 5)
# Progress goes to stderr, the table to stdout. Exits non-zero if any run failed (its row then shows "—").
set -euo pipefail

build=${1:-build/release}
reps=${REPS:-5}
run_timeout_s=900  # per run; a run normally takes well under a minute

pingpong="$build/bench/phoenix_pingpong"
mpi_bench="$build/bench/mpi_pingpong"
socket_bench="$build/bench/socket_pingpong"
for exe in "$pingpong" "$mpi_bench" "$socket_bench"; do
  if [ ! -x "$exe" ]; then
    echo "run_pingpong: $exe not found; build first (mpi_pingpong needs MPI for C at configure time)" >&2
    exit 1
  fi
done

out=$(mktemp -d "${TMPDIR:-/tmp}/pingpong.XXXXXX")
trap 'rm -rf "$out"' EXIT

# run_step NAME COMMAND... — runs one benchmark and keeps its output in $out/NAME. A failure is remembered, not
# fatal: the other runs still go, the table shows what was measured, and the script exits 1 at the end.
failed=()
run_step() {
  local name=$1
  shift
  echo "run_pingpong: $name: $*" >&2
  local start=$SECONDS
  if ! timeout "$run_timeout_s" "$@" >"$out/$name"; then
    echo "run_pingpong: $name FAILED after $((SECONDS - start)) s" >&2
    failed+=("$name")
  elif ! grep -q '^RESULT ' "$out/$name"; then
    echo "run_pingpong: $name printed no RESULT line" >&2
    failed+=("$name")
  else
    echo "run_pingpong: $name done in $((SECONDS - start)) s" >&2
  fi
}

# The command of ANCHORS.md: Open MPI skips 127.0.0.1 unless told to use lo.
run_step mpi mpirun --allow-run-as-root --oversubscribe -np 2 \
  --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
  --mca pml ob1 --mca btl tcp,self "$mpi_bench" --reps "$reps"
# The floor: the system calls of a phoenix link alone: reads repeated while waiting (as phoenix's spinning receiver
# reads the link it expects a message on), bodies placed as phoenix's buffer pool places them.
run_step socket "$socket_bench" --reps "$reps" --body-offset 64 --spin-read
run_step phoenix-1hop "$pingpong" --hops 1 --reps "$reps" --test latency,bandwidth,rate
run_step phoenix-1hop-off "$pingpong" --hops 1 --reps "$reps" --test latency,bandwidth,rate --protection off
run_step phoenix-3hop "$pingpong" --hops 3 --reps "$reps" --test latency,bandwidth,rate
run_step phoenix-rate4 "$pingpong" --reps "$reps" --test rate4

cat "$out"/* | grep -E '^(RESULT|#) ' >&2 || true

# Every RESULT line is "RESULT <system> <test> <size_bytes> <value> <unit>"; the table joins them on test and size.
cat "$out"/* | awk '
  function human(bytes) {
    if (bytes >= 1048576 && bytes % 1048576 == 0) return bytes / 1048576 " MiB"
    if (bytes >= 1024 && bytes % 1024 == 0) return bytes / 1024 " KiB"
    return bytes " B"
  }
  function cell(sys, key) { return (sys SUBSEP key) in value ? value[sys, key] " " unit[sys, key] : "—" }
  function ratio(sys, key,   p, m) {
    if (!((sys SUBSEP key) in value) || !(("mpi" SUBSEP key) in value)) return "—"
    p = value[sys, key]; m = value["mpi", key]
    return m > 0 ? sprintf("%.2f", p / m) : "—"
  }
  $1 == "RESULT" {
    key = $3 " " $4
    value[$2, key] = $5; unit[$2, key] = $6
    if ($2 != "phoenix-rate4" && $2 != "socket" && !(key in seen)) { seen[key] = 1; order[++n] = key }
    if ($2 == "phoenix-rate4") rate4[++n4] = key
  }
  END {
    print "| test | size | Open MPI | phoenix 1-hop | ratio | 1-hop, protection off | ratio | phoenix 3-hop | socket floor |"
    print "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    for (i = 1; i <= n; ++i) {
      k = order[i]
      split(k, part, " ")
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", part[1], human(part[2]), cell("mpi", k),
             cell("phoenix-1hop", k), ratio("phoenix-1hop", k), cell("phoenix-1hop-off", k),
             ratio("phoenix-1hop-off", k), cell("phoenix-3hop", k), cell("socket", k)
    }
    for (i = 1; i <= n4; ++i) {
      split(rate4[i], part, " ")
      printf "| rate, 4 senders | %s | — | %s | — | — | — | — | — |\n", human(part[2]), cell("phoenix-rate4", rate4[i])
    }
  }'

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo
echo "Medians of $reps runs each; ratio = phoenix 1-hop / Open MPI (latency: lower is better; bandwidth and rate: higher is better);"
echo "phoenix 1-hop runs with the default frame protection (an AES-256-GMAC tag on every frame), the next column with link_protection = off;"
echo "socket floor = bench/socket_pingpong.c, the system calls of a phoenix link without the runtime."
echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -m), $(nproc) CPUs, ${cpu:-unknown CPU}; Open MPI over loopback TCP (btl tcp,self)."
if [ ${#failed[@]} -gt 0 ]; then
  echo "run_pingpong: FAILED: ${failed[*]}" >&2
  exit 1
fi
