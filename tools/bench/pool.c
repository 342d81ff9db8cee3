/*
 * pool.c - draws the per-thread ID pools of emdb-bench.
 *
 * Design
 *   Pools are drawn before any timing, one thread per slice (a Zipf draw
 *   costs ~70 ns), and kept both as ranks (the anchors place ranks in their
 *   own regions) and as IDs (what the engine is given, passed straight from
 *   the pool without a copy).  They live in ordinary malloc memory: they
 *   belong to the tool, not to the engine, and must not show in the
 *   engine's allocation counters.
 *
 * Invariants
 *   1. ids[i] == keys_id(ranks[i]) for every i; rank 0 gives KEYS_ID_FRESH.
 *   2. The contents depend only on (src, threads, batch, min_ids,
 *      fresh_frac, seed).
 */
#include "tools/bench/pool.h"

#include <stdlib.h>

#include "tools/bench/harness.h"

typedef struct fill_job {
	pool *p;
	const keys_source *src;
	double fresh_frac;
	uint64_t seed;
} fill_job;

static void fill_slice(void *arg, unsigned t)
{
	fill_job *j = arg;
	size_t len = j->p->len;
	uint64_t *ranks = j->p->ranks + (size_t)t * len;
	uint64_t *ids = j->p->ids + (size_t)t * len;

	keys_fill_ranks(j->src, j->seed * 1000003 + t, j->fresh_frac, ranks, len);
	for (size_t i = 0; i < len; i++)
		ids[i] = keys_id(ranks[i]);
}

void pool_init(pool *p, const keys_source *src, unsigned threads, size_t batch,
	       size_t min_ids, double fresh_frac, uint64_t seed)
{
	fill_job j = { p, src, fresh_frac, seed };

	p->threads = threads;
	p->dist = src->dist;
	p->n = src->n;
	p->zipf_s = src->dist == KEYS_ZIPF ? src->zipf.s : 0;
	p->batch = batch;
	p->batches = min_ids / batch ? min_ids / batch : 1;
	p->len = p->batch * p->batches;
	p->ranks = malloc(sizeof(uint64_t) * p->len * threads);
	p->ids = malloc(sizeof(uint64_t) * p->len * threads);
	if (!p->ranks || !p->ids)
		harness_die("out of memory for an ID pool of %zu IDs", p->len * threads);
	harness_parallel(threads, fill_slice, &j);
	p->share = src->dist == KEYS_ZIPF
			   ? keys_measured_share(p->ranks, p->len * threads, src->n)
			   : 0;
}

void pool_free(pool *p)
{
	free(p->ranks);
	free(p->ids);
	p->ranks = p->ids = NULL;
}
