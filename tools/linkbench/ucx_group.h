/*
 * ucx_group.h - the bare UCX exchange that is a peer of the cluster's
 * nodes: a home process and `owners` owner processes, forked from the
 * caller, each with its own UCX context and worker, connected over
 * 127.0.0.1 with the transports of UCX's environment (as the nodes are),
 * each progressing UCX the way a node does by default: progress until
 * idle, ucp_worker_arm, sleep on the worker's event fd (poll), repeat; or,
 * with busy_poll, poll without sleeping (a node's cluster_busy_poll).
 * The home sends each round's messages to the owners and counts their
 * replies (ucx_am.h's ends); every process pays the wake-ups and context
 * switches a node-to-node exchange between processes pays, and nothing
 * else: no server, no copies.
 *
 * The processes die with the caller (PR_SET_PDEATHSIG) and are killed by
 * ucx_group_close; a caller with signal handlers of its own kills
 * ucx_group_pid's list from them.  Every wait is bounded.
 *
 * Open the group before the calling process initializes UCX itself: the
 * processes are forked, not executed.
 *
 * Thread safety: one thread at a time per group.
 */
#ifndef EMDB_TOOLS_UCX_GROUP_H
#define EMDB_TOOLS_UCX_GROUP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tools/linkbench/ucx_am.h"

#define UCX_GROUP_MAX_OWNERS 7

typedef struct ucx_group ucx_group;

/* Fork the owners and the home and connect the home to every owner.
 * Returns 0, or -1 with a message in err (every process started is then
 * stopped).  Free with ucx_group_close. */
int ucx_group_open(ucx_group **out, unsigned owners, int busy_poll, char *err, size_t errlen);

/* The group's processes: 0 the home, 1..owners the owners; 0 past them. */
pid_t ucx_group_pid(const ucx_group *g, unsigned i);

/* Run rounds of n messages (1..UCX_AM_MAX_MSGS) in the home: message i
 * goes to owner to[i] (0..owners-1) with req[i] bytes, answered with
 * rep[i] bytes; up to `depth` rounds in flight; stops after `rounds`
 * rounds or once max_ns passed (0: no limit) with the rounds in flight
 * finished.  out->ns is the home's time from its first send to its last
 * reply.  Returns 0, or -1 with a message in err (a process died, a send
 * failed, no reply for 10 s); the group is then unusable but closable. */
int ucx_group_exchange(ucx_group *g, const unsigned *to, const size_t *req, const size_t *rep, unsigned n,
		       unsigned depth, uint64_t rounds, uint64_t max_ns, ucx_am_result *out, char *err,
		       size_t errlen);

/* Kill the processes and reap them (SIGTERM, SIGKILL after 2 s).  NULL is
 * a no-op. */
void ucx_group_close(ucx_group *g);

#endif
