/*
 * cluster_bench.h - emdb-bench --cluster N: the data-plane workloads
 * through one home node of an N-node cluster of local emdb-servers, beside
 * the same workloads on a single emdb-server and beside a bare UCX
 * exchange of the same message sizes, all in one run, with the link's own
 * counters (INFO cluster) read before and after each
 * (docs/benchmarks.md "Cluster").
 */
#ifndef EMDB_BENCH_CLUSTER_BENCH_H
#define EMDB_BENCH_CLUSTER_BENCH_H

#include "tools/bench/net_bench.h"

typedef enum cluster_link_kind {
	CLUSTER_LINK_TCP,  /* UCX_TLS=tcp */
	CLUSTER_LINK_SHM,  /* shared memory where UCX can (posix, sysv, cma), tcp beside */
} cluster_link_kind;

typedef struct cluster_bench_opts {
	net_bench_opts net;   /* transport (clients to the home node and to the
				 single node), depth, rows, dim, batch, seconds,
				 dist, the workloads (push: also Update), json */
	int nodes;            /* N, 2..NET_CLUSTER_MAX */
	cluster_link_kind link;
	int busy_poll;        /* the nodes' cluster_busy_poll */
	int serve_threads;    /* the nodes' cluster_serve_threads; -1: default */
} cluster_bench_opts;

/* Run the cluster mode and print its table (or JSON lines) on stdout.
 * Exits the process on failure, with every server it started killed. */
void cluster_bench_run(const cluster_bench_opts *o);

#endif
