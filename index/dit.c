/*
 * dit.c - the sharded open-addressing index of one table (HypeReca's DIT).
 *
 * Each shard is a linear-probing table of 16-byte slots {id, loc}; a slot
 * is empty when its loc is LOC_NONE, so every uint64 is a valid ID.  A
 * shard grows by itself (x1.5, at least to fit) when an insert could push
 * it above MAX_LOAD; growing fills a fresh mapping with empty slots
 * first, then rehashes into it under the shard's write lock.  Capacities
 * need not be powers of two (fastrange), which keeps the load, and so the
 * bytes per row, within a narrow band.
 *
 * Invariants:
 *   1. count + reserved <= max_count <= cap * MAX_LOAD whenever an insert
 *      runs, so a reserved insert never needs to grow and cannot fail.
 *      Reserving is an atomic add on `reserved` checked against `count` and
 *      `max_count`; only when that check fails does it take the write lock
 *      and grow.  The check can only overestimate the fill (an inserter
 *      publishes its count before it drops its reservation), never
 *      underestimate it.
 *   2. An ID is in at most one slot, in shard (hash & (shards-1)), reachable
 *      from its home slot dit_range(hash, cap) without crossing an empty
 *      slot.  Slots are never emptied (no deletes yet), so probing stops at
 *      the first empty slot.
 *   3. A batch locks each shard at most once per phase, visiting shards in
 *      ring order from dit_sweep_start(); concurrent batches start at
 *      bit-reversed positions and so rarely contend (HypeReca 4.2).
 *
 * State changes: slots, cap, count and max_count under the write lock
 * (find_or_insert, grow), stored atomically because reserve and the
 * prefetch pipeline read them without it; reserved by atomic adds.
 *
 * Contention: a sweep tries each shard's lock without blocking and, when a
 * concurrent batch holds it, defers that shard to a second pass, so two
 * sweeps that meet overtake each other instead of one going to sleep.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/alloc_int.h"
#include "base/error_int.h"
#include "base/loc.h"
#include "index/dit.h"
#include "index/hash.h"

#define MIN_CAP 256u
#define PREFETCH_DIST 24u

typedef struct dit_slot {
	uint64_t id;
	uint64_t loc;
} dit_slot;

typedef struct dit_shard {
	pthread_rwlock_t lock;
	dit_slot *slots;
	uint64_t cap;
	uint64_t count;
	uint64_t reserved;
	uint64_t max_count;
	uint64_t resizes;
} __attribute__((aligned(64))) dit_shard;

struct dit {
	uint32_t shards;
	uint32_t shard_bits;
	_Atomic uint64_t batches;
	void *raw;      /* allocation holding the aligned shard array */
	dit_shard *sh;
};

/* 78% load, growing x1.5: the load stays in 0.52 .. 0.78, so an index slot
 * costs 20.5 .. 30.8 bytes per row (the budget is 32), and a new ID's walk
 * to the nearest empty slot stays a few cache lines long (at 85% it was
 * long enough to dominate inserts). */
static uint64_t max_count_for(uint64_t cap)
{
	return cap - cap * 11 / 50;
}

static dit_slot *slots_new(uint64_t cap)
{
	dit_slot *s = emdb_map(cap * sizeof(dit_slot));
	if (s)
		memset(s, 0xff, cap * sizeof(dit_slot));
	return s;
}

static void slots_free(dit_slot *s, uint64_t cap)
{
	emdb_unmap(s, cap * sizeof(dit_slot));
}

