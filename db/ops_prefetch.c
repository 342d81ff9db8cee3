/*
 * ops_prefetch.c - Prefetch and tickets, and the shared entry checks of the
 * data-plane calls.
 *
 * A ticket is the result of resolving a batch once: each position's row
 * location plus the positions grouped by index shard.  Pull and Push on a
 * ticket skip the index entirely (HypeReca 3: Prefetch runs in the data
 * loader, ahead of the training step).  The locations are kept twice: in
 * request order for Pull, and in shard order (slocs) for Push, whose adds
 * walk the batch shard by shard; reading locs[order[j]] there instead
 * cost a cache miss per ID (Push+Update 5-25% slower on Zipf batches).
 *
 * Invariants:
 *   1. A ticket holds a reference on its table, so its locations stay
 *      valid memory even if the table is dropped; the calls that use it
 *      re-check that the table is still live (NO_TABLE otherwise).
 *   2. Rows never move while a table lives (no reshard yet), so a ticket's
 *      locations stay correct across Updates.
 */
#include <string.h>

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "db/db_int.h"
#include "db/ops.h"

void *ops_scratch(size_t n, uint32_t shards, bool slocs, dit_plan *plan, uint64_t **locs)
{
	size_t words = slocs ? 3 : 2; /* hash, locs [, slocs] */
	size_t bytes = n * (words * sizeof(uint64_t) + sizeof(uint32_t)) + ((size_t)shards + 1) * sizeof(uint32_t);
	uint8_t *m = emdb_malloc(bytes);
	if (!m)
		return NULL;
	plan->hash = (uint64_t *)m;
	*locs = plan->hash + n;
	plan->order = (uint32_t *)(plan->hash + words * n);
	plan->start = plan->order + n;
	return m;
}

/* With slocs, room for the shard-ordered copy of the locations (Push). */
static int prepare(tbl *t, const uint64_t *ids, size_t n, bool slocs, table_more_fn more, ops_rows *r)
{
	uint64_t *locs;
	void *m = ops_scratch(n, t->shards, slocs, &r->plan, &locs);
	if (!m)
		return EMDB_ERR_NOMEM;
	int rc = table_resolve_prepare_more(t, ids, n, &r->plan, more);
	if (rc != EMDB_OK) {
		emdb_free(m);
		return rc;
	}
	r->n = n;
	r->locs = locs;
	r->slocs = slocs ? locs + n : NULL;
	r->order = r->plan.order;
	r->start = r->plan.start;
	r->mem = m;
	return EMDB_OK;
}

int ops_rows_prepare(tbl *t, const uint64_t *ids, size_t n, table_more_fn more, ops_rows *r)
{
	return prepare(t, ids, n, true, more, r);
}

void ops_rows_commit(tbl *t, const uint64_t *ids, ops_rows *r)
{
	/* locs and slocs point into our own scratch block (ops_scratch). */
	table_resolve_commit(t, ids, &r->plan, (uint64_t *)r->locs);
	ops_shard_order(r->locs, r->order, r->n, (uint64_t *)r->slocs);
}

void ops_shard_order(const uint64_t *locs, const uint32_t *order, size_t n, uint64_t *slocs)
{
	for (size_t j = 0; j < n; j++)
		slocs[j] = locs[order[j]];
}

void ops_rows_abort(tbl *t, ops_rows *r)
{
	table_resolve_abort(t, &r->plan);
}

int ops_rows_resolve(tbl *t, const uint64_t *ids, size_t n, ops_rows *r)
{
	/* Readers: locations in request order only. */
	int rc = prepare(t, ids, n, false, NULL, r);
	if (rc == EMDB_OK)
		table_resolve_commit(t, ids, &r->plan, (uint64_t *)r->locs);
	return rc;
}

void ops_rows_from_ticket(const emdb_ticket *tk, ops_rows *r)
{
	r->n = tk->n;
	r->locs = tk->locs;
	r->slocs = tk->slocs;
	r->order = tk->order;
	r->start = tk->start;
	r->mem = NULL;
}

void ops_rows_done(ops_rows *r)
{
	emdb_free(r->mem);
	r->mem = NULL;
}

int ops_open(emdb_db *db, uint32_t id, const emdb_ticket *tk, size_t n, uint32_t dim, tbl **out)
{
	tbl *t;
	int rc = db_table_get(db, id, &t);
	if (rc != EMDB_OK)
		return rc;
	if (tk && tk->t != t) {
		rc = emdb__seterr(EMDB_ERR_TICKET, "ticket of table %u used on table '%s' (id %u)", tk->table_id,
				  t->cfg.name, t->id);
	} else {
		rc = table_check_batch(t, tk ? tk->n : n, dim);
	}
	if (rc != EMDB_OK) {
		table_release(t);
		return rc;
	}
	*out = t;
	return EMDB_OK;
}

