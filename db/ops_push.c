/*
 * ops_push.c - Push: accumulate gradients, by IDs or ticket, plain or as
 * the backward of a pooled Pull.
 *
 * The batch's positions are already grouped by index shard (plan or
 * ticket); the push sweeps those groups in staggered ring order and takes
 * each shard's gradient mutex once, as the index does (HypeReca 4.2), so
 * concurrent pushes rarely wait on each other.  A row belongs to exactly
 * one shard (that of its ID), so its accumulator is only ever touched under
 * that shard's mutex.
 *
 * Invariants:
 *   1. All or nothing: index room and rows for new IDs, then accumulator
 *      room in every shard the batch touches, are reserved first; if one
 *      reservation fails, the earlier ones are released, no row is inserted
 *      and no gradient is added.  Inserting and adding cannot fail.
 *   2. The call picks its accumulator generation and reserves room in it
 *      holding update_lock for reading, so no Update flips the generation
 *      in between; then it adds with no table lock.  The Update that flips
 *      it away applies a shard only once that shard's reservations are
 *      gone, i.e. once every push of the generation has added there: every
 *      gradient of a push is applied by the same Update.  Pushes never wait
 *      for an Update to apply.
 *   3. The add loop only prefetches ahead (keys, gradients, accumulators):
 *      a hint for a row never changes what is added where.
 *   4. A push's adds to one shard are done exactly once, by the push or by
 *      one Update waiting on that shard (ops_push_help), whichever claims
 *      the shard first under its mutex; the push returns only after every
 *      helper that found it has left, so its buffers outlive their readers.
 *   5. A push that names its worker (emdb_push_as) adds into that worker's
 *      accumulators (db/gradrank.h) and reserves in the shared ones too:
 *      the room the Update's fold needs, and the reservation that keeps
 *      the shard unready until its adds are done, kept (gradmap_keep) as
 *      room once they are.  Readiness stays one load of the shared
 *      reservation count.
 */
#include <sched.h>
#include <stdbool.h>
#include <string.h>

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "db/db_cluster.h"
#include "db/ops.h"

/* Where position p's gradient comes from: grads + p*dim (plain), or row
 * bag_of[p] scaled by bag_scale[bag_of[p]]: the gradient of p's bag
 * scaled by 1 (SUM) or 1/bag size (MEAN), or the rows a cluster's home
 * node mapped to an owner's positions (emdb__push_mapped); with
 * per-sample weights (weighted SUM) scaled by weights[p] instead; with
 * neither, by 1 (a home node's local part reading its positions' rows
 * in the request's buffer: the plain push's adds). */
typedef struct grad_src {
	const float *grads;
	const uint32_t *bag_of;  /* [n] or NULL */
	const float *bag_scale;  /* [n_bags] or NULL */
	const float *weights;    /* [n] per position, or NULL */
	uint32_t dim;
	uint32_t rank;           /* the pushing worker, or EMDB_WORKER_NONE */
	uint32_t dev;            /* the replica whose memory held the
				    gradients; 0 for host memory (hot_push) */
} grad_src;

static float grad_scale(const grad_src *g, uint32_t p)
{
	if (!g->bag_of)
		return 1.0f;
	if (g->weights)
		return g->weights[p];
	return g->bag_scale ? g->bag_scale[g->bag_of[p]] : 1.0f;
}

/* Prefetch distances of the add loop, in positions: the key's slot and
 * the incoming gradient first, the accumulator once the slot is cached
 * (invariant 3).  Only for a shard whose accumulators outgrew the core's
 * caches (many rows pushed since the last Update): on a small, cached map
 * the hints cost more than they save (5-10% in emdb-bench's Push+Update,
 * against 15-20% gained on a 100k-ID Push into 16k rows a shard). */
#define KEY_AHEAD 16u
#define ACC_AHEAD 8u
#define PREFETCH_FROM_BYTES (64u << 10)

