/* remd — a toy Replica Exchange Molecular Dynamics, the Volpex paper's real-world application (VI-D), as a
 * Volpex process: run it as P processes, each as one or more replicas (VOLPEX_PROC_ID, VOLPEX_NUM_PROCS;
 * phoenix/volpex.h), beside volpex_server nodes.
 *
 * Two kinds of replica: REMD's *temperature* replicas (the paper's footnote 2) are the P processes, each one
 * copy of the simulated system at one temperature of a ladder; Volpex's *process* replicas are identical copies
 * of one process, kept consistent by the dataspace. Nothing here depends on how many process replicas run.
 *
 * Process p simulates one particle in the double well E(x) = H (x^2 - 1)^2 by Metropolis Monte Carlo, MOVES
 * moves per step, at the temperature of the rung t it holds, T_t = 300 + 10 t K; rung t starts at process t.
 * After step s the holders of rungs (k, k+1), k = s mod 2, k+2, ..., offer to swap temperatures: they swap when
 * D = (beta_k - beta_k+1) (E_k - E_k+1) >= 0 (the paper's "parameter <= 0"), else with probability exp(D).
 * The dataspace serves the paper's four uses (tags, and who puts and takes them):
 *   temp/<s>/<p>    p puts its rung in step s; every process reads all P of them: the process-temperature
 *                   mapping, and the synchronization at the end of the step. p gets its own back in step s+1,
 *                   when all have read it (each read all of step s before putting its entry of step s+1).
 *   energy/<s>/<p>  p puts its energy after step s; the holder of the partner rung gets it
 *   final/<p>       p puts its rung, x, and the swaps it made from the lower rung; process 0 gets them all
 * Both partners compute D from the same two energies in the same order and draw the same uniform number, from
 * a stream seeded by (SEED, s, k): they take the same decision, and the swap itself needs no message.
 * Process 0 prints RESULT steps=<S> swaps=<accepted exchanges> checksum=<hex>, the checksum folding each
 * process's final rung and the bits of its x; others print "DONE <id> ...". --sequential P simulates all P in
 * one process with the same streams and decisions, and must print the same RESULT line.
 *
 * Replicas of a process compute the same: every random number comes from a stream seeded by (SEED, id, step)
 * or (SEED, step, pair), energies travel as exact doubles, and the arithmetic is plain IEEE double in a fixed
 * order (exp from the C library: the replicas of one build on one libm agree bit for bit).
 *
 * Usage: remd STEPS [MOVES] [SEED] | remd --sequential P STEPS [MOVES] [SEED]
 */
#include <phoenix/volpex.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GOLDEN 0x9e3779b97f4a7c15ull
#define BOLTZMANN 0.0019872041 /* kcal/(mol K) */
#define WELL_DEPTH 2.0         /* kcal/mol: crossed often at the top of the ladder, seldom at the bottom */
#define MOVE_SIZE 0.3
#define MAX_PROCS 4096

typedef struct {
  uint64_t state;
} rng_t;

typedef struct {
  uint64_t rung, x_bits, swaps;
} final_t;

