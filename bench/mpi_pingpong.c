/* mpi_pingpong.c — the Open MPI anchor for bench/pingpong.cpp: the same figures, measured the same way.
 *
 * Two ranks. Rank 0 drives: before every timed run it broadcasts a command (what to run, message size,
 * iteration count) and rank 1 follows it, so both sides always agree on the iteration count.
 *
 *   latency    one-way time = half the round trip of a ping-pong, 8 B and 1 KiB
 *   bandwidth  ping-pong, message size / one-way time, 64 KiB, 1 MiB, 16 MiB (MB = 10^6 bytes)
 *   rate       64-byte messages per second from rank 1 to rank 0: MPI_Isend x window, then a 1-byte ack
 *
 * Each figure: warm up by doubling the iteration count until one run takes long enough to time (the first,
 * connection-opening run is never used), scale the count to the target time, run --reps times, print the median
 * as `RESULT mpi <test> <size_bytes> <value> <unit>`.
 *
 * Usage: mpirun -np 2 ... mpi_pingpong [--reps N] [--test latency|bandwidth|rate|all] [--quick]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CMD_STOP = 0, CMD_PINGPONG = 1, CMD_RATE = 2 };
enum { TAG_PING = 1, TAG_PONG = 2, TAG_DATA = 3, TAG_ACK = 4 };
enum { RATE_WINDOW = 64, RATE_MSG_BYTES = 64, MAX_REPS = 101 };
#define MAX_MSG_BYTES (16L << 20)
#define MAX_ITERS (1L << 26)

struct options {
  int reps;
  int latency, bandwidth, rate;
  double calib_s;  /* a warm-up run must take this long before its time is trusted for scaling */
  double target_s; /* each timed run takes about this long */
};

static char* g_buf; /* one buffer for every message: the figures are about the transport, not the cache */
static MPI_Request g_reqs[RATE_WINDOW];

static void usage_exit(const char* prog, int rank) {
  if (rank == 0) fprintf(stderr, "usage: %s [--reps N] [--test latency|bandwidth|rate|all] [--quick]\n", prog);
  MPI_Finalize();
  exit(2);
}

static int select_tests(struct options* o, const char* list) {
  o->latency = o->bandwidth = o->rate = 0;
  if (strcmp(list, "all") == 0)
    o->latency = o->bandwidth = o->rate = 1;
  else if (strcmp(list, "latency") == 0)
    o->latency = 1;
  else if (strcmp(list, "bandwidth") == 0)
    o->bandwidth = 1;
  else if (strcmp(list, "rate") == 0)
    o->rate = 1;
  else
    return -1;
  return 0;
}

static struct options parse_options(int argc, char** argv, int rank) {
  struct options o = {5, 1, 1, 1, 0.05, 0.3};
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      o.reps = atoi(argv[++i]);
      if (o.reps < 1 || o.reps > MAX_REPS) usage_exit(argv[0], rank);
    } else if (strcmp(argv[i], "--test") == 0 && i + 1 < argc) {
      if (select_tests(&o, argv[++i]) != 0) usage_exit(argv[0], rank);
    } else if (strcmp(argv[i], "--quick") == 0) {
      o.calib_s = 0.005;
      o.target_s = 0.02;
    } else {
      usage_exit(argv[0], rank);
    }
  }
  return o;
}

/* --- the timed loops; rank 0 returns its elapsed seconds, rank 1 returns 0 ---------------------------------
 */