int ops_check_bags(const uint64_t *offsets, size_t n_bags, size_t n, emdb_pool pool)
{
	if (pool != EMDB_POOL_SUM && pool != EMDB_POOL_MEAN)
		return emdb__seterr(EMDB_ERR_INVALID, "unknown pooling mode %d", (int)pool);
	if (!offsets)
		return emdb__seterr(EMDB_ERR_INVALID, "offsets is NULL");
	if (n_bags == 0)
		return emdb__seterr(EMDB_ERR_BATCH, "no bags: n_bags must be at least 1");
	if (offsets[0] != 0 || offsets[n_bags] != n)
		return emdb__seterr(EMDB_ERR_INVALID, "offsets must start at 0 and end at %zu (got %llu..%llu)", n,
				    (unsigned long long)offsets[0], (unsigned long long)offsets[n_bags]);
	for (size_t b = 0; b < n_bags; b++)
		if (offsets[b + 1] < offsets[b])
			return emdb__seterr(EMDB_ERR_INVALID, "offsets decrease at bag %zu", b);
	return EMDB_OK;
}

int ops_check_weights(const float *weights, emdb_pool pool)
{
	if (!weights)
		return emdb__seterr(EMDB_ERR_INVALID, "weights is NULL");
	if (pool != EMDB_POOL_SUM)
		return emdb__seterr(EMDB_ERR_INVALID,
				    "per-sample weights need pooling SUM (as torch.nn.EmbeddingBag's per_sample_weights), not MEAN");
	return EMDB_OK;
}

int emdb_prefetch(emdb_db *db, uint32_t id, const uint64_t *ids, size_t n, emdb_ticket **out)
{
	tbl *t;
	if (!ids || !out)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_prefetch: ids or out is NULL");
	int rc = db_table_get(db, id, &t);
	if (rc != EMDB_OK)
		return rc;
	rc = table_check_batch(t, n, t->dim);
	if (rc != EMDB_OK)
		goto out_release;

	size_t bytes = sizeof(emdb_ticket) + n * (2 * sizeof(uint64_t) + sizeof(uint32_t)) +
		       ((size_t)t->shards + 1) * sizeof(uint32_t);
	emdb_ticket *tk = emdb_malloc(bytes);
	uint64_t *hash = emdb_malloc(n * sizeof(*hash));
	if (!tk || !hash) {
		emdb_free(tk);
		emdb_free(hash);
		rc = EMDB_ERR_NOMEM;
		goto out_release;
	}
	tk->t = t;
	tk->table_id = t->id;
	tk->shards = t->shards;
	tk->n = n;
	tk->locs = (uint64_t *)(tk + 1);
	tk->slocs = tk->locs + n;
	tk->order = (uint32_t *)(tk->slocs + n);
	tk->start = tk->order + n;

	dit_plan plan = { .n = n, .hash = hash, .order = tk->order, .start = tk->start };
	rc = table_resolve(t, ids, n, &plan, tk->locs);
	emdb_free(hash);
	if (rc != EMDB_OK) {
		emdb_free(tk);
		goto out_release;
	}
	ops_shard_order(tk->locs, tk->order, n, tk->slocs);
	tk->staged = NULL;
	if (t->hot) { /* a promise of use: counted, and its rows staged */
		hot_note(t->hot, tk->locs, n);
		pthread_rwlock_rdlock(&t->rows_lock);
		tk->staged = hot_stage(t->hot, &t->rows, tk->locs, n);
		pthread_rwlock_unlock(&t->rows_lock);
	}
	TABLE_COUNT(t, calls_prefetch, 1);
	TABLE_COUNT(t, ids_prefetch, n);
	*out = tk; /* the ticket keeps our reference on t */
	return EMDB_OK;

out_release:
	table_release(t);
	return rc;
}

void emdb_ticket_free(emdb_ticket *tk)
{
	if (!tk)
		return;
	hot_staged_free(tk->staged);
	table_release(tk->t);
	emdb_free(tk);
}

size_t emdb_ticket_count(const emdb_ticket *tk)
{
	return tk ? tk->n : 0;
}

uint32_t emdb_ticket_table(const emdb_ticket *tk)
{
	return tk ? tk->table_id : 0;
}
