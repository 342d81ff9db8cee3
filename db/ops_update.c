/*
 * ops_update.c - Update: apply each table's optimizer to every row that
 * holds an accumulated gradient, then clear the accumulators.
 *
 * Pushes accumulate into one of two generations of accumulators
 * (table.h).  An Update, holding rows_lock for writing (so no reader is
 * inside a row and the previous Update has finished) and then, briefly,
 * update_lock for writing (so no push is between picking its generation
 * and reserving room there), advances the step and flips the generation
 * pushes use.  It drops update_lock and, still holding rows_lock, applies
 * the optimizer to the old generation shard by shard.  Pushes that
 * reserved in the old generation before the flip may still be adding to
 * it: a shard is applied only once its reservations are all consumed; a
 * shard not ready yet is left for whichever thread of the pass finds it
 * ready first, and a thread that finds it not ready does the push's adds
 * there itself if the push has not got to them (ops_push.c).  So pushes
 * of the next step run beside this step's optimizer work, an Update never
 * idles while a push it must include is still adding, and Pulls wait for
 * the pass.
 *
 * Before a row changes it is marked dirty for the next incremental
 * checkpoint (once the table has a checkpoint to count from), and, while a
 * checkpoint is being written, its old bytes are kept if the checkpoint
 * still needs them (db/ckpt_track.h).
 *
 * Rows are visited shard by shard in accumulator order with their memory
 * prefetched for writing a few rows ahead, their addresses taken a block
 * at a time before the loop that touches them; shards of under 512 rows (a
 * 4096-ID batch puts about 64 in each) are gathered into runs of at least
 * 1024 rows so that the prefetch goes on across them.  The optimizer kind
 * is dispatched once per run, not per row.  A row belongs to one shard, so
 * shards can be applied by different threads: another thread calling
 * Update on the same table while this one applies claims shards of this
 * pass first (it would have to wait for it anyway), and only then runs its
 * own Update; while rows_lock is still held it keeps helping and trying
 * for up to 50 us before it sleeps on the lock (a small batch's whole pass
 * is shorter than a futex sleep and wake-up on a VM), and it waits for the
 * pushes reserving under update_lock the same way.  Readiness is one
 * acquire load of the shard's reservation count, and the pass's shared
 * counters are added to once per sweep, not per shard: the lines they sit
 * on are shared by the threads of the pass and by pushes.
 *
 * emdb_push_update (ops_push_update.c) runs the same pass in steps
 * (ops.h: lock, open, apply, close) and hands it a list of rows with
 * their gradients, applied without accumulators: published with a
 * release store of its length, it is cut into runs of 512 rows that the
 * pass's threads claim with an atomic add, helpers included, so a second
 * trainer waiting for the table applies half of the first one's rows.
 *
 * Invariants:
 *   1. step advances by exactly one per Update, before the rule is
 *      evaluated (so the first Update runs with step 1, as torch does), and
 *      Updates apply in step order (the step advances holding rows_lock,
 *      kept until the pass is done).
 *   2. Only rows with an accumulator are written; all others stay
 *      bit-identical.  Every gradient pushed before the call started is
 *      applied by it, and every gradient of one push by the same Update.
 *   3. Each shard of a pass is applied and cleared by exactly one thread
 *      (claimed with an atomic exchange), after its last reservation in the
 *      pass's generation is gone (no push can reserve there any more: the
 *      generation was flipped under update_lock).  The owner of the pass
 *      keeps rows_lock until every claimed shard is done and no helper is
 *      still inside the pass, so the pass's generation becomes the one
 *      pushes use again, at the next flip, only empty and idle.
 *   4. Each run of direct rows is applied by exactly one thread (claimed
 *      with an atomic add on dnext); the owner publishes the list before
 *      it claims a run and waits, as in 3, for every helper to leave, so
 *      the caller's arrays outlive their readers.
 *   5. A shard's workers' accumulators (db/gradrank.h) are added into its
 *      shared ones, in rank order, by the thread that claimed it, before
 *      it is applied: a row's gradient is the same whatever the order in
 *      which the workers' pushes came.
 */
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include <emdb/alloc.h>

#include "base/clock.h"
#include "base/error_int.h"
#include "base/spin.h"
#include "db/db_int.h"
#include "db/ops.h"
#include "db/optim_math.h"

#define UPDATE_SPIN_NS 50000u /* wrlock_spinning: tries for this long, */
#define UPDATE_PAUSE_NS 5000u  /* pausing between tries for this long   */

