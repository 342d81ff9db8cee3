/*
 * ckpt_track.h - what a table keeps for checkpoints between and during
 * them: which rows changed since the last checkpoint (for INCREMENTAL),
 * and, while a checkpoint is being written, the copies of rows an Update
 * changed before the checkpoint got to them (copy on write).
 *
 * Dirty marks: two bitmaps per chunk (chunk_mark_*, generations 0 and 1).
 * Update marks each row it applies in generation `gen`, but only while the
 * table is tracked (ckpt_tracking): it has a checkpoint that a later
 * INCREMENTAL counts from, or one is being written whose success makes
 * one.  Before that, the next checkpoint is written whole and reads no
 * marks, so an Update skips them (a random access per row, about a tenth
 * of an SGD Update's time).  The switch of a
 * checkpoint flips `gen`: the old generation then holds exactly the rows
 * updated since the previous checkpoint, frozen, and the new one collects
 * the rows for the next.  Rows created since the previous checkpoint are
 * those numbered from base_rows on (rows are numbered in allocation order
 * and never move), so they need no mark.
 *
 * Copy on write: between the switch and the moment the checkpoint's
 * writer has passed a row (row number below the cursor of the segment
 * holding it: a table's rows may be cut into segments written one by one
 * or at once by two writers), an Update that is
 * about to change a row the checkpoint will write first keeps its bytes
 * (ckpt_cow_keep); the writer takes the kept copy instead of the live row.
 * Both sides hold the table's rows_lock (Update's pass for writing, the
 * writer for reading), so cursor, the kept copies and the marks the writer
 * reads are stable while either looks at them.  Update never fails because
 * of a checkpoint: when a copy cannot be allocated the checkpoint is marked
 * failed instead (its writer then stops with NOMEM).
 */
#ifndef EMDB_CKPT_TRACK_H
#define EMDB_CKPT_TRACK_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db/chunk.h"

#define COW_STRIPES 64
#define COW_SEGS_MAX 64

typedef struct cow_stripe {
	pthread_mutex_t mu;   /* Update's pass threads; the writer needs none */
	uint64_t *keys;       /* [cap] row number + 1; 0 = empty            */
	float **vals;         /* [cap] the kept copy                         */
	uint32_t cap, count;
	uint8_t *slab;        /* current slab: copies are carved from it    */
	size_t slab_used, slab_cap;
	void *slabs;          /* every slab, linked through its first word  */
} cow_stripe;

typedef struct ckpt_cow {
	uint64_t snap_rows;   /* rows numbered below this are in the checkpoint */
	uint64_t base_rows;   /* rows from here on are new since the parent:
				 0 for a table written whole                 */
	uint32_t nseg;        /* segments: rows bound[i] .. bound[i+1]-1     */
	uint64_t bound[COW_SEGS_MAX + 1];
	uint64_t cursor[COW_SEGS_MAX]; /* atomic: segment i's writer has passed
					  the rows below cursor[i]           */
	uint32_t old_gen;     /* the frozen dirty generation                   */
	size_t row_bytes;     /* vector + optimizer state                      */
	uint64_t *kept;       /* atomic: rows copied, summed over the job's
				 tables (its progress counter)               */
	int failed;           /* atomic: a copy could not be allocated         */
	cow_stripe st[COW_STRIPES];
} ckpt_cow;

typedef struct ckpt_track {
	uint64_t base_ckpt;   /* checkpoint the dirty marks count from; 0 none */
	uint64_t base_rows;   /* rows that existed at base_ckpt                */
	uint32_t gen;         /* generation Updates mark now; switch flips it  */
	ckpt_cow *cow;        /* the running checkpoint's, or NULL             */
} ckpt_track;

/* A store for rows of row_bytes, counting its copies into *kept; the
 * switch fills in the rest.  NULL on NOMEM. */
ckpt_cow *ckpt_cow_create(size_t row_bytes, uint64_t *kept);
void ckpt_cow_destroy(ckpt_cow *cow);

/* The cursor of the segment holding row r. */
static inline uint64_t ckpt_cow_cursor(const ckpt_cow *cow, uint64_t r)
{
	uint32_t lo = 0, hi = cow->nseg; /* bound[lo] <= r < bound[hi] */
	while (hi - lo > 1) {
		uint32_t mid = (lo + hi) / 2;
		if (r >= cow->bound[mid])
			lo = mid;
		else
			hi = mid;
	}
	return __atomic_load_n(&cow->cursor[lo], __ATOMIC_RELAXED);
}

/* Will the checkpoint write row r? */
static inline bool ckpt_cow_wants(const ckpt_cow *cow, const chunk_store *cs, uint64_t r, uint64_t loc)
{
	if (r >= cow->snap_rows)
		return false;
	if (r >= cow->base_rows)
		return true;
	return chunk_mark_test(cs, loc, cow->old_gen) != 0;
}

/* Called by Update's pass, before it changes the row at loc. */
void ckpt_cow_keep_slow(ckpt_cow *cow, const chunk_store *cs, uint64_t loc, const void *row);

/* Whether Updates must mark the rows they change.  Stable while the
 * table's rows_lock is held: the switch and the end of a checkpoint
 * change both fields holding it for writing. */
static inline bool ckpt_tracking(const ckpt_track *ck)
{
	return ck->base_ckpt != 0 || ck->cow != NULL;
}

/* Update's pass, before it changes the row at loc: the dirty mark (when
 * tracking) and the checkpoint's copy on write (when one runs). */
static inline void ckpt_touch(const chunk_store *cs, ckpt_cow *cow, bool tracking, uint32_t gen,
			      uint64_t loc, const void *row)
{
	if (tracking)
		chunk_mark_set(cs, loc, gen);
	if (cow)
		ckpt_cow_keep_slow(cow, cs, loc, row);
}

/* The kept copy of row r, or NULL.  Caller holds rows_lock (read). */
const void *ckpt_cow_find(const ckpt_cow *cow, uint64_t r);

#endif
