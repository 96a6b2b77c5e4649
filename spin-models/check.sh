#!/usr/bin/env bash
# Model-checks spin-models/migration.pml with SPIN: the correct model must verify, every seeded bug must be found.
#
#   spin-models/check.sh [safety|liveness|scale|bugs|all|hc4]     (default: all)
#
#   safety    exhaustive safety runs, 3 nodes (assertions, invalid end states with -q): the default configuration
#             (4 vnodes, 2 attempts per node, 2 application messages) and variants (queries handled later, also
#             with leases, other start layouts and name orders, transfers of 2 vnodes, a temporary leave that closes
#             with an interval and reopens, links that reorder, the two halves of fail fast + total order). Every run
#             lets nodes that assume nothing close and finalize (FINALIZE, on by default in the model)
#   liveness  LTL with weak fairness (-a -f), 3 nodes, 3 vnodes: every involvement of a node ends (ltl "settles"),
#             so every attempt ends, every lock is freed again (ltl "live"), every invitation is answered and
#             every node that closed finalizes; and, expected to fail, a node that crashes (-DCRASH) leaves a live
#             node's attempt or lock waiting for good (ltl "live_nodes"), which with leases (-DLEASE) it does not,
#             nor does a node that only stops for a while (-DSLOW)
#   scale     4 nodes: exhaustive with 1 attempt per node; bitstate (-DBITSTATE -w28), bounded in time, with 2;
#             and a query delivered twice with 2 attempts per node, bitstate, bounded in time
#   hc4       not part of all: 4 nodes, 2 attempts each, exhaustive by hash compaction (-DHC4): 450 M states,
#             about 40 minutes and 20 GB (MEMLIM=20000 for this run); README.md, "Results"
#   bugs      each seeded bug (-DBUG_...) must make SPIN report an error (among them decision 6 undone: invitations
#             not counted, or counted as a flag; no withdraw; neither, which is the chaos test's bug; and the leave
#             fault: a node that closes while its own take is under way)
#
# The exhaustive safety and scale runs are compiled with -DWITNESSES and run with pan -c0: every handler branch
# has a witness point that fails once, the first time it runs. Those runs pass if every error they report is a
# witness, and the whole check passes only if every witness of the model was reported by some run: a branch that
# no configuration reaches (dead code) fails it.
#
# Runs two pan processes at a time (one per core; JOBS=1 runs one). Works in a temporary directory, removed on
# exit. Exit status 0 only if every run came out as expected. Needs spin ($SPIN, default spin) and a C compiler
# ($CC, default cc); TMPDIR says where the temporary directory goes.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
model=$here/migration.pml
part=${1:-all}
cc=${CC:-cc}
spin=${SPIN:-spin}
njobs=${JOBS:-2}
case $part in safety|liveness|scale|bugs|all|hc4) ;; *) echo "usage: $0 [safety|liveness|scale|bugs|all|hc4]" >&2; exit 2 ;; esac
command -v "$spin" >/dev/null || { echo "check.sh: $spin not found" >&2; exit 2; }
command -v "$cc" >/dev/null || { echo "check.sh: $cc not found" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/spin-models.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'kill $(jobs -p) 2>/dev/null; exit 130' INT TERM
started=$SECONDS

# cpu_limit PID SECONDS MARKER SIGNAL: sends SIGNAL to PID (and SIGKILL 10 s later) once it has used SECONDS of
# CPU time, or after 30 times as long in wall-clock time, and leaves MARKER. CPU time, not wall-clock time: the
# test command runs these checks at the lowest priority beside builds and tests, where a run may wait a long
# while for a core, and a bounded run (bitstate) still gets the search it was given.
cpu_limit() {
  local pid=$1 limit=$2 marker=$3 sig=$4 hz stat waited=0
  hz=$(getconf CLK_TCK)
  while kill -0 "$pid" 2>/dev/null; do
    read -r -a stat <"/proc/$pid/stat" 2>/dev/null || return 0  # fields 14 and 15: user and system ticks
    if [ $(((stat[13] + stat[14]) / hz)) -ge "$limit" ] || [ "$waited" -ge $((limit * 30)) ]; then
      touch "$marker"
      kill -"$sig" "$pid" 2>/dev/null
      for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || return 0; sleep 1; done
      kill -KILL "$pid" 2>/dev/null
      return 0
    fi
    sleep 1
    waited=$((waited + 1))
  done
}

# run PART NAME EXPECT LIMIT "SPIN_DEFS" "CC_FLAGS" "PAN_FLAGS" DESCRIPTION
#   LIMIT: seconds of CPU time for pan (cpu_limit)
#   EXPECT: pass (errors: 0, search complete), partial (errors: 0; may be stopped at LIMIT seconds), fail (errors > 0)
# Prints one line and records the outcome in $work/NAME.ok or $work/NAME.bad.
run() {
  local part=$1 name=$2 expect=$3 limit=$4 defs=$5 ccflags=$6 panflags=$7 desc=$8
  local d=$work/$name t0=$SECONDS rc
  mkdir -p "$d"
  if ! (cd "$d" && "$spin" -a $defs "$model" >spin.log 2>&1); then
    echo "[$part] $name: spin -a failed"; cat "$d/spin.log"; touch "$work/$name.bad"; return
  fi
  if ! (cd "$d" && $cc -DMEMLIM=8192 $ccflags -w -o pan pan.c >cc.log 2>&1); then
    echo "[$part] $name: compiling pan failed"; tail -5 "$d/cc.log"; touch "$work/$name.bad"; return
  fi
  (cd "$d" && exec ./pan $panflags >pan.log 2>&1) &
  local pan=$!
  cpu_limit "$pan" "$limit" "$d/stopped" "$([ "$expect" = partial ] && echo INT || echo TERM)" &
  local watcher=$!
  wait "$pan"; rc=$?
  kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null
  [ -f "$d/stopped" ] && [ "$expect" != partial ] && rc=124
  local log=$d/pan.log
  local errors states trans depth secs note="" verdict=bad witnesses=0 others=0
  if [ "$expect" = pass ] && [[ "$defs" == *-DWITNESSES* ]]; then
    # pan -c0 goes on after each error; the witnesses are the errors "assertion violated (n==0)"
    grep -oE '^pan:[0-9]+: assertion violated \([0-9]+==0\)' "$d/pan.log" | sed -E 's/.*\(([0-9]+)==0\)/\1/' \
      | sort -un >"$work/$name.witnesses"
    witnesses=$(grep -cE '^pan:[0-9]+: assertion violated \([0-9]+==0\)' "$d/pan.log")
    others=$(grep -E '^pan:[0-9]+: ' "$d/pan.log" | grep -cvE 'assertion violated \([0-9]+==0\)')
  fi
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$log" | tail -1)
  states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$log" | tail -1)
  trans=$(sed -n 's/^ *\([0-9.e+]*\) transitions.*/\1/p' "$log" | tail -1)
  depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$log" | tail -1)
  secs=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\) seconds.*/\1/p' "$log" | tail -1)
  local incomplete=no
  grep -q "Interrupted" "$log" && incomplete=yes
  grep -qE "max search depth too small|out of memory|pan: reached -DMEMLIM" "$log" && incomplete=yes
  case $expect in
    pass)    [ "$rc" = 0 ] && [ "$errors" = "$witnesses" ] && [ "$others" = 0 ] && [ $incomplete = no ] && verdict=ok
             [ "$witnesses" != 0 ] && errors="0 ($witnesses witnesses)" ;;
    partial) [ "$errors" = 0 ] && verdict=ok; [ $incomplete = yes ] && note=" (stopped at ${limit} CPU s, partial)" ;;
    fail)    [ -n "$errors" ] && [ "$errors" != 0 ] && verdict=ok
             note=" -- $(grep -m1 -E '^pan:1:|^pan: (acceptance|invalid)' "$log" | cut -c1-140)" ;;
  esac
  [ "$rc" = 124 ] && [ "$expect" != partial ] && note="$note (timed out after ${limit} CPU s)"
  printf '[%s] %-24s %s: states %s, transitions %s, depth %s, errors: %s, %s s (%d s with compiling) %s%s\n' \
    "$part" "$name" "$desc" "${states:-?}" "${trans:-?}" "${depth:-?}" "${errors:-?}" "${secs:-?}" \
    $((SECONDS - t0)) "$([ $verdict = ok ] && echo OK || echo "UNEXPECTED (wanted $expect)")" "$note"
  if [ $verdict = ok ]; then touch "$work/$name.ok"; else touch "$work/$name.bad"; tail -20 "$log"; fi
}

