/*
 * emdb/alloc.h - the emdb_malloc family: every byte emdb allocates, its
 * limit, its statistics and where its large regions come from.
 *
 * All of emdb allocates through these functions, so that one place counts
 * the bytes in use, enforces a memory limit and can be made to fail on
 * purpose in tests.  Small blocks come from the C library with a 16-byte
 * header that remembers their size; large regions (chunks of rows, index
 * shards) come from the kernel, with transparent huge pages, or explicit
 * ones from the kernel's pool (emdb_alloc_set_huge_pages).  A user calls
 * emdb_free on what emdb hands over, and the limit, statistics and huge
 * page calls below; the regions themselves (base/alloc_int.h) and failure
 * injection (base/alloc_fault.h, tests only) are internal.
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

/* Where emdb's large regions of whole huge pages come from (row chunks,
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

/* Bytes currently allocated through this family (headers excluded). */
size_t emdb_alloc_bytes(void);
/* Largest value emdb_alloc_bytes() has reached since start. */
size_t emdb_alloc_peak(void);

/* Cap the bytes in use: an allocation that would exceed `bytes` fails.
 * 0 removes the cap (the default). */
void emdb_alloc_set_limit(size_t bytes);
size_t emdb_alloc_limit(void);

#ifdef __cplusplus
}
#endif
#endif
