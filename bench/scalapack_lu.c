// bench/scalapack_lu.c — scalapack_lu, the anchor of the LU benchmark: ScaLAPACK's pdgetrf (LU with partial
// pivoting) on an N×N random matrix distributed block-cyclically in NB×NB blocks over a P×Q grid of MPI ranks.
// Each of --reps runs factors a fresh matrix; the median GFLOP/s (2/3 N^3 flops over the factorisation's wall
// time, between barriers) is printed as `RESULT scalapack-pdgetrf PxQ N GFLOP/s`.
//
// Usage: mpirun -np 2 scalapack_lu [--n 4096] [--nb 64] [--grid 1x2] [--reps 3]   (bench/run_lu.sh runs it)
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void Cblacs_pinfo(int* me, int* nprocs);
void Cblacs_get(int ctxt, int what, int* val);
void Cblacs_gridinit(int* ctxt, const char* order, int nprow, int npcol);
void Cblacs_gridinfo(int ctxt, int* nprow, int* npcol, int* myrow, int* mycol);
void Cblacs_gridexit(int ctxt);
int numroc_(const int* n, const int* nb, const int* iproc, const int* isrcproc, const int* nprocs);
void descinit_(int* desc, const int* m, const int* n, const int* mb, const int* nb, const int* irsrc,
               const int* icsrc, const int* ictxt, const int* lld, int* info);
void pdgetrf_(const int* m, const int* n, double* a, const int* ia, const int* ja, const int* desca, int* ipiv,
              int* info);

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int n = 4096, nb = 64, p = 1, q = 2, reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--n"))
      n = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--nb"))
      nb = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--grid"))
      sscanf(argv[i + 1], "%dx%d", &p, &q);
    else if (!strcmp(argv[i], "--reps"))
      reps = atoi(argv[i + 1]);
  }
  int me, np, ctxt, myrow, mycol, zero = 0, one = 1, info;
  Cblacs_pinfo(&me, &np);
  if (n < 1 || nb < 1 || p < 1 || q < 1 || p * q != np) {
    if (me == 0)
      fprintf(stderr, "scalapack_lu: FAILED: the grid %dx%d needs %d ranks, not %d (or a bad size)\n", p, q,
              p * q, np);
    MPI_Finalize();
    return 2;
  }
  Cblacs_get(-1, 0, &ctxt);
  Cblacs_gridinit(&ctxt, "Row", p, q);
  Cblacs_gridinfo(ctxt, &p, &q, &myrow, &mycol);
  const int mloc = numroc_(&n, &nb, &myrow, &zero, &p), nloc = numroc_(&n, &nb, &mycol, &zero, &q);
  const int lld = mloc > 1 ? mloc : 1;
  int desc[9];
  descinit_(desc, &n, &n, &nb, &nb, &zero, &zero, &ctxt, &lld, &info);
  double* a = malloc(sizeof(double) * (size_t)mloc * nloc);
  int* ipiv = malloc(sizeof(int) * (size_t)(mloc + nb));
  double gflops[64];
  if (reps < 1) reps = 1;
  if (reps > 64) reps = 64;
  for (int r = 0; r < reps; ++r) {
    srand(1 + me);
    for (long i = 0; i < (long)mloc * nloc; ++i) a[i] = (double)rand() / RAND_MAX - 0.5;
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    pdgetrf_(&n, &n, a, &one, &one, desc, ipiv, &info);
    MPI_Barrier(MPI_COMM_WORLD);
    const double s = MPI_Wtime() - t0;
    const double gf = 2.0 / 3.0 * n * (double)n * n / s / 1e9;
    if (me == 0)
      printf("# pdgetrf n %d nb %d grid %dx%d: %.3f s, %.1f GFLOP/s, info %d\n", n, nb, p, q, s, gf, info);
    gflops[r] = gf;
    if (info != 0) {
      if (me == 0) fprintf(stderr, "scalapack_lu: FAILED: pdgetrf info %d\n", info);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  for (int i = 1; i < reps; ++i)  // insertion sort: a handful of values
    for (int j = i; j > 0 && gflops[j - 1] > gflops[j]; --j) {
      const double t = gflops[j];
      gflops[j] = gflops[j - 1];
      gflops[j - 1] = t;
    }
  const double median = reps % 2 ? gflops[reps / 2] : (gflops[reps / 2 - 1] + gflops[reps / 2]) / 2;
  if (me == 0) printf("RESULT scalapack-pdgetrf %dx%d %d %.1f GFLOP/s\n", p, q, n, median);
  free(a);
  free(ipiv);
  Cblacs_gridexit(ctxt);
  MPI_Finalize();
  return 0;
}
