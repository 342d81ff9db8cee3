/*
 * ops_push_update.c - Push and Update in one call: a batch's gradients
 * applied in the same pass that applies whatever was pushed before it.
 *
 * A Push followed by an Update moves every gradient twice: into its
 * accumulator (a write of the whole row's width), then out of it in the
 * optimizer pass.  For SGD that costs about as much as the pass itself
 * (docs/benchmarks-history.md).  This call applies its batch in the pass itself:
 * a row the batch holds once straight from the caller's buffer, a row it
 * holds several times from the sum of its gradients, made beforehand in
 * scratch memory the way a push would make it in an accumulator.  Only a
 * row that already holds a gradient from another push goes through the
 * accumulators, its gradients added after that one.
 *
 * Steps, in order:
 *   1. Resolve the IDs (inserting absent ones) or take the ticket's rows,
 *      allocate the scratch, count each position's row and sum the
 *      gradients of repeated rows (struct fused): all before any lock, so
 *      a failure changes nothing and the work runs while another Update's
 *      pass may hold the table.  The rows held once and the sums make the
 *      direct list.
 *   2. rows_lock and update_lock for writing (ops_update_lock: while
 *      another Update's pass holds rows_lock, this thread helps apply it,
 *      direct rows included); reserve accumulator room in the current
 *      generation for the batch's rows of each shard where other pushes'
 *      gradients wait (reserve_waiting; only there can a row be taken
 *      back).  On failure, unlock and undo step 1: nothing was pushed,
 *      the step did not advance.  Then insert the new IDs (their rows are
 *      the direct list's locations).
 *   3. ops_update_open: step + 1, generation flipped, pass open.  Pushes
 *      that reserved in the old generation earlier may still be adding;
 *      our own reservation keeps each shard we may add to unready, so no
 *      helper applies one before our rows are in (a shard we did not
 *      reserve holds nothing, and gets nothing from us).
 *   4. Per shard reserved in step 2, once only our reservation is left there
 *      (doing a waiting push's adds ourselves, as Update does): if the
 *      shard holds gradients of other pushes, each direct entry whose row
 *      has one is taken back, its gradients added to the accumulator one
 *      position at a time.  Releasing our reservation makes the shard
 *      ready for the pass.
 *   5. Publish the direct list to the pass (ops_update_apply): this thread
 *      and any other Update caller waiting on rows_lock apply it in runs
 *      of 512 rows, rows prefetched ahead; then ops_update_close applies
 *      every shard's accumulators.
 * With two trainers stepping one table, their calls take turns: each one
 * counts and sums its batch while the other's pass runs, then helps that
 * pass, then runs its own with the other's help.  (A first version pushed
 * beside the other's pass instead, as emdb_push does, then updated:
 * 2-thread uniform SGD 0.51-0.56 of the bare loop, against 0.70-0.72
 * taking turns.)
 *
 * Invariants:
 *   1. Each row of the pass is applied exactly once: a direct entry's row
 *      has no accumulator in the pass's generation (checked after every
 *      other push of that generation had added to its shard, and we add
 *      none for it unless we take the entry back), each row is one entry
 *      (grouped exactly), and the direct list is cut into runs, each
 *      claimed and applied by one thread of the pass (ops_update.c).
 *   2. Bit for bit what emdb_push_ticket + emdb_update would give with
 *      nothing pushed in between: a row's gradients are summed in
 *      position order as gradmap_add sums them (1.0f * g first, then
 *      fmaf), into the sum or, for a row with a gradient waiting, into its
 *      accumulator after that gradient.
 *   3. rows_lock is held for writing from step 2 to the end: no reader
 *      sees a row between its old and new value.
 *   4. Counting and grouping by ID (IDs) or by location (ticket) give the
 *      same answer: one ID is one row.  A counter shared by two rows only
 *      sends both to the exact grouping.
 *   5. The positional form (emdb__push_update_at, a cluster home node's
 *      local part) reads position i's gradient at row pos[i] of the
 *      request's buffer instead of row i: only where it is read changes.
 */
