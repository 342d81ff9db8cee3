/*
 * chunk.c - a table's rows in fixed-size chunks, mapped on demand.
 *
 * Invariants:
 *   1. Chunks 0 .. n_chunks-1 are mapped, zero-filled at birth, and never
 *      unmapped or moved before chunk_store_destroy; so a location, once
 *      handed out, resolves to the same bytes for the life of the store.
 *   2. next_row + reserved <= n_chunks * rows_per_chunk (under mu), so
 *      chunk_new_row, called only with a reservation, always lands in a
 *      mapped chunk and never needs to allocate.
 *   3. A chunk pointer and its directory leaf are published with release
 *      stores after they are fully set up; readers use acquire loads and
 *      take no lock.  A chunk's marks are published before the chunk, so
 *      every handed-out location has them.
 *   4. Once a table fills its second chunk, one whole chunk beyond every
 *      reservation stays mapped, and the caller that maps it has its
 *      memory backed (emdb_map_populate) after dropping mu.  Memory never
 *      written before costs more than the rest of an insert on some
 *      machines (a VM's first touch), and a thread writing new rows into a
 *      fresh huge page waits for that page's fault whichever thread began
 *      it; so the one thread that reserves into the last chunk pays for
 *      the next one, early and holding no lock, while the others go on
 *      filling the current one.  The cost: one chunk (2 MiB by default)
 *      per growing table.
 *   5. chunk_prepare backs the chunks of a reservation with up to
 *      PREPARE_HELPERS_MAX threads beside the caller, one per online CPU
 *      beyond the caller's and one per PREPARE_CHUNKS_PER_THREAD chunks at
 *      most; they are joined before it returns, so the engine keeps no
 *      thread of its own.
 *   7. Beside each chunk's marks lie its rows' IDs (chunk_set_id), in the
 *      same allocation, zero at birth, counted with the marks wherever
 *      bytes are counted.
 *
 * State changes: chunk creation and `reserved` under mu (`reserved` stored
 * atomically, chunk_reserve_bytes reads it without); next_row by an
 * atomic add in chunk_new_row.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/alloc_int.h"
#include "base/error_int.h"
#include "db/chunk.h"

#define LEAF_SIZE (1u << CHUNK_DIR_BITS)
#define PREPARE_HELPERS_MAX 7u
#define PREPARE_CHUNKS_PER_THREAD 16u

int chunk_store_init(chunk_store *cs, size_t stride_bytes, size_t chunk_bytes)
{
	memset(cs, 0, sizeof(*cs));
	size_t stride = (stride_bytes + 15) & ~(size_t)15;
	if (stride == 0 || stride > UINT32_MAX || chunk_bytes == 0)
		return emdb__seterr(EMDB_ERR_INVALID, "bad chunk geometry: stride %zu, chunk %zu bytes",
				    stride_bytes, chunk_bytes);
	size_t rows = chunk_bytes / stride;
	if (rows == 0)
		rows = 1;
	if (rows > LOC_MAX_OFFSET)
		rows = LOC_MAX_OFFSET;
	cs->stride = (uint32_t)stride;
	cs->rows_per_chunk = (uint32_t)rows;
	cs->chunk_bytes = rows * stride;
	cs->mark_words = (uint32_t)((rows + 63) / 64);
	pthread_mutex_init(&cs->mu, NULL);
	return EMDB_OK;
}

void chunk_store_destroy(chunk_store *cs)
{
	uint64_t n = cs->n_chunks;
	for (uint64_t c = 0; c < n; c++) {
		emdb_unmap(cs->dir[c >> CHUNK_DIR_BITS][c & (LEAF_SIZE - 1)], cs->chunk_bytes);
		emdb_free(cs->mdir[c >> CHUNK_DIR_BITS][c & (LEAF_SIZE - 1)]);
	}
	for (uint32_t l = 0; l < (1u << CHUNK_DIR_BITS); l++) {
		emdb_free(cs->dir[l]);
		emdb_free(cs->mdir[l]);
	}
	pthread_mutex_destroy(&cs->mu);
	memset(cs, 0, sizeof(*cs));
}

/* What one growth of the store has obtained and not yet published. */
typedef struct chunk_growth {
	uint64_t c0, count;        /* chunks c0 .. c0+count-1 are new       */
	uint32_t l0, n_leaves;     /* leaves l0 .. l0+n_leaves-1 are touched */
	void **blk;                /* one block: chunk[count], marks[count],
				      dir leaf[n_leaves], mdir leaf[n_leaves] */
} chunk_growth;

static uint64_t chunks_for(const chunk_store *cs, uint64_t rows)
{
	return (rows + cs->rows_per_chunk - 1) / cs->rows_per_chunk;
}

