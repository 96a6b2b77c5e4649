#!/usr/bin/env bash
# bench/run_volpex_selection.sh — the target-selection policies of replicated message passing (docs/volpex.md,
# paper 004) on a heterogeneous setting: the ring stencil, 3 processes × 2 replicas, with replica 0 of process 1
# and replica 1 of process 2 sharing a fraction of one CPU (one cgroup: v1 cpu.cfs_quota_us, or v2 cpu.max).
# Replica j pulling from replica j (team) then waits for a slow replica in both teams; a policy that notices
# the lag pulls from the fast replica instead.
#
# Each policy runs once without and once with the throttle; the time is from the first replica's start to the
# first result, by phsh's clock, and every result must equal the sequential run's. Needs root (cgroups); it is
# run by hand, not by the suite.
#
# Usage: bench/run_volpex_selection.sh [BUILD_DIR]   (CELLS, ROUNDS and QUOTA_PERCENT change the setting)
set -euo pipefail

build=${1:-build/release}
cells=${CELLS:-5000}
rounds=${ROUNDS:-3000}
quota=${QUOTA_PERCENT:-10}
phsh="$build/phoenix/shell/phsh"
export PHSH_APP_PATH="$build/apps/volpex"
[ -x "$phsh" ] || { echo "run_volpex_selection: $phsh not found; build first" >&2; exit 1; }

if [ -d /sys/fs/cgroup/cpu ] && [ -w /sys/fs/cgroup/cpu ]; then
  group=/sys/fs/cgroup/cpu/phoenix-volpex-slow.$$
  mkdir "$group"
  echo 100000 >"$group/cpu.cfs_period_us"
  echo $((quota * 1000)) >"$group/cpu.cfs_quota_us"
elif [ -w /sys/fs/cgroup/cgroup.subtree_control ] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then
  echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
  group=/sys/fs/cgroup/phoenix-volpex-slow.$$
  mkdir "$group"
  echo "$((quota * 1000)) 100000" >"$group/cpu.max"
else
  echo "run_volpex_selection: needs a writable cgroup cpu controller (run as root)" >&2
  exit 1
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/volpex-selection.XXXXXX")
cleanup() {
  pkill -P $$ 2>/dev/null || true
  rmdir "$group" 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT

# The ring processes (by PID) that are replica $2 of process $1.
replica_pids() {
  for p in $(pgrep -x ring || true); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "VOLPEX_PROC_ID=$1" &&
      tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "VOLPEX_REPLICA=$2"; then
      echo "$p"
    fi
  done
}

reference=$("$build/apps/volpex/ring" --sequential 3 "$cells" "$rounds" | grep '^RESULT ')
failed=()
echo "| policy | no throttle (s) | replica 0 of process 1 and replica 1 of process 2 sharing ${quota} % of a CPU (s) |"
echo "| --- | --- | --- |"
for policy in team timeout timestamp network hybrid; do
  row="| $policy"
  for throttle in no yes; do
    name="$policy-$throttle"
    echo "run_volpex_selection: $name" >&2
    VOLPEX_SELECTION=$policy timeout 900 "$phsh" --run-dir "$out/$name.run" \
      -c "spawn volpex_server --replicas 2; spawn -n 3 --replicas 2 ring $cells $rounds; wait" >"$out/$name" 2>&1 &
    run=$!
    if [ $throttle = yes ]; then
      moved=0
      for _ in $(seq 1 200); do  # up to 20 s for both replicas to start
        for p in $(replica_pids 1 0) $(replica_pids 2 1); do
          if ! grep -qx "$p" "$group/cgroup.procs" 2>/dev/null; then
            echo "$p" >"$group/cgroup.procs" && moved=$((moved + 1))
          fi
        done
        [ $moved -ge 2 ] && break
        sleep 0.1
      done
      [ $moved -ge 2 ] || echo "run_volpex_selection: $name: throttled only $moved replicas" >&2
    fi
    if ! wait $run; then
      echo "run_volpex_selection: $name FAILED" >&2
      tail -n 20 "$out/$name" >&2
      failed+=("$name")
    fi
    got="RESULT $(sed -n 's/^\[[0-9.]*s\] [^ ]* result: //p' "$out/$name" | head -n 1)"
    if [ "$got" != "$reference" ]; then
      echo "run_volpex_selection: $name computed \"$got\", the sequential run \"$reference\"" >&2
      failed+=("$name")
    fi
    t=$(awk '/^\[[0-9.]+s\] [^ ]* started: replica/ && !t0 { t0 = substr($1, 2) + 0 }
             /^\[[0-9.]+s\] [^ ]* result: / && !t1 { t1 = substr($1, 2) + 0 }
             END { if (t1 > 0) printf "%.1f", t1 - t0; else printf "—" }' "$out/$name")
    row+=" | $t"
  done
  echo "$row |"
done
echo
echo "ring $cells cells × $rounds rounds per process, 3 processes × 2 replicas; measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs, one run each."
if [ ${#failed[@]} -gt 0 ]; then
  echo "run_volpex_selection: FAILED: ${failed[*]}" >&2
  exit 1
fi
