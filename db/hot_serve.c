/*
 * hot_serve.c - Pull, Push and Prefetch through the hot rows' device
 * replica (db/hot.h, "serving through the tier").
 *
 * The host copy stays the authority (hot.c invariant 1): Pull reads the
 * replica only where it equals the host bit for bit, Push gives the host
 * every gradient as before and the device a copy, and Update's step of
 * the replica takes the device's copy only when it is provably the
 * host's sum.
 *
 * Invariants (h->tmu guards all of this state and the tier):
 *   1. A Pull reads a slot of the tier only if it is a member's (equal to
 *      the host since the last hot_step: hot.c invariant 2) or a slot a
 *      Prefetch staged in the current epoch.  The epoch moves at every
 *      hot_step and hot_rows_written; a replica marked stale (overflow,
 *      rows written outside an Update) serves no Pull until the next step.
 *   2. Lent slots (staging) come from the free list and go back to it at
 *      the next hot_step, before the hot set is revised; they never hold
 *      a member.
 *   3. exact[g] is true at the start of generation g (set by the step that
 *      closed g's last use) and turns false for good within g when a push
 *      of g cannot give the device the host's sum: a push racing the step
 *      boundary (g is not dev_gen yet), a hot row in two pushes of one
 *      step, a sum holding -0 or NaN (the device's accumulator starts at
 *      +0, so 0 + s is not s there), or a tier error.
 *   4. psum[slot] is the sum the host's gradmap_add computes for that row
 *      from the same push (first scale*g, then fmaf in the host's order:
 *      shard order, position order within a shard); hot_serve_step
 *      compares it bit for bit with the host's recorded gradient of every
 *      recorded row and counts them against the rows scattered before it
 *      steps from the device, so a mismatch of any kind replays instead.
 *   5. acc_dirty: the tier refused to empty its accumulators (they hold
 *      sums of a step already taken); no push adds to them and no step
 *      reads them until a discard succeeds.
 *   6. With several replicas a push scatters into one replica only (the
 *      device its gradients came from; 0 for host memory) and the step
 *      reduces the accumulators across replicas (tier_reduce) before
 *      stepping from them.  Exactness (3, 4) means each stepped row was
 *      scattered by one push, so into one replica, the others holding +0
 *      there: the reduced sum is that push's sum, bit for bit (s is never
 *      -0 or NaN), on every replica.  A refused reduce replays the host's
 *      sums, like a refused step.
 *   7. Push and Pull enqueue their device part (tier_*_submit) and wait
 *      for it after their host part; jobs_out counts the jobs between.
 *      A Pull's job ends within the Pull's rows_lock (no step between);
 *      a Push's may outlive the step boundary, which is safe because the
 *      tier runs work in submission order (the step's work comes after
 *      the scatter) and the push counted its rows (npushed) at submit.
 *      A tier dropped for failing while jobs are out is kept (zombie)
 *      and closed by the last wait, so no wait uses a closed tier.
 */
#include <math.h>
#include <string.h>

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "db/hot_int.h"

struct hot_staged {
	uint64_t epoch;
	size_t n;
	uint32_t slot[]; /* [n] UINT32_MAX: not staged */
};

static uint64_t slots_of(const hot *h)
{
	return (uint64_t)h->max_chunks * h->rpc;
}

int hot_serve_init(hot *h)
{
	uint64_t ns = slots_of(h);

	h->exact[0] = h->exact[1] = true;
	h->pround = emdb_calloc(ns ? ns : 1, sizeof(uint64_t));
	h->pcall = emdb_calloc(ns ? ns : 1, sizeof(uint32_t));
	h->psum = emdb_malloc((ns ? ns : 1) * h->dim * sizeof(float));
	h->lent = emdb_malloc((ns ? ns : 1) * sizeof(uint32_t));
	return h->pround && h->pcall && h->psum && h->lent ? EMDB_OK : EMDB_ERR_NOMEM;
}

void hot_serve_free(hot *h)
{
	emdb_free(h->pround);
	emdb_free(h->pcall);
	emdb_free(h->psum);
	emdb_free(h->lent);
}

void hot_serve_unlend(hot *h)
{
	for (uint32_t k = 0; k < h->nlent; k++)
		h->free_slots[h->nfree++] = h->lent[k];
	h->nlent = 0;
}