#include <math.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "base/loc.h"
#include "db/db_cluster.h"
#include "db/ops.h"
#include "index/hash.h"

/* The caller's gradients: position i's row is grads + i * dim, or with
 * pos grads + pos[i] * dim (invariant 5). */
typedef struct grad_in {
	const float *grads;
	const uint32_t *pos;
	size_t dim;
} grad_in;

static inline const float *grad_of(const grad_in *g, uint32_t i)
{
	return g->grads + (size_t)(g->pos ? g->pos[i] : i) * g->dim;
}

/* Scratch of the call.  A shard's positions are counted by a hash of
 * their row in one byte each of cnt (16 or more counters per position, so
 * few rows share one): a row whose counter reads 1 is held once, and its
 * gradient is applied from the caller's buffer.  The other positions (a
 * row held more than once, or a row sharing its counter) are grouped by
 * row exactly, through the small map rmap, and each group's gradients
 * summed into sums in position order: the same adds, in the same order,
 * as a push makes into an empty accumulator, so the sum is applied
 * directly too.  All of it before any lock.  Counting costs no branch,
 * where an exact map over every position mispredicted about as often as
 * it looked (half the call's time in a profile); the map only sees the
 * repeated positions. */
typedef struct rmap_slot {
	uint64_t key;         /* ID or row location (any uint64: IDs are arbitrary) */
	uint32_t k;           /* its direct entry; RMAP_FREE when the slot is free */
} rmap_slot;

/* A slot is free by its entry number, never by its key: every uint64 is
 * a valid ID.  Entries number fewer than the batch's n < 2^32 - 1. */
#define RMAP_FREE UINT32_MAX
#define NO_POS UINT32_MAX

typedef struct fused {
	uint8_t *cnt;         /* [cnt_cap] */
	uint32_t cnt_cap;
	uint32_t *h;          /* [n] counter of each position, shard order */
	uint32_t *dup;        /* [n] shard-order positions counted more than once */
	uint32_t *pstart;     /* [shards + 1] each shard's part of dup */
	uint32_t *next;       /* [n] by position: the next position of its row */
	rmap_slot *rmap;      /* [pow2_at_least(2 * positions of the largest shard)] */
	float *sums;          /* [n_dup * dim] the groups' sums */
	/* The direct list, [n] each: entry k is the row of position first[k]
	 * with gradient dgrad[k] (the caller's, or a sum); dloc is LOC_NONE for
	 * an entry taken back (the row had a gradient waiting).  Per shard s,
	 * [ostart[s], ostart[s+1]) rows held once, [gstart[s], gstart[s+1])
	 * groups. */
	uint32_t *first;
	uint32_t *last;       /* [n] a group's latest position, while grouping */
	uint64_t *dloc;
	const float **dgrad;
	uint32_t *ostart;     /* [shards + 1] */
	uint32_t *gstart;     /* [shards + 1] */
	size_t nd, n_dup;
} fused;

#define CNT_PER_POS 16u
#define GROUP_AHEAD 16u                       /* positions */
/* Gradients in the batch from which they are read with prefetching (in
 * the grouping, and in the pass).  4 MB (16384 IDs of dim 64) still read
 * faster without: uniform SGD 0.73 of the bare loop against 0.69. */
#define GROUP_PREFETCH_FROM_BYTES (8u << 20)

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
	size_t n = r->n, sh = (size_t)t->shards + 1;
	memset(f, 0, sizeof(*f));
	f->cnt_cap = pow2_at_least(CNT_PER_POS * (uint64_t)most);
	f->cnt = emdb_malloc(f->cnt_cap);
	f->rmap = emdb_malloc(pow2_at_least(2 * (uint64_t)most) * sizeof(*f->rmap));
	f->h = emdb_malloc(5 * n * sizeof(uint32_t));
	f->pstart = emdb_malloc(3 * sh * sizeof(uint32_t));
	f->dloc = emdb_malloc(n * sizeof(*f->dloc));
	f->dgrad = emdb_malloc(n * sizeof(*f->dgrad));
	if (!f->cnt || !f->rmap || !f->h || !f->pstart || !f->dloc || !f->dgrad)
		return EMDB_ERR_NOMEM;
	f->dup = f->h + n;
	f->next = f->dup + n;
	f->first = f->next + n;
	f->last = f->first + n;
	f->ostart = f->pstart + sh;
	f->gstart = f->ostart + sh;
	return EMDB_OK;
}