/* Optimizer kind dispatched once per run, not per row. */
#define APPLY_SWITCH(LOOP)                                           \
	do {                                                         \
		switch (t->cfg.optimizer.kind) {                     \
		case EMDB_OPT_SGD:                                   \
			LOOP(emdb_opt_sgd_row);                      \
			break;                                       \
		case EMDB_OPT_ADAGRAD:                               \
			LOOP(emdb_opt_adagrad_row);                  \
			break;                                       \
		case EMDB_OPT_ROWWISE_ADAGRAD:                       \
			LOOP(emdb_opt_rowwise_adagrad_row);          \
			break;                                       \
		case EMDB_OPT_ADAM:                                  \
			LOOP(emdb_opt_adam_row);                     \
			break;                                       \
		case EMDB_OPT_FTRL:                                  \
			LOOP(emdb_opt_ftrl_row);                     \
			break;                                       \
		}                                                    \
	} while (0)

/* The pass's prefetch, OPS_PREFETCH_ROWS rows ahead: the row for writing,
 * and where it marks, the mark's word (a read: once set, a mark is only
 * read again). */
static inline void apply_prefetch(const tbl *t, const float *row, uint64_t loc, size_t row_bytes,
				  bool tracking, uint32_t gen)
{
	ops_prefetch_row_w(row, row_bytes);
	if (tracking)
		__builtin_prefetch(chunk_mark_word(&t->rows, loc, gen), 0, 3);
}

/* The device replica of the hot rows takes the same step at the end of
 * the pass (db/hot.h); one branch per row for a table without one. */
#define HOT_RECORD(t, loc, g)                                               \
	do {                                                                \
		if ((t)->hot && hot_is_member((t)->hot, (loc)))             \
			hot_record((t)->hot, (loc), (g));                   \
	} while (0)

/* OPS_FOR_ROWS's prefetch in the pass (apply_prefetch). */
#define APPLY_PREFETCH(row, loc) apply_prefetch(t, (row), (loc), row_bytes, tracking, gen)

/* Rows locs[0..cnt) with gradient GRAD(j), prefetched for writing a few
 * rows ahead, their addresses taken a block at a time (OPS_FOR_ROWS).
 * Uses t, sc, dim, row_bytes, cow, tracking, gen. */
#define APPLY_LOOP(rowfn, locs, cnt, GRAD)                                               \
	OPS_FOR_ROWS(t, locs, cnt, APPLY_PREFETCH, j_, row_,                             \
		     ckpt_touch(&t->rows, cow, tracking, gen, (locs)[j_], row_);         \
		     rowfn(&sc, dim, row_, GRAD(j_));                                    \
		     HOT_RECORD(t, (locs)[j_], GRAD(j_));)

#define APPLY_VARS(t, scp)                                                            \
	emdb_opt_scalars sc = *(scp);                                                 \
	uint32_t dim = (t)->dim;                                                      \
	size_t row_bytes = ((size_t)dim + (t)->state_floats) * sizeof(float);        \
	/* Stable during the pass: the switch changes them holding rows_lock. */     \
	ckpt_cow *cow = (t)->ck.cow;                                                  \
	bool tracking = ckpt_tracking(&(t)->ck);                                      \
	uint32_t gen = (t)->ck.gen

/* One shard's accumulators. */
static void apply_shard(const tbl *t, const gradmap *m, const emdb_opt_scalars *scp)
{
	APPLY_VARS(t, scp);
	uint32_t cnt = m->count;
#define SHARD_GRAD(j) (m->grads + (size_t)(j) * dim)
#define SHARD_LOOP(rowfn) APPLY_LOOP(rowfn, m->locs, cnt, SHARD_GRAD)
	APPLY_SWITCH(SHARD_LOOP);
#undef SHARD_LOOP
#undef SHARD_GRAD
}

/* A shard with fewer than APPLY_ALONE_ROWS rows joins a group, applied as
 * one run once it holds APPLY_GROUP_ROWS rows (or at the end of the
 * sweep): each run waits for its first rows' misses with nothing else in
 * flight and ends with no rows ahead to fetch, and at 64 rows a shard (a
 * 4096-ID batch) those two ends cost a pass about a tenth of its rate
 * (groups from 32/128 to 512/1024 rows: 1-thread uniform Push+Update
 * 5-14% faster, docs/benchmarks-history.md).  A fuller shard is applied by
 * itself, straight from its accumulators.  The group's arrays (20 bytes
 * a row) live on the stack: 30 KiB. */
