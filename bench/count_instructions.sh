#!/usr/bin/env bash
# bench/count_instructions.sh — what one message costs in CPU instructions, which the machine's noise does not
# move: phoenix_pingpong's 1-hop run under callgrind, twice (--reps 1 and --reps 4), both node processes
# counted. The difference between the two runs divided by the difference in messages sent is the cost of one
# message (its send and its receipt, with the acknowledgements it causes); start-up, calibration and shutdown
# cancel out. Compare two builds with it as with compare_builds.sh. Threads that poll while they wait count too
# (more under valgrind, which runs a process's threads one at a time): runs of one build spread by about 2 %.
#
# Usage: bench/count_instructions.sh BUILD [latency|rate]     (default latency; needs valgrind)
# Prints "instructions per message: N" on stdout, the two runs' totals on stderr.
set -euo pipefail

build=${1:?usage: count_instructions.sh BUILD [latency|rate]}
test=${2:-latency}
command -v valgrind >/dev/null || { echo "count_instructions: valgrind not found" >&2; exit 1; }
[ -x "$build/bench/phoenix_pingpong" ] || { echo "count_instructions: $build/bench/phoenix_pingpong not found" >&2; exit 1; }
build=$(cd "$build" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/count_instructions.XXXXXX")
trap 'rm -rf "$work"' EXIT

# run REPS: prints "instructions messages" summed over the processes that sent messages
run() {
  local dir=$work/reps$1 f total=0 sent=0 ir calls
  mkdir -p "$dir"
  if ! (cd "$dir" && valgrind --tool=callgrind --trace-children=yes \
      "$build/bench/phoenix_pingpong" --hops 1 --reps "$1" --test "$test" >run.log 2>&1); then
    tail -5 "$dir/run.log" >&2
    echo "count_instructions: the run failed" >&2
    return 1
  fi
  for f in "$dir"/callgrind.out.*; do
    callgrind_annotate --inclusive=yes --tree=caller "$f" >"$dir/tree.txt" 2>/dev/null
    ir=$(awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }' "$dir/tree.txt")
    # the calls into Node::Impl::send: the "(Nx)" of each caller line above its entry
    calls=$(awk '/^ *$/ { n = 0; next }
                 / < / { if (match($0, /\([0-9,]+x\)/)) { c = substr($0, RSTART + 1, RLENGTH - 3); gsub(",", "", c); n += c }; next }
                 / \* / { if (index($0, "phoenix::Node::Impl::send(")) total += n; n = 0 }
                 END { print total + 0 }' "$dir/tree.txt")
    [ "$calls" -gt 0 ] || continue
    total=$((total + ir))
    sent=$((sent + calls))
  done
  echo "$total $sent"
}

counts=$(run 1) && read -r ir1 sent1 <<<"$counts"
counts=$(run 4) && read -r ir4 sent4 <<<"$counts"
echo "count_instructions: --reps 1: $ir1 instructions, $sent1 messages; --reps 4: $ir4, $sent4" >&2
if [ "$sent4" -le "$sent1" ]; then echo "count_instructions: the runs sent no more messages with more reps" >&2; exit 1; fi
echo "instructions per message: $(((ir4 - ir1) / (sent4 - sent1)))"
