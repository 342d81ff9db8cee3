/*
 * alloc.c - the emdb_malloc family: counting, limiting and failure
 * injection in front of the C library and mmap.
 *
 * Invariants:
 *   1. in_use equals the sum of the sizes of all live blocks and mappings;
 *      a block's size is kept in a 16-byte header in front of it (16 keeps
 *      the user pointer aligned like malloc's).
 *   2. An allocation first claims its bytes in in_use and gives them back
 *      if it fails, so a limit is never exceeded, even by racing threads.
 *   3. Injected failures and limit refusals happen before any memory is
 *      obtained, so a refused call has no effect at all.
 *   4. A region's length depends on its size alone (map_size), never on
 *      where it came from, so emdb_unmap needs no record of whether the
 *      huge page pool or ordinary memory holds it.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>

#include <emdb/alloc.h>

#include "base/alloc_fault.h"
#include "base/alloc_int.h"
#include "base/error_int.h"
#include "base/meminfo.h"

#define HDR 16u
#define HUGE_PAGE ((size_t)2 << 20)
#define PAGE ((size_t)4096)

static _Atomic size_t in_use;
static _Atomic size_t peak;
static _Atomic size_t limit;
static atomic_bool fail_armed;
static _Atomic int64_t fail_budget;
static _Atomic uint64_t injected;
static atomic_int huge_mode;               /* emdb_huge_pages */
static _Atomic uint64_t huge_maps, huge_fallbacks;

static bool claim(size_t size)
{
	if (atomic_load_explicit(&fail_armed, memory_order_relaxed) &&
	    atomic_fetch_sub(&fail_budget, 1) <= 0) {
		atomic_fetch_add(&injected, 1);
		emdb__seterr(EMDB_ERR_NOMEM, "allocation of %zu bytes refused (injected failure)", size);
		return false;
	}
	size_t now = atomic_fetch_add(&in_use, size) + size;
	size_t lim = atomic_load_explicit(&limit, memory_order_relaxed);
	if ((lim && now > lim) || now < size) {
		atomic_fetch_sub(&in_use, size);
		emdb__seterr(EMDB_ERR_NOMEM, "allocation of %zu bytes would exceed the memory limit of %zu bytes",
			     size, lim);
		return false;
	}
	size_t p = atomic_load_explicit(&peak, memory_order_relaxed);
	while (now > p && !atomic_compare_exchange_weak(&peak, &p, now))
		;
	return true;
}

static void unclaim(size_t size)
{
	atomic_fetch_sub(&in_use, size);
}

void *emdb_malloc(size_t size)
{
	if (size > SIZE_MAX - HDR) {
		emdb__seterr(EMDB_ERR_NOMEM, "allocation of %zu bytes is too large", size);
		return NULL;
	}
	if (!claim(size))
		return NULL;
	unsigned char *p = malloc(size + HDR);
	if (!p) {
		unclaim(size);
		emdb__seterr(EMDB_ERR_NOMEM, "malloc of %zu bytes failed", size);
		return NULL;
	}
	memcpy(p, &size, sizeof(size));
	return p + HDR;
}

void *emdb_calloc(size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size) {
		emdb__seterr(EMDB_ERR_NOMEM, "calloc of %zu x %zu bytes overflows", n, size);
		return NULL;
	}
	void *p = emdb_malloc(n * size);
	if (p)
		memset(p, 0, n * size);
	return p;
}

static size_t block_size(const void *p)
{
	size_t s;
	memcpy(&s, (const unsigned char *)p - HDR, sizeof(s));
	return s;
}

void *emdb_realloc(void *p, size_t size)
{
	if (!p)
		return emdb_malloc(size);
	size_t old = block_size(p);
	if (size > SIZE_MAX - HDR) {
		emdb__seterr(EMDB_ERR_NOMEM, "allocation of %zu bytes is too large", size);
		return NULL;
	}
	if (size > old && !claim(size - old))
		return NULL;
	unsigned char *q = realloc((unsigned char *)p - HDR, size + HDR);
	if (!q) {
		if (size > old)
			unclaim(size - old);
		emdb__seterr(EMDB_ERR_NOMEM, "realloc to %zu bytes failed", size);
		return NULL;
	}
	if (size < old)
		unclaim(old - size);
	memcpy(q, &size, sizeof(size));
	return q + HDR;
}

void emdb_free(void *p)
{
	if (!p)
		return;
	unclaim(block_size(p));
	free((unsigned char *)p - HDR);
}

char *emdb_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = emdb_malloc(n);
	if (d)
		memcpy(d, s, n);
	return d;
}

/* What a region of `size` bytes takes: whole 2 MiB pages where that adds
 * at most an eighth (a row chunk just under 2 MiB, an index array of
 * 2^k bytes), so that the same size unmaps a pool region and an ordinary
 * one alike with no record of which it got; 4 KiB pages otherwise, and
 * then never from the pool. */
