/*
 * emdb/alloc.h - the emdb_malloc family: every byte emdb allocates.
 *
 * All of emdb allocates through these functions, so that one place counts
 * the bytes in use, enforces a memory limit and can be made to fail on
 * purpose in tests.  Small blocks come from the C library with a 16-byte
 * header that remembers their size; large regions (chunks of rows, index
 * shards) come from emdb_map(), which asks the kernel for transparent huge
 * pages.
 *
 * Thread safety: every function may be called from any thread at any time.
 * The counters are process-wide.
 */
#ifndef EMDB_ALLOC_H
#define EMDB_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Like malloc/calloc/realloc/free.  Return NULL on failure (real, over the
 * limit, or injected) and then set emdb_last_error().  emdb_malloc(0) returns
 * a unique non-NULL pointer.  emdb_free(NULL) does nothing.  A block from
 * emdb_malloc must be freed with emdb_free, never with free(). */
void *emdb_malloc(size_t size);
void *emdb_calloc(size_t n, size_t size);
void *emdb_realloc(void *p, size_t size);
void emdb_free(void *p);

/* Duplicate a NUL-terminated string with emdb_malloc; free with emdb_free. */
char *emdb_strdup(const char *s);

/* A zero-filled region of at least `size` bytes, aligned to 2 MiB when size
 * is at least 2 MiB, backed by transparent huge pages where the kernel
 * allows.  Release with emdb_unmap(p, size) using the same size.  Counted
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

/* Bytes currently allocated through this family (headers excluded). */
size_t emdb_alloc_bytes(void);
/* Largest value emdb_alloc_bytes() has reached since start. */
size_t emdb_alloc_peak(void);

/* Cap the bytes in use: an allocation that would exceed `bytes` fails.
 * 0 removes the cap (the default). */
void emdb_alloc_set_limit(size_t bytes);
size_t emdb_alloc_limit(void);

/* Failure injection, for tests: after `n` more successful allocations every
 * allocation fails until emdb_alloc_fail_reset().  n = 0 fails the very next
 * one.  Frees keep working. */
void emdb_alloc_fail_after(uint64_t n);
void emdb_alloc_fail_reset(void);
/* Allocations refused by injection since start. */
uint64_t emdb_alloc_injected_failures(void);

#ifdef __cplusplus
}
#endif
#endif