/* Give back everything a growth obtained; nothing of it is published. */
static void growth_drop(chunk_store *cs, chunk_growth *g)
{
	void **chunk = g->blk, **marks = chunk + g->count;
	void **leaf = marks + g->count, **mleaf = leaf + g->n_leaves;
	for (uint64_t k = 0; k < g->count; k++) {
		if (chunk[k])
			emdb_unmap(chunk[k], cs->chunk_bytes);
		emdb_free(marks[k]);
	}
	for (uint32_t l = 0; l < g->n_leaves; l++) {
		emdb_free(leaf[l]);
		emdb_free(mleaf[l]);
	}
	emdb_free(g->blk);
}

/* Map `count` chunks after the last one, every one or none (invariant
 * 6): their directory leaves, marks and memory are all obtained before
 * any is published, and a failure gives each back.  *last (may be NULL)
 * gets the memory of the last new chunk.  Called with mu held. */
static int add_chunks_locked(chunk_store *cs, uint64_t count, uint8_t **last)
{
	chunk_growth g = { .c0 = cs->n_chunks, .count = count };
	if (count == 0)
		return EMDB_OK;
	if (count > LOC_MAX_CHUNKS - g.c0)
		return emdb__seterr(EMDB_ERR_LIMIT, "table is full: %u chunks of %u rows", LOC_MAX_CHUNKS,
				    cs->rows_per_chunk);
	g.l0 = (uint32_t)(g.c0 >> CHUNK_DIR_BITS);
	g.n_leaves = (uint32_t)(((g.c0 + count - 1) >> CHUNK_DIR_BITS) - g.l0 + 1);
	g.blk = emdb_calloc(2 * count + 2 * (uint64_t)g.n_leaves, sizeof(void *));
	if (!g.blk)
		return EMDB_ERR_NOMEM;
	void **chunk = g.blk, **marks = chunk + count;
	void **leaf = marks + count, **mleaf = leaf + g.n_leaves;
	for (uint32_t l = 0; l < g.n_leaves; l++) {
		if (!cs->dir[g.l0 + l] && !(leaf[l] = emdb_calloc(LEAF_SIZE, sizeof(uint8_t *))))
			goto fail;
		if (!cs->mdir[g.l0 + l] && !(mleaf[l] = emdb_calloc(LEAF_SIZE, sizeof(uint64_t *))))
			goto fail;
	}
	for (uint64_t k = 0; k < count; k++) {
		if (!(marks[k] = emdb_calloc(chunk_meta_words(cs), sizeof(uint64_t))))
			goto fail;
		if (!(chunk[k] = emdb_map(cs->chunk_bytes)))
			goto fail;
	}
	/* Publish (invariant 3): leaves, then each chunk's marks before the
	 * chunk, then the count. */
	for (uint32_t l = 0; l < g.n_leaves; l++) {
		if (leaf[l])
			__atomic_store_n(&cs->dir[g.l0 + l], (uint8_t **)leaf[l], __ATOMIC_RELEASE);
		if (mleaf[l])
			__atomic_store_n(&cs->mdir[g.l0 + l], (uint64_t **)mleaf[l], __ATOMIC_RELEASE);
	}
	for (uint64_t k = 0; k < count; k++) {
		uint64_t c = g.c0 + k;
		__atomic_store_n(&cs->mdir[c >> CHUNK_DIR_BITS][c & (LEAF_SIZE - 1)], (uint64_t *)marks[k],
				 __ATOMIC_RELEASE);
		__atomic_store_n(&cs->dir[c >> CHUNK_DIR_BITS][c & (LEAF_SIZE - 1)], (uint8_t *)chunk[k],
				 __ATOMIC_RELEASE);
	}
	__atomic_store_n(&cs->n_chunks, g.c0 + count, __ATOMIC_RELEASE);
	if (last)
		*last = chunk[count - 1];
	emdb_free(g.blk);
	return EMDB_OK;

fail:
	growth_drop(cs, &g);
	return EMDB_ERR_NOMEM;
}

uint64_t chunk_reserve_bytes(const chunk_store *cs, uint64_t n)
{
	return chunk_grow_bytes(cs, __atomic_load_n(&cs->next_row, __ATOMIC_RELAXED) +
					    __atomic_load_n(&cs->reserved, __ATOMIC_RELAXED) + n);
}

uint64_t chunk_grow_bytes(const chunk_store *cs, uint64_t rows)
{
	uint64_t have = __atomic_load_n(&cs->n_chunks, __ATOMIC_ACQUIRE);
	uint64_t want = chunks_for(cs, rows);
	if (want <= have)
		return 0;
	uint64_t leaves = (want - 1) / LEAF_SIZE + 1 - (have ? (have - 1) / LEAF_SIZE + 1 : 0);
	return (want - have) * (emdb__map_bytes(cs->chunk_bytes) +
				(uint64_t)chunk_meta_words(cs) * sizeof(uint64_t)) +
	       (want - have) * 2 * sizeof(void *) + leaves * 2 * (LEAF_SIZE * sizeof(void *));
}

