/*
 * gradrank.c - per-worker gradient accumulators of a shard (gradrank.h).
 *
 * Invariants:
 *   1. e[0..n) is sorted by rank, each rank at most once; e[n..cap) is
 *      unused memory.
 *   2. After gradrank_fold every map is empty, and, when it had anything
 *      to add, every entry that no push used since the fold before that
 *      is gone: a worker that stopped pushing to a shard costs it nothing
 *      after two folds with work in that shard (an emptied map meanwhile,
 *      whose memory gradmap_clear trims).
 *   3. A refused gradrank_reserve reserves nothing (a new entry may stay,
 *      empty and unused, and goes at the next fold).
 *
 * State changes: reserve (entries, maps), fold (sums into the shared map,
 * entries dropped), destroy; all under the shard's gradient mutex.
 */
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "db/gradrank.h"

void gradrank_destroy(gradrank *g)
{
	for (uint32_t i = 0; i < g->n; i++)
		gradmap_destroy(&g->e[i].map);
	emdb_free(g->e);
	memset(g, 0, sizeof(*g));
}

/* Index of the first entry with rank >= rank. */
static uint32_t lower_bound(const gradrank *g, uint32_t rank)
{
	uint32_t lo = 0, hi = g->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (g->e[mid].rank < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

gradmap *gradrank_find(gradrank *g, uint32_t rank)
{
	uint32_t i = lower_bound(g, rank);
	return i < g->n && g->e[i].rank == rank ? &g->e[i].map : NULL;
}

uint64_t gradrank_reserve_bytes(const gradrank *g, uint32_t dim, uint32_t rank, uint32_t n)
{
	uint32_t i = lower_bound(g, rank);
	if (i < g->n && g->e[i].rank == rank)
		return gradmap_reserve_bytes(&g->e[i].map, n);
	gradmap fresh;
	gradmap_init(&fresh, dim);
	uint64_t bytes = gradmap_reserve_bytes(&fresh, n);
	if (g->n == g->cap)
		bytes += (uint64_t)(g->cap ? g->cap : 4) * sizeof(gradrank_entry);
	return bytes;
}

int gradrank_reserve(gradrank *g, uint32_t dim, uint32_t rank, uint32_t n)
{
	uint32_t i = lower_bound(g, rank);
	if (i == g->n || g->e[i].rank != rank) {
		if (g->n == g->cap) {
			uint32_t cap = g->cap ? 2 * g->cap : 4;
			gradrank_entry *e = emdb_realloc(g->e, (size_t)cap * sizeof(*e));
			if (!e)
				return EMDB_ERR_NOMEM;
			g->e = e;
			g->cap = cap;
		}
		memmove(&g->e[i + 1], &g->e[i], (size_t)(g->n - i) * sizeof(*g->e));
		g->e[i].rank = rank;
		g->e[i].used = 0;
		gradmap_init(&g->e[i].map, dim);
		g->n++;
	}
	int rc = gradmap_reserve(&g->e[i].map, n);
	if (rc != EMDB_OK)
		return rc;
	g->e[i].used = 1;
	return EMDB_OK;
}

int gradrank_pending(const gradrank *g)
{
	for (uint32_t i = 0; i < g->n; i++)
		if (g->e[i].map.count || g->e[i].map.reserved)
			return 1;
	return 0;
}

void gradrank_fold(gradrank *g, gradmap *into)
{
	/* Nothing to add (no ranked push since the last fold, or a second
	 * fold in one pass: Push+Update folds before the pass does): leave
	 * the entries' use marks for the next fold that has work. */
	if (!gradrank_pending(g))
		return;
	uint32_t kept = 0;
	for (uint32_t i = 0; i < g->n; i++) {
		gradrank_entry *x = &g->e[i];
		gradmap *m = &x->map;
		for (uint32_t j = 0; j < m->count; j++)
			gradmap_add(into, m->locs[j], m->grads + (size_t)j * m->dim, 1.0f);
		if (!x->used) { /* invariant 2 */
			gradmap_destroy(m);
			continue;
		}
		gradmap_clear(m);
		x->used = 0;
		if (kept != i)
			g->e[kept] = *x;
		kept++;
	}
	g->n = kept;
}

uint64_t gradrank_rows(const gradrank *g)
{
	uint64_t rows = 0;
	for (uint32_t i = 0; i < g->n; i++)
		rows += g->e[i].map.count;
	return rows;
}

size_t gradrank_bytes(const gradrank *g)
{
	size_t bytes = (size_t)g->cap * sizeof(gradrank_entry);
	for (uint32_t i = 0; i < g->n; i++)
		bytes += gradmap_bytes(&g->e[i].map);
	return bytes;
}
