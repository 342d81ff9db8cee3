/*
 * baseline.h - the global-lock baseline of HypeReca's Figure 15: one hash
 * table under one read-write lock, IDs resolved one at a time, new rows
 * allocated and initialized like the engine's.  The Prefetch workload is
 * reported as a multiple of it.
 */
#ifndef EMDB_BENCH_BASELINE_H
#define EMDB_BENCH_BASELINE_H

#include <stdint.h>

#include <emdb/db.h>

#include "tools/bench/harness.h"
#include "tools/bench/pool.h"

typedef struct baseline baseline;

/* An index of one shard holding the IDs of ranks 1..rows, with room for
 * `headroom` more so that no resize falls inside a measurement, and an
 * empty row store for rows of cfg's dim and optimizer.  Exits on error. */
baseline *baseline_create(const emdb_table_config *cfg, uint32_t table_id,
			  uint64_t rows, uint64_t headroom);

/* Run the ID stream of p (new-ID markers replaced as the Prefetch workload
 * replaces them, from the same starting counters) on `threads` threads.
 * *new_frac gets the fraction of IDs that were inserted. */
void baseline_measure(baseline *b, const pool *p, unsigned threads,
		      double seconds, harness_result *out, double *new_frac);

void baseline_destroy(baseline *b);

#endif
