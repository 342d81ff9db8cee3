/*
 * wl_ckpt.c - timed checkpoint and restore jobs, the row changes between
 * checkpoints, and the check that a restore gave back what was saved
 * (wl_ckpt.h).
 *
 * Design
 *   A figure is the wall time of emdb_job_run alone: preparing the job,
 *   opening the store and freeing the job are outside it, as they are
 *   outside what a trainer waits for between two checkpoints.
 *
 *   Rows are changed the way training changes them: gradients pushed,
 *   then an Update, so that a changed row's weights and optimizer state
 *   both move and an incremental checkpoint has to carry it.  Changed
 *   rows are picked by a scattering permutation of the ranks, so they lie
 *   all over the chunks rather than in one run of rows.
 *
 *   A restore is checked against the table it came from on a spread
 *   sample of rows, vectors and optimizer state bit for bit: a throughput
 *   measured on a restore that lost data would mean nothing.
 *
 * Invariants
 *   1. Every engine error ends the run with the engine's message.
 *   2. wl_ckpt_touch updates each named row exactly once.
 */
#include "tools/bench/wl_ckpt.h"

#include <stdlib.h>
#include <string.h>

#include "tools/bench/harness.h"
#include "tools/bench/preload.h"
#include "tools/bench/workloads.h"

#define TOUCH_BATCH 65536u
#define TOUCH_STEP 1000000ull /* rows between Updates: bounds the accumulators */

/* Run the job that `prep` (its preparing call) gave with status prep_rc. */
static void run_job(int prep_rc, const char *prep, emdb_job *job, ckpt_run *out)
{
	double cpu_t, cpu_p;
	int rc;

	if (prep_rc != EMDB_OK)
		preload_die_engine(prep, prep_rc);
	memset(out, 0, sizeof(*out));
	cpu_t = harness_cpu_thread();
	cpu_p = harness_cpu_process();
	out->t0 = harness_now();
	rc = emdb_job_run(job, &out->info);
	out->t1 = harness_now();
	if (rc != EMDB_OK)
		preload_die_engine("emdb_job_run", rc);
	out->seconds = out->t1 - out->t0;
	out->cpu_thread = harness_cpu_thread() - cpu_t;
	out->cpu_process = harness_cpu_process() - cpu_p;
	emdb_job_progress(job, &out->prog);
	emdb_job_free(job);
}

void wl_ckpt_take(emdb_db *db, emdb_store *st, emdb_ckpt_kind kind, ckpt_run *out)
{
	emdb_job *job;
	int rc = emdb_job_checkpoint(db, st, kind, &job);

	run_job(rc, "emdb_job_checkpoint", job, out);
	harness_log("%s checkpoint %llu: %llu rows, %.1f MB in %.2f s (%.0f MB/s; CPU %.2f s "
		    "on its thread, %.2f s in the process), switch %.3f ms, %llu rows copied "
		    "on write", emdb_ckpt_kind_name(kind), (unsigned long long)out->info.id,
		    (unsigned long long)out->info.rows, (double)out->info.bytes / 1e6,
		    out->seconds, (double)out->info.bytes / out->seconds / 1e6, out->cpu_thread,
		    out->cpu_process, (double)out->prog.switch_ns / 1e6,
		    (unsigned long long)out->prog.cow_rows);
}

emdb_db *wl_ckpt_restore(emdb_store *st, uint64_t id, ckpt_run *out)
{
	emdb_db *db = preload_db_open();
	emdb_job *job;
	int rc = emdb_job_restore(db, st, id, &job);

	run_job(rc, "emdb_job_restore", job, out);
	harness_log("restore of checkpoint %llu: %llu rows, %.1f MB in %.2f s (%.0f MB/s; CPU "
		    "%.2f s on its thread, %.2f s in the process)",
		    (unsigned long long)out->info.id, (unsigned long long)out->info.rows_total,
		    (double)out->info.bytes / 1e6, out->seconds,
		    (double)out->info.bytes / out->seconds / 1e6, out->cpu_thread,
		    out->cpu_process);
	return db;
}

void wl_ckpt_memory(const emdb_table_config *cfg, uint64_t rows, double idle_s,
		    ckpt_mem_run *out)
{
	emdb_db *db;
	uint32_t table;
	double cpu_p;
	int rc;

	harness_sleep(idle_s);
	memset(out, 0, sizeof(*out));
	db = preload_db_open();
	rc = emdb_table_create(db, cfg, &table);
	if (rc != EMDB_OK)
		preload_die_engine("emdb_table_create", rc);
	cpu_p = harness_cpu_process();
	double t0 = harness_now();
	rc = emdb_table_reserve(db, table, rows);
	out->seconds = harness_now() - t0;
	if (rc != EMDB_OK)
		preload_die_engine("emdb_table_reserve", rc);
	out->cpu_process = harness_cpu_process() - cpu_p;
	emdb_db_close(db);
	harness_log("memory of a restored table: %llu rows reserved in %.2f s after %.0f s idle "
		    "(CPU %.2f s in the process)", (unsigned long long)rows, out->seconds, idle_s,
		    out->cpu_process);
}

/* ---- changing rows ----------------------------------------------------- */

