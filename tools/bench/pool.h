/*
 * pool.h - per-thread streams of pre-drawn IDs, cut into batches.
 *
 * Thread t of a measurement reads batch (iter % batches) of its own slice.
 * Slices are drawn with different seeds, so threads do not ask for the same
 * IDs in lock step; the engine and its anchors read the same slices, so
 * they see the same ID stream.
 */
#ifndef EMDB_BENCH_POOL_H
#define EMDB_BENCH_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "tools/bench/keys.h"

typedef struct pool {
	unsigned threads;
	size_t batch;    /* IDs per batch                      */
	size_t batches;  /* batches per thread                 */
	size_t len;      /* IDs per thread: batch * batches    */
	uint64_t *ranks; /* [threads * len]; 0 marks a new ID  */
	uint64_t *ids;   /* [threads * len]: keys_id(rank), KEYS_ID_FRESH for 0 */
	keys_dist dist;  /* the law the ranks were drawn from   */
	uint64_t n;      /* ...over ranks 1..n                  */
	double zipf_s;   /* its exponent (Zipf), else 0         */
	double share;    /* measured share of the top 2.2% (Zipf), else 0 */
} pool;

/* Draw threads * len ranks from src, len = batch * max(1, min_ids / batch),
 * in parallel, fresh_frac of them marked new.  seed separates pools.
 * Exits the process when out of memory.  Free with pool_free. */
void pool_init(pool *p, const keys_source *src, unsigned threads, size_t batch,
	       size_t min_ids, double fresh_frac, uint64_t seed);
void pool_free(pool *p);

static inline const uint64_t *pool_ids(const pool *p, unsigned t, uint64_t iter)
{
	return p->ids + (size_t)t * p->len + (size_t)(iter % p->batches) * p->batch;
}

static inline const uint64_t *pool_ranks(const pool *p, unsigned t, uint64_t iter)
{
	return p->ranks + (size_t)t * p->len + (size_t)(iter % p->batches) * p->batch;
}

/* Batch iter of thread t copied to out[batch], each new-ID marker replaced
 * by the ID of rank fresh_base + (t << 40) + (*next)++: an ID no table has
 * seen, never the same on two threads.  Starting two structures with the
 * same *next gives them the same ID stream. */
static inline void pool_fresh_batch(const pool *p, unsigned t, uint64_t iter,
				    uint64_t fresh_base, uint64_t *next,
				    uint64_t *out)
{
	const uint64_t *src = pool_ids(p, t, iter);
	const uint64_t marker = KEYS_ID_FRESH;
	uint64_t c = *next, base = fresh_base + ((uint64_t)t << 40);

	for (size_t i = 0; i < p->batch; i++)
		out[i] = src[i] != marker ? src[i] : keys_id(base + c++);
	*next = c;
}

#endif
