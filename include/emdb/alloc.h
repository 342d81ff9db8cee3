/*
 * emdb/alloc.h - the emdb_malloc family: every byte emdb allocates.
 *
 * All of emdb allocates through these functions, so that one place counts
 * the bytes in use, enforces a memory limit and can be made to fail on
 * purpose in tests.  Small blocks come from the C library with a 16-byte
 * header that remembers their size; large regions (chunks of rows, index
 * shards) come from emdb_map(), which asks the kernel for transparent huge
 * pages, or takes explicit ones from the kernel's pool
 * (emdb_alloc_set_huge_pages).
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
 * is at least 2 MiB.  Where rounding size up to whole 2 MiB huge pages adds
 * at most an eighth (a row chunk, an index array of 2^k bytes from 2 MiB
 * on) the region is that many huge pages, from where
 * emdb_alloc_set_huge_pages says; other regions are ordinary pages, with
 * transparent huge pages where the kernel allows.  Release with
 * emdb_unmap(p, size) using the same size.  Counted (the rounded size)
 * and failure-injected like emdb_malloc. */
void *emdb_map(size_t size);
void emdb_unmap(void *p, size_t size);

/* Where emdb_map takes its regions of whole huge pages from (row chunks,
 * index slot arrays):
 *   EMDB_HUGE_OFF  ordinary memory, transparent huge pages where the
 *                  kernel allows (the default);
 *   EMDB_HUGE_TRY  the kernel's pool of explicit huge pages (Linux
 *                  hugetlb: vm.nr_hugepages, HugePages_Free in
 *                  /proc/meminfo) while it has room, else as OFF;
 *   EMDB_HUGE_ON   the pool only: a region it cannot hold fails with
 *                  NOMEM, and the message says so.
 * Why: pool pages stay with the process's machine when freed.  On a
 * virtual machine whose host takes freed memory back and backs it again
 * only when the guest first writes it (a memory balloon with free page
 * reporting), ordinary memory filled for the first time in a while costs
 * 0.45-0.9 GB/s; pool pages, once used, are written at memory speed, also
 * by the next process that maps them (a restarted server restoring its
 * checkpoint).  The pool is the administrator's: reserve it before
 * (sysctl vm.nr_hugepages=N, 2 MiB each), and it stays taken from the
 * rest of the machine until released.  Pool pages are reserved when a
 * region is mapped, so a region that was mapped never faults for lack of
 * them.  The mode applies to mappings made after the call; regions keep
 * what they got. */
typedef enum emdb_huge_pages {
	EMDB_HUGE_OFF = 0,
	EMDB_HUGE_TRY = 1,
	EMDB_HUGE_ON = 2,
} emdb_huge_pages;

/* Errors: INVALID for a mode outside the enum (nothing changes). */
int emdb_alloc_set_huge_pages(emdb_huge_pages mode);
emdb_huge_pages emdb_alloc_huge_pages(void);
/* "off", "try", "on"; NULL for a value outside the enum. */
const char *emdb_huge_pages_name(emdb_huge_pages mode);
/* The mode named by s ("off", "try", "on", any case) into *out.
 * Errors: INVALID (another word, NULL), *out unchanged. */
int emdb_huge_pages_parse(const char *s, emdb_huge_pages *out);
/* The kernel's pool, in 2 MiB pages, from /proc/meminfo: pages a new
 * region can still have (HugePages_Free less HugePages_Rsvd: the kernel
 * promises pages at mmap and takes them at first write), and its size
 * (HugePages_Total); -1 where it cannot be read. */
long emdb_alloc_pool_free(void);
long emdb_alloc_pool_total(void);
/* Regions emdb_map took from the pool since start, and regions TRY had to
 * take from ordinary memory because the pool had no room. */
uint64_t emdb_alloc_huge_maps(void);
uint64_t emdb_alloc_huge_fallbacks(void);

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
