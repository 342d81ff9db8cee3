/*
 * chunk.h - the rows of one table, in fixed-size chunks (slabs) allocated
 * on demand from huge-page-backed memory (emdb_map).
 *
 * A row is `stride` bytes: dim float32 values, then the optimizer state,
 * padded to 16 bytes.  Rows are numbered in allocation order; row r lives in
 * chunk r / rows_per_chunk at offset r % rows_per_chunk, and its location
 * (db/loc.h) says so.  Rows never move.
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

#include "db/loc.h"

#define CHUNK_DIR_BITS 12 /* two-level directory: 4096 x 4096 chunks */

typedef struct chunk_store {
	uint32_t stride;         /* bytes per row, multiple of 16    */
	uint32_t rows_per_chunk;
	size_t chunk_bytes;      /* bytes mapped per chunk           */
	uint8_t **dir[1u << CHUNK_DIR_BITS]; /* dir[c >> 12][c & 4095] */
	pthread_mutex_t mu;      /* guards chunk creation and reservations */
	uint64_t next_row;       /* atomic: rows handed out          */
	uint64_t reserved;       /* rows promised to callers (under mu) */
	uint64_t n_chunks;       /* chunks mapped (atomic read)      */
} chunk_store;

/* stride_bytes: bytes per row (rounded up to 16); chunk_bytes: target size
 * of one chunk.  Errors: INVALID. */
int chunk_store_init(chunk_store *cs, size_t stride_bytes, size_t chunk_bytes);
void chunk_store_destroy(chunk_store *cs);

/* Ensure chunks exist for n more rows beyond those handed out or reserved.
 * Errors: NOMEM, LIMIT (too many chunks); nothing is reserved then. */
int chunk_reserve(chunk_store *cs, uint64_t n);
void chunk_unreserve(chunk_store *cs, uint64_t n);

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

/* Rows handed out so far, and bytes mapped for chunks and directories. */
uint64_t chunk_rows(const chunk_store *cs);
uint64_t chunk_bytes_mapped(const chunk_store *cs);

#endif
