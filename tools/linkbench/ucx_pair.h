/*
 * ucx_pair.h - the bare UCX active-message exchange that emdb's benchmarks
 * compare the node-to-node link with: two UCX workers in one process, A
 * connected to B through a listener on 127.0.0.1, driven by one thread
 * that polls both.  No copy, no thread hand-over, no event fd, no
 * context switch: what UCX itself costs for a given set of message sizes
 * (ucx_group.h is the exchange with one process per end, each driven from
 * its worker's event fd as the nodes are).  emdb-link-bench
 * (tools/linkbench/main.c) and emdb-bench --cluster (tools/bench/
 * cluster_bench.c) both use it.
 *
 * Transports are UCX's environment's (UCX_TLS, UCX_NET_DEVICES ...), the
 * endpoints in peer error-handling mode as net/node_link.c opens them, so
 * the same variables choose the same transports for both.
 *
 * Thread safety: one thread at a time per pair.
 */
#ifndef EMDB_TOOLS_UCX_PAIR_H
#define EMDB_TOOLS_UCX_PAIR_H

#include <stddef.h>
#include <stdint.h>

#include "tools/linkbench/ucx_am.h"

#define UCX_PAIR_MAX_MSGS UCX_AM_MAX_MSGS /* messages per round */

typedef struct ucx_pair ucx_pair;
typedef ucx_am_result ucx_pair_result;

/* Open the two workers and connect A to B.  Returns 0, or -1 with a
 * message in err.  Free with ucx_pair_close. */
int ucx_pair_open(ucx_pair **out, char *err, size_t errlen);

/* Run rounds of n messages (1..UCX_PAIR_MAX_MSGS): A sends req[i] bytes
 * to B, which answers each with rep[i] bytes (large ones go by
 * rendezvous, received into a buffer, as the link does); up to `depth`
 * rounds in flight.  Stops after `rounds` rounds, or once max_ns passed
 * (0: no time limit) with the rounds in flight finished.  Returns 0, or -1
 * with a message in err when a send fails or no reply came for 10 s. */
int ucx_pair_exchange(ucx_pair *p, const size_t *req, const size_t *rep, unsigned n, unsigned depth,
		      uint64_t rounds, uint64_t max_ns, ucx_pair_result *out, char *err, size_t errlen);

/* Close the endpoints, the listener and both workers.  NULL is a no-op. */
void ucx_pair_close(ucx_pair *p);

#endif
