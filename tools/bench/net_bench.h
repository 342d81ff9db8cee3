/*
 * net_bench.h - emdb-bench --net: every data-plane operation through the
 * client library against an emdb-server on TCP loopback or a Unix socket,
 * beside its echo bound and the Redis anchor, measured in the same run;
 * or (tls) against a TLS emdb-server beside a plain one.
 */
#ifndef EMDB_BENCH_NET_BENCH_H
#define EMDB_BENCH_NET_BENCH_H

#include <stdint.h>

#include "tools/bench/keys.h"
#include "tools/bench/net_sock.h"

#define NET_DEFAULT_ROWS 1000000ull
#define NET_DEFAULT_DEPTH 8

enum { NET_BACKEND_LIBEVENT = 1, NET_BACKEND_URING = 2 };

typedef struct net_bench_opts {
	net_transport transport;
	unsigned backends;   /* NET_BACKEND_* bits: one emdb-server each */
	unsigned depth;
	uint64_t rows;       /* 0: NET_DEFAULT_ROWS */
	uint32_t dim;
	uint32_t batch;
	double seconds;
	keys_dist dist;
	int pull, push, lookup, prefetch; /* which workloads */
	int step;            /* synchronous steps (net_step.h) */
	unsigned workers;    /* step: workers, >= 2 */
	int json;
	int tls;             /* transport NET_TCP: emdb over TLS beside emdb
				over plain TCP (libevent), same anchors */
} net_bench_opts;

/* Run the network mode and print its table (or JSON lines) on stdout.
 * Exits the process on failure, with every server it started killed. */
void net_bench_run(const net_bench_opts *o);

#endif
