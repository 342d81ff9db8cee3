/*
 * chunk.h - the rows of one table, in fixed-size chunks (slabs) allocated
 * on demand from huge-page-backed memory (emdb_map).
 *
 * A row is `stride` bytes: dim float32 values, then the optimizer state,
 * padded to 16 bytes.  Rows are numbered in allocation order; row r lives in
 * chunk r / rows_per_chunk at offset r % rows_per_chunk, and its location
 * (base/loc.h) says so.  Rows never move.
 *
 * Allocation is two-phase like the index: chunk_reserve makes sure chunks
 * exist for n more rows (the only step that can fail), then chunk_new_row
 * hands out rows without failing; chunk_unreserve gives back what was not
 * used.  Readers resolve locations without locks (chunk pointers are
 * published with release stores and never change afterwards).
 */
#ifndef EMDB_CHUNK_H
#define EMDB_CHUNK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "base/loc.h"

#define CHUNK_DIR_BITS 12 /* two-level directory: 4096 x 4096 chunks */
#define CHUNK_MARKS 2      /* bitmaps of one bit per row beside each chunk */

typedef struct chunk_store {
	uint32_t stride;         /* bytes per row, multiple of 16    */
	uint32_t rows_per_chunk;
	size_t chunk_bytes;      /* bytes mapped per chunk           */
	uint8_t **dir[1u << CHUNK_DIR_BITS]; /* dir[c >> 12][c & 4095] */
	uint64_t **mdir[1u << CHUNK_DIR_BITS]; /* marks of chunk c, same shape:
						  CHUNK_MARKS bitmaps of mark_words,
						  then the rows' IDs (chunk_set_id) */
	uint32_t mark_words;     /* u64 words per bitmap             */
	pthread_mutex_t mu;      /* guards chunk creation and reservations */
	uint64_t next_row;       /* atomic: rows handed out          */
	uint64_t reserved;       /* rows promised to callers (under mu;
				    atomic stores, read without mu) */
	uint64_t n_chunks;       /* chunks mapped (atomic read)      */
} chunk_store;

/* stride_bytes: bytes per row (rounded up to 16); chunk_bytes: target size
 * of one chunk.  Errors: INVALID. */
int chunk_store_init(chunk_store *cs, size_t stride_bytes, size_t chunk_bytes);
void chunk_store_destroy(chunk_store *cs);

/* Ensure chunks exist for n more rows beyond those handed out or reserved.
 * Errors: NOMEM, LIMIT (too many chunks); nothing is reserved or mapped
 * then. */
int chunk_reserve(chunk_store *cs, uint64_t n);
void chunk_unreserve(chunk_store *cs, uint64_t n);

/* Map chunks for `rows` rows in all and have the memory of every chunk
 * with rows not yet handed out backed now (emdb_map_populate), so that
 * rows up to that count cost no page fault (emdb_table_reserve).  Safe
 * beside every other call.  Errors: LIMIT (more rows than LOC_MAX_CHUNKS
 * chunks hold), NOMEM; nothing is mapped then. */
int chunk_prepare(chunk_store *cs, uint64_t rows);

/* Bytes that mapping chunks for `rows` rows in all would add to those in
 * use now (0 when they are mapped): for a check against the memory limit
 * before any is mapped.  Read without mu, so an estimate while others
 * grow the store. */
uint64_t chunk_grow_bytes(const chunk_store *cs, uint64_t rows);
/* The same for chunk_reserve(cs, n). */
uint64_t chunk_reserve_bytes(const chunk_store *cs, uint64_t n);

/* A reserved row's location (node 0, host tier); the caller fills it. */
uint64_t chunk_new_row(chunk_store *cs);

/* Address of the row at a host-tier location handed out by this store. */
static inline uint8_t *chunk_row(const chunk_store *cs, uint64_t loc)
{
	uint32_t c = loc_chunk(loc);
	uint8_t **leaf = __atomic_load_n(&cs->dir[c >> CHUNK_DIR_BITS], __ATOMIC_ACQUIRE);
	uint8_t *base = __atomic_load_n(&leaf[c & ((1u << CHUNK_DIR_BITS) - 1)], __ATOMIC_ACQUIRE);
	return base + (size_t)loc_offset(loc) * cs->stride;
}