int dit_create(uint32_t shards, dit **out)
{
	if (!out || shards == 0 || shards > DIT_MAX_SHARDS || (shards & (shards - 1)))
		return emdb__seterr(EMDB_ERR_INVALID, "index shards must be a power of two in 1..%u, not %u",
				    DIT_MAX_SHARDS, shards);
	dit *d = emdb_calloc(1, sizeof(*d));
	if (!d)
		return EMDB_ERR_NOMEM;
	d->shards = shards;
	while ((1u << d->shard_bits) < shards)
		d->shard_bits++;
	d->raw = emdb_calloc(1, (size_t)shards * sizeof(dit_shard) + 64);
	if (!d->raw) {
		emdb_free(d);
		return EMDB_ERR_NOMEM;
	}
	d->sh = (dit_shard *)(((uintptr_t)d->raw + 63) & ~(uintptr_t)63);
	pthread_rwlockattr_t attr;
	pthread_rwlockattr_init(&attr);
	/* Inference lookups must not starve the inserting trainers. */
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	uint32_t made = 0;
	for (; made < shards; made++) {
		dit_shard *s = &d->sh[made];
		/* IDs spread evenly, so equal shards would all fill up and
		 * resize within the same few inserts.  Starting capacities
		 * spread over one growth step (x1.5) spread the resizes evenly
		 * over the table's growth instead. */
		uint64_t cap = MIN_CAP + (uint64_t)MIN_CAP / 2 * made / shards;
		s->slots = slots_new(cap);
		if (!s->slots)
			break;
		s->cap = cap;
		s->max_count = max_count_for(cap);
		pthread_rwlock_init(&s->lock, &attr);
	}
	pthread_rwlockattr_destroy(&attr);
	if (made < shards) {
		d->shards = made;
		dit_destroy(d);
		return EMDB_ERR_NOMEM;
	}
	*out = d;
	return EMDB_OK;
}

void dit_destroy(dit *d)
{
	if (!d)
		return;
	for (uint32_t i = 0; i < d->shards; i++) {
		slots_free(d->sh[i].slots, d->sh[i].cap);
		pthread_rwlock_destroy(&d->sh[i].lock);
	}
	emdb_free(d->raw);
	emdb_free(d);
}

uint32_t dit_shards(const dit *d)
{
	return d->shards;
}

void dit_plan_build(const dit *d, const uint64_t *ids, size_t n, dit_plan *plan)
{
	uint32_t mask = d->shards - 1;
	uint32_t *start = plan->start;

	plan->n = n;
	memset(start, 0, ((size_t)d->shards + 1) * sizeof(*start));
	for (size_t i = 0; i < n; i++) {
		uint64_t h = dit_hash(ids[i]);
		plan->hash[i] = h;
		start[(h & mask) + 1]++;
	}
	for (uint32_t s = 0; s < d->shards; s++)
		start[s + 1] += start[s];
	/* Scatter with start[s] as the cursor of shard s; afterwards start[s]
	 * holds the old start[s+1], so shift back by one. */
	for (size_t i = 0; i < n; i++)
		plan->order[start[plan->hash[i] & mask]++] = (uint32_t)i;
	for (uint32_t s = d->shards; s > 0; s--)
		start[s] = start[s - 1];
	start[0] = 0;
}

uint32_t dit_sweep_start(dit *d)
{
	if (d->shard_bits == 0)
		return 0;
	uint64_t c = atomic_fetch_add_explicit(&d->batches, 1, memory_order_relaxed);
	uint32_t r = 0;
	for (uint32_t b = 0; b < d->shard_bits; b++)
		r |= (uint32_t)((c >> b) & 1) << (d->shard_bits - 1 - b);
	return r;
}

/* Rehash shard s into a table that holds at least `need` IDs.  Called with
 * the write lock held. */
static uint64_t grown_cap(uint64_t cap, uint64_t need)
{
	cap += cap / 2;
	while (max_count_for(cap) < need)
		cap += cap / 2;
	return cap;
}

/* Move every entry into ns[cap] and free the old slots.  Write lock held. */
static void rehash_locked(dit_shard *s, dit_slot *ns, uint64_t cap)
{
	for (uint64_t i = 0; i < s->cap; i++) {
		dit_slot *o = &s->slots[i];
		if (o->loc == LOC_NONE)
			continue;
		uint64_t j = dit_range(dit_hash(o->id), cap);
		while (ns[j].loc != LOC_NONE)
			if (++j == cap)
				j = 0;
		ns[j] = *o;
	}
	slots_free(s->slots, s->cap);
	/* Atomic stores: prefetch_at reads these without the lock. */
	__atomic_store_n(&s->slots, ns, __ATOMIC_RELAXED);
	__atomic_store_n(&s->cap, cap, __ATOMIC_RELAXED);
	__atomic_store_n(&s->max_count, max_count_for(cap), __ATOMIC_SEQ_CST);
	s->resizes++;
}

