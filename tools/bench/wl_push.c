/*
 * wl_push.c - Push+Update and its anchor, the bare optimizer loop.
 *
 * Design
 *   A training step pushes one batch of gradients and applies the
 *   optimizer; the workload does exactly that per step: emdb_push_ticket
 *   (ticket resolved beforehand, as after a Prefetch) then emdb_update,
 *   or both in one call, emdb_push_update_ticket (workload push_update).
 *   With several threads each runs its own steps, so an Update may apply
 *   another thread's gradients too; the work per ID is the same.
 *
 *   The anchor is what the optimizer costs with nothing around it: the
 *   same batches, each ID already resolved to a row pointer, the row
 *   function of db/optim_math.h applied to every ID with its own gradient,
 *   rows prefetched (for writing) a few ahead.  It runs on a region of its
 *   own with the engine's row layout (weights, then optimizer state, padded
 *   to 16 bytes), the ranks scattered over it by a permutation.  The anchor
 *   applies the rule once per ID, duplicates included; the engine sums
 *   duplicates first and applies it once per distinct row, which is how a
 *   skewed (Zipf) batch can beat a uniform one.  With several threads the
 *   anchor's threads update shared hot rows without any lock: a benign
 *   race (lost updates of a bound that only times the loop), which the
 *   engine, serializing Updates, cannot have.
 *
 *   Gradients are fixed per thread, small (|g| <= 0.01) so weights and
 *   state stay in normal float range over millions of updates: denormals
 *   would slow both sides and measure the FPU, not the engine.
 *
 * Invariants
 *   1. Both sides see the same pool positions with the same gradients.
 *   2. The bare loop's region is unmapped before wl_bare_update returns.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/alloc_int.h"
#include "db/optim_math.h"
#include "tools/bench/keys.h"
#include "tools/bench/preload.h"
#include "tools/bench/workloads.h"

#define BARE_PREFETCH_ROWS 8u

float *wl_grads_new(size_t batch, uint32_t dim, unsigned t)
{
	size_t n = batch * dim;
	float *g = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
	keys_rng r = { 0x6ad5 + t };

	if (!g)
		harness_die("out of memory");
	for (size_t i = 0; i < n; i++)
		g[i] = (float)(keys_rng_unit(&r) * 0.02 - 0.01);
	return g;
}

/* ---- Push+Update ------------------------------------------------------- */

typedef struct push_ctx {
	const wl_env *e;
	const pool *p;
	bool fused;                          /* emdb_push_update_ticket */
	emdb_ticket **tk;
	uint32_t table[HARNESS_MAX_THREADS]; /* each thread's table */
	float *grads[HARNESS_MAX_THREADS];
} push_ctx;

static uint64_t push_step(void *arg, unsigned t, uint64_t iter)
{
	push_ctx *c = arg;
	const emdb_ticket *tk = c->tk[t * c->p->batches + iter % c->p->batches];
	int rc;

	if (c->fused) {
		rc = emdb_push_update_ticket(c->e->db, c->table[t], tk, c->e->dim, c->grads[t], NULL);
		if (rc != EMDB_OK)
			preload_die_engine("emdb_push_update_ticket", rc);
		return c->p->batch;
	}
	rc = emdb_push_ticket(c->e->db, c->table[t], tk, c->e->dim, c->grads[t]);
	if (rc != EMDB_OK)
		preload_die_engine("emdb_push_ticket", rc);
	rc = emdb_update(c->e->db, c->table[t], NULL);
	if (rc != EMDB_OK)
		preload_die_engine("emdb_update", rc);
	return c->p->batch;
}

void wl_push_update(const wl_env *e, const pool *p, unsigned threads, bool fused,
		    report_record *rec)
{
	push_ctx c = { .e = e, .p = p, .fused = fused };
	emdb_table_info before, after;
	uint64_t ids;

	c.tk = preload_tickets(e->db, e->table, p);
	for (unsigned t = 0; t < threads; t++) {
		c.table[t] = e->table;
		c.grads[t] = wl_grads_new(p->batch, e->dim, t);
	}
	report_record_init(rec, fused ? "push_update" : "push", threads, (uint32_t)p->batch, e->dim, e->rows, p->dist);
	rec->zipf_s = p->zipf_s;
	rec->zipf_share = p->share;
	preload_describe(e->db, e->table, &before);
	rec->optimizer = emdb_optimizer_name(before.config.optimizer.kind);
	harness_measure(threads, e->seconds, push_step, &c, &rec->res);
	preload_describe(e->db, e->table, &after);
	ids = after.stats.ids_push - before.stats.ids_push;
	rec->unique_frac = ids ? (double)(after.stats.rows_updated - before.stats.rows_updated) / (double)ids : 0;
	harness_log("%s %s %s, %u thread(s): %.2fM IDs/s, %.2f rows updated per ID",
		    fused ? "push_update (one call)" : "push+update", rec->optimizer, keys_dist_name(p->dist), threads,
		    rec->res.best / 1e6, rec->unique_frac);
	for (unsigned t = 0; t < threads; t++)
		free(c.grads[t]);
	preload_tickets_free(c.tk, p);
}

/* The same steps with a table of its own per thread: nothing shared
 * between the threads but the database handle. */