void hot_serve_next(hot *h, uint32_t gen)
{
	h->exact[gen] = true; /* invariant 3: for g's next turn */
	h->dev_gen = gen ^ 1;
	h->round++;
	h->npushed = 0;
	__atomic_fetch_add(&h->epoch, 1, __ATOMIC_RELAXED);
}

/* Empty the device's accumulators; when the tier refuses, they stay
 * dirty (invariant 5) and the next user tries again.  IO or OK. */
int hot_serve_discard(hot *h)
{
	int rc = tier_pending(h->tier) ? tier_discard(h->tier) : EMDB_OK;

	h->acc_dirty = rc != EMDB_OK;
	return rc == EMDB_ERR_IO ? rc : EMDB_OK;
}

int hot_serve_step(hot *h, const emdb_opt_scalars *sc, uint64_t nrec, uint32_t gen)
{
	bool ok = h->exact[gen] && gen == h->dev_gen;
	uint64_t matched = 0;
	int rc;

	/* Invariant 4: every recorded row scattered once, with its sum. */
	for (uint64_t i = 0; ok && i < nrec; i++) {
		uint32_t s = h->rslot[i];

		if (h->pround[s] != h->round + 1 ||
		    memcmp(h->rgrad + i * h->dim, h->psum + (size_t)s * h->dim,
			   (size_t)h->dim * sizeof(float)))
			ok = false;
		h->pround[s] = 0; /* consumed: a second record of s fails */
		matched++;
	}
	if (ok && (h->acc_dirty || matched != h->npushed || tier_pending(h->tier) != h->npushed))
		ok = false;
	if (ok && h->npushed && h->st.replicas > 1) {
		/* Invariant 6: each row's sum is in one replica, the others
		 * hold +0 there, so the sum over replicas is that sum, bit
		 * for bit, on every replica. */
		rc = tier_reduce(h->tier);
		if (rc == EMDB_ERR_IO)
			return rc;
		ok = rc == EMDB_OK; /* refused: nothing changed; replayed */
	}
	if (ok && h->npushed) {
		int64_t k = tier_step(h->tier, sc);

		if (k == EMDB_ERR_IO)
			return EMDB_ERR_IO;
		ok = k >= 0; /* refused (NOMEM): nothing changed; replayed */
		if (ok) {
			h->st.steps_device++;
			h->st.steps_reduced += h->st.replicas > 1;
			h->st.steps_applied += matched;
		}
	}
	if (ok)
		return 1;
	rc = hot_serve_discard(h);
	if (rc == EMDB_ERR_IO)
		return rc;
	if (nrec)
		h->st.steps_replayed++;
	return 0;
}

/* A sum the device cannot reproduce from a +0 accumulator (invariant 3). */
static bool unfaithful(const float *v, uint32_t dim)
{
	for (uint32_t c = 0; c < dim; c++)
		if (v[c] != v[c] || (v[c] == 0.0f && signbit(v[c])))
			return true;
	return false;
}

void hot_serve_close_tier(hot *h, tier *t)
{
	if (!h->jobs_out) {
		tier_close(t);
		return;
	}
	tier_close(h->zombie); /* a tier only fails once: none is there */
	h->zombie = t;
}

/* A job ended (invariant 7): the last one closes a dropped tier. */
static void job_ended(hot *h)
{
	if (--h->jobs_out == 0 && h->zombie) {
		tier_close(h->zombie);
		h->zombie = NULL;
	}
}