static const float *grad_row(const grad_src *g, uint32_t p)
{
	return g->grads + (size_t)(g->bag_of ? g->bag_of[p] : p) * g->dim;
}

static void prefetch_row(const float *row, uint32_t dim)
{
	for (size_t off = 0; off < (size_t)dim * sizeof(float); off += 64)
		__builtin_prefetch((const char *)row + off, 0, 3);
}

static uint32_t group_of(const ops_rows *r, uint32_t s)
{
	return r->start[s + 1] - r->start[s];
}

/* The shards a batch touches, swept in staggered ring order under each
 * one's gradient mutex.  A shard whose mutex is busy (another batch is
 * adding there, or an Update checking it) is put off to the end of the
 * sweep instead of waited for: by then the other batch has moved on, and
 * the two sweeps go on side by side without sleeping on each other. */
typedef struct grad_sweep {
	tbl *t;
	const ops_rows *r;
	uint32_t gen;
	uint32_t rank;    /* the pushing worker, or EMDB_WORKER_NONE */
	uint64_t done[DIT_MAX_SHARDS / 64]; /* shards fn ran on */
} grad_sweep;

typedef int (*grad_shard_fn)(grad_sweep *w, uint32_t s, const void *ctx);

static int sweep_one(grad_sweep *w, uint32_t s, grad_shard_fn fn, const void *ctx)
{
	int rc = fn(w, s, ctx);
	pthread_mutex_unlock(&w->t->grads[s].mu);
	if (rc == EMDB_OK)
		w->done[s / 64] |= 1ull << (s % 64);
	return rc;
}

/* Run fn on every shard the batch touches, each under its mutex (fn must
 * not unlock it), stopping at the first error.  done[] says where fn ran. */
static int sweep(grad_sweep *w, grad_shard_fn fn, const void *ctx)
{
	tbl *t = w->t;
	uint32_t first = dit_sweep_start(t->index);
	uint32_t n_busy = 0;
	uint64_t busy[DIT_MAX_SHARDS / 64];
	memset(w->done, 0, ((t->shards + 63) / 64) * sizeof(w->done[0]));
	memset(busy, 0, ((t->shards + 63) / 64) * sizeof(busy[0]));

	for (uint32_t k = 0; k < t->shards; k++) {
		uint32_t s = (first + k) & (t->shards - 1);
		if (!group_of(w->r, s))
			continue;
		if (pthread_mutex_trylock(&t->grads[s].mu) != 0) {
			busy[s / 64] |= 1ull << (s % 64);
			n_busy++;
			continue;
		}
		int rc = sweep_one(w, s, fn, ctx);
		if (rc != EMDB_OK)
			return rc;
	}
	for (uint32_t x = 0; n_busy && x < (t->shards + 63) / 64; x++) {
		for (uint64_t bits = busy[x]; bits; bits &= bits - 1) {
			uint32_t s = x * 64 + (uint32_t)__builtin_ctzll(bits);
			pthread_mutex_lock(&t->grads[s].mu);
			int rc = sweep_one(w, s, fn, ctx);
			if (rc != EMDB_OK)
				return rc;
		}
	}
	return EMDB_OK;
}

static int reserve_shard(grad_sweep *w, uint32_t s, const void *ctx)
{
	(void)ctx;
	table_grads *tg = &w->t->grads[s];
	uint32_t n = group_of(w->r, s);
	int rc = gradmap_reserve(&tg->acc[w->gen], n);
	if (rc == EMDB_OK && w->rank != EMDB_WORKER_NONE) { /* invariant 5 */
		rc = gradrank_reserve(&tg->ranked[w->gen], w->t->dim, w->rank, n);
		if (rc != EMDB_OK)
			gradmap_unreserve(&tg->acc[w->gen], n);
	}
	return rc;
}

