/*
 * workloads.h - the engine workloads of emdb-bench.  Each measures one
 * public operation of emdb/db.h on a preloaded table with the ID pools of
 * pool.h, and fills a report record (anchors are added by the caller).
 */
#ifndef EMDB_BENCH_WORKLOADS_H
#define EMDB_BENCH_WORKLOADS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <emdb/db.h>

#include "tools/bench/harness.h"
#include "tools/bench/pool.h"
#include "tools/bench/report.h"

/* What every workload measurement needs to know. */
typedef struct wl_env {
	emdb_db *db;
	uint32_t table;
	uint32_t dim;
	uint64_t rows;     /* preloaded: the IDs of ranks 1..rows */
	double seconds;
	uint32_t bags;     /* wl_pull: sum-pool each batch into this many bags; 0 plain */
} wl_env;

/* Pull through tickets resolved beforehand (emdb_pull_ticket), p's batches
 * on `threads` threads; with e->bags, pooled (emdb_pull_bags_ticket, SUM,
 * bags of equal size but for rounding), recorded as pull_bags.  p must
 * hold no new-ID markers. */
void wl_pull(const wl_env *e, const pool *p, unsigned threads, report_record *rec);

/* Lookup (emdb_lookup) of p's batches. */
void wl_lookup(const wl_env *e, const pool *p, unsigned threads, report_record *rec);

/* Prefetch state that outlives one measurement: the new-ID counters, so
 * that a second measurement on the same table still sends unseen IDs. */
typedef struct wl_prefetch_state {
	uint64_t fresh_next[HARNESS_MAX_THREADS];
} wl_prefetch_state;

/* Prefetch (find-or-insert) of p's batches, new-ID markers replaced by
 * unseen IDs (pool_fresh_batch); tickets are freed at once.  Records the
 * fraction of IDs actually inserted. */
void wl_prefetch(const wl_env *e, const pool *p, unsigned threads,
		 wl_prefetch_state *st, report_record *rec);

/* Push+Update: emdb_push_ticket of p's batches with fixed gradients, each
 * followed by emdb_update, on `threads` threads; with fused, each step is
 * one emdb_push_update_ticket instead (record "push_update"). */
void wl_push_update(const wl_env *e, const pool *p, unsigned threads, bool fused,
		    report_record *rec);

/* The same with thread t pushing to and updating tables[t] (each
 * preloaded like e->table): what the steps give when the threads share no
 * table, the anchor "a table per thread" (fused: of push_update).  out
 * counts IDs. */
void wl_push_update_private(const wl_env *e, const uint32_t *tables, const pool *p,
			    unsigned threads, bool fused, harness_result *out);

/* Gradients for batches of `batch` IDs: batch * dim floats uniform in
 * [-0.01, 0.01], a fixed sequence per t (small, so that weights and state
 * stay in normal float range over millions of updates).  free() them. */
float *wl_grads_new(size_t batch, uint32_t dim, unsigned t);

/* The bare optimizer loop over the same batches: the rows of p's ranks,
 * placed in a region of `rows` rows laid out as the engine lays them out,
 * resolved to pointers beforehand, updated one ID at a time with that ID's
 * gradient by db/optim_math.h.  out counts IDs. */
void wl_bare_update(const emdb_optimizer *opt, uint32_t dim, uint64_t rows,
		    const pool *p, unsigned threads, double seconds,
		    harness_result *out);

#endif
