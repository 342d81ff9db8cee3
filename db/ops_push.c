/*
 * ops_push.c - Push: accumulate gradients, by IDs or ticket, plain or as
 * the backward of a pooled Pull.
 *
 * The batch's positions are already grouped by index shard (plan or
 * ticket); the push sweeps those groups in staggered ring order and takes
 * each shard's gradient mutex once, as the index does (HypeReca 4.2), so
 * concurrent pushes rarely wait on each other.  A row belongs to exactly
 * one shard (that of its ID), so its accumulator is only ever touched under
 * that shard's mutex.
 *
 * Invariants:
 *   1. All or nothing: index room and rows for new IDs, then accumulator
 *      room in every shard the batch touches, are reserved first; if one
 *      reservation fails, the earlier ones are released, no row is inserted
 *      and no gradient is added.  Inserting and adding cannot fail.
 *   2. The call holds update_lock for reading, so no Update swaps the
 *      accumulators out between the two sweeps: every gradient of a push is
 *      applied by the same Update.  Pushes never wait for an Update to
 *      finish applying, only for its swap.
 *   3. The add loop only prefetches ahead (keys, gradients, accumulators):
 *      a hint for a row never changes what is added where.
 */
#include <stdbool.h>
#include <string.h>

#include <emdb/alloc.h>

#include "db/error_int.h"
#include "db/ops.h"

/* Where position p's gradient comes from: grads + p*dim (plain), or the
 * gradient of p's bag, scaled by 1 (SUM) or 1/bag size (MEAN). */
typedef struct grad_src {
	const float *grads;
	const uint32_t *bag_of;  /* [n] or NULL */
	const float *bag_scale;  /* [n_bags] or NULL */
	uint32_t dim;
} grad_src;

/* Prefetch distances of the add loop, in positions: the key's slot and
 * the incoming gradient first, the accumulator once the slot is cached
 * (invariant 3).  Only for a shard whose accumulators outgrew the core's
 * caches (many rows pushed since the last Update): on a small, cached map
 * the hints cost more than they save (5-10% in emdb-bench's Push+Update,
 * against 15-20% gained on a 100k-ID Push into 16k rows a shard). */
#define KEY_AHEAD 16u
#define ACC_AHEAD 8u
#define PREFETCH_FROM_BYTES (64u << 10)

static const float *grad_row(const grad_src *g, uint32_t p)
{
	return g->grads + (size_t)(g->bag_of ? g->bag_of[p] : p) * g->dim;
}

static void prefetch_row(const float *row, uint32_t dim)
{
	for (size_t off = 0; off < (size_t)dim * sizeof(float); off += 64)
		__builtin_prefetch((const char *)row + off, 0, 3);
}

static uint32_t group_of(const ops_rows *r, uint32_t s)
{
	return r->start[s + 1] - r->start[s];
}

static void unreserve_first(tbl *t, const ops_rows *r, uint32_t first, uint32_t k)
{
	for (uint32_t j = 0; j < k; j++) {
		uint32_t s = (first + j) & (t->shards - 1);
		if (!group_of(r, s))
			continue;
		pthread_mutex_lock(&t->grads[s].mu);
		gradmap_unreserve(&t->grads[s].map, group_of(r, s));
		pthread_mutex_unlock(&t->grads[s].mu);
	}
}

/* First sweep: room for every position of the batch in its shard's
 * accumulators.  On failure nothing stays reserved. */
static int grads_reserve(tbl *t, const ops_rows *r)
{
	uint32_t first = dit_sweep_start(t->index);
	for (uint32_t k = 0; k < t->shards; k++) {
		uint32_t s = (first + k) & (t->shards - 1);
		uint32_t cnt = group_of(r, s);
		if (!cnt)
			continue;
		pthread_mutex_lock(&t->grads[s].mu);
		int rc = gradmap_reserve(&t->grads[s].map, cnt);
		pthread_mutex_unlock(&t->grads[s].mu);
		if (rc != EMDB_OK) {
			unreserve_first(t, r, first, k);
			return rc;
		}
	}
	return EMDB_OK;
}

/* Second sweep: add the gradients, consuming the reservation. */
static void grads_add(tbl *t, const ops_rows *r, const grad_src *g)
{
	uint32_t first = dit_sweep_start(t->index);
	for (uint32_t k = 0; k < t->shards; k++) {
		uint32_t s = (first + k) & (t->shards - 1);
		uint32_t a = r->start[s], b = r->start[s + 1];
		if (a == b)
			continue;
		gradmap *m = &t->grads[s].map;
		pthread_mutex_lock(&t->grads[s].mu);
		bool ahead = gradmap_bytes(m) >= PREFETCH_FROM_BYTES;
		for (uint32_t j = a; j < b; j++) {
			if (ahead && j + KEY_AHEAD < b) {
				uint32_t q = r->order[j + KEY_AHEAD];
				gradmap_prefetch_key(m, r->locs[q]);
				prefetch_row(grad_row(g, q), g->dim);
			}
			if (ahead && j + ACC_AHEAD < b)
				gradmap_prefetch_acc(m, r->locs[r->order[j + ACC_AHEAD]]);
			uint32_t p = r->order[j];
			gradmap_add(m, r->locs[p], grad_row(g, p),
				    g->bag_of ? g->bag_scale[g->bag_of[p]] : 1.0f);
		}
		gradmap_unreserve(m, b - a);
		pthread_mutex_unlock(&t->grads[s].mu);
	}
}

