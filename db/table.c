/*
 * table.c - life cycle, batch checks, ID resolution and statistics of one
 * table (see table.h).
 *
 * Invariants:
 *   1. Every ID in the index has a fully initialized row: new rows are
 *      written (initial vector, initial optimizer state) by init_row() under
 *      the index shard's write lock, before the ID becomes findable.
 *   2. table_resolve either inserts every absent ID of the batch or none:
 *      index room and chunk rows are reserved first (the only steps that can
 *      fail), and the inserting sweep cannot fail.
 *   3. The table is freed only when refs drops to zero.
 *   4. Under a memory limit, a batch's growth (row chunks for every ID,
 *      index shards that must grow) is checked against it before any is
 *      mapped, so a batch the limit refuses maps nothing; chunk growth is
 *      all or nothing besides (db/chunk.c), so a batch that loses a race
 *      for the last bytes leaves at most index shards grown.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>

#include "base/alloc_int.h"
#include "base/error_int.h"
#include "db/init_math.h"
#include "db/optim_math.h"
#include "db/table.h"

int table_create(const emdb_table_config *cfg, uint32_t id, const emdb_db_config *dbc, tbl **out)
{
	tbl *t = emdb_calloc(1, sizeof(*t));
	if (!t)
		return EMDB_ERR_NOMEM;
	t->id = id;
	t->cfg = *cfg;
	t->dim = cfg->dim;
	t->state_floats = emdb_optimizer_state_floats(cfg->optimizer.kind, cfg->dim);
	t->shards = dbc->shards;
	t->max_batch = dbc->max_batch;
	t->refs = 1;

	int rc = chunk_store_init(&t->rows, ((size_t)t->dim + t->state_floats) * sizeof(float),
				  dbc->chunk_bytes);
	if (rc != EMDB_OK)
		goto fail_table;
	rc = dit_create(t->shards, &t->index);
	if (rc != EMDB_OK)
		goto fail_rows;
	t->grads_raw = emdb_calloc(1, (size_t)t->shards * (sizeof(table_grads) + 1) + 64);
	if (!t->grads_raw) {
		rc = EMDB_ERR_NOMEM;
		goto fail_index;
	}
	t->grads = (table_grads *)(((uintptr_t)t->grads_raw + 63) & ~(uintptr_t)63);
	t->apply.claimed = (uint8_t *)(t->grads + t->shards);
	for (uint32_t s = 0; s < t->shards; s++) {
		pthread_mutex_init(&t->grads[s].mu, NULL);
		gradmap_init(&t->grads[s].acc[0], t->dim);
		gradmap_init(&t->grads[s].acc[1], t->dim);
	}
	pthread_rwlockattr_t attr;
	pthread_rwlockattr_init(&attr);
	/* An Update must get in even while pulls keep arriving. */
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_mutex_init(&t->pushes_mu, NULL);
	pthread_mutex_init(&t->cfg_mu, NULL);
	pthread_rwlock_init(&t->update_lock, &attr);
	pthread_rwlock_init(&t->rows_lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	if (dbc->gpu_memory)
		t->hot = hot_open_for_table(dbc->gpu_memory, t->dim, &t->cfg.optimizer);
	*out = t;
	return EMDB_OK;

fail_index:
	dit_destroy(t->index);
fail_rows:
	chunk_store_destroy(&t->rows);
fail_table:
	emdb_free(t);
	return rc;
}

static void table_free(tbl *t)
{
	hot_destroy(t->hot);
	for (uint32_t s = 0; s < t->shards; s++) {
		gradmap_destroy(&t->grads[s].acc[0]);
		gradmap_destroy(&t->grads[s].acc[1]);
		gradrank_destroy(&t->grads[s].ranked[0]);
		gradrank_destroy(&t->grads[s].ranked[1]);
		pthread_mutex_destroy(&t->grads[s].mu);
	}
	emdb_free(t->grads_raw);
	dit_destroy(t->index);
	chunk_store_destroy(&t->rows);
	pthread_mutex_destroy(&t->pushes_mu);
	pthread_mutex_destroy(&t->cfg_mu);
	pthread_rwlock_destroy(&t->update_lock);
	pthread_rwlock_destroy(&t->rows_lock);
	emdb_free(t);
}

