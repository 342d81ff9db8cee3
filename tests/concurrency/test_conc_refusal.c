/*
 * test_conc_refusal.c - threads growing their tables at once under a
 * memory limit that refuses some of their batches: a refused batch
 * inserts nothing and accumulates nothing, whichever thread took the last
 * bytes, and the checks made before mapping (db/table.c invariant 4) race
 * cleanly with the growth of other tables and of the same one.
 * This file runs under ThreadSanitizer in CI (label "concurrency").
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <emdb/alloc.h>
#include <emdb/db.h>
#include <emdb/error.h>

#include "tests/lib/helpers.h"

enum { THREADS = 4, ROUNDS = 40, BATCH = 2000, DIM = 32 };

typedef struct grower {
	emdb_db *db;
	uint32_t table;
	int tid;
	uint64_t inserted; /* rows of batches accepted */
	uint64_t pushed;   /* rows of pushes accepted */
	int refused;
	int other;         /* any other result: a failure */
} grower;

static void *grow(void *arg)
{
	grower *g = arg;
	uint64_t *ids = malloc(BATCH * sizeof(*ids));
	float *grads = calloc((size_t)BATCH * DIM, sizeof(float));
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < BATCH; i++)
			ids[i] = scramble(((uint64_t)g->tid << 32) + (uint64_t)r * BATCH + (uint64_t)i);
		emdb_ticket *tk = NULL;
		int rc = emdb_prefetch(g->db, g->table, ids, BATCH, &tk);
		if (rc == EMDB_ERR_NOMEM) {
			g->refused++;
			continue;
		}
		if (rc != EMDB_OK) {
			g->other++;
			continue;
		}
		g->inserted += BATCH;
		/* Its rows exist now: a Push by IDs grows only accumulators. */
		rc = emdb_push(g->db, g->table, ids, BATCH, DIM, grads);
		if (rc == EMDB_OK)
			g->pushed += BATCH;
		else if (rc == EMDB_ERR_NOMEM)
			g->refused++;
		else
			g->other++;
		emdb_ticket_free(tk);
	}
	free(grads);
	free(ids);
	return NULL;
}

Test(concurrency, refused_batches_race_cleanly_under_a_limit)
{
	emdb_db *db = open_db(16);
	grower g[THREADS];
	pthread_t th[THREADS];
	for (int i = 0; i < THREADS; i++) {
		char name[16];
		snprintf(name, sizeof(name), "t%d", i);
		g[i] = (grower){ .db = db, .tid = i };
		g[i].table = make_table(db, name, DIM, EMDB_OPT_SGD, EMDB_INIT_UNIFORM, -1, 1);
	}
	/* Room for about a third of what the threads try to insert. */
	emdb_alloc_set_limit(emdb_alloc_bytes() + (24u << 20));
	for (int i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, grow, &g[i]);
	int refused = 0;
	uint64_t inserted = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		refused += g[i].refused;
		inserted += g[i].inserted;
	}
	emdb_alloc_set_limit(0);
	for (int i = 0; i < THREADS; i++) {
		cr_assert_eq(g[i].other, 0, "thread %d: a call failed otherwise than NOMEM", i);
		emdb_table_info info;
		cr_assert_eq(emdb_table_describe(db, g[i].table, &info), 0);
		cr_assert_eq(info.stats.rows, g[i].inserted, "table %d: %llu rows, %llu accepted", i,
			     (unsigned long long)info.stats.rows, (unsigned long long)g[i].inserted);
		cr_assert_eq(info.stats.pending_rows, g[i].pushed, "table %d: %llu pending, %llu pushed", i,
			     (unsigned long long)info.stats.pending_rows, (unsigned long long)g[i].pushed);
	}
	cr_assert_gt(refused, 0, "the limit refused nothing: the test no longer tests refusals");
	cr_assert_gt(inserted, 0, "the limit refused everything");
	emdb_db_close(db);
}
