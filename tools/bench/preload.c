/*
 * preload.c - creates and fills the engine tables of emdb-bench.
 *
 * Design
 *   Ranks are inserted in the order of a scattering permutation, not
 *   1, 2, 3...: the engine allocates rows in insertion order, and inserting
 *   by rank would pack the hot rows into a few pages, a locality that a real
 *   ID stream does not give.  The anchors place ranks with a permutation of
 *   their own for the same reason.
 *
 *   Filling goes through emdb_prefetch in large batches, so preloading
 *   exercises the same insert path as the workload and costs a few seconds
 *   per ten million rows.
 *
 * Invariants
 *   1. After preload_table the table holds exactly the IDs keys_id(1..rows).
 */
#include "tools/bench/preload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/harness.h"
#include "tools/bench/keys.h"
#include "tools/bench/pool.h"

#define PRELOAD_BATCH 65536u

void preload_die_engine(const char *what, int rc)
{
	harness_die("%s failed: %s (%s): %s", what, emdb_err_name(rc),
		    emdb_strerror(rc), emdb_last_error());
}

void preload_config(emdb_table_config *cfg, const char *name, uint32_t dim,
		    emdb_opt_kind kind, emdb_init_kind init)
{
	emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
	int rc;

	c.dim = dim;
	snprintf(c.name, sizeof(c.name), "%s", name);
	rc = emdb_optimizer_defaults(kind, &c.optimizer);
	if (rc != EMDB_OK)
		preload_die_engine("emdb_optimizer_defaults", rc);
	c.init.kind = init;
	c.init.a = init == EMDB_INIT_UNIFORM ? -PRELOAD_INIT_SPREAD : 0;
	c.init.b = init == EMDB_INIT_ZEROS ? 0 : PRELOAD_INIT_SPREAD;
	c.seed = PRELOAD_SEED;
	*cfg = c;
}

typedef struct fill_ctx {
	emdb_db *db;
	uint32_t table;
	uint64_t rows;
	unsigned threads;
	keys_perm perm;
} fill_ctx;

static void fill_part(void *arg, unsigned t)
{
	fill_ctx *c = arg;
	uint64_t *ids = malloc(sizeof(uint64_t) * PRELOAD_BATCH);
	uint64_t blocks = (c->rows + PRELOAD_BATCH - 1) / PRELOAD_BATCH;

	if (!ids)
		harness_die("out of memory");
	for (uint64_t b = t; b < blocks; b += c->threads) {
		uint64_t lo = b * PRELOAD_BATCH;
		size_t n = c->rows - lo < PRELOAD_BATCH ? (size_t)(c->rows - lo) : PRELOAD_BATCH;
		emdb_ticket *tk;
		int rc;

		for (size_t i = 0; i < n; i++)
			ids[i] = keys_id(keys_perm_apply(&c->perm, lo + i) + 1);
		rc = emdb_prefetch(c->db, c->table, ids, n, &tk);
		if (rc != EMDB_OK)
			preload_die_engine("emdb_prefetch (preload)", rc);
		emdb_ticket_free(tk);
	}
	free(ids);
}

void preload_table(emdb_db *db, const emdb_table_config *cfg, uint64_t rows,
		   unsigned threads, uint32_t *table)
{
	fill_ctx c = { .db = db, .rows = rows, .threads = threads };
	emdb_table_info info;
	double t0;
	int rc;

	rc = emdb_table_create(db, cfg, &c.table);
	if (rc != EMDB_OK)
		preload_die_engine("emdb_table_create", rc);
	keys_perm_init(&c.perm, rows, 0x9e10adull ^ cfg->dim);
	t0 = harness_now();
	harness_parallel(threads, fill_part, &c);
	preload_describe(db, c.table, &info);
	if (info.stats.rows != rows)
		harness_die("preload of '%s': table holds %llu rows, expected %llu",
			    cfg->name, (unsigned long long)info.stats.rows,
			    (unsigned long long)rows);
	harness_log("preloaded '%s': %llu rows of dim %u (%s) in %.1f s, %.2fM rows/s; "
		    "vectors %.2f GB, optimizer %.2f GB, index %.2f GB",
		    cfg->name, (unsigned long long)rows, cfg->dim,
		    emdb_optimizer_name(cfg->optimizer.kind), harness_now() - t0,
		    (double)rows / (harness_now() - t0) / 1e6,
		    (double)info.stats.bytes_vectors / 1e9,
		    (double)info.stats.bytes_optimizer / 1e9,
		    (double)info.stats.bytes_index / 1e9);
	*table = c.table;
}

emdb_db *preload_db_open(void)
{
	emdb_db *db;
	int rc = emdb_db_open(NULL, &db);
	if (rc != EMDB_OK)
		preload_die_engine("emdb_db_open", rc);
	return db;
}

void preload_describe(emdb_db *db, uint32_t table, emdb_table_info *out)
{
	int rc = emdb_table_describe(db, table, out);
	if (rc != EMDB_OK)
		preload_die_engine("emdb_table_describe", rc);
}

typedef struct ticket_job {
	emdb_db *db;
	uint32_t table;         /* every thread's, unless tables  */
	const uint32_t *tables; /* [p->threads] or NULL            */
	const pool *p;
	emdb_ticket **tk;
} ticket_job;

static void ticket_part(void *arg, unsigned t)
{
	ticket_job *j = arg;
	uint32_t table = j->tables ? j->tables[t] : j->table;

	for (size_t b = 0; b < j->p->batches; b++) {
		int rc = emdb_prefetch(j->db, table, pool_ids(j->p, t, b),
				       j->p->batch, &j->tk[t * j->p->batches + b]);
		if (rc != EMDB_OK)
			preload_die_engine("emdb_prefetch (tickets)", rc);
	}
}

static emdb_ticket **tickets_run(ticket_job *j)
{
	j->tk = calloc(j->p->threads * j->p->batches, sizeof(emdb_ticket *));
	if (!j->tk)
		harness_die("out of memory");
	harness_parallel(j->p->threads, ticket_part, j);
	return j->tk;
}

emdb_ticket **preload_tickets(emdb_db *db, uint32_t table, const pool *p)
{
	ticket_job j = { .db = db, .table = table, .p = p };

	return tickets_run(&j);
}

emdb_ticket **preload_tickets_each(emdb_db *db, const uint32_t *tables, const pool *p)
{
	ticket_job j = { .db = db, .tables = tables, .p = p };

	return tickets_run(&j);
}

void preload_tickets_free(emdb_ticket **tk, const pool *p)
{
	for (size_t i = 0; i < p->threads * p->batches; i++)
		emdb_ticket_free(tk[i]);
	free(tk);
}
