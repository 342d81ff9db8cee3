/*
 * ops_update.c - Update: apply each table's optimizer to every row that
 * holds an accumulated gradient, then clear the accumulators.
 *
 * An Update runs in two parts.  First, holding update_lock for writing (so
 * no push is between its reservation and its adds) and rows_lock for
 * writing (so no reader is inside a row and the previous Update has
 * finished), it advances the step and swaps every shard's accumulators
 * out for the empty ones kept from last time.  Then it lets pushes go on
 * into the fresh accumulators and, still holding rows_lock, applies the
 * optimizer to the swapped-out rows.  So pushes for the next step overlap
 * with this step's optimizer work, while Pulls wait for it.
 *
 * Before a row changes it is marked dirty for the next incremental
 * checkpoint, and, while a checkpoint is being written, its old bytes are
 * kept if the checkpoint still needs them (db/ckpt_track.h).
 *
 * Rows are visited shard by shard in accumulator order with their memory
 * prefetched for writing a few rows ahead; the optimizer kind is dispatched
 * once per shard, not per row.  A row belongs to one shard, so shards can
 * be applied by different threads: another thread calling Update on the
 * same table while this one applies claims shards of this pass first (it
 * would have to wait for it anyway), and only then runs its own Update.
 *
 * Invariants:
 *   1. step advances by exactly one per Update, before the rule is
 *      evaluated (so the first Update runs with step 1, as torch does), and
 *      Updates apply in step order (rows_lock is taken before update_lock
 *      is released).
 *   2. Only rows with an accumulator are written; all others stay
 *      bit-identical.  Every gradient pushed before the call started is
 *      applied by it.
 *   3. Each shard of a pass is applied and cleared by exactly one thread
 *      (claimed with an atomic cursor); the owner of the pass keeps
 *      rows_lock until every claimed shard is done and no helper is still
 *      inside the pass, so the pass's state is reused only when idle.
 */
#include <sched.h>

#include <emdb/alloc.h>

#include "db/db_int.h"
#include "db/error_int.h"
#include "db/optim_math.h"
#include "db/ops.h"

#define APPLY_LOOP(rowfn)                                                         \
	do {                                                                      \
		for (uint32_t j = 0; j < cnt; j++) {                              \
			if (j + OPS_PREFETCH_ROWS < cnt)                          \
				ops_prefetch_row_w(table_row(t, m->locs[j + OPS_PREFETCH_ROWS]), \
						   row_bytes);                    \
			float *row_ = table_row(t, m->locs[j]);                   \
			ckpt_touch(&t->rows, cow, gen, m->locs[j], row_);         \
			rowfn(&sc, dim, row_, m->grads + (size_t)j * dim);        \
		}                                                                 \
	} while (0)

static void apply_shard(const tbl *t, const gradmap *m, const emdb_opt_scalars *scp)
{
	emdb_opt_scalars sc = *scp;
	uint32_t dim = t->dim;
	uint32_t cnt = m->count;
	size_t row_bytes = ((size_t)dim + t->state_floats) * sizeof(float);
	/* Stable during the pass: the switch changes them holding rows_lock. */
	ckpt_cow *cow = t->ck.cow;
	uint32_t gen = t->ck.gen;

	for (uint32_t j = 0; j < cnt && j < OPS_PREFETCH_ROWS; j++)
		ops_prefetch_row_w(table_row(t, m->locs[j]), row_bytes);
	switch (t->cfg.optimizer.kind) {
	case EMDB_OPT_SGD:
		APPLY_LOOP(emdb_opt_sgd_row);
		break;
	case EMDB_OPT_ADAGRAD:
		APPLY_LOOP(emdb_opt_adagrad_row);
		break;
	case EMDB_OPT_ROWWISE_ADAGRAD:
		APPLY_LOOP(emdb_opt_rowwise_adagrad_row);
		break;
	case EMDB_OPT_ADAM:
		APPLY_LOOP(emdb_opt_adam_row);
		break;
	case EMDB_OPT_FTRL:
		APPLY_LOOP(emdb_opt_ftrl_row);
		break;
	}
}

