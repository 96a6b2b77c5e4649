/* Uses the installed C API from C, built with plain cc: initialize, assume, send, receive, finalize; then
 * migration between two processes: a child joins (taking half the parent's interval with its state) and
 * leaves again (handing it back). */
#define _POSIX_C_SOURCE 200809L
#include <phoenix/phoenix.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int unpacked = 0;

/* The state of an interval is the text "state of [lo, hi)". */
static int pack(ph_vps_t s, void **data, size_t *len, void *ctx) {
  (void)ctx;
  char *text = malloc(64);
  if (!text) return 1;
  *len = (size_t)snprintf(text, 64, "state of [%llu, %llu)", (unsigned long long)s.lo, (unsigned long long)s.hi) + 1;
  *data = text;
  return 0;
}

static int unpack(ph_vps_t s, const void *data, size_t len, void *ctx) {
  char expected[64];
  (void)ctx;
  snprintf(expected, sizeof expected, "state of [%llu, %llu)", (unsigned long long)s.lo, (unsigned long long)s.hi);
  if (len != strlen(expected) + 1 || memcmp(data, expected, len) != 0) return 1;
  ++unpacked;
  return 0;
}

static int basics(void) {
  int rc = ph_initialize("tcp://127.0.0.1:0", NULL);
  if (rc != 0) {
    printf("ph_initialize: %s\n", ph_strerror(rc));
    return 1;
  }
  ph_vps_t s = {0, 100};
  if (ph_assume(s) != 0) return 1;
  if (ph_send(0, 1, "x", 0) != 0) return 1;
  const char text[] = "from C";
  if (ph_send(42, 9, text, sizeof text) != 0) return 1;
  ph_msg_t *m = ph_recv_timeout(9, 5000);
  if (!m || ph_msg_size(m) != sizeof text || memcmp(ph_msg_data(m), text, sizeof text) != 0 || ph_msg_dest(m) != 42)
    return 1;
  printf("c_consumer: received '%s' at vnode %llu on %s (L = %llu)\n", (const char *)ph_msg_data(m),
         (unsigned long long)ph_msg_dest(m), ph_local_port(), (unsigned long long)ph_space_size());
  ph_msg_free(m);
  ph_msg_t *empty = ph_recv_timeout(1, 5000);
  if (!empty || ph_msg_size(empty) != 0) return 1;
  ph_msg_free(empty);
  if (ph_send(1, -5, text, 1) != PH_EINVAL) return 1;
  if (ph_set_state_handlers(NULL, unpack, NULL) != PH_EINVAL) return 1;
  return ph_finalize(NULL) == 0 ? 0 : 1;
}

/* The child: join through the parent's port, then leave. */
static int joiner(int port_fd) {
  char port[128] = {0};
  if (read(port_fd, port, sizeof port - 1) <= 0) return 1;
  if (ph_initialize("tcp://127.0.0.1:0", NULL) != 0 || ph_add_port(port) != 0) return 1;
  if (ph_set_state_handlers(pack, unpack, NULL) != 0) return 1;
  int rc = ph_join(20000);
  ph_vps_t got[2];
  if (rc != 0 || ph_assumed(got, 2) != 1 || got[0].lo != 50 || got[0].hi != 100 || unpacked != 1) {
    printf("c_consumer: join: %s\n", ph_strerror(rc));
    return 1;
  }
  printf("c_consumer: joined with [%llu, %llu) and its state\n", (unsigned long long)got[0].lo,
         (unsigned long long)got[0].hi);
  rc = ph_leave(20000);
  if (rc != 0 || ph_assumed(got, 2) != 0) {
    printf("c_consumer: leave: %s\n", ph_strerror(rc));
    return 1;
  }
  return ph_finalize(NULL) == 0 ? 0 : 1;
}

static int migration(void) {
  /* ph_join asks the owner of a random virtual node: with L = 100 the parent's [0, 100) covers them all. */
  setenv("PHOENIX_SPACE_SIZE", "100", 1);
  int fds[2];
  if (pipe(fds) != 0) return 1;
  fflush(stdout); /* the child must not print what is still buffered */
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    close(fds[1]);
    const int rc = joiner(fds[0]);
    fflush(stdout);
    _exit(rc);
  }
  close(fds[0]);
  int ok = ph_initialize("tcp://127.0.0.1:0", NULL) == 0 && ph_set_state_handlers(pack, unpack, NULL) == 0 &&
           ph_assume((ph_vps_t){0, 100}) == 0;
  const char *port = ok ? ph_local_port() : "";
  ok = ok && write(fds[1], port, strlen(port)) == (ssize_t)strlen(port);
  close(fds[1]);
  /* Serve the child's join and leave: pack and unpack run inside ph_poll. At most 60 s. */
  int status = 0;
  pid_t done = 0;
  for (int i = 0; ok && i < 60000 && (done = waitpid(child, &status, WNOHANG)) == 0; ++i) {
    ph_poll();
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  if (done != child) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    return 1;
  }
  ph_vps_t mine[2];
  const int n = ph_assumed(mine, 2);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || n != 1 || mine[0].lo != 0 || mine[0].hi != 100 || unpacked != 1)
    return 1;
  if (ph_orphaned(NULL, 0) != 0) return 1; /* the child left: nothing it held is orphaned */
  printf("c_consumer: the child joined and left; [0, 100) and its state are back\n");
  return ph_finalize(NULL) == 0 ? 0 : 1;
}

int main(void) { return basics() || migration(); }
