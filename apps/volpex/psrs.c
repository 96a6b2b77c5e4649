/* psrs — Parallel Sorting by Regular Sampling, the Volpex paper's communication-intensive test (VI-C), as a
 * Volpex process: run it as P processes, each as one or more replicas (VOLPEX_PROC_ID, VOLPEX_NUM_PROCS;
 * phoenix/volpex.h), beside volpex_server nodes. The dataspace is the medium of the all-to-all exchange.
 *
 * Key i is splitmix64 of (SEED, i), so each process generates only its share, N/P consecutive keys (the first
 * N mod P processes one more), and none holds all N. Each sorts its share, then (tags; who puts, who takes):
 *   samples/<p>        p puts P regular samples of its sorted share (none if it is empty); 0 gets them all
 *   pivots             0 puts the P-1 pivots picked at regular places of all samples; every process reads it
 *   part/<p>/<q>       p puts the count of its keys in q's range, (pivot q-1, pivot q]; q gets it
 *   part/<p>/<q>/<c>   p puts those keys in chunks of at most 1 MiB (the API's sizes are int); q gets them
 *   count/<p>          p puts the length of its run; every higher process reads it, for its global offset
 *   digest/<p>         p puts its run's count, first and last key, checksum and sortedness; 0 gets it
 * Each process merges its P sorted parts (its own stays local) into its run of the global order. The checksum
 * adds up a hash of (global position, key) over the run: the runs' sums add up to that of the whole sorted
 * array, and a key out of place changes it. Process 0 checks the runs and their boundaries and prints
 *   RESULT keys=<count> checksum=<hex> sorted=yes|no
 * Other processes print "DONE <id> keys=<length of their run>". --sequential generates all N keys, sorts them
 * with qsort and prints the RESULT line the processes must match.
 *
 * Replicas of a process compute the same: keys depend on (SEED, i) only, every later choice (samples, pivots,
 * partition bounds, merge order) is a function of the share and of objects got from the dataspace, and the
 * calls are issued in a fixed order.
 *
 * Usage: psrs N [SEED] | psrs --sequential N [SEED]
 */
#include <phoenix/volpex.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_KEYS ((size_t)1 << 17) /* 1 MiB of keys per put */
#define MAX_KEYS ((uint64_t)1 << 32)
#define GOLDEN 0x9e3779b97f4a7c15ull

typedef struct {
  uint64_t count, first, last, checksum, sorted;
} digest_t;

