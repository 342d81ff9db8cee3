/*
 * ops_pull.c - reading rows: Pull (by IDs or ticket, plain or pooled per
 * bag), Lookup and state reads.
 *
 * All of them copy rows with software prefetch OPS_PREFETCH_ROWS rows
 * ahead, so the memory system works on several random rows at once; this
 * is what lets Pull approach the gather bound of emdb-bench.  They take
 * the rows' addresses a block at a time first (ops_row_addrs).
 *
 * Invariants:
 *   1. Every call holds the table's rows_lock for reading while it reads
 *      rows, so no row is read while an Update rewrites it (no torn rows).
 *   2. Lookup and state reads never insert: they use dit_find only.
 *   3. Pooled sums run in float32 in request order within each bag; MEAN
 *      multiplies the sum by 1/count (torch's CPU forward divides by the
 *      count instead: docs/engine.md, "Pooling").  With per-sample
 *      weights (SUM only, checked by ops_check_weights) each row is
 *      multiplied by its weight as it is added: o += w[i] * r, as torch's
 *      per_sample_weights.
 *   4. The positional forms (db/db_cluster.h: a cluster home node's local
 *      part) write row i at out + pos[i] * width and found[pos[i]]
 *      instead of at i: the same copies, the same bits, into the
 *      request's own buffer, so no private buffer is scattered after.
 */
#include <string.h>

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "db/db_cluster.h"
#include "db/db_int.h"
#include "db/init_math.h"
#include "db/ops.h"

/* OPS_FOR_ROWS's prefetch here: the row's first `bytes`, for reading. */
#define PULL_PREFETCH(row, loc) ops_prefetch_row((row), bytes)

/* src[i], where given, is row i read from the device replica instead of
 * the host (db/hot.h hot_pull_submit: the same floats). */
#define PULL_ROW(src, i, r) ((src) && (src)[i] ? (src)[i] : (r))

/* Where row i of a batch goes in out (rows of w floats): at i, or at
 * pos[i] for the positional forms (invariant 4). */
static inline float *out_row(float *out, const uint32_t *pos, size_t i, size_t w)
{
	return out + (pos ? pos[i] : i) * w;
}

/* Plain rows into out: every row (src NULL: from the host), or with src
 * only the host's rows (src[i] NULL), the device part being in flight. */
static void gather(const tbl *t, const uint64_t *locs, size_t n, const float *const *src, const uint32_t *pos,
		   float *out)
{
	size_t bytes = (size_t)t->dim * sizeof(float);
	OPS_FOR_ROWS(t, locs, n, PULL_PREFETCH, i, r,
		if (!src || !src[i])
			memcpy(out_row(out, pos, i, t->dim), r, bytes);
	);
}

/* The device's rows into out, once they are there. */
static void place_held(const tbl *t, size_t n, const float *const *src, const uint32_t *pos, float *out)
{
	size_t bytes = (size_t)t->dim * sizeof(float);
	for (size_t i = 0; i < n; i++)
		if (src[i])
			memcpy(out_row(out, pos, i, t->dim), src[i], bytes);
}

/* Bags [b0, b1) of a pooled Pull (offsets index the whole request). */
static void pool_range(const tbl *t, const uint64_t *locs, const uint64_t *offsets, size_t b0, size_t b1,
		       emdb_pool pool, const float *weights, const float *const *src, float *out)
{
	uint32_t dim = t->dim;
	size_t bytes = (size_t)dim * sizeof(float);
	size_t bag = b0, lo = offsets[b0];
	memset(out + b0 * dim, 0, (b1 - b0) * bytes);
	OPS_FOR_ROWS(t, locs + lo, offsets[b1] - lo, PULL_PREFETCH, j, row_,
		size_t i = lo + j;
		const float *r = PULL_ROW(src, i, row_);
		while (offsets[bag + 1] <= i) /* i < offsets[b1]: stops before b1 */
			bag++;
		float *o = out + bag * dim;
		if (weights) {
			float w = weights[i];
			for (uint32_t c = 0; c < dim; c++)
				o[c] += w * r[c];
		} else {
			for (uint32_t c = 0; c < dim; c++)
				o[c] += r[c];
		}
	);
	if (pool != EMDB_POOL_MEAN)
		return;
	for (size_t k = b0; k < b1; k++) {
		uint64_t cnt = offsets[k + 1] - offsets[k];
		if (cnt > 1) {
			float inv = 1.0f / (float)cnt;
			float *o = out + k * dim;
			for (uint32_t c = 0; c < dim; c++)
				o[c] *= inv;
		}
	}
}