/* Grow s until it holds `need` entries, or what it holds and has promised
 * if more.  The new slot array is mapped and filled before the write lock
 * is taken: memory written for the first time can be slow (a VM's first
 * touch), and no batch should wait on the shard for it.  If the shard
 * changed meanwhile, the array is dropped and the sizing done again. */
static int grow(dit_shard *s, uint64_t need)
{
	for (;;) {
		uint64_t cap0 = __atomic_load_n(&s->cap, __ATOMIC_RELAXED);
		uint64_t cap = grown_cap(cap0, need);
		dit_slot *ns = slots_new(cap);
		if (!ns)
			return EMDB_ERR_NOMEM;
		pthread_rwlock_wrlock(&s->lock);
		uint64_t held = s->count + __atomic_load_n(&s->reserved, __ATOMIC_SEQ_CST);
		if (held > need)
			need = held;
		bool done = need <= s->max_count;
		bool fits = !done && s->cap == cap0 && max_count_for(cap) >= need;
		if (fits)
			rehash_locked(s, ns, cap);
		pthread_rwlock_unlock(&s->lock);
		if (!fits)
			slots_free(ns, cap);
		if (done || fits)
			return EMDB_OK;
	}
}

static uint64_t group_size(const dit_plan *plan, uint32_t s)
{
	return plan->start[s + 1] - plan->start[s];
}

static void unreserve_range(dit *d, const dit_plan *plan, uint32_t first, uint32_t count)
{
	for (uint32_t k = 0; k < count; k++) {
		uint32_t si = (first + k) & (d->shards - 1);
		uint64_t g = group_size(plan, si);
		if (g)
			__atomic_sub_fetch(&d->sh[si].reserved, g, __ATOMIC_SEQ_CST);
	}
}

int dit_reserve(dit *d, const dit_plan *plan)
{
	uint32_t first = dit_sweep_start(d);
	for (uint32_t k = 0; k < d->shards; k++) {
		uint32_t si = (first + k) & (d->shards - 1);
		uint64_t g = group_size(plan, si);
		if (!g)
			continue;
		dit_shard *s = &d->sh[si];
		uint64_t r = __atomic_add_fetch(&s->reserved, g, __ATOMIC_SEQ_CST);
		uint64_t c = __atomic_load_n(&s->count, __ATOMIC_SEQ_CST);
		if (c + r <= __atomic_load_n(&s->max_count, __ATOMIC_SEQ_CST))
			continue;
		/* Slow path: grow to hold everything held and promised. */
		int rc = grow(s, c + r);
		if (rc != EMDB_OK) {
			__atomic_sub_fetch(&s->reserved, g, __ATOMIC_SEQ_CST);
			unreserve_range(d, plan, first, k);
			return rc;
		}
	}
	return EMDB_OK;
}

/* The most bytes growing shards one after another adds at once: every
 * new array, less the old ones freed before the last grows, whose old
 * array is still mapped while it is rehashed (the largest, at worst). */
typedef struct grow_need {
	uint64_t delta, max_old;
} grow_need;

static void grow_need_add(grow_need *g, const dit_shard *s, uint64_t need)
{
	uint64_t cap0 = __atomic_load_n(&s->cap, __ATOMIC_RELAXED);
	if (need <= __atomic_load_n(&s->max_count, __ATOMIC_SEQ_CST))
		return;
	uint64_t old = emdb__map_bytes(cap0 * sizeof(dit_slot));
	uint64_t nb = emdb__map_bytes(grown_cap(cap0, need) * sizeof(dit_slot));
	g->delta += nb > old ? nb - old : 0;
	if (old > g->max_old)
		g->max_old = old;
}

