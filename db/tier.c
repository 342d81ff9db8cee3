/*
 * tier.c - the part of every storage tier that is the same for all
 * backends: argument checks, the pending-gradient map, combining
 * duplicate rows of a gradient batch, counters and the sticky error state
 * (the interface: db/tier.h; the backends' table: db/tier_int.h).
 *
 * Invariants:
 *   1. A backend is called only with valid arguments: slots inside
 *      allocated chunks, distinct accumulator indices within a call, n >= 1.
 *   2. A call that fails with INVALID, NOMEM or LIMIT has changed nothing:
 *      the checks and every reservation come before the backend is asked.
 *   3. After a backend returns IO the tier is failed for good (st.failed);
 *      every data call then returns IO without calling the backend.
 *   4. pend_slots[0..npend) are the rows holding gradients, each once, in
 *      the order their first gradient arrived; map_keys/map_vals map each
 *      such slot to its index.  A slot whose chunk was freed stays in
 *      pend_slots as TIER_SLOT_NONE (still mapped under its old value, so
 *      the map needs no deletion) until the next step empties both.
 *   5. Within one tier_scatter_add the gradients of one slot are summed in
 *      batch order, first one first, and that sum is added to the
 *      accumulator: the same floats on every backend.
 *   6. A submitted job (tier_gather_submit, tier_scatter_submit) passed
 *      every check of its synchronous twin and changed the pending map
 *      at submit; its bytes are counted when its wait succeeds.  The
 *      buffers the backend may still read (a scatter's combined sums and
 *      indices) are the job's, in tier_host_alloc memory, until the wait.
 *   7. tier_host_alloc's buffers carry their block's size in a header
 *      before the pointer returned; at most TIER_HOST_CACHE free ones
 *      are kept (the largest), the others given back to the backend, and
 *      st.host_pinned is the bytes the backend holds for them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "db/tier_int.h"
#include "index/hash.h"

static const tier_backend *backend_of(tier_kind kind)
{
	switch (kind) {
	case TIER_HOST:
		return &tier_host_backend;
	case TIER_TEST:
		return &tier_test_backend;
	case TIER_CUDA:
#ifdef EMDB_HAVE_CUDA
		return &tier_cuda_backend;
#else
		return NULL;
#endif
	}
	return NULL;
}

bool tier_compiled(tier_kind kind)
{
	return backend_of(kind) != NULL;
}

const char *tier_kind_name(tier_kind kind)
{
	switch (kind) {
	case TIER_HOST:
		return "host";
	case TIER_TEST:
		return "test";
	case TIER_CUDA:
		return "cuda";
	}
	return "unknown";
}

bool tier_available(tier_kind kind, char *why, size_t why_len)
{
	const tier_backend *be = backend_of(kind);

	if (why_len)
		why[0] = '\0';
	if (!be) {
		if (why_len)
			snprintf(why, why_len, "the %s tier is not compiled into this build "
				 "(no CUDA toolkit found, or EMDB_CUDA=OFF)", tier_kind_name(kind));
		return false;
	}
	return !be->available || be->available(why, why_len);
}

uint32_t tier_devices(tier_kind kind)
{
	const tier_backend *be = backend_of(kind);

	if (!tier_available(kind, NULL, 0))
		return 0;
	return be->devices ? be->devices() : 1;
}

uint32_t tier_row_floats(const tier_config *cfg)
{
	return cfg->dim + emdb_optimizer_state_floats(cfg->opt, cfg->dim);
}

tier_kind tier_kind_of(const tier *t)
{
	return t->kind;
}

const tier_config *tier_config_of(const tier *t)
{
	return &t->cfg;
}

uint32_t tier_pending(const tier *t)
{
	return t->npend;
}

void tier_stats_get(const tier *t, tier_stats *out)
{
	*out = t->st;
}

static void tier_free_mem(tier *t)
{
	emdb_free(t->chunk_used);
	emdb_free(t->map_keys);
	emdb_free(t->map_vals);
	emdb_free(t->pend_slots);
	emdb_free(t->batch_stamp);
	emdb_free(t->batch_pos);
	emdb_free(t);
}

int tier_open(tier_kind kind, const tier_config *cfg, tier **out)
{
	const tier_backend *be = backend_of(kind);
	tier *t;
	int rc;

	*out = NULL;
	if (!be)
		return emdb__seterr(EMDB_ERR_UNSUPPORTED, "the %s tier is not compiled into this build",
				    tier_kind_name(kind));
	if (!cfg || !cfg->dim || !cfg->rows_per_chunk || !cfg->max_chunks || !cfg->max_pending ||
	    !cfg->replicas || !emdb_optimizer_name(cfg->opt) || cfg->max_pending > (1u << 30))
		return emdb__seterr(EMDB_ERR_INVALID, "tier: dim, rows_per_chunk, max_chunks, "
				    "max_pending (<= 2^30), replicas must be >= 1 and the optimizer known");
	t = emdb_calloc(1, sizeof(*t));
	if (!t)
		return EMDB_ERR_NOMEM;
	t->kind = kind;
	t->cfg = *cfg;
	t->be = be;
	t->row_floats = tier_row_floats(cfg);
	t->rpc_shift = 32;
	for (uint32_t b = 0; b < 32; b++)
		if (cfg->rows_per_chunk == 1u << b)
			t->rpc_shift = b;
	t->map_cap = 16;
	while (t->map_cap < 2 * cfg->max_pending)
		t->map_cap *= 2;
	t->chunk_used = emdb_calloc(cfg->max_chunks, 1);
	t->map_keys = emdb_malloc((size_t)t->map_cap * sizeof(uint64_t));
	t->map_vals = emdb_malloc((size_t)t->map_cap * sizeof(uint32_t));
	t->pend_slots = emdb_malloc((size_t)cfg->max_pending * sizeof(uint64_t));
	t->batch_stamp = emdb_calloc(cfg->max_pending, sizeof(uint32_t));
	t->batch_pos = emdb_malloc((size_t)cfg->max_pending * sizeof(uint32_t));
	if (!t->chunk_used || !t->map_keys || !t->map_vals || !t->pend_slots || !t->batch_stamp ||
	    !t->batch_pos) {
		tier_free_mem(t);
		return EMDB_ERR_NOMEM;
	}
	memset(t->map_keys, 0xff, (size_t)t->map_cap * sizeof(uint64_t));
	rc = be->open(t);
	if (rc) {
		tier_free_mem(t);
		return rc;
	}
	*out = t;
	return EMDB_OK;
}

static void host_release(tier *t, void *block, size_t size);
static size_t host_block(const void *p);
#define HOST_HDR 64u

void tier_close(tier *t)
{
	if (!t)
		return;
	for (uint32_t c = 0; c < t->cfg.max_chunks; c++)
		if (t->chunk_used[c])
			t->be->chunk_free(t, c);
	for (int k = 0; k < TIER_HOST_CACHE; k++)
		if (t->host_cache[k])
			host_release(t, (char *)t->host_cache[k] - HOST_HDR,
				     host_block(t->host_cache[k]));
	t->be->close(t);
	tier_free_mem(t);
}

/* Invariant 3: the first IO fails the tier for good. */
static int tier_result(tier *t, int rc)
{
	if (rc == EMDB_ERR_IO)
		t->st.failed = true;
	else if (rc == EMDB_OK)
		t->st.ops++;
	return rc;
}

