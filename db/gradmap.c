/*
 * gradmap.c - per-shard gradient accumulators (see gradmap.h).
 *
 * Invariants:
 *   1. count + reserved + held <= slot_cap, and count + reserved + held <=
 *      map_cap / 2, so a reserved (or held) add always finds a free slot
 *      and an empty key quickly.
 *   2. keys[] holds exactly the locations locs[0..count), each once, with
 *      keys[k].slot its index; grads[slot*dim ..] is the sum of every
 *      gradient pushed for that location since the last clear.
 *   3. A refused gradmap_reserve leaves the map as it was, its memory
 *      included: slot arrays grown before the key array failed are
 *      shrunk back (a shrink of a C library block does not fail in
 *      practice; if it did they would stay larger, which is harmless).
 *
 * State changes: reserve/unreserve/keep/add/clear, all serialized by the
 * owner.
 */
#include <math.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/error_int.h"
#include "base/loc.h"
#include "db/gradmap.h"
#include "index/hash.h"

#define MIN_SLOTS 64u
#define MAX_SLOTS (1u << 31)

void gradmap_init(gradmap *g, uint32_t dim)
{
	memset(g, 0, sizeof(*g));
	g->dim = dim;
}

void gradmap_destroy(gradmap *g)
{
	emdb_free(g->keys);
	emdb_free(g->locs);
	emdb_free(g->grads);
	memset(g, 0, sizeof(*g));
}

static void keys_reset(gradmap_key *k, uint32_t n)
{
	memset(k, 0xff, (size_t)n * sizeof(*k));
}

static void insert_key(gradmap_key *keys, uint32_t cap, uint64_t loc, uint64_t slot)
{
	uint32_t i = (uint32_t)dit_hash(loc) & (cap - 1);
	while (keys[i].loc != LOC_NONE)
		i = (i + 1) & (cap - 1);
	keys[i].loc = loc;
	keys[i].slot = slot;
}

/* Both slot arrays at `cap` slots, or, when either cannot be, both back
 * at slot_cap (invariant 3). */
static int resize_slots(gradmap *g, uint64_t cap)
{
	uint64_t *locs = emdb_realloc(g->locs, cap * sizeof(*locs));
	if (!locs)
		return EMDB_ERR_NOMEM;
	g->locs = locs;
	float *grads = emdb_realloc(g->grads, cap * g->dim * sizeof(*grads));
	if (!grads) {
		/* Shrinking in place: the C library keeps the block. */
		uint64_t *back = emdb_realloc(g->locs, (size_t)g->slot_cap * sizeof(*back));
		if (back)
			g->locs = back;
		return EMDB_ERR_NOMEM;
	}
	g->grads = grads;
	g->slot_cap = (uint32_t)cap;
	return EMDB_OK;
}

static int grow_slots(gradmap *g, uint64_t need)
{
	uint64_t cap = g->slot_cap ? g->slot_cap : MIN_SLOTS;
	while (cap < need)
		cap *= 2;
	if (cap > MAX_SLOTS)
		return emdb__seterr(EMDB_ERR_LIMIT, "more than %u rows pushed to one shard since the last update",
				    MAX_SLOTS);
	return resize_slots(g, cap);
}

static int grow_keys(gradmap *g, uint64_t need)
{
	uint64_t cap = g->map_cap ? g->map_cap : 2 * MIN_SLOTS;
	while (cap < 2 * need)
		cap *= 2;
	gradmap_key *keys = emdb_malloc(cap * sizeof(*keys));
	if (!keys)
		return EMDB_ERR_NOMEM;
	keys_reset(keys, (uint32_t)cap);
	for (uint32_t s = 0; s < g->count; s++)
		insert_key(keys, (uint32_t)cap, g->locs[s], s);
	emdb_free(g->keys);
	g->keys = keys;
	g->map_cap = (uint32_t)cap;
	return EMDB_OK;
}

/* Mirrors gradmap_reserve's growth: realloc'd slots count their growth,
 * the new key array all of it while the old one is still held. */
