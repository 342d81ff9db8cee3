/*
 * hot.c - a table's hot rows and their device replica (db/hot.h).
 *
 * Invariants:
 *   1. The host copy of every row is the authority and always current;
 *      the replica holds a subset of rows (the members).
 *   2. After hot_step returns, every member's replica row equals its host
 *      row bit for bit: it was copied from the host when it entered (or
 *      resynced), and every host step since was recorded and run on the
 *      device with the same gradient and scalars (db/tier.h: backends are
 *      bit-identical), in record order.
 *   3. The membership map changes only inside hot_step (rows_lock held
 *      for writing, no pass running), so hot_record reads it without a
 *      lock.  Records past the buffer set `overflow` (as does
 *      hot_rows_written, for rows changed outside an Update), and hot_step then
 *      copies every member again from the host instead of replaying.
 *   4. Any failure of the device leaves the host untouched: NOMEM shrinks
 *      the set (the rows not copied are not members), any other error
 *      closes the tier and empties the set for good (st.failed).
 *   5. Memory is bounded by the budget: counters <= HOT_COUNTERS_PER_ROW
 *      per row of budget (and <= HOT_COUNTERS_MAX), members <= counters;
 *      device memory: members, staged rows and their accumulators, all
 *      within the budget (a row of it counts its accumulator).
 *   6. hot_step holds tmu throughout, so the serving paths
 *      (db/hot_serve.c) never see the membership, the free slots or the
 *      tier change under them.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "base/loc.h"
#include "db/hot_int.h"


static uint32_t pow2_at_least(uint64_t n)
{
	uint32_t c = 16;

	while (c < n && c < (1u << 31))
		c *= 2;
	return c;
}

static void members_free(struct hot_members *m)
{
	emdb_free(m->loc);
	emdb_free(m->slot);
	m->loc = NULL;
	m->slot = NULL;
	m->cap = 0;
}

/* The map of mloc/mslot[0..nmem); NOMEM keeps the old one. */
static int members_build(hot *h)
{
	struct hot_members n;

	n.cap = h->nmem ? pow2_at_least(2ull * h->nmem) : 0;
	n.loc = n.cap ? emdb_malloc((size_t)n.cap * sizeof(uint64_t)) : NULL;
	n.slot = n.cap ? emdb_malloc((size_t)n.cap * sizeof(uint32_t)) : NULL;
	if (n.cap && (!n.loc || !n.slot)) {
		emdb_free(n.loc);
		emdb_free(n.slot);
		return EMDB_ERR_NOMEM;
	}
	if (n.cap)
		memset(n.loc, 0xff, (size_t)n.cap * sizeof(uint64_t));
	for (uint32_t k = 0; k < h->nmem; k++) {
		uint64_t x = h->mloc[k] * 0x9E3779B97F4A7C15ull;
		uint32_t i = (uint32_t)(x >> 32) & (n.cap - 1);

		while (n.loc[i] != UINT64_MAX)
			i = (i + 1) & (n.cap - 1);
		n.loc[i] = h->mloc[k];
		n.slot[i] = h->mslot[k];
	}
	members_free(&h->m);
	h->m = n;
	return EMDB_OK;
}

static size_t choose_top(const uint64_t *loc, const uint32_t *count, size_t n, size_t cap,
			 size_t *pick);