#define APPLY_ALONE_ROWS 512u
#define APPLY_GROUP_ROWS 1024u
#define APPLY_GROUP_MAX (APPLY_GROUP_ROWS + APPLY_ALONE_ROWS)

/* Runs of direct rows (emdb_push_update) a thread of the pass claims at a
 * time: long enough for the prefetch to run ahead, short enough that a
 * helper arriving mid-pass still finds some (256 and 1024 were slower at
 * two threads, docs/benchmarks-history.md). */
#define APPLY_DIRECT_RUN 512u

/* Every member holds a row at least, and the group runs once it holds
 * APPLY_GROUP_ROWS, so members and rows stay under APPLY_GROUP_MAX. */
typedef struct apply_group {
	uint32_t n, rows;
	uint32_t shard[APPLY_GROUP_MAX];
	uint64_t loc[APPLY_GROUP_MAX];
	const float *grad[APPLY_GROUP_MAX];
} apply_group;

static void group_add(apply_group *g, uint32_t s, const gradmap *m)
{
	g->shard[g->n++] = s;
	for (uint32_t j = 0; j < m->count; j++) {
		g->loc[g->rows] = m->locs[j];
		g->grad[g->rows++] = m->grads + (size_t)j * m->dim;
	}
}

/* Rows loc[0..cnt) with gradients grad[0..cnt), one run, skipping the
 * entries that are LOC_NONE; returns the rows applied.  With grad_ahead
 * the gradients are prefetched with their rows: for gradients read at
 * random from a buffer larger than the core's cache (a large
 * emdb_push_update batch: 100k-ID uniform SGD 0.49 -> 0.67 of the bare
 * loop); on a cached buffer the hints only cost (4096 IDs: 0.70 -> 0.65,
 * docs/benchmarks-history.md). */
static uint64_t apply_rows(const tbl *t, const uint64_t *loc, const float *const *grad, size_t cnt,
			   const emdb_opt_scalars *scp, bool grad_ahead)
{
	APPLY_VARS(t, scp);
	uint64_t applied = 0;
	size_t grad_bytes = (size_t)dim * sizeof(float);
#define ROWS_PREFETCH_G(row, l)                                          \
	do {                                                             \
		APPLY_PREFETCH(row, l);                                  \
		ops_prefetch_row(grad[&(l) - loc], grad_bytes);         \
	} while (0)
#define ROWS_LOOP_WITH(PF, rowfn)                                                    \
	OPS_FOR_ROWS(t, loc, cnt, PF, j_, row_,                                      \
		     if (row_) {                                                     \
			     ckpt_touch(&t->rows, cow, tracking, gen, loc[j_], row_); \
			     rowfn(&sc, dim, row_, grad[j_]);                        \
			     HOT_RECORD(t, loc[j_], grad[j_]);                       \
			     applied++;                                              \
		     })
#define ROWS_LOOP(rowfn) ROWS_LOOP_WITH(APPLY_PREFETCH, rowfn)
#define ROWS_LOOP_G(rowfn) ROWS_LOOP_WITH(ROWS_PREFETCH_G, rowfn)
	if (grad_ahead)
		APPLY_SWITCH(ROWS_LOOP_G);
	else
		APPLY_SWITCH(ROWS_LOOP);
#undef ROWS_LOOP_G
#undef ROWS_LOOP
#undef ROWS_LOOP_WITH
#undef ROWS_PREFETCH_G
	return applied;
}

/* Clear shard s's accumulators of the pass, applied. */
static void clear_applied(tbl *t, uint32_t s)
{
	table_grads *tg = &t->grads[s];
	/* Sizes change under mu: statistics read them. */
	pthread_mutex_lock(&tg->mu);
	gradmap_clear(&tg->acc[t->apply.gen]);
	pthread_mutex_unlock(&tg->mu);
}

/* Apply the group and clear its shards; returns the rows applied and
 * empties the group. */
static uint32_t apply_group_run(tbl *t, apply_group *g)
{
	uint32_t rows = g->rows;
	if (g->n) {
		(void)apply_rows(t, g->loc, g->grad, g->rows, &t->apply.sc, false);
		for (uint32_t i = 0; i < g->n; i++)
			clear_applied(t, g->shard[i]);
	}
	g->n = g->rows = 0;
	return rows;
}