/* Undo reserve_shard, under the shard's mutex. */
static void unreserve_shard(tbl *t, uint32_t s, uint32_t gen, uint32_t rank, uint32_t n)
{
	table_grads *tg = &t->grads[s];
	if (rank != EMDB_WORKER_NONE)
		gradmap_unreserve(gradrank_find(&tg->ranked[gen], rank), n);
	gradmap_unreserve(&tg->acc[gen], n);
}

/* First sweep: room for every position of the batch in its shard's
 * accumulators of generation gen.  On failure nothing stays reserved. */
static int grads_reserve(tbl *t, const ops_rows *r, uint32_t gen, uint32_t rank)
{
	grad_sweep w = { .t = t, .r = r, .gen = gen, .rank = rank };
	int rc = sweep(&w, reserve_shard, NULL);
	if (rc == EMDB_OK)
		return EMDB_OK;
	for (uint32_t s = 0; s < t->shards; s++) {
		if (!(w.done[s / 64] >> (s % 64) & 1))
			continue;
		pthread_mutex_lock(&t->grads[s].mu);
		unreserve_shard(t, s, gen, rank, group_of(r, s));
		pthread_mutex_unlock(&t->grads[s].mu);
	}
	return rc;
}

/* A push's add phase, open to helpers: an Update applying generation gen
 * that finds a shard still reserved by this push may take that shard's
 * adds (ops_push_help) instead of waiting for the push to get there.
 * claimed[s] says who took shard s; it is set under the shard's mutex.
 * The push unlinks itself, then waits for `users` (helpers that found it
 * in the list) to drain before it returns and its buffers go. */
struct push_work {
	push_work *next;
	const ops_rows *r;
	const grad_src *g;
	uint32_t gen;
	uint32_t users;                   /* atomic */
	uint8_t claimed[DIT_MAX_SHARDS];  /* atomic */
};

/* The adds of shard s, under its mutex: consumes the reservation, so the
 * last one lets the Update waiting on the shard apply it. */
static void add_locked(tbl *t, const push_work *pw, uint32_t s)
{
	const grad_src *g = pw->g;
	const ops_rows *r = pw->r;
	uint32_t a = r->start[s], b = r->start[s + 1];
	gradmap *shared = &t->grads[s].acc[pw->gen];
	gradmap *m = g->rank == EMDB_WORKER_NONE ? shared : gradrank_find(&t->grads[s].ranked[pw->gen], g->rank);
	bool ahead = gradmap_bytes(m) >= PREFETCH_FROM_BYTES;

	for (uint32_t j = a; j < b; j++) {
		if (ahead && j + KEY_AHEAD < b) {
			gradmap_prefetch_key(m, r->slocs[j + KEY_AHEAD]);
			prefetch_row(grad_row(g, r->order[j + KEY_AHEAD]), g->dim);
		}
		if (ahead && j + ACC_AHEAD < b)
			gradmap_prefetch_acc(m, r->slocs[j + ACC_AHEAD]);
		uint32_t p = r->order[j];
		gradmap_add(m, r->slocs[j], grad_row(g, p), grad_scale(g, p));
	}
	if (m != shared) {
		/* Invariant 5: the shared reservation goes last, its release
		 * store publishing the worker map's adds too. */
		gradmap_unreserve(m, b - a);
		gradmap_keep(shared, b - a);
	} else {
		gradmap_unreserve(m, b - a);
	}
}

static int add_shard(grad_sweep *w, uint32_t s, const void *ctx)
{
	push_work *pw = (push_work *)ctx;
	if (!__atomic_exchange_n(&pw->claimed[s], 1, __ATOMIC_ACQ_REL))
		add_locked(w->t, pw, s);
	return EMDB_OK;
}