static int tier_check_live(const tier *t)
{
	if (t->st.failed)
		return emdb__seterr(EMDB_ERR_IO, "%s tier: failed earlier; its rows are lost",
				    t->be->name);
	return EMDB_OK;
}

static int tier_check_slots(const tier *t, const uint64_t *slots, size_t n)
{
	if (!slots || !n)
		return emdb__seterr(EMDB_ERR_INVALID, "%s tier: empty batch", t->be->name);
	for (size_t i = 0; i < n; i++) {
		uint64_t c = tier_slot_chunk64(t, slots[i]);

		if (c >= t->cfg.max_chunks || !t->chunk_used[c])
			return emdb__seterr(EMDB_ERR_INVALID, "%s tier: slot %llu (batch entry %zu) "
					    "is not in an allocated chunk", t->be->name,
					    (unsigned long long)slots[i], i);
	}
	return EMDB_OK;
}

static int tier_check_replica(const tier *t, uint32_t r)
{
	if (r >= t->cfg.replicas)
		return emdb__seterr(EMDB_ERR_INVALID, "%s tier: replica %u of %u", t->be->name, r,
				    t->cfg.replicas);
	return EMDB_OK;
}

#define NO_REPLICA UINT32_MAX

/* The checks every data call starts with: live, replica (NO_REPLICA:
 * none named), slots inside allocated chunks. */