typedef struct touch_ctx {
	emdb_db *db;
	uint32_t table, dim;
	const keys_perm *perm;
	uint64_t lo, n;       /* positions lo .. lo + n - 1 of the rank order */
	unsigned threads;
	float *grads[HARNESS_MAX_THREADS];
} touch_ctx;

static void touch_part(void *arg, unsigned t)
{
	touch_ctx *c = arg;
	uint64_t *ids = malloc(sizeof(uint64_t) * TOUCH_BATCH);

	if (!ids)
		harness_die("out of memory");
	for (uint64_t off = (uint64_t)t * TOUCH_BATCH; off < c->n;
	     off += (uint64_t)c->threads * TOUCH_BATCH) {
		size_t k = c->n - off < TOUCH_BATCH ? (size_t)(c->n - off) : TOUCH_BATCH;
		int rc;

		for (size_t i = 0; i < k; i++) {
			uint64_t pos = c->lo + off + i;
			ids[i] = keys_id((c->perm ? keys_perm_apply(c->perm, pos) : pos) + 1);
		}
		rc = emdb_push(c->db, c->table, ids, k, c->dim, c->grads[t]);
		if (rc != EMDB_OK)
			preload_die_engine("emdb_push", rc);
	}
	free(ids);
}

void wl_ckpt_touch(emdb_db *db, uint32_t table, uint32_t dim, const keys_perm *perm,
		   uint64_t first, uint64_t count, unsigned threads)
{
	touch_ctx c = { .db = db, .table = table, .dim = dim, .perm = perm,
			.threads = threads };

	for (unsigned t = 0; t < threads; t++)
		c.grads[t] = wl_grads_new(TOUCH_BATCH, dim, t);
	for (uint64_t done = 0; done < count; done += c.n) {
		int rc;

		c.lo = first + done;
		c.n = count - done < TOUCH_STEP ? count - done : TOUCH_STEP;
		harness_parallel(threads, touch_part, &c);
		rc = emdb_update(db, table, NULL);
		if (rc != EMDB_OK)
			preload_die_engine("emdb_update", rc);
	}
	for (unsigned t = 0; t < threads; t++)
		free(c.grads[t]);
}

/* ---- checking a restore ------------------------------------------------ */

/* Vectors (state 0) or optimizer state (1) of ids in db, into out. */
static void read_rows(emdb_db *db, uint32_t table, const emdb_table_config *cfg,
		      const uint64_t *ids, uint32_t n, int state, float *out)
{
	uint8_t *found = malloc(n);
	int rc;

	if (!found)
		harness_die("out of memory");
	rc = state ? emdb_read_state(db, table, ids, n, out, found)
		   : emdb_lookup(db, table, ids, n, cfg->dim, out, found);
	if (rc != EMDB_OK)
		preload_die_engine(state ? "emdb_read_state" : "emdb_lookup", rc);
	for (uint32_t i = 0; i < n; i++)
		if (!found[i])
			harness_die("restore check: ID %016llx is missing",
				    (unsigned long long)ids[i]);
	free(found);
}

void wl_ckpt_verify(emdb_db *a, emdb_db *b, uint32_t table, uint64_t rows,
		    uint32_t samples)
{
	emdb_table_info ia, ib;
	uint64_t *ids;
	size_t width;
	float *va, *vb;

	preload_describe(a, table, &ia);
	preload_describe(b, table, &ib);
	if (ia.stats.rows != ib.stats.rows || ia.stats.step != ib.stats.step ||
	    ia.config.dim != ib.config.dim || ia.config.optimizer.kind != ib.config.optimizer.kind)
		harness_die("restore check: table %u has %llu rows at step %llu, "
			    "the original %llu rows at step %llu", table,
			    (unsigned long long)ib.stats.rows, (unsigned long long)ib.stats.step,
			    (unsigned long long)ia.stats.rows, (unsigned long long)ia.stats.step);
	if (samples > rows)
		samples = (uint32_t)rows;
	width = ia.config.dim;
	if (emdb_optimizer_state_floats(ia.config.optimizer.kind, ia.config.dim) > width)
		width = emdb_optimizer_state_floats(ia.config.optimizer.kind, ia.config.dim);
	ids = malloc(sizeof(uint64_t) * samples);
	va = malloc(sizeof(float) * samples * width);
	vb = malloc(sizeof(float) * samples * width);
	if (!ids || !va || !vb)
		harness_die("out of memory");
	for (uint32_t i = 0; i < samples; i++)
		ids[i] = keys_id(1 + (uint64_t)i * rows / samples);
	for (int state = 0; state < 2; state++) {
		size_t bytes = sizeof(float) * samples *
			       (state ? emdb_optimizer_state_floats(ia.config.optimizer.kind,
								    ia.config.dim)
				      : ia.config.dim);
		read_rows(a, table, &ia.config, ids, samples, state, va);
		read_rows(b, table, &ib.config, ids, samples, state, vb);
		if (memcmp(va, vb, bytes) != 0)
			harness_die("restore check: the %s of the restored rows differ "
				    "from the original", state ? "optimizer state" : "vectors");
	}
	harness_log("restore check: %u rows, vectors and optimizer state identical", samples);
	free(ids);
	free(va);
	free(vb);
}
