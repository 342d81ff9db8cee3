/*
 * ckpt_track.c - the copy-on-write store of a running checkpoint: rows an
 * Update changed before the checkpoint's writer reached them, kept as they
 * were at the switch.
 *
 * Invariants:
 *   1. A row is kept at most once per checkpoint, and only when the
 *      checkpoint wants it (ckpt_cow_wants) and its writer has not passed it
 *      (row number >= that writer's cursor): so the first copy is the value at the switch,
 *      the only value the checkpoint may write.
 *   2. Copies never move once made (slabs are never reallocated), so the
 *      writer may hold pointers to them while Updates keep adding others.
 *   3. Stripe r % COW_STRIPES owns row r: Update's pass threads, which may
 *      apply different shards at once, meet only on a stripe's mutex.
 *
 * State changes: stripes under their mutex, by Update's pass (holding
 * rows_lock for writing on the pass's behalf); `kept` and `failed`
 * atomically.  The writer only reads, under rows_lock for reading.
 */
#include <string.h>

#include <emdb/alloc.h>

#include "db/ckpt_track.h"

#define SLAB_BYTES (1u << 20)

ckpt_cow *ckpt_cow_create(size_t row_bytes, uint64_t *kept)
{
	ckpt_cow *cow = emdb_calloc(1, sizeof(*cow));
	if (!cow)
		return NULL;
	cow->row_bytes = row_bytes;
	cow->kept = kept;
	cow->nseg = 1;
	cow->bound[1] = UINT64_MAX;
	for (int i = 0; i < COW_STRIPES; i++)
		pthread_mutex_init(&cow->st[i].mu, NULL);
	return cow;
}

void ckpt_cow_destroy(ckpt_cow *cow)
{
	if (!cow)
		return;
	for (int i = 0; i < COW_STRIPES; i++) {
		cow_stripe *s = &cow->st[i];
		void *p = s->slabs;
		while (p) {
			void *next;
			memcpy(&next, p, sizeof(next));
			emdb_free(p);
			p = next;
		}
		emdb_free(s->keys);
		emdb_free(s->vals);
		pthread_mutex_destroy(&s->mu);
	}
	emdb_free(cow);
}

static inline uint32_t slot_of(uint64_t r, uint32_t cap)
{
	return (uint32_t)(((r / COW_STRIPES) * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

static int grow_locked(cow_stripe *s)
{
	uint32_t cap = s->cap ? s->cap * 2 : 256;
	uint64_t *keys = emdb_calloc(cap, sizeof(*keys));
	float **vals = emdb_calloc(cap, sizeof(*vals));
	if (!keys || !vals) {
		emdb_free(keys);
		emdb_free(vals);
		return -1;
	}
	for (uint32_t i = 0; i < s->cap; i++) {
		if (!s->keys[i])
			continue;
		uint32_t j = slot_of(s->keys[i] - 1, cap);
		while (keys[j])
			j = (j + 1) & (cap - 1);
		keys[j] = s->keys[i];
		vals[j] = s->vals[i];
	}
	emdb_free(s->keys);
	emdb_free(s->vals);
	s->keys = keys;
	s->vals = vals;
	s->cap = cap;
	return 0;
}

static float *carve_locked(cow_stripe *s, size_t bytes)
{
	if (!s->slab || s->slab_used + bytes > s->slab_cap) {
		size_t cap = bytes + 64 > SLAB_BYTES ? bytes + 64 : SLAB_BYTES;
		uint8_t *slab = emdb_malloc(cap);
		if (!slab)
			return NULL;
		memcpy(slab, &s->slabs, sizeof(void *));
		s->slabs = slab;
		s->slab = slab;
		s->slab_cap = cap;
		s->slab_used = 64; /* the link, and copies stay 16-aligned */
	}
	float *p = (float *)(s->slab + s->slab_used);
	s->slab_used += (bytes + 15) & ~(size_t)15;
	return p;
}

void ckpt_cow_keep_slow(ckpt_cow *cow, const chunk_store *cs, uint64_t loc, const void *row)
{
	uint64_t r = chunk_row_number(cs, loc);
	if (r < ckpt_cow_cursor(cow, r) || !ckpt_cow_wants(cow, cs, r, loc))
		return;
	cow_stripe *s = &cow->st[r % COW_STRIPES];
	pthread_mutex_lock(&s->mu);
	if ((s->count + 1) * 4 > s->cap * 3 && grow_locked(s) < 0)
		goto fail;
	uint32_t j = slot_of(r, s->cap);
	while (s->keys[j] && s->keys[j] != r + 1)
		j = (j + 1) & (s->cap - 1);
	if (!s->keys[j]) {
		float *copy = carve_locked(s, cow->row_bytes);
		if (!copy)
			goto fail;
		memcpy(copy, row, cow->row_bytes);
		s->keys[j] = r + 1;
		s->vals[j] = copy;
		s->count++;
		__atomic_fetch_add(cow->kept, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&s->mu);
	return;
fail:
	__atomic_store_n(&cow->failed, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&s->mu);
}

const void *ckpt_cow_find(const ckpt_cow *cow, uint64_t r)
{
	const cow_stripe *s = &cow->st[r % COW_STRIPES];
	if (!s->count)
		return NULL;
	uint32_t j = slot_of(r, s->cap);
	while (s->keys[j]) {
		if (s->keys[j] == r + 1)
			return s->vals[j];
		j = (j + 1) & (s->cap - 1);
	}
	return NULL;
}