/* Second sweep: add the gradients, open to helpers while it runs. */
static void grads_add(tbl *t, const ops_rows *r, const grad_src *g, uint32_t gen)
{
	push_work pw = { .r = r, .g = g, .gen = gen };
	memset(pw.claimed, 0, t->shards);
	pthread_mutex_lock(&t->pushes_mu);
	pw.next = t->pushes;
	t->pushes = &pw;
	pthread_mutex_unlock(&t->pushes_mu);

	grad_sweep w = { .t = t, .r = r, .gen = gen };
	(void)sweep(&w, add_shard, &pw);

	pthread_mutex_lock(&t->pushes_mu);
	push_work **pp = &t->pushes;
	while (*pp != &pw)
		pp = &(*pp)->next;
	*pp = pw.next;
	pthread_mutex_unlock(&t->pushes_mu);
	while (__atomic_load_n(&pw.users, __ATOMIC_ACQUIRE))
		sched_yield();
}

bool ops_push_help(tbl *t, uint32_t gen, uint32_t s)
{
	push_work *pw = NULL;
	pthread_mutex_lock(&t->pushes_mu);
	for (push_work *q = t->pushes; q; q = q->next) {
		if (q->gen == gen && group_of(q->r, s) && !__atomic_load_n(&q->claimed[s], __ATOMIC_ACQUIRE)) {
			pw = q;
			__atomic_fetch_add(&pw->users, 1, __ATOMIC_RELAXED);
			break;
		}
	}
	pthread_mutex_unlock(&t->pushes_mu);
	if (!pw)
		return false;
	bool did = false;
	pthread_mutex_lock(&t->grads[s].mu);
	if (!__atomic_exchange_n(&pw->claimed[s], 1, __ATOMIC_ACQ_REL)) {
		add_locked(t, pw, s);
		did = true;
	}
	pthread_mutex_unlock(&t->grads[s].mu);
	__atomic_fetch_sub(&pw->users, 1, __ATOMIC_RELEASE);
	return did;
}

uint64_t ops_grads_bytes(tbl *t, const uint32_t *start, bool pending_only)
{
	return ops_grads_bytes_as(t, start, pending_only, EMDB_WORKER_NONE);
}

uint64_t ops_grads_bytes_as(tbl *t, const uint32_t *start, bool pending_only, uint32_t rank)
{
	uint64_t bytes = 0;
	uint32_t gen = __atomic_load_n(&t->acc_gen, __ATOMIC_RELAXED);
	for (uint32_t s = 0; s < t->shards; s++) {
		uint32_t n = start[s + 1] - start[s];
		if (!n)
			continue;
		gradmap *m = &t->grads[s].acc[gen];
		pthread_mutex_lock(&t->grads[s].mu);
		if (!pending_only || m->count || m->reserved)
			bytes += gradmap_reserve_bytes(m, n);
		if (rank != EMDB_WORKER_NONE)
			bytes += gradrank_reserve_bytes(&t->grads[s].ranked[gen], t->dim, rank, n);
		pthread_mutex_unlock(&t->grads[s].mu);
	}
	return bytes;
}

/* The pushing worker, for push_grads_more: the resolver's callback takes
 * only the table and the plan. */
static __thread uint32_t push_more_rank = EMDB_WORKER_NONE;

static uint64_t push_grads_more(tbl *t, const dit_plan *plan)
{
	return ops_grads_bytes_as(t, plan->start, false, push_more_rank);
}

/* The gradient of position p for the device replica's accumulators
 * (db/hot.h hot_push): the row and scale gradmap_add takes. */
static void hot_grad(const void *ctx, uint32_t p, const float **row, float *scale)
{
	const grad_src *g = ctx;
	*row = grad_row(g, p);
	*scale = grad_scale(g, p);
}

/* The push proper, on table t (referenced, checked): reserve, insert,
 * add (invariants 1 and 2), and count the call. */
