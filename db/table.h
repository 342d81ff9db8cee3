/*
 * table.h - one embedding table inside the engine: its schema, index, row
 * chunks, gradient accumulators, step and counters.  Internal to libemdb;
 * the public face is emdb/db.h.
 *
 * Lifetime: a table is reference counted.  The database's registry holds
 * one reference while the table is live, every call in flight one more,
 * every ticket one more; the last table_release frees it.
 *
 * Locking, outermost first:
 *   rows_lock    read by whatever reads row contents (Pull, Lookup, state
 *                reads), written by Update while it applies the optimizer:
 *                no reader sees a row half-updated, and Updates apply in
 *                step order.
 *   update_lock  read by Push while it picks its accumulator generation
 *                and reserves room there, written by Update (inside
 *                rows_lock) while it flips the generation: a push's
 *                reservation and its adds land in the same step, and the
 *                adds themselves run outside both locks.
 *   index shard  (index/dit.c) and grads[s].mu, one at a time per batch.
 *   rows.mu      chunk creation (db/chunk.c).
 * Prefetch takes neither of the first two: it writes only new rows, which
 * no Update and no reader can see before the index publishes them.
 */
#ifndef EMDB_TABLE_H
#define EMDB_TABLE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <emdb/db.h>

#include "db/chunk.h"
#include "db/ckpt_track.h"
#include "db/gradmap.h"
#include "db/gradrank.h"
#include "db/hot.h"
#include "db/optim_math.h"
#include "index/dit.h"

/* Two generations of accumulators per shard: pushes reserve and add in
 * acc[acc_gen]; the Update that flips acc_gen applies the other one, shard
 * by shard as the pushes still adding to it leave (`reserved` back to 0).
 * A push that names its worker (emdb_push_as) adds into that worker's
 * map in ranked[acc_gen] instead, holding its reservation in acc[acc_gen]
 * all the same; the Update folds ranked[gen] into acc[gen] in rank order
 * before it applies the shard (db/gradrank.h).  All are changed only
 * under mu. */
typedef struct table_grads {
	pthread_mutex_t mu;
	gradmap acc[2];
	gradrank ranked[2];
} __attribute__((aligned(64))) table_grads;

/* The optimizer pass of the Update in progress, open to other Update
 * callers so they apply shards beside it instead of waiting (ops_update.c). */
typedef struct table_apply {
	uint32_t active;        /* atomic: the pass takes helpers           */
	uint32_t done;          /* atomic: shards applied                   */
	uint32_t helpers;       /* atomic: threads inside the pass          */
	uint32_t gen;           /* accumulator generation being applied     */
	uint64_t rows;          /* atomic: rows applied                     */
	uint8_t *claimed;       /* [shards] atomic: shard taken by a thread */
	emdb_opt_scalars sc;    /* written before active is set             */
	/* Rows applied from a caller's gradients (emdb_push_update), claimed
	 * in runs by the threads of the pass: dloc/dgrad are written before
	 * dn is published (release); dn is 0 until then. */
	const uint64_t *dloc;
	const float *const *dgrad;
	bool dahead;            /* prefetch their gradients too             */
	uint64_t dn;            /* atomic */
	uint64_t dnext;         /* atomic: next row to claim                */
} table_apply;

/* A push in its add phase, open to the Update waiting on its generation
 * (ops_push.c). */
typedef struct push_work push_work;

typedef struct table_counters {
	uint64_t calls_prefetch, calls_pull, calls_push, calls_update, calls_lookup;
	uint64_t ids_prefetch, ids_pull, ids_push, ids_lookup;
	uint64_t lookup_misses, rows_updated;
} table_counters;

