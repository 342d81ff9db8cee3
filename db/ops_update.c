/*
 * ops_update.c - Update: apply each table's optimizer to every row that
 * holds an accumulated gradient, then clear the accumulators.
 *
 * The table's update_lock is taken for writing: the pushes that fed this
 * step have all finished, and no Pull can see a row half-updated.  Rows
 * are visited shard by shard in accumulator order with their memory
 * prefetched a few rows ahead; the optimizer kind is dispatched once per
 * shard, not per row.
 *
 * Invariants:
 *   1. step advances by exactly one per Update, before the rule is
 *      evaluated (so the first Update runs with step 1, as torch does).
 *   2. Only rows with an accumulator are written; all others stay
 *      bit-identical.  After the call no accumulator remains.
 */
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
						 row_bytes);                      \
			rowfn(&sc, dim, table_row(t, m->locs[j]), m->grads + (size_t)j * dim); \
		}                                                                 \
	} while (0)

static void apply_shard(tbl *t, gradmap *m, const emdb_opt_scalars *scp)
{
	emdb_opt_scalars sc = *scp;
	uint32_t dim = t->dim;
	uint32_t cnt = m->count;
	size_t row_bytes = ((size_t)dim + t->state_floats) * sizeof(float);

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

static uint64_t update_table(tbl *t)
{
	uint64_t rows = 0;
	emdb_opt_scalars sc;

	pthread_rwlock_wrlock(&t->update_lock);
	uint64_t step = t->step + 1;
	__atomic_store_n(&t->step, step, __ATOMIC_RELAXED);
	emdb_opt_scalars_for_step(&t->cfg.optimizer, step, t->dim, &sc);
	for (uint32_t s = 0; s < t->shards; s++) {
		/* The write lock already excludes every pusher; the mutex is
		 * taken only so that statistics readers see a settled map. */
		pthread_mutex_lock(&t->grads[s].mu);
		gradmap *m = &t->grads[s].map;
		if (m->count) {
			apply_shard(t, m, &sc);
			rows += m->count;
			gradmap_clear(m);
		}
		pthread_mutex_unlock(&t->grads[s].mu);
	}
	pthread_rwlock_unlock(&t->update_lock);
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