static uint64_t mix64(uint64_t z) { /* splitmix64's finalizer */
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The (i+1)th output of splitmix64 seeded with SEED: computable without the keys before it. */
static uint64_t key_at(uint64_t seed, uint64_t i) { return mix64(seed + (i + 1) * GOLDEN); }

/* A sum of these is order-sensitive, yet runs can be summed apart and added up. */
static uint64_t entry_hash(uint64_t position, uint64_t key) { return mix64(key ^ mix64(position)); }

static int compare_keys(const void *a, const void *b) {
  const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static void fail(const char *what, int code) {
  fprintf(stderr, "psrs: %s failed: %s\n", what, ph_strerror(code));
  exit(1);
}

static void *alloc_or_die(size_t size) {
  void *p = malloc(size ? size : 1);
  if (!p) fail("allocation", PH_EIO);
  return p;
}

static void put_object(const char *tag, const void *data, size_t size) {
  const int rc = volpex_put(tag, (int)strlen(tag), data, (int)size);
  if (rc < 0) fail("put", rc);
}

/* Gets (remove) or reads an object of at most `size` bytes; returns its size. */
static size_t take_object(const char *tag, void *data, size_t size, int remove) {
  const int rc = remove ? volpex_get(tag, (int)strlen(tag), data, (int)size)
                        : volpex_read(tag, (int)strlen(tag), data, (int)size);
  if (rc < 0) fail(remove ? "get" : "read", rc);
  if ((size_t)rc > size) {
    fprintf(stderr, "psrs: %s holds %d bytes, more than the %zu expected\n", tag, rc, size);
    exit(1);
  }
  return (size_t)rc;
}

/* As take_object, for an object whose size is known: anything else is a bug of ours. */
static void take_exact(const char *tag, void *data, size_t size, int remove) {
  const size_t got = take_object(tag, data, size, remove);
  if (got != size) {
    fprintf(stderr, "psrs: %s holds %zu bytes, not the %zu expected\n", tag, got, size);
    exit(1);
  }
}

static digest_t digest_run(const uint64_t *keys, size_t n, uint64_t offset) {
  digest_t d = {n, n ? keys[0] : 0, n ? keys[n - 1] : 0, 0, 1};
  for (size_t i = 0; i < n; ++i) {
    d.checksum += entry_hash(offset + i, keys[i]);
    if (i > 0 && keys[i - 1] > keys[i]) d.sorted = 0;
  }
  return d;
}

static void print_result(const digest_t *d) {
  printf("RESULT keys=%" PRIu64 " checksum=%016" PRIx64 " sorted=%s\n", d->count, d->checksum,
         d->sorted ? "yes" : "no");
}

static int run_sequential(uint64_t n, uint64_t seed) {
  uint64_t *keys = alloc_or_die(n * sizeof *keys);
  for (uint64_t i = 0; i < n; ++i) keys[i] = key_at(seed, i);
  qsort(keys, n, sizeof *keys, compare_keys);
  const digest_t d = digest_run(keys, n, 0);
  print_result(&d);
  free(keys);
  return 0;
}

/* Process 0: P-1 pivots at regular places of all processes' samples (PSRS's second phase). */
static void choose_pivots(int procs) {
  uint64_t *samples = alloc_or_die((size_t)procs * procs * sizeof *samples);
  size_t m = 0;
  char tag[64];
  for (int q = 0; q < procs; ++q) {
    snprintf(tag, sizeof tag, "samples/%d", q);
    m += take_object(tag, samples + m, (size_t)procs * sizeof *samples, 1) / sizeof *samples;
  }
  qsort(samples, m, sizeof *samples, compare_keys);
  uint64_t *pivots = alloc_or_die((size_t)procs * sizeof *pivots);
  for (int j = 1; j < procs; ++j) pivots[j - 1] = samples[(size_t)j * m / (size_t)procs];
  put_object("pivots", pivots, (size_t)(procs - 1) * sizeof *pivots);
  free(pivots);
  free(samples);
}

/* The first index whose key is above `pivot`: keys equal to a pivot all go to the same process. */
static size_t upper_bound(const uint64_t *keys, size_t n, uint64_t pivot) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (keys[mid] <= pivot) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static void send_part(int from, int to, const uint64_t *keys, size_t count) {
  char tag[64];
  const uint64_t header = count;
  snprintf(tag, sizeof tag, "part/%d/%d", from, to);
  put_object(tag, &header, sizeof header);
  for (size_t c = 0, k = 0; k < count; ++c, k += CHUNK_KEYS) {
    const size_t len = count - k < CHUNK_KEYS ? count - k : CHUNK_KEYS;
    snprintf(tag, sizeof tag, "part/%d/%d/%zu", from, to, c);
    put_object(tag, keys + k, len * sizeof *keys);
  }
}

static uint64_t *receive_part(int from, int to, size_t *count) {
  char tag[64];
  uint64_t header;
  snprintf(tag, sizeof tag, "part/%d/%d", from, to);
  take_exact(tag, &header, sizeof header, 1);
  uint64_t *keys = alloc_or_die(header * sizeof *keys);
  for (size_t c = 0, k = 0; k < header; ++c, k += CHUNK_KEYS) {
    const size_t len = header - k < CHUNK_KEYS ? header - k : CHUNK_KEYS;
    snprintf(tag, sizeof tag, "part/%d/%d/%zu", from, to, c);
    take_exact(tag, keys + k, len * sizeof *keys, 1);
  }
  *count = header;
  return keys;
}

/* P-way merge by scanning the heads: P is small, and a tie goes to the lowest run, in every replica alike. */
static void merge_runs(uint64_t *const *runs, const size_t *lens, int k, uint64_t *out) {
  size_t *at = calloc((size_t)k, sizeof *at);
  if (!at) fail("allocation", PH_EIO);
  for (size_t o = 0;; ++o) {
    int best = -1;
    for (int r = 0; r < k; ++r)
      if (at[r] < lens[r] && (best < 0 || runs[r][at[r]] < runs[best][at[best]])) best = r;
    if (best < 0) break;
    out[o] = runs[best][at[best]++];
  }
  free(at);
}

/* Phases 3 and 4: partition the sorted share by the pivots, swap parts, merge what arrives. */
static uint64_t *exchange_and_merge(int id, int procs, uint64_t *share, size_t n, const uint64_t *pivots,
                                    size_t *run_len) {
  size_t *bounds = alloc_or_die((size_t)(procs + 1) * sizeof *bounds);
  bounds[0] = 0;
  bounds[procs] = n;
  for (int j = 1; j < procs; ++j) bounds[j] = upper_bound(share, n, pivots[j - 1]);
  for (int k = 1; k < procs; ++k) { /* starting at the next process spreads the early puts */
    const int q = (id + k) % procs;
    send_part(id, q, share + bounds[q], bounds[q + 1] - bounds[q]);
  }
  uint64_t **runs = alloc_or_die((size_t)procs * sizeof *runs);
  size_t *lens = alloc_or_die((size_t)procs * sizeof *lens);
  size_t total = 0;
  for (int q = 0; q < procs; ++q) {
    if (q == id) runs[q] = share + bounds[id], lens[q] = bounds[id + 1] - bounds[id];
    else runs[q] = receive_part(q, id, &lens[q]);
    total += lens[q];
  }
  uint64_t *run = alloc_or_die(total * sizeof *run);
  merge_runs(runs, lens, procs, run);
  for (int q = 0; q < procs; ++q)
    if (q != id) free(runs[q]);
  free(runs);
  free(lens);
  free(bounds);
  *run_len = total;
  return run;
}

/* Where this run starts in the global order: the lengths of the runs of lower processes. */
static uint64_t global_offset(int id, uint64_t run_len) {
  char tag[64];
  snprintf(tag, sizeof tag, "count/%d", id);
  put_object(tag, &run_len, sizeof run_len);
  uint64_t offset = 0;
  for (int q = 0; q < id; ++q) {
    uint64_t len;
    snprintf(tag, sizeof tag, "count/%d", q);
    take_exact(tag, &len, sizeof len, 0);
    offset += len;
  }
  return offset;
}

/* Process 0: each run sorted, each run's last key at most the next non-empty run's first, no key lost. */
static void gather_digests(int procs, uint64_t n) {
  digest_t total = {0, 0, 0, 0, 1};
  int seen = 0;
  uint64_t last = 0;
  char tag[64];
  for (int q = 0; q < procs; ++q) {
    digest_t d;
    snprintf(tag, sizeof tag, "digest/%d", q);
    take_exact(tag, &d, sizeof d, 1);
    total.count += d.count;
    total.checksum += d.checksum;
    if (!d.sorted || (seen && d.count && last > d.first)) total.sorted = 0;
    if (d.count) seen = 1, last = d.last;
  }
  if (total.count != n) total.sorted = 0;
  print_result(&total);
}

/* Phase 1's output: P keys at regular places of the sorted share (none when it is empty). */
static void put_samples(int id, int procs, const uint64_t *share, size_t len) {
  char tag[64];
  uint64_t *samples = alloc_or_die((size_t)procs * sizeof *samples);
  for (int k = 0; k < procs; ++k) samples[k] = len ? share[(size_t)k * len / (size_t)procs] : 0;
  snprintf(tag, sizeof tag, "samples/%d", id);
  put_object(tag, samples, len ? (size_t)procs * sizeof *samples : 0);
  free(samples);
}

static int run_process(uint64_t n, uint64_t seed, int argc, char **argv) {
  int rc = volpex_init(argc, argv);
  if (rc < 0) fail("volpex_init", rc);
  const int id = volpex_getProcId(), procs = volpex_getNumProc();
  const uint64_t p = (uint64_t)procs, q = (uint64_t)id, extra = n % p; /* the first `extra` take one more */
  const uint64_t lo = n / p * q + (q < extra ? q : extra);
  const size_t len = (size_t)(n / p + (q < extra ? 1 : 0));
  uint64_t *share = alloc_or_die(len * sizeof *share);
  for (size_t i = 0; i < len; ++i) share[i] = key_at(seed, lo + i);
  qsort(share, len, sizeof *share, compare_keys);

  put_samples(id, procs, share, len);
  if (id == 0) choose_pivots(procs);
  uint64_t *pivots = alloc_or_die((size_t)(procs - 1) * sizeof *pivots);
  take_exact("pivots", pivots, (size_t)(procs - 1) * sizeof *pivots, 0);
  size_t run_len;
  uint64_t *run = exchange_and_merge(id, procs, share, len, pivots, &run_len);
  free(share);
  free(pivots);

  const digest_t d = digest_run(run, run_len, global_offset(id, run_len));
  free(run);
  char tag[64];
  snprintf(tag, sizeof tag, "digest/%d", id);
  put_object(tag, &d, sizeof d);
  if (id == 0) gather_digests(procs, n);
  else printf("DONE %d keys=%zu\n", id, run_len);
  fflush(stdout);
  volpex_finalize();
  return 0;
}

/* A whole decimal number, nothing before or after it. */
static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  if (*s < '0' || *s > '9') return 0;
  *out = strtoull(s, &end, 10);
  return *end == '\0';
}

int main(int argc, char **argv) {
  const int sequential = argc > 1 && strcmp(argv[1], "--sequential") == 0;
  const int first = sequential ? 2 : 1;
  uint64_t n = 0, seed = 1;
  if (argc <= first || argc > first + 2 || !parse_u64(argv[first], &n) ||
      (argc > first + 1 && !parse_u64(argv[first + 1], &seed))) {
    fprintf(stderr, "usage: psrs N [SEED] | psrs --sequential N [SEED]\n");
    return 2;
  }
  if (n < 1 || n > MAX_KEYS) {
    fprintf(stderr, "psrs: N must be 1 .. 2^32\n");
    return 2;
  }
  return sequential ? run_sequential(n, seed) : run_process(n, seed, argc, argv);
}
