/*
 * wl_index.c - the workloads on the large preloaded table: Prefetch
 * (find-or-insert), Pull through tickets, and Lookup.
 *
 * Design
 *   Each step is one engine call on one batch of the thread's pool, and
 *   nothing else: IDs come straight from the pool (Prefetch copies its
 *   batch once to put unseen IDs in place of the markers, a few ns per ID,
 *   which the global-lock baseline pays too), output buffers are the
 *   thread's own and reused.  Untimed set-up (tickets for Pull) happens
 *   before harness_measure.
 *
 *   The fraction of new IDs is read back from the engine's own counters
 *   (rows and ids_prefetch before and after), so the record shows what the
 *   engine inserted, not what the pool intended.
 *
 * Invariants
 *   1. Every engine error ends the run with the engine's message: a figure
 *      measured over failing calls would be meaningless.
 *   2. Buffers and tickets are freed before each function returns.
 */
#include <stdlib.h>
#include <string.h>

#include "tools/bench/preload.h"
#include "tools/bench/workloads.h"

static float *out_buffer(size_t batch, uint32_t dim)
{
	size_t bytes = (batch * dim * sizeof(float) + 63) / 64 * 64;
	float *f = aligned_alloc(64, bytes);
	if (!f)
		harness_die("out of memory");
	memset(f, 0, bytes); /* no page faults in the first timed batch */
	return f;
}

static void record_init(report_record *rec, const char *name, const wl_env *e,
			const pool *p, unsigned threads)
{
	report_record_init(rec, name, threads, (uint32_t)p->batch, e->dim, e->rows, p->dist);
	rec->zipf_s = p->zipf_s;
	rec->zipf_share = p->share;
}

/* ---- Pull -------------------------------------------------------------- */

typedef struct pull_ctx {
	const wl_env *e;
	const pool *p;
	emdb_ticket **tk;
	uint64_t *offsets; /* [bags + 1], or NULL: plain Pull */
	float *out[HARNESS_MAX_THREADS];
} pull_ctx;

static uint64_t pull_step(void *arg, unsigned t, uint64_t iter)
{
	pull_ctx *c = arg;
	const emdb_ticket *tk = c->tk[t * c->p->batches + iter % c->p->batches];
	int rc = c->offsets ? emdb_pull_bags_ticket(c->e->db, c->e->table, tk, c->offsets, c->e->bags,
						    EMDB_POOL_SUM, c->e->dim, c->out[t])
			    : emdb_pull_ticket(c->e->db, c->e->table, tk, c->e->dim, c->out[t]);

	if (rc != EMDB_OK)
		preload_die_engine(c->offsets ? "emdb_pull_bags_ticket" : "emdb_pull_ticket", rc);
	return c->p->batch;
}

void wl_pull(const wl_env *e, const pool *p, unsigned threads, report_record *rec)
{
	pull_ctx c = { .e = e, .p = p };

	if (e->bags) {
		c.offsets = malloc(((size_t)e->bags + 1) * sizeof(uint64_t));
		if (!c.offsets)
			harness_die("out of memory");
		for (uint32_t b = 0; b <= e->bags; b++)
			c.offsets[b] = (uint64_t)p->batch * b / e->bags;
	}
	c.tk = preload_tickets(e->db, e->table, p);
	for (unsigned t = 0; t < threads; t++)
		c.out[t] = out_buffer(e->bags ? e->bags : p->batch, e->dim);
	record_init(rec, e->bags ? "pull_bags" : "pull", e, p, threads);
	harness_measure(threads, e->seconds, pull_step, &c, &rec->res);
	if (e->bags)
		harness_log("pull into %u bags, %u thread(s): %.2fM IDs/s", e->bags, threads, rec->res.best / 1e6);
	else
		harness_log("pull, %u thread(s): %.2fM IDs/s", threads, rec->res.best / 1e6);
	for (unsigned t = 0; t < threads; t++)
		free(c.out[t]);
	free(c.offsets);
	preload_tickets_free(c.tk, p);
}

/* ---- Lookup ------------------------------------------------------------ */

typedef struct lookup_ctx {
	const wl_env *e;
	const pool *p;
	float *out[HARNESS_MAX_THREADS];
} lookup_ctx;

static uint64_t lookup_step(void *arg, unsigned t, uint64_t iter)
{
	lookup_ctx *c = arg;
	int rc = emdb_lookup(c->e->db, c->e->table, pool_ids(c->p, t, iter),
			     c->p->batch, c->e->dim, c->out[t], NULL);

	if (rc != EMDB_OK)
		preload_die_engine("emdb_lookup", rc);
	return c->p->batch;
}

void wl_lookup(const wl_env *e, const pool *p, unsigned threads, report_record *rec)
{
	lookup_ctx c = { .e = e, .p = p };

	for (unsigned t = 0; t < threads; t++)
		c.out[t] = out_buffer(p->batch, e->dim);
	record_init(rec, "lookup", e, p, threads);
	harness_measure(threads, e->seconds, lookup_step, &c, &rec->res);
	harness_log("lookup, %u thread(s): %.2fM IDs/s", threads, rec->res.best / 1e6);
	for (unsigned t = 0; t < threads; t++)
		free(c.out[t]);
}

/* ---- Prefetch ----------------------------------------------------------
 *
 * The table grows while measured (new IDs), so index shard resizes may
 * fall inside the measurement; they are part of what Prefetch costs and
 * are counted in the record (index_resizes) so that a slow figure can be
 * told apart from a resize wave.
 */

typedef struct prefetch_ctx {
	const wl_env *e;
	const pool *p;
	wl_prefetch_state *st;
	uint64_t *ids[HARNESS_MAX_THREADS];
} prefetch_ctx;

static uint64_t prefetch_step(void *arg, unsigned t, uint64_t iter)
{
	prefetch_ctx *c = arg;
	emdb_ticket *tk;
	int rc;

	pool_fresh_batch(c->p, t, iter, c->e->rows + 1, &c->st->fresh_next[t], c->ids[t]);
	rc = emdb_prefetch(c->e->db, c->e->table, c->ids[t], c->p->batch, &tk);
	if (rc != EMDB_OK)
		preload_die_engine("emdb_prefetch", rc);
	emdb_ticket_free(tk);
	return c->p->batch;
}

void wl_prefetch(const wl_env *e, const pool *p, unsigned threads,
		 wl_prefetch_state *st, report_record *rec)
{
	prefetch_ctx c = { .e = e, .p = p, .st = st };
	emdb_table_info before, after;
	uint64_t ids;

	for (unsigned t = 0; t < threads; t++) {
		c.ids[t] = malloc(sizeof(uint64_t) * p->batch);
		if (!c.ids[t])
			harness_die("out of memory");
	}
	record_init(rec, "prefetch", e, p, threads);
	preload_describe(e->db, e->table, &before);
	rec->rows = before.stats.rows;
	harness_measure(threads, e->seconds, prefetch_step, &c, &rec->res);
	preload_describe(e->db, e->table, &after);
	ids = after.stats.ids_prefetch - before.stats.ids_prefetch;
	rec->new_frac = ids ? (double)(after.stats.rows - before.stats.rows) / (double)ids : 0;
	rec->resizes = (int64_t)(after.stats.index_resizes - before.stats.index_resizes);
	harness_log("prefetch, %u thread(s): %.2fM IDs/s, %.1f%% new, %lld index shard "
		    "resizes, table now %llu rows",
		    threads, rec->res.best / 1e6, 100 * rec->new_frac,
		    (long long)rec->resizes, (unsigned long long)after.stats.rows);
	for (unsigned t = 0; t < threads; t++)
		free(c.ids[t]);
}
