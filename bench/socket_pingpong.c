/*
 * bench/socket_pingpong.c — the floor under bench/pingpong.cpp: a ping-pong over loopback TCP making only the system
 * calls a phoenix link makes for a message (a spinning epoll_wait that finds it, or with --spin-read non-blocking
 * reads repeated until one finds it, as phoenix's spinning receiver reads the link it expects a message on, and
 * epoll_wait again for the rest of a message one read did not complete, as phoenix reads large bodies; reads
 * of at most --read-max bytes until one comes back short; one writev of head and body), with no runtime around
 * them. Set beside phoenix and
 * Open MPI it shows how much of a figure is the kernel's and how much the runtime's (README.md, Benchmarks), and
 * its options isolate one effect at a time: the head in front of each body (phoenix writes 64 bytes: frame
 * header and data head), where the body sits in its page (--body-offset), the largest read.
 *
 * Usage: socket_pingpong [--head BYTES] [--body-offset BYTES] [--read-max BYTES] [--spin-read] [--reps N] [--quick]
 * Prints "RESULT socket latency 8 <us> us" (one way) and "RESULT socket bandwidth 1048576 <MB/s> MB/s", medians
 * of --reps runs. Exits 1 on any error; the child is killed and reaped by PID whatever happens.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MAX_REPS = 101, MAX_HEAD = 4096, RUN_TIMEOUT_S = 120 };

struct options {
  size_t head, body_offset, read_max;
  int reps, quick, spin_read;
};

struct link {
  int fd, ep;
  char head[MAX_HEAD];
};

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static pid_t echo_child = 0; /* in the parent: the echo process, killed on any failure */

static void die(const char* what) {
  fprintf(stderr, "socket_pingpong: FAILED: %s: %s\n", what, strerror(errno));
  if (echo_child > 0) {
    kill(echo_child, SIGKILL);
    waitpid(echo_child, NULL, 0);
  }
  exit(1);
}

/* Spins on epoll_wait(0) until the socket reports `events` (edge-triggered, as Asio registers it). */
static void await_events(const struct link* l, uint32_t events) {
  struct epoll_event out[4];
  for (;;) {
    int n = epoll_wait(l->ep, out, 4, 0);
    if (n < 0 && errno != EINTR) die("epoll_wait");
    for (int i = 0; i < n; ++i) {
      if (out[i].events & (events | EPOLLERR | EPOLLHUP)) return;
    }
  }
}

/* One writev of head and body; what the socket does not take at once goes after EPOLLOUT. */
static void send_message(struct link* l, size_t head, const char* body, size_t size) {
  size_t total = head + size, done = 0;
  while (done < total) {
    struct iovec iov[2];
    int n = 0;
    if (done < head) iov[n++] = (struct iovec){l->head + done, head - done};
    size_t body_done = done < head ? 0 : done - head;
    iov[n++] = (struct iovec){(char*)body + body_done, size - body_done};
    ssize_t r = writev(l->fd, iov, n);
    if (r > 0) {
      done += (size_t)r;
    } else if (r < 0 && errno == EAGAIN) {
      await_events(l, EPOLLOUT);
    } else {
      die("writev");
    }
  }
}

/* Reads the head and then the body as one stream (one recvmsg may fill the end of one and the start of the
 * other, as phoenix's frame decoder reads a frame), at most read_max bytes per call, waiting for readiness after a
 * short read: by epoll_wait, or with spin_read by reading again at once (the socket stays registered with epoll,
 * as phoenix's are) until a read leaves the message incomplete: then by epoll_wait for the rest, as phoenix
 * hands a large body back to its event loop (docs/overlay.md, "Direct reads"). */
static void receive_message(struct link* l, size_t head, char* body, size_t size, size_t read_max, int spin_read) {
  size_t total = head + size, done = 0;
  int spinning = spin_read;
  while (done < total) {
    struct iovec iov[2];
    size_t n = 0, want = 0;
    if (done < head) {
      iov[n++] = (struct iovec){l->head + done, head - done};
      want += head - done;
    }
    size_t body_done = done < head ? 0 : done - head;
    iov[n++] = (struct iovec){body + body_done, size - body_done};
    want += size - body_done;
    if (want > read_max) { /* trim the iovecs to read_max */
      size_t left = read_max;
      for (size_t i = 0; i < n; ++i) {
        if (iov[i].iov_len > left) iov[i].iov_len = left;
        left -= iov[i].iov_len;
      }
      want = read_max;
    }
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = n};
    ssize_t r = recvmsg(l->fd, &msg, 0);
    if (r > 0) {
      done += (size_t)r;
      if (done < total) spinning = 0;
      if ((size_t)r < want && done < total) await_events(l, EPOLLIN);
    } else if (r < 0 && errno == EAGAIN) {
      if (!spinning) await_events(l, EPOLLIN);
    } else {
      errno = r == 0 ? ECONNRESET : errno;
      die("recvmsg");
    }
  }
}

/* A body buffer `offset` bytes into a fresh page-aligned mapping (as phoenix's buffer pool places bodies). */
static char* body_buffer(size_t size, size_t offset) {
  size_t mapped = size + offset + 4096;
  void* p = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) die("mmap");
  memset(p, 0x5a, mapped);
  return (char*)p + offset;
}