static int push_rows(tbl *t, const uint64_t *ids, size_t n, const emdb_ticket *tk, const grad_src *g)
{
	/* Everything that can fail (index room, rows, accumulator room) is
	 * reserved before the first insert or add (invariant 1); only the
	 * accumulator room needs update_lock (invariant 2).  Under a memory
	 * limit all of that growth is checked before any of it is mapped:
	 * the rows' chunks could not be given back if the accumulators were
	 * refused after them. */
	int rc = EMDB_OK;
	ops_rows r;
	if (tk) {
		ops_rows_from_ticket(tk, &r);
		if (emdb_alloc_limit())
			rc = table_check_memory(t, ops_grads_bytes_as(t, r.start, false, g->rank),
						"room for the gradients of", n);
	} else {
		push_more_rank = g->rank;
		rc = ops_rows_prepare(t, ids, n, push_grads_more, &r);
		push_more_rank = EMDB_WORKER_NONE;
	}
	if (rc == EMDB_OK) {
		pthread_rwlock_rdlock(&t->update_lock);
		uint32_t gen = __atomic_load_n(&t->acc_gen, __ATOMIC_RELAXED);
		rc = grads_reserve(t, &r, gen, g->rank);
		pthread_rwlock_unlock(&t->update_lock);
		if (rc == EMDB_OK) {
			if (!tk)
				ops_rows_commit(t, ids, &r);
			hot_push_job hj = { 0 };
			if (t->hot) /* hot rows' sums to the device too, enqueued */
				hot_push(t->hot, g->dev, gen, r.slocs, r.order, n, hot_grad, g, &hj);
			grads_add(t, &r, g, gen); /* the host's part, meanwhile */
			if (t->hot)
				hot_push_wait(t->hot, &hj);
		} else if (!tk) {
			ops_rows_abort(t, &r);
		}
		ops_rows_done(&r);
	}
	if (rc == EMDB_OK) {
		TABLE_COUNT(t, calls_push, 1);
		TABLE_COUNT(t, ids_push, n);
	}
	return rc;
}

static int check_worker(uint32_t rank)
{
	if (rank != EMDB_WORKER_NONE && rank >= EMDB_WORKERS_MAX)
		return emdb__seterr(EMDB_ERR_INVALID, "push: worker rank %u, not below %u", rank, EMDB_WORKERS_MAX);
	return EMDB_OK;
}

/* Gradients in device memory of the table's replica (a mem:// trainer's)
 * are copied to host memory first: the host's accumulators are the
 * authority (db/hot.h).  *copy is that copy, for the caller to free;
 * *dev the device's replica, where the hot rows' sums go (hot_push). */
static int push_host_grads(tbl *t, size_t rows, uint32_t dim, const float **grads, float **copy,
			   uint32_t *dev)
{
	int rep = t->hot ? hot_ptr_replica(t->hot, *grads) : -1;
	size_t bytes = rows * dim * sizeof(float);
	*copy = NULL;
	if (rep < 0)
		return EMDB_OK;
	*dev = (uint32_t)rep;
	if (!(*copy = emdb_malloc(bytes ? bytes : 1)))
		return EMDB_ERR_NOMEM;
	int rc = hot_copy_out(t->hot, rep, *copy, *grads, bytes);
	*grads = *copy;
	return rc;
}