/* Apply and clear shard s of the pass in progress. */
static void apply_claimed(tbl *t, uint32_t s)
{
	table_grads *g = &t->grads[s];
	uint32_t cnt = g->applying.count;
	if (cnt) {
		apply_shard(t, &g->applying, &t->apply.sc);
		__atomic_fetch_add(&t->apply.rows, cnt, __ATOMIC_RELAXED);
		/* Sizes change under mu: statistics read them. */
		pthread_mutex_lock(&g->mu);
		gradmap_clear(&g->applying);
		pthread_mutex_unlock(&g->mu);
	}
	__atomic_fetch_add(&t->apply.done, 1, __ATOMIC_RELEASE);
}

/* Claim and apply shards until none is left. */
static void apply_claims(tbl *t)
{
	uint32_t s;
	while ((s = __atomic_fetch_add(&t->apply.next, 1, __ATOMIC_ACQ_REL)) < t->shards)
		apply_claimed(t, s);
}

/* If another thread's Update is applying, help it finish. */
static void help_apply(tbl *t)
{
	table_apply *a = &t->apply;
	if (!__atomic_load_n(&a->active, __ATOMIC_ACQUIRE))
		return;
	__atomic_fetch_add(&a->helpers, 1, __ATOMIC_ACQ_REL);
	if (__atomic_load_n(&a->active, __ATOMIC_ACQUIRE))
		apply_claims(t);
	__atomic_fetch_sub(&a->helpers, 1, __ATOMIC_ACQ_REL);
}

static uint64_t update_table(tbl *t)
{
	table_apply *a = &t->apply;

	help_apply(t);
	pthread_rwlock_wrlock(&t->update_lock);
	help_apply(t); /* the pass may have opened while we waited */
	pthread_rwlock_wrlock(&t->rows_lock);
	uint64_t step = t->step + 1;
	__atomic_store_n(&t->step, step, __ATOMIC_RELAXED);
	for (uint32_t s = 0; s < t->shards; s++) {
		table_grads *g = &t->grads[s];
		pthread_mutex_lock(&g->mu);
		gradmap tmp = g->map;
		g->map = g->applying;
		g->applying = tmp;
		pthread_mutex_unlock(&g->mu);
	}
	pthread_rwlock_unlock(&t->update_lock);

	/* Open the pass: no helper is inside (invariant 3), so its state is
	 * ours to reset; `active` publishes it. */
	emdb_opt_scalars_for_step(&t->cfg.optimizer, step, t->dim, &a->sc);
	__atomic_store_n(&a->next, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&a->done, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&a->rows, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&a->active, 1, __ATOMIC_RELEASE);
	apply_claims(t);
	while (__atomic_load_n(&a->done, __ATOMIC_ACQUIRE) < t->shards)
		sched_yield();
	__atomic_store_n(&a->active, 0, __ATOMIC_RELEASE);
	while (__atomic_load_n(&a->helpers, __ATOMIC_ACQUIRE))
		sched_yield();
	uint64_t rows = __atomic_load_n(&a->rows, __ATOMIC_RELAXED);
	pthread_rwlock_unlock(&t->rows_lock);
	TABLE_COUNT(t, calls_update, 1);
	TABLE_COUNT(t, rows_updated, rows);
	return rows;
}

int emdb_update(emdb_db *db, uint32_t id, uint64_t *rows_out)
{
	tbl *t;
	int rc = db_table_get(db, id, &t);
	if (rc != EMDB_OK)
		return rc;
	uint64_t rows = update_table(t);
	table_release(t);
	if (rows_out)
		*rows_out = rows;
	return EMDB_OK;
}

int emdb_update_all(emdb_db *db, uint64_t *rows_out)
{
	tbl **v;
	uint32_t n;
	uint64_t rows = 0;
	if (!db)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_update_all: db is NULL");
	int rc = db_tables_snapshot(db, &v, &n);
	if (rc != EMDB_OK)
		return rc;
	for (uint32_t i = 0; i < n; i++) {
		rows += update_table(v[i]);
		table_release(v[i]);
	}
	emdb_free(v);
	if (rows_out)
		*rows_out = rows;
	return EMDB_OK;
}