void hot_push(hot *h, uint32_t rep, uint32_t gen, const uint64_t *slocs, const uint32_t *order,
	      size_t n, hot_grad_fn fn, const void *ctx, hot_push_job *job)
{
	uint32_t dim = h->dim, m = 0;
	uint64_t *slots = NULL;
	float *g = NULL;
	int rc = EMDB_OK;

	memset(job, 0, sizeof(*job));
	pthread_mutex_lock(&h->tmu);
	if (!h->tier || !h->nmem || !h->exact[gen])
		goto out;
	if (gen != h->dev_gen) { /* the step closing the other one runs */
		h->exact[gen] = false;
		goto out;
	}
	if (h->acc_dirty && (hot_serve_discard(h) || h->acc_dirty)) {
		rc = EMDB_ERR_IO;
		goto out;
	}
	if (++h->calls == 0) {
		memset(h->pcall, 0, slots_of(h) * sizeof(uint32_t));
		h->calls = 1;
	}
	slots = emdb_malloc((n ? n : 1) * sizeof(uint64_t));
	if (!slots) {
		rc = EMDB_ERR_NOMEM;
		goto out;
	}
	/* The host's order and arithmetic (gradmap_add): invariant 4. */
	for (size_t j = 0; j < n; j++) {
		uint32_t s = hot__slot(&h->m, slocs[j]);
		float *acc, scale;
		const float *row;

		if (s == UINT32_MAX)
			continue;
		acc = h->psum + (size_t)s * dim;
		fn(ctx, order[j], &row, &scale);
		if (h->pcall[s] != h->calls) {
			if (h->pround[s] == h->round + 1) { /* an earlier push's */
				rc = EMDB_ERR_LIMIT;
				goto out;
			}
			h->pcall[s] = h->calls;
			h->pround[s] = h->round + 1;
			slots[m++] = s;
			for (uint32_t c = 0; c < dim; c++)
				acc[c] = scale * row[c];
		} else {
			for (uint32_t c = 0; c < dim; c++)
				acc[c] = fmaf(scale, row[c], acc[c]);
		}
	}
	if (!m)
		goto out;
	g = tier_host_alloc(h->tier, (size_t)m * dim * sizeof(float));
	if (!g) {
		rc = EMDB_ERR_NOMEM;
		goto out;
	}
	for (uint32_t k = 0; k < m; k++) {
		const float *acc = h->psum + slots[k] * dim;

		if (unfaithful(acc, dim)) {
			rc = EMDB_ERR_INVALID;
			goto out;
		}
		memcpy(g + (size_t)k * dim, acc, (size_t)dim * sizeof(float));
	}
	/* Into the device the gradients came from only (invariant 6): the
	 * step boundary reduces the replicas. */
	if (rep >= h->st.replicas)
		rep = 0;
	rc = tier_scatter_submit(h->tier, rep, slots, m, g, &job->job);
	if (!rc) { /* counted now: the step may come before the wait (7) */
		job->tier = h->tier;
		job->rep = rep;
		job->m = m;
		job->gen = gen;
		h->jobs_out++;
		h->npushed += m;
	}
out:
	if (rc) { /* invariant 3: this step replays the host's sums */
		h->exact[gen] = false;
		h->st.fallbacks++;
	}
	if (g)
		tier_host_free(h->tier, g);
	pthread_mutex_unlock(&h->tmu);
	emdb_free(slots);
}

void hot_push_wait(hot *h, hot_push_job *j)
{
	int rc;

	if (!j->tier)
		return;
	pthread_mutex_lock(&h->tmu);
	rc = tier_job_wait(j->tier, j->job);
	if (!rc) {
		h->dev_scattered[j->rep] += j->m;
		h->st.rows_scattered += j->m;
	} else { /* IO: the device failed; dropped at the step boundary */
		h->exact[j->gen] = false;
		h->st.fallbacks++;
	}
	job_ended(h);
	pthread_mutex_unlock(&h->tmu);
	memset(j, 0, sizeof(*j));
}

/* The slot holding locs[i] now (invariant 1), or UINT32_MAX. */
static uint32_t held_slot(const hot *h, const hot_staged *st, uint64_t epoch, const uint64_t *locs,
			  size_t i)
{
	uint32_t s = h->m.cap ? hot__slot(&h->m, locs[i]) : UINT32_MAX;

	if (s == UINT32_MAX && st && st->epoch == epoch)
		s = st->slot[i];
	return s;
}

/* Whether the replica may serve reads now (invariant 1). */
static bool serving(const hot *h)
{
	return h->tier && !__atomic_load_n(&h->overflow, __ATOMIC_RELAXED);
}

void hot_rows_free(hot *h, hot_rows *r)
{
	if (r->job) /* never waited for: wait now (tier.h's rule) */
		(void)hot_pull_wait(h, r);
	if (r->buf || r->slots) {
		pthread_mutex_lock(&h->tmu);
		tier_host_free(r->tier, r->buf);
		tier_host_free(r->tier, r->slots);
		pthread_mutex_unlock(&h->tmu);
	}
	emdb_free(r->src);
	memset(r, 0, sizeof(*r));
}