/* The bags whose held[k] is cls (every bag with held NULL), run by run. */
static void pool_bags(const tbl *t, const uint64_t *locs, const uint64_t *offsets, size_t n_bags, emdb_pool pool,
		      const float *weights, const float *const *src, const uint8_t *held, uint8_t cls, float *out)
{
	for (size_t b = 0; b < n_bags;) {
		size_t e = b;
		while (e < n_bags && (!held || held[e] == cls))
			e++;
		if (e > b)
			pool_range(t, locs, offsets, b, e, pool, weights, src, out);
		b = e > b ? e : b + 1;
	}
}

/* held[k]: bag k has a row the device serves (src).  NULL on NOMEM. */
static uint8_t *bags_held(const uint64_t *offsets, size_t n_bags, const float *const *src)
{
	uint8_t *held = emdb_calloc(n_bags ? n_bags : 1, 1);
	if (!held)
		return NULL;
	for (size_t k = 0; k < n_bags; k++)
		for (uint64_t i = offsets[k]; i < offsets[k + 1] && !held[k]; i++)
			held[k] = src[i] != NULL;
	return held;
}

/* The rows of r into out (rows_lock held for reading): the device
 * replica's rows where it holds them (db/hot.h), the host's elsewhere;
 * out may be device memory of the replica (a mem:// trainer's), which
 * a batch the tier holds whole is gathered into directly.  The device's
 * gather is enqueued first and a plain Pull copies the host's rows while
 * it runs, then waits once (db/tier.h, "Asynchronous work"); a pooled
 * Pull pools the bags without a device row meanwhile, and the others
 * after the wait (each bag's sum in request order either way).  With pos
 * (plain only, out in host memory) row i goes to out's row pos[i]. */
static int pull_rows(tbl *t, const ops_rows *r, size_t n, const emdb_ticket *tk, const uint64_t *offsets,
		     size_t n_bags, emdb_pool pool, const float *weights, const uint32_t *pos, float *out)
{
	const hot_staged *st = tk ? tk->staged : NULL;
	int rep = t->hot && !pos ? hot_ptr_replica(t->hot, out) : -1;
	size_t bytes = (offsets ? n_bags : n) * t->dim * sizeof(float);
	float *dst = out;
	hot_rows hr = { 0 };
	int rc = EMDB_OK;

	if (rep >= 0 && !offsets && hot_pull_direct(t->hot, rep, r->locs, n, st, out))
		return EMDB_OK;
	if (rep >= 0 && !(dst = emdb_malloc(bytes ? bytes : 1)))
		return EMDB_ERR_NOMEM;
	if (t->hot)
		hot_pull_submit(t->hot, r->locs, n, st, &hr);
	if (offsets) {
		/* Bags without a device row first, while the gather runs;
		 * each bag's sum stays in request order. */
		uint8_t *held = hr.held ? bags_held(offsets, n_bags, hr.src) : NULL;
		if (held)
			pool_bags(t, r->locs, offsets, n_bags, pool, weights, NULL, held, 0, dst);
		bool dev = hr.held && hot_pull_wait(t->hot, &hr);
		pool_bags(t, r->locs, offsets, n_bags, pool, weights, dev ? hr.src : NULL, held, 1, dst);
		emdb_free(held);
	} else {
		gather(t, r->locs, n, hr.src, pos, dst); /* the host's part, meanwhile */
		if (hr.held && hot_pull_wait(t->hot, &hr))
			place_held(t, n, hr.src, pos, dst);
		else if (hr.held) /* the device failed meanwhile */
			gather(t, r->locs, n, NULL, pos, dst);
	}
	if (t->hot)
		hot_rows_free(t->hot, &hr);
	if (rep >= 0) {
		rc = hot_copy_in(t->hot, rep, out, dst, bytes);
		emdb_free(dst);
	}
	return rc;
}

