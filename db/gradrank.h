/*
 * gradrank.h - the gradient accumulators of one index shard, one
 * generation, kept apart per worker rank (emdb_push_as): what makes the
 * sum of several workers' gradients of one row independent of the order
 * in which their pushes arrive.
 *
 * A push that names its worker adds into that worker's own gradmap, in
 * its request order; the Update folds the workers' maps into the shard's
 * shared map in rank order (gradrank_fold) before it applies the shard.
 * So a row's gradient is
 *     ((shared) + worker r0's sum) + worker r1's sum ...   r0 < r1 < ...
 * over the workers that pushed it, whatever the arrival order.  The
 * shared map must hold room for the fold: a ranked push reserves it there
 * beside its worker's map (gradmap_keep keeps it once the adds are done).
 *
 * Entries are sorted by rank and made on a worker's first push to the
 * shard; an entry left unused between two folds that had work is
 * dropped, so memory follows the workers and rows pushed lately.
 * Serialized by the owner, as gradmap.
 */
#ifndef EMDB_GRADRANK_H
#define EMDB_GRADRANK_H

#include <stddef.h>
#include <stdint.h>

#include "db/gradmap.h"

typedef struct gradrank_entry {
	uint32_t rank;
	uint32_t used;   /* pushed to since the last fold */
	gradmap map;
} gradrank_entry;

typedef struct gradrank {
	uint32_t n, cap;
	gradrank_entry *e; /* [cap], e[0..n) sorted by rank */
} gradrank;

void gradrank_destroy(gradrank *g);

/* Room for n rows of worker `rank` in its map (made if absent, of dim
 * floats a row).  Entries move when others are made: find the map again
 * (gradrank_find) when adding.  Errors: NOMEM, LIMIT; then nothing
 * is reserved (an entry made for it stays, empty, until the next fold). */
int gradrank_reserve(gradrank *g, uint32_t dim, uint32_t rank, uint32_t n);
/* Worker rank's map, or NULL. */
gradmap *gradrank_find(gradrank *g, uint32_t rank);
/* Bytes gradrank_reserve(g, dim, rank, n) would add. */
uint64_t gradrank_reserve_bytes(const gradrank *g, uint32_t dim, uint32_t rank, uint32_t n);
/* Whether any worker's map holds or awaits a gradient. */
int gradrank_pending(const gradrank *g);

/* Add every worker's accumulators into `into`, workers in rank order and
 * each map in its slot order (= its first-push order), with scale 1, then
 * clear them.  `into` must hold room for them (gradmap_keep) and no map
 * may be reserved.  Cannot fail. */
void gradrank_fold(gradrank *g, gradmap *into);

size_t gradrank_bytes(const gradrank *g);
/* Rows held, summed over the workers (a row of two workers counts twice). */
uint64_t gradrank_rows(const gradrank *g);

#endif
