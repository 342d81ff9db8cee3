/*
 * test_ids.c - every uint64 is an ID: 0 and 2^64-1 (and their neighbours)
 * go through every operation of the engine as any other ID does, so no
 * map or table may use a key value as its empty-slot marker.
 *
 * Pushes are checked against numbers a user can compute by hand (SGD with
 * lr 1 and zero initial values: a row is minus the sum of its gradients),
 * and Push-and-Update against Push then Update in a twin database, bit for
 * bit, with the extreme IDs repeated in one batch.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>

#include <emdb/checkpoint.h>
#include <emdb/db.h>

#include "tests/lib/helpers.h"
#include "tests/lib/tmpdir.h"

#define M UINT64_MAX

/* The IDs of the tests: the extremes first, so they come before any
 * ordinary ID in a batch. */
static const uint64_t extreme[4] = { M, 0, M - 1, 1 };

/* Adagrad (the case): M, M, 3, M by IDs must give what Push then
 * Update give, the three gradients of M summed into one accumulator, and
 * two rows updated. */
static void push_update_matches(const uint64_t *ids, size_t n, uint64_t want_rows)
{
	emdb_db *ref = open_db(4), *db = open_db(4);
	uint32_t tr = make_table(ref, "t", 2, EMDB_OPT_ADAGRAD, EMDB_INIT_UNIFORM, -0.5, 0.5);
	uint32_t t = make_table(db, "t", 2, EMDB_OPT_ADAGRAD, EMDB_INIT_UNIFORM, -0.5, 0.5);
	float g[16];
	for (size_t i = 0; i < 2 * n; i++)
		g[i] = 0.5f / (float)(1u << (i / 2));
	uint64_t ra = 0, rb = 0;
	cr_assert_eq(emdb_push(ref, tr, ids, n, 2, g), 0);
	cr_assert_eq(emdb_update(ref, tr, &ra), 0);
	cr_assert_eq(emdb_push_update(db, t, ids, n, 2, g, &rb), 0, "%s", emdb_last_error());
	cr_assert_eq(ra, want_rows);
	cr_assert_eq(rb, want_rows, "push_update updated %llu rows, want %llu", (unsigned long long)rb,
		     (unsigned long long)want_rows);
	float a[16], b[16], sa[32], sb[32];
	cr_assert_eq(emdb_lookup(ref, tr, ids, n, 2, a, NULL), 0);
	cr_assert_eq(emdb_lookup(db, t, ids, n, 2, b, NULL), 0);
	cr_assert_eq(emdb_read_state(ref, tr, ids, n, sa, NULL), 0);
	cr_assert_eq(emdb_read_state(db, t, ids, n, sb, NULL), 0);
	cr_assert_eq(memcmp(a, b, n * 2 * sizeof(float)), 0, "weights equal push then update");
	cr_assert_eq(memcmp(sa, sb, n * 2 * sizeof(float)), 0, "Adagrad accumulators equal push then update");
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	cr_assert_eq(info.stats.rows, want_rows);
	emdb_db_close(ref);
	emdb_db_close(db);
}

Test(ids, push_update_sums_repeats_of_the_largest_id)
{
	const uint64_t ids[4] = { M, M, 3, M };
	push_update_matches(ids, 4, 2);
	/* 0.5^2 + 0.25^2 + 0.125^2 would be three rows' worth; the sum is one. */
	emdb_db *db = open_db(4);
	uint32_t t = make_table(db, "t", 2, EMDB_OPT_ADAGRAD, EMDB_INIT_ZEROS, 0, 0);
	float g[8] = { 0.5f, 0.5f, 0.25f, 0.25f, 1, 1, 0.125f, 0.125f };
	uint64_t rows = 0;
	cr_assert_eq(emdb_push_update(db, t, ids, 4, 2, g, &rows), 0);
	cr_assert_eq(rows, 2);
	float st[2];
	cr_assert_eq(emdb_read_state(db, t, &ids[0], 1, st, NULL), 0);
	emdb_table_config cfg;
	cr_assert_eq(emdb_table_get_config(db, t, &cfg), 0);
	float want = (float)cfg.optimizer.initial_accumulator + 0.875f * 0.875f;
	cr_assert_float_eq(st[0], want, 1e-6, "accumulator %g, want %g (0.625^2 of one summed gradient)", st[0],
			   want);
	emdb_db_close(db);
}

Test(ids, push_update_with_zero_and_largest_mixed)
{
	const uint64_t ids[7] = { 0, M, 0, M - 1, M, 1, 0 };
	push_update_matches(ids, 7, 4);
}

/* Prefetch, Pull (IDs, ticket, bags), Push (IDs, ticket, bags), Update,
 * Lookup and read_state, with the extreme IDs and repeats of them. */