uint64_t dit_reserve_bytes(dit *d, const dit_plan *plan)
{
	grow_need g = { 0, 0 };
	for (uint32_t si = 0; si < d->shards; si++) {
		uint64_t n = group_size(plan, si);
		const dit_shard *s = &d->sh[si];
		if (n)
			grow_need_add(&g, s,
				      __atomic_load_n(&s->count, __ATOMIC_SEQ_CST) +
					      __atomic_load_n(&s->reserved, __ATOMIC_SEQ_CST) + n);
	}
	return g.delta ? g.delta + g.max_old : 0;
}

/* A shard's share of n IDs spread by the hash, with room for its excess. */
static uint64_t presize_per_shard(const dit *d, uint64_t n)
{
	/* The hash spreads IDs evenly: a shard's share exceeds the mean by a
	 * few standard deviations at most (sqrt of the mean). */
	uint64_t mean = n / d->shards;
	return mean + mean / 32 + 64;
}

uint64_t dit_presize_bytes(dit *d, uint64_t n)
{
	grow_need g = { 0, 0 };
	uint64_t per = presize_per_shard(d, n);
	for (uint32_t i = 0; i < d->shards; i++)
		grow_need_add(&g, &d->sh[i], per);
	return g.delta ? g.delta + g.max_old : 0;
}

int dit_presize(dit *d, uint64_t n)
{
	uint64_t per = presize_per_shard(d, n);
	for (uint32_t i = 0; i < d->shards; i++) {
		dit_shard *s = &d->sh[i];
		if (per <= __atomic_load_n(&s->max_count, __ATOMIC_SEQ_CST))
			continue;
		int rc = grow(s, per);
		if (rc != EMDB_OK)
			return rc;
	}
	return EMDB_OK;
}

void dit_unreserve(dit *d, const dit_plan *plan)
{
	unreserve_range(d, plan, 0, d->shards);
}

/*
 * The prefetch pipeline runs over the whole sweep, not shard by shard: the
 * batch visits order[start[first] ..] and then wraps around, so the ID `ahead`
 * places further in the sweep is order[(base + ahead) % n].  Its shard may
 * not be locked yet; reading that shard's slots and cap with relaxed atomic
 * loads is still safe because a prefetch never faults, and at worst warms
 * a mapping that a concurrent resize is about to free.
 */
typedef struct sweep {
	const dit *d;
	const dit_plan *plan;
	size_t base; /* start[first]: where the sweep enters order[] */
	size_t g;    /* IDs of the batch visited so far */
} sweep;

static inline void prefetch_at(const sweep *w, size_t g)
{
	size_t n = w->plan->n;
	if (g >= n)
		return;
	size_t j = w->base + g;
	if (j >= n)
		j -= n;
	uint64_t h = w->plan->hash[w->plan->order[j]];
	const dit_shard *s = &w->d->sh[h & (w->d->shards - 1)];
	const dit_slot *slots = __atomic_load_n(&s->slots, __ATOMIC_RELAXED);
	uint64_t cap = __atomic_load_n(&s->cap, __ATOMIC_RELAXED);
	/* Two lines: a hit usually lies within the first, but an insert walks
	 * on to the next empty slot, often in the second. */
	const dit_slot *home = &slots[dit_range(h, cap)];
	__builtin_prefetch(home, 0, 3);
	__builtin_prefetch(home + 4, 0, 3);
}

static void sweep_begin(sweep *w, const dit *d, const dit_plan *plan, uint32_t first)
{
	w->d = d;
	w->plan = plan;
	w->base = plan->start[first];
	w->g = 0;
	for (size_t g = 0; g < PREFETCH_DIST; g++)
		prefetch_at(w, g);
}

/* Find or insert the IDs of one shard's group, order[a..b).  Called with
 * the shard's write lock held.  With `pipelined`, the sweep's prefetches
 * already run ahead of us; otherwise (a deferred shard) prefetch locally. */
/* The prefetches of one shard's group order[a..b): with `w`, the sweep's
 * pipeline runs ahead across shards; without (a deferred shard), the group
 * prefetches within itself. */
