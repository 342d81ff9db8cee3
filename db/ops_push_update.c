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
 *      allocate the scratch, and find which positions hold their row once
 *      (count_batch): all before any lock, so a failure changes nothing
 *      and the counting runs while another Update's pass may hold the
 *      table.
 *   2. rows_lock and update_lock for writing (ops_update_lock: while
 *      another Update's pass holds rows_lock, this thread helps apply it,
 *      direct rows included); reserve accumulator room for the whole
 *      batch in the current generation (ops_grads_reserve).  On failure,
 *      unlock and undo step 1: nothing was pushed, the step did not
 *      advance.  Then insert the new IDs (their rows are the direct
 *      list's locations).
 *   3. ops_update_open: step + 1, generation flipped, pass open.  Pushes
 *      that reserved in the old generation earlier may still be adding;
 *      our own reservation keeps each of our shards unready, so no helper
 *      applies one before our rows are in.
 *   4. Per shard of the batch, once only our reservation is left there
 *      (doing a waiting push's adds ourselves, as Update does): its
 *      repeated rows go to the accumulators, and, if the shard holds
 *      gradients of other pushes, its rows held once that have one are
 *      taken back from the direct list and added too.  Releasing our
 *      reservation makes the shard ready for the pass.
 *   5. Publish the direct list to the pass (ops_update_apply): this thread
 *      and any other Update caller waiting on rows_lock apply it in runs
 *      of 512 rows, rows prefetched ahead; then ops_update_close applies
 *      every shard's accumulators.
 * With two trainers stepping one table, their calls take turns: each one
 * counts its batch while the other's pass runs, then helps that pass, then
 * runs its own with the other's help.  (A first version pushed beside the
 * other's pass instead, as emdb_push does, then updated: 2-thread uniform
 * SGD 0.51-0.56 of the bare loop, against 0.70-0.72 taking turns.)
 *
 * Invariants:
 *   1. Each row of the pass is applied exactly once: a row on the direct
 *      list has no accumulator in the pass's generation (checked after
 *      every other push of that generation had added to its shard, and we
 *      add none for it), and the direct list is cut into runs, each
 *      claimed and applied by one thread of the pass (ops_update.c).
 *   2. Bit for bit what emdb_push_ticket + emdb_update would give with
 *      nothing pushed in between: accumulated rows get the same adds in
 *      the same order (1.0f * g first, then fmaf), and a direct row's
 *      gradient equals the accumulator such a push would have made,
 *      1.0f * g == g.
 *   3. rows_lock is held for writing from step 2 to the end: no reader
 *      sees a row between its old and new value.
 *   4. Counting by ID (IDs) or by location (ticket) gives the same
 *      answer: one ID is one row.  A counter shared by two rows only
 *      sends both through the accumulators, which is always right.
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
	uint32_t *once;       /* [n] shard-order positions of rows held once */
	uint32_t *dup;        /* [n] ... and of the other positions */
	uint32_t *dstart;     /* [shards + 1] each shard's part of once */
	uint32_t *pstart;     /* [shards + 1] each shard's part of dup */
	uint64_t *dloc;       /* [n] the direct list: once[k]'s row; LOC_NONE:
			       * taken back (the row had a gradient waiting) */
	const float **dgrad;  /* [n] its gradients, in the caller's buffer */
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
	f->once = emdb_malloc(r->n * sizeof(*f->once));
	f->dup = emdb_malloc(r->n * sizeof(*f->dup));
	f->dstart = emdb_malloc(2 * ((size_t)t->shards + 1) * sizeof(*f->dstart));
	f->dloc = emdb_malloc(r->n * sizeof(*f->dloc));
	f->dgrad = emdb_malloc(r->n * sizeof(*f->dgrad));
	if (!f->cnt || !f->h || !f->once || !f->dup || !f->dstart || !f->dloc || !f->dgrad)
		return EMDB_ERR_NOMEM;
	f->pstart = f->dstart + t->shards + 1;
	return EMDB_OK;
}

static void fused_free(fused *f)
{
	emdb_free(f->cnt);
	emdb_free(f->h);
	emdb_free(f->once);
	emdb_free(f->dup);
	emdb_free(f->dstart);
	emdb_free(f->dloc);
	emdb_free(f->dgrad);
}

