#!/usr/bin/env bash
# bench/run_volpex.sh — Volpex redundancy measured through the shell, as users run it (phsh spawn --replicas):
#
#   1. ping-pong latency (8 B) and bandwidth (1 MiB) between two processes of 1, 2 and 4 replicas each, over
#      replicated message passing (volpex_send/recv) and the dataspace (put/get) — the Volpex papers' Fig. 3 —
#      beside Open MPI over loopback TCP (bench/mpi_pingpong.c) and phoenix's own one hop (phoenix_pingpong,
#      the same method: bench/pingpong.cpp), both measured in the same invocation;
#   2. the dataspace's read log copying each delivered object (--copy-logging) or sharing it (the default);
#   3. each application with 1, 2 and 3 replicas of every process, beside its sequential run;
#   4. the ring with a replica killed mid-run (phsh kill), beside the same run without the kill.
#
# Every run's result is checked: the ping-pongs check the bytes that come back, the applications' RESULT
# lines must equal the sequential run's. The applications' times run from the start of their first replica to
# their result, by phsh's clock (0.1 s steps); the ping-pongs time their own loop after a warm-up.
#
# On one machine every replica shares the same cores, so K replicas of a CPU-bound run take about K times as
# long; the column "per replica" divides that out: time(K) / (K · time(1)), 1.00 meaning that replication
# costs nothing beyond the CPU its replicas use.
#
# Usage: bench/run_volpex.sh [BUILD_DIR]     (default build/release; QUICK=1 for a short smoke run;
#                                            PARTS="pingpong logging apps kill" or any of them, default all)
# Progress goes to stderr, the tables to stdout. Exits non-zero if any run failed or disagreed.
set -euo pipefail

build=${1:-build/release}
quick=${QUICK:-0}
parts=" ${PARTS:-pingpong logging apps kill} "
for part in $parts; do
  case $part in pingpong | logging | apps | kill) ;; *) echo "run_volpex: unknown part $part (PARTS)" >&2; exit 2 ;; esac
done
has_part() { [[ "$parts" == *" $1 "* ]]; }
phsh="$build/phoenix/shell/phsh"
mpi_bench="$build/bench/mpi_pingpong"
phoenix_bench="$build/bench/phoenix_pingpong"
for exe in "$phsh" "$build/apps/volpex/volpex_server" "$build/bench/volpex_pingpong"; do
  if [ ! -x "$exe" ]; then
    echo "run_volpex: $exe not found; build first" >&2
    exit 1
  fi
done
export PHSH_APP_PATH="$build/apps/volpex:$build/bench"

out=$(mktemp -d "${TMPDIR:-/tmp}/volpex-bench.XXXXXX")
trap 'rm -rf "$out"' EXIT
failed=()

# phsh_run NAME SCRIPT — runs phsh -c SCRIPT in a run directory of its own, its output in $out/NAME. A failed run
# is remembered, not fatal: the tables show "—" for it and the script exits 1 at the end.
phsh_run() {
  local name=$1 script=$2
  echo "run_volpex: $name: $script" >&2
  if ! timeout 900 "$phsh" --run-dir "$out/$name.run" -c "$script" >"$out/$name" 2>&1; then
    echo "run_volpex: $name FAILED" >&2
    tail -n 20 "$out/$name" >&2
    failed+=("$name")
  fi
}

# result NAME — the text of the first result phsh reported in run NAME ("[12.3s] n2 result: TEXT").
result() { sed -n 's/^\[[0-9.]*s\] [^ ]* result: //p' "$out/$1" | head -n 1; }

# elapsed NAME — seconds from the start of the first replica to the first result, by phsh's clock (launching the
# dataspace server before, and ending the processes after, are not counted); "—" without a result.
elapsed() {
  awk '/^\[[0-9.]+s\] [^ ]* started: replica/ && !t0 { t0 = substr($1, 2) + 0 }
       /^\[[0-9.]+s\] [^ ]* result: / && !t1 { t1 = substr($1, 2) + 0 }
       END { if (t1 > 0) printf "%.1f", t1 - t0; else printf "—" }' "$out/$1"
}

