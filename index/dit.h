/*
 * dit.h - the decentralized index table (DIT) of one table: uint64 ID ->
 * 64-bit row location (base/loc.h), split into S shards (HypeReca 4.1-4.2).
 *
 * Batches go through a plan: the IDs are hashed once and their positions
 * grouped by shard (dit_plan_build).  A batch then sweeps the shards in a
 * staggered order, locking each shard it touches exactly once, so that
 * concurrent batches follow one another around the shards instead of
 * meeting on the same lock.  Within a shard the probe of ID k+D is
 * prefetched while ID k is resolved.  A single ID is a batch of one.
 *
 * Inserting is two-phase so that a failed allocation changes nothing:
 * dit_reserve makes room in every shard the batch touches (growing shards
 * as needed, which is invisible to readers), and dit_find_or_insert can then
 * no longer fail.  Every dit_reserve that succeeds must be followed by
 * exactly one dit_find_or_insert or dit_unreserve with the same plan.
 *
 * Thread safety: all functions but dit_create/dit_destroy may be called
 * concurrently.  Writers (reserve, find_or_insert) take a shard's write
 * lock; dit_find takes read locks.
 */
#ifndef EMDB_DIT_H
#define EMDB_DIT_H

#include <stddef.h>
#include <stdint.h>

typedef struct dit dit;

/* A batch grouped by shard.  Arrays are owned by whoever built the plan. */
typedef struct dit_plan {
	size_t n;
	uint64_t *hash;  /* [n] hash of ids[i]                              */
	uint32_t *order; /* [n] batch positions, grouped by shard            */
	uint32_t *start; /* [shards+1] group of shard s: order[start[s]..start[s+1]) */
} dit_plan;

/* Called under the shard's write lock for each ID that is not yet held:
 * returns the location of a fresh row.  Must not fail: the caller reserved
 * rows before dit_find_or_insert. */
typedef uint64_t (*dit_new_row_fn)(void *ctx, uint64_t id);

/* Optional: fills the new row of `id` at `loc`.  Called, still under the
 * shard's write lock and so before any other batch can find the ID, after
 * the probes of a run of IDs: keeping the compute of initial values out of
 * the probe loop keeps that loop's prefetches flowing. */
typedef void (*dit_init_row_fn)(void *ctx, uint64_t id, uint64_t loc);

#define DIT_MAX_SHARDS 4096u

/* shards: power of two, 1..DIT_MAX_SHARDS.  Errors: INVALID, NOMEM. */
int dit_create(uint32_t shards, dit **out);
void dit_destroy(dit *d);
uint32_t dit_shards(const dit *d);

/* Hash ids[0..n) and group them by shard into plan, whose arrays the
 * caller provides: hash[n], order[n], start[shards+1]. */
void dit_plan_build(const dit *d, const uint64_t *ids, size_t n, dit_plan *plan);

/* Make room for every ID of the plan to be new.  Errors: NOMEM (then no
 * room stays reserved). */
int dit_reserve(dit *d, const dit_plan *plan);
void dit_unreserve(dit *d, const dit_plan *plan);

/* Grow every shard now so that about n IDs in all (spread by the hash)
 * fit without a resize: for a bulk load of known size (restore).  Errors:
 * NOMEM (shards grown so far stay grown, which is harmless). */
int dit_presize(dit *d, uint64_t n);

/* The most bytes in use that dit_reserve(plan) or dit_presize(n) would
 * add while it grows shards (0 when none needs to): for a check against
 * the memory limit before any is grown.  An estimate while others insert
 * or grow. */
uint64_t dit_reserve_bytes(dit *d, const dit_plan *plan);
uint64_t dit_presize_bytes(dit *d, uint64_t n);

/* locs[i] = location of ids[i], inserting absent IDs with new_row (then
 * init_row, when not NULL).  Releases the plan's reservation.  *inserted
 * (may be NULL) gets the number of new IDs. */
void dit_find_or_insert(dit *d, const uint64_t *ids, const dit_plan *plan,
			uint64_t *locs, dit_new_row_fn new_row,
			dit_init_row_fn init_row, void *ctx, size_t *inserted);

/* locs[i] = location of ids[i], or LOC_NONE when absent.  Never inserts.
 * Returns the number of IDs found. */
size_t dit_find(dit *d, const uint64_t *ids, const dit_plan *plan, uint64_t *locs);

/* Shard to visit first for the next batch: spreads concurrent batches
 * evenly over the ring of shards (bit-reversed batch counter). */
uint32_t dit_sweep_start(dit *d);

typedef struct dit_stats {
	uint64_t count;    /* IDs held                         */
	uint64_t slots;    /* slots allocated over all shards  */
	uint64_t bytes;    /* bytes of slots and shard headers */
	uint64_t resizes;  /* shard resizes so far             */
} dit_stats;

void dit_get_stats(dit *d, dit_stats *out);

/* Visit every (id, loc) pair, shard by shard, under each shard's read lock.
 * Stops early and returns fn's value when fn returns non-zero. */
typedef int (*dit_visit_fn)(void *ctx, uint64_t id, uint64_t loc);
int dit_foreach(dit *d, dit_visit_fn fn, void *ctx);

#endif
