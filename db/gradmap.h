/*
 * gradmap.h - gradient accumulators of one index shard of one table.
 *
 * Push adds a row's gradient into its accumulator slot, found through a
 * small open-addressing map keyed by row location; Update walks the slots
 * in order, applies the optimizer and empties the map.  Duplicates of a
 * row, within one push or across pushes, land in the same slot and are
 * summed there, so Update touches each pushed row once however skewed the
 * batch.  Memory is proportional to the rows pushed since the last Update,
 * never to the table.
 *
 * Two-phase like the index: gradmap_reserve makes room (may fail), then
 * gradmap_add cannot fail.  The owner serializes all calls (the shard's
 * gradient mutex, or the table's update lock held for writing).
 */
#ifndef EMDB_GRADMAP_H
#define EMDB_GRADMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/loc.h"
#include "index/hash.h"

typedef struct gradmap_key {
	uint64_t loc;  /* LOC_NONE when empty */
	uint64_t slot;
} gradmap_key;

typedef struct gradmap {
	uint32_t dim;
	uint32_t count;      /* slots in use                  */
	uint32_t reserved;   /* slots promised to pushes; written with release
			      * stores, so a reader that acquires it as 0
			      * sees every add that came before */
	uint32_t held;       /* room kept for a later fold of the workers'
			      * accumulators (gradmap_keep), not waited for */
	uint32_t slot_cap;   /* slots allocated               */
	uint32_t map_cap;    /* keys allocated, power of two  */
	gradmap_key *keys;   /* [map_cap]                     */
	uint64_t *locs;      /* [slot_cap] row of each slot   */
	float *grads;        /* [slot_cap * dim]              */
} gradmap;

void gradmap_init(gradmap *g, uint32_t dim);
void gradmap_destroy(gradmap *g);

/* Room for n more distinct rows.  Errors: NOMEM, LIMIT (over 2^31 slots). */
int gradmap_reserve(gradmap *g, uint32_t n);
void gradmap_unreserve(gradmap *g, uint32_t n);
/* Turn n reserved slots into held room: the room stays until
 * gradmap_clear (gradmap_add may use it), but the reservation that an
 * Update waits on goes, as gradmap_unreserve's does. */
void gradmap_keep(gradmap *g, uint32_t n);
/* Bytes gradmap_reserve(g, n) would add to those in use (0 when it needs
 * no growth): for a check against the memory limit first. */
uint64_t gradmap_reserve_bytes(const gradmap *g, uint32_t n);

/* accumulator(loc) += scale * grad[0..dim).  Needs a reservation. */
void gradmap_add(gradmap *g, uint64_t loc, const float *grad, float scale);

/* Whether loc holds an accumulator (inline: callers ask it of every row,
 * and the map is most often empty). */
static inline bool gradmap_has(const gradmap *g, uint64_t loc)
{
	if (!g->count)
		return false;
	uint32_t mask = g->map_cap - 1;
	for (uint32_t i = (uint32_t)dit_hash(loc) & mask;; i = (i + 1) & mask) {
		if (g->keys[i].loc == loc)
			return true;
		if (g->keys[i].loc == LOC_NONE)
			return false;
	}
}

/* Hints for a coming gradmap_add(g, loc), for a caller that walks a batch
 * and prefetches ahead: first the key's home slot, then, some adds later
 * (that slot cached by then), the accumulator loc already has, if any. */
static inline void gradmap_prefetch_key(const gradmap *g, uint64_t loc)
{
	__builtin_prefetch(&g->keys[dit_hash(loc) & (g->map_cap - 1)], 0, 3);
}
void gradmap_prefetch_acc(const gradmap *g, uint64_t loc);

/* Forget every accumulator and held room; keeps (or trims) the memory for
 * the next step. */
void gradmap_clear(gradmap *g);

size_t gradmap_bytes(const gradmap *g);

#endif
