/*
 * cluster/phases.h - the coordinator's driver of a transaction across
 * nodes: run one phase on every node in ring order, collect each node's
 * status, then let the caller decide the next phase; and, on a node that
 * is not the coordinator, forward the request that starts one and take
 * back the coordinator's answer.
 *
 * Table changes (admin.c: PREPARE, COMMIT or ABORT) and cluster
 * checkpoints and restores (ckpt.c: HOLD, WRITE or LOAD, SWAP, END) use
 * it; each says only what a phase does on this node (phases_ops.local),
 * what it takes from a node's answer (phases_ops.answer) and what comes
 * after a phase (phases_ops.next: phases_run again, or phases_end).
 *
 * Rules:
 *   - One phase runs at a time.  phases_run sends the phase's frame to
 *     every node taking part, in ring order from this node (round k: node
 *     rank + k), runs this node's part, and calls ops.next exactly once,
 *     when every node taking part answered or failed (a send that fails
 *     counts as that node's failure).  ops.next may run before
 *     phases_run returns, and on any thread (the link's, or the one that
 *     finished this node's part).
 *   - The first failure (status, node, why) of the transaction is kept
 *     until phases_end; a phase run as `tolerant` (an abort, an end)
 *     records none.  A node whose part succeeded in the last phase is
 *     phases_ok (the nodes to undo or abort on).
 *   - phases_end answers the origin exactly once and frees the handle.
 */
#ifndef EMDB_CLUSTER_PHASES_H
#define EMDB_CLUSTER_PHASES_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster/cluster.h"
#include "protocol/proto_node.h"

typedef struct phases phases;

/* ops.local's answer: this node's part goes on; phases_local_done will
 * be called once with its end. */
#define PHASES_LATER 1

/* A result: status EMDB_OK and a value (a table id, a checkpoint id), or
 * an error and why (naming the node). */
typedef void (*phases_done_fn)(void *arg, int status, uint64_t value, const char *msg);

typedef struct phases_ops {
	/* This node's part of the phase m (m->hdr.opcode): EMDB_OK done,
	 * an error (its message in emdb_last_error) failed, or
	 * PHASES_LATER. */
	int (*local)(phases *p, const proto_node_msg *m);
	/* A node's answer to the phase, status >= 0 (NULL: nothing to take).
	 * Runs on the link's thread, one call per node, concurrently. */
	void (*answer)(phases *p, uint32_t rank, const proto_node_msg *m);
	/* The phase is over on every node taking part. */
	void (*next)(phases *p);
} phases_ops;

/* Where the result goes: a local callback, or the peer that asked with
 * op (answered with ROWS of the value, header table `table`). */
typedef struct phases_origin {
	phases_done_fn done;
	void *arg;
	cluster_responder *r;
	uint16_t op;
	uint32_t table;
} phases_origin;

/* A transaction on cl's nodes; ops copied, arg borrowed (phases_arg).
 * NULL on NOMEM (error set).  Freed by phases_end, or by phases_free
 * before any phases_run. */
phases *phases_new(cluster *cl, const phases_ops *ops, void *arg, const phases_origin *origin);
void phases_free(phases *p);
void *phases_arg(const phases *p);

/* Run phase m (a request: cluster__hdr(cl, op, table, false)) on the
 * nodes with take[rank] set (NULL: every node).  deadline_ns bounds each
 * node's answer (0: the link's default).  tolerant: failures are not
 * recorded (the nodes still count). */
void phases_run(phases *p, const proto_node_msg *m, const uint8_t *take, bool tolerant, uint64_t deadline_ns);

/* The end of this node's part after ops.local said PHASES_LATER. */
void phases_local_done(phases *p, int status, const char *why);

/* Record a failure of node rank (kept if it is the first). */
void phases_fail(phases *p, uint32_t rank, int status, const char *why);

/* The first failure: its status (EMDB_OK: none), node and why. */
int phases_status(const phases *p);
uint32_t phases_failed_node(const phases *p);
const char *phases_why(const phases *p);

/* Whether rank's part of the last phase succeeded. */
bool phases_ok(const phases *p, uint32_t rank);

/* Answer the origin (status, value, msg: see phases_done_fn), then free
 * p. */
void phases_end(phases *p, int status, uint64_t value, const char *msg);

/* On a node that is not the coordinator: send m to rank
 * CLUSTER_COORDINATOR and hand its ROWS answer (or its error, or the
 * link's prefixed with who) to done once.  deadline_ns as phases_run's.
 * Errors (done then never runs): NOMEM, and the link's. */
int phases_ask(cluster *cl, const proto_node_msg *m, uint64_t deadline_ns, const char *who, phases_done_fn done,
	       void *arg);

#endif