/* Which positions hold their row once, before any lock (it reads only
 * the batch): counted by row location for a ticket, by ID for IDs (whose
 * rows are not resolved yet; one ID is one row).  The lists are appended
 * to without branches: in a skewed batch whether a position repeats is a
 * coin toss, and mispredicted branches were most of this loop's time. */
static void count_batch(const tbl *t, const ops_rows *r, const uint64_t *ids, const float *grads,
			fused *f)
{
	const size_t dim = t->dim;
	uint32_t no = 0, nr = 0;
	for (uint32_t s = 0; s < t->shards; s++) {
		uint32_t a = r->start[s], b = r->start[s + 1];
		f->dstart[s] = no;
		f->pstart[s] = nr;
		if (a == b)
			continue;
		uint32_t mask = pow2_at_least(CNT_PER_POS * (uint64_t)(b - a)) - 1;
		memset(f->cnt, 0, (size_t)mask + 1);
		for (uint32_t j = a; j < b; j++) {
			uint64_t key = ids ? ids[r->order[j]] : r->slocs[j];
			uint32_t h = (uint32_t)dit_hash(key) & mask;
			f->h[j] = h;
			f->cnt[h] += f->cnt[h] != UINT8_MAX;
		}
		for (uint32_t j = a; j < b; j++) {
			uint32_t one = f->cnt[f->h[j]] == 1;
			f->once[no] = j;
			f->dup[nr] = j;
			no += one;
			nr += !one;
		}
	}
	f->dstart[t->shards] = no;
	f->pstart[t->shards] = nr;
	f->nd = no;
	for (uint32_t k = 0; k < no; k++)
		f->dgrad[k] = grads + (size_t)r->order[f->once[k]] * dim;
}

/* The direct list's rows, once r's locations are known. */
static void direct_locs(const ops_rows *r, fused *f)
{
	for (size_t k = 0; k < f->nd; k++)
		f->dloc[k] = r->slocs[f->once[k]];
}

/* Step 4 for shard s: its repeated rows into the accumulators, in the
 * order a push adds them, and its rows held once back from the direct
 * list into the accumulators where a gradient is waiting for them (after
 * it, as a push would add).  Rows differ between the two, so the order
 * between them does not matter. */
static void shard_adds(tbl *t, uint32_t gen, const ops_rows *r, uint32_t s, const float *grads,
		       fused *f)
{
	uint32_t n = r->start[s + 1] - r->start[s];
	gradmap *m = &t->grads[s].acc[gen];
	const size_t dim = t->dim;

	/* Other pushes of this generation first (invariant 1). */
	while (__atomic_load_n(&m->reserved, __ATOMIC_ACQUIRE) != n)
		if (!ops_push_help(t, gen, s))
			sched_yield();

	pthread_mutex_lock(&t->grads[s].mu);
	if (m->count) {
		for (uint32_t k = f->dstart[s]; k < f->dstart[s + 1]; k++) {
			if (gradmap_has(m, f->dloc[k])) {
				gradmap_add(m, f->dloc[k], f->dgrad[k], 1.0f);
				f->dloc[k] = LOC_NONE;
			}
		}
	}
	ops_push_add_positions(m, r, grads, (uint32_t)dim, f->dup + f->pstart[s],
			       f->pstart[s + 1] - f->pstart[s]);
	gradmap_unreserve(m, n);
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
	count_batch(t, &r, tk ? NULL : ids, grads, &f);
	if (tk)
		direct_locs(&r, &f);
	ops_update_lock(t);
	rc = ops_grads_reserve(t, &r, __atomic_load_n(&t->acc_gen, __ATOMIC_RELAXED));
	if (rc != EMDB_OK) {
		ops_update_unlock(t);
		if (!tk)
			ops_rows_abort(t, &r);
		goto done;
	}
	if (!tk) {
		ops_rows_commit(t, ids, &r);
		direct_locs(&r, &f);
	}
	uint32_t gen = ops_update_open(t);
	for (uint32_t s = 0; s < t->shards; s++)
		if (r.start[s + 1] > r.start[s])
			shard_adds(t, gen, &r, s, grads, &f);
	ops_update_apply(t, f.dloc, f.dgrad, f.nd);
	rows = ops_update_close(t, 0);
	TABLE_COUNT(t, calls_push, 1);
	TABLE_COUNT(t, ids_push, r.n);
	if (rows_out)
		*rows_out = rows;
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