static void fused_free(fused *f)
{
	emdb_free(f->cnt);
	emdb_free(f->rmap);
	emdb_free(f->h);
	emdb_free(f->pstart);
	emdb_free(f->dloc);
	emdb_free(f->dgrad);
	emdb_free(f->sums);
}

/* The key positions are counted and grouped by: the row location for a
 * ticket, the ID for IDs (whose rows are not resolved yet; one ID is one
 * row). */
static uint64_t pos_key(const ops_rows *r, const uint64_t *ids, uint32_t j)
{
	return ids ? ids[r->order[j]] : r->slocs[j];
}

/* Count every shard's positions; the rows held once become the first
 * direct entries.  The lists are appended to without branches: in a
 * skewed batch whether a position repeats is a coin toss. */
static void count_batch(const tbl *t, const ops_rows *r, const uint64_t *ids, const grad_in *g, fused *f)
{
	uint32_t no = 0, nr = 0;
	for (uint32_t s = 0; s < t->shards; s++) {
		uint32_t a = r->start[s], b = r->start[s + 1];
		f->ostart[s] = no;
		f->pstart[s] = nr;
		if (a == b)
			continue;
		uint32_t mask = pow2_at_least(CNT_PER_POS * (uint64_t)(b - a)) - 1;
		memset(f->cnt, 0, (size_t)mask + 1);
		for (uint32_t j = a; j < b; j++) {
			uint32_t h = (uint32_t)dit_hash(pos_key(r, ids, j)) & mask;
			f->h[j] = h;
			f->cnt[h] += f->cnt[h] != UINT8_MAX;
		}
		for (uint32_t j = a; j < b; j++) {
			uint32_t one = f->cnt[f->h[j]] == 1;
			f->first[no] = j;
			f->dup[nr] = j;
			no += one;
			nr += !one;
		}
	}
	f->ostart[t->shards] = no;
	f->pstart[t->shards] = nr;
	f->nd = no;
	f->n_dup = nr;
	for (uint32_t k = 0; k < no; k++)
		f->dgrad[k] = grad_of(g, r->order[f->first[k]]);
}

/* Group shard s's repeated positions by row, exactly, and sum each
 * group's gradients into a direct entry of its own. */
static void group_shard(const tbl *t, const ops_rows *r, const uint64_t *ids, const grad_in *gi, uint32_t s,
			fused *f, size_t *n_sums, bool ahead)
{
	const size_t dim = t->dim;
	uint32_t c = f->pstart[s + 1] - f->pstart[s];
	f->gstart[s] = (uint32_t)f->nd;
	if (!c)
		return;
	uint32_t mask = pow2_at_least(2 * (uint64_t)c) - 1;
	memset(f->rmap, 0xff, ((size_t)mask + 1) * sizeof(*f->rmap)); /* every k RMAP_FREE */
	uint32_t end = f->pstart[s + 1];
	for (uint32_t q = f->pstart[s]; q < end; q++) {
		if (ahead && q + GROUP_AHEAD < end) {
			uint32_t jn = f->dup[q + GROUP_AHEAD];
			ops_prefetch_row(grad_of(gi, r->order[jn]), dim * sizeof(float));
			__builtin_prefetch(&f->rmap[dit_hash(pos_key(r, ids, jn)) & mask], 0, 3);
		}
		uint32_t j = f->dup[q];
		uint64_t key = pos_key(r, ids, j);
		const float *g = grad_of(gi, r->order[j]);
		uint32_t i = (uint32_t)dit_hash(key) & mask;
		while (f->rmap[i].k != RMAP_FREE && f->rmap[i].key != key)
			i = (i + 1) & mask;
		f->next[j] = NO_POS;
		if (f->rmap[i].k == RMAP_FREE) {
			uint32_t k = (uint32_t)f->nd++;
			float *acc = f->sums + (*n_sums)++ * dim;
			f->rmap[i].key = key;
			f->rmap[i].k = k;
			f->first[k] = f->last[k] = j;
			f->dgrad[k] = acc;
			/* As gradmap_add: 1.0f * g, then fmaf (invariant 2). */
			for (size_t x = 0; x < dim; x++)
				acc[x] = 1.0f * g[x];
		} else {
			uint32_t k = f->rmap[i].k;
			float *acc = (float *)f->dgrad[k];
			for (size_t x = 0; x < dim; x++)
				acc[x] = fmaf(1.0f, g[x], acc[x]);
			f->next[f->last[k]] = j;
			f->last[k] = j;
		}
	}
}

