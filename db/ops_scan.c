/*
 * ops_scan.c - a table's rows out and in, in bulk: Scan (emdb_table_scan,
 * pages of IDs with their rows and optimizer state, by cursor) and Load
 * (emdb_table_load, rows written for given IDs).  They are how pretrained
 * embeddings come in and how a model leaves for another system.
 *
 * A scan's cursor is a row number: rows are numbered in allocation order
 * and never move or go (db/chunk.h), so walking the numbers from 0 visits
 * every row once.  Each row records the ID it was made for
 * (chunk_set_id), which is how a page names its rows without walking the
 * index.
 *
 * Invariants:
 *   1. A page holds the table's rows_lock for reading while it copies, so
 *      no Update (nor Load) changes a row meanwhile: the page is
 *      consistent at one step, which it reports.
 *   2. A row is returned only once the index finds its ID at its location
 *      (dit_find, under the shard's lock, which also makes the row's
 *      initial bytes visible): a row still being inserted by a Prefetch,
 *      Pull or Push running meanwhile is skipped, never returned torn.
 *      Such a row was not there when the scan began.
 *   3. Load resolves its IDs (inserting absent ones, with their initial
 *      value) like Pull, then writes under rows_lock and update_lock for
 *      writing, as an Update does, marking each row for the next
 *      incremental checkpoint and keeping its old bytes for a checkpoint
 *      being written (ckpt_touch); a refused Load writes nothing.
 *
 * State changes: Load writes rows (and inserts IDs); Scan changes nothing.
 */
#include <string.h>

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "db/db_int.h"
#include "db/ops.h"

int emdb_table_scan(emdb_db *db, uint32_t id, uint64_t cursor, size_t max_rows, uint32_t dim, uint64_t *ids,
		    float *vecs, float *state, size_t *n_out, uint64_t *next_out, uint64_t *step_out)
{
	tbl *t;
	if (!ids || !vecs || !n_out || !next_out)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_table_scan: NULL ids, vecs, n_out or next_cursor");
	int rc = db_table_get(db, id, &t);
	if (rc != EMDB_OK)
		return rc;
	rc = table_check_batch(t, max_rows, dim);
	uint64_t total = chunk_rows(&t->rows);
	if (rc == EMDB_OK && cursor > total)
		rc = emdb__seterr(EMDB_ERR_INVALID,
				  "table '%s': cursor %llu is past its %llu rows (a cursor of another table, or the table was restored meanwhile): scan again from 0",
				  t->cfg.name, (unsigned long long)cursor, (unsigned long long)total);
	if (rc != EMDB_OK) {
		table_release(t);
		return rc;
	}
	uint64_t end = total - cursor < max_rows ? total : cursor + max_rows;
	size_t m = (size_t)(end - cursor), n = 0;
	size_t sf = state ? t->state_floats : 0;
	uint64_t step = 0;
	if (m) {
		uint64_t *cand, *locs;
		dit_plan plan;
		void *blk = ops_scratch(m, t->shards, false, &plan, &locs);
		cand = blk ? emdb_malloc(m * sizeof(uint64_t)) : NULL;
		if (!cand) {
			emdb_free(blk);
			table_release(t);
			return emdb__seterr(EMDB_ERR_NOMEM, "emdb_table_scan: no memory for a page of %zu rows", m);
		}
		for (size_t k = 0; k < m; k++)
			cand[k] = chunk_row_id(&t->rows, chunk_loc_of(&t->rows, cursor + k));
		pthread_rwlock_rdlock(&t->rows_lock);
		dit_plan_build(t->index, cand, m, &plan);
		(void)dit_find(t->index, cand, &plan, locs);
		for (size_t k = 0; k < m; k++) {
			uint64_t loc = chunk_loc_of(&t->rows, cursor + k);
			if (locs[k] != loc) /* invariant 2: not (yet) this row's ID */
				continue;
			const float *row = table_row(t, loc);
			ids[n] = cand[k];
			memcpy(vecs + n * dim, row, (size_t)dim * sizeof(float));
			if (sf)
				memcpy(state + n * sf, row + dim, sf * sizeof(float));
			n++;
		}
		step = __atomic_load_n(&t->step, __ATOMIC_RELAXED);
		pthread_rwlock_unlock(&t->rows_lock);
		emdb_free(cand);
		emdb_free(blk);
	} else {
		step = __atomic_load_n(&t->step, __ATOMIC_RELAXED);
	}
	*n_out = n;
	*next_out = end >= total ? 0 : end;
	if (step_out)
		*step_out = step;
	table_release(t);
	return EMDB_OK;
}

int emdb_table_load(emdb_db *db, uint32_t id, const uint64_t *ids, size_t n, uint32_t dim, const float *vecs,
		    const float *state)
{
	tbl *t;
	if (!ids || !vecs)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_table_load: ids or vecs is NULL");
	int rc = db_table_get(db, id, &t);
	if (rc != EMDB_OK)
		return rc;
	rc = table_check_batch(t, n, dim);
	if (rc != EMDB_OK) {
		table_release(t);
		return rc;
	}
	ops_rows r;
	rc = ops_rows_resolve(t, ids, n, &r);
	if (rc != EMDB_OK) {
		table_release(t);
		return rc;
	}
	size_t sf = state ? t->state_floats : 0;
	size_t bytes = (size_t)dim * sizeof(float);
	ops_update_lock(t);
	/* Stable while rows_lock is held for writing (db/ckpt_track.h). */
	ckpt_cow *cow = t->ck.cow;
	bool tracking = ckpt_tracking(&t->ck);
	uint32_t gen = t->ck.gen;
	for (size_t i = 0; i < n; i++) { /* in order: a repeated ID keeps its last row */
		float *row = table_row(t, r.locs[i]);
		ckpt_touch(&t->rows, cow, tracking, gen, r.locs[i], row);
		memcpy(row, vecs + i * dim, bytes);
		if (sf)
			memcpy(row + dim, state + i * sf, sf * sizeof(float));
	}
	ops_update_unlock(t);
	ops_rows_done(&r);
	table_release(t);
	return EMDB_OK;
}