static size_t map_size(size_t size)
{
	size_t huge = (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
	if (huge >= size && huge - size <= size / 8)
		return huge;
	return (size + PAGE - 1) & ~(PAGE - 1);
}

size_t emdb__map_bytes(size_t size)
{
	return map_size(size ? size : 1);
}

int emdb__check_limit(size_t need, const char *what)
{
	size_t lim = atomic_load_explicit(&limit, memory_order_relaxed);
	size_t used = atomic_load(&in_use);
	if (!lim || (used <= lim && need <= lim - used))
		return EMDB_OK;
	return emdb__seterr(EMDB_ERR_NOMEM,
			    "%s needs about %.1f MB more, over the memory limit (%.1f MB, %.1f MB in use); nothing "
			    "was allocated",
			    what, (double)need / 1e6, (double)lim / 1e6, (double)used / 1e6);
}

int emdb_alloc_set_huge_pages(emdb_huge_pages mode)
{
	if (!emdb_huge_pages_name(mode))
		return emdb__seterr(EMDB_ERR_INVALID, "huge pages: mode %d is not off, try or on", (int)mode);
	atomic_store(&huge_mode, (int)mode);
	return EMDB_OK;
}

emdb_huge_pages emdb_alloc_huge_pages(void)
{
	return (emdb_huge_pages)atomic_load(&huge_mode);
}

const char *emdb_huge_pages_name(emdb_huge_pages mode)
{
	switch (mode) {
	case EMDB_HUGE_OFF:
		return "off";
	case EMDB_HUGE_TRY:
		return "try";
	case EMDB_HUGE_ON:
		return "on";
	}
	return NULL;
}

int emdb_huge_pages_parse(const char *s, emdb_huge_pages *out)
{
	for (int m = EMDB_HUGE_OFF; s && m <= EMDB_HUGE_ON; m++)
		if (!strcasecmp(s, emdb_huge_pages_name((emdb_huge_pages)m))) {
			*out = (emdb_huge_pages)m;
			return EMDB_OK;
		}
	return emdb__seterr(EMDB_ERR_INVALID, "huge pages: '%s' is not off, try or on", s ? s : "(null)");
}

long emdb_alloc_pool_free(void)
{
	static const char *const keys[] = { "HugePages_Free", "HugePages_Rsvd" };
	long v[2];
	meminfo_read(keys, v, 2);
	return v[0] < 0 || v[1] < 0 ? -1 : v[0] - v[1];
}

long emdb_alloc_pool_total(void)
{
	static const char *const keys[] = { "HugePages_Total" };
	long v;
	meminfo_read(keys, &v, 1);
	return v;
}

uint64_t emdb_alloc_huge_maps(void)
{
	return atomic_load(&huge_maps);
}

uint64_t emdb_alloc_huge_fallbacks(void)
{
	return atomic_load(&huge_fallbacks);
}

/* A region of len (a multiple of HUGE_PAGE) from the pool, or NULL: for
 * EMDB_HUGE_ON with the error set, for TRY counted as a fallback. */
static void *map_pool(size_t len, int mode)
{
	/* No MAP_NORESERVE: the pages are reserved now, so a later first
	 * write cannot find the pool empty (it would be SIGBUS). */
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (p != MAP_FAILED) {
		atomic_fetch_add(&huge_maps, 1);
		return p;
	}
	if (mode == EMDB_HUGE_ON)
		emdb__seterr(EMDB_ERR_NOMEM,
			     "huge pages on: the kernel's huge page pool has no room for %zu bytes (%s; "
			     "see HugePages_Free in /proc/meminfo, sysctl vm.nr_hugepages)",
			     len, strerror(errno));
	else
		atomic_fetch_add(&huge_fallbacks, 1);
	return NULL;
}

void *emdb_map(size_t size)
{
	size_t len = map_size(size ? size : 1);
	if (len < size || !claim(len))
		return NULL;
	int mode = atomic_load_explicit(&huge_mode, memory_order_relaxed);
	if (mode != EMDB_HUGE_OFF && len % HUGE_PAGE == 0) {
		void *p = map_pool(len, mode);
		if (p || mode == EMDB_HUGE_ON) {
			if (!p)
				unclaim(len);
			return p;
		}
	}
	/* Over-map by one huge page so the region can start on a 2 MiB
	 * boundary: only aligned 2 MiB ranges can become huge pages. */
	size_t extra = len >= HUGE_PAGE ? HUGE_PAGE : 0;
	unsigned char *raw = mmap(NULL, len + extra, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (raw == MAP_FAILED) {
		unclaim(len);
		emdb__seterr(EMDB_ERR_NOMEM, "mmap of %zu bytes failed: %s", len + extra, strerror(errno));
		return NULL;
	}
	unsigned char *p = raw;
	if (extra) {
		p = (unsigned char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
		if (p > raw)
			munmap(raw, (size_t)(p - raw));
		size_t tail = (size_t)(raw + len + extra - (p + len));
		if (tail)
			munmap(p + len, tail);
		madvise(p, len, MADV_HUGEPAGE);
	}
	return p;
}

void emdb_map_populate(void *p, size_t size)
{
#ifdef MADV_POPULATE_WRITE
	/* A huge page at a time: the kernel holds the process's mmap lock
	 * for reading through each call, and an mmap or munmap elsewhere
	 * waits for it and then holds up every page fault behind it. */
	size_t len = p ? map_size(size) : 0;
	for (size_t off = 0; off < len; off += HUGE_PAGE)
		(void)madvise((char *)p + off, len - off < HUGE_PAGE ? len - off : HUGE_PAGE,
			      MADV_POPULATE_WRITE);
#else
	(void)p;
	(void)size;
#endif
}

void emdb_unmap(void *p, size_t size)
{
	if (!p)
		return;
	size_t len = map_size(size ? size : 1);
	munmap(p, len);
	unclaim(len);
}

size_t emdb_alloc_bytes(void)
{
	return atomic_load(&in_use);
}

size_t emdb_alloc_peak(void)
{
	return atomic_load(&peak);
}

void emdb_alloc_set_limit(size_t bytes)
{
	atomic_store(&limit, bytes);
}

size_t emdb_alloc_limit(void)
{
	return atomic_load(&limit);
}

void emdb_alloc_fail_after(uint64_t n)
{
	atomic_store(&fail_budget, (int64_t)n);
	atomic_store(&fail_armed, true);
}

void emdb_alloc_fail_reset(void)
{
	atomic_store(&fail_armed, false);
}

uint64_t emdb_alloc_injected_failures(void)
{
	return atomic_load(&injected);
}