static int group_batch(const tbl *t, const ops_rows *r, const uint64_t *ids, const grad_in *g, fused *f)
{
	size_t n_sums = 0;
	if (f->n_dup) {
		f->sums = emdb_malloc(f->n_dup * t->dim * sizeof(float));
		if (!f->sums)
			return EMDB_ERR_NOMEM;
	}
	/* Gradients read in shard order, at random in the caller's buffer:
	 * fetched ahead once the buffer outgrows the core's cache (on a
	 * cached buffer the hints cost more than they save, as for a push). */
	bool ahead = r->n * t->dim * sizeof(float) > GROUP_PREFETCH_FROM_BYTES;
	for (uint32_t s = 0; s < t->shards; s++)
		group_shard(t, r, ids, g, s, f, &n_sums, ahead);
	f->gstart[t->shards] = (uint32_t)f->nd;
	return EMDB_OK;
}

/* The direct list's rows, once r's locations are known. */
static void direct_locs(const ops_rows *r, fused *f)
{
	for (size_t k = 0; k < f->nd; k++)
		f->dloc[k] = r->slocs[f->first[k]];
}

/* Step 4 for shard s: where the shard holds gradients of other pushes,
 * a direct entry whose row has one is taken back and its gradients added
 * after it, one position at a time in position order, as a push would
 * add them (invariant 2). */
static void shard_adds(tbl *t, uint32_t gen, const ops_rows *r, uint32_t s, const grad_in *g, fused *f)
{
	uint32_t n = r->start[s + 1] - r->start[s];
	gradmap *m = &t->grads[s].acc[gen];

	/* Other pushes of this generation first (invariant 1). */
	while (__atomic_load_n(&m->reserved, __ATOMIC_ACQUIRE) != n)
		if (!ops_push_help(t, gen, s))
			sched_yield();

	pthread_mutex_lock(&t->grads[s].mu);
	/* Workers' gradients (emdb_push_as) join the shared ones first, as
	 * the pass would add them, so that a row holding one is taken back. */
	gradrank_fold(&t->grads[s].ranked[gen], m);
	for (int part = 0; m->count && part < 2; part++) {
		const uint32_t *st = part ? f->gstart : f->ostart;
		for (uint32_t k = st[s]; k < st[s + 1]; k++) {
			if (!gradmap_has(m, f->dloc[k]))
				continue;
			for (uint32_t j = f->first[k]; j != NO_POS; j = part ? f->next[j] : NO_POS)
				gradmap_add(m, r->slocs[j], grad_of(g, r->order[j]), 1.0f);
			f->dloc[k] = LOC_NONE;
		}
	}
	gradmap_unreserve(m, n);
	pthread_mutex_unlock(&t->grads[s].mu);
}

/* Step 2's reservation, only in the shards of the batch where gradients
 * of other pushes are waiting or being added (count or reserved nonzero):
 * only there can a row need taking back.  Holding update_lock for
 * writing, nothing reserves anywhere else meanwhile, and a shard found
 * empty and unreserved stays so for this generation; reading its count
 * without the mutex is safe, since the last push to add there released
 * its reservation after its adds.  Skipping the others saves two mutex
 * round trips per shard.  On failure nothing stays reserved.  Sets
 * waiting[] to the shards reserved. */
