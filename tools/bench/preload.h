/*
 * preload.h - the engine tables emdb-bench measures: created with a fixed
 * schema and filled with the IDs of ranks 1..rows before any timing.
 */
#ifndef EMDB_BENCH_PRELOAD_H
#define EMDB_BENCH_PRELOAD_H

#include <stdint.h>

#include <emdb/db.h>

#include "tools/bench/pool.h"

/* Every bench table, and the global-lock baseline, start rows from the
 * same initializer, by default uniform in [-0.01, 0.01] (the magnitude
 * DLRM uses for large tables), so that a new row costs what it costs in
 * training; normal is mean 0, std 0.01. */
#define PRELOAD_INIT_SPREAD 0.01
#define PRELOAD_SEED 20250101u

/* The configuration of a bench table: name, dim, optimizer `kind` with
 * its defaults (emdb_optimizer_defaults), initializer `init` as above. */
void preload_config(emdb_table_config *cfg, const char *name, uint32_t dim,
		    emdb_opt_kind kind, emdb_init_kind init);

/* Create the table in db and insert the IDs of ranks 1..rows (keys_id) in
 * a scattered order with `threads` threads, by Prefetch batches; *table
 * gets its id.  Exits the process on any engine error.  Logs its rate. */
void preload_table(emdb_db *db, const emdb_table_config *cfg, uint64_t rows,
		   unsigned threads, uint32_t *table);

/* emdb_db_open with the defaults, exiting the process on error. */
emdb_db *preload_db_open(void);

/* emdb_table_describe, exiting the process on error. */
void preload_describe(emdb_db *db, uint32_t table, emdb_table_info *out);

/* Resolve every batch of p with emdb_prefetch, in parallel on p's
 * threads: tickets[t * p->batches + b] is batch b of thread t.  Untimed
 * set-up for the workloads that run on tickets.  Free with
 * preload_tickets_free. */
emdb_ticket **preload_tickets(emdb_db *db, uint32_t table, const pool *p);
/* The same with thread t's batches resolved in tables[t]. */
emdb_ticket **preload_tickets_each(emdb_db *db, const uint32_t *tables, const pool *p);
void preload_tickets_free(emdb_ticket **tk, const pool *p);

/* Print the engine's error for call `what` and exit. */
void preload_die_engine(const char *what, int rc) __attribute__((noreturn));

#endif
