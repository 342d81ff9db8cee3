/*
 * baseline.c - the global-lock indexing baseline (HypeReca 6.3, Figure 15).
 *
 * Design
 *   The baseline is built from the engine's own parts so that the ratio
 *   measures the design, not two hash tables: the same index (index/dit.c)
 *   created with one shard, so its shard lock is one global read-write
 *   lock, and the same row store (db/chunk.c) and initializer.  What it
 *   leaves out is exactly what HypeReca adds: every ID is a batch of one
 *   (its own plan, reservation and locked find-or-insert, no grouping by
 *   shard, no probe prefetch across IDs), and all threads meet on one lock.
 *
 *   Per ID: dit_plan_build of one ID, dit_reserve (write lock), then
 *   dit_find_or_insert (write lock again), whose new-row callback reserves
 *   one row (chunk_reserve, the store's mutex), takes it and writes its
 *   initial value with emdb_init_row, as the engine's callback does.  Only
 *   new IDs pay for the row store; the engine pays one reservation per
 *   batch instead.
 *
 *   The preloaded IDs get a placeholder location and no row: neither
 *   Prefetch nor this baseline reads the row of an ID it finds, so the
 *   gigabytes of rows behind them would change nothing but the run's
 *   memory.  The index is sized for the preload plus the headroom up front,
 *   so that no one-shard resize (a rehash of the whole table under the
 *   global lock) lands in a measurement and makes the baseline look worse
 *   than it is; its load factor is then lower than the engine's, which only
 *   favours the baseline.
 *
 * Invariants
 *   1. The ID stream is the Prefetch workload's: same pool, same new-ID
 *      counters, which persist across measurements as the workload's do.
 *   2. Every new ID gets a real, initialized row.
 */
#include "tools/bench/baseline.h"

#include <stdlib.h>
#include <string.h>

#include "db/chunk.h"
#include "db/init_math.h"
#include "db/optim_math.h"
#include "index/dit.h"
#include "tools/bench/keys.h"
#include "tools/bench/preload.h"

#define PRELOAD_BATCH 65536u

struct baseline {
	dit *index;
	chunk_store rows;
	emdb_table_config cfg;
	uint32_t table_id;
	uint32_t state_floats;
	uint64_t preloaded;
	uint64_t *ids[HARNESS_MAX_THREADS];   /* batch buffers */
	struct {
		uint64_t fresh_next;          /* new-ID counter, see pool_fresh_batch */
		uint64_t inserted;
		uint64_t ids;
		uint64_t sink;
	} __attribute__((aligned(64))) th[HARNESS_MAX_THREADS];
	const pool *p;
};

static uint64_t placeholder_row(void *ctx, uint64_t id)
{
	return loc_pack(0, LOC_TIER_HOST, 0, 0);
}

/* The engine's new-row work (db/table.c), plus the per-ID reservation. */
static uint64_t new_row(void *ctx, uint64_t id)
{
	baseline *b = ctx;
	const emdb_table_config *c = &b->cfg;
	uint64_t loc;
	float *row;
	int rc = chunk_reserve(&b->rows, 1);

	if (rc != EMDB_OK)
		preload_die_engine("chunk_reserve (baseline)", rc);
	loc = chunk_new_row(&b->rows);
	chunk_unreserve(&b->rows, 1);
	row = (float *)chunk_row(&b->rows, loc);
	emdb_init_row(c->init.kind, c->init.a, c->init.b, c->seed, b->table_id,
		      id, c->dim, row);
	emdb_opt_init_state(c->optimizer.kind, &c->optimizer, c->dim, row + c->dim);
	return loc;
}

/* Make the single shard big enough for `extra` more IDs, once. */
static void presize(baseline *b, uint64_t extra)
{
	uint32_t start[2] = { 0, (uint32_t)extra };
	dit_plan plan = { .n = extra, .start = start };
	int rc;

	if (extra > UINT32_MAX)
		harness_die("baseline: %llu rows is more than one shard can plan",
			    (unsigned long long)extra);
	rc = dit_reserve(b->index, &plan);
	if (rc != EMDB_OK)
		preload_die_engine("dit_reserve (baseline presize)", rc);
	dit_unreserve(b->index, &plan);
}

