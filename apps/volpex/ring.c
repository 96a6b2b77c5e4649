/* ring — a 1-D stencil over a ring of processes with replicated point-to-point messages (phoenix/volpex.h,
 * VolpexMPI's model): run it as P processes, each as one or more replicas.
 *
 * The grid of P x CELLS integer cells is cut into P contiguous parts. Each round every process sends its first
 * cell to its left neighbour (tag 0) and its last to its right one (tag 1), receives the halo cells from both,
 * and updates u'[i] = (u[i-1] + 2 u[i] + u[i+1]) / 4 + (heat at the middle cell of the grid); the grid's ends
 * are held at 0. Integers, so every replica computes bit for bit the same. Every 10 rounds each process sends
 * the sum of its cells to process 0 (tag 2), which takes them with VOLPEX_ANY_SOURCE: the order it takes them
 * in depends on timing, and the runtime makes it the same in every replica of process 0; it folds that order
 * into one digest, printed as "ORDER <hex>" (identical across the replicas of process 0) and adds the sums into
 * the result (order-independent). At the end each process sends an FNV-1a hash of its cells (tag 3) and process
 * 0 prints
 *   RESULT cells=<P*CELLS> rounds=<R> checksum=<hex>
 * which --sequential P CELLS ROUNDS computes on one grid without the runtime.
 *
 * Usage: ring CELLS ROUNDS | ring --sequential P CELLS ROUNDS
 */
#include <phoenix/volpex.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { tag_left = 0, tag_right = 1, tag_sum = 2, tag_hash = 3, sum_every = 10 };

static const uint64_t heat = 1000000;

static uint64_t fnv(const int64_t *cells, uint64_t n) {
  uint64_t h = 1469598103934665603ull;
  const unsigned char *b = (const unsigned char *)cells;
  for (uint64_t i = 0; i < n * sizeof *cells; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static uint64_t fold(uint64_t acc, uint64_t v) { return (acc ^ v) * 1099511628211ull + 0x9e3779b97f4a7c15ull; }

/* u holds n cells with a halo on each side (u[0], u[n + 1]); global index of u[1] is first, of `n_all` in all. */
static void step(int64_t *u, int64_t *next, uint64_t n, uint64_t first, uint64_t n_all) {
  for (uint64_t i = 1; i <= n; ++i) {
    const uint64_t g = first + i - 1;
    int64_t v = (u[i - 1] + 2 * u[i] + u[i + 1]) / 4;
    if (g == n_all / 2) v += (int64_t)heat;
    if (g == 0 || g == n_all - 1) v = 0;
    next[i] = v;
  }
  memcpy(u + 1, next + 1, n * sizeof *u);
}

static void init(int64_t *u, uint64_t n, uint64_t first) {
  for (uint64_t i = 1; i <= n; ++i) u[i] = (int64_t)(((first + i - 1) * 7919) % 1000);
}

static int64_t sum(const int64_t *u, uint64_t n) {
  int64_t s = 0;
  for (uint64_t i = 1; i <= n; ++i) s += u[i];
  return s;
}

static void fail(const char *what, int code) {
  fprintf(stderr, "ring: %s failed: %s\n", what, ph_strerror(code));
  exit(1);
}

static int sequential(int procs, uint64_t cells, uint64_t rounds) {
  const uint64_t n_all = (uint64_t)procs * cells;
  int64_t *u = calloc(n_all + 2, sizeof *u), *next = calloc(n_all + 2, sizeof *u);
  if (!u || !next) return 1;
  init(u, n_all, 0);
  uint64_t checksum = 0;
  for (uint64_t r = 1; r <= rounds; ++r) {
    step(u, next, n_all, 0, n_all);
    if (r % sum_every == 0) checksum = fold(checksum, (uint64_t)sum(u, n_all));
  }
  for (int q = 0; q < procs; ++q) checksum = fold(checksum, fnv(u + 1 + (uint64_t)q * cells, cells));
  printf("RESULT cells=%" PRIu64 " rounds=%" PRIu64 " checksum=%016" PRIx64 "\n", n_all, rounds, checksum);
  free(u);
  free(next);
  return 0;
}

static void exchange_halos(int64_t *u, uint64_t n, int id, int procs) {
  int rc;
  const int left = (id + procs - 1) % procs, right = (id + 1) % procs;
  if ((rc = volpex_send(left, tag_left, &u[1], sizeof *u)) < 0) fail("send", rc);
  if ((rc = volpex_send(right, tag_right, &u[n], sizeof *u)) < 0) fail("send", rc);
  if ((rc = volpex_recv(right, tag_left, &u[n + 1], sizeof *u, NULL, NULL)) < 0) fail("recv", rc);
  if ((rc = volpex_recv(left, tag_right, &u[0], sizeof *u, NULL, NULL)) < 0) fail("recv", rc);
}

int main(int argc, char **argv) {
  if (argc >= 5 && strcmp(argv[1], "--sequential") == 0)
    return sequential(atoi(argv[2]), strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
  if (argc < 3) {
    fprintf(stderr, "usage: ring CELLS ROUNDS | ring --sequential P CELLS ROUNDS\n");
    return 2;
  }
  const uint64_t cells = strtoull(argv[1], NULL, 10), rounds = strtoull(argv[2], NULL, 10);
  if (cells < 1 || cells > (1u << 24)) {
    fprintf(stderr, "ring: CELLS must be 1 .. 2^24\n");
    return 2;
  }
  int rc = volpex_init(argc, argv);
  if (rc < 0) fail("volpex_init", rc);
  const int id = volpex_getProcId(), procs = volpex_getNumProc();
  const uint64_t n_all = (uint64_t)procs * cells, first = (uint64_t)id * cells;
  int64_t *u = calloc(cells + 2, sizeof *u), *next = calloc(cells + 2, sizeof *u);
  if (!u || !next) fail("allocation", PH_EIO);
  init(u, cells, first);
  uint64_t checksum = 0, order = 0;
  for (uint64_t r = 1; r <= rounds; ++r) {
    exchange_halos(u, cells, id, procs);
    step(u, next, cells, first, n_all);
    if (r % sum_every != 0) continue;
    int64_t mine = sum(u, cells);
    if (id != 0) {
      if ((rc = volpex_send(0, tag_sum, &mine, sizeof mine)) < 0) fail("send", rc);
      continue;
    }
    for (int k = 1; k < procs; ++k) {
      int64_t s;
      int from = -1;
      if ((rc = volpex_recv(VOLPEX_ANY_SOURCE, tag_sum, &s, sizeof s, &from, NULL)) < 0) fail("recv", rc);
      order = fold(order, (uint64_t)from);
      mine += s;
    }
    checksum = fold(checksum, (uint64_t)mine);
  }
  const uint64_t hash = fnv(u + 1, cells);
  if (id != 0) {
    if ((rc = volpex_send(0, tag_hash, &hash, sizeof hash)) < 0) fail("send", rc);
    printf("DONE %d\n", id);
  } else {
    checksum = fold(checksum, hash);
    for (int q = 1; q < procs; ++q) {
      uint64_t h;
      if ((rc = volpex_recv(q, tag_hash, &h, sizeof h, NULL, NULL)) < 0) fail("recv", rc);
      checksum = fold(checksum, h);
    }
    printf("RESULT cells=%" PRIu64 " rounds=%" PRIu64 " checksum=%016" PRIx64 "\n", n_all, rounds, checksum);
    printf("ORDER %016" PRIx64 "\n", order);
  }
  fflush(stdout);
  free(u);
  free(next);
  volpex_finalize();
  return 0;
}