void hot_pull_submit(hot *h, const uint64_t *locs, size_t n, const hot_staged *st, hot_rows *r)
{
	uint64_t epoch = __atomic_load_n(&h->epoch, __ATOMIC_RELAXED);
	size_t m = 0;
	int rc = EMDB_OK;

	memset(r, 0, sizeof(*r));
	pthread_mutex_lock(&h->tmu);
	if (!serving(h))
		goto out;
	for (size_t i = 0; i < n; i++)
		m += held_slot(h, st, epoch, locs, i) != UINT32_MAX;
	if (!m)
		goto out;
	r->tier = h->tier;
	r->slots = tier_host_alloc(h->tier, m * sizeof(uint64_t));
	r->src = emdb_calloc(n, sizeof(*r->src));
	r->buf = tier_host_alloc(h->tier, m * h->dim * sizeof(float));
	if (!r->slots || !r->src || !r->buf) {
		rc = EMDB_ERR_NOMEM;
		goto out;
	}
	m = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t s = held_slot(h, st, epoch, locs, i);

		if (s == UINT32_MAX)
			continue;
		r->src[i] = r->buf + m * h->dim;
		r->slots[m++] = s;
	}
	rc = tier_gather_submit(h->tier, 0, r->slots, m, r->buf, &r->job);
	if (!rc) {
		r->held = m;
		h->jobs_out++;
	}
out:
	pthread_mutex_unlock(&h->tmu);
	if (rc) { /* the host serves: same floats (a failed tier is dropped
		   * at the next step) */
		hot_rows_free(h, r);
		pthread_mutex_lock(&h->tmu);
		h->st.fallbacks++;
		pthread_mutex_unlock(&h->tmu);
	}
}

bool hot_pull_wait(hot *h, hot_rows *r)
{
	int rc;

	if (!r->job)
		return r->held != 0;
	pthread_mutex_lock(&h->tmu);
	rc = tier_job_wait(r->tier, r->job);
	r->job = NULL;
	if (!rc) {
		h->st.rows_gathered += r->held;
		h->dev_gathered[0] += r->held;
	} else {
		h->st.fallbacks++;
	}
	job_ended(h);
	pthread_mutex_unlock(&h->tmu);
	return rc == EMDB_OK;
}

int hot_ptr_replica(hot *h, const void *p)
{
	int rep = -1;

	pthread_mutex_lock(&h->tmu);
	for (uint32_t r = 0; h->tier && r < h->st.replicas && rep < 0; r++)
		if (tier_ptr_in_tier(h->tier, r, p))
			rep = (int)r;
	pthread_mutex_unlock(&h->tmu);
	return rep;
}

bool hot_pull_direct(hot *h, int rep, const uint64_t *locs, size_t n, const hot_staged *st,
		     float *out)
{
	uint64_t epoch = __atomic_load_n(&h->epoch, __ATOMIC_RELAXED);
	uint64_t *slots = emdb_malloc((n ? n : 1) * sizeof(uint64_t));
	bool done = false;

	pthread_mutex_lock(&h->tmu);
	if (slots && n && serving(h)) {
		size_t i;

		for (i = 0; i < n; i++) {
			uint32_t s = held_slot(h, st, epoch, locs, i);

			if (s == UINT32_MAX)
				break;
			slots[i] = s;
		}
		if (i == n && tier_gather(h->tier, (uint32_t)rep, slots, n, out, true) == EMDB_OK) {
			done = true;
			h->st.rows_gathered += n;
			h->st.rows_direct += n;
			h->dev_gathered[rep] += n;
		}
	}
	pthread_mutex_unlock(&h->tmu);
	emdb_free(slots);
	return done;
}

static int copy(hot *h, int rep, void *dst, const void *src, size_t bytes, bool in)
{
	int rc;

	pthread_mutex_lock(&h->tmu);
	if (!h->tier)
		rc = emdb__seterr(EMDB_ERR_IO, "the device tier failed; its memory is gone");
	else if (in)
		rc = tier_copy_in(h->tier, (uint32_t)rep, dst, src, bytes);
	else
		rc = tier_copy_out(h->tier, (uint32_t)rep, dst, src, bytes);
	pthread_mutex_unlock(&h->tmu);
	return rc;
}

int hot_copy_in(hot *h, int rep, void *dst, const void *src, size_t bytes)
{
	return copy(h, rep, dst, src, bytes, true);
}

int hot_copy_out(hot *h, int rep, void *dst, const void *src, size_t bytes)
{
	return copy(h, rep, dst, src, bytes, false);
}