uint64_t gradmap_reserve_bytes(const gradmap *g, uint32_t n)
{
	uint64_t need = (uint64_t)g->count + g->reserved + g->held + n, bytes = 0;
	if (need > MAX_SLOTS)
		return 0; /* refused as LIMIT, with nothing allocated */
	if (need > g->slot_cap) {
		uint64_t cap = g->slot_cap ? g->slot_cap : MIN_SLOTS;
		while (cap < need)
			cap *= 2;
		bytes += (cap - g->slot_cap) * (sizeof(uint64_t) + (uint64_t)g->dim * sizeof(float));
	}
	if (2 * need > g->map_cap) {
		uint64_t cap = g->map_cap ? g->map_cap : 2 * MIN_SLOTS;
		while (cap < 2 * need)
			cap *= 2;
		bytes += cap * sizeof(gradmap_key);
	}
	return bytes;
}

int gradmap_reserve(gradmap *g, uint32_t n)
{
	uint64_t need = (uint64_t)g->count + g->reserved + g->held + n;
	if (need > MAX_SLOTS)
		return emdb__seterr(EMDB_ERR_LIMIT, "more than %u rows pushed to one shard since the last update",
				    MAX_SLOTS);
	int rc = EMDB_OK;
	uint32_t cap0 = g->slot_cap;
	if (need > g->slot_cap)
		rc = grow_slots(g, need);
	if (rc == EMDB_OK && 2 * need > g->map_cap) {
		rc = grow_keys(g, need);
		if (rc != EMDB_OK && g->slot_cap != cap0)
			(void)resize_slots(g, cap0); /* invariant 3; a shrink */
	}
	if (rc == EMDB_OK)
		__atomic_store_n(&g->reserved, g->reserved + n, __ATOMIC_RELEASE);
	return rc;
}

void gradmap_unreserve(gradmap *g, uint32_t n)
{
	__atomic_store_n(&g->reserved, g->reserved - n, __ATOMIC_RELEASE);
}

void gradmap_keep(gradmap *g, uint32_t n)
{
	g->held += n;
	gradmap_unreserve(g, n);
}

void gradmap_add(gradmap *g, uint64_t loc, const float *grad, float scale)
{
	uint32_t mask = g->map_cap - 1;
	uint32_t i = (uint32_t)dit_hash(loc) & mask;
	uint32_t dim = g->dim;
	float *acc;

	for (;;) {
		gradmap_key *k = &g->keys[i];
		if (k->loc == loc) {
			acc = g->grads + k->slot * dim;
			/* fmaf: one rounding whatever the compiler's contraction
			 * setting, so MEAN-bag sums do not depend on build flags. */
			for (uint32_t c = 0; c < dim; c++)
				acc[c] = fmaf(scale, grad[c], acc[c]);
			return;
		}
		if (k->loc == LOC_NONE) {
			uint32_t s = g->count++;
			k->loc = loc;
			k->slot = s;
			g->locs[s] = loc;
			acc = g->grads + (size_t)s * dim;
			for (uint32_t c = 0; c < dim; c++)
				acc[c] = scale * grad[c];
			return;
		}
		i = (i + 1) & mask;
	}
}

void gradmap_prefetch_acc(const gradmap *g, uint64_t loc)
{
	uint32_t mask = g->map_cap - 1;
	for (uint32_t i = (uint32_t)dit_hash(loc) & mask;; i = (i + 1) & mask) {
		const gradmap_key *k = &g->keys[i];
		if (k->loc == LOC_NONE)
			return; /* a new slot: written in order, nothing to fetch */
		if (k->loc == loc) {
			const char *acc = (const char *)(g->grads + k->slot * g->dim);
			for (size_t off = 0; off < (size_t)g->dim * sizeof(float); off += 64)
				__builtin_prefetch(acc + off, 1, 3);
			return;
		}
	}
}

void gradmap_clear(gradmap *g)
{
	/* After an unusually large step, give the memory back instead of
	 * wiping a huge key array on every later Update. */
	g->held = 0;
	if (g->slot_cap > 4 * MIN_SLOTS && g->count < g->slot_cap / 16 && g->reserved == 0) {
		emdb_free(g->keys);
		emdb_free(g->locs);
		emdb_free(g->grads);
		g->keys = NULL;
		g->locs = NULL;
		g->grads = NULL;
		g->slot_cap = g->map_cap = 0;
	} else if (g->count) {
		keys_reset(g->keys, g->map_cap);
	}
	g->count = 0;
}

size_t gradmap_bytes(const gradmap *g)
{
	return (size_t)g->map_cap * sizeof(gradmap_key) +
	       (size_t)g->slot_cap * (sizeof(uint64_t) + (size_t)g->dim * sizeof(float));
}