int chunk_reserve(chunk_store *cs, uint64_t n)
{
	uint8_t *ahead = NULL;
	pthread_mutex_lock(&cs->mu);
	uint64_t need = __atomic_load_n(&cs->next_row, __ATOMIC_RELAXED) + cs->reserved + n;
	uint64_t want = chunks_for(cs, need);
	int rc = add_chunks_locked(cs, want > cs->n_chunks ? want - cs->n_chunks : 0, NULL);
	if (rc == EMDB_OK) /* atomic: chunk_grow_bytes reads it without mu */
		__atomic_store_n(&cs->reserved, cs->reserved + n, __ATOMIC_RELAXED);
	/* A growing table (invariant 4): the reservation reached the last
	 * chunk, so map the next one now and have its memory backed below. */
	if (rc == EMDB_OK && cs->n_chunks >= 2 && need > (cs->n_chunks - 1) * cs->rows_per_chunk)
		(void)add_chunks_locked(cs, 1, &ahead); /* optional: ahead stays NULL on failure */
	pthread_mutex_unlock(&cs->mu);
	if (ahead)
		emdb_map_populate(ahead, cs->chunk_bytes);
	return rc;
}

/* chunk_prepare's backing, shared by its threads: chunks next .. end-1,
 * claimed one at a time. */
typedef struct prep_work {
	const chunk_store *cs;
	uint64_t next; /* atomic */
	uint64_t end;
} prep_work;

static void *prep_loop(void *arg)
{
	prep_work *w = arg;
	for (;;) {
		uint64_t c = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
		if (c >= w->end)
			return NULL;
		emdb_map_populate(chunk_row(w->cs, loc_pack(0, LOC_TIER_HOST, (uint32_t)c, 0)),
				  w->cs->chunk_bytes);
	}
}

int chunk_prepare(chunk_store *cs, uint64_t rows)
{
	pthread_mutex_lock(&cs->mu);
	uint64_t want = chunks_for(cs, rows);
	int rc = add_chunks_locked(cs, want > cs->n_chunks ? want - cs->n_chunks : 0, NULL);
	uint64_t n = cs->n_chunks;
	pthread_mutex_unlock(&cs->mu);
	if (rc != EMDB_OK)
		return rc;
	/* Outside mu (invariant 4): from the chunk rows are being handed out
	 * in.  A chunk already backed costs a walk of its page table.  Where
	 * the first touch is slow it is paid per vCPU (the host backs each
	 * one's faults), so helpers take chunks beside the caller (invariant
	 * 5). */
	prep_work w = { cs, chunk_rows(cs) / cs->rows_per_chunk, n };
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t busy = w.end > w.next ? (w.end - w.next) / PREPARE_CHUNKS_PER_THREAD : 0;
	uint32_t helpers = (uint32_t)(cpus > 1 ? cpus - 1 : 0);
	if (helpers > PREPARE_HELPERS_MAX)
		helpers = PREPARE_HELPERS_MAX;
	if (helpers > busy)
		helpers = (uint32_t)busy;
	pthread_t th[PREPARE_HELPERS_MAX];
	bool started[PREPARE_HELPERS_MAX] = { false };
	for (uint32_t i = 0; i < helpers; i++)
		started[i] = pthread_create(&th[i], NULL, prep_loop, &w) == 0;
	prep_loop(&w);
	for (uint32_t i = 0; i < helpers; i++)
		if (started[i])
			pthread_join(th[i], NULL);
	return EMDB_OK;
}

void chunk_unreserve(chunk_store *cs, uint64_t n)
{
	pthread_mutex_lock(&cs->mu);
	__atomic_store_n(&cs->reserved, cs->reserved - n, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&cs->mu);
}

uint64_t chunk_new_row(chunk_store *cs)
{
	uint64_t r = __atomic_fetch_add(&cs->next_row, 1, __ATOMIC_RELAXED);
	return loc_pack(0, LOC_TIER_HOST, (uint32_t)(r / cs->rows_per_chunk),
			(uint32_t)(r % cs->rows_per_chunk));
}

uint64_t chunk_rows(const chunk_store *cs)
{
	return __atomic_load_n(&cs->next_row, __ATOMIC_RELAXED);
}

uint64_t chunk_count(const chunk_store *cs)
{
	return __atomic_load_n(&cs->n_chunks, __ATOMIC_ACQUIRE);
}

uint64_t chunk_bytes_mapped(const chunk_store *cs)
{
	uint64_t n = __atomic_load_n(&cs->n_chunks, __ATOMIC_ACQUIRE);
	uint64_t leaves = (n + LEAF_SIZE - 1) / LEAF_SIZE;
	return n * (((cs->chunk_bytes + 4095) & ~(uint64_t)4095) +
		    (uint64_t)chunk_meta_words(cs) * sizeof(uint64_t)) +
	       leaves * LEAF_SIZE * 2 * sizeof(void *);
}
