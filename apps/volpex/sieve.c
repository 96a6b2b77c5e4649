/* sieve — the Sieve of Eratosthenes of the Volpex paper (VI-B), as a Volpex process: run it as P processes,
 * each as one or more replicas (VOLPEX_PROC_ID, VOLPEX_NUM_PROCS; phoenix/volpex.h), beside volpex_server nodes.
 *
 * Process 0 finds the base primes up to sqrt(N) and broadcasts them in blocks of B (a put of "base/k", read by
 * every process; an empty block ends them). Each process sieves its share of [2, N] with them and puts its
 * count and a checksum; process 0 gets them all and prints one line, the same in each of its replicas:
 *   RESULT primes=<count> checksum=<hex>      (count and sum of the primes up to N)
 * Other processes print "DONE <id> primes=<count of their share>". --sequential prints the RESULT line of a
 * plain sieve, without the dataspace, for comparison.
 *
 * Usage: sieve N [BLOCK] | sieve --sequential N
 */
#include <phoenix/volpex.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  uint64_t count, sum;
} tally_t;

static uint64_t isqrt(uint64_t n) {
  uint64_t r = (uint64_t)sqrt((double)n);
  while (r * r > n) --r;
  while ((r + 1) * (r + 1) <= n) ++r;
  return r;
}

/* Plain sieve of [2, n]: the base primes when `primes` is non-null, and the tally. */
static tally_t small_sieve(uint64_t n, uint64_t **primes, size_t *nprimes) {
  tally_t t = {0, 0};
  char *composite = calloc(n + 1, 1);
  if (!composite) {
    fprintf(stderr, "sieve: out of memory\n");
    exit(1);
  }
  if (primes) *primes = malloc(sizeof(uint64_t) * (n / 2 + 2));
  for (uint64_t i = 2; i <= n; ++i) {
    if (composite[i]) continue;
    ++t.count;
    t.sum += i;
    if (primes) (*primes)[(*nprimes)++] = i;
    for (uint64_t m = i * i; m <= n; m += i) composite[m] = 1;
  }
  free(composite);
  return t;
}

/* Sieve [lo, hi) with the base primes read so far. */
static void strike(char *composite, uint64_t lo, uint64_t hi, const uint64_t *base, size_t n) {
  for (size_t k = 0; k < n; ++k) {
    const uint64_t p = base[k];
    uint64_t m = p * p > lo ? p * p : (lo + p - 1) / p * p;
    for (; m < hi; m += p) composite[m - lo] = 1;
  }
}

static void fail(const char *what, int code) {
  fprintf(stderr, "sieve: %s failed: %s\n", what, ph_strerror(code));
  exit(1);
}

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "--sequential") == 0) {
    const uint64_t n = strtoull(argv[2], NULL, 10);
    const tally_t t = small_sieve(n, NULL, NULL);
    printf("RESULT primes=%" PRIu64 " checksum=%016" PRIx64 "\n", t.count, t.sum);
    return 0;
  }
  if (argc < 2) {
    fprintf(stderr, "usage: sieve N [BLOCK] | sieve --sequential N\n");
    return 2;
  }
  const uint64_t n = strtoull(argv[1], NULL, 10);
  const uint64_t block = argc > 2 ? strtoull(argv[2], NULL, 10) : 10;
  if (n < 4 || block == 0 || block > 1 << 20) {
    fprintf(stderr, "sieve: N must be at least 4 and BLOCK 1 .. 2^20\n");
    return 2;
  }
  int rc = volpex_init(argc, argv);
  if (rc < 0) fail("volpex_init", rc);
  const int id = volpex_getProcId(), procs = volpex_getNumProc();
  const uint64_t root = isqrt(n);
  char tag[64];

  if (id == 0) { /* the base primes, broadcast in blocks */
    uint64_t *base = NULL;
    size_t nbase = 0;
    small_sieve(root, &base, &nbase);
    for (size_t k = 0, b = 0;; ++b) {
      const size_t len = nbase - k < block ? nbase - k : block;
      snprintf(tag, sizeof tag, "base/%zu", b);
      if ((rc = volpex_put(tag, (int)strlen(tag), base + k, (int)(len * sizeof(uint64_t)))) < 0) fail("put", rc);
      k += len;
      if (len == 0) break;
    }
    free(base);
  }

  /* This process's share of [2, N + 1), and every base prime. */
  const uint64_t span = (n - 1 + (uint64_t)procs - 1) / (uint64_t)procs;
  const uint64_t lo = 2 + span * (uint64_t)id, hi = lo + span > n + 1 ? n + 1 : lo + span;
  char *composite = calloc(hi > lo ? hi - lo : 1, 1);
  uint64_t *buf = malloc(sizeof(uint64_t) * block);
  if (!composite || !buf) fail("allocation", PH_EIO);
  for (size_t b = 0;; ++b) {
    snprintf(tag, sizeof tag, "base/%zu", b);
    rc = volpex_read(tag, (int)strlen(tag), buf, (int)(block * sizeof(uint64_t)));
    if (rc < 0) fail("read", rc);
    if (rc == 0) break;
    strike(composite, lo, hi, buf, (size_t)rc / sizeof(uint64_t));
  }
  tally_t mine = {0, 0};
  for (uint64_t i = lo; i < hi; ++i)
    if (!composite[i - lo]) ++mine.count, mine.sum += i;
  free(composite);
  free(buf);

  snprintf(tag, sizeof tag, "result/%d", id);
  if ((rc = volpex_put(tag, (int)strlen(tag), &mine, sizeof mine)) < 0) fail("put", rc);
  if (id == 0) {
    tally_t total = {0, 0};
    for (int q = 0; q < procs; ++q) {
      tally_t t;
      snprintf(tag, sizeof tag, "result/%d", q);
      if ((rc = volpex_get(tag, (int)strlen(tag), &t, sizeof t)) < 0) fail("get", rc);
      total.count += t.count;
      total.sum += t.sum;
    }
    printf("RESULT primes=%" PRIu64 " checksum=%016" PRIx64 "\n", total.count, total.sum);
  } else {
    printf("DONE %d primes=%" PRIu64 "\n", id, mine.count);
  }
  fflush(stdout);
  volpex_finalize();
  return 0;
}