static int tier_enter(const tier *t, uint32_t replica, const uint64_t *slots, size_t n)
{
	int rc = tier_check_live(t);

	if (!rc && replica != NO_REPLICA)
		rc = tier_check_replica(t, replica);
	if (!rc)
		rc = tier_check_slots(t, slots, n);
	return rc;
}

static uint64_t row_bytes(const tier *t)
{
	return (uint64_t)t->row_floats * sizeof(float);
}

static uint64_t chunk_bytes(const tier *t)
{
	return row_bytes(t) * t->cfg.rows_per_chunk * t->cfg.replicas;
}

int tier_chunk_alloc(tier *t, uint32_t c)
{
	int rc = tier_check_live(t);

	if (rc)
		return rc;
	if (c >= t->cfg.max_chunks || t->chunk_used[c])
		return emdb__seterr(EMDB_ERR_INVALID, "%s tier: chunk %u is %s", t->be->name, c,
				    c >= t->cfg.max_chunks ? "out of range" : "allocated already");
	rc = tier_result(t, t->be->chunk_alloc(t, c));
	if (rc)
		return rc;
	t->chunk_used[c] = 1;
	t->st.chunks++;
	t->st.bytes_in_use += chunk_bytes(t);
	return EMDB_OK;
}

void tier_chunk_free(tier *t, uint32_t c)
{
	if (c >= t->cfg.max_chunks || !t->chunk_used[c])
		return;
	for (uint32_t p = 0; p < t->npend; p++)
		if (t->pend_slots[p] != TIER_SLOT_NONE && tier_slot_chunk(t, t->pend_slots[p]) == c)
			t->pend_slots[p] = TIER_SLOT_NONE;
	t->be->chunk_free(t, c);
	t->chunk_used[c] = 0;
	t->st.chunks--;
	t->st.bytes_in_use -= chunk_bytes(t);
}

int tier_put_rows(tier *t, const uint64_t *slots, size_t n, const float *rows)
{
	int rc = tier_enter(t, NO_REPLICA, slots, n);

	if (rc)
		return rc;
	rc = tier_result(t, t->be->put_rows(t, slots, n, rows));
	if (!rc)
		t->st.bytes_h2d += n * row_bytes(t) * t->cfg.replicas;
	return rc;
}

int tier_get_rows(tier *t, uint32_t replica, const uint64_t *slots, size_t n, float *rows)
{
	int rc = tier_enter(t, replica, slots, n);

	if (rc)
		return rc;
	rc = tier_result(t, t->be->get_rows(t, replica, slots, n, rows));
	if (!rc)
		t->st.bytes_d2h += n * row_bytes(t);
	return rc;
}

int tier_init_rows(tier *t, const uint64_t *slots, const uint64_t *ids, size_t n,
		   const emdb_init *init, const emdb_optimizer *opt, uint64_t seed, uint32_t table)
{
	tier_init_args a;
	char why[160];
	int rc = tier_enter(t, NO_REPLICA, slots, n);

	if (rc)
		return rc;
	if (!ids || emdb__init_check(init, why, sizeof(why)) ||
	    emdb__optimizer_check(opt, why, sizeof(why)) || opt->kind != t->cfg.opt)
		return emdb__seterr(EMDB_ERR_INVALID, "%s tier: init: %s", t->be->name,
				    !ids ? "no ids" : opt && opt->kind != t->cfg.opt ?
				    "optimizer kind differs from the tier's" : why);
	a.init = *init;
	a.opt = *opt;
	a.seed = seed;
	a.table = table;
	rc = tier_result(t, t->be->init_rows(t, slots, ids, n, &a));
	if (!rc)
		t->st.bytes_h2d += n * 2 * sizeof(uint64_t) * t->cfg.replicas;
	return rc;
}