int hot_create(const hot_config *cfg, uint32_t dim, const emdb_optimizer *opt, hot **out)
{
	tier_config tc;
	uint64_t row_bytes;
	hot *h;
	int rc;

	*out = NULL;
	memset(&tc, 0, sizeof(tc));
	tc.dim = dim;
	tc.opt = opt->kind;
	/* A row and its gradient accumulator (Push scatters into it). */
	row_bytes = ((uint64_t)tier_row_floats(&tc) + dim) * sizeof(float);
	if (!cfg->budget_bytes || cfg->budget_bytes < row_bytes)
		return emdb__seterr(EMDB_ERR_INVALID, "gpu_memory %llu bytes holds no row of %llu "
				    "bytes", (unsigned long long)cfg->budget_bytes,
				    (unsigned long long)row_bytes);
	h = emdb_calloc(1, sizeof(*h));
	if (!h)
		return EMDB_ERR_NOMEM;
	h->cfg = *cfg;
	h->opt = *opt;
	h->dim = dim;
	h->rf = tier_row_floats(&tc);
	h->choose = choose_top;
	h->cap_rows = cfg->budget_bytes / row_bytes;
	h->ccap = pow2_at_least(h->cap_rows * HOT_COUNTERS_PER_ROW);
	if (h->ccap > HOT_COUNTERS_MAX)
		h->ccap = HOT_COUNTERS_MAX;
	if (h->cap_rows > h->ccap / 2)
		h->cap_rows = h->ccap / 2;
	/* Chunks of a power of two rows (the kernels then shift instead of
	 * dividing), as many as fit the budget: never over it. */
	h->rpc = HOT_ROWS_PER_CHUNK;
	while (h->rpc > h->cap_rows)
		h->rpc /= 2;
	h->max_chunks = (uint32_t)(h->cap_rows / h->rpc);
	h->cap_rows = (uint64_t)h->max_chunks * h->rpc;
	h->st.kind = cfg->kind;
	h->st.replicas = cfg->replicas ? cfg->replicas : 1;
	h->st.capacity = h->cap_rows;
	pthread_mutex_init(&h->mu, NULL);
	pthread_mutex_init(&h->tmu, NULL);
	h->cloc = emdb_malloc((size_t)h->ccap * sizeof(uint64_t));
	h->ccount = emdb_malloc((size_t)h->ccap * sizeof(uint32_t));
	h->free_slots = emdb_malloc((size_t)h->max_chunks * h->rpc * sizeof(uint32_t));
	h->mloc = emdb_malloc(h->cap_rows * sizeof(uint64_t));
	h->mslot = emdb_malloc(h->cap_rows * sizeof(uint32_t));
	h->dev_gathered = emdb_calloc(h->st.replicas, sizeof(uint64_t));
	h->dev_scattered = emdb_calloc(h->st.replicas, sizeof(uint64_t));
	if (!h->cloc || !h->ccount || !h->free_slots || !h->mloc || !h->mslot ||
	    !h->dev_gathered || !h->dev_scattered ||
	    hot_serve_init(h) != EMDB_OK) {
		hot_destroy(h);
		return EMDB_ERR_NOMEM;
	}
	memset(h->cloc, 0xff, (size_t)h->ccap * sizeof(uint64_t));
	tc.rows_per_chunk = h->rpc;
	tc.max_chunks = h->max_chunks;
	tc.max_pending = (uint32_t)h->cap_rows; /* every member, pushed */
	tc.replicas = cfg->replicas ? cfg->replicas : 1;
	tc.test_chunks = cfg->test_chunks;
	rc = tier_open(cfg->kind, &tc, &h->tier);
	if (rc) {
		hot_destroy(h);
		return rc;
	}
	*out = h;
	return EMDB_OK;
}

static tier_kind table_tier = TIER_CUDA; /* atomic */
static uint32_t table_test_chunks;      /* atomic */
static uint32_t table_test_replicas;    /* atomic */

void hot_use_tier(tier_kind kind, uint32_t test_chunks, uint32_t test_replicas)
{
	__atomic_store_n(&table_test_chunks, test_chunks, __ATOMIC_RELAXED);
	__atomic_store_n(&table_test_replicas, test_replicas, __ATOMIC_RELAXED);
	__atomic_store_n(&table_tier, kind, __ATOMIC_RELAXED);
}

hot *hot_open_for_table(uint64_t budget, uint32_t dim, const emdb_optimizer *opt)
{
	hot_config c;
	hot *h = NULL;

	c.kind = __atomic_load_n(&table_tier, __ATOMIC_RELAXED);
	c.budget_bytes = budget;
	c.test_chunks = __atomic_load_n(&table_test_chunks, __ATOMIC_RELAXED);
	/* A replica on every device of the node: they all take the same
	 * steps, so a GPU trainer on any of them reads its local copy. */
	c.replicas = c.kind == TIER_TEST ? __atomic_load_n(&table_test_replicas, __ATOMIC_RELAXED)
					 : tier_devices(c.kind);
	if (!c.replicas)
		c.replicas = 1;
	if (!tier_available(c.kind, NULL, 0))
		return NULL;
	(void)hot_create(&c, dim, opt, &h);
	return h;
}

