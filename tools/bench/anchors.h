/*
 * anchors.h - the memory-system bounds emdb-bench divides the engine's
 * figures by.  Neither touches the engine: they run on regions of their own
 * (emdb_map, huge pages, touched before timing) sized like the engine's
 * structures.
 */
#ifndef EMDB_BENCH_ANCHORS_H
#define EMDB_BENCH_ANCHORS_H

#include <stddef.h>
#include <stdint.h>

#include "tools/bench/harness.h"
#include "tools/bench/pool.h"

/* Random-access bound: independent 8-byte loads at uniformly random
 * addresses of a region of `bytes`, the offsets precomputed, each load
 * prefetched 16 loads ahead.  out counts loads.  Measured at every thread
 * count in threads[0..n_threads). */
void anchor_random_access(size_t bytes, const unsigned *threads, int n_threads,
			  double seconds, harness_result *out);

/* Gather bound: rows of dim floats copied (memcpy) from a region of
 * region_rows rows into a batch buffer, the rows those of the ranks of p
 * (placed by a scattering permutation, as the engine's preload scatters
 * them), each row prefetched ahead.  out counts rows. */
void anchor_gather(uint64_t region_rows, uint32_t dim, const pool *p,
		   unsigned threads, double seconds, harness_result *out);

/* Fresh-memory bound: rows of `stride` bytes written one after another
 * (every float of the row, as an initializer does) into memory freshly
 * mapped with emdb_map and never touched, like the engine's new chunks:
 * what the first write of memory costs (page faults, page clearing, and
 * on a VM the host backing the page).  At each thread count in
 * threads[0..n_threads), each thread fills its own 256 MiB region per
 * repetition; 3 repetitions; all regions stay mapped until the end, so
 * that none is refilled from memory another one freed.  out[i] counts rows
 * (best and median of the 3). */
void anchor_fresh_rows(size_t stride, const unsigned *threads, int n_threads,
		       harness_result *out);

/* A region of `bytes` from emdb_map with every page written, in parallel
 * on `threads` threads; exits when out of memory.  emdb_unmap to free. */
void *anchor_region(size_t bytes, unsigned threads);

#endif
