/*
 * test_conc_scan.c - scan, load and alter while training runs.
 *
 * Two threads push and update (old IDs and new ones), one loads rows and
 * one alters the learning rate, while the main thread scans the table
 * page after page.  Every row the table held before the scan comes back
 * exactly once, and no page shows a torn row: every row keeps all its
 * columns equal (zero initial values, gradients and loaded rows with
 * equal columns, SGD), so a row read half before and half after a write
 * would show two values.  This file runs under ThreadSanitizer in CI
 * (label "concurrency").
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/db.h>

#include "tests/lib/helpers.h"

enum { PRE = 4000, DIM = 8, BATCH = 256, PAGE = 128 };

typedef struct ctx {
	emdb_db *db;
	uint32_t t;
	int tid;
	atomic_int *stop;
} ctx;

static void *trainer(void *arg)
{
	ctx *x = arg;
	uint64_t ids[BATCH];
	static _Thread_local float g[BATCH * DIM];
	for (int r = 0; r < 400 && !atomic_load(x->stop); r++) {
		for (int i = 0; i < BATCH; i++) {
			uint64_t k = i % 2 ? (uint64_t)(r * 131 + i * 7) % PRE
					   : PRE + (uint64_t)x->tid * 1000000 + (uint64_t)r * BATCH + (uint64_t)i;
			ids[i] = scramble(k);
			for (int c = 0; c < DIM; c++)
				g[i * DIM + c] = (float)((r + i) % 5) - 2.0f;
		}
		cr_assert_eq(emdb_push(x->db, x->t, ids, BATCH, DIM, g), 0, "%s", emdb_last_error());
		cr_assert_eq(emdb_update(x->db, x->t, NULL), 0);
	}
	return NULL;
}

static void *loader(void *arg)
{
	ctx *x = arg;
	uint64_t ids[32];
	float v[32 * DIM];
	for (int r = 0; !atomic_load(x->stop); r++) {
		for (int i = 0; i < 32; i++) {
			ids[i] = scramble((uint64_t)(r * 37 + i * 101) % PRE);
			for (int c = 0; c < DIM; c++)
				v[i * DIM + c] = (float)(r % 100);
		}
		cr_assert_eq(emdb_table_load(x->db, x->t, ids, 32, DIM, v, NULL), 0, "%s", emdb_last_error());
	}
	return NULL;
}

static void *alterer(void *arg)
{
	ctx *x = arg;
	for (int r = 0; !atomic_load(x->stop); r++) {
		emdb_table_config cfg;
		cr_assert_eq(emdb_table_get_config(x->db, x->t, &cfg), 0);
		cfg.optimizer.lr = r % 2 ? 0.02 : 0.01;
		cr_assert_eq(emdb_table_alter(x->db, x->t, &cfg.optimizer), 0, "%s", emdb_last_error());
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t p = *(const uint64_t *)a, q = *(const uint64_t *)b;
	return p < q ? -1 : p > q;
}

Test(conc_scan, every_row_once_and_none_torn_while_training)
{
	emdb_db *db = open_db(16);
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	strcpy(cfg.name, "t");
	cfg.dim = DIM;
	uint32_t t;
	cr_assert_eq(emdb_table_create(db, &cfg, &t), 0);
	uint64_t *pre = malloc(PRE * 8);
	float *zero = calloc(PRE * DIM, 4);
	for (int i = 0; i < PRE; i++)
		pre[i] = scramble((uint64_t)i);
	cr_assert_eq(emdb_table_load(db, t, pre, PRE, DIM, zero, NULL), 0);

	atomic_int stop = 0;
	ctx cx[4];
	pthread_t th[4];
	void *(*fn[4])(void *) = { trainer, trainer, loader, alterer };
	for (int i = 0; i < 4; i++) {
		cx[i] = (ctx){ db, t, i, &stop };
		cr_assert_eq(pthread_create(&th[i], NULL, fn[i], &cx[i]), 0);
	}
	size_t cap = 1 << 16;
	uint64_t *seen = malloc(cap * 8), ids[PAGE];
	float v[PAGE * DIM];
	for (int scan = 0; scan < 4; scan++) { /* four whole scans while they run */
		size_t got = 0;
		uint64_t cursor = 0;
		int pages = 0;
		do {
			size_t n;
			cr_assert_eq(emdb_table_scan(db, t, cursor, PAGE, DIM, ids, v, NULL, &n, &cursor, NULL), 0,
				     "%s", emdb_last_error());
			for (size_t i = 0; i < n; i++) {
				for (int c = 1; c < DIM; c++)
					cr_assert_eq(v[i * DIM + c], v[i * DIM], "a torn row: ID %llu column %d",
						     (unsigned long long)ids[i], c);
				if (got == cap) {
					cap *= 2;
					seen = realloc(seen, cap * 8);
				}
				seen[got++] = ids[i];
			}
			cr_assert_lt(++pages, 100000, "the scan does not end");
		} while (cursor);
		qsort(seen, got, 8, cmp_u64);
		for (size_t i = 1; i < got; i++)
			cr_assert_neq(seen[i], seen[i - 1], "ID %llu scanned twice", (unsigned long long)seen[i]);
		for (int i = 0; i < PRE; i++)
			cr_assert_not_null(bsearch(&pre[i], seen, got, 8, cmp_u64), "ID %llu never scanned",
					   (unsigned long long)pre[i]);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	free(seen);
	free(pre);
	free(zero);
	emdb_db_close(db);
}