void hot_destroy(hot *h)
{
	if (!h)
		return;
	tier_close(h->tier);
	tier_close(h->zombie);
	members_free(&h->m);
	emdb_free(h->cloc);
	emdb_free(h->ccount);
	emdb_free(h->free_slots);
	emdb_free(h->mloc);
	emdb_free(h->mslot);
	emdb_free(h->rslot);
	emdb_free(h->rgrad);
	emdb_free(h->dev_gathered);
	emdb_free(h->dev_scattered);
	hot_serve_free(h);
	pthread_mutex_destroy(&h->mu);
	pthread_mutex_destroy(&h->tmu);
	emdb_free(h);
}

void hot_set_choose(hot *h, hot_choose_fn fn)
{
	h->choose = fn ? fn : choose_top;
}

void hot_note(hot *h, const uint64_t *locs, size_t n)
{
	uint32_t mask = h->ccap - 1;

	pthread_mutex_lock(&h->mu);
	for (size_t k = 0; k < n; k++) {
		uint64_t x = locs[k] * 0x9E3779B97F4A7C15ull;

		for (uint32_t i = (uint32_t)(x >> 32) & mask;; i = (i + 1) & mask) {
			if (h->cloc[i] == locs[k]) {
				if (h->ccount[i] < UINT32_MAX)
					h->ccount[i]++;
				break;
			}
			if (h->cloc[i] == UINT64_MAX) {
				/* Three quarters full: newcomers wait for the
				 * revision's aging to make room (bounded memory). */
				if (h->cn < h->ccap / 4 * 3) {
					h->cloc[i] = locs[k];
					h->ccount[i] = 1;
					h->cn++;
				}
				break;
			}
		}
	}
	pthread_mutex_unlock(&h->mu);
}

void hot_record(hot *h, uint64_t loc, const float *g)
{
	uint32_t slot = h->m.cap ? hot__slot(&h->m, loc) : UINT32_MAX;
	uint64_t i;

	if (slot == UINT32_MAX)
		return;
	i = __atomic_fetch_add(&h->rn, 1, __ATOMIC_RELAXED);
	if (i >= h->rcap) {
		__atomic_store_n(&h->overflow, 1, __ATOMIC_RELAXED);
		return;
	}
	h->rslot[i] = slot;
	memcpy(h->rgrad + i * h->dim, g, (size_t)h->dim * sizeof(float));
}

/* Invariant 4: the device is gone; the host goes on (INFO says so:
 * emdb_table_tier's failed). */
static void drop_device(hot *h)
{
	hot_serve_close_tier(h, h->tier);
	h->tier = NULL;
	h->nmem = 0;
	h->nfree = 0;
	h->nlent = 0;
	h->npushed = 0;
	h->chunks = 0;
	members_free(&h->m);
	h->st.failed = true;
	h->st.rows = 0;
	h->st.bytes_device = 0;
}

/* Copy members k in [from, to) from the host.  On NOMEM the rows are no
 * longer members (their slots freed); returns IO or OK. */
static int copy_members(hot *h, const chunk_store *rows, uint32_t from, uint32_t to)
{
	uint32_t n = to - from;
	uint64_t *slots;
	float *buf;
	int rc;

	if (!n)
		return EMDB_OK;
	/* The tier's host memory (pinned for CUDA): no staging on the way */
	slots = tier_host_alloc(h->tier, (size_t)n * sizeof(uint64_t));
	buf = tier_host_alloc(h->tier, (size_t)n * h->rf * sizeof(float));
	rc = slots && buf ? EMDB_OK : EMDB_ERR_NOMEM;
	if (!rc) {
		for (uint32_t k = 0; k < n; k++) {
			slots[k] = h->mslot[from + k];
			memcpy(buf + (size_t)k * h->rf, chunk_row(rows, h->mloc[from + k]),
			       (size_t)h->rf * sizeof(float));
		}
		rc = tier_put_rows(h->tier, slots, n, buf);
	}
	if (slots)
		tier_host_free(h->tier, slots);
	if (buf)
		tier_host_free(h->tier, buf);
	if (rc == EMDB_OK)
		h->st.rows_resynced += n;
	if (rc == EMDB_OK || rc == EMDB_ERR_IO)
		return rc;
	/* Not copied: not members (their replica rows are stale). */
	for (uint32_t k = from; k < to; k++)
		h->free_slots[h->nfree++] = h->mslot[k];
	memmove(h->mloc + from, h->mloc + to, (size_t)(h->nmem - to) * sizeof(uint64_t));
	memmove(h->mslot + from, h->mslot + to, (size_t)(h->nmem - to) * sizeof(uint32_t));
	h->nmem -= n;
	return EMDB_OK;
}

