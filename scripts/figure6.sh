#!/usr/bin/env bash
# scripts/figure6.sh — draws the paper's Figure 6 from an application's trace: speedup each second against the
# number of nodes present, while nodes join one by one and then leave one by one.
#
# Usage: scripts/figure6.sh TRACE.csv OUT.png [BASELINE_UNITS_PER_S] [TITLE]
#   TRACE.csv is what an app writes with --trace (time_s,nodes,units_per_s,units_total), e.g.
#     build/release/apps/bintree/bintree --depth 24 --figure6 4 --trace bintree.csv --no-check
#   BASELINE is the rate of one sequential core in the same unit; without it, the median rate of the seconds in
#   which exactly one node was present stands in for it (so 1.0 means "as fast as the run's one-node phase").
#   The ideal line is the processors available: the nodes present, at most CORES (default: this machine's
#   cores, nproc), as node processes on one host share its cores.
# Needs gnuplot (Debian: gnuplot-nox).
set -euo pipefail
trace=${1:?usage: figure6.sh TRACE.csv OUT.png [BASELINE] [TITLE]}
out=${2:?usage: figure6.sh TRACE.csv OUT.png [BASELINE] [TITLE]}
baseline=${3:-}
title=${4:-speedup while nodes join and leave}
cores=${CORES:-$(nproc)}
[[ $cores =~ ^[1-9][0-9]*$ ]] || { echo "figure6: CORES must be a positive integer" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "figure6: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
[ -s "$trace" ] || { echo "figure6: $trace is empty or missing" >&2; exit 1; }
if [ -z "$baseline" ]; then
  # The first and last seconds of a phase are partial; the median of the one-node seconds is robust to them.
  baseline=$(awk -F, 'NR > 1 && $2 == 1 && $3 > 0 { print $3 }' "$trace" | sort -g |
    awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
  [ -n "$baseline" ] || { echo "figure6: no second with one node present; give BASELINE" >&2; exit 1; }
fi
gnuplot <<GNUPLOT
set datafile separator ','
set terminal pngcairo size 900,500 font 'sans,11'
set output '$out'
set title '$title'
set xlabel 'time (s)'
set ylabel 'speedup'
set y2label 'nodes present'
set ytics nomirror
set y2tics 1
set yrange [0:*]
set offsets graph 0, graph 0, graph 0.12, graph 0
set y2range [0:9]
set key below
set grid ytics
plot '$trace' every ::1 using 1:(\$3 / $baseline) with lines lw 2 title 'speedup (per second)', \
     '$trace' every ::1 using 1:(\$2 < $cores ? \$2 : $cores) with steps lw 1 lc rgb 'gray40' \
       title 'ideal: processors available (nodes present, at most $cores cores)', \
     '$trace' every ::1 using 1:2 axes x1y2 with steps lw 1 dt 2 title 'nodes present'
GNUPLOT
echo "figure6: $out (baseline $baseline units/s)" >&2
