/*
 * ops_push_update.c - Push and Update in one call: a batch's gradients
 * applied in the same pass that applies whatever was pushed before it.
 *
 * A Push followed by an Update moves every gradient twice: into its
 * accumulator (a write of the whole row's width), then out of it in the
 * optimizer pass.  For SGD that costs about as much as the pass itself
 * (docs/benchmarks.md).  This call takes the Update's locks first, so it
 * knows which of its rows need an accumulator at all: only a row that the
 * batch holds more than once (its gradients must be summed before the
 * rule sees them) or that already holds a gradient from another push.
 * Every other row is applied straight from the caller's buffer.
 *
 * Steps, in order:
 *   1. Resolve the IDs (inserting absent ones) or take the ticket's rows,
 *      and allocate the scratch: all before any lock, so a failure
 *      changes nothing.
 *   2. rows_lock and update_lock for writing (ops_update_trylock); reserve
 *      accumulator room for the whole batch in the current generation
 *      (ops_grads_reserve).  On failure, unlock and undo step 1: nothing
 *      was pushed, the step did not advance.  If another Update holds
 *      rows_lock, waiting for it would leave this thread idle while that
 *      pass runs (its direct rows are its own): the call pushes beside
 *      the pass instead, as emdb_push does, and then runs a plain Update.
 *      So two trainers stepping one table overlap as with the two calls.
 *   3. ops_update_open: step + 1, generation flipped, pass open.  Pushes
 *      that reserved in the old generation earlier may still be adding;
 *      our own reservation keeps each of our shards unready, so no helper
 *      applies one before our rows are in.
 *   4. Per shard of the batch: wait until only our reservation is left
 *      there (doing a waiting push's adds ourselves, as Update does),
 *      count each row's positions (by a hash of the row: struct fused),
 *      then for each position: a row held once and without an accumulator
 *      goes to the direct list; every other one is added to the
 *      accumulators, in the same order a push would add it.  Releasing our reservation makes the
 *      shard ready for the pass.
 *   5. Apply the direct list (one run in shard order, rows prefetched
 *      ahead), then ops_update_close applies every shard's accumulators.
 *
 * Invariants:
 *   1. Each row of the pass is applied exactly once: a row on the direct
 *      list has no accumulator in the pass's generation (checked after
 *      every other push of that generation had added to its shard, and we
 *      add none for it), and the direct list is applied by this thread
 *      only.
 *   2. Bit for bit what emdb_push_ticket + emdb_update would give with
 *      nothing pushed in between: accumulated rows get the same adds in
 *      the same order (1.0f * g first, then fmaf), and a direct row's
 *      gradient equals the accumulator such a push would have made,
 *      1.0f * g == g.
 *   3. rows_lock is held for writing from step 2 to the end: no reader
 *      sees a row between its old and new value.
 */
#include <sched.h>
#include <string.h>

#include <emdb/alloc.h>

#include "db/error_int.h"
#include "db/loc.h"
#include "db/ops.h"
#include "index/hash.h"

/* Scratch of the call.  A shard's positions are counted by a hash of
 * their row in one byte each of cnt (16 or more counters per position, so
 * few rows share one): a row whose counter reads 1 is held once.  Two rows
 * sharing a counter only send both through the accumulators, which is
 * always right; no row held twice can read 1.  Counting costs no branch,
 * where an exact map's probing mispredicted about as often as it looked
 * (half the call's time in a profile). */
typedef struct fused {
	uint8_t *cnt;         /* [cnt_cap] */
	uint32_t cnt_cap;
	uint32_t *h;          /* [n] counter of each position, shard order */
	uint64_t *dloc;       /* [n] direct rows */
	const float **dgrad;  /* [n] their gradients, in the caller's buffer */
	size_t nd;
} fused;

#define CNT_PER_POS 16u

static uint32_t pow2_at_least(uint64_t n)
{
	uint32_t c = 64;
	while (c < n)
		c *= 2;
	return c;
}

static int fused_alloc(tbl *t, const ops_rows *r, fused *f)
{
	uint32_t most = 0;
	for (uint32_t s = 0; s < t->shards; s++)
		if (r->start[s + 1] - r->start[s] > most)
			most = r->start[s + 1] - r->start[s];
	memset(f, 0, sizeof(*f));
	f->cnt_cap = pow2_at_least(CNT_PER_POS * (uint64_t)most);
	f->cnt = emdb_malloc(f->cnt_cap);
	f->h = emdb_malloc(r->n * sizeof(*f->h));
	f->dloc = emdb_malloc(r->n * sizeof(*f->dloc));
	f->dgrad = emdb_malloc(r->n * sizeof(*f->dgrad));
	if (!f->cnt || !f->h || !f->dloc || !f->dgrad)
		return EMDB_ERR_NOMEM;
	return EMDB_OK;
}

