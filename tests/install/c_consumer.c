/* Uses the installed C API from C, built with plain cc: initialize, assume, send, receive, finalize. */
#include <phoenix/phoenix.h>

#include <stdio.h>
#include <string.h>

int main(void) {
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
  return ph_finalize(NULL) == 0 ? 0 : 1;
}