static int pull_common(emdb_db *db, uint32_t id, const uint64_t *ids, size_t n, const emdb_ticket *tk,
		       const uint64_t *offsets, size_t n_bags, emdb_pool pool, const float *weights,
		       uint32_t dim, const uint32_t *pos, float *out)
{
	tbl *t;
	if (!out || (!tk && !ids))
		return emdb__seterr(EMDB_ERR_INVALID, "pull: NULL ids, ticket or output buffer");
	int rc = ops_open(db, id, tk, n, dim, &t);
	if (rc != EMDB_OK)
		return rc;
	if (tk)
		n = tk->n;
	if (offsets || n_bags) {
		rc = ops_check_bags(offsets, n_bags, n, pool);
		if (rc == EMDB_OK && weights)
			rc = ops_check_weights(weights, pool);
		if (rc != EMDB_OK)
			goto out;
	}

	ops_rows r;
	pthread_rwlock_rdlock(&t->rows_lock);
	if (tk)
		ops_rows_from_ticket(tk, &r);
	else
		rc = ops_rows_resolve(t, ids, n, &r);
	if (rc == EMDB_OK) {
		rc = pull_rows(t, &r, n, tk, offsets, n_bags, pool, weights, pos, out);
		ops_rows_done(&r);
	}
	pthread_rwlock_unlock(&t->rows_lock);
	if (rc == EMDB_OK) {
		TABLE_COUNT(t, calls_pull, 1);
		TABLE_COUNT(t, ids_pull, n);
	}
out:
	table_release(t);
	return rc;
}

int emdb_pull(emdb_db *db, uint32_t tid, const uint64_t *ids, size_t n, uint32_t dim, float *out)
{
	return pull_common(db, tid, ids, n, NULL, NULL, 0, EMDB_POOL_SUM, NULL, dim, NULL, out);
}

int emdb_pull_ticket(emdb_db *db, uint32_t tid, const emdb_ticket *t, uint32_t dim, float *out)
{
	if (!t)
		return emdb__seterr(EMDB_ERR_INVALID, "pull: ticket is NULL");
	return pull_common(db, tid, NULL, 0, t, NULL, 0, EMDB_POOL_SUM, NULL, dim, NULL, out);
}

int emdb_pull_bags(emdb_db *db, uint32_t tid, const uint64_t *ids, size_t n, const uint64_t *offsets,
		   size_t n_bags, emdb_pool pool, uint32_t dim, float *out)
{
	if (!offsets)
		return emdb__seterr(EMDB_ERR_INVALID, "pull_bags: offsets is NULL");
	return pull_common(db, tid, ids, n, NULL, offsets, n_bags, pool, NULL, dim, NULL, out);
}

int emdb_pull_bags_ticket(emdb_db *db, uint32_t tid, const emdb_ticket *t, const uint64_t *offsets,
			  size_t n_bags, emdb_pool pool, uint32_t dim, float *out)
{
	if (!t || !offsets)
		return emdb__seterr(EMDB_ERR_INVALID, "pull_bags: ticket or offsets is NULL");
	return pull_common(db, tid, NULL, 0, t, offsets, n_bags, pool, NULL, dim, NULL, out);
}

int emdb_pull_bags_weighted(emdb_db *db, uint32_t tid, const uint64_t *ids, size_t n, const uint64_t *offsets,
			    size_t n_bags, emdb_pool pool, const float *weights, uint32_t dim, float *out)
{
	if (!offsets || !weights)
		return emdb__seterr(EMDB_ERR_INVALID, "pull_bags_weighted: offsets or weights is NULL");
	return pull_common(db, tid, ids, n, NULL, offsets, n_bags, pool, weights, dim, NULL, out);
}

int emdb_pull_bags_weighted_ticket(emdb_db *db, uint32_t tid, const emdb_ticket *t, const uint64_t *offsets,
				   size_t n_bags, emdb_pool pool, const float *weights, uint32_t dim, float *out)
{
	if (!t || !offsets || !weights)
		return emdb__seterr(EMDB_ERR_INVALID, "pull_bags_weighted: ticket, offsets or weights is NULL");
	return pull_common(db, tid, NULL, 0, t, offsets, n_bags, pool, weights, dim, NULL, out);
}

int emdb__pull_at(emdb_db *db, uint32_t tid, const uint64_t *ids, size_t n, const emdb_ticket *tk, uint32_t dim,
		  const uint32_t *pos, float *out)
{
	if (!pos)
		return emdb__seterr(EMDB_ERR_INVALID, "pull: NULL positions");
	return pull_common(db, tid, tk ? NULL : ids, tk ? 0 : n, tk, NULL, 0, EMDB_POOL_SUM, NULL, dim, pos, out);
}

/* Read-only resolution: locs[i] = location or LOC_NONE.  Returns the
 * scratch block to free, or NULL on NOMEM. */
static void *find_rows(tbl *t, const uint64_t *ids, size_t n, uint64_t **locs, size_t *found)
{
	dit_plan plan;
	void *m = ops_scratch(n, t->shards, false, &plan, locs);
	if (!m)
		return NULL;
	dit_plan_build(t->index, ids, n, &plan);
	*found = dit_find(t->index, ids, &plan, *locs);
	return m;
}

