#!/usr/bin/env bash
# scripts/chaos-soak.sh — the chaos test of the migration protocol (tests/cluster/chaos.hpp), longer and with
# many seeds: 8 node processes forward messages while intervals migrate, links break, a node leaves for good,
# a fresh one joins and another leaves and comes back. With PHOENIX_CHAOS_KILLS=N it runs the crash test
# instead (the chaos_crash program): N processes SIGKILLed at random moments (owners, migration partners and
# relays in turn), each restarted on its port. Stops at the first failing seed.
#
# Usage: [PHOENIX_CHAOS_KILLS=N] [PHOENIX_CHAOS_FIRST_SEED=S] scripts/chaos-soak.sh [BUILD_DIR] [RUNS] [SECONDS_PER_RUN]
#        (defaults: build/release 20 60)
set -euo pipefail
build=${1:-build/release}
runs=${2:-20}
seconds=${3:-60}
kills=${PHOENIX_CHAOS_KILLS:-0}
exe="$build/tests/chaos_integration"
what="${seconds} s of chaos"
if [ "$kills" -gt 0 ]; then
  exe="$build/tests/chaos_crash"
  what="$what, $kills kills"
fi
[ -x "$exe" ] || { echo "chaos-soak: $exe not found; build the tests first" >&2; exit 1; }
first_seed=${PHOENIX_CHAOS_FIRST_SEED:-$RANDOM}
for ((i = 0; i < runs; ++i)); do
  seed=$((first_seed + i))
  echo "chaos-soak: run $((i + 1))/$runs, seed $seed, $what" >&2
  if ! PHOENIX_CHAOS_SEED=$seed PHOENIX_CHAOS_SECONDS=$seconds PHOENIX_CHAOS_KILLS=$kills "$exe" 2>&1 |
    grep -Ev '^\[20'; then
    echo "chaos-soak: seed $seed FAILED (rerun: PHOENIX_CHAOS_SEED=$seed PHOENIX_CHAOS_SECONDS=$seconds" \
      "PHOENIX_CHAOS_KILLS=$kills $exe)" >&2
    exit 1
  fi
done
echo "chaos-soak: $runs runs passed" >&2
