/* volpex_pingpong — round trips between two Volpex processes, each run as one or more replicas (phoenix/volpex.h):
 * replicated message passing (volpex_send/volpex_recv, "mp") or the dataspace (volpex_put/volpex_get, "ds").
 *
 *   mp: process 0 sends SIZE bytes to process 1, which sends them back; REPS times.
 *   ds: process 0 puts "a<i>", process 1 gets it and puts "b<i>", process 0 gets "b<i>"; REPS times.
 *
 * Every replica runs the same program; each replica of process 0 prints, after WARMUP untimed round trips,
 *   RESULT volpex-<mode> size=<SIZE> reps=<REPS> latency_us=<half a round trip> mb_per_s=<SIZE / latency>
 * and the bytes that came back are checked against what was sent (a replica that got other bytes prints
 * "volpex_pingpong: FAILED" and exits 1). Launched by bench/run_volpex.sh through phsh spawn --replicas.
 *
 * Usage: volpex_pingpong mp|ds SIZE REPS
 */
#include <phoenix/volpex.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { warmup = 10 };

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void fail(const char *what, int code) {
  fprintf(stderr, "volpex_pingpong: FAILED: %s: %d\n", what, code);
  exit(1);
}

static void fill(unsigned char *buf, int size, int round) {
  for (int i = 0; i < size; ++i) buf[i] = (unsigned char)(i * 31 + round);
}

static int same(const unsigned char *buf, int size, int round) {
  for (int i = 0; i < size; ++i)
    if (buf[i] != (unsigned char)(i * 31 + round)) return 0;
  return 1;
}

/* One round trip as process `me`; process 0 checks what came back. */
static void round_trip(int ds, int me, int round, unsigned char *out, unsigned char *in, int size) {
  char a[32], b[32];
  snprintf(a, sizeof a, "a%d", round);
  snprintf(b, sizeof b, "b%d", round);
  int rc;
  if (me == 0) {
    fill(out, size, round);
    rc = ds ? volpex_put(a, (int)strlen(a), out, size) : volpex_send(1, 0, out, size);
    if (rc < 0) fail(ds ? "volpex_put" : "volpex_send", rc);
    rc = ds ? volpex_get(b, (int)strlen(b), in, size) : volpex_recv(1, 0, in, size, NULL, NULL);
    if (rc != size) fail(ds ? "volpex_get" : "volpex_recv", rc);
    if (!same(in, size, round)) fail("the bytes that came back differ from those sent", round);
  } else {
    rc = ds ? volpex_get(a, (int)strlen(a), in, size) : volpex_recv(0, 0, in, size, NULL, NULL);
    if (rc != size) fail(ds ? "volpex_get" : "volpex_recv", rc);
    rc = ds ? volpex_put(b, (int)strlen(b), in, size) : volpex_send(0, 0, in, size);
    if (rc < 0) fail(ds ? "volpex_put" : "volpex_send", rc);
  }
}

int main(int argc, char **argv) {
  if (argc != 4 || (strcmp(argv[1], "mp") != 0 && strcmp(argv[1], "ds") != 0)) {
    fprintf(stderr, "usage: volpex_pingpong mp|ds SIZE REPS\n");
    return 2;
  }
  const int ds = strcmp(argv[1], "ds") == 0;
  const long size = strtol(argv[2], NULL, 10), reps = strtol(argv[3], NULL, 10);
  if (size < 1 || size > (64 << 20) || reps < 1 || reps > 10000000) {
    fprintf(stderr, "volpex_pingpong: SIZE 1..64 MiB, REPS 1..10^7\n");
    return 2;
  }
  int rc = volpex_init(argc, argv);
  if (rc < 0) fail("volpex_init", rc);
  if (volpex_getNumProc() != 2) fail("run it as two processes", volpex_getNumProc());
  const int me = volpex_getProcId();
  unsigned char *out = malloc((size_t)size), *in = malloc((size_t)size);
  if (!out || !in) fail("out of memory", 0);
  for (int r = 0; r < warmup; ++r) round_trip(ds, me, r, out, in, (int)size);
  const double t0 = now_s();
  for (int r = warmup; r < warmup + reps; ++r) round_trip(ds, me, r, out, in, (int)size);
  const double latency = (now_s() - t0) / (double)reps / 2;
  if (me == 0)
    printf("RESULT volpex-%s size=%ld reps=%ld latency_us=%.1f mb_per_s=%.1f\n", argv[1], size, reps, latency * 1e6,
           (double)size / latency / 1e6);
  fflush(stdout);
  free(out);
  free(in);
  volpex_finalize();
  return 0;
}
