/*
 * hot_twin.h - two databases, one with a device replica of its hot rows
 * in the test tier (db/tier_test.h) and one without, for the tests of
 * db/hot.h: everything a trainer reads must be the same in both, bit for
 * bit.  Header-only, for tests/unit/test_hot*.c and
 * tests/client/test_client_mem_gpu.c.
 */
#ifndef EMDB_TEST_HOT_TWIN_H
#define EMDB_TEST_HOT_TWIN_H

#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/db.h>

#include "db/db_int.h"
#include "db/ops.h"
#include "db/tier_test.h"
#include "tests/lib/helpers.h"
#include "tests/lib/hot_batch.h"

enum { DIM = 8 };

/* Device bytes of an Adam row of DIM: weights, m, v, and its gradient
 * accumulator (Push scatters into it). */
#define ROW_BYTES (4u * DIM * sizeof(float))

typedef struct twin {
	emdb_db *ref, *db;
	uint32_t t;
} twin;

static inline void twin_open(twin *w, uint64_t gpu_rows, uint32_t test_chunks, uint32_t replicas)
{
	emdb_db_config c = EMDB_DB_CONFIG_INIT;

	hot_use_tier(TIER_TEST, test_chunks, replicas);
	w->ref = open_db(8);
	c.shards = 8;
	c.gpu_memory = gpu_rows * ROW_BYTES;
	cr_assert_eq(emdb_db_open(&c, &w->db), 0, "%s", emdb_last_error());
	cr_assert_eq(make_table(w->ref, "t", DIM, EMDB_OPT_ADAM, EMDB_INIT_UNIFORM, -0.5, 0.5),
		     make_table(w->db, "t", DIM, EMDB_OPT_ADAM, EMDB_INIT_UNIFORM, -0.5, 0.5));
	w->t = 1;
}

static inline void twin_close(twin *w)
{
	emdb_db_close(w->ref);
	emdb_db_close(w->db);
	hot_use_tier(TIER_CUDA, 0, 0);
}

static inline tbl *table_of(twin *w)
{
	tbl *t;

	cr_assert_eq(db_table_get(w->db, w->t, &t), 0);
	table_release(t); /* the registry keeps it alive */
	return t;
}

/* Every member equals its host row bit for bit on every replica; returns
 * how many members there are. */
static inline uint64_t check_replica(twin *w)
{
	tbl *t = table_of(w);
	uint32_t rf = t->dim + t->state_floats;
	uint64_t members = 0;
	float dev[3 * DIM];

	hot_stats hs;

	if (!t->hot)
		return 0;
	pthread_rwlock_rdlock(&t->rows_lock);
	hot_get_stats(t->hot, &hs);
	for (uint64_t r = 0; r < chunk_rows(&t->rows); r++) {
		uint64_t loc = chunk_loc_of(&t->rows, r);

		if (!hot_is_member(t->hot, loc))
			continue;
		for (uint32_t k = 0; k < hs.replicas; k++) {
			cr_assert_eq(hot_replica_row(t->hot, k, loc, dev), 0, "%s", emdb_last_error());
			cr_assert(!memcmp(dev, table_row(t, loc), rf * sizeof(float)),
				  "row %llu: replica %u differs from the host", (unsigned long long)r, k);
		}
		members++;
	}
	pthread_rwlock_unlock(&t->rows_lock);
	return members;
}

/* The serving-path tests' batches (tests/lib/hot_batch.h) and steps. */
enum { HOT = 32, COLD = 16, N = 2 * HOT + 2 * COLD, BAGS = 8 };

static inline hot_stats hstats(twin *w)
{
	hot_stats hs;

	hot_get_stats(table_of(w)->hot, &hs);
	return hs;
}

static inline tier_stats tstats(twin *w)
{
	tier_stats ts;

	tier_stats_get(hot_tier(table_of(w)->hot), &ts);
	return ts;
}

static inline void batch(uint64_t *ids, uint64_t cold_from)
{
	hot_batch(ids, N, HOT, COLD, cold_from, scramble);
}

static inline void grads_for(int s, float *g, size_t rows)
{
	hot_grads(s, g, rows, DIM);
}

static inline void offsets_for(uint64_t *off)
{
	for (size_t b = 0; b <= BAGS; b++)
		off[b] = b * (N / BAGS);
}

/* Steps until the HOT ids, and only they, are the replica's members
 * (the only rows prefetched), in both twins. */
static inline void warm(twin *w)
{
	uint64_t ids[N], hot_ids[HOT];
	float g[N * DIM];

	for (int i = 0; i < HOT; i++)
		hot_ids[i] = scramble((uint64_t)i);
	for (int s = 1; s <= HOT_REVISE_STEPS; s++) {
		batch(ids, 1000 + (uint64_t)s * COLD);
		grads_for(s, g, N);
		for (int d = 0; d < 2; d++) {
			emdb_db *db = d ? w->db : w->ref;
			emdb_ticket *tk;

			cr_assert_eq(emdb_prefetch(db, w->t, hot_ids, HOT, &tk), 0, "%s", emdb_last_error());
			emdb_ticket_free(tk);
			cr_assert_eq(emdb_push(db, w->t, ids, N, DIM, g), 0, "%s", emdb_last_error());
			cr_assert_eq(emdb_update(db, w->t, NULL), 0);
		}
	}
	cr_assert_eq(check_replica(w), (uint64_t)HOT, "the hot ids are the members");
}

/* Every id in ids[0..n) reads the same in both twins. */
static inline void assert_same(twin *w, const uint64_t *ids, size_t n)
{
	float *a = malloc(n * DIM * sizeof(float)), *b = malloc(n * DIM * sizeof(float));

	cr_assert_eq(emdb_lookup(w->ref, w->t, ids, n, DIM, a, NULL), 0);
	cr_assert_eq(emdb_lookup(w->db, w->t, ids, n, DIM, b, NULL), 0);
	cr_assert(!memcmp(a, b, n * DIM * sizeof(float)), "a row differs from the twin without GPU");
	free(a);
	free(b);
}

#endif