int tier_gather(tier *t, uint32_t replica, const uint64_t *slots, size_t n, float *out,
		bool out_in_tier)
{
	int rc = tier_enter(t, replica, slots, n);

	if (rc)
		return rc;
	if (!out)
		return emdb__seterr(EMDB_ERR_INVALID, "%s tier: gather into NULL", t->be->name);
	rc = tier_result(t, t->be->gather(t, replica, slots, n, out, out_in_tier));
	if (!rc) {
		uint64_t b = n * (uint64_t)t->cfg.dim * sizeof(float);

		if (out_in_tier)
			t->st.bytes_d2d += b;
		else
			t->st.bytes_d2h += b;
	}
	return rc;
}

int tier_gather_dev(tier *t, uint32_t replica, const uint64_t *slots, size_t n, float *out)
{
	int rc = tier_check_live(t);

	if (!rc)
		rc = tier_check_replica(t, replica);
	if (rc)
		return rc;
	if (!slots || !n || !out)
		return emdb__seterr(EMDB_ERR_INVALID, "%s tier: gather_dev: empty batch or NULL",
				    t->be->name);
	if (!t->be->gather_dev) {
		rc = tier_check_slots(t, slots, n);
		if (rc) { /* what a device does with a bad slot */
			for (size_t i = 0; i < n; i++) {
				uint64_t c = tier_slot_chunk64(t, slots[i]);

				if (c >= t->cfg.max_chunks || !t->chunk_used[c])
					for (uint32_t k = 0; k < t->cfg.dim; k++)
						out[i * t->cfg.dim + k] = NAN;
			}
			return rc;
		}
		rc = tier_result(t, t->be->gather(t, replica, slots, n, out, true));
	} else {
		rc = tier_result(t, t->be->gather_dev(t, replica, slots, n, out));
	}
	if (!rc)
		t->st.bytes_d2d += n * (uint64_t)t->cfg.dim * sizeof(float);
	return rc;
}

/* The pending index of slot s, or UINT32_MAX; *home is where s would go. */
static uint32_t pend_find(const tier *t, uint64_t s, uint32_t *home)
{
	uint32_t mask = t->map_cap - 1;

	for (uint32_t i = (uint32_t)dit_hash(s) & mask;; i = (i + 1) & mask) {
		if (t->map_keys[i] == s)
			return t->map_vals[i];
		if (t->map_keys[i] == TIER_SLOT_NONE) {
			*home = i;
			return UINT32_MAX;
		}
	}
}

/* Undo a scatter's inserts into the pending map, last first, so that no
 * later key ever probed past an emptied one (invariant 2). */
static void undo_pending(tier *t, uint32_t npend0, const uint32_t *added)
{
	for (uint32_t k = t->npend; k > npend0; k--)
		t->map_keys[added[k - 1 - npend0]] = TIER_SLOT_NONE;
	t->npend = npend0;
}

struct tier_job {
	void *be;                 /* the backend's handle; NULL: done       */
	bool gather;
	uint64_t bytes;           /* counted when it ends                   */
	uint32_t *pidx;           /* scatter: the backend reads them until   */
	float *sum;               /* the wait (tier_host_alloc memory)       */
};

static void job_free(tier *t, tier_job *j)
{
	tier_host_free(t, j->pidx);
	tier_host_free(t, j->sum);
	emdb_free(j);
}

