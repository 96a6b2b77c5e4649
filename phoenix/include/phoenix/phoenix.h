/* phoenix/phoenix.h — the C API of the phoenix runtime (Phoenix paper, section 3.3).
 *
 * Every call works on one process-wide default node. Any thread may call any function; ph_recv* block the
 * caller, everything else returns without waiting on the network. Every int-returning call returns 0 (or a
 * count) on success and a negative PH_E* code on failure; ph_strerror() gives its text.
 *
 * The C++ face of the same runtime, with several nodes per process, is phoenix/node.hpp.
 */
#ifndef PHOENIX_PHOENIX_H
#define PHOENIX_PHOENIX_H

#include <stddef.h>
#include <stdint.h>

#include <phoenix/visibility.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t ph_vp_t;                    /* virtual node in [0, L), or a resource name (>= L)   */
typedef struct { ph_vp_t lo, hi; } ph_vps_t; /* half-open interval [lo, hi)                         */
typedef struct ph_msg ph_msg_t;              /* opaque; the caller frees it with ph_msg_free        */

#define PH_ANY_TAG (-1)

/* Error codes: every int-returning call returns 0 (or a count) or one of these. */
#define PH_OK 0
#define PH_EINVAL (-1)       /* a bad argument                                                    */
#define PH_ESTATE (-2)       /* not allowed in this state (not initialized, initialized twice, ...) */
#define PH_EAGAIN (-3)       /* the bound on waiting messages is reached: try again later          */
#define PH_ETOOBIG (-4)      /* the message is larger than max_message_bytes                       */
#define PH_EADDR (-5)        /* an address that cannot be parsed or bound                          */
#define PH_EOVERLAP (-6)     /* ph_assume of a virtual node this node already assumes               */
#define PH_ENOTASSUMED (-7)  /* ph_release of a virtual node this node does not assume             */
#define PH_ECONFIG (-8)      /* the configuration (file or environment) is invalid                 */
#define PH_EIO (-9)          /* a file could not be read or written                                */
#define PH_ETIMEDOUT (-10)   /* a timed call ran out of time                                       */
#define PH_EKEY (-11)        /* the cluster key file is missing or unreadable; or no key, and a non-loopback address */
#define PH_ENOTSUP (-12)     /* not supported by this build (e.g. an address scheme)               */
#define PH_EBUSY (-13)       /* a migration attempt ended without moving anything (lock taken, ...)  */
#define PH_EUNREACH (-14)    /* no route to that node (a resource name nobody has)                 */
#define PH_ELOST (-15)       /* Volpex: a replica's call whose answer the read log no longer holds  */

/* lifecycle (paper 3.3) */
PH_API int ph_initialize(const char *port, const char *log_in);
PH_API int ph_add_port(const char *peer);
PH_API ph_vp_t ph_resource_name(void);
PH_API ph_vp_t ph_space_size(void); /* L */
PH_API const char *ph_local_port(void);
PH_API int ph_finalize(const char *log_out);
PH_API int ph_suspend(const char *file); /* finalize, keeping the assumed intervals and their state */

/* messages */
PH_API int ph_send(ph_vp_t dest, int tag, const void *data, size_t len);
PH_API ph_msg_t *ph_recv(int tag);
PH_API ph_msg_t *ph_try_recv(int tag);
PH_API ph_msg_t *ph_recv_timeout(int tag, int timeout_ms);
PH_API const void *ph_msg_data(const ph_msg_t *m);
PH_API size_t ph_msg_size(const ph_msg_t *m);
PH_API int ph_msg_tag(const ph_msg_t *m);
PH_API ph_vp_t ph_msg_dest(const ph_msg_t *m);
PH_API ph_vp_t ph_msg_source(const ph_msg_t *m);
PH_API void ph_msg_free(ph_msg_t *m);

/* mapping */
PH_API int ph_assume(ph_vps_t s);
PH_API int ph_release(ph_vps_t s);
PH_API int ph_assumed(ph_vps_t *out, size_t max);
/* Virtual nodes whose owner went away holding them (crashed, or cut off for orphan_after_ms) and that nobody
 * assumes now; returns how many (fills at most max). A node that finalizes withdraws its intervals first. */
typedef struct { ph_vps_t span; ph_vp_t owner; int64_t lost_ms; } ph_orphan_t;
PH_API int ph_orphaned(ph_orphan_t *out, size_t max);
/* With orphan_policy "adopt": called when this node assumed an orphaned interval next to its own, with no
 * state, on an application thread (like unpack); messages for it are received only after it returned. */
typedef void (*ph_adopt_fn)(ph_vps_t s, ph_vp_t owner, void *ctx);
PH_API int ph_set_adoption_handler(ph_adopt_fn fn, void *ctx);

/* migration (paper 3.5-3.6): intervals move between adjacent nodes with the application's state.
 * pack stores in *data a buffer from malloc() holding the state of s (phoenix frees it) and returns 0, or
 * non-zero if it cannot (s then stays here). unpack returns 0, or non-zero if it cannot (logged). Both run on
 * an application thread inside ph_recv*, ph_poll, ph_join or ph_leave, never concurrently with each other;
 * pack of s waits (up to 5 s) until every other thread that received a message for s called one of those again.
 * ph_assume and ph_release return PH_ESTATE while a migration involving this node is under way. */
typedef int (*ph_pack_fn)(ph_vps_t s, void **data, size_t *len, void *ctx);
typedef int (*ph_unpack_fn)(ph_vps_t s, const void *data, size_t len, void *ctx);
PH_API int ph_set_state_handlers(ph_pack_fn pack, ph_unpack_fn unpack, void *ctx);
PH_API int ph_join(int timeout_ms);  /* take half the interval of the owner of a random vnode       */
PH_API int ph_leave(int timeout_ms); /* hand every assumed vnode, with state, to adjacent nodes     */
PH_API int ph_poll(void);            /* run pending migration steps; returns how many ran           */

PH_API const char *ph_strerror(int code);

#ifdef __cplusplus
}
#endif

#endif /* PHOENIX_PHOENIX_H */