static int reserve_waiting(tbl *t, const ops_rows *r, uint32_t gen, uint64_t *waiting)
{
	memset(waiting, 0, DIT_MAX_SHARDS / 8);
	for (uint32_t s = 0; s < t->shards; s++) {
		uint32_t n = r->start[s + 1] - r->start[s];
		gradmap *m = &t->grads[s].acc[gen];
		if (!n || (__atomic_load_n(&m->reserved, __ATOMIC_ACQUIRE) == 0 && m->count == 0 && m->held == 0))
			continue;
		pthread_mutex_lock(&t->grads[s].mu);
		int rc = gradmap_reserve(m, n);
		pthread_mutex_unlock(&t->grads[s].mu);
		if (rc != EMDB_OK) {
			for (uint32_t q = 0; q < s; q++) {
				if (!(waiting[q / 64] >> (q % 64) & 1))
					continue;
				pthread_mutex_lock(&t->grads[q].mu);
				gradmap_unreserve(&t->grads[q].acc[gen], r->start[q + 1] - r->start[q]);
				pthread_mutex_unlock(&t->grads[q].mu);
			}
			return rc;
		}
		waiting[s / 64] |= 1ull << (s % 64);
	}
	return EMDB_OK;
}

static uint64_t fused_grads_more(tbl *t, const dit_plan *plan)
{
	return ops_grads_bytes(t, plan->start, true);
}

static int push_update_common(emdb_db *db, uint32_t id, const uint64_t *ids, size_t n,
			      const emdb_ticket *tk, uint32_t dim, const float *grads, const uint32_t *pos,
			      uint64_t *rows_out)
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
	grad_in g = { .grads = grads, .pos = pos, .dim = t->dim };
	if (tk) {
		ops_rows_from_ticket(tk, &r);
		if (emdb_alloc_limit())
			rc = table_check_memory(t, ops_grads_bytes(t, r.start, true), "room for the gradients of", r.n);
	} else {
		rc = ops_rows_prepare(t, ids, n, fused_grads_more, &r);
	}
	if (rc != EMDB_OK)
		goto out;
	rc = fused_alloc(t, &r, &f);
	if (rc != EMDB_OK) {
		if (!tk)
			ops_rows_abort(t, &r);
		goto done;
	}
	count_batch(t, &r, tk ? NULL : ids, &g, &f);
	rc = group_batch(t, &r, tk ? NULL : ids, &g, &f);
	if (rc != EMDB_OK) {
		if (!tk)
			ops_rows_abort(t, &r);
		goto done;
	}
	if (tk)
		direct_locs(&r, &f);
	ops_update_lock(t);
	uint64_t waiting[DIT_MAX_SHARDS / 64];
	rc = reserve_waiting(t, &r, __atomic_load_n(&t->acc_gen, __ATOMIC_RELAXED), waiting);
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
		if (waiting[s / 64] >> (s % 64) & 1)
			shard_adds(t, gen, &r, s, &g, &f);
	ops_update_apply(t, f.dloc, f.dgrad, f.nd,
			 r.n * t->dim * sizeof(float) > GROUP_PREFETCH_FROM_BYTES);
	rows = ops_update_close(t);
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
	return push_update_common(db, tid, ids, n, NULL, dim, grads, NULL, rows_out);
}

int emdb_push_update_ticket(emdb_db *db, uint32_t tid, const emdb_ticket *t, uint32_t dim,
			    const float *grads, uint64_t *rows_out)
{
	if (!t)
		return emdb__seterr(EMDB_ERR_INVALID, "push_update: ticket is NULL");
	return push_update_common(db, tid, NULL, 0, t, dim, grads, NULL, rows_out);
}

int emdb__push_update_at(emdb_db *db, uint32_t tid, const uint64_t *ids, size_t n, const emdb_ticket *tk,
			 uint32_t dim, const uint32_t *pos, const float *grads, uint64_t *rows_out)
{
	if (!pos)
		return emdb__seterr(EMDB_ERR_INVALID, "push_update: NULL positions");
	return push_update_common(db, tid, tk ? NULL : ids, tk ? 0 : n, tk, dim, grads, pos, rows_out);
}
