/*
 * alloc_int.h - what the engine's own modules may ask of the allocator
 * beyond emdb/alloc.h: regions of whole pages for chunks and index
 * shards, and the limit checked ahead.  Internal to emdb (the engine,
 * checkpoints, emdb-bench).
 */
#ifndef EMDB_ALLOC_INT_H
#define EMDB_ALLOC_INT_H

#include <stddef.h>

#include <emdb/alloc.h>

/* The bytes emdb_map(size) counts against the limit (its rounding to
 * pages): what a caller adds up to check a growth before mapping any of
 * it. */
size_t emdb__map_bytes(size_t size);

/* EMDB_OK when `need` more bytes fit under the memory limit now (always,
 * without a limit); else NOMEM, with a message naming `what` (the
 * subject of "needs about N MB more", such as "table 'ads': room for 1000
 * rows"), the need, the limit and the bytes in use.  A check before allocating, so that a refused call
 * maps nothing: racing threads may still take the room meanwhile, which
 * the allocations themselves then refuse. */
int emdb__check_limit(size_t need, const char *what);

/* A zero-filled region of at least `size` bytes, aligned to 2 MiB when size
 * is at least 2 MiB.  Where rounding size up to whole 2 MiB huge pages adds
 * at most an eighth (a row chunk, an index array of 2^k bytes from 2 MiB
 * on) the region is that many huge pages, from where
 * emdb_alloc_set_huge_pages says; other regions are ordinary pages, with
 * transparent huge pages where the kernel allows.  Release with
 * emdb_unmap(p, size) using the same size.  Counted (the rounded size)
 * and failure-injected like emdb_malloc. */
void *emdb_map(size_t size);
void emdb_unmap(void *p, size_t size);

/* Have the kernel back [p, p+size) of a region from emdb_map with memory
 * now, as a first write would, without changing its bytes (so it is safe
 * while other threads write there).  Paying for fresh memory ahead of
 * use, off the paths that hold locks, is all it is for; it does nothing
 * where the kernel lacks MADV_POPULATE_WRITE (Linux < 5.14).  It holds the
 * process's mmap lock for reading while it works (a huge page at a time),
 * so other threads' mmap and munmap wait: meant for a chunk, not for tens
 * of megabytes that nobody else writes (plain writes do there). */
void emdb_map_populate(void *p, size_t size);

#endif