static inline void group_prefetch_begin(const dit_slot *sl, uint64_t cap, const dit_plan *plan, uint32_t a,
					uint32_t b, const sweep *w)
{
	if (!w)
		for (uint32_t j = a; j < b && j < a + PREFETCH_DIST; j++)
			__builtin_prefetch(&sl[dit_range(plan->hash[plan->order[j]], cap)], 0, 3);
}

static inline void group_prefetch_step(const dit_slot *sl, uint64_t cap, const dit_plan *plan, uint32_t j,
				       uint32_t b, sweep *w)
{
	if (w)
		prefetch_at(w, w->g++ + PREFETCH_DIST);
	else if (j + PREFETCH_DIST < b)
		__builtin_prefetch(&sl[dit_range(plan->hash[plan->order[j + PREFETCH_DIST]], cap)], 0, 3);
}

/* Work on one shard's group order[a..b) with the shard's lock held. */
typedef size_t (*group_fn)(dit_shard *s, uint32_t a, uint32_t b, sweep *w, void *arg);

/* Visit every non-empty group of the plan once, in ring order from a
 * staggered start, under the shard's write or read lock.  A shard another
 * batch holds is deferred to the end instead of waited for.  Returns the
 * sum of fn's results. */
static size_t sweep_groups(dit *d, const dit_plan *plan, bool write, group_fn fn, void *arg)
{
	size_t total = 0;
	uint32_t first = dit_sweep_start(d);
	uint16_t deferred[4096];
	uint32_t nd = 0;
	sweep w;

	sweep_begin(&w, d, plan, first);
	for (uint32_t k = 0; k < d->shards; k++) {
		uint32_t si = (first + k) & (d->shards - 1);
		uint32_t a = plan->start[si], b = plan->start[si + 1];
		if (a == b)
			continue;
		dit_shard *s = &d->sh[si];
		int busy = write ? pthread_rwlock_trywrlock(&s->lock) : pthread_rwlock_tryrdlock(&s->lock);
		if (busy) {
			deferred[nd++] = (uint16_t)si;
			w.g += b - a;
			continue;
		}
		total += fn(s, a, b, &w, arg);
		pthread_rwlock_unlock(&s->lock);
	}
	for (uint32_t k = 0; k < nd; k++) {
		dit_shard *s = &d->sh[deferred[k]];
		if (write)
			pthread_rwlock_wrlock(&s->lock);
		else
			pthread_rwlock_rdlock(&s->lock);
		total += fn(s, plan->start[deferred[k]], plan->start[deferred[k] + 1], NULL, arg);
		pthread_rwlock_unlock(&s->lock);
	}
	return total;
}

typedef struct row_fns {
	dit_new_row_fn new_row;
	dit_init_row_fn init_row;
	void *ctx;
} row_fns;

#define INIT_RUN 64u

/* Initialize the rows of the new IDs at batch positions pend[0..n). */
static void init_pending(const row_fns *f, const uint64_t *ids, const uint64_t *locs, const uint32_t *pend,
			 uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		f->init_row(f->ctx, ids[pend[k]], locs[pend[k]]);
}

static size_t upsert_group_locked(dit_shard *s, const uint64_t *ids, const dit_plan *plan, uint32_t a,
				  uint32_t b, uint64_t *locs, const row_fns *f, sweep *w)
{
	size_t added = 0;
	dit_slot *sl = s->slots;
	uint64_t cap = s->cap;
	uint32_t pend[INIT_RUN], np = 0;

	group_prefetch_begin(sl, cap, plan, a, b, w);
	for (uint32_t j = a; j < b; j++) {
		group_prefetch_step(sl, cap, plan, j, b, w);
		uint32_t p = plan->order[j];
		uint64_t id = ids[p];
		uint64_t i = dit_range(plan->hash[p], cap);
		for (;;) {
			if (sl[i].loc == LOC_NONE) {
				uint64_t loc = f->new_row(f->ctx, id);
				sl[i].id = id;
				sl[i].loc = loc;
				added++;
				locs[p] = loc;
				if (f->init_row) {
					pend[np++] = p;
					if (np == INIT_RUN) {
						init_pending(f, ids, locs, pend, np);
						np = 0;
					}
				}
				break;
			}
			if (sl[i].id == id) {
				locs[p] = sl[i].loc;
				break;
			}
			if (++i == cap)
				i = 0;
		}
	}
	if (np)
		init_pending(f, ids, locs, pend, np);
	/* Publish the count before dropping the reservation (invariant 1). */
	__atomic_store_n(&s->count, s->count + added, __ATOMIC_SEQ_CST);
	__atomic_sub_fetch(&s->reserved, b - a, __ATOMIC_SEQ_CST);
	return added;
}