typedef struct tbl {
	uint32_t id;
	uint32_t dim;
	uint32_t state_floats;  /* optimizer state per row */
	uint32_t shards;
	uint32_t max_batch;
	int refs;               /* atomic */
	emdb_table_config cfg;  /* optimizer's per-step fields change only in
				   emdb_table_alter (db/alter.c), under both
				   locks below and cfg_mu */
	pthread_mutex_t cfg_mu; /* whole-config copies without a table lock */
	pthread_rwlock_t update_lock;
	pthread_rwlock_t rows_lock;
	uint64_t step;          /* written under update_lock (write) */
	uint32_t acc_gen;       /* atomic; written under update_lock (write) */
	dit *index;
	chunk_store rows;
	void *grads_raw;
	table_grads *grads;     /* [shards], aligned */
	table_counters ctr;     /* atomic adds */
	table_apply apply;
	pthread_mutex_t pushes_mu; /* guards the list of pushes adding    */
	push_work *pushes;         /* pushes in their add phase           */
	ckpt_track ck;          /* gen and cow: written holding update_lock and
				   rows_lock for writing; base_*: the db's job */
	hot *hot;               /* the device replica of the hot rows, or NULL
				   (no gpu_memory, or no device): set at
				   creation, then used under the locks its
				   calls name (db/hot.h) */
} tbl;

int table_create(const emdb_table_config *cfg, uint32_t id, const emdb_db_config *dbc, tbl **out);
void table_acquire(tbl *t);
void table_release(tbl *t);

/* Row pointers: the vector, then the optimizer state. */
static inline float *table_row(const tbl *t, uint64_t loc)
{
	return (float *)chunk_row(&t->rows, loc);
}

/* Check a batch's shape before any work: n in 1..max_batch, dim equal to
 * the table's.  Returns EMDB_OK or the error with its message set. */
int table_check_batch(const tbl *t, size_t n, uint32_t dim);

/* EMDB_OK when `need` more bytes fit under the memory limit (always
 * without one), else NOMEM with the message "table 'NAME': WHAT COUNT
 * rows needs about ... MB more, over the memory limit ...", `what` being
 * "room for" or the like.  Checked before a growth maps anything. */
int table_check_memory(const tbl *t, uint64_t need, const char *what, uint64_t count);

/* Resolving IDs with insertion, in two steps so that a caller can reserve
 * more (gradient room) in between and still fail without a trace.
 * table_resolve_prepare groups ids by shard into plan (arrays are the
 * caller's: hash[n], order[n], start[shards+1]) and reserves index room and
 * rows for every ID to be new; it fails only with NOMEM or LIMIT, reserving
 * nothing then (under a memory limit, the growth is checked against it
 * before any is mapped).  table_resolve_commit writes locs[i] for every ID,
 * inserting the absent ones, and cannot fail; table_resolve_abort gives the
 * reservation back instead.  No table lock is needed. */
int table_resolve_prepare(tbl *t, const uint64_t *ids, size_t n, dit_plan *plan);
/* As table_resolve_prepare, for a caller that will grow more once it
 * holds the reservation (Push: its gradient accumulators): more(t, plan)
 * (may be NULL) gives those bytes, checked against the memory limit with
 * the batch's own before anything is mapped, so that a batch refused for
 * memory, later steps included, maps nothing. */
typedef uint64_t (*table_more_fn)(tbl *t, const dit_plan *plan);
int table_resolve_prepare_more(tbl *t, const uint64_t *ids, size_t n, dit_plan *plan, table_more_fn more);
void table_resolve_commit(tbl *t, const uint64_t *ids, const dit_plan *plan, uint64_t *locs);
void table_resolve_abort(tbl *t, const dit_plan *plan);
/* As table_resolve_commit, but new rows are left zero for the caller to
 * fill (restore), not initialized. */
void table_resolve_commit_raw(tbl *t, const uint64_t *ids, const dit_plan *plan, uint64_t *locs,
			      size_t *inserted);
/* prepare + commit. */
int table_resolve(tbl *t, const uint64_t *ids, size_t n, dit_plan *plan, uint64_t *locs);

/* Statistics, read without stopping the table. */
void table_stats(tbl *t, emdb_table_stats *out);
/* Where its rows live (emdb_table_tier). */
void table_tier(tbl *t, emdb_tier_info *out);
/* One device of the replica: INVALID without one or out of range. */
int table_tier_device(tbl *t, uint32_t device, emdb_tier_device_info *out);

/* Every writer of row contents other than Update (which keeps the device
 * replica itself) calls this after writing, so that the replica of the
 * hot rows is copied again from the host at the next step boundary. */
static inline void table_rows_written(tbl *t)
{
	if (t->hot)
		hot_rows_written(t->hot);
}

#define TABLE_COUNT(t, field, v) __atomic_fetch_add(&(t)->ctr.field, (v), __ATOMIC_RELAXED)

#endif