static int push_common(emdb_db *db, uint32_t id, uint32_t rank, const uint64_t *ids, size_t n,
		       const emdb_ticket *tk, const uint64_t *offsets, size_t n_bags, emdb_pool pool,
		       const float *weights, uint32_t dim, const float *grads)
{
	tbl *t;
	if (!grads || (!tk && !ids))
		return emdb__seterr(EMDB_ERR_INVALID, "push: NULL ids, ticket or gradient buffer");
	if (check_worker(rank) != EMDB_OK)
		return EMDB_ERR_INVALID;
	int rc = ops_open(db, id, tk, n, dim, &t);
	if (rc != EMDB_OK)
		return rc;
	if (tk)
		n = tk->n;

	grad_src g = { .grads = grads, .dim = dim, .rank = rank };
	void *bags = NULL;
	float *host_grads = NULL;
	rc = push_host_grads(t, offsets ? n_bags : n, dim, &g.grads, &host_grads, &g.dev);
	if (rc != EMDB_OK)
		goto out;
	if (offsets || n_bags) {
		rc = ops_check_bags(offsets, n_bags, n, pool);
		if (rc == EMDB_OK && weights)
			rc = ops_check_weights(weights, pool);
		if (rc != EMDB_OK)
			goto out;
		bags = emdb_malloc(n * sizeof(uint32_t) + n_bags * sizeof(float));
		if (!bags) {
			rc = EMDB_ERR_NOMEM;
			goto out;
		}
		uint32_t *bag_of = bags;
		float *scale = (float *)(bag_of + n);
		for (size_t b = 0; b < n_bags; b++) {
			uint64_t cnt = offsets[b + 1] - offsets[b];
			scale[b] = (pool == EMDB_POOL_MEAN && cnt > 1) ? 1.0f / (float)cnt : 1.0f;
			for (uint64_t i = offsets[b]; i < offsets[b + 1]; i++)
				bag_of[i] = (uint32_t)b;
		}
		g.bag_of = bag_of;
		g.bag_scale = scale;
		g.weights = weights;
	}
	rc = push_rows(t, ids, n, tk, &g);
out:
	emdb_free(bags);
	emdb_free(host_grads);
	table_release(t);
	return rc;
}

static int push_mapped(emdb_db *db, uint32_t id, uint32_t rank, const uint64_t *ids, size_t n,
		       const emdb_ticket *tk, const uint32_t *row_of, const float *scale, const float *weights,
		       size_t n_rows, uint32_t dim, const float *grads)
{
	tbl *t;
	if (!grads || (!tk && !ids) || !row_of)
		return emdb__seterr(EMDB_ERR_INVALID, "push: NULL ids, ticket, rows or gradient buffer");
	if (check_worker(rank) != EMDB_OK)
		return EMDB_ERR_INVALID;
	int rc = ops_open(db, id, tk, n, dim, &t);
	if (rc != EMDB_OK)
		return rc;
	if (tk)
		n = tk->n;
	for (size_t i = 0; i < n && rc == EMDB_OK; i++)
		if (row_of[i] >= n_rows)
			rc = emdb__seterr(EMDB_ERR_INVALID, "push: position %zu takes gradient row %u of %zu", i,
					  row_of[i], n_rows);
	grad_src g = { .grads = grads, .bag_of = row_of, .bag_scale = scale, .weights = weights, .dim = dim,
		       .rank = rank };
	if (rc == EMDB_OK)
		rc = push_rows(t, ids, n, tk, &g);
	table_release(t);
	return rc;
}

int emdb__push_mapped_as(emdb_db *db, uint32_t id, uint32_t rank, const uint64_t *ids, size_t n,
			 const emdb_ticket *tk, const uint32_t *row_of, const float *scale, const float *weights,
			 size_t n_rows, uint32_t dim, const float *grads)
{
	if (!row_of)
		return push_common(db, id, rank, ids, n, tk, NULL, 0, EMDB_POOL_SUM, NULL, dim, grads);
	return push_mapped(db, id, rank, ids, n, tk, row_of, scale, weights, n_rows, dim, grads);
}

int emdb__push_mapped(emdb_db *db, uint32_t id, const uint64_t *ids, size_t n, const emdb_ticket *tk,
		      const uint32_t *row_of, const float *scale, size_t n_rows, uint32_t dim, const float *grads)
{
	if (!scale)
		return emdb__seterr(EMDB_ERR_INVALID, "push: NULL scale");
	return push_mapped(db, id, EMDB_WORKER_NONE, ids, n, tk, row_of, scale, NULL, n_rows, dim, grads);
}