/* tier_scatter_add and tier_scatter_submit (job NULL: synchronous). */
static int scatter(tier *t, uint32_t replica, const uint64_t *slots, size_t n, const float *grads,
		   tier_job **job)
{
	uint32_t dim = t->cfg.dim, npend0 = t->npend, nu = 0;
	uint32_t *pidx = NULL, *added = NULL;
	float *sum = NULL;
	tier_job *j = NULL;
	void *bj = NULL;
	int rc = tier_enter(t, replica, slots, n);

	if (rc)
		return rc;
	if (!grads)
		return emdb__seterr(EMDB_ERR_INVALID, "%s tier: no gradients", t->be->name);
	pidx = tier_host_alloc(t, n * sizeof(uint32_t));
	added = emdb_malloc(n * sizeof(uint32_t));
	sum = tier_host_alloc(t, n * (size_t)dim * sizeof(float));
	if (job && !(j = emdb_calloc(1, sizeof(*j))))
		rc = EMDB_ERR_NOMEM;
	if (!pidx || !added || !sum || rc) {
		rc = EMDB_ERR_NOMEM;
		goto out;
	}
	if (++t->stamp == 0) { /* wrapped: forget every old stamp */
		memset(t->batch_stamp, 0, (size_t)t->cfg.max_pending * sizeof(uint32_t));
		t->stamp = 1;
	}
	for (size_t i = 0; i < n; i++) {
		const float *g = grads + i * dim;
		uint32_t home = 0, p = pend_find(t, slots[i], &home);

		if (p == UINT32_MAX) {
			if (t->npend == t->cfg.max_pending) {
				rc = emdb__seterr(EMDB_ERR_LIMIT, "%s tier: more than %u rows hold "
						  "gradients before a step", t->be->name,
						  t->cfg.max_pending);
				undo_pending(t, npend0, added);
				goto out;
			}
			p = t->npend++;
			t->map_keys[home] = slots[i];
			t->map_vals[home] = p;
			t->pend_slots[p] = slots[i];
			added[p - npend0] = home;
		}
		if (t->batch_stamp[p] != t->stamp) {
			t->batch_stamp[p] = t->stamp;
			t->batch_pos[p] = nu;
			pidx[nu] = p;
			memcpy(sum + (size_t)nu * dim, g, (size_t)dim * sizeof(float));
			nu++;
		} else {
			float *s = sum + (size_t)t->batch_pos[p] * dim;

			for (uint32_t c = 0; c < dim; c++)
				s[c] += g[c];
		}
	}
	if (j && t->be->accumulate_submit)
		rc = t->be->accumulate_submit(t, replica, pidx, nu, sum, &bj);
	else
		rc = t->be->accumulate(t, replica, pidx, nu, sum);
	rc = tier_result(t, rc);
	if (rc) { /* invariant 2: nothing added, no row newly pending */
		undo_pending(t, npend0, added);
		goto out;
	}
	if (j) {
		*j = (tier_job){ .be = bj, .gather = false, .pidx = pidx, .sum = sum };
		emdb_free(added);
		j->bytes = (uint64_t)nu * (dim * sizeof(float) + sizeof(uint32_t));
		t->st.jobs++;
		t->st.jobs_async += bj != NULL;
		*job = j;
		return EMDB_OK;
	}
	t->st.bytes_h2d += (uint64_t)nu * (dim * sizeof(float) + sizeof(uint32_t));
out:
	emdb_free(j);
	tier_host_free(t, pidx);
	emdb_free(added);
	tier_host_free(t, sum);
	return rc;
}

int tier_scatter_add(tier *t, uint32_t replica, const uint64_t *slots, size_t n,
		     const float *grads)
{
	return scatter(t, replica, slots, n, grads, NULL);
}

int tier_scatter_submit(tier *t, uint32_t replica, const uint64_t *slots, size_t n,
			const float *grads, tier_job **job)
{
	if (!job)
		return emdb__seterr(EMDB_ERR_INVALID, "%s tier: submit without a job", t->be->name);
	*job = NULL;
	return scatter(t, replica, slots, n, grads, job);
}

int tier_gather_submit(tier *t, uint32_t replica, const uint64_t *slots, size_t n, float *out,
		       tier_job **job)
{
	tier_job *j;
	void *bj = NULL;
	int rc;

	if (!job)
		return emdb__seterr(EMDB_ERR_INVALID, "%s tier: submit without a job", t->be->name);
	*job = NULL;
	rc = tier_enter(t, replica, slots, n);
	if (rc)
		return rc;
	if (!out)
		return emdb__seterr(EMDB_ERR_INVALID, "%s tier: gather into NULL", t->be->name);
	if (!(j = emdb_calloc(1, sizeof(*j))))
		return EMDB_ERR_NOMEM;
	if (t->be->gather_submit)
		rc = t->be->gather_submit(t, replica, slots, n, out, &bj);
	else
		rc = t->be->gather(t, replica, slots, n, out, false);
	rc = tier_result(t, rc);
	if (rc) {
		emdb_free(j);
		return rc;
	}
	j->be = bj;
	j->gather = true;
	j->bytes = n * (uint64_t)t->cfg.dim * sizeof(float);
	t->st.jobs++;
	t->st.jobs_async += bj != NULL;
	*job = j;
	return EMDB_OK;
}