void table_acquire(tbl *t)
{
	__atomic_fetch_add(&t->refs, 1, __ATOMIC_RELAXED);
}

void table_release(tbl *t)
{
	if (t && __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) == 0)
		table_free(t);
}

int table_check_batch(const tbl *t, size_t n, uint32_t dim)
{
	if (n == 0 || n > t->max_batch)
		return emdb__seterr(EMDB_ERR_BATCH, "table '%s': batch of %zu IDs, allowed 1..%u", t->cfg.name, n,
				    t->max_batch);
	if (dim != t->dim)
		return emdb__seterr(EMDB_ERR_DIM, "table '%s': dim %u given, table has %u", t->cfg.name, dim,
				    t->dim);
	return EMDB_OK;
}

/* A fresh row for id, which it records (for scans) before the index
 * publishes it. */
static uint64_t new_row(void *ctx, uint64_t id)
{
	chunk_store *cs = &((tbl *)ctx)->rows;
	uint64_t loc = chunk_new_row(cs);
	chunk_set_id(cs, loc, id);
	return loc;
}

static void init_row(void *ctx, uint64_t id, uint64_t loc)
{
	tbl *t = ctx;
	float *row = table_row(t, loc);
	const emdb_table_config *c = &t->cfg;

	emdb_init_row(c->init.kind, c->init.a, c->init.b, c->seed, t->id, id, t->dim, row);
	emdb_opt_init_state(c->optimizer.kind, &c->optimizer, t->dim, row + t->dim);
}

int table_check_memory(const tbl *t, uint64_t need, const char *what, uint64_t count)
{
	if (!emdb_alloc_limit())
		return EMDB_OK;
	char phrase[EMDB_NAME_MAX + 96];
	snprintf(phrase, sizeof(phrase), "table '%s': %s %llu rows", t->cfg.name, what, (unsigned long long)count);
	return emdb__check_limit(need, phrase);
}

int table_resolve_prepare(tbl *t, const uint64_t *ids, size_t n, dit_plan *plan)
{
	return table_resolve_prepare_more(t, ids, n, plan, NULL);
}

int table_resolve_prepare_more(tbl *t, const uint64_t *ids, size_t n, dit_plan *plan, table_more_fn more)
{
	int rc = EMDB_OK;
	dit_plan_build(t->index, ids, n, plan);
	/* Invariant 4: the whole growth checked before any of it. */
	if (emdb_alloc_limit()) {
		uint64_t need = chunk_reserve_bytes(&t->rows, n) + dit_reserve_bytes(t->index, plan);
		rc = table_check_memory(t, need + (more ? more(t, plan) : 0), "room for a batch of", n);
	}
	if (rc != EMDB_OK)
		return rc;
	rc = dit_reserve(t->index, plan);
	if (rc != EMDB_OK)
		return rc;
	rc = chunk_reserve(&t->rows, n);
	if (rc != EMDB_OK)
		dit_unreserve(t->index, plan);
	return rc;
}

void table_resolve_commit(tbl *t, const uint64_t *ids, const dit_plan *plan, uint64_t *locs)
{
	dit_find_or_insert(t->index, ids, plan, locs, new_row, init_row, t, NULL);
	chunk_unreserve(&t->rows, plan->n);
}

void table_resolve_commit_raw(tbl *t, const uint64_t *ids, const dit_plan *plan, uint64_t *locs,
			      size_t *inserted)
{
	dit_find_or_insert(t->index, ids, plan, locs, new_row, NULL, t, inserted);
	chunk_unreserve(&t->rows, plan->n);
}

void table_resolve_abort(tbl *t, const dit_plan *plan)
{
	dit_unreserve(t->index, plan);
	chunk_unreserve(&t->rows, plan->n);
}

int table_resolve(tbl *t, const uint64_t *ids, size_t n, dit_plan *plan, uint64_t *locs)
{
	int rc = table_resolve_prepare(t, ids, n, plan);
	if (rc == EMDB_OK)
		table_resolve_commit(t, ids, plan, locs);
	return rc;
}

