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

/* Synchronous Lookup of one ID at a time for `seconds`, the IDs of p in
 * turn (going on from where the samples in out stopped), added to out. */
void net_wl_lookup_latency(const net_wl *w, const pool *p, double seconds, net_lat *out);

#endif