static int push_common(emdb_db *db, uint32_t id, const uint64_t *ids, size_t n, const emdb_ticket *tk,
		       const uint64_t *offsets, size_t n_bags, emdb_pool pool, uint32_t dim, const float *grads)
{
	tbl *t;
	if (!grads || (!tk && !ids))
		return emdb__seterr(EMDB_ERR_INVALID, "push: NULL ids, ticket or gradient buffer");
	int rc = ops_open(db, id, tk, n, dim, &t);
	if (rc != EMDB_OK)
		return rc;
	if (tk)
		n = tk->n;

	grad_src g = { .grads = grads, .dim = dim };
	void *bags = NULL;
	if (offsets || n_bags) {
		rc = ops_check_bags(offsets, n_bags, n, pool);
		if (rc != EMDB_OK)
			goto out;
		bags = emdb_malloc(n * sizeof(uint32_t) + n_bags * sizeof(float));
		if (!bags) {
			rc = EMDB_ERR_NOMEM;
			goto out;
		}
		uint32_t *bag_of = bags;
		float *scale = (float *)(bag_of + n);
		for (size_t b = 0; b < n_bags; b++) {
			uint64_t cnt = offsets[b + 1] - offsets[b];
			scale[b] = (pool == EMDB_POOL_MEAN && cnt > 1) ? 1.0f / (float)cnt : 1.0f;
			for (uint64_t i = offsets[b]; i < offsets[b + 1]; i++)
				bag_of[i] = (uint32_t)b;
		}
		g.bag_of = bag_of;
		g.bag_scale = scale;
	}

	/* Everything that can fail (index room, rows, accumulator room) is
	 * reserved before the first insert or add. */
	ops_rows r;
	pthread_rwlock_rdlock(&t->update_lock);
	if (tk)
		ops_rows_from_ticket(tk, &r);
	else
		rc = ops_rows_prepare(t, ids, n, &r);
	if (rc == EMDB_OK) {
		rc = grads_reserve(t, &r);
		if (rc == EMDB_OK) {
			if (!tk)
				ops_rows_commit(t, ids, &r);
			grads_add(t, &r, &g);
		} else if (!tk) {
			ops_rows_abort(t, &r);
		}
		ops_rows_done(&r);
	}
	pthread_rwlock_unlock(&t->update_lock);
	if (rc == EMDB_OK) {
		TABLE_COUNT(t, calls_push, 1);
		TABLE_COUNT(t, ids_push, n);
	}
out:
	emdb_free(bags);
	table_release(t);
	return rc;
}

int emdb_push(emdb_db *db, uint32_t tid, const uint64_t *ids, size_t n, uint32_t dim, const float *grads)
{
	return push_common(db, tid, ids, n, NULL, NULL, 0, EMDB_POOL_SUM, dim, grads);
}

int emdb_push_ticket(emdb_db *db, uint32_t tid, const emdb_ticket *t, uint32_t dim, const float *grads)
{
	if (!t)
		return emdb__seterr(EMDB_ERR_INVALID, "push: ticket is NULL");
	return push_common(db, tid, NULL, 0, t, NULL, 0, EMDB_POOL_SUM, dim, grads);
}

int emdb_push_bags(emdb_db *db, uint32_t tid, const uint64_t *ids, size_t n, const uint64_t *offsets,
		   size_t n_bags, emdb_pool pool, uint32_t dim, const float *grads)
{
	if (!offsets)
		return emdb__seterr(EMDB_ERR_INVALID, "push_bags: offsets is NULL");
	return push_common(db, tid, ids, n, NULL, offsets, n_bags, pool, dim, grads);
}

int emdb_push_bags_ticket(emdb_db *db, uint32_t tid, const emdb_ticket *t, const uint64_t *offsets,
			  size_t n_bags, emdb_pool pool, uint32_t dim, const float *grads)
{
	if (!t || !offsets)
		return emdb__seterr(EMDB_ERR_INVALID, "push_bags: ticket or offsets is NULL");
	return push_common(db, tid, NULL, 0, t, offsets, n_bags, pool, dim, grads);
}