/* The recorded steps, in record order; a slot recorded twice goes to a
 * later round, since tier_apply takes distinct rows.  Returns the tier's
 * error, or NOMEM when it could not replay (the caller resyncs). */
static int replay(hot *h, const emdb_opt_scalars *sc, uint64_t n)
{
	uint64_t *slots = emdb_malloc(n * sizeof(uint64_t));
	float *g = emdb_malloc(n * h->dim * sizeof(float));
	uint32_t *seen = emdb_calloc((size_t)h->max_chunks * h->rpc, sizeof(uint32_t));
	uint8_t *done = emdb_calloc(n, 1);
	uint64_t left = n;
	uint32_t round = 0;
	int rc = slots && g && seen && done ? EMDB_OK : EMDB_ERR_NOMEM;

	while (!rc && left) {
		size_t m = 0;

		round++;
		for (uint64_t i = 0; i < n; i++) {
			if (done[i])
				continue;
			if (seen[h->rslot[i]] == round)
				break; /* later records of this slot wait their turn */
			seen[h->rslot[i]] = round;
			slots[m] = h->rslot[i];
			memcpy(g + m * h->dim, h->rgrad + i * h->dim, (size_t)h->dim * sizeof(float));
			done[i] = 1;
			m++;
		}
		rc = tier_apply(h->tier, sc, slots, m, g);
		left -= m;
		if (!rc)
			h->st.steps_applied += m;
	}
	emdb_free(slots);
	emdb_free(g);
	emdb_free(seen);
	emdb_free(done);
	return rc;
}

typedef struct cand {
	uint64_t loc;
	uint32_t count;
	size_t idx;
} cand;

/* Highest counts first, then lower loc. */
static int by_count(const void *a, const void *b)
{
	const cand *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return x->loc < y->loc ? -1 : x->loc > y->loc;
}