/* Whether no push still holds a reservation in shard s of the pass's
 * generation (invariant 3).  No lock: once the generation was flipped
 * reservations there only go, and the push's release store of the last
 * one orders its adds before our acquire load that sees 0. */
static bool shard_ready(tbl *t, uint32_t s)
{
	return __atomic_load_n(&t->grads[s].acc[t->apply.gen].reserved, __ATOMIC_ACQUIRE) == 0;
}

/* Add the workers' accumulators of shard s (pushes that named their
 * worker, db/gradrank.h) into its shared ones, in rank order, before the
 * shard is applied: once it is ready, so every push of the pass's
 * generation has added there, and no push can make an entry any more
 * (the generation was flipped), so the count read unlocked is final. */
static void fold_ranked(tbl *t, uint32_t s)
{
	table_grads *tg = &t->grads[s];
	gradrank *gr = &tg->ranked[t->apply.gen];
	if (!gr->n)
		return;
	pthread_mutex_lock(&tg->mu);
	gradrank_fold(gr, &tg->acc[t->apply.gen]);
	pthread_mutex_unlock(&tg->mu);
}

/* Claim and apply runs of the pass's direct rows, if published; returns
 * the rows applied. */
static uint64_t apply_direct(tbl *t)
{
	table_apply *a = &t->apply;
	uint64_t n = __atomic_load_n(&a->dn, __ATOMIC_ACQUIRE), rows = 0, k;
	while (n && (k = __atomic_fetch_add(&a->dnext, APPLY_DIRECT_RUN, __ATOMIC_RELAXED)) < n) {
		uint64_t m = n - k < APPLY_DIRECT_RUN ? n - k : APPLY_DIRECT_RUN;
		rows += apply_rows(t, a->dloc + k, a->dgrad + k, m, &a->sc, a->dahead);
	}
	return rows;
}

/* Claim and apply ready shards until every shard is claimed.  Each thread
 * starts its sweeps at its own place (from), so owner and helper rarely
 * race for a claim; a shard not ready yet stays unclaimed for whoever
 * finds it ready first, and meanwhile the thread that found it not ready
 * does the adds a push of the pass's generation still owes it, so that
 * waiting for a push becomes doing its work.  Yields when a sweep did
 * nothing at all. */
static void apply_claims(tbl *t, uint32_t from)
{
	uint32_t mask = t->shards - 1;
	for (;;) {
		uint64_t rows = apply_direct(t);
		bool left = false, progress = rows != 0;
		uint32_t done = 0;
		apply_group g;
		g.n = g.rows = 0;
		for (uint32_t k = 0; k < t->shards; k++) {
			uint32_t s = (from + k) & mask;
			if (__atomic_load_n(&t->apply.claimed[s], __ATOMIC_ACQUIRE))
				continue;
			if (!shard_ready(t, s)) {
				/* Do the adds of the push holding it, if they
				 * are not under way already (ops_push.c). */
				left = true;
				progress |= ops_push_help(t, t->apply.gen, s);
				continue;
			}
			if (__atomic_exchange_n(&t->apply.claimed[s], 1, __ATOMIC_ACQ_REL))
				continue;
			fold_ranked(t, s);
			const gradmap *m = &t->grads[s].acc[t->apply.gen];
			if (m->count >= APPLY_ALONE_ROWS) {
				apply_shard(t, m, &t->apply.sc);
				rows += m->count;
				clear_applied(t, s);
			} else if (m->count) { /* an empty shard costs no lock */
				group_add(&g, s, m);
				if (g.rows >= APPLY_GROUP_ROWS)
					rows += apply_group_run(t, &g);
			}
			done++;
			progress = true;
		}
		rows += apply_group_run(t, &g);
		/* Once per sweep, not per shard: both lines are shared with
		 * the other threads of the pass. */
		if (rows)
			__atomic_fetch_add(&t->apply.rows, rows, __ATOMIC_RELAXED);
		if (done)
			__atomic_fetch_add(&t->apply.done, done, __ATOMIC_RELEASE);
		if (!left)
			return;
		if (!progress)
			sched_yield();
	}
}