int emdb__push_mapped_weighted(emdb_db *db, uint32_t id, const uint64_t *ids, size_t n, const emdb_ticket *tk,
			       const uint32_t *row_of, const float *weights, size_t n_rows, uint32_t dim,
			       const float *grads)
{
	if (!weights)
		return emdb__seterr(EMDB_ERR_INVALID, "push: NULL weights");
	return push_mapped(db, id, EMDB_WORKER_NONE, ids, n, tk, row_of, NULL, weights, n_rows, dim, grads);
}

int emdb_push_as(emdb_db *db, uint32_t tid, uint32_t worker, const emdb_push_batch *b)
{
	if (!b)
		return emdb__seterr(EMDB_ERR_INVALID, "push: NULL batch");
	if ((b->weights || b->n_bags) && !b->offsets)
		return emdb__seterr(EMDB_ERR_INVALID, "push: bags or weights without offsets");
	return push_common(db, tid, worker, b->ticket ? NULL : b->ids, b->ticket ? 0 : b->n, b->ticket,
			   b->offsets, b->n_bags, b->pool, b->weights, b->dim, b->grads);
}

int emdb_push(emdb_db *db, uint32_t tid, const uint64_t *ids, size_t n, uint32_t dim, const float *grads)
{
	return push_common(db, tid, EMDB_WORKER_NONE, ids, n, NULL, NULL, 0, EMDB_POOL_SUM, NULL, dim, grads);
}

int emdb_push_ticket(emdb_db *db, uint32_t tid, const emdb_ticket *t, uint32_t dim, const float *grads)
{
	if (!t)
		return emdb__seterr(EMDB_ERR_INVALID, "push: ticket is NULL");
	return push_common(db, tid, EMDB_WORKER_NONE, NULL, 0, t, NULL, 0, EMDB_POOL_SUM, NULL, dim, grads);
}

int emdb_push_bags(emdb_db *db, uint32_t tid, const uint64_t *ids, size_t n, const uint64_t *offsets,
		   size_t n_bags, emdb_pool pool, uint32_t dim, const float *grads)
{
	if (!offsets)
		return emdb__seterr(EMDB_ERR_INVALID, "push_bags: offsets is NULL");
	return push_common(db, tid, EMDB_WORKER_NONE, ids, n, NULL, offsets, n_bags, pool, NULL, dim, grads);
}

int emdb_push_bags_ticket(emdb_db *db, uint32_t tid, const emdb_ticket *t, const uint64_t *offsets,
			  size_t n_bags, emdb_pool pool, uint32_t dim, const float *grads)
{
	if (!t || !offsets)
		return emdb__seterr(EMDB_ERR_INVALID, "push_bags: ticket or offsets is NULL");
	return push_common(db, tid, EMDB_WORKER_NONE, NULL, 0, t, offsets, n_bags, pool, NULL, dim, grads);
}

int emdb_push_bags_weighted(emdb_db *db, uint32_t tid, const uint64_t *ids, size_t n, const uint64_t *offsets,
			    size_t n_bags, emdb_pool pool, const float *weights, uint32_t dim, const float *grads)
{
	if (!offsets || !weights)
		return emdb__seterr(EMDB_ERR_INVALID, "push_bags_weighted: offsets or weights is NULL");
	return push_common(db, tid, EMDB_WORKER_NONE, ids, n, NULL, offsets, n_bags, pool, weights, dim, grads);
}

int emdb_push_bags_weighted_ticket(emdb_db *db, uint32_t tid, const emdb_ticket *t, const uint64_t *offsets,
				   size_t n_bags, emdb_pool pool, const float *weights, uint32_t dim,
				   const float *grads)
{
	if (!t || !offsets || !weights)
		return emdb__seterr(EMDB_ERR_INVALID, "push_bags_weighted: ticket, offsets or weights is NULL");
	return push_common(db, tid, EMDB_WORKER_NONE, NULL, 0, t, offsets, n_bags, pool, weights, dim, grads);
}
