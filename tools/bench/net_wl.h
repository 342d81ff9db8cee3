/*
 * net_wl.h - emdb-bench's workloads over the network: each data-plane
 * operation of emdb/client.h against an emdb-server, `depth` asynchronous
 * requests in flight on one connection, and the wire sizes of each
 * operation's request and response, which the echo anchor reproduces.
 */
#ifndef EMDB_BENCH_NET_WL_H
#define EMDB_BENCH_NET_WL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <emdb/client.h>

#include "tools/bench/harness.h"
#include "tools/bench/net_redis.h"
#include "tools/bench/net_sock.h"
#include "tools/bench/pool.h"

typedef enum net_op {
	NET_PULL,        /* emdb_client_pull: IDs in the request */
	NET_PULL_TICKET, /* emdb_client_pull_ticket: tickets resolved beforehand */
	NET_PUSH,        /* emdb_client_push: IDs and gradients */
	NET_PUSH_TICKET, /* emdb_client_push_ticket: tickets resolved beforehand */
	NET_LOOKUP,      /* emdb_client_lookup, without found flags */
	NET_PREFETCH,    /* emdb_client_prefetch, each ticket freed at once */
	NET_PUSH_UPDATE, /* emdb_client_push_update: IDs and gradients, applied */
	NET_PUSH_UPDATE_TICKET, /* emdb_client_push_update_ticket */
	NET_UPDATE,      /* emdb_client_update of the table (--cluster only) */
	NET_N_OPS
} net_op;

typedef struct net_wl {
	emdb_client *c;
	uint32_t table;
	uint32_t dim;
	unsigned depth;
	double seconds;
} net_wl;

const char *net_op_name(net_op op);
/* Whether op sends gradients (Push, Push-and-Update). */
bool net_op_pushes(net_op op);

/* The operations of the chosen workloads, in the order the reports list
 * them: pull (Pull by IDs and by ticket), push (Push, Push-and-Update,
 * each by IDs and by ticket, and with update a plain Update between),
 * lookup, prefetch.  Writes at most NET_N_OPS into ops; returns how many. */
int net_wl_ops(int pull, int push, int update, int lookup, int prefetch, net_op *ops);

/* Exit the process: what failed with rc, and the client's message. */
void net_wl_die(const char *what, int rc) __attribute__((noreturn));

/* Bytes on the wire, frame header included, of op's request and of its
 * response for a batch of n IDs (docs/protocol.md). */
size_t net_op_req_bytes(net_op op, size_t n, uint32_t dim);
size_t net_op_resp_bytes(net_op op, size_t n, uint32_t dim);

/* Insert the IDs of ranks 1..rows into w's table by Prefetch; with r, pull
 * their vectors back and MSET them into Redis too.  Untimed set-up. */
void net_wl_preload(const net_wl *w, uint64_t rows, net_redis *r);

/* op over thread 0's batches of p; out counts IDs.  Exits the process on
 * any error. */
void net_wl_measure(const net_wl *w, net_op op, const pool *p, harness_result *out);

/* Called by net_wl_measure_marked right before the first timed request
 * (after set-up such as the by-ticket ops' Prefetches) with requests 0,
 * and right after the last one completed (before the tickets are freed)
 * with the requests sent in between, warm-up included: request i used
 * batch i of p's thread 0 (pool_ids). */
typedef void (*net_wl_mark_fn)(void *ctx, int after, uint64_t requests);

/* net_wl_measure with mark (may be NULL) called around the timed part. */
void net_wl_measure_marked(const net_wl *w, net_op op, const pool *p, harness_result *out,
			   net_wl_mark_fn mark, void *ctx);

/* Synchronous Lookup of one ID at a time for `seconds`, the IDs of p in
 * turn (going on from where the samples in out stopped), added to out. */
void net_wl_lookup_latency(const net_wl *w, const pool *p, double seconds, net_lat *out);

#endif
