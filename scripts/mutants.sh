#!/usr/bin/env bash
# scripts/mutants.sh — do the tests catch the bugs they are named after? Applies each one-line mutant of a list
# (scripts/mutants.list: file, sed expression, the tests that must fail) to a scratch copy of the tree, one at a
# time, rebuilds, runs the named tests and reports KILLED (a named test failed), SURVIVED (all passed: the tests
# miss the bug), NOT APPLIED (the expression changed nothing: the list is stale) or NO BUILD. The named tests
# are first run on the unmutated copy, where they must pass. Not part of CI: a mutant costs a rebuild, minutes.
#
# Usage: scripts/mutants.sh [LIST] (default scripts/mutants.list); MUTANTS_DIR (default /tmp/phoenix-mutants)
# holds the copy and its build, kept between runs so that rebuilds are incremental. Exit status 1 if any mutant
# survived or did not apply.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
list=${1:-$root/scripts/mutants.list}
work=${MUTANTS_DIR:-/tmp/phoenix-mutants}
src="$work/src"
build="$work/build"
jobs=$(nproc)

mkdir -p "$src"
# The tree as committed plus uncommitted changes, without build directories.
tar -C "$root" --exclude=./build --exclude=./.git -cf - . | tar -C "$src" -xf -
[ -d "$root/../shared" ] && ln -sfn "$root/../shared" "$work/shared"
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2" \
  -DPHOENIX_BUILD_BENCH=OFF >/dev/null
echo "mutants: building the unmutated copy in $build" >&2
cmake --build "$build" -j "$jobs" >"$work/build.log" 2>&1 || { echo "mutants: the unmutated copy does not build ($work/build.log)" >&2; exit 2; }

entries=()
while IFS= read -r line; do
  [[ -z "$line" || "$line" == \#* ]] && continue
  entries+=("$line")
done <"$list"

run_tests() {  # regex -> ctest's exit status
  ctest --test-dir "$build" -R "$1" -j "$jobs" --timeout 300 >"$work/ctest.log" 2>&1
}
count_tests() {
  ctest --test-dir "$build" -N -R "$1" | sed -n 's/^Total Tests: //p'
}

for entry in "${entries[@]}"; do
  regex=${entry#* | }; regex=${regex#* | }
  [ "$(count_tests "$regex")" -gt 0 ] || { echo "mutants: no test matches '$regex'" >&2; exit 2; }
  run_tests "$regex" || { echo "mutants: '$regex' fails without any mutant ($work/ctest.log)" >&2; exit 2; }
done

failed=0
n=0
for entry in "${entries[@]}"; do
  n=$((n + 1))
  file=${entry%% | *}
  rest=${entry#* | }
  expr=${rest%% | *}
  regex=${rest#* | }
  cp "$src/$file" "$work/original"
  sed -i -e "$expr" "$src/$file"
  if cmp -s "$src/$file" "$work/original"; then
    result="NOT APPLIED"
    failed=1
  elif ! cmake --build "$build" -j "$jobs" >"$work/build.log" 2>&1; then
    result="NO BUILD"
  elif run_tests "$regex"; then
    result="SURVIVED"
    failed=1
  else
    result="KILLED ($(sed -n 's/.*, \([0-9]*\) tests failed out of \([0-9]*\)$/\1 of \2/p' "$work/ctest.log") tests failed)"
  fi
  cp "$work/original" "$src/$file"  # a fresh modification time: the next build recompiles it
  printf 'mutant %2d  %-30s %s\n' "$n" "$file" "$result"
done
cmake --build "$build" -j "$jobs" >/dev/null 2>&1 || true
exit "$failed"