# The jobs of a part are queued with add, then run $njobs at a time (wait -n), in the order queued.
queue=()
add() { queue+=("$(printf '%q ' "$@")"); }
run_queue() {
  local running=0 j
  for j in "${queue[@]}"; do
    if [ $running -ge "$njobs" ]; then wait -n; running=$((running - 1)); fi
    eval "run $j" &
    running=$((running + 1))
  done
  wait
}

O2="-O2 -DSAFETY"
O1="-O1 -DSAFETY"
O0="-O0 -DSAFETY"  # the seeded bugs are found within a few hundred thousand states: compiling dominates

W=-DWITNESSES  # with pan -c0: see the header
# exhaustive safety, 3 nodes, 4 vnodes, 2 attempts per node, channels of 3
safety_main() {
  # -O1: at -O2 the compile cost 13 CPU s more and the search saved 1 (-O1: 4 + 61 s, -O2: 17 + 60 s)
  add safety safety.default pass 240 "$W" "$O1" "-m10000 -q -w24 -c0" "3 nodes, default, 2 app messages"
}
safety_variants() {
  add safety safety.temp_leave pass 120 "$W -DTEMP_LEAVE -DAPPS=0" "$O1" "-m10000 -q -w22 -c0" \
    "node 0 closes with its interval, reopens"
  add safety safety.query_inbox pass 120 "$W -DQUERY_INBOX -DAPPS=0" "$O1" "-m10000 -q -w22 -c0" "queries handled later"
  # with leases a node that finalizes drops the queries in its inbox that have no route (DROP_STEP); 1 attempt per
  # node: with 2 (3 vnodes, LEASES=1) the search passed 25 M states and the 8 GB MEMLIM without an error
  add safety safety.query_inbox_lease pass 60 "$W -DQUERY_INBOX -DLEASE -DLEASES=2 -DATTEMPTS=1 -DCAP=4 -DAPPS=0" "$O1" \
    "-m10000 -q -w22 -c0" "queries handled later, leases, 1 attempt"
  # any message of a link may come first (runtime packets are not numbered end to end)
  add safety safety.reorder pass 120 "$W -DREORDER -DAPPS=0" "$O1" "-m10000 -q -w23 -c0" "links reorder"
  add safety safety.k2 pass 120 "$W -DK=2 -DV=5 -DAPPS=0" "$O1" "-m10000 -q -w22 -c0" "5 vnodes, take and give 2"
  add safety safety.names_rev pass 120 "$W -DNAMES=1 -DAPPS=0" "$O1" "-m10000 -q -w22 -c0" \
    "empty node has the smallest name"
  add safety safety.first_empty pass 120 "$W -DINIT=2 -DNAMES=2 -DAPPS=0" "$O1" "-m10000 -q -w22 -c0" \
    "node 0 empty, names rotated"
  add safety safety.uneven pass 120 "$W -DINIT=3 -DNAMES=1 -DAPPS=0" "$O1" "-m10000 -q -w22 -c0" \
    "[0,1) and [1,4), names reversed"
  add safety safety.init_one pass 120 "$W -DINIT=0 -DAPPS=0" "$O1" "-m10000 -q -w22 -c0" "node 0 owns all at first"
  # doc, decision 8: one lease expiry at any moment (LEASES=1), 3 vnodes: 14.3 M states; -O1 as for the default
  # run (-O1: 7 + 53 CPU s, -O2: 28 + 47)
  add safety safety.lease pass 150 "$W -DLEASE -DLEASES=1 -DCAP=4 -DV=3 -DAPPS=0" "$O1" "-m10000 -q -w24 -c0" \
    "leases: a lock broken at any moment"
  # the same with a node that crashes (partner_gone, forgotten pending records, a state refused and taken
  # back), 1 attempt per node: with 2 the search passed 24 M states and 7 GB unfinished
  # (-O0: 570 k states run in 4 s, and at -O2 compiling pan took 30 s)
  add safety safety.crash_lease pass 120 "$W -DCRASH -DLEASE -DLEASES=1 -DATTEMPTS=1 -DCAP=4 -DV=3 -DAPPS=0" "$O0" \
    "-m10000 -w24 -c0" "leases, a node crashes, 1 attempt"  # no -q: queries wait at a crashed node's vnodes
  # a query delivered twice (DUP_QUERY): only the first reply answers it, a copy of an answered one is dropped.
  # 1 attempt per node, exhaustive; with 2 the search passes 27 M states and the 8 GB MEMLIM (scale.dup_bitstate)
  add safety safety.dup_query pass 90 "$W -DLEASE -DDUP_QUERY -DFORGET_ANSWERS -DLEASES=1 -DATTEMPTS=1 -DCAP=5 -DV=3 -DAPPS=0" \
    "$O1" "-m10000 -q -w22 -c0" "a query delivered twice, answers forgotten, leases, 1 attempt"
  # a key holder forges a cleanup_ack (FORGE), copies of a query too; 1 attempt per node: with 2 the search passes
  # 25 M states and the 8 GB MEMLIM without an error
  add safety safety.forge pass 60 "$W -DLEASE -DDUP_QUERY -DFORGE -DLEASES=1 -DATTEMPTS=1 -DCAP=5 -DV=3 -DAPPS=0" "$O1" \
    "-m10000 -q -w23 -c0" "a forged cleanup_ack and a query delivered twice, leases, 1 attempt"
  add safety safety.wait_locks pass 60 "$W -DWAIT_LOCKS -DAPPS=0" "$O1" "-m10000 -q -w22 -c0" \
    "no fail fast at 54, total order kept"
  add safety safety.no_order pass 60 "$W -DBUG_LOCK_ORDER -DAPPS=0" "$O1" "-m10000 -q -w22 -c0" \
    "order ignored at 23, fail fast kept"
}
# LTL under weak fairness (-a -f), 3 nodes, 3 vnodes, 2 attempts, no app messages (with 4 vnodes the same run
# takes over a minute alone: 6.1 M states, 38 M visited; see README.md)
liveness_jobs() {
  add liveness liveness.settles pass 300 "-DLIVENESS -DAPPS=0 -DV=3" "-O2 -DNFAIR=3" \
    "-m10000 -a -f -N settles -w24" \
    "3 nodes, 3 vnodes, [] (involved[i] -> <> !involved[i]), implies live"
  # the protocol without leases: a crashed partner leaves a live node attempting (or locked) for good
  add liveness liveness.crash_no_lease fail 60 "-DLIVENESS -DCRASH -DAPPS=0 -DV=3" "-O1 -DNFAIR=3" \
    "-m10000 -a -f -N live_nodes -w22" "a node crashes, no lease: a live node's attempt never ends"
  # with leases (decision 8), 1 attempt per node: every live node's attempts end and its locks are freed again,
  # whether the partner crashed or only stopped for a while
  add liveness liveness.crash_lease pass 180 "-DLIVENESS -DCRASH -DLEASE -DATTEMPTS=1 -DCAP=4 -DAPPS=0 -DV=3" \
    "-O1 -DNFAIR=3" "-m10000 -a -f -N live_nodes -w26" "a node crashes, leases: live nodes' attempts and locks end"
  add liveness liveness.slow_lease pass 180 "-DLIVENESS -DSLOW -DLEASE -DATTEMPTS=1 -DCAP=4 -DAPPS=0 -DV=3" \
    "-O1 -DNFAIR=3" "-m10000 -a -f -N live_nodes -w26" "a node stops a while, leases: the same"
}
# 4 nodes, 4 vnodes: exhaustive with 1 attempt per node; with 2 not even hash compaction finishes (-DHC4 -w27, no app
# messages: 105 M states after 300 s, 111 M with FINALIZE=0, still growing linearly), so bitstate, stopped after 20 s
scale_jobs() {
  add scale scale.n4_exhaustive pass 180 "$W -DN=4 -DATTEMPTS=1 -DAPPS=1" "$O1" "-m10000 -q -w23 -c0" \
    "4 nodes, 1 attempt, 1 app message, exhaustive"
  add scale scale.n4_bitstate partial 20 "-DN=4 -DAPPS=0" "$O1 -DBITSTATE" "-m10000 -q -w28" "4 nodes, 2 attempts, bitstate -w28"
  add scale scale.dup_bitstate partial 20 "-DLEASE -DDUP_QUERY -DFORGET_ANSWERS -DLEASES=1 -DCAP=5 -DV=3 -DAPPS=0" "$O1 -DBITSTATE" \
    "-m10000 -q -w28" "a query delivered twice, 2 attempts, bitstate"
}
# The same 4 nodes with 2 attempts each, exhaustive: hash compaction stores 40 bytes a state; 450 M states.
hc4_jobs() {
  add hc4 scale.n4_hc4 pass 7200 "-DN=4 -DAPPS=0" "$O2 -DHC4 -UMEMLIM -DMEMLIM=20000" "-m10000 -q -w28" \
    "4 nodes, 2 attempts, hash compaction"
}
# every seeded bug must be reported (3 nodes, default configuration)
bug_jobs() {
  add bugs bug.line64_np fail 120 "-DBUG_LINE64_CLEARS_L -DNO_PRE" "$O0" "-m10000 -q -w22" "line 64 clears l, no preconditions"
  add bugs bug.no_adj34 fail 120 "-DBUG_NO_ADJ34" "$O0" "-m10000 -q -w22" "line 34 without adjacency"
  add bugs bug.no_adj54 fail 120 "-DBUG_NO_ADJ54" "$O0" "-m10000 -q -w22" "line 54 without adjacency"
  add bugs bug.no_i_eq_s42 fail 120 "-DBUG_NO_I_EQ_S42" "$O0" "-m10000 -q -w22" "line 42 without I = S"
  add bugs bug.lock_order fail 120 "-DBUG_LOCK_ORDER -DWAIT_LOCKS" "$O0" "-m10000 -q -w22" "locks out of order, waiting"
  add bugs bug.taker_early fail 120 "-DBUG_TAKER_ASSUMES_EARLY" "$O0" "-m10000 -q -w22" "taker assumes before release"
  add bugs bug.initiator_early fail 120 "-DBUG_INITIATOR_FREES_EARLY" "$O0" "-m10000 -q -w22" "initiator frees after request"
  add bugs bug.initiator_early_np fail 120 "-DBUG_INITIATOR_FREES_EARLY -DNO_PRE" "$O0" "-m10000 -q -w22" \
    "initiator frees early, no preconditions"
  add bugs bug.line64 fail 120 "-DBUG_LINE64_CLEARS_L" "$O0" "-m10000 -q -w22" "line 64 clears l"
  add bugs bug.no_invitations fail 120 "-DBUG_NO_INVITATIONS" "$O0" "-m10000 -q -w22" "invitations not counted"
  add bugs bug.no_withdraw fail 120 "-DBUG_NO_WITHDRAW" "$O0" "-m10000 -q -w22" "line 39 sends no withdraw"
  add bugs bug.before_fix fail 120 "-DBUG_NO_INVITATIONS -DBUG_NO_WITHDRAW" "$O0" "-m10000 -q -w22" \
    "neither (before decision 6)"
  add bugs bug.invited_flag fail 120 "-DBUG_INVITED_FLAG" "$O0" "-m10000 -q -w22" "invitation a flag, not a count"
  add bugs bug.close_while_busy fail 120 "-DBUG_CLOSE_WHILE_BUSY -DNO_PRE" "$O0" "-m10000 -q -w22" \
    "closes with its own take under way"
  add bugs bug.empty_s_adjacent fail 120 "-DBUG_EMPTY_S_ADJACENT -DQUERY_INBOX -DNO_PRE" "$O0" "-m10000 -q -w22" \
    "empty S adjacent, queries handled later"
  add bugs bug.lease_after_release fail 60 "-DLEASE -DBUG_LEASE_AFTER_RELEASE -DCAP=4 -DAPPS=0" "$O0" "-m10000 -q -w22" \
    "giver takes T back on its lease"
  add bugs bug.drop_late_state fail 60 "-DLEASE -DBUG_DROP_LATE_STATE -DCAP=4 -DAPPS=0" "$O0" "-m10000 -q -w22" \
    "late state dropped after a lease"
  add bugs bug.copy_answered fail 60 "-DLEASE -DDUP_QUERY -DBUG_NO_COPY_GUARD -DATTEMPTS=1 -DCAP=5 -DV=3 -DAPPS=0" "$O0" \
    "-m10000 -q -w22" "a query's copy answered and its reply taken"
  add bugs bug.no_held_guard fail 60 "-DLEASE -DDUP_QUERY -DFORGET_ANSWERS -DBUG_NO_HELD_GUARD -DATTEMPTS=1 -DCAP=5 -DV=3 -DAPPS=0" \
    "$O0" "-m10000 -q -w22" "a copy granted again while its first grant is pending"
  add bugs bug.any_cleanup_ack fail 60 "-DLEASE -DFORGE -DBUG_ANY_CLEANUP_ACK -DATTEMPTS=1 -DCAP=5 -DV=3 -DAPPS=0" "$O0" \
    "-m10000 -q -w22" "a forged cleanup_ack taken for the partner's"
  add bugs bug.invited_flag_np fail 120 "-DBUG_INVITED_FLAG -DNO_PRE" "$O1" "-m10000 -q -w23" \
    "invitation a flag, no preconditions"
}