baseline *baseline_create(const emdb_table_config *cfg, uint32_t table_id,
			  uint64_t rows, uint64_t headroom)
{
	baseline *b = calloc(1, sizeof(*b));
	uint64_t *ids = malloc(sizeof(uint64_t) * PRELOAD_BATCH);
	uint64_t *hash = malloc(sizeof(uint64_t) * PRELOAD_BATCH);
	uint32_t *order = malloc(sizeof(uint32_t) * PRELOAD_BATCH);
	uint64_t *locs = malloc(sizeof(uint64_t) * PRELOAD_BATCH);
	uint32_t start[2];
	keys_perm perm;
	double t0 = harness_now();
	int rc;

	if (!b || !ids || !hash || !order || !locs)
		harness_die("out of memory");
	b->cfg = *cfg;
	b->table_id = table_id;
	b->preloaded = rows;
	b->state_floats = emdb_optimizer_state_floats(cfg->optimizer.kind, cfg->dim);
	rc = dit_create(1, &b->index);
	if (rc != EMDB_OK)
		preload_die_engine("dit_create (baseline)", rc);
	rc = chunk_store_init(&b->rows, ((size_t)cfg->dim + b->state_floats) * sizeof(float),
			      2u << 20);
	if (rc != EMDB_OK)
		preload_die_engine("chunk_store_init (baseline)", rc);
	presize(b, rows + headroom);

	keys_perm_init(&perm, rows, 0x9e10adull ^ cfg->dim);
	for (uint64_t lo = 0; lo < rows; lo += PRELOAD_BATCH) {
		size_t n = rows - lo < PRELOAD_BATCH ? (size_t)(rows - lo) : PRELOAD_BATCH;
		dit_plan plan = { .hash = hash, .order = order, .start = start };

		for (size_t i = 0; i < n; i++)
			ids[i] = keys_id(keys_perm_apply(&perm, lo + i) + 1);
		dit_plan_build(b->index, ids, n, &plan);
		rc = dit_reserve(b->index, &plan);
		if (rc != EMDB_OK)
			preload_die_engine("dit_reserve (baseline preload)", rc);
		dit_find_or_insert(b->index, ids, &plan, locs, placeholder_row, NULL, b, NULL);
	}
	harness_log("preloaded the global-lock baseline: %llu IDs in %.1f s",
		    (unsigned long long)rows, harness_now() - t0);
	free(ids);
	free(hash);
	free(order);
	free(locs);
	return b;
}

static uint64_t baseline_step(void *arg, unsigned t, uint64_t iter)
{
	baseline *b = arg;
	const pool *p = b->p;
	uint64_t *ids = b->ids[t];
	uint64_t sink = 0, added = 0;

	pool_fresh_batch(p, t, iter, b->preloaded + 1, &b->th[t].fresh_next, ids);
	for (size_t i = 0; i < p->batch; i++) {
		uint64_t hash, loc;
		uint32_t order, start[2];
		dit_plan plan = { .hash = &hash, .order = &order, .start = start };
		size_t inserted;
		int rc;

		dit_plan_build(b->index, &ids[i], 1, &plan);
		rc = dit_reserve(b->index, &plan);
		if (rc != EMDB_OK)
			preload_die_engine("dit_reserve (baseline)", rc);
		dit_find_or_insert(b->index, &ids[i], &plan, &loc, new_row, NULL, b, &inserted);
		added += inserted;
		sink += loc;
	}
	b->th[t].inserted += added;
	b->th[t].ids += p->batch;
	b->th[t].sink += sink;
	return p->batch;
}

void baseline_measure(baseline *b, const pool *p, unsigned threads,
		      double seconds, harness_result *out, double *new_frac)
{
	uint64_t ins = 0, all = 0;

	b->p = p;
	for (unsigned t = 0; t < threads; t++) {
		b->ids[t] = malloc(sizeof(uint64_t) * p->batch);
		if (!b->ids[t])
			harness_die("out of memory");
		b->th[t].inserted = b->th[t].ids = 0;
	}
	harness_measure(threads, seconds, baseline_step, b, out);
	for (unsigned t = 0; t < threads; t++) {
		ins += b->th[t].inserted;
		all += b->th[t].ids;
		free(b->ids[t]);
		b->ids[t] = NULL;
	}
	*new_frac = all ? (double)ins / (double)all : 0;
	harness_log("global-lock baseline, %u thread(s): %.2fM IDs/s, %.1f%% new",
		    threads, out->best / 1e6, 100 * *new_frac);
}

void baseline_destroy(baseline *b)
{
	if (!b)
		return;
	dit_destroy(b->index);
	chunk_store_destroy(&b->rows);
	free(b);
}