typedef struct upsert_arg {
	const uint64_t *ids;
	const dit_plan *plan;
	uint64_t *locs;
	row_fns f;
} upsert_arg;

static size_t upsert_group(dit_shard *s, uint32_t a, uint32_t b, sweep *w, void *arg)
{
	upsert_arg *u = arg;
	return upsert_group_locked(s, u->ids, u->plan, a, b, u->locs, &u->f, w);
}

void dit_find_or_insert(dit *d, const uint64_t *ids, const dit_plan *plan,
			uint64_t *locs, dit_new_row_fn new_row,
			dit_init_row_fn init_row, void *ctx, size_t *inserted)
{
	upsert_arg u = { ids, plan, locs, { new_row, init_row, ctx } };
	size_t added = sweep_groups(d, plan, true, upsert_group, &u);
	if (inserted)
		*inserted = added;
}

/* dit_find's work on one shard's group, with a read lock held. */
static size_t find_group_locked(const dit_shard *s, const uint64_t *ids, const dit_plan *plan, uint32_t a,
				uint32_t b, uint64_t *locs, sweep *w)
{
	size_t found = 0;
	const dit_slot *sl = s->slots;
	uint64_t cap = s->cap;

	group_prefetch_begin(sl, cap, plan, a, b, w);
	for (uint32_t j = a; j < b; j++) {
		group_prefetch_step(sl, cap, plan, j, b, w);
		uint32_t p = plan->order[j];
		uint64_t id = ids[p];
		uint64_t i = dit_range(plan->hash[p], cap);
		uint64_t loc = LOC_NONE;
		while (sl[i].loc != LOC_NONE) {
			if (sl[i].id == id) {
				loc = sl[i].loc;
				found++;
				break;
			}
			if (++i == cap)
				i = 0;
		}
		locs[p] = loc;
	}
	return found;
}

typedef struct find_arg {
	const uint64_t *ids;
	const dit_plan *plan;
	uint64_t *locs;
} find_arg;

static size_t find_group(dit_shard *s, uint32_t a, uint32_t b, sweep *w, void *arg)
{
	find_arg *fa = arg;
	return find_group_locked(s, fa->ids, fa->plan, a, b, fa->locs, w);
}

size_t dit_find(dit *d, const uint64_t *ids, const dit_plan *plan, uint64_t *locs)
{
	find_arg fa = { ids, plan, locs };
	return sweep_groups(d, plan, false, find_group, &fa);
}

void dit_get_stats(dit *d, dit_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->bytes = (uint64_t)d->shards * sizeof(dit_shard) + sizeof(*d);
	for (uint32_t i = 0; i < d->shards; i++) {
		dit_shard *s = &d->sh[i];
		pthread_rwlock_rdlock(&s->lock);
		out->count += s->count;
		out->slots += s->cap;
		out->bytes += s->cap * sizeof(dit_slot);
		out->resizes += s->resizes;
		pthread_rwlock_unlock(&s->lock);
	}
}

int dit_foreach(dit *d, dit_visit_fn fn, void *ctx)
{
	for (uint32_t i = 0; i < d->shards; i++) {
		dit_shard *s = &d->sh[i];
		int rc = 0;
		pthread_rwlock_rdlock(&s->lock);
		for (uint64_t j = 0; j < s->cap && rc == 0; j++)
			if (s->slots[j].loc != LOC_NONE)
				rc = fn(ctx, s->slots[j].id, s->slots[j].loc);
		pthread_rwlock_unlock(&s->lock);
		if (rc)
			return rc;
	}
	return 0;
}