static uint64_t mix64(uint64_t z) { /* splitmix64's finalizer */
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Independent streams per (domain, a, b): domain 1 is a process's moves, 2 a pair's exchange. */
static rng_t stream(uint64_t seed, uint64_t domain, uint64_t a, uint64_t b) {
  rng_t r = {mix64(seed ^ mix64(domain ^ mix64(a ^ mix64(b))))};
  return r;
}

static double uniform(rng_t *r) { /* [0, 1), 53 bits: exact in every replica */
  r->state += GOLDEN;
  return (double)(mix64(r->state) >> 11) * 0x1.0p-53;
}

static double beta_of(uint64_t rung) { return 1.0 / (BOLTZMANN * (300.0 + 10.0 * (double)rung)); }

static double energy(double x) {
  const double w = x * x - 1.0;
  return WELL_DEPTH * w * w;
}

static double simulate(double x, uint64_t rung, uint64_t moves, rng_t *rng) {
  const double beta = beta_of(rung);
  double e = energy(x);
  for (uint64_t m = 0; m < moves; ++m) {
    const double y = x + MOVE_SIZE * (2.0 * uniform(rng) - 1.0);
    const double f = energy(y), u = uniform(rng);
    if (f <= e || u < exp(-beta * (f - e))) x = y, e = f;
  }
  return x;
}

/* The Metropolis criterion for swapping the temperatures of rungs lo and lo+1, holding energies e_lo, e_hi. */
static int exchange_accepted(uint64_t seed, uint64_t step, uint64_t lo, double e_lo, double e_hi) {
  const double d = (beta_of(lo) - beta_of(lo + 1)) * (e_lo - e_hi);
  rng_t r = stream(seed, 2, step, lo);
  const double u = uniform(&r);
  return d >= 0.0 || u < exp(d);
}

/* The rung paired with `rung` after step s, or -1: pairs (k, k+1) with k = s mod 2. */
static int64_t partner_of(uint64_t rung, uint64_t step, uint64_t procs) {
  if (rung % 2 == step % 2) return rung + 1 < procs ? (int64_t)rung + 1 : -1;
  return rung > 0 ? (int64_t)rung - 1 : -1;
}

static uint64_t fold(uint64_t h, uint64_t v) { return mix64(h ^ mix64(v + GOLDEN)); }

static uint64_t double_bits(double x) {
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  return b;
}

static double initial_x(uint64_t id) { return id % 2 ? 1.0 : -1.0; }

/* Process order, so the line does not depend on who finished first. */
static void print_result(uint64_t steps, const final_t *finals, uint64_t procs) {
  uint64_t swaps = 0, h = 0;
  for (uint64_t q = 0; q < procs; ++q) {
    swaps += finals[q].swaps;
    h = fold(fold(h, finals[q].rung), finals[q].x_bits);
  }
  printf("RESULT steps=%" PRIu64 " swaps=%" PRIu64 " checksum=%016" PRIx64 "\n", steps, swaps, h);
}

static int run_sequential(uint64_t procs, uint64_t steps, uint64_t moves, uint64_t seed) {
  double *x = malloc(procs * sizeof *x), *e = malloc(procs * sizeof *e);
  uint64_t *holder = malloc(procs * sizeof *holder); /* rung -> process */
  final_t *finals = calloc(procs, sizeof *finals);
  if (!x || !e || !holder || !finals) {
    fprintf(stderr, "remd: out of memory\n");
    return 1;
  }
  for (uint64_t q = 0; q < procs; ++q) x[q] = initial_x(q), holder[q] = finals[q].rung = q;
  for (uint64_t s = 0; s < steps; ++s) {
    for (uint64_t q = 0; q < procs; ++q) {
      rng_t r = stream(seed, 1, q, s);
      x[q] = simulate(x[q], finals[q].rung, moves, &r);
      e[q] = energy(x[q]);
    }
    for (uint64_t k = s % 2; k + 1 < procs; k += 2) {
      const uint64_t a = holder[k], b = holder[k + 1];
      if (!exchange_accepted(seed, s, k, e[a], e[b])) continue;
      holder[k] = b, holder[k + 1] = a;
      finals[a].rung = k + 1, finals[b].rung = k;
      ++finals[a].swaps;
    }
  }
  for (uint64_t q = 0; q < procs; ++q) finals[q].x_bits = double_bits(x[q]);
  print_result(steps, finals, procs);
  free(x);
  free(e);
  free(holder);
  free(finals);
  return 0;
}

static void fail(const char *what, int code) {
  fprintf(stderr, "remd: %s failed: %s\n", what, ph_strerror(code));
  exit(1);
}

static void put_object(const char *tag, const void *data, int size) {
  const int rc = volpex_put(tag, (int)strlen(tag), data, size);
  if (rc < 0) fail("put", rc);
}

/* Gets (remove) or reads an object of exactly `size` bytes: any other size is a bug of ours. */
static void take_object(const char *tag, void *data, int size, int remove) {
  const int rc = remove ? volpex_get(tag, (int)strlen(tag), data, size)
                        : volpex_read(tag, (int)strlen(tag), data, size);
  if (rc < 0) fail(remove ? "get" : "read", rc);
  if (rc != size) {
    fprintf(stderr, "remd: %s holds %d bytes, not the %d expected\n", tag, rc, size);
    exit(1);
  }
}

/* End of step s: publish our rung, wait for every other's; the process holding `rung` (the partner's). */
static uint64_t synchronize(uint64_t id, uint64_t procs, uint64_t step, uint64_t rung, uint64_t wanted) {
  char tag[64];
  uint64_t holder = id;
  snprintf(tag, sizeof tag, "temp/%" PRIu64 "/%" PRIu64, step, id);
  put_object(tag, &rung, sizeof rung);
  for (uint64_t q = 0; q < procs; ++q) {
    uint64_t r;
    if (q == id) continue;
    snprintf(tag, sizeof tag, "temp/%" PRIu64 "/%" PRIu64, step, q);
    take_object(tag, &r, sizeof r, 0);
    if (r == wanted) holder = q;
  }
  if (step > 0) { /* everyone read it before putting its step-s entry, which we just read */
    uint64_t old;
    snprintf(tag, sizeof tag, "temp/%" PRIu64 "/%" PRIu64, step - 1, id);
    take_object(tag, &old, sizeof old, 1);
  }
  return holder;
}

/* Our energy for the partner's; the partner's back. */
static double swap_energies(uint64_t id, uint64_t partner, uint64_t step, double e) {
  char tag[64];
  double theirs;
  snprintf(tag, sizeof tag, "energy/%" PRIu64 "/%" PRIu64, step, id);
  put_object(tag, &e, sizeof e);
  snprintf(tag, sizeof tag, "energy/%" PRIu64 "/%" PRIu64, step, partner);
  take_object(tag, &theirs, sizeof theirs, 1);
  return theirs;
}

static void gather_finals(uint64_t steps, uint64_t procs) {
  final_t *finals = malloc(procs * sizeof *finals);
  if (!finals) fail("allocation", PH_EIO);
  char tag[64];
  for (uint64_t q = 0; q < procs; ++q) {
    snprintf(tag, sizeof tag, "final/%" PRIu64, q);
    take_object(tag, &finals[q], sizeof finals[q], 1);
  }
  print_result(steps, finals, procs);
  free(finals);
}

static int run_process(uint64_t steps, uint64_t moves, uint64_t seed, int argc, char **argv) {
  const int rc = volpex_init(argc, argv);
  if (rc < 0) fail("volpex_init", rc);
  const uint64_t id = (uint64_t)volpex_getProcId(), procs = (uint64_t)volpex_getNumProc();
  final_t mine = {id, 0, 0};
  double x = initial_x(id);
  for (uint64_t s = 0; s < steps; ++s) {
    rng_t r = stream(seed, 1, id, s);
    x = simulate(x, mine.rung, moves, &r);
    const double e = energy(x);
    const int64_t other = partner_of(mine.rung, s, procs);
    const uint64_t partner = synchronize(id, procs, s, mine.rung, other < 0 ? procs : (uint64_t)other);
    if (other < 0) continue;
    const double theirs = swap_energies(id, partner, s, e);
    const int lower = mine.rung < (uint64_t)other;
    const uint64_t lo = lower ? mine.rung : (uint64_t)other;
    if (!exchange_accepted(seed, s, lo, lower ? e : theirs, lower ? theirs : e)) continue;
    mine.swaps += lower; /* counted once per exchange, by the lower rung's holder */
    mine.rung = (uint64_t)other;
  }
  mine.x_bits = double_bits(x);
  char tag[64];
  snprintf(tag, sizeof tag, "final/%" PRIu64, id);
  put_object(tag, &mine, sizeof mine);
  if (id == 0) gather_finals(steps, procs);
  else
    printf("DONE %" PRIu64 " temperature=%.0f energy=%.6f swaps=%" PRIu64 "\n", id,
           300.0 + 10.0 * (double)mine.rung, energy(x), mine.swaps);
  fflush(stdout);
  volpex_finalize();
  return 0;
}

/* A whole decimal number in [lo, hi], nothing before or after it. */
static int parse_count(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
  char *end;
  if (*s < '0' || *s > '9') return 0;
  *out = strtoull(s, &end, 10);
  return *end == '\0' && *out >= lo && *out <= hi;
}

int main(int argc, char **argv) {
  const int sequential = argc > 1 && strcmp(argv[1], "--sequential") == 0;
  const int first = sequential ? 3 : 1; /* STEPS */
  uint64_t procs = 1, steps = 0, moves = 100, seed = 1;
  if (argc <= first || argc > first + 3 || (sequential && !parse_count(argv[2], 1, MAX_PROCS, &procs)) ||
      !parse_count(argv[first], 1, 100000000, &steps) ||
      (argc > first + 1 && !parse_count(argv[first + 1], 0, 1000000000, &moves)) ||
      (argc > first + 2 && !parse_count(argv[first + 2], 0, UINT64_MAX, &seed))) {
    fprintf(stderr, "usage: remd STEPS [MOVES] [SEED] | remd --sequential P STEPS [MOVES] [SEED]\n"
                    "  P 1 .. %d, STEPS 1 .. 10^8, MOVES 0 .. 10^9\n",
            MAX_PROCS);
    return 2;
  }
  return sequential ? run_sequential(procs, steps, moves, seed) : run_process(steps, moves, seed, argc, argv);
}