/* Row marks: CHUNK_MARKS bitmaps with one bit per row, allocated with
 * each chunk and zero at birth (the checkpoint's dirty generations use
 * them, db/ckpt_track.h).  Setting is atomic, so threads may mark rows
 * sharing a word; the location must be one handed out by this store. */
static inline uint64_t *chunk_mark_word(const chunk_store *cs, uint64_t loc, uint32_t which)
{
	uint32_t c = loc_chunk(loc);
	uint64_t **leaf = __atomic_load_n(&cs->mdir[c >> CHUNK_DIR_BITS], __ATOMIC_ACQUIRE);
	uint64_t *m = __atomic_load_n(&leaf[c & ((1u << CHUNK_DIR_BITS) - 1)], __ATOMIC_ACQUIRE);
	return m + (size_t)which * cs->mark_words + (loc_offset(loc) >> 6);
}

static inline void chunk_mark_set(const chunk_store *cs, uint64_t loc, uint32_t which)
{
	uint64_t bit = 1ull << (loc_offset(loc) & 63);
	uint64_t *w = chunk_mark_word(cs, loc, which);
	if (!(__atomic_load_n(w, __ATOMIC_RELAXED) & bit))
		__atomic_fetch_or(w, bit, __ATOMIC_RELAXED);
}

static inline int chunk_mark_test(const chunk_store *cs, uint64_t loc, uint32_t which)
{
	return (int)((__atomic_load_n(chunk_mark_word(cs, loc, which), __ATOMIC_RELAXED) >>
		      (loc_offset(loc) & 63)) & 1);
}

/* The marks bitmap `which` of chunk c (mark_words words). */
static inline uint64_t *chunk_marks(const chunk_store *cs, uint32_t c, uint32_t which)
{
	uint64_t **leaf = __atomic_load_n(&cs->mdir[c >> CHUNK_DIR_BITS], __ATOMIC_ACQUIRE);
	return __atomic_load_n(&leaf[c & ((1u << CHUNK_DIR_BITS) - 1)], __ATOMIC_ACQUIRE) +
	       (size_t)which * cs->mark_words;
}

/* The ID a row was handed out for, kept beside the chunk's marks, one
 * u64 per row: what lets a scan name the rows it walks in row order
 * (emdb_table_scan).  Set by the caller of chunk_new_row before it
 * publishes the row; read without a lock (atomic), so a reader must check
 * the index still maps the ID to the row before trusting it (a row not
 * yet published reads 0 or a stale value). */
static inline uint64_t *chunk_id_word(const chunk_store *cs, uint64_t loc)
{
	uint32_t c = loc_chunk(loc);
	uint64_t **leaf = __atomic_load_n(&cs->mdir[c >> CHUNK_DIR_BITS], __ATOMIC_ACQUIRE);
	uint64_t *m = __atomic_load_n(&leaf[c & ((1u << CHUNK_DIR_BITS) - 1)], __ATOMIC_ACQUIRE);
	return m + (size_t)CHUNK_MARKS * cs->mark_words + loc_offset(loc);
}

static inline void chunk_set_id(const chunk_store *cs, uint64_t loc, uint64_t id)
{
	__atomic_store_n(chunk_id_word(cs, loc), id, __ATOMIC_RELAXED);
}

static inline uint64_t chunk_row_id(const chunk_store *cs, uint64_t loc)
{
	return __atomic_load_n(chunk_id_word(cs, loc), __ATOMIC_RELAXED);
}

/* u64 words beside each chunk: its marks and its rows' IDs. */
static inline size_t chunk_meta_words(const chunk_store *cs)
{
	return (size_t)CHUNK_MARKS * cs->mark_words + cs->rows_per_chunk;
}

/* Row number r (allocation order) <-> location. */
static inline uint64_t chunk_row_number(const chunk_store *cs, uint64_t loc)
{
	return (uint64_t)loc_chunk(loc) * cs->rows_per_chunk + loc_offset(loc);
}

static inline uint64_t chunk_loc_of(const chunk_store *cs, uint64_t r)
{
	return loc_pack(0, LOC_TIER_HOST, (uint32_t)(r / cs->rows_per_chunk),
			(uint32_t)(r % cs->rows_per_chunk));
}

/* Chunks mapped so far. */
uint64_t chunk_count(const chunk_store *cs);

/* Rows handed out so far, and bytes mapped for chunks and directories. */
uint64_t chunk_rows(const chunk_store *cs);
uint64_t chunk_bytes_mapped(const chunk_store *cs);

#endif