static double run_pingpong(int rank, long size, long iters) {
  double t0 = MPI_Wtime();
  for (long i = 0; i < iters; ++i) {
    if (rank == 0) {
      MPI_Send(g_buf, (int)size, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD);
      MPI_Recv(g_buf, (int)size, MPI_BYTE, 1, TAG_PONG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(g_buf, (int)size, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(g_buf, (int)size, MPI_BYTE, 0, TAG_PONG, MPI_COMM_WORLD);
    }
  }
  return rank == 0 ? MPI_Wtime() - t0 : 0.0;
}

/* Rank 1 sends `window` messages back to back, rank 0 has them all pre-posted; the ack closes the window so
 * rank 1 cannot run arbitrarily far ahead (as OSU's osu_mbw_mr does). Distinct slices of g_buf per message. */
static double run_rate(int rank, long iters) {
  double t0 = MPI_Wtime();
  for (long i = 0; i < iters; ++i) {
    for (int w = 0; w < RATE_WINDOW; ++w) {
      char* slot = g_buf + (long)w * RATE_MSG_BYTES;
      if (rank == 0)
        MPI_Irecv(slot, RATE_MSG_BYTES, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD, &g_reqs[w]);
      else
        MPI_Isend(slot, RATE_MSG_BYTES, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, &g_reqs[w]);
    }
    MPI_Waitall(RATE_WINDOW, g_reqs, MPI_STATUSES_IGNORE);
    if (rank == 0)
      MPI_Send(g_buf + MAX_MSG_BYTES - 1, 1, MPI_BYTE, 1, TAG_ACK, MPI_COMM_WORLD);
    else
      MPI_Recv(g_buf + MAX_MSG_BYTES - 1, 1, MPI_BYTE, 0, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  return rank == 0 ? MPI_Wtime() - t0 : 0.0;
}

static double run_command(int rank, const long cmd[3]) {
  return cmd[0] == CMD_RATE ? run_rate(rank, cmd[2]) : run_pingpong(rank, cmd[1], cmd[2]);
}

/* Rank 1's whole life: follow rank 0's commands until CMD_STOP. */
static void follow(void) {
  for (;;) {
    long cmd[3];
    MPI_Bcast(cmd, 3, MPI_LONG, 0, MPI_COMM_WORLD);
    if (cmd[0] == CMD_STOP) return;
    run_command(1, cmd);
  }
}

static double drive(long kind, long size, long iters) {
  long cmd[3] = {kind, size, iters};
  MPI_Bcast(cmd, 3, MPI_LONG, 0, MPI_COMM_WORLD);
  return run_command(0, cmd);
}

/* --- rank 0: calibration, repetition, median ------------------------------------------------------------ */

/* Doubles the iteration count until a run (not the first, which may open connections) lasts calib_s, then
 * scales it so a timed run lasts about target_s. Every run here doubles as warm-up. */
static long calibrate(const struct options* o, long kind, long size) {
  long iters = 1;
  for (int run = 0; run < 40; ++run) {
    double e = drive(kind, size, iters);
    if (run > 0 && e >= o->calib_s) {
      double scaled = (double)iters * o->target_s / e;
      return scaled < 1 ? 1 : scaled > MAX_ITERS ? MAX_ITERS : (long)scaled;
    }
    if (iters >= MAX_ITERS) break;
    iters *= 2;
  }
  return iters;
}

static int compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof v[0], compare_doubles);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Returns the median over o->reps runs of the per-iteration time in seconds (a round trip, or one window). */
static double median_iteration_s(const struct options* o, long kind, long size) {
  double per_iter[MAX_REPS];
  long iters = calibrate(o, kind, size);
  for (int r = 0; r < o->reps; ++r) per_iter[r] = drive(kind, size, iters) / (double)iters;
  return median(per_iter, o->reps);
}

static void measure_latency(const struct options* o) {
  static const long sizes[] = {8, 1024};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    double one_way_s = median_iteration_s(o, CMD_PINGPONG, sizes[i]) / 2;
    printf("RESULT mpi latency %ld %.2f us\n", sizes[i], one_way_s * 1e6);
    fflush(stdout);
  }
}

static void measure_bandwidth(const struct options* o) {
  static const long sizes[] = {64L << 10, 1L << 20, 16L << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    double one_way_s = median_iteration_s(o, CMD_PINGPONG, sizes[i]) / 2;
    printf("RESULT mpi bandwidth %ld %.1f MB/s\n", sizes[i], (double)sizes[i] / one_way_s / 1e6);
    fflush(stdout);
  }
}

static void measure_rate(const struct options* o) {
  double window_s = median_iteration_s(o, CMD_RATE, RATE_MSG_BYTES);
  printf("RESULT mpi rate %d %.0f msg/s\n", RATE_MSG_BYTES, RATE_WINDOW / window_s);
  fflush(stdout);
}

int main(int argc, char** argv) {
  int rank = 0, size = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  struct options o = parse_options(argc, argv, rank);
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "mpi_pingpong: needs exactly 2 ranks, got %d\n", size);
    MPI_Finalize();
    return 2;
  }
  g_buf = malloc(MAX_MSG_BYTES);
  if (!g_buf) MPI_Abort(MPI_COMM_WORLD, 1);
  memset(g_buf, 0x5a, MAX_MSG_BYTES); /* touch every page before timing */

  if (rank == 0) {
    if (o.latency) measure_latency(&o);
    if (o.bandwidth) measure_bandwidth(&o);
    if (o.rate) measure_rate(&o);
    drive(CMD_STOP, 0, 0);
  } else {
    follow();
  }
  free(g_buf);
  MPI_Finalize();
  return 0;
}
