#!/usr/bin/env bash
# bench/run_lu.sh — the LU benchmark in one invocation: phoenix's lu on 1 and 2 node processes beside its
# anchors, LAPACK's dgetrf on one thread (OpenBLAS, through `lu --sequential`) and ScaLAPACK's pdgetrf on 2 Open
# MPI ranks over TCP (bench/scalapack_lu.c, grids 1x2 and 2x1). Every program factors an N x N random matrix
# with partial pivoting in blocks, each at the block size it runs fastest with here (phoenix its default, 512 at
# N = 4096; ScaLAPACK 64; dgetrf chooses its own), on one BLAS thread per process, and reports 2/3 N^3 flops
# over the factorisation's wall time. Prints a markdown table with each figure's ratio to dgetrf's.
#
#   bench/run_lu.sh BUILD_DIR [N]        (N defaults to 4096; REPS=k runs each figure k times, median;
#                                         BLOCK=nb for phoenix, default lu's own; SCALAPACK_NB=nb, default 64)
set -euo pipefail
build=${1:?usage: bench/run_lu.sh BUILD_DIR [N]}
n=${2:-4096}
reps=${REPS:-3}
block_args=()
[ -n "${BLOCK:-}" ] && block_args=(--block "$BLOCK")
scalapack_nb=${SCALAPACK_NB:-64}
export OPENBLAS_NUM_THREADS=1 PHOENIX_LOG_LEVEL=${PHOENIX_LOG_LEVEL:-warn}
lu=$build/apps/lu/lu
scalapack=$build/bench/scalapack_lu
for f in "$lu" "$scalapack"; do
  [ -x "$f" ] || { echo "run_lu: $f is missing (build it first)" >&2; exit 1; }
done

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
gflops() { grep -oE '[0-9.]+ GFLOP/s' | head -1 | cut -d' ' -f1; }

run_phoenix() {  # label, lu arguments...: prints the median GFLOP/s and the block size lu ran with
  local label=$1; shift
  local out values=()
  for _ in $(seq "$reps"); do
    out=$("$lu" --n "$n" "${block_args[@]}" --no-check --quiet "$@" 2>&1) || { echo "$out" >&2; echo "run_lu: FAILED: $label" >&2; exit 1; }
    values+=("$(grep '^parallel' <<<"$out" | gflops)")
  done
  echo "$(printf '%s\n' "${values[@]}" | median) $(grep -oE 'blocks of [0-9]+' <<<"$out" | head -1 | cut -d' ' -f3)"
}
mpi() {  # grid
  mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
    --mca pml ob1 --mca btl tcp,self -x OPENBLAS_NUM_THREADS "$scalapack" --n "$n" --nb "$scalapack_nb" --grid "$1" \
    --reps "$reps" 2>&1 | grep '^RESULT' | gflops
}

# phoenix's 1-process figure first: its output names the block size lu chose, for the header.
r=$(run_phoenix "1 process" --nodes 1); read -r p1 block <<<"$r"
echo "# run_lu: N=$n, blocks of $block (phoenix) and $scalapack_nb (ScaLAPACK), partial pivoting, one BLAS thread per process, $reps run(s) each"
seq_gf=$(for _ in $(seq "$reps"); do "$lu" --n "$n" --sequential | gflops; done | median)
echo "RESULT lapack-dgetrf 1thread $n $seq_gf GFLOP/s"
sl12=$(mpi 1x2); echo "RESULT scalapack-pdgetrf 1x2 $n $sl12 GFLOP/s"
sl21=$(mpi 2x1); echo "RESULT scalapack-pdgetrf 2x1 $n $sl21 GFLOP/s"
echo "RESULT phoenix-lu 1process $n $p1 GFLOP/s"
r=$(run_phoenix "2 processes" --nodes 2); p2=${r%% *}; echo "RESULT phoenix-lu 2processes $n $p2 GFLOP/s"
r=$(run_phoenix "2 processes, no pivoting" --nodes 2 --no-pivot); p2n=${r%% *}
echo "RESULT phoenix-lu-nopivot 2processes $n $p2n GFLOP/s"

ratio() { awk -v a="$1" -v b="$seq_gf" 'BEGIN {printf "%.2f", a / b}'; }
cat <<TABLE

| LU, N=$n | GFLOP/s | / dgetrf 1 thread |
| --- | ---: | ---: |
| LAPACK dgetrf, 1 thread | $seq_gf | 1.00 |
| ScaLAPACK pdgetrf, 2 ranks, grid 1x2, nb=$scalapack_nb | $sl12 | $(ratio "$sl12") |
| ScaLAPACK pdgetrf, 2 ranks, grid 2x1, nb=$scalapack_nb | $sl21 | $(ratio "$sl21") |
| phoenix lu, 1 process, nb=$block | $p1 | $(ratio "$p1") |
| phoenix lu, 2 processes | $p2 | $(ratio "$p2") |
| phoenix lu, 2 processes, no pivoting (diagonally dominant matrix) | $p2n | $(ratio "$p2n") |
TABLE