case $part in
  safety)   safety_main; safety_variants ;;
  liveness) liveness_jobs ;;
  scale)    scale_jobs ;;
  bugs)     bug_jobs ;;
  all)      liveness_jobs; scale_jobs; safety_main; safety_variants; bug_jobs ;;
  hc4)      hc4_jobs ;;
esac
echo "check.sh $part: ${#queue[@]} runs, $njobs at a time"
run_queue

# Every witness point of the model must have been reported by a run with witnesses (checked by the parts that
# run all the configurations that reach them: safety and all).
if [ "$part" = safety ] || [ "$part" = all ]; then
  all_witnesses=$(grep -oE 'WITNESS\([0-9]+\)' "$model" | grep -oE '[0-9]+' | sort -u)
  missing=$(comm -23 <(echo "$all_witnesses") <(cat "$work"/*.witnesses 2>/dev/null | sort -u) | sort -n | tr '\n' ' ')
  queue+=(witnesses)
  if [ -n "$missing" ]; then
    echo "[witnesses] branches that no run reached (dead code, or a configuration missing here): WITNESS $missing"
    touch "$work/witnesses.bad"
  else
    echo "[witnesses] all $(echo "$all_witnesses" | wc -l) witness points reached"
    touch "$work/witnesses.ok"
  fi
fi
ok=$(ls "$work"/*.ok 2>/dev/null | wc -l)
bad=$(ls "$work"/*.bad 2>/dev/null | wc -l)
if [ "$bad" -ne 0 ]; then
  echo "check.sh $part: $bad of ${#queue[@]} runs NOT as expected: $(cd "$work" && ls *.bad | sed 's/\.bad$//' | tr '\n' ' ')($((SECONDS - started)) s)"
  exit 1
fi
if [ "$ok" -ne ${#queue[@]} ]; then
  echo "check.sh $part: only $ok of ${#queue[@]} runs finished ($((SECONDS - started)) s)"
  exit 1
fi
echo "check.sh $part: all $ok runs as expected ($((SECONDS - started)) s)"
