/*
 * anchors.c - the random-access, gather and fresh-memory bounds.
 *
 * Design
 *   These loops are what the hardware gives to code that knows every
 *   address in advance and does nothing else: the engine, which must hash,
 *   probe, lock and branch, can only approach them.  So they are written to
 *   be hard to beat: addresses precomputed, a fixed software-prefetch
 *   distance that keeps enough misses in flight, and nothing in the loop
 *   that the loads depend on.  The loaded values are summed into a sink the
 *   compiler must keep, or it would drop the loads.
 *
 *   Regions come from emdb_map, like the engine's index and chunks, so both
 *   sides get the same page size (transparent huge pages where allowed, the
 *   difference between a TLB hit and a page walk per access), and are
 *   written page by page first so that no measured access faults or reads
 *   the shared zero page.  The fresh-memory bound is the exception: the
 *   first write of never-touched memory, as the engine fills a new chunk,
 *   is what it measures (on a VM whose host backs guest memory lazily it
 *   costs far more than the write itself).
 *
 * Invariants
 *   1. Every access falls inside its region.
 *   2. Regions are unmapped before the function returns.
 */
#include "tools/bench/anchors.h"

#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/alloc_int.h"
#include "tools/bench/keys.h"

#define RA_STEP 4096u        /* loads per step between stop checks          */
#define RA_OFFSETS (4u << 20) /* precomputed offsets: 32 MiB, well past L3  */
#ifndef RA_DIST
#define RA_DIST 16u          /* loads in flight ahead of the current one    */
#endif
#ifndef GATHER_DIST
#define GATHER_DIST 16u      /* rows prefetched ahead                       */
#endif

/* ---- regions ----------------------------------------------------------- */

typedef struct touch_job {
	uint8_t *p;
	size_t bytes;
	unsigned threads;
} touch_job;

static void touch_part(void *arg, unsigned t)
{
	touch_job *j = arg;
	size_t pages = (j->bytes + 4095) / 4096;
	size_t lo = pages * t / j->threads, hi = pages * (t + 1) / j->threads;

	for (size_t pg = lo; pg < hi; pg++)
		j->p[pg * 4096] = (uint8_t)(pg | 1);
}

void *anchor_region(size_t bytes, unsigned threads)
{
	touch_job j = { emdb_map(bytes), bytes, threads };

	if (!j.p)
		harness_die("cannot map %.2f GB for an anchor region: %s",
			    (double)bytes / 1e9, emdb_last_error());
	harness_parallel(threads, touch_part, &j);
	return j.p;
}

/* ---- fresh-memory bound ------------------------------------------------ */

#define FRESH_BYTES (256u << 20) /* per thread and repetition */

typedef struct fresh_job {
	uint8_t *region[HARNESS_MAX_THREADS];
	size_t stride;
	double secs[HARNESS_MAX_THREADS];
} fresh_job;

static void fresh_fill(void *arg, unsigned t)
{
	fresh_job *j = arg;
	size_t rows = FRESH_BYTES / j->stride;
	double t0 = harness_now();

	for (size_t r = 0; r < rows; r++) {
		float *row = (float *)(j->region[t] + r * j->stride);
		for (size_t c = 0; c < j->stride / sizeof(float); c++)
			row[c] = (float)(r + c);
	}
	j->secs[t] = harness_now() - t0;
}

/* One thread count's 3 repetitions; the regions go to keep[] for the
 * caller to unmap. */
static void fresh_measure(fresh_job *j, unsigned threads, uint8_t **keep, harness_result *out)
{
	size_t rows = FRESH_BYTES / j->stride;

	memset(out, 0, sizeof(*out));
	out->threads = threads;
	for (int rep = 0; rep < HARNESS_REPS; rep++) {
		double slowest = 0;
		for (unsigned t = 0; t < threads; t++) {
			*keep++ = j->region[t] = emdb_map(FRESH_BYTES);
			if (!j->region[t])
				harness_die("cannot map 256 MiB for the fresh-memory bound: %s",
					    emdb_last_error());
		}
		harness_parallel(threads, fresh_fill, j);
		for (unsigned t = 0; t < threads; t++)
			if (j->secs[t] > slowest)
				slowest = j->secs[t];
		out->reps[rep] = (double)rows * threads / slowest;
		out->units += (uint64_t)rows * threads;
		if (out->reps[rep] > out->best) {
			out->best = out->reps[rep];
			for (unsigned t = 0; t < threads; t++)
				out->per_thread[t] = (double)rows / j->secs[t];
		}
	}
	harness_set_median(out);
	harness_log("fresh-memory bound, %u thread(s): %.2fM rows/s of %zu bytes (%.2f GB/s)", threads,
		    out->best / 1e6, j->stride, out->best * (double)j->stride / 1e9);
}

void anchor_fresh_rows(size_t stride, const unsigned *threads, int n_threads, harness_result *out)
{
	fresh_job j = { .stride = stride };
	size_t n_keep = 0, used = 0;

	for (int i = 0; i < n_threads; i++)
		n_keep += (size_t)HARNESS_REPS * threads[i];
	uint8_t **keep = calloc(n_keep, sizeof(*keep));
	if (!keep)
		harness_die("out of memory");
	for (int i = 0; i < n_threads; i++) {
		fresh_measure(&j, threads[i], keep + used, &out[i]);
		used += (size_t)HARNESS_REPS * threads[i];
	}
	for (size_t k = 0; k < n_keep; k++)
		emdb_unmap(keep[k], FRESH_BYTES);
	free(keep);
}