int tier_job_wait(tier *t, tier_job *j)
{
	int rc = EMDB_OK;

	if (!j)
		return emdb__seterr(EMDB_ERR_INVALID, "%s tier: wait for no job", t->be->name);
	if (j->be)
		rc = t->be->wait_job(t, j->be);
	if (rc) /* the backend only fails IO here */
		rc = tier_result(t, EMDB_ERR_IO);
	else if (t->st.failed) /* failed since the submit: its work is lost */
		rc = tier_check_live(t);
	if (!rc && j->gather)
		t->st.bytes_d2h += j->bytes;
	else if (!rc)
		t->st.bytes_h2d += j->bytes;
	job_free(t, j);
	return rc;
}

/* tier_host_alloc's buffers: a header of HOST_HDR bytes holding the
 * size of the whole block, a power of two the backend allocated. */
static size_t host_block(const void *p)
{
	return *(const size_t *)((const char *)p - HOST_HDR);
}

static void host_release(tier *t, void *block, size_t size)
{
	if (t->be->host_free)
		t->be->host_free(t, block);
	else
		emdb_free(block);
	t->st.host_pinned -= size;
}

void *tier_host_alloc(tier *t, size_t bytes)
{
	size_t need = 4096;
	int best = -1;
	char *b;

	if (bytes > SIZE_MAX / 4)
		return NULL;
	while (need < bytes + HOST_HDR)
		need *= 2;
	for (int k = 0; k < TIER_HOST_CACHE; k++) {
		size_t sz = t->host_cache[k] ? host_block(t->host_cache[k]) : 0;

		if (sz >= need && sz <= 4 * need &&
		    (best < 0 || sz < host_block(t->host_cache[best])))
			best = k;
	}
	if (best >= 0) {
		b = t->host_cache[best];
		t->host_cache[best] = NULL;
		t->st.host_bufs++;
		return b;
	}
	b = t->be->host_alloc ? t->be->host_alloc(t, need) : emdb_malloc(need);
	if (!b)
		return NULL;
	*(size_t *)b = need;
	t->st.host_pinned += need;
	t->st.host_bufs++;
	return b + HOST_HDR;
}

void tier_host_free(tier *t, void *p)
{
	int slot = -1;

	if (!p)
		return;
	for (int k = 0; k < TIER_HOST_CACHE && slot < 0; k++)
		if (!t->host_cache[k])
			slot = k;
	if (slot < 0) { /* full: keep the larger buffers */
		slot = 0;
		for (int k = 1; k < TIER_HOST_CACHE; k++)
			if (host_block(t->host_cache[k]) < host_block(t->host_cache[slot]))
				slot = k;
		if (host_block(t->host_cache[slot]) >= host_block(p)) {
			host_release(t, (char *)p - HOST_HDR, host_block(p));
			return;
		}
		host_release(t, (char *)t->host_cache[slot] - HOST_HDR,
			     host_block(t->host_cache[slot]));
	}
	t->host_cache[slot] = p;
}

int tier_reduce(tier *t)
{
	int rc = tier_check_live(t);

	if (rc || t->cfg.replicas == 1 || !t->npend)
		return rc;
	rc = tier_result(t, t->be->reduce(t, t->npend));
	if (!rc)
		t->st.bytes_d2d += (uint64_t)t->npend * t->cfg.dim * sizeof(float) *
				   t->cfg.replicas;
	return rc;
}

int64_t tier_step(tier *t, const emdb_opt_scalars *sc)
{
	uint32_t n = t->npend;
	int64_t stepped = n;
	int rc = tier_check_live(t);

	if (rc)
		return rc;
	if (!sc)
		return emdb__seterr(EMDB_ERR_INVALID, "%s tier: step without scalars", t->be->name);
	if (!n)
		return 0;
	rc = tier_result(t, t->be->step(t, sc, t->pend_slots, n, NULL));
	if (rc)
		return rc;
	memset(t->map_keys, 0xff, (size_t)t->map_cap * sizeof(uint64_t));
	t->npend = 0;
	for (uint32_t p = 0; p < n; p++) /* rows of freed chunks were skipped */
		if (t->pend_slots[p] == TIER_SLOT_NONE)
			stepped--;
	return stepped;
}

