/*
 * net_redis.h - the Redis anchor of emdb-bench's network mode: a
 * redis-server holding the same vectors as packed values (key: the ID's 8
 * bytes, value: dim float32s), driven by hand-written RESP over one
 * connection: pipelined MGET for Pull, MSET for Push, GET for the latency
 * of a single Lookup.
 */
#ifndef EMDB_BENCH_NET_REDIS_H
#define EMDB_BENCH_NET_REDIS_H

#include <stdint.h>

#include "tools/bench/harness.h"
#include "tools/bench/net_server.h"
#include "tools/bench/pool.h"

typedef struct net_redis net_redis;

/* Connect to the started server s.  Exits the process on failure. */
net_redis *net_redis_connect(const net_server *s);
void net_redis_close(net_redis *r);

/* SET the n vectors (n * dim floats) under ids[n] with one MSET. */
void net_redis_load(net_redis *r, const uint64_t *ids, size_t n, uint32_t dim,
		    const float *vecs);

/* MGET (put = 0) or MSET (put = 1) of thread 0's batches of p, `depth`
 * commands in flight; out counts keys.  The commands are encoded before
 * the clock starts. */
void net_redis_measure(net_redis *r, const pool *p, uint32_t dim, int put,
		       unsigned depth, double seconds, harness_result *out);

/* GET of one key at a time for `seconds`, the keys of p in turn (going on
 * from where the samples in out stopped), added to out. */
void net_redis_get_latency(net_redis *r, const pool *p, uint32_t dim,
			   double seconds, net_lat *out);

#endif
