/*
 * test_hot.c - a table's device replica of its hot rows (db/hot.h), with
 * the test tier (db/tier_test.h) standing in for the GPU: tiny capacity,
 * injected failures.
 *
 * What a user relies on: with gpu_memory set, every value a trainer reads
 * is exactly what it is without (the host is the authority: a twin
 * database without a replica gives the same rows bit for bit), the
 * replica of each hot row equals its host row after every Update, the
 * most prefetched rows are the ones chosen, and a full or failing device
 * loses no row.
 */
#include <stdlib.h>

#include "tests/lib/hot_twin.h"

enum { HOT_IDS = 32, BATCH = 256 };

/* Step s: a batch with HOT_IDS ids four times each, the rest spread over
 * a wide universe; prefetched, then pushed and updated (or, on odd
 * steps, pushed-and-updated in one call) in both databases. */
static void step(twin *w, int s, size_t wide)
{
	uint64_t ids[BATCH];
	float g[BATCH * DIM];
	uint64_t x = 77 + (uint64_t)s;

	for (size_t i = 0; i < BATCH; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		ids[i] = i < 4 * HOT_IDS ? scramble(i % HOT_IDS) : scramble(HOT_IDS + (x >> 33) % wide);
	}
	for (size_t k = 0; k < BATCH * DIM; k++)
		g[k] = (float)((int)((k * 7 + (size_t)s * 5) % 23) - 11) * 0.01f;
	for (int d = 0; d < 2; d++) {
		emdb_db *db = d ? w->db : w->ref;
		emdb_ticket *tk;

		cr_assert_eq(emdb_prefetch(db, w->t, ids, BATCH, &tk), 0, "%s", emdb_last_error());
		if (s % 2) {
			cr_assert_eq(emdb_push_update(db, w->t, ids, BATCH, DIM, g, NULL), 0);
		} else {
			cr_assert_eq(emdb_push_ticket(db, w->t, tk, DIM, g), 0);
			cr_assert_eq(emdb_update(db, w->t, NULL), 0);
		}
		emdb_ticket_free(tk);
	}
}

/* Every id ever used reads the same in both databases. */
static void assert_same_rows(twin *w, size_t wide)
{
	size_t n = HOT_IDS + wide;
	uint64_t *ids = malloc(n * sizeof(uint64_t));
	float *a = malloc(n * DIM * sizeof(float)), *b = malloc(n * DIM * sizeof(float));

	for (size_t i = 0; i < n; i++)
		ids[i] = scramble(i);
	cr_assert_eq(emdb_pull(w->ref, w->t, ids, n, DIM, a), 0);
	cr_assert_eq(emdb_pull(w->db, w->t, ids, n, DIM, b), 0);
	cr_assert(!memcmp(a, b, n * DIM * sizeof(float)), "a row differs from the twin without GPU");
	free(ids);
	free(a);
	free(b);
}

Test(hot, replica_follows_every_update_and_holds_the_hot_rows)
{
	twin w;
	emdb_tier_info ti;

	twin_open(&w, 64, 0, 2);
	for (int s = 1; s <= 12; s++) {
		uint64_t members;

		step(&w, s, 4000);
		members = check_replica(&w);
		cr_assert_eq(emdb_table_tier(w.db, w.t, &ti), 0);
		cr_assert_str_eq(ti.tier, "test");
		cr_assert_eq(ti.hot_rows, members);
		cr_assert_eq(ti.hot_capacity, 64u);
		cr_assert_eq(ti.devices, 2u, "a replica on each of two devices");
		if (s < HOT_REVISE_STEPS)
			cr_assert_eq(members, 0u, "no revision before step %d", HOT_REVISE_STEPS);
		else
			cr_assert(members >= HOT_IDS && members <= 64, "step %d: %llu members", s,
				  (unsigned long long)members);
	}
	/* The HOT_IDS ids prefetched four times a batch are all hot. */
	{
		tbl *t = table_of(&w);
		uint64_t ids[HOT_IDS];
		emdb_ticket *tk;

		for (int i = 0; i < HOT_IDS; i++)
			ids[i] = scramble((uint64_t)i);
		cr_assert_eq(emdb_prefetch(w.db, w.t, ids, HOT_IDS, &tk), 0);
		for (int i = 0; i < HOT_IDS; i++)
			cr_assert(hot_is_member(t->hot, tk->locs[i]), "hot id %d is not in the replica", i);
		emdb_ticket_free(tk);
	}
	/* A row written outside an Update (a load, say), in both twins: the
	 * writer says so, and the replica follows at the next step. */
	{
		tbl *t = table_of(&w), *r;
		uint64_t id = scramble(3);
		emdb_ticket *tk, *rk;

		cr_assert_eq(db_table_get(w.ref, w.t, &r), 0);
		table_release(r);
		cr_assert_eq(emdb_prefetch(w.db, w.t, &id, 1, &tk), 0);
		cr_assert_eq(emdb_prefetch(w.ref, w.t, &id, 1, &rk), 0);
		cr_assert(hot_is_member(t->hot, tk->locs[0]));
		pthread_rwlock_wrlock(&t->rows_lock);
		pthread_rwlock_wrlock(&r->rows_lock);
		for (int k = 0; k < DIM; k++) {
			table_row(t, tk->locs[0])[k] = 42.0f + (float)k;
			table_row(r, rk->locs[0])[k] = 42.0f + (float)k;
		}
		table_rows_written(t);
		pthread_rwlock_unlock(&r->rows_lock);
		pthread_rwlock_unlock(&t->rows_lock);
		emdb_ticket_free(tk);
		emdb_ticket_free(rk);
		step(&w, 13, 4000);
		check_replica(&w);
	}
	cr_assert_eq(emdb_table_tier(w.ref, w.t, &ti), 0);
	cr_assert_str_eq(ti.tier, "host", "no gpu_memory: no replica");
	assert_same_rows(&w, 4000);
	twin_close(&w);
}

