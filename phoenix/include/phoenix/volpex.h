/* phoenix/volpex.h — the Volpex dataspace (Volpex paper, Table I), served by the phoenix virtual node space.
 *
 * A Volpex process runs as one or more replicas: copies of the same deterministic program, on any hosts. Each
 * replica calls these functions; the dataspace makes the first instance of every logical call take effect and
 * gives every other instance the same answer, so all replicas compute the same and any one surviving replica of
 * each process carries the computation on (docs/volpex.md).
 *
 * volpex_init reads, from the environment:
 *   VOLPEX_PROC_ID       this process's id, 0 .. VOLPEX_NUM_PROCS - 1 (the same for all its replicas)
 *   VOLPEX_NUM_PROCS     how many processes the computation has
 *   PHOENIX_*            the configuration of the replica's own node (phoenix/config.hpp): its peers lead to
 *                        the nodes that serve the dataspace (volpex_server); it assumes no virtual node itself
 *   VOLPEX_REPLICA       which replica of the process this is, 0 .. K-1 (default 0; a replica started later
 *                        to replace one takes a new index)
 *   VOLPEX_REPLICAS      K, the replicas of every process (default 1)
 *   VOLPEX_SELECTION     which replica of a sending process volpex_recv pulls from: team (default), timeout,
 *                        timestamp, network or hybrid (docs/volpex.md, "Target selection")
 *   VOLPEX_TIMEOUT_MS    the timeout policy's wait before it asks another replica (default 500)
 *   VOLPEX_SUSPECT_MS    a replica without a route this long is not asked while another can be (default 1000)
 *   VOLPEX_GIVE_UP_MS    one without a route this long is given up (default 10000): volpex_recv from a process
 *                        whose every replica is given up fails with PH_EUNREACH; a route that comes back earlier
 *                        (a stalled node in between) makes the replica count again
 *   VOLPEX_LOG_BYTES     the sender log's capacity (default 256 MiB); a replica that lags past it gets PH_ELOST
 *   VOLPEX_SENDER_LOG    0 for drills only: a message leaves the sender's log once one replica took it
 *   VOLPEX_CRASH_AT      optional, for fault drills: before-put:N, after-get:N, ... kill this replica (SIGKILL)
 *                        before it sends its Nth put, or after it sent its Nth get and before the answer;
 *                        serve:N as it is about to answer the Nth pull of its sender log
 * and ignores argc and argv (kept for the paper's signature).
 *
 * Calls block until answered: put until the object is stored, get and read until an object is there. They
 * return a negative PH_E* code on failure (phoenix/phoenix.h; PH_ELOST: this replica lagged so far behind that
 * the read log no longer holds its answer). get and read copy min(object size, data_size) bytes to data and
 * return the object's full size, so a result above data_size means the buffer was too small.
 *
 * Replicated message passing (VolpexMPI's model): volpex_send logs the message at the sender and returns at
 * once; volpex_recv pulls it from one replica of the sending process, so every replica of the receiver gets the
 * same messages in the same order, and a replica that dies is replaced by another of its process without a
 * message lost or repeated. VOLPEX_ANY_SOURCE and VOLPEX_ANY_TAG receive the first message that matches, the
 * same one in every replica. volpex_recv returns the message's full size (min(size, data_size) bytes copied)
 * and, when source or tag is non-null, the sender's process id and the tag.
 */
#ifndef PHOENIX_VOLPEX_H
#define PHOENIX_VOLPEX_H

#include <phoenix/phoenix.h>

#ifdef __cplusplus
extern "C" {
#endif

PH_API int volpex_init(int argc, char *argv[]);
PH_API int volpex_put(const char *tag, int tag_size, const void *data, int data_size);
PH_API int volpex_get(const char *tag, int tag_size, void *data, int data_size);
PH_API int volpex_read(const char *tag, int tag_size, void *data, int data_size);
#define VOLPEX_ANY_SOURCE (-1)
#define VOLPEX_ANY_TAG (-1)
PH_API int volpex_send(int dest, int tag, const void *data, int data_size);
PH_API int volpex_recv(int source, int tag, void *data, int data_size, int *source_out, int *tag_out);
PH_API int volpex_getProcId(void);   /* -1 before volpex_init */
PH_API int volpex_getNumProc(void);  /* -1 before volpex_init */
PH_API void volpex_finalize(void);

#ifdef __cplusplus
}
#endif

#endif
