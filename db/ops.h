/*
 * ops.h - pieces shared by the data-plane operations (ops_*.c): the ticket,
 * the rows of a batch whether they come from IDs or from a ticket, and
 * argument checks.  Internal to libemdb.
 */
#ifndef EMDB_OPS_H
#define EMDB_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <emdb/db.h>

#include "db/table.h"

/* One allocation: the struct, then locs[n], order[n], start[shards+1]. */
struct emdb_ticket {
	tbl *t;         /* holds a reference */
	uint32_t table_id;
	uint32_t shards;
	size_t n;
	uint64_t *locs;
	uint64_t *slocs;  /* slocs[j] = locs[order[j]]: in shard order, for Push */
	uint32_t *order;
	uint32_t *start;
	hot_staged *staged; /* rows its Prefetch staged in the device replica, or NULL */
};

/* The resolved rows of one batch: locations in request order and their
 * grouping by index shard (for Push).  Borrowed from a ticket or owned. */
typedef struct ops_rows {
	size_t n;
	const uint64_t *locs;
	const uint64_t *slocs;   /* locs[order[j]] at j: Push reads them in order */
	const uint32_t *order;
	const uint32_t *start;
	void *mem;        /* owned scratch, NULL when borrowed */
	dit_plan plan;    /* when resolving IDs */
} ops_rows;

/* Resolving ids (inserting absent ones) into r, in two steps as
 * table_resolve_*: ops_rows_prepare groups and reserves (order and start
 * are valid afterwards, locs not yet); ops_rows_commit fills locs and slocs and cannot
 * fail; ops_rows_abort undoes prepare.  Needs no table lock (new rows are
 * invisible until published by the index).  Errors: NOMEM, LIMIT; nothing
 * is inserted then.  more: as table_resolve_prepare_more. */
int ops_rows_prepare(tbl *t, const uint64_t *ids, size_t n, table_more_fn more, ops_rows *r);
void ops_rows_commit(tbl *t, const uint64_t *ids, ops_rows *r);
void ops_rows_abort(tbl *t, ops_rows *r);
/* prepare + commit, for readers: slocs is left NULL (only Push reads it) */
int ops_rows_resolve(tbl *t, const uint64_t *ids, size_t n, ops_rows *r);
/* slocs[j] = locs[order[j]] for j < n. */
void ops_shard_order(const uint64_t *locs, const uint32_t *order, size_t n, uint64_t *slocs);
void ops_rows_from_ticket(const emdb_ticket *tk, ops_rows *r);
/* Frees what prepare allocated; also after abort. */
void ops_rows_done(ops_rows *r);

/* Take table `id` for a data call: a reference, plus the checks common to
 * all batch calls.  With a ticket, also that it belongs to the table and
 * the batch size is the ticket's.  On success the caller must table_release.
 */
int ops_open(emdb_db *db, uint32_t id, const emdb_ticket *tk, size_t n, uint32_t dim, tbl **out);

/* Check bag offsets: n_bags+1 entries from 0 to n, never decreasing. */
int ops_check_bags(const uint64_t *offsets, size_t n_bags, size_t n, emdb_pool pool);
/* Check per-sample weights after ops_check_bags: not NULL, pooling SUM. */
int ops_check_weights(const float *weights, emdb_pool pool);

/* One block for a plan of n IDs and its locations: n hashes, n locs (and,
 * with slocs, n more right after them: ops_rows' shard-ordered copy), n
 * positions and shards+1 group starts.  Free it with emdb_free. */
void *ops_scratch(size_t n, uint32_t shards, bool slocs, dit_plan *plan, uint64_t **locs);

/* For an Update applying accumulator generation gen: if a push of that
 * generation still has gradients to add to shard s and nobody has taken
 * them, add them here (ops_push.c).  Returns whether it did.  Holds no
 * lock on return. */
bool ops_push_help(tbl *t, uint32_t gen, uint32_t s);

/* Bytes reserving accumulator room for a batch grouped by start[] would
 * add (ops_push.c), in the generation pushes add to now: in every shard
 * of the batch, or with pending_only only in those holding gradients
 * already (the fused Push-and-Update's).  For the memory check before a
 * push maps anything; takes each shard's gradient mutex. */
uint64_t ops_grads_bytes(tbl *t, const uint32_t *start, bool pending_only);
/* The same for a push of worker `rank` (EMDB_WORKER_NONE: none), whose
 * worker accumulators grow too (db/gradrank.h). */