# field NAME KEY — the value of KEY=... in the result of run NAME.
field() { result "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "—" }'; }

# --- 1. ping-pong ---------------------------------------------------------------------------------------------
if has_part pingpong; then
if [ "$quick" = 1 ]; then lat_reps=200 bw_reps=5 ks="2" anchor_reps=1; else lat_reps=2000 bw_reps=40 ks="1 2 4" anchor_reps=3; fi
# anchor NAME COMMAND...: runs an anchor ping-pong (RESULT <system> latency|bandwidth <size> <value> <unit>);
# "—" for its figures if it fails.
anchor() {
  local name=$1
  shift
  echo "run_volpex: $name anchor" >&2
  if ! "$@" >"$out/$name" 2>&1; then
    echo "run_volpex: the $name anchor failed" >&2
    tail -n 20 "$out/$name" >&2
    failed+=("$name")
  fi
}
figure() { awk -v s="$2" -v t="$3" -v n="$4" '$1 == "RESULT" && $2 == s && $3 == t && $4 == n { print $5 }' "$out/$1"; }
mpi_lat="—" mpi_bw="—" ph_lat="—" ph_bw="—"
if [ -x "$mpi_bench" ]; then
  anchor mpi mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
    --mca pml ob1 --mca btl tcp,self "$mpi_bench" --reps "$anchor_reps"
  mpi_lat=$(figure mpi mpi latency 8) mpi_bw=$(figure mpi mpi bandwidth 1048576)
fi
if [ -x "$phoenix_bench" ]; then
  anchor phoenix "$phoenix_bench" --hops 1 --reps "$anchor_reps" --test latency,bandwidth $([ "$quick" = 1 ] && echo --quick)
  ph_lat=$(figure phoenix phoenix-1hop latency 8) ph_bw=$(figure phoenix phoenix-1hop bandwidth 1048576)
fi
echo "| transport | replicas | latency 8 B (µs) | ÷ Open MPI | ÷ phoenix 1 hop | bandwidth 1 MiB (MB/s) | ÷ Open MPI | ÷ phoenix 1 hop |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
echo "| Open MPI, TCP loopback | — | ${mpi_lat:-—} | 1.00 | $(ratio "${mpi_lat:-0}" "${ph_lat:-0}") | ${mpi_bw:-—} | 1.00 | $(ratio "${mpi_bw:-0}" "${ph_bw:-0}") |"
echo "| phoenix ph_send/ph_recv, 1 hop | — | ${ph_lat:-—} | $(ratio "${ph_lat:-0}" "${mpi_lat:-0}") | 1.00 | ${ph_bw:-—} | $(ratio "${ph_bw:-0}" "${mpi_bw:-0}") | 1.00 |"
for mode in mp ds; do
  for k in $ks; do
    phsh_run "$mode-8-$k" "spawn volpex_server --replicas $k; spawn -n 2 --replicas $k volpex_pingpong $mode 8 $lat_reps; wait"
    phsh_run "$mode-1m-$k" "spawn volpex_server --replicas $k; spawn -n 2 --replicas $k volpex_pingpong $mode 1048576 $bw_reps; wait"
    lat=$(field "$mode-8-$k" latency_us)
    bw=$(field "$mode-1m-$k" mb_per_s)
    label=$([ $mode = mp ] && echo "volpex_send/recv" || echo "dataspace put/get")
    echo "| $label | $k | ${lat:-—} | $(ratio "${lat:-0}" "${mpi_lat:-0}") | $(ratio "${lat:-0}" "${ph_lat:-0}") | ${bw:-—} | $(ratio "${bw:-0}" "${mpi_bw:-0}") | $(ratio "${bw:-0}" "${ph_bw:-0}") |"
  done
done
echo
echo "VolpexMPI's public code, 2 ranks on loopback (../shared/ANCHORS.md, not run here): 213 / 541 µs at 8 B and 0.62 / 0.13 GB/s at 1 MiB with 1 / 2 replicas."
echo
fi

# --- 2. read-log copying ----------------------------------------------------------------------------------------
if has_part logging && [ "$quick" != 1 ]; then
  echo "| dataspace, 2 replicas, 1 MiB put/get | bandwidth (MB/s) |"
  echo "| --- | --- |"
  for logging in share copy; do
    flag=$([ $logging = copy ] && echo "--copy-logging" || echo "")
    phsh_run "log-$logging" "spawn volpex_server --replicas 2 $flag; spawn -n 2 --replicas 2 volpex_pingpong ds 1048576 $bw_reps; wait"
    echo "| read log: $logging | $(field "log-$logging" mb_per_s) |"
  done
  echo
fi

# --- 3. applications ------------------------------------------------------------------------------------------
if has_part apps; then
# name, processes, arguments (the sequential run takes the processes first where the app needs them)
if [ "$quick" = 1 ]; then
  apps=("psrs 2 200000" "ring 2 2000 200")
else
  apps=("sieve 4 400000000" "psrs 4 8000000" "remd 4 20000 2000" "ring 4 20000 2000")
fi
app_ks=$([ "$quick" = 1 ] && echo "1 2" || echo "1 2 3")
echo "| application | processes | sequential (s) | 1 replica (s) | 2 replicas (s) | per replica | 3 replicas (s) | per replica |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for spec in "${apps[@]}"; do
  read -r app procs args <<<"$spec"
  case $app in
    sieve | psrs) seq_args="$args" ;;
    *) seq_args="$procs $args" ;;
  esac
  t0=$(date +%s.%N)
  "$build/apps/volpex/$app" --sequential $seq_args >"$out/$app-seq"
  seq_t=$(echo "$t0 $(date +%s.%N)" | awk '{ printf "%.2f", $2 - $1 }')
  reference=$(grep '^RESULT ' "$out/$app-seq" | head -n 1)
  declare -A times=()
  for k in $app_ks; do
    phsh_run "$app-$k" "spawn volpex_server --replicas $k; spawn -n $procs --replicas $k $app $args; wait"
    times[$k]=$(elapsed "$app-$k")
    got="RESULT $(result "$app-$k")"
    if [ "$got" != "$reference" ]; then
      echo "run_volpex: $app with $k replicas computed \"$got\", the sequential run \"$reference\"" >&2
      failed+=("$app-$k")
    fi
  done
  per2=$(awk -v a="${times[2]}" -v b="${times[1]}" 'BEGIN { if (b + 0 > 0 && a + 0 > 0) printf "%.2f", a / (2 * b); else printf "—" }')
  per3="—" t3="${times[3]:-—}"
  [ "$t3" != "—" ] && per3=$(awk -v a="$t3" -v b="${times[1]}" 'BEGIN { if (b + 0 > 0) printf "%.2f", a / (3 * b); else printf "—" }')
  echo "| $app $args | $procs | $seq_t | ${times[1]} | ${times[2]} | $per2 | $t3 | $per3 |"
  unset times