/* locs[0..n) -> the first position holding each, for the batch's
 * duplicates: open addressing over 2n entries.  NULL on NOMEM. */
static uint32_t *first_of(const uint64_t *locs, size_t n, uint32_t *cap_out)
{
	uint32_t cap = 16;
	uint64_t *key;
	uint32_t *first, *pos;

	while (cap < 2 * n)
		cap *= 2;
	key = emdb_malloc((size_t)cap * sizeof(uint64_t));
	pos = emdb_malloc((size_t)cap * sizeof(uint32_t));
	first = emdb_malloc((n ? n : 1) * sizeof(uint32_t));
	if (!key || !pos || !first) {
		emdb_free(key);
		emdb_free(pos);
		emdb_free(first);
		return NULL;
	}
	memset(key, 0xff, (size_t)cap * sizeof(uint64_t));
	for (size_t i = 0; i < n; i++) {
		uint64_t x = locs[i] * 0x9E3779B97F4A7C15ull;
		uint32_t j = (uint32_t)(x >> 32) & (cap - 1);

		while (key[j] != UINT64_MAX && key[j] != locs[i])
			j = (j + 1) & (cap - 1);
		if (key[j] == UINT64_MAX) {
			key[j] = locs[i];
			pos[j] = (uint32_t)i;
		}
		first[i] = pos[j];
	}
	emdb_free(key);
	emdb_free(pos);
	*cap_out = cap;
	return first;
}

hot_staged *hot_stage(hot *h, const chunk_store *rows, const uint64_t *locs, size_t n)
{
	hot_staged *st = emdb_malloc(sizeof(*st) + (n ? n : 1) * sizeof(uint32_t));
	uint64_t *slots = NULL; /* the tier's host memory, as buf: no staging */
	float *buf = NULL;
	uint32_t cap, m = 0, nlent0;
	uint32_t *first = first_of(locs, n, &cap);
	int io = 0, rc = EMDB_OK;

	pthread_mutex_lock(&h->tmu);
	nlent0 = h->nlent;
	if (!st || !first) {
		rc = EMDB_ERR_NOMEM;
		goto out;
	}
	if (!serving(h) || !n)
		goto out;
	slots = tier_host_alloc(h->tier, n * sizeof(uint64_t));
	if (!slots) {
		rc = EMDB_ERR_NOMEM;
		goto out;
	}
	st->epoch = __atomic_load_n(&h->epoch, __ATOMIC_RELAXED);
	st->n = n;
	for (size_t i = 0; i < n; i++) {
		st->slot[i] = UINT32_MAX;
		if (hot_is_member(h, locs[i]))
			continue;
		if (first[i] != i) { /* a duplicate: the first one's slot */
			st->slot[i] = st->slot[first[i]];
			continue;
		}
		if (io || (st->slot[i] = hot_take_slot(h, &io)) == UINT32_MAX)
			continue; /* the device is full: the host serves it */
		h->lent[h->nlent++] = st->slot[i];
		slots[m++] = st->slot[i];
	}
	if (!m)
		goto out;
	buf = tier_host_alloc(h->tier, (size_t)m * h->rf * sizeof(float)); /* pinned */
	if (!buf) {
		rc = EMDB_ERR_NOMEM;
		goto out;
	}
	m = 0;
	for (size_t i = 0; i < n; i++)
		if (st->slot[i] != UINT32_MAX && first[i] == i)
			memcpy(buf + (size_t)m++ * h->rf, chunk_row(rows, locs[i]),
			       (size_t)h->rf * sizeof(float));
	rc = tier_put_rows(h->tier, slots, m, buf);
	if (!rc)
		h->st.rows_staged += m;
out:
	if (rc || io) { /* invariant 2: the slots go back; nothing staged */
		while (h->nlent > nlent0)
			h->free_slots[h->nfree++] = h->lent[--h->nlent];
		h->st.fallbacks++;
		m = 0;
	}
	if (buf)
		tier_host_free(h->tier, buf);
	if (slots)
		tier_host_free(h->tier, slots);
	pthread_mutex_unlock(&h->tmu);
	emdb_free(first);
	if (!m) {
		emdb_free(st);
		return NULL;
	}
	return st;
}

void hot_staged_free(hot_staged *s)
{
	emdb_free(s);
}
