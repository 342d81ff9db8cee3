/*
 * test_index.c - the sharded index (index/dit.c) on its own: tens of
 * millions of inserts through many resizes, every key found afterwards,
 * absent keys not found, duplicates within a batch, single-ID batches,
 * reservation failure leaving the index untouched.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>

#include "base/alloc_fault.h"
#include "base/loc.h"
#include "index/dit.h"

typedef struct plan_buf {
	dit_plan plan;
	uint64_t *hash;
	uint32_t *order;
	uint32_t *start;
} plan_buf;

static void plan_init(plan_buf *b, size_t n, uint32_t shards)
{
	b->hash = malloc(n * sizeof(uint64_t));
	b->order = malloc(n * sizeof(uint32_t));
	b->start = malloc((shards + 1) * sizeof(uint32_t));
	b->plan.hash = b->hash;
	b->plan.order = b->order;
	b->plan.start = b->start;
	cr_assert(b->hash && b->order && b->start);
}

static void plan_fini(plan_buf *b)
{
	free(b->hash);
	free(b->order);
	free(b->start);
}

/* The "row" of an ID is a location derived from the ID, so the test can
 * check that each ID keeps the location it got when inserted; new_row also
 * counts its calls. */
static uint64_t next_row;
static uint64_t loc_of(uint64_t id)
{
	return loc_pack(0, LOC_TIER_HOST, (uint32_t)(id >> 24), (uint32_t)id);
}

static uint64_t new_row(void *ctx, uint64_t id)
{
	(void)ctx;
	next_row++;
	return loc_of(id);
}

/* IDs from a scrambled counter: arbitrary 64-bit values, 0 and ~0 included
 * through the explicit cases below. */
static uint64_t key_of(uint64_t i)
{
	uint64_t x = i * 0x9e3779b97f4a7c15ULL;
	return x ^ (x >> 29);
}

Test(index, tens_of_millions_survive_resizes)
{
	const uint64_t N = 20000000;
	const size_t B = 8192;
	dit *d;
	plan_buf pb;
	uint64_t *ids = malloc(B * sizeof(uint64_t));
	uint64_t *locs = malloc(B * sizeof(uint64_t));

	cr_assert_eq(dit_create(64, &d), 0);
	plan_init(&pb, B, 64);
	next_row = 0;
	for (uint64_t base = 0; base < N; base += B) {
		size_t n = (size_t)((N - base) < B ? (N - base) : B);
		for (size_t i = 0; i < n; i++)
			ids[i] = key_of(base + i);
		dit_plan_build(d, ids, n, &pb.plan);
		cr_assert_eq(dit_reserve(d, &pb.plan), 0);
		size_t added = 0;
		dit_find_or_insert(d, ids, &pb.plan, locs, new_row, NULL, NULL, &added);
		cr_assert_eq(added, n, "batch at %llu: %zu of %zu new", (unsigned long long)base, added, n);
	}
	dit_stats st;
	dit_get_stats(d, &st);
	cr_assert_eq(st.count, N);
	cr_assert_eq(next_row, N, "new_row called %llu times", (unsigned long long)next_row);
	cr_assert_gt(st.resizes, 64 * 10, "expected many resizes, saw %llu", (unsigned long long)st.resizes);
	/* Load between 0.78/1.5 and 0.78 keeps index bytes/row within 16/0.78 .. 16*1.5/0.78 (< 32). */
	double per_row = (double)st.bytes / (double)st.count;
	cr_assert(per_row >= 16.0 / 0.78 - 0.5 && per_row <= 32.0, "%.1f bytes per row", per_row);

	/* Every key is found again, at the location it was given. */
	for (uint64_t base = 0; base < N; base += B) {
		size_t n = (size_t)((N - base) < B ? (N - base) : B);
		for (size_t i = 0; i < n; i++)
			ids[i] = key_of(base + i);
		dit_plan_build(d, ids, n, &pb.plan);
		cr_assert_eq(dit_find(d, ids, &pb.plan, locs), n);
		for (size_t i = 0; i < n; i++)
			cr_assert_eq(locs[i], loc_of(ids[i]), "key #%llu moved", (unsigned long long)(base + i));
	}
	/* Keys never inserted are absent. */
	for (size_t i = 0; i < B; i++)
		ids[i] = key_of(N + 1000 + i);
	dit_plan_build(d, ids, B, &pb.plan);
	cr_assert_eq(dit_find(d, ids, &pb.plan, locs), 0);
	for (size_t i = 0; i < B; i++)
		cr_assert_eq(locs[i], LOC_NONE);

	plan_fini(&pb);
	free(ids);
	free(locs);
	dit_destroy(d);
}