void wl_push_update_private(const wl_env *e, const uint32_t *tables, const pool *p,
			    unsigned threads, bool fused, harness_result *out)
{
	push_ctx c = { .e = e, .p = p, .fused = fused };

	c.tk = preload_tickets_each(e->db, tables, p);
	for (unsigned t = 0; t < threads; t++) {
		c.table[t] = tables[t];
		c.grads[t] = wl_grads_new(p->batch, e->dim, t);
	}
	harness_measure(threads, e->seconds, push_step, &c, out);
	harness_log("%s, a table per thread, %u thread(s): %.2fM IDs/s",
		    fused ? "push_update (one call)" : "push+update", threads, out->best / 1e6);
	for (unsigned t = 0; t < threads; t++)
		free(c.grads[t]);
	preload_tickets_free(c.tk, p);
}

/* ---- the bare optimizer loop ------------------------------------------- */

typedef struct bare_ctx {
	const emdb_optimizer *opt;
	const pool *p;
	uint32_t dim;
	size_t row_bytes;
	float **rowp; /* [threads * len] row of each pool position */
	float *grads[HARNESS_MAX_THREADS];
	struct {
		uint64_t step;
	} __attribute__((aligned(64))) th[HARNESS_MAX_THREADS];
} bare_ctx;

static inline void prefetch_row_w(const void *row, size_t bytes)
{
	for (size_t o = 0; o < bytes; o += 64)
		__builtin_prefetch((const char *)row + o, 1, 3);
}

/* The kind is dispatched once per batch so the row function inlines. */
#define BARE_LOOP(rowfn)                                                   \
	for (size_t i = 0; i < n; i++) {                                   \
		if (i + BARE_PREFETCH_ROWS < n)                            \
			prefetch_row_w(rp[i + BARE_PREFETCH_ROWS], rb);    \
		rowfn(&sc, dim, rp[i], g + i * dim);                       \
	}

static uint64_t bare_step(void *arg, unsigned t, uint64_t iter)
{
	bare_ctx *c = arg;
	const pool *p = c->p;
	float *const *rp = c->rowp + (size_t)t * p->len + (size_t)(iter % p->batches) * p->batch;
	const float *g = c->grads[t];
	size_t n = p->batch, rb = c->row_bytes;
	uint32_t dim = c->dim;
	emdb_opt_scalars sc;

	emdb_opt_scalars_for_step(c->opt, ++c->th[t].step, dim, &sc);
	for (size_t i = 0; i < n && i < BARE_PREFETCH_ROWS; i++)
		prefetch_row_w(rp[i], rb);
	switch (c->opt->kind) {
	case EMDB_OPT_SGD:
		BARE_LOOP(emdb_opt_sgd_row);
		break;
	case EMDB_OPT_ADAGRAD:
		BARE_LOOP(emdb_opt_adagrad_row);
		break;
	case EMDB_OPT_ROWWISE_ADAGRAD:
		BARE_LOOP(emdb_opt_rowwise_adagrad_row);
		break;
	case EMDB_OPT_ADAM:
		BARE_LOOP(emdb_opt_adam_row);
		break;
	case EMDB_OPT_FTRL:
		BARE_LOOP(emdb_opt_ftrl_row);
		break;
	}
	return n;
}

typedef struct region_job {
	uint8_t *base;
	uint64_t rows;
	size_t stride;
	uint32_t dim;
	unsigned threads;
	const emdb_optimizer *opt;
} region_job;

/* Weights small and non-zero, state as a new engine row has it. */
static void region_init(void *arg, unsigned t)
{
	region_job *j = arg;
	uint64_t lo = j->rows * t / j->threads, hi = j->rows * (t + 1) / j->threads;

	for (uint64_t r = lo; r < hi; r++) {
		float *row = (float *)(j->base + r * j->stride);
		for (uint32_t c = 0; c < j->dim; c++)
			row[c] = 0.001f * (float)((r + c) % 19) - 0.009f;
		emdb_opt_init_state(j->opt->kind, j->opt, j->dim, row + j->dim);
	}
}

void wl_bare_update(const emdb_optimizer *opt, uint32_t dim, uint64_t rows,
		    const pool *p, unsigned threads, double seconds,
		    harness_result *out)
{
	uint32_t state = emdb_optimizer_state_floats(opt->kind, dim);
	size_t stride = (((size_t)dim + state) * sizeof(float) + 15) & ~(size_t)15;
	size_t bytes = rows * stride, total = p->len * p->threads;
	bare_ctx c = { .opt = opt, .p = p, .dim = dim,
		       .row_bytes = ((size_t)dim + state) * sizeof(float) };
	region_job j = { emdb_map(bytes), rows, stride, dim, threads, opt };
	keys_perm perm;

	if (!j.base)
		harness_die("cannot map %.2f GB for the bare optimizer loop: %s",
			    (double)bytes / 1e9, emdb_last_error());
	harness_parallel(threads, region_init, &j);
	c.rowp = malloc(sizeof(float *) * total);
	if (!c.rowp)
		harness_die("out of memory");
	keys_perm_init(&perm, rows, 0xba4e);
	for (size_t i = 0; i < total; i++)
		c.rowp[i] = (float *)(j.base + keys_perm_apply(&perm, p->ranks[i] - 1) * stride);
	for (unsigned t = 0; t < threads; t++)
		c.grads[t] = wl_grads_new(p->batch, dim, t);

	harness_measure(threads, seconds, bare_step, &c, out);
	harness_log("bare optimizer loop %s %s, %u thread(s): %.2fM IDs/s",
		    emdb_optimizer_name(opt->kind), keys_dist_name(p->dist),
		    threads, out->best / 1e6);

	for (unsigned t = 0; t < threads; t++)
		free(c.grads[t]);
	free(c.rowp);
	emdb_unmap(j.base, bytes);
}