void table_stats(tbl *t, emdb_table_stats *out)
{
	dit_stats ds;
	memset(out, 0, sizeof(*out));
	dit_get_stats(t->index, &ds);

	out->rows = ds.count;
	out->step = __atomic_load_n(&t->step, __ATOMIC_RELAXED);
	out->bytes_vectors = ds.count * t->dim * sizeof(float);
	out->bytes_optimizer = ds.count * t->state_floats * sizeof(float);
	out->bytes_index = ds.bytes;
	out->index_resizes = ds.resizes;
	/* Rows pushed and not yet applied: the generation pushes add to now;
	 * the other one is empty unless an Update is applying it. */
	uint32_t gen = __atomic_load_n(&t->acc_gen, __ATOMIC_RELAXED);
	for (uint32_t s = 0; s < t->shards; s++) {
		pthread_mutex_lock(&t->grads[s].mu);
		out->pending_rows += t->grads[s].acc[gen].count + gradrank_rows(&t->grads[s].ranked[gen]);
		out->bytes_grads += gradmap_bytes(&t->grads[s].acc[0]) + gradmap_bytes(&t->grads[s].acc[1]) +
				    gradrank_bytes(&t->grads[s].ranked[0]) + gradrank_bytes(&t->grads[s].ranked[1]);
		pthread_mutex_unlock(&t->grads[s].mu);
	}
	uint64_t mapped = chunk_bytes_mapped(&t->rows);
	uint64_t used = out->bytes_vectors + out->bytes_optimizer;
	out->bytes_overhead = (mapped > used ? mapped - used : 0) + sizeof(*t) +
			      (uint64_t)t->shards * sizeof(table_grads);

#define LOAD_(f) out->f = __atomic_load_n(&t->ctr.f, __ATOMIC_RELAXED)
	LOAD_(calls_prefetch);
	LOAD_(calls_pull);
	LOAD_(calls_push);
	LOAD_(calls_update);
	LOAD_(calls_lookup);
	LOAD_(ids_prefetch);
	LOAD_(ids_pull);
	LOAD_(ids_push);
	LOAD_(ids_lookup);
	LOAD_(lookup_misses);
	LOAD_(rows_updated);
#undef LOAD_
}

void table_tier(tbl *t, emdb_tier_info *out)
{
	hot_stats hs;

	memset(out, 0, sizeof(*out));
	out->tier = "host";
	if (!t->hot)
		return;
	/* Written by Update under rows_lock: read under it too. */
	pthread_rwlock_rdlock(&t->rows_lock);
	hot_get_stats(t->hot, &hs);
	pthread_rwlock_unlock(&t->rows_lock);
	out->failed = hs.failed;
	if (hs.failed)
		return;
	out->tier = tier_kind_name(hs.kind);
	out->hot_rows = hs.rows;
	out->hot_capacity = hs.capacity;
	out->bytes_device = hs.bytes_device;
	out->devices = hs.replicas;
	out->rows_gathered = hs.rows_gathered;
	out->rows_direct = hs.rows_direct;
	out->rows_scattered = hs.rows_scattered;
	out->rows_staged = hs.rows_staged;
	out->steps_device = hs.steps_device;
	out->steps_replayed = hs.steps_replayed;
	out->steps_reduced = hs.steps_reduced;
	out->row_steps = hs.steps_applied;
	out->rows_resynced = hs.rows_resynced;
	out->fallbacks = hs.fallbacks;
}

int table_tier_device(tbl *t, uint32_t device, emdb_tier_device_info *out)
{
	int rc;

	if (!t->hot) {
		memset(out, 0, sizeof(*out));
		return emdb__seterr(EMDB_ERR_INVALID, "table '%s' keeps no replica on a device", t->cfg.name);
	}
	pthread_rwlock_rdlock(&t->rows_lock); /* as table_tier */
	rc = hot_get_device_stats(t->hot, device, out);
	pthread_rwlock_unlock(&t->rows_lock);
	return rc;
}