Test(index, duplicates_extremes_and_single_ids)
{
	dit *d;
	plan_buf pb;
	uint64_t ids[6] = { 0, UINT64_MAX, 0, 42, UINT64_MAX, 42 };
	uint64_t locs[6];
	size_t added;

	cr_assert_eq(dit_create(4, &d), 0);
	plan_init(&pb, 6, 4);
	next_row = 0;
	dit_plan_build(d, ids, 6, &pb.plan);
	cr_assert_eq(dit_reserve(d, &pb.plan), 0);
	dit_find_or_insert(d, ids, &pb.plan, locs, new_row, NULL, NULL, &added);
	cr_assert_eq(added, 3, "three distinct IDs, %zu inserted", added);
	cr_assert_eq(locs[0], locs[2]);
	cr_assert_eq(locs[1], locs[4]);
	cr_assert_eq(locs[3], locs[5]);
	cr_assert_neq(locs[0], locs[1]);

	/* One ID at a time goes through the same code. */
	for (int i = 0; i < 6; i++) {
		uint64_t one = ids[i], loc;
		dit_plan_build(d, &one, 1, &pb.plan);
		cr_assert_eq(dit_find(d, &one, &pb.plan, &loc), 1);
		cr_assert_eq(loc, locs[i]);
	}
	plan_fini(&pb);
	dit_destroy(d);
}

Test(index, plan_groups_every_position_once)
{
	dit *d;
	plan_buf pb;
	enum { N = 5000 };
	uint64_t ids[N];
	cr_assert_eq(dit_create(64, &d), 0);
	plan_init(&pb, N, 64);
	for (int i = 0; i < N; i++)
		ids[i] = key_of((uint64_t)i % 777);
	dit_plan_build(d, ids, N, &pb.plan);
	cr_assert_eq(pb.start[0], 0);
	cr_assert_eq(pb.start[64], N);
	static int seen[N];
	memset(seen, 0, sizeof(seen));
	for (uint32_t s = 0; s < 64; s++) {
		cr_assert_leq(pb.start[s], pb.start[s + 1]);
		for (uint32_t j = pb.start[s]; j < pb.start[s + 1]; j++) {
			uint32_t p = pb.order[j];
			cr_assert_eq(pb.hash[p] & 63, s, "position %u grouped under the wrong shard", p);
			seen[p]++;
		}
	}
	for (int i = 0; i < N; i++)
		cr_assert_eq(seen[i], 1);
	plan_fini(&pb);
	dit_destroy(d);
}

Test(index, failed_reservation_changes_nothing)
{
	dit *d;
	plan_buf pb;
	enum { N = 100000 };
	uint64_t *ids = malloc(N * sizeof(uint64_t));
	uint64_t *locs = malloc(N * sizeof(uint64_t));
	cr_assert_eq(dit_create(64, &d), 0);
	plan_init(&pb, N, 64);
	for (int i = 0; i < N; i++)
		ids[i] = key_of((uint64_t)i);
	dit_plan_build(d, ids, N, &pb.plan);
	/* Growing all 64 shards needs 64 allocations; fail midway. */
	emdb_alloc_fail_after(20);
	cr_assert_eq(dit_reserve(d, &pb.plan), -2 /* EMDB_ERR_NOMEM */);
	emdb_alloc_fail_reset();
	dit_stats st;
	dit_get_stats(d, &st);
	cr_assert_eq(st.count, 0);
	cr_assert_eq(dit_find(d, ids, &pb.plan, locs), 0);
	/* The reservations of the shards that did grow were handed back: a
	 * full insert now succeeds and holds exactly N keys. */
	cr_assert_eq(dit_reserve(d, &pb.plan), 0);
	next_row = 0;
	size_t added;
	dit_find_or_insert(d, ids, &pb.plan, locs, new_row, NULL, NULL, &added);
	cr_assert_eq(added, N);
	dit_get_stats(d, &st);
	cr_assert_eq(st.count, N);
	plan_fini(&pb);
	free(ids);
	free(locs);
	dit_destroy(d);
}

static int count_visit(void *ctx, uint64_t id, uint64_t loc)
{
	(void)id;
	(void)loc;
	(*(uint64_t *)ctx)++;
	return 0;
}

Test(index, foreach_visits_every_key)
{
	dit *d;
	plan_buf pb;
	enum { N = 3000 };
	uint64_t ids[N], locs[N];
	cr_assert_eq(dit_create(8, &d), 0);
	plan_init(&pb, N, 8);
	for (int i = 0; i < N; i++)
		ids[i] = key_of((uint64_t)i);
	dit_plan_build(d, ids, N, &pb.plan);
	cr_assert_eq(dit_reserve(d, &pb.plan), 0);
	dit_find_or_insert(d, ids, &pb.plan, locs, new_row, NULL, NULL, NULL);
	uint64_t seen = 0;
	cr_assert_eq(dit_foreach(d, count_visit, &seen), 0);
	cr_assert_eq(seen, N);
	plan_fini(&pb);
	dit_destroy(d);
}

Test(index, rejects_bad_shard_counts)
{
	dit *d;
	cr_assert_eq(dit_create(0, &d), -1);
	cr_assert_eq(dit_create(3, &d), -1);
	cr_assert_eq(dit_create(8192, &d), -1);
}