/* If another thread's Update is applying, help it finish. */
static void help_apply(tbl *t)
{
	table_apply *a = &t->apply;
	if (!__atomic_load_n(&a->active, __ATOMIC_ACQUIRE))
		return;
	/* Sequentially consistent with the owner's closing of the pass: either
	 * it sees this helper, or this helper sees the pass closed. */
	__atomic_fetch_add(&a->helpers, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&a->active, __ATOMIC_SEQ_CST))
		apply_claims(t, t->shards / 2);
	__atomic_fetch_sub(&a->helpers, 1, __ATOMIC_ACQ_REL);
}

/* l for writing.  Its holders are most likely another Update's pass
 * (rows_lock) or pushes reserving (update_lock), both done in tens of
 * microseconds: try again for up to UPDATE_SPIN_NS (helping the pass of
 * `help`, if given) before sleeping, since a futex sleep and wake-up cost
 * about as much as a small batch's whole pass. */
static void wrlock_spinning(pthread_rwlock_t *l, tbl *help)
{
	uint64_t until = 0;
	for (;;) {
		if (help)
			help_apply(help);
		if (pthread_rwlock_trywrlock(l) == 0)
			return;
		uint64_t now = emdb__now_ns();
		if (!until)
			until = now + UPDATE_SPIN_NS;
		else if (now >= until)
			break;
		/* Past the first UPDATE_PAUSE_NS, yield between tries: where
		 * threads outnumber cores the holder may be waiting for
		 * this one's core. */
		if (until - now < UPDATE_SPIN_NS - UPDATE_PAUSE_NS)
			sched_yield();
		else
			for (int i = 0; i < 16; i++)
				cpu_relax();
	}
	pthread_rwlock_wrlock(l);
}

void ops_update_lock(tbl *t)
{
	wrlock_spinning(&t->rows_lock, t);
	wrlock_spinning(&t->update_lock, NULL);
}

void ops_update_unlock(tbl *t)
{
	pthread_rwlock_unlock(&t->update_lock);
	pthread_rwlock_unlock(&t->rows_lock);
}

uint32_t ops_update_open(tbl *t)
{
	table_apply *a = &t->apply;
	uint64_t step = t->step + 1;
	__atomic_store_n(&t->step, step, __ATOMIC_RELAXED);
	uint32_t gen = __atomic_load_n(&t->acc_gen, __ATOMIC_RELAXED);
	__atomic_store_n(&t->acc_gen, gen ^ 1, __ATOMIC_RELAXED);
	pthread_rwlock_unlock(&t->update_lock);

	/* Open the pass: no helper is inside (invariant 3), so its state is
	 * ours to reset; `active` publishes it. */
	emdb_opt_scalars_for_step(&t->cfg.optimizer, step, t->dim, &a->sc);
	a->gen = gen;
	for (uint32_t s = 0; s < t->shards; s++)
		__atomic_store_n(&a->claimed[s], 0, __ATOMIC_RELAXED);
	__atomic_store_n(&a->done, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&a->rows, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&a->dn, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&a->dnext, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&a->active, 1, __ATOMIC_RELEASE);
	return gen;
}

void ops_update_apply(tbl *t, const uint64_t *locs, const float *const *grads, size_t n,
		      bool grads_ahead)
{
	table_apply *a = &t->apply;
	a->dloc = locs;
	a->dgrad = grads;
	a->dahead = grads_ahead;
	__atomic_store_n(&a->dn, n, __ATOMIC_RELEASE);
	uint64_t rows = apply_direct(t);
	if (rows)
		__atomic_fetch_add(&a->rows, rows, __ATOMIC_RELAXED);
}

uint64_t ops_update_close(tbl *t)
{
	table_apply *a = &t->apply;
	apply_claims(t, 0);
	while (__atomic_load_n(&a->done, __ATOMIC_ACQUIRE) < t->shards)
		sched_yield();
	__atomic_store_n(&a->active, 0, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&a->helpers, __ATOMIC_SEQ_CST))
		sched_yield();
	uint64_t rows = __atomic_load_n(&a->rows, __ATOMIC_RELAXED);
	/* The step boundary: no helper is left, rows_lock still held. */
	if (t->hot)
		hot_step(t->hot, &t->rows, &a->sc, t->step, a->gen);
	pthread_rwlock_unlock(&t->rows_lock);
	TABLE_COUNT(t, calls_update, 1);
	TABLE_COUNT(t, rows_updated, rows);
	return rows;
}

static uint64_t update_table(tbl *t)
{
	ops_update_lock(t);
	(void)ops_update_open(t);
	return ops_update_close(t);
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