static void fused_free(fused *f)
{
	emdb_free(f->cnt);
	emdb_free(f->h);
	emdb_free(f->dloc);
	emdb_free(f->dgrad);
}

/* Step 4 for shard s, positions [a, b) of r. */
static void shard_adds(tbl *t, uint32_t gen, const ops_rows *r, uint32_t s, const float *grads,
		       fused *f)
{
	uint32_t a = r->start[s], b = r->start[s + 1];
	gradmap *m = &t->grads[s].acc[gen];
	uint32_t dim = t->dim;

	/* Other pushes of this generation first (invariant 1). */
	while (__atomic_load_n(&m->reserved, __ATOMIC_ACQUIRE) != b - a)
		if (!ops_push_help(t, gen, s))
			sched_yield();

	uint32_t mask = pow2_at_least(CNT_PER_POS * (uint64_t)(b - a)) - 1;
	memset(f->cnt, 0, (size_t)mask + 1);
	for (uint32_t j = a; j < b; j++) {
		uint32_t h = (uint32_t)dit_hash(r->slocs[j]) & mask;
		f->h[j] = h;
		f->cnt[h] += f->cnt[h] != UINT8_MAX;
	}

	pthread_mutex_lock(&t->grads[s].mu);
	for (uint32_t j = a; j < b; j++) {
		uint64_t loc = r->slocs[j];
		const float *g = grads + (size_t)r->order[j] * dim;
		if (f->cnt[f->h[j]] == 1 && !gradmap_has(m, loc)) {
			f->dloc[f->nd] = loc;
			f->dgrad[f->nd++] = g;
		} else {
			gradmap_add(m, loc, g, 1.0f);
		}
	}
	gradmap_unreserve(m, b - a);
	pthread_mutex_unlock(&t->grads[s].mu);
}

static int push_update_common(emdb_db *db, uint32_t id, const uint64_t *ids, size_t n,
			      const emdb_ticket *tk, uint32_t dim, const float *grads, uint64_t *rows_out)
{
	tbl *t;
	if (!grads || (!tk && !ids))
		return emdb__seterr(EMDB_ERR_INVALID, "push_update: NULL ids, ticket or gradient buffer");
	int rc = ops_open(db, id, tk, n, dim, &t);
	if (rc != EMDB_OK)
		return rc;

	ops_rows r;
	fused f;
	uint64_t rows = 0;
	if (tk)
		ops_rows_from_ticket(tk, &r);
	else
		rc = ops_rows_prepare(t, ids, n, &r);
	if (rc != EMDB_OK)
		goto out;
	rc = fused_alloc(t, &r, &f);
	if (rc != EMDB_OK) {
		if (!tk)
			ops_rows_abort(t, &r);
		goto done;
	}
	if (!ops_update_trylock(t)) {
		/* Another Update is applying: push beside it, then Update
		 * (step 2's contended case). */
		rc = ops_push_rows(t, &r, tk ? NULL : ids, grads);
		if (rc == EMDB_OK)
			rows = ops_update(t);
		goto counted;
	}
	rc = ops_grads_reserve(t, &r, __atomic_load_n(&t->acc_gen, __ATOMIC_RELAXED));
	if (rc != EMDB_OK) {
		ops_update_unlock(t);
		if (!tk)
			ops_rows_abort(t, &r);
		goto done;
	}
	if (!tk)
		ops_rows_commit(t, ids, &r);
	uint32_t gen = ops_update_open(t);
	for (uint32_t s = 0; s < t->shards; s++)
		if (r.start[s + 1] > r.start[s])
			shard_adds(t, gen, &r, s, grads, &f);
	ops_update_apply(t, f.dloc, f.dgrad, f.nd);
	rows = ops_update_close(t, f.nd);
counted:
	if (rc == EMDB_OK) {
		TABLE_COUNT(t, calls_push, 1);
		TABLE_COUNT(t, ids_push, r.n);
		if (rows_out)
			*rows_out = rows;
	}
done:
	fused_free(&f);
	ops_rows_done(&r);
out:
	table_release(t);
	return rc;
}

int emdb_push_update(emdb_db *db, uint32_t tid, const uint64_t *ids, size_t n, uint32_t dim,
		     const float *grads, uint64_t *rows_out)
{
	return push_update_common(db, tid, ids, n, NULL, dim, grads, rows_out);
}

int emdb_push_update_ticket(emdb_db *db, uint32_t tid, const emdb_ticket *t, uint32_t dim,
			    const float *grads, uint64_t *rows_out)
{
	if (!t)
		return emdb__seterr(EMDB_ERR_INVALID, "push_update: ticket is NULL");
	return push_update_common(db, tid, NULL, 0, t, dim, grads, rows_out);
}