Test(ids, every_operation_takes_the_extreme_ids)
{
	emdb_db *db = open_db(8);
	uint32_t t = make_sgd_lr1_table(db, 2);
	float v[16];
	uint8_t found[8];

	/* Not held yet: Lookup gives the default and inserts nothing. */
	cr_assert_eq(emdb_lookup(db, t, extreme, 4, 2, v, found), 0);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(found[i], 0, "ID %llu held before any insert", (unsigned long long)extreme[i]);

	const uint64_t batch[8] = { M, 0, M, M - 1, 0, 1, M, 0 };
	emdb_ticket *tk = NULL;
	cr_assert_eq(emdb_prefetch(db, t, batch, 8, &tk), 0, "%s", emdb_last_error());
	cr_assert_eq(emdb_ticket_count(tk), 8);
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	cr_assert_eq(info.stats.rows, 4, "four distinct IDs held");

	/* Push by ticket: each position's gradient is its index + 1. */
	float g[16];
	for (int i = 0; i < 16; i++)
		g[i] = (float)(i / 2 + 1);
	cr_assert_eq(emdb_push_ticket(db, t, tk, 2, g), 0);
	/* Push by IDs: the same batch once more. */
	cr_assert_eq(emdb_push(db, t, batch, 8, 2, g), 0);
	/* Push by bags: bag 0 = {M, 0}, bag 1 = {M-1} with SUM. */
	const uint64_t bag_ids[3] = { M, 0, M - 1 };
	const uint64_t off[3] = { 0, 2, 3 };
	float bg[4] = { 100, 100, 1000, 1000 };
	cr_assert_eq(emdb_push_bags(db, t, bag_ids, 3, off, 2, EMDB_POOL_SUM, 2, bg), 0);
	uint64_t rows = 0;
	cr_assert_eq(emdb_update(db, t, &rows), 0);
	cr_assert_eq(rows, 4, "four rows updated");

	/* Row of M: positions 0, 2, 6 twice (ticket and IDs), plus 100. */
	const float want[4] = { -(2 * (1 + 3 + 7) + 100), -(2 * (2 + 5 + 8) + 100), -(2 * 4 + 1000),
				-(2 * 6) };
	cr_assert_eq(emdb_lookup(db, t, extreme, 4, 2, v, found), 0);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(found[i], 1);
		cr_assert_eq(v[2 * i], want[i], "ID %llu: %g, want %g", (unsigned long long)extreme[i], v[2 * i],
			     want[i]);
		cr_assert_eq(v[2 * i + 1], want[i]);
	}
	/* Pull by IDs and by ticket see the same rows in request order. */
	float p[16], q[16];
	cr_assert_eq(emdb_pull(db, t, batch, 8, 2, p), 0);
	cr_assert_eq(emdb_pull_ticket(db, t, tk, 2, q), 0);
	cr_assert_eq(memcmp(p, q, sizeof(p)), 0);
	cr_assert_eq(p[0], want[0]);
	cr_assert_eq(p[2], want[1]);
	cr_assert_eq(p[6], want[2]);
	/* Pooled: bag {M, 0} sums their rows. */
	float pooled[4];
	cr_assert_eq(emdb_pull_bags(db, t, bag_ids, 3, off, 2, EMDB_POOL_SUM, 2, pooled), 0);
	cr_assert_eq(pooled[0], want[0] + want[1]);
	cr_assert_eq(pooled[2], want[2]);
	float st[8];
	cr_assert_eq(emdb_read_state(db, t, extreme, 4, st, found), 0);
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	cr_assert_eq(info.stats.rows, 4, "still four rows");
	emdb_ticket_free(tk);
	emdb_db_close(db);
}

/* A checkpoint holds the extreme IDs and a restore gives them back. */
Test(ids, checkpoint_round_trip_of_the_extreme_ids)
{
	char dir[] = "/tmp/emdb-ids-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	emdb_db *db = open_db(4);
	uint32_t t = make_sgd_lr1_table(db, 2);
	float g[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	cr_assert_eq(emdb_push(db, t, extreme, 4, 2, g), 0);
	cr_assert_eq(emdb_update(db, t, NULL), 0);
	emdb_store *st = NULL;
	cr_assert_eq(emdb_store_open(dir, &st), 0, "%s", emdb_last_error());
	emdb_ckpt_info ck;
	cr_assert_eq(emdb_checkpoint(db, st, EMDB_CKPT_FULL, &ck), 0, "%s", emdb_last_error());
	emdb_db *back = open_db(4);
	cr_assert_eq(emdb_restore(back, st, ck.id, NULL), 0, "%s", emdb_last_error());
	uint32_t tb;
	cr_assert_eq(emdb_table_find(back, "t", &tb), 0);
	float v[8];
	uint8_t found[4];
	cr_assert_eq(emdb_lookup(back, tb, extreme, 4, 2, v, found), 0);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(found[i], 1, "ID %llu restored", (unsigned long long)extreme[i]);
		cr_assert_eq(v[2 * i], -g[2 * i]);
		cr_assert_eq(v[2 * i + 1], -g[2 * i + 1]);
	}
	emdb_db_close(back);
	emdb_db_close(db);
	emdb_store_close(st);
	cr_assert_eq(tmpdir_remove(dir), 0);
}
