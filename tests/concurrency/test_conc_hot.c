/*
 * test_conc_hot.c - a table with a device replica of its hot rows (the
 * test tier standing in for the GPU, db/tier_test.h) under trainers that
 * prefetch, push and update at once, so that the threads of one Update
 * pass record hot rows' gradients together (db/hot.h), while Pulls read
 * the replica, Prefetches stage rows into it and Pushes scatter into its
 * accumulators (db/hot_serve.c).  Afterwards every
 * row holds exactly what was pushed to it and the replica equals the
 * host bit for bit.  The same with the device failing mid-run (an
 * injected IO, while other threads' Pulls and Pushes have their device
 * work queued): every row is still right, from the host, and the
 * replica is dropped.  Runs under ThreadSanitizer too
 * (tests/lib/plain_runner.h).  Built with CONC_HOT_CUDA (tests/emu:
 * test_conc_hot_emu), the CUDA tier itself on the emulated runtime stands
 * in for the GPU, one replica per emulated device, in the first case (the
 * second injects the test tier's failure).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/db.h>

#include "db/db_int.h"
#include "db/tier_test.h"
#include "tests/lib/helpers.h"

#ifdef CONC_HOT_CUDA
#define CONC_HOT_TIER TIER_CUDA
#else
#define CONC_HOT_TIER TIER_TEST
#endif

#define THREADS 4
#define STEPS 24
#define BATCH 512
#define DIM 8
#define HOT 40       /* ids every batch repeats */
#define WIDE 3000    /* the rest of the ids */

typedef struct shared {
	emdb_db *db;
	uint32_t t;
	int failed;      /* atomic */
} shared;

typedef struct worker {
	shared *s;
	int id;
} worker;

/* Batch b of thread w, as indices j of ids scramble(j): HOT ids twice
 * each, the rest spread over WIDE. */
static void batch(int w, int b, uint64_t *js)
{
	uint64_t x = 1000u * (uint64_t)w + (uint64_t)b;

	for (int i = 0; i < BATCH; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		js[i] = i < 2 * HOT ? (uint64_t)(i % HOT) : HOT + (x >> 33) % WIDE;
	}
}

static void *train(void *arg)
{
	worker *w = arg;
	uint64_t ids[BATCH];
	float *g = malloc(BATCH * DIM * sizeof(float)), *out = malloc(BATCH * DIM * sizeof(float));

	for (int k = 0; k < BATCH * DIM; k++)
		g[k] = 1.0f;
	for (int b = 0; b < STEPS; b++) {
		emdb_ticket *tk;
		int rc;

		batch(w->id, b, ids);
		for (int i = 0; i < BATCH; i++)
			ids[i] = scramble(ids[i]);
		rc = emdb_prefetch(w->s->db, w->s->t, ids, BATCH, &tk);
		/* A Pull meanwhile reads hot and staged rows from the replica:
		 * every row is minus a whole count of pushes, in every column
		 * alike (no torn or stale row). */
		if (!rc)
			rc = emdb_pull_ticket(w->s->db, w->s->t, tk, DIM, out);
		for (int i = 0; !rc && i < BATCH; i++)
			for (int k = 0; k < DIM; k++)
				if (out[i * DIM + k] != out[i * DIM] || out[i * DIM] != (float)(int)out[i * DIM])
					__atomic_store_n(&w->s->failed, 2, __ATOMIC_RELAXED);
		if (!rc) {
			rc = b % 3 == 2 ? emdb_push_update(w->s->db, w->s->t, ids, BATCH, DIM, g, NULL)
					: emdb_push_ticket(w->s->db, w->s->t, tk, DIM, g);
			emdb_ticket_free(tk);
		}
		if (!rc && b % 3 != 2)
			rc = emdb_update(w->s->db, w->s->t, NULL);
		if (rc)
			__atomic_store_n(&w->s->failed, 1, __ATOMIC_RELAXED);
	}
	free(g);
	free(out);
	return NULL;
}

/* fail_at: the test tier's operation that fails with IO (0: none). */
static void trainers(uint32_t fail_at)
{
	emdb_db_config c = EMDB_DB_CONFIG_INIT;
	shared s = { 0 };
	worker w[THREADS];
	pthread_t th[THREADS];
	static float want[HOT + WIDE][DIM], got[HOT + WIDE][DIM];
	static uint64_t all[HOT + WIDE];
	uint64_t members = 0;
	tbl *t;

	hot_use_tier(CONC_HOT_TIER, 0, 2);
	c.shards = 8;
	c.gpu_memory = 256 * 2 * DIM * sizeof(float); /* SGD: 256 rows and accumulators */
	cr_assert_eq(emdb_db_open(&c, &s.db), 0, "%s", emdb_last_error());
	s.t = make_sgd_lr1_table(s.db, DIM);
	cr_assert_eq(db_table_get(s.db, s.t, &t), 0, "table");
	if (fail_at)
		tier_test_fail_after(hot_tier(t->hot), fail_at, EMDB_ERR_IO);
	table_release(t);
	for (int i = 0; i < THREADS; i++) {
		w[i].s = &s;
		w[i].id = i;
		cr_assert_eq(pthread_create(&th[i], NULL, train, &w[i]), 0, "pthread_create");
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(__atomic_load_n(&s.failed, __ATOMIC_RELAXED), 0, "a call failed");

	/* SGD with lr 1 from zeros: a value is minus the times it was pushed
	 * (small integers: exact in float whatever the order). */
	memset(want, 0, sizeof(want));
	for (int i = 0; i < THREADS; i++)
		for (int b = 0; b < STEPS; b++) {
			uint64_t js[BATCH];

			batch(i, b, js);
			for (int k = 0; k < BATCH; k++)
				for (int d = 0; d < DIM; d++)
					want[js[k]][d] -= 1.0f;
		}
	for (uint64_t j = 0; j < HOT + WIDE; j++)
		all[j] = scramble(j);
	cr_assert_eq(emdb_pull(s.db, s.t, all, HOT + WIDE, DIM, &got[0][0]), 0, "pull");
	cr_assert(!memcmp(want, got, sizeof(want)), "a row lost or doubled a push");

	cr_assert_eq(db_table_get(s.db, s.t, &t), 0, "table");
	if (fail_at) {
		emdb_tier_info ti;

		cr_assert_eq(emdb_table_tier(s.db, s.t, &ti), 0, "tier");
		cr_assert(ti.failed && ti.hot_rows == 0, "the failed device was dropped (failed %d, %d rows)",
			  (int)ti.failed, (int)ti.hot_rows);
		table_release(t);
		emdb_db_close(s.db);
		return;
	}
	for (uint64_t r = 0; r < chunk_rows(&t->rows); r++) {
		uint64_t loc = chunk_loc_of(&t->rows, r);
		float dev[DIM];

		if (!hot_is_member(t->hot, loc))
			continue;
		for (uint32_t k = 0; k < 2; k++) {
			cr_assert_eq(hot_replica_row(t->hot, k, loc, dev), 0, "replica row");
			cr_assert(!memcmp(dev, table_row(t, loc), sizeof(dev)),
				  "replica %u differs, row %d", k, (int)r);
		}
		members++;
	}
	cr_assert(members >= HOT, "the repeated ids are hot (%d members)", (int)members);
	table_release(t);
	emdb_db_close(s.db);
}

Test(conc_hot, trainers_and_the_replica)
{
	trainers(0);
}

#ifndef CONC_HOT_CUDA
Test(conc_hot, device_failing_mid_run_loses_nothing)
{
	trainers(80);
}
#endif