static void setup_socket(struct link* l) {
  int one = 1;
  if (setsockopt(l->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) die("TCP_NODELAY");
  if (fcntl(l->fd, F_SETFL, O_NONBLOCK) != 0) die("O_NONBLOCK");
  l->ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET};
  if (l->ep < 0 || epoll_ctl(l->ep, EPOLL_CTL_ADD, l->fd, &ev) != 0) die("epoll");
}

/* The echo side: receives each message and sends it back from the same buffer, until the peer closes. */
static void echo(struct link* l, const struct options* o, size_t size, long count) {
  char* body = body_buffer(size, o->body_offset);
  for (long i = 0; i < count; ++i) {
    receive_message(l, o->head, body, size, o->read_max, o->spin_read);
    send_message(l, o->head, body, size);
  }
}

static double timed_run(struct link* l, const struct options* o, char* body, size_t size, long count) {
  double t0 = now_s();
  for (long i = 0; i < count; ++i) {
    send_message(l, o->head, body, size);
    receive_message(l, o->head, body, size, o->read_max, o->spin_read);
  }
  return (now_s() - t0) / (double)count / 2; /* one way */
}

static int compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Warm-up plus --reps timed runs of `count` round trips; the child echoes exactly as many. */
static double median_one_way(struct link* l, const struct options* o, size_t size, long count, long warmup) {
  char* body = body_buffer(size, o->body_offset);
  double runs[MAX_REPS];
  timed_run(l, o, body, size, warmup);
  for (int r = 0; r < o->reps; ++r) runs[r] = timed_run(l, o, body, size, count);
  qsort(runs, (size_t)o->reps, sizeof runs[0], compare_doubles);
  return runs[o->reps / 2];
}

static int parse_size(const char* text, size_t max, size_t* out) {
  char* end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno || *end || end == text || v > max) return -1;
  *out = (size_t)v;
  return 0;
}

static void usage(const char* prog) {
  fprintf(stderr,
          "usage: %s [--head BYTES] [--body-offset BYTES] [--read-max BYTES] [--spin-read] [--reps N] [--quick]\n",
          prog);
  exit(2);
}

int main(int argc, char** argv) {
  struct options o = {.head = 64, .body_offset = 0, .read_max = 64 * 1024, .reps = 5, .quick = 0, .spin_read = 0};
  for (int i = 1; i < argc; ++i) {
    size_t v;
    if (strcmp(argv[i], "--quick") == 0) {
      o.quick = 1;
    } else if (strcmp(argv[i], "--spin-read") == 0) {
      o.spin_read = 1;
    } else if (i + 1 < argc && strcmp(argv[i], "--head") == 0 && parse_size(argv[i + 1], MAX_HEAD, &v) == 0) {
      o.head = v, ++i;
    } else if (i + 1 < argc && strcmp(argv[i], "--body-offset") == 0 && parse_size(argv[i + 1], 4095, &v) == 0) {
      o.body_offset = v, ++i;
    } else if (i + 1 < argc && strcmp(argv[i], "--read-max") == 0 && parse_size(argv[i + 1], 1u << 30, &v) == 0 &&
               v > 0) {
      o.read_max = v, ++i;
    } else if (i + 1 < argc && strcmp(argv[i], "--reps") == 0 && parse_size(argv[i + 1], MAX_REPS, &v) == 0 &&
               v > 0) {
      o.reps = (int)v, ++i;
    } else {
      usage(argv[0]);
    }
  }
  const size_t latency_size = 8, bandwidth_size = 1u << 20;
  const long latency_count = o.quick ? 2000 : 100000, bandwidth_count = o.quick ? 50 : 2000;
  const long warmup = o.quick ? 10 : 200;

  int listener = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof addr;
  if (listener < 0 || bind(listener, (struct sockaddr*)&addr, sizeof addr) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, (struct sockaddr*)&addr, &len) != 0) {
    die("listen on 127.0.0.1");
  }
  pid_t child = fork();
  if (child < 0) die("fork");
  struct link l = {.fd = -1, .ep = -1};
  if (child == 0) {
    alarm(RUN_TIMEOUT_S); /* bounded even if the parent dies: SIGALRM ends the child */
    l.fd = socket(AF_INET, SOCK_STREAM, 0);
    if (l.fd < 0 || connect(l.fd, (struct sockaddr*)&addr, sizeof addr) != 0) die("connect");
    setup_socket(&l);
    echo(&l, &o, latency_size, warmup + (long)o.reps * latency_count);
    echo(&l, &o, bandwidth_size, warmup + (long)o.reps * bandwidth_count);
    return 0;
  }
  echo_child = child;
  alarm(RUN_TIMEOUT_S); /* a stuck run ends; the child's own alarm ends it too */
  l.fd = accept(listener, NULL, NULL);
  if (l.fd < 0) die("accept");
  setup_socket(&l);
  double latency = median_one_way(&l, &o, latency_size, latency_count, warmup);
  printf("RESULT socket latency %zu %.2f us\n", latency_size, latency * 1e6);
  fflush(stdout);
  double bandwidth = median_one_way(&l, &o, bandwidth_size, bandwidth_count, warmup);
  printf("RESULT socket bandwidth %zu %.1f MB/s\n", bandwidth_size, (double)bandwidth_size / bandwidth / 1e6);
  int status = 0;
  close(l.fd);
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "socket_pingpong: FAILED: the echo process did not exit cleanly\n");
    return 1;
  }
  return 0;
}