uint64_t ops_grads_bytes_as(tbl *t, const uint32_t *start, bool pending_only, uint32_t rank);

/* An Update in steps, for calls that do more inside one (ops_update.c):
 *   ops_update_lock     rows_lock, then update_lock, for writing (helping
 *                       a pass under way while it waits);
 *   ops_update_unlock   gives both back, for a caller that failed before
 *                       opening: nothing changed;
 *   ops_update_open     advances the step, flips the accumulator
 *                       generation (returned: the one this pass applies),
 *                       drops update_lock and opens the pass to helpers;
 *   ops_update_apply    applies the pass's optimizer to rows given by the
 *                       caller, which must own them (no shard of the pass
 *                       holds them; a LOC_NONE entry is skipped):
 *                       published to the pass, so its helpers claim runs
 *                       of them too; the arrays must stay until
 *                       ops_update_close returns, which counts those rows;
 *                       grads_ahead: prefetch the gradients with the rows
 *                       (for a buffer larger than the core's cache);
 *   ops_update_close    applies every shard of the pass, waits for its
 *                       helpers, drops rows_lock and counts the Update with
 *                       its rows; returns them. */
void ops_update_lock(tbl *t);
void ops_update_unlock(tbl *t);
uint32_t ops_update_open(tbl *t);
void ops_update_apply(tbl *t, const uint64_t *locs, const float *const *grads, size_t n,
		      bool grads_ahead);
uint64_t ops_update_close(tbl *t);

#define OPS_PREFETCH_ROWS 8u

/* Row loops turn their locations into addresses a block at a time, in a
 * loop of their own, before the loop that prefetches and copies: the
 * directory's loads, done beside the rows' misses, cost that loop a fifth
 * of its rate (docs/benchmarks-history.md). */
#define OPS_ROW_BLOCK 512u

/* rows[k] = the row of locs[k], k < n; LOC_NONE gives NULL. */
static inline void ops_row_addrs(const tbl *t, const uint64_t *locs, size_t n, float **rows)
{
	for (size_t k = 0; k < n; k++)
		rows[k] = locs[k] == LOC_NONE ? NULL : table_row(t, locs[k]);
}

/* Run the statements after `row` for each location locs[at], at = 0..n-1
 * in order, with `row` its row's address (float *; NULL for LOC_NONE):
 * the addresses a block at a time, and PREFETCH(row, loc) run for each
 * row that is not NULL OPS_PREFETCH_ROWS rows ahead (PREFETCH names a
 * function or macro of the caller's: what to fetch, for reading or
 * writing). */
#define OPS_FOR_ROWS(t, locs, n, PREFETCH, at, row, ...)                                       \
	do {                                                                                   \
		float *rp_[OPS_ROW_BLOCK];                                                     \
		for (size_t b_ = 0; b_ < (n); b_ += OPS_ROW_BLOCK) {                           \
			size_t m_ = (n) - b_ < OPS_ROW_BLOCK ? (n) - b_ : OPS_ROW_BLOCK;       \
			const uint64_t *l_ = (locs) + b_;                                      \
			ops_row_addrs((t), l_, m_, rp_);                                       \
			for (size_t k_ = 0; k_ < m_ && k_ < OPS_PREFETCH_ROWS; k_++)           \
				if (rp_[k_])                                                   \
					PREFETCH(rp_[k_], l_[k_]);                             \
			for (size_t k_ = 0; k_ < m_; k_++) {                                   \
				size_t a_ = k_ + OPS_PREFETCH_ROWS;                            \
				if (a_ < m_ && rp_[a_])                                        \
					PREFETCH(rp_[a_], l_[a_]);                             \
				size_t at = b_ + k_;                                           \
				float *row = rp_[k_];                                          \
				__VA_ARGS__                                                    \
			}                                                                      \
		}                                                                              \
	} while (0)

/* Prefetch the first `bytes` of a row. */
static inline void ops_prefetch_row(const void *p, size_t bytes)
{
	for (size_t o = 0; o < bytes; o += 64)
		__builtin_prefetch((const char *)p + o, 0, 3);
}

/* The same, for a row about to be written: fetching the lines for writing
 * saves the second round trip a store to a shared line would cost. */
static inline void ops_prefetch_row_w(const void *p, size_t bytes)
{
	for (size_t o = 0; o < bytes; o += 64)
		__builtin_prefetch((const char *)p + o, 1, 3);
}

#endif