static int lookup_common(emdb_db *db, uint32_t id, const uint64_t *ids, size_t n, uint32_t dim,
			 const uint32_t *pos, float *out, uint8_t *found)
{
	tbl *t;
	if (!ids || !out)
		return emdb__seterr(EMDB_ERR_INVALID, "lookup: ids or out is NULL");
	int rc = ops_open(db, id, NULL, n, dim, &t);
	if (rc != EMDB_OK)
		return rc;

	uint64_t *locs;
	size_t hits = 0;
	pthread_rwlock_rdlock(&t->rows_lock);
	void *m = find_rows(t, ids, n, &locs, &hits);
	if (m) {
		size_t bytes = (size_t)dim * sizeof(float);
		const emdb_table_config *c = &t->cfg;
		OPS_FOR_ROWS(t, locs, n, PULL_PREFETCH, i, r,
			float *o = out_row(out, pos, i, dim);
			if (r)
				memcpy(o, r, bytes);
			else if (c->lookup_default == EMDB_DEFAULT_INIT)
				emdb_init_row(c->init.kind, c->init.a, c->init.b, c->seed, t->id, ids[i], dim, o);
			else
				memset(o, 0, bytes);
			if (found)
				found[pos ? pos[i] : i] = r != NULL;
		);
	}
	pthread_rwlock_unlock(&t->rows_lock);
	if (m) {
		emdb_free(m);
		TABLE_COUNT(t, calls_lookup, 1);
		TABLE_COUNT(t, ids_lookup, n);
		TABLE_COUNT(t, lookup_misses, n - hits);
	} else {
		rc = EMDB_ERR_NOMEM;
	}
	table_release(t);
	return rc;
}

int emdb_lookup(emdb_db *db, uint32_t id, const uint64_t *ids, size_t n, uint32_t dim, float *out,
		uint8_t *found)
{
	return lookup_common(db, id, ids, n, dim, NULL, out, found);
}

int emdb__lookup_at(emdb_db *db, uint32_t id, const uint64_t *ids, size_t n, uint32_t dim, const uint32_t *pos,
		    float *out, uint8_t *found)
{
	if (!pos)
		return emdb__seterr(EMDB_ERR_INVALID, "lookup: NULL positions");
	return lookup_common(db, id, ids, n, dim, pos, out, found);
}

static int read_state_common(emdb_db *db, uint32_t id, const uint64_t *ids, size_t n, const uint32_t *pos,
			     float *state, uint8_t *found)
{
	tbl *t;
	if (!db || !ids || (!state && n))
		return emdb__seterr(EMDB_ERR_INVALID, "read_state: NULL argument");
	int rc = db_table_get(db, id, &t);
	if (rc != EMDB_OK)
		return rc;
	rc = table_check_batch(t, n, t->dim);
	if (rc == EMDB_OK && !state && t->state_floats)
		rc = emdb__seterr(EMDB_ERR_INVALID, "read_state: state is NULL");
	if (rc != EMDB_OK) {
		table_release(t);
		return rc;
	}

	uint64_t *locs;
	size_t hits;
	size_t sf = t->state_floats;
	pthread_rwlock_rdlock(&t->rows_lock);
	void *m = find_rows(t, ids, n, &locs, &hits);
	if (m) {
		for (size_t i = 0; i < n; i++) {
			float *o = sf ? out_row(state, pos, i, sf) : NULL;
			if (sf && locs[i] != LOC_NONE)
				memcpy(o, table_row(t, locs[i]) + t->dim, sf * sizeof(float));
			else if (sf)
				memset(o, 0, sf * sizeof(float));
			if (found)
				found[pos ? pos[i] : i] = locs[i] != LOC_NONE;
		}
	}
	pthread_rwlock_unlock(&t->rows_lock);
	emdb_free(m);
	table_release(t);
	return m ? EMDB_OK : EMDB_ERR_NOMEM;
}

int emdb_read_state(emdb_db *db, uint32_t id, const uint64_t *ids, size_t n, float *state, uint8_t *found)
{
	return read_state_common(db, id, ids, n, NULL, state, found);
}

int emdb__read_state_at(emdb_db *db, uint32_t id, const uint64_t *ids, size_t n, const uint32_t *pos,
			float *state, uint8_t *found)
{
	if (!pos)
		return emdb__seterr(EMDB_ERR_INVALID, "read_state: NULL positions");
	return read_state_common(db, id, ids, n, pos, state, found);
}
