/*
 * wl_ckpt.h - the measurements of emdb-bench --workload checkpoint, each on
 * a table the caller created and preloaded (ckpt_bench.c runs them in
 * order and prints the figures).  Every engine error ends the run.
 */
#ifndef EMDB_BENCH_WL_CKPT_H
#define EMDB_BENCH_WL_CKPT_H

#include <stdint.h>

#include <emdb/checkpoint.h>
#include <emdb/db.h>

#include "tools/bench/keys.h"
#include "tools/bench/pool.h"

/* One timed job: what emdb_job_run said, the job's progress after it, and
 * the wall time of emdb_job_run alone (job preparation excluded). */
typedef struct ckpt_run {
	emdb_ckpt_info info;
	emdb_progress prog;
	double t0, t1;      /* harness_now() around emdb_job_run */
	double seconds;     /* t1 - t0                           */
	double cpu_thread;  /* CPU seconds of the thread that ran it */
	double cpu_process; /* CPU seconds of the whole process meanwhile (user + system) */
} ckpt_run;


/* A checkpoint of db into st, timed. */
void wl_ckpt_take(emdb_db *db, emdb_store *st, emdb_ckpt_kind kind, ckpt_run *out);

/* A fresh emdb_db with checkpoint id of st restored into it, timed; the
 * caller closes it. */
emdb_db *wl_ckpt_restore(emdb_store *st, uint64_t id, ckpt_run *out);

/* The memory a restore of a table of cfg with `rows` rows needs, made
 * the fastest way the engine has (emdb_table_reserve in a fresh emdb_db:
 * the index presized, every chunk mapped and written on every core) and
 * timed: what a restore cannot do faster where the first write of memory
 * is the slow part.  It first waits idle_s seconds, so that memory the
 * process or another one freed just before is back with the host, as
 * cold as the memory of a restore at start-up. */
typedef struct ckpt_mem_run {
	double seconds;         /* emdb_table_reserve's wall time           */
	double cpu_process;     /* CPU seconds of the process meanwhile      */
} ckpt_mem_run;

void wl_ckpt_memory(const emdb_table_config *cfg, uint64_t rows, double idle_s,
		    ckpt_mem_run *out);

/* Change rows: push a gradient into the rows of ranks perm(first) + 1 ..
 * perm(first + count - 1) + 1 (perm NULL: ranks first + 1 .. first +
 * count), on `threads` threads, with an Update after every million rows,
 * so that every one of them is updated exactly once. */
void wl_ckpt_touch(emdb_db *db, uint32_t table, uint32_t dim, const keys_perm *perm,
		   uint64_t first, uint64_t count, unsigned threads);

/* Compare vectors and optimizer state of `samples` rows spread over ranks
 * 1..rows in a and b (same table id); exits the process on a difference. */
void wl_ckpt_verify(emdb_db *a, emdb_db *b, uint32_t table, uint64_t rows,
		    uint32_t samples);

/* ---- under load (wl_ckpt_live.c) ----------------------------------- */

typedef struct ckpt_pull_result {
	double alone_before, alone_after; /* IDs/s, `seconds` each          */
	double during;                    /* IDs/s while the checkpoint ran */
	double core_alone, core_during;   /* share of a core the puller got */
	ckpt_run ck;                      /* the full checkpoint            */
} ckpt_pull_result;

/* One thread pulls p's batches (emdb_pull by IDs) for `seconds`, then
 * while a FULL checkpoint of db runs on another thread, then for
 * `seconds` again. */
void wl_ckpt_pull(emdb_db *db, uint32_t table, uint32_t dim, emdb_store *st,
		  const pool *p, double seconds, ckpt_pull_result *out);

#define CKPT_PAUSE_CKPTS 2

typedef struct ckpt_pause_result {
	ckpt_run ck[CKPT_PAUSE_CKPTS];        /* FULL, then INCREMENTAL   */
	double max_update_s[CKPT_PAUSE_CKPTS]; /* longest Update overlapping it */
	double p99_update_s[CKPT_PAUSE_CKPTS];
	double max_push_s[CKPT_PAUSE_CKPTS];   /* longest Push overlapping it   */
	uint64_t steps[CKPT_PAUSE_CKPTS];      /* Updates overlapping it        */
	double base_max_update_s;              /* longest Update overlapping none */
	double base_p99_update_s;
	uint64_t base_steps;
} ckpt_pause_result;

/* One thread loops emdb_push of p's next batch then emdb_update; meanwhile
 * a FULL and then an INCREMENTAL checkpoint of db are taken, with quiet
 * gaps around them, and every step is timed. */
void wl_ckpt_pause(emdb_db *db, uint32_t table, uint32_t dim, emdb_store *st,
		   const pool *p, ckpt_pause_result *out);

#endif