int tier_discard(tier *t)
{
	uint32_t n = t->npend;
	emdb_opt_scalars sc;
	int rc = tier_check_live(t);

	if (rc || !n)
		return rc;
	/* A step over no row (every slot TIER_SLOT_NONE, which backends
	 * skip) still empties the accumulators [0, n). */
	for (uint32_t p = 0; p < n; p++)
		t->pend_slots[p] = TIER_SLOT_NONE;
	memset(&sc, 0, sizeof(sc));
	rc = tier_result(t, t->be->step(t, &sc, t->pend_slots, n, NULL));
	if (rc)
		return rc;
	memset(t->map_keys, 0xff, (size_t)t->map_cap * sizeof(uint64_t));
	t->npend = 0;
	return EMDB_OK;
}

bool tier_ptr_in_tier(const tier *t, uint32_t replica, const void *p)
{
	return p && replica < t->cfg.replicas && !t->st.failed && t->be->owns_ptr &&
	       t->be->owns_ptr(t, replica, p);
}

static int tier_copy(tier *t, uint32_t replica, void *dst, const void *src, size_t bytes,
		     bool to_tier)
{
	int rc = tier_check_live(t);

	if (!rc)
		rc = tier_check_replica(t, replica);
	if (rc)
		return rc;
	if (!dst || !src || !tier_ptr_in_tier(t, replica, to_tier ? dst : src))
		return emdb__seterr(EMDB_ERR_INVALID, "%s tier: copy %s: not memory of replica %u",
				    t->be->name, to_tier ? "in" : "out", replica);
	if (!bytes)
		return EMDB_OK;
	rc = tier_result(t, t->be->copy(t, replica, dst, src, bytes, to_tier));
	if (!rc && to_tier)
		t->st.bytes_h2d += bytes;
	else if (!rc)
		t->st.bytes_d2h += bytes;
	return rc;
}

int tier_copy_in(tier *t, uint32_t replica, void *dst, const void *src, size_t bytes)
{
	return tier_copy(t, replica, dst, src, bytes, true);
}

int tier_copy_out(tier *t, uint32_t replica, void *dst, const void *src, size_t bytes)
{
	return tier_copy(t, replica, dst, src, bytes, false);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* tier_apply's slots must be distinct: two writers of one row would race
 * on a device. */
static int tier_check_distinct(const tier *t, const uint64_t *slots, size_t n)
{
	uint64_t *s = emdb_malloc(n * sizeof(uint64_t));
	int rc = EMDB_OK;

	if (!s)
		return EMDB_ERR_NOMEM;
	memcpy(s, slots, n * sizeof(uint64_t));
	qsort(s, n, sizeof(uint64_t), cmp_u64);
	for (size_t i = 1; i < n && !rc; i++)
		if (s[i] == s[i - 1])
			rc = emdb__seterr(EMDB_ERR_INVALID, "%s tier: apply: slot %llu twice",
					  t->be->name, (unsigned long long)s[i]);
	emdb_free(s);
	return rc;
}

int tier_apply(tier *t, const emdb_opt_scalars *sc, const uint64_t *slots, size_t n,
	       const float *grads)
{
	int rc = tier_enter(t, NO_REPLICA, slots, n);

	if (!rc)
		rc = tier_check_distinct(t, slots, n);
	if (rc)
		return rc;
	if (!sc || !grads)
		return emdb__seterr(EMDB_ERR_INVALID, "%s tier: apply without %s", t->be->name,
				    !sc ? "scalars" : "gradients");
	rc = tier_result(t, t->be->step(t, sc, slots, n, grads));
	if (!rc)
		t->st.bytes_h2d += n * ((uint64_t)t->cfg.dim * sizeof(float) + sizeof(uint64_t)) *
				   t->cfg.replicas;
	return rc;
}