/* ---- random-access bound ---------------------------------------------- */

typedef struct ra_ctx {
	const uint8_t *region;
	const uint64_t *offs; /* [RA_OFFSETS + RA_DIST], last RA_DIST wrap around */
	size_t slice;         /* offsets between two threads' start points   */
	uint64_t sink[HARNESS_MAX_THREADS * 8];
} ra_ctx;

static uint64_t ra_step(void *arg, unsigned t, uint64_t iter)
{
	ra_ctx *c = arg;
	size_t start = (c->slice * t + (size_t)iter * RA_STEP) % RA_OFFSETS;
	const uint64_t *off = c->offs + start;
	const uint8_t *base = c->region;
	uint64_t sum = 0;

	for (uint32_t k = 0; k < RA_STEP; k++) {
		__builtin_prefetch(base + off[k + RA_DIST], 0, 3);
		sum += *(const uint64_t *)(base + off[k]);
	}
	c->sink[t * 8] += sum;
	return RA_STEP;
}

void anchor_random_access(size_t bytes, const unsigned *threads, int n_threads,
			  double seconds, harness_result *out)
{
	unsigned max_t = 1;
	ra_ctx *c;
	keys_rng r = { 0xacce55 };
	uint64_t words;

	for (int i = 0; i < n_threads; i++)
		if (threads[i] > max_t)
			max_t = threads[i];
	if (bytes < 4096)
		bytes = 4096;
	words = bytes / 8;
	c = calloc(1, sizeof(*c));
	uint64_t *offs = malloc(sizeof(uint64_t) * (RA_OFFSETS + RA_DIST));
	if (!c || !offs)
		harness_die("out of memory");
	for (size_t i = 0; i < RA_OFFSETS; i++)
		offs[i] = keys_rng_below(&r, words) * 8;
	/* RA_STEP divides RA_OFFSETS, so a step never runs past the end; the
	 * prefetches of its last loads read the copied head. */
	memcpy(offs + RA_OFFSETS, offs, sizeof(uint64_t) * RA_DIST);
	c->offs = offs;
	c->region = anchor_region(bytes, max_t);

	for (int i = 0; i < n_threads; i++) {
		c->slice = RA_OFFSETS / threads[i] / RA_STEP * RA_STEP;
		harness_measure(threads[i], seconds, ra_step, c, &out[i]);
		harness_log("random-access bound over %.2f GB, %u thread(s): %.1fM loads/s",
			    (double)bytes / 1e9, threads[i], out[i].best / 1e6);
	}
	emdb_unmap((void *)c->region, bytes);
	free(offs);
	free(c);
}

/* ---- gather bound ------------------------------------------------------ */

typedef struct gather_ctx {
	const uint8_t *region;
	const uint64_t *offs; /* byte offset of the row of each pool position */
	const pool *p;
	size_t row_bytes;
	float **out;          /* [threads] batch * dim floats */
	uint32_t dim;
} gather_ctx;

static uint64_t gather_step(void *arg, unsigned t, uint64_t iter)
{
	gather_ctx *c = arg;
	const pool *p = c->p;
	const uint64_t *off = c->offs + (size_t)t * p->len + (size_t)(iter % p->batches) * p->batch;
	const uint8_t *base = c->region;
	float *out = c->out[t];
	size_t n = p->batch, rb = c->row_bytes;

	for (size_t i = 0; i < n; i++) {
		if (i + GATHER_DIST < n)
			for (size_t o = 0; o < rb; o += 64)
				__builtin_prefetch(base + off[i + GATHER_DIST] + o, 0, 3);
		memcpy(out + i * c->dim, base + off[i], rb);
	}
	return n;
}

void anchor_gather(uint64_t region_rows, uint32_t dim, const pool *p,
		   unsigned threads, double seconds, harness_result *out)
{
	gather_ctx c = { .p = p, .dim = dim, .row_bytes = (size_t)dim * 4 };
	size_t total = p->len * p->threads;
	size_t bytes = region_rows * c.row_bytes;
	uint64_t *offs = malloc(sizeof(uint64_t) * total);
	float *outs[HARNESS_MAX_THREADS];
	keys_perm perm;

	if (!offs)
		harness_die("out of memory");
	keys_perm_init(&perm, region_rows, 0x6a7e4);
	for (size_t i = 0; i < total; i++)
		offs[i] = keys_perm_apply(&perm, p->ranks[i] - 1) * c.row_bytes;
	for (unsigned t = 0; t < threads; t++) {
		outs[t] = aligned_alloc(64, (p->batch * c.row_bytes + 63) / 64 * 64);
		if (!outs[t])
			harness_die("out of memory");
	}
	c.out = outs;
	c.offs = offs;
	c.region = anchor_region(bytes, threads);

	harness_measure(threads, seconds, gather_step, &c, out);
	harness_log("gather bound over %.2f GB, %u thread(s): %.2fM rows/s",
		    (double)bytes / 1e9, threads, out->best / 1e6);

	emdb_unmap((void *)c.region, bytes);
	for (unsigned t = 0; t < threads; t++)
		free(outs[t]);
	free(offs);
}