/* The device holds one chunk of 4096 rows where the budget asks for 8192:
 * the replica is smaller, nothing else changes. */
Test(hot, full_device_loses_no_row)
{
	twin w;
	emdb_tier_info ti;

	twin_open(&w, 8192, 1, 1);
	for (int s = 1; s <= 2 * HOT_REVISE_STEPS; s++) {
		/* 6000 more rows prefetched each step: more candidates than
		 * the device holds. */
		enum { MORE = 6000 };
		uint64_t *ids = malloc(MORE * sizeof(uint64_t));

		for (size_t i = 0; i < MORE; i++)
			ids[i] = scramble(HOT_IDS + i);
		for (int d = 0; d < 2; d++) {
			emdb_ticket *tk;

			cr_assert_eq(emdb_prefetch(d ? w.db : w.ref, w.t, ids, MORE, &tk), 0);
			emdb_ticket_free(tk);
		}
		free(ids);
		step(&w, s, 20000);
		check_replica(&w);
	}
	cr_assert_eq(emdb_table_tier(w.db, w.t, &ti), 0);
	cr_assert_eq(ti.hot_rows, 4096u, "one chunk of the test tier");
	cr_assert_eq(ti.hot_capacity, 8192u);
	assert_same_rows(&w, 20000);
	twin_close(&w);
}

/* A device that runs out of memory mid-copy shrinks the replica; one that
 * fails is dropped whole; the rows never change. */
Test(hot, failing_device_loses_no_row)
{
	twin w;
	emdb_tier_info ti;
	tbl *t;

	twin_open(&w, 64, 0, 1);
	t = table_of(&w);
	for (int s = 1; s <= HOT_REVISE_STEPS; s++)
		step(&w, s, 4000);
	cr_assert(check_replica(&w) >= HOT_IDS);

	/* The next revision's copy of entering rows fails for memory. */
	for (int s = HOT_REVISE_STEPS + 1; s <= 2 * HOT_REVISE_STEPS; s++) {
		if (s == 2 * HOT_REVISE_STEPS)
			tier_test_fail_after(hot_tier(t->hot), 1, EMDB_ERR_NOMEM);
		step(&w, s, 4000);
		check_replica(&w);
	}
	cr_assert_eq(emdb_table_tier(w.db, w.t, &ti), 0);
	cr_assert(!ti.failed);

	/* The device fails while replaying a step: dropped, host goes on. */
	tier_test_fail_after(hot_tier(t->hot), 0, EMDB_ERR_IO);
	step(&w, 2 * HOT_REVISE_STEPS + 1, 4000);
	cr_assert_eq(emdb_table_tier(w.db, w.t, &ti), 0);
	cr_assert(ti.failed);
	cr_assert_str_eq(ti.tier, "host");
	cr_assert_eq(ti.hot_rows, 0u);
	for (int s = 2 * HOT_REVISE_STEPS + 2; s <= 3 * HOT_REVISE_STEPS; s++)
		step(&w, s, 4000);
	cr_assert_eq(check_replica(&w), 0u);
	assert_same_rows(&w, 4000);
	twin_close(&w);
}