done
echo
fi

# --- 4. a killed replica ----------------------------------------------------------------------------------------
if has_part kill; then
# The kill comes after kill_after seconds by phsh's clock: the run must last well beyond it.
if [ "$quick" = 1 ]; then ring_args="1000 1000" kill_after=0.5; else ring_args="20000 3000" kill_after=1; fi
ring_ref=$("$build/apps/volpex/ring" --sequential 3 $ring_args | grep '^RESULT ')
phsh_run ring-calm "spawn volpex_server --replicas 2; spawn -n 3 --replicas 2 ring $ring_args; wait"
# n1 serves; n2..n4 are replica 0 of processes 0..2, n5..n7 replica 1: n6 is replica 1 of process 1.
phsh_run ring-kill "spawn volpex_server --replicas 2; spawn -n 3 --replicas 2 ring $ring_args; sleep $kill_after; kill n6; wait"
calm=$(elapsed ring-calm) killed=$(elapsed ring-kill)
for run in ring-calm ring-kill; do
  got="RESULT $(result "$run")"
  if [ "$got" != "$ring_ref" ]; then
    echo "run_volpex: $run computed \"$got\", the sequential run \"$ring_ref\"" >&2
    failed+=("$run")
  fi
done
echo "| ring $ring_args, 3 processes × 2 replicas | wall time (s) | ÷ without the kill |"
echo "| --- | --- | --- |"
echo "| no replica killed | $calm | 1.00 |"
echo "| replica 1 of process 1 killed after $kill_after s | $killed | $(ratio "$killed" "$calm") |"
echo
fi

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs, ${cpu:-unknown CPU}, one run each; every replica on this one machine."
if [ ${#failed[@]} -gt 0 ]; then
  echo "run_volpex: FAILED: ${failed[*]}" >&2
  exit 1
fi