static size_t choose_top(const uint64_t *loc, const uint32_t *count, size_t n, size_t cap,
			 size_t *pick)
{
	cand *c = emdb_malloc((n ? n : 1) * sizeof(cand));

	if (!c)
		return 0; /* no memory to sort: no hot rows this time */
	for (size_t i = 0; i < n; i++) {
		c[i].loc = loc[i];
		c[i].count = count[i];
		c[i].idx = i;
	}
	qsort(c, n, sizeof(cand), by_count);
	if (n > cap)
		n = cap;
	for (size_t i = 0; i < n; i++)
		pick[i] = c[i].idx;
	emdb_free(c);
	return n;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* A free slot, allocating a chunk when none is left; UINT32_MAX when the
 * device is full.  *io set on a device failure. */
uint32_t hot_take_slot(hot *h, int *io)
{
	if (!h->nfree && h->chunks < h->max_chunks) {
		int rc = tier_chunk_alloc(h->tier, h->chunks);

		if (rc == EMDB_ERR_IO)
			*io = 1;
		if (rc)
			return UINT32_MAX;
		for (uint32_t k = h->rpc; k-- > 0;)
			h->free_slots[h->nfree++] = h->chunks * h->rpc + k;
		h->chunks++;
	}
	return h->nfree ? h->free_slots[--h->nfree] : UINT32_MAX;
}

/* The new hot set: the chosen candidates; members that stay keep their
 * slot, those that leave free it, those that enter are copied. */
static int revise(hot *h, const chunk_store *rows)
{
	uint64_t *loc = NULL, *want = NULL;
	uint32_t *count = NULL;
	size_t *pick = NULL, n = 0, k, w;
	uint32_t keep = 0, entered;
	int io = 0, rc = EMDB_OK;

	pthread_mutex_lock(&h->mu);
	loc = emdb_malloc((size_t)(h->cn ? h->cn : 1) * sizeof(uint64_t));
	count = emdb_malloc((size_t)(h->cn ? h->cn : 1) * sizeof(uint32_t));
	if (loc && count) {
		/* Collect, then age: halve every count, forget zeros. */
		for (uint32_t i = 0; i < h->ccap; i++)
			if (h->cloc[i] != UINT64_MAX) {
				loc[n] = h->cloc[i];
				count[n++] = h->ccount[i];
			}
		memset(h->cloc, 0xff, (size_t)h->ccap * sizeof(uint64_t));
		h->cn = 0;
		for (size_t i = 0; i < n; i++)
			if (count[i] / 2) {
				uint32_t mask = h->ccap - 1;
				uint64_t x = loc[i] * 0x9E3779B97F4A7C15ull;
				uint32_t j = (uint32_t)(x >> 32) & mask;

				while (h->cloc[j] != UINT64_MAX)
					j = (j + 1) & mask;
				h->cloc[j] = loc[i];
				h->ccount[j] = count[i] / 2;
				h->cn++;
			}
	}
	pthread_mutex_unlock(&h->mu);
	pick = emdb_malloc((n ? n : 1) * sizeof(size_t));
	want = emdb_malloc((n ? n : 1) * sizeof(uint64_t));
	if (!loc || !count || !pick || !want) {
		rc = EMDB_ERR_NOMEM;
		goto out;
	}
	w = h->choose(loc, count, n, h->cap_rows, pick);
	for (k = 0; k < w; k++)
		want[k] = loc[pick[k]];
	qsort(want, w, sizeof(uint64_t), cmp_u64);
	/* Members staying first, in place; the others free their slots. */
	for (uint32_t i = 0; i < h->nmem; i++) {
		if (bsearch(&h->mloc[i], want, w, sizeof(uint64_t), cmp_u64)) {
			h->mloc[keep] = h->mloc[i];
			h->mslot[keep++] = h->mslot[i];
		} else {
			h->free_slots[h->nfree++] = h->mslot[i];
		}
	}
	h->nmem = keep;
	entered = keep;
	for (k = 0; k < w && !io; k++) {
		uint32_t slot;

		if (h->m.cap && hot__slot(&h->m, want[k]) != UINT32_MAX)
			continue; /* stayed */
		slot = hot_take_slot(h, &io);
		if (slot == UINT32_MAX)
			break; /* the device is full: fewer hot rows */
		h->mloc[h->nmem] = want[k];
		h->mslot[h->nmem++] = slot;
	}
	if (io)
		rc = EMDB_ERR_IO;
	else
		rc = copy_members(h, rows, entered, h->nmem);
out:
	emdb_free(loc);
	emdb_free(count);
	emdb_free(pick);
	emdb_free(want);
	return rc;
}

/* Records for the next pass: room for each member twice. */
static void size_records(hot *h)
{
	uint64_t want = 2ull * h->nmem;

	if (want == h->rcap)
		return;
	emdb_free(h->rslot);
	emdb_free(h->rgrad);
	h->rslot = want ? emdb_malloc(want * sizeof(uint32_t)) : NULL;
	h->rgrad = want ? emdb_malloc(want * h->dim * sizeof(float)) : NULL;
	h->rcap = h->rslot && h->rgrad ? want : 0;
	/* rcap 0 with members: every pass overflows, and resyncs. */
}

void hot_step(hot *h, const chunk_store *rows, const emdb_opt_scalars *sc, uint64_t step,
	      uint32_t gen)
{
	uint64_t n = __atomic_load_n(&h->rn, __ATOMIC_RELAXED);
	uint32_t nmem0 = h->nmem;
	bool revising = step % HOT_REVISE_STEPS == 0;
	int overflow, rc = EMDB_OK;

	pthread_mutex_lock(&h->tmu);
	/* An exchange: a hot_rows_written meanwhile is not lost. */
	overflow = __atomic_exchange_n(&h->overflow, 0, __ATOMIC_RELAXED);
	if (!h->tier) {
		__atomic_store_n(&h->rn, 0, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&h->tmu);
		return;
	}
	hot_serve_unlend(h);
	if (n > h->rcap)
		n = h->rcap;
	if (overflow) {
		rc = hot_serve_discard(h);
		if (!rc)
			rc = copy_members(h, rows, 0, h->nmem);
	} else {
		/* From the device's accumulators when exact, else replayed. */
		rc = hot_serve_step(h, sc, n, gen);
		if (rc == 1 || (rc == 0 && !n)) {
			rc = EMDB_OK;
		} else if (rc == 0) {
			rc = replay(h, sc, n);
			if (rc == EMDB_ERR_NOMEM) /* could not replay: copy instead */
				rc = copy_members(h, rows, 0, h->nmem);
		}
	}
	__atomic_store_n(&h->rn, 0, __ATOMIC_RELAXED);
	hot_serve_next(h, gen);
	if (!rc && revising)
		rc = revise(h, rows);
	if (rc == EMDB_ERR_IO) {
		drop_device(h);
		pthread_mutex_unlock(&h->tmu);
		return;
	}
	if ((revising || h->nmem != nmem0) && members_build(h) != EMDB_OK) {
		/* No map for the new set: nothing is a member until the next
		 * revision, and the replica's rows go stale harmlessly. */
		h->nfree = 0;
		for (uint32_t c = 0; c < h->chunks; c++)
			for (uint32_t k = h->rpc; k-- > 0;)
				h->free_slots[h->nfree++] = c * h->rpc + k;
		h->nmem = 0;
		members_free(&h->m);
	}
	size_records(h);
	{
		tier_stats ts;

		tier_stats_get(h->tier, &ts);
		h->st.rows = h->nmem;
		h->st.bytes_device = ts.bytes_in_use;
	}
	pthread_mutex_unlock(&h->tmu);
}

void hot_rows_written(hot *h)
{
	__atomic_store_n(&h->overflow, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->epoch, 1, __ATOMIC_RELAXED); /* staged rows stale */
}

tier *hot_tier(hot *h)
{
	return h->tier;
}

void hot_get_stats(hot *h, hot_stats *out)
{
	pthread_mutex_lock(&h->tmu);
	*out = h->st;
	pthread_mutex_unlock(&h->tmu);
}

int hot_get_device_stats(hot *h, uint32_t r, emdb_tier_device_info *out)
{
	int rc = EMDB_OK;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&h->tmu);
	if (!h->tier)
		rc = emdb__seterr(EMDB_ERR_INVALID, "the device failed; no replica");
	else if (r >= h->st.replicas)
		rc = emdb__seterr(EMDB_ERR_INVALID, "device %u of a replica on %u", r,
				  h->st.replicas);
	if (!rc) {
		/* The tier's replicas sit on devices 0 .. replicas - 1
		 * (hot_create), each holding the same chunks. */
		out->device = (int)r;
		out->hot_rows = h->st.rows;
		out->bytes_device = h->st.bytes_device / h->st.replicas;
		out->rows_gathered = h->dev_gathered[r];
		out->rows_scattered = h->dev_scattered[r];
	}
	pthread_mutex_unlock(&h->tmu);
	return rc;
}

int hot_replica_row(hot *h, uint32_t replica, uint64_t loc, float *out)
{
	uint64_t slot;
	int rc;

	pthread_mutex_lock(&h->tmu);
	slot = h->m.cap ? hot__slot(&h->m, loc) : UINT32_MAX;
	if (!h->tier)
		rc = emdb__seterr(EMDB_ERR_IO, "the device tier failed; no replica");
	else if (slot == UINT32_MAX)
		rc = emdb__seterr(EMDB_ERR_INVALID, "row is not hot");
	else
		rc = tier_get_rows(h->tier, replica, &slot, 1, out);
	pthread_mutex_unlock(&h->tmu);
	return rc;
}
