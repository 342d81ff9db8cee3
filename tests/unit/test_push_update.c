/*
 * test_push_update.c - emdb_push_update, Push and Update in one call.
 *
 * What a trainer relies on: the call gives exactly the rows and optimizer
 * state that emdb_push followed by emdb_update give, bit for bit, for
 * every optimizer, by IDs and by ticket, with duplicate IDs in the batch,
 * new IDs, and gradients pushed before the call (which it must apply
 * too); the step advances once; and bad input changes nothing.
 *
 * The reference runs in a database of its own: initial values depend on
 * the table's id, so the twin table must have the same id in each.
 */
#include <stdlib.h>

#include <emdb/alloc.h>
#include <emdb/db.h>

#include "base/alloc_fault.h"
#include "tests/lib/helpers.h"

enum { STEPS = 6 };

typedef struct twin {
	emdb_db *ref, *db;   /* ref: push + update; db: push_update */
	uint32_t tref, t;
	uint32_t dim;
} twin;

static void twin_open(twin *w, uint32_t shards, emdb_opt_kind opt, uint32_t dim)
{
	w->dim = dim;
	w->ref = open_db(shards);
	w->db = open_db(shards);
	w->tref = make_table(w->ref, "t", dim, opt, EMDB_INIT_UNIFORM, -0.5, 0.5);
	w->t = make_table(w->db, "t", dim, opt, EMDB_INIT_UNIFORM, -0.5, 0.5);
	cr_assert_eq(w->tref, w->t);
}

static void twin_close(twin *w)
{
	emdb_db_close(w->ref);
	emdb_db_close(w->db);
}

/* Step s's batch of n: IDs drawn from a universe that grows by a tenth of
 * n a step (so each step also inserts new IDs), with duplicates. */
static void make_batch(int s, size_t n, uint32_t dim, uint64_t *ids, float *g)
{
	uint64_t universe = n / 2 + (uint64_t)s * (n / 10);
	uint64_t x = 0x9e37u + (uint64_t)s;
	for (size_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		ids[i] = scramble((x >> 33) % universe);
	}
	for (size_t i = 0; i < n * dim; i++)
		g[i] = (float)((int)((i * 7 + (size_t)s * 3) % 17) - 8) * 0.01f;
}

/* Every row and state of the universe, equal in both databases. */
static void assert_twins_equal(const twin *w, size_t n)
{
	uint64_t universe = n / 2 + (uint64_t)STEPS * (n / 10);
	uint64_t *ids = malloc(universe * sizeof(uint64_t));
	size_t sf = 2 * (size_t)w->dim + 2; /* more than any optimizer's state per row */
	float *a = calloc(universe * sf, sizeof(float)), *b = calloc(universe * sf, sizeof(float));
	uint8_t *fa = malloc(universe), *fb = malloc(universe);
	cr_assert(ids && a && b && fa && fb);
	for (uint64_t i = 0; i < universe; i++)
		ids[i] = scramble(i);
	cr_assert_eq(emdb_lookup(w->ref, w->tref, ids, universe, w->dim, a, fa), 0);
	cr_assert_eq(emdb_lookup(w->db, w->t, ids, universe, w->dim, b, fb), 0);
	cr_assert_eq(memcmp(fa, fb, universe), 0, "the same IDs are held");
	for (uint64_t i = 0; i < universe * w->dim; i++)
		cr_assert_eq(a[i], b[i], "weight %llu: %.9g against %.9g", (unsigned long long)i, b[i], a[i]);
	cr_assert_eq(emdb_read_state(w->ref, w->tref, ids, universe, a, NULL), 0);
	cr_assert_eq(emdb_read_state(w->db, w->t, ids, universe, b, NULL), 0);
	cr_assert_eq(memcmp(a, b, universe * sf * sizeof(float)), 0, "optimizer state equal");
	emdb_table_info x, y;
	cr_assert_eq(emdb_table_describe(w->ref, w->tref, &x), 0);
	cr_assert_eq(emdb_table_describe(w->db, w->t, &y), 0);
	cr_assert_eq(y.stats.step, x.stats.step);
	cr_assert_eq(y.stats.rows, x.stats.rows);
	cr_assert_eq(y.stats.pending_rows, 0);
	cr_assert_eq(y.stats.rows_updated, x.stats.rows_updated);
	free(ids);
	free(a);
	free(b);
	free(fa);
	free(fb);
}

/* STEPS steps of n IDs on both twins; odd steps first push a batch of
 * another step (gradients waiting when the call comes); steps alternate
 * IDs and tickets. */
static void run_twins(emdb_opt_kind opt, uint32_t shards, size_t n, uint32_t dim)
{
	twin w;
	twin_open(&w, shards, opt, dim);
	uint64_t *ids = malloc(n * sizeof(uint64_t)), *pend = malloc(n * sizeof(uint64_t));
	float *g = malloc(n * dim * sizeof(float)), *pg = malloc(n * dim * sizeof(float));
	cr_assert(ids && pend && g && pg);
	for (int s = 0; s < STEPS; s++) {
		make_batch(s, n, dim, ids, g);
		if (s % 2) {
			make_batch(s + 100, n, dim, pend, pg);
			cr_assert_eq(emdb_push(w.ref, w.tref, pend, n, dim, pg), 0);
			cr_assert_eq(emdb_push(w.db, w.t, pend, n, dim, pg), 0);
		}
		uint64_t ra = 0, rb = 0;
		if (s % 3 == 2) {
			emdb_ticket *ta, *tb;
			cr_assert_eq(emdb_prefetch(w.ref, w.tref, ids, n, &ta), 0);
			cr_assert_eq(emdb_prefetch(w.db, w.t, ids, n, &tb), 0);
			cr_assert_eq(emdb_push_ticket(w.ref, w.tref, ta, dim, g), 0);
			cr_assert_eq(emdb_update(w.ref, w.tref, &ra), 0);
			cr_assert_eq(emdb_push_update_ticket(w.db, w.t, tb, dim, g, &rb), 0, "%s",
				     emdb_last_error());
			emdb_ticket_free(ta);
			emdb_ticket_free(tb);
		} else {
			cr_assert_eq(emdb_push(w.ref, w.tref, ids, n, dim, g), 0);
			cr_assert_eq(emdb_update(w.ref, w.tref, &ra), 0);
			cr_assert_eq(emdb_push_update(w.db, w.t, ids, n, dim, g, &rb), 0, "%s", emdb_last_error());
		}
		cr_assert_eq(rb, ra, "step %d: %llu rows updated, push + update %llu", s,
			     (unsigned long long)rb, (unsigned long long)ra);
		cr_assert_lt(ra, n + (s % 2 ? n : 0), "the batch holds duplicates");
	}
	assert_twins_equal(&w, n);
	free(ids);
	free(pend);
	free(g);
	free(pg);
	twin_close(&w);
}

Test(push_update, sgd_equals_push_then_update)
{
	run_twins(EMDB_OPT_SGD, 64, 3000, 8);
}

Test(push_update, adagrad_equals_push_then_update)
{
	run_twins(EMDB_OPT_ADAGRAD, 64, 3000, 8);
}

Test(push_update, rowwise_adagrad_equals_push_then_update)
{
	run_twins(EMDB_OPT_ROWWISE_ADAGRAD, 16, 1000, 8);
}

Test(push_update, adam_equals_push_then_update)
{
	run_twins(EMDB_OPT_ADAM, 64, 3000, 8);
}

Test(push_update, ftrl_equals_push_then_update)
{
	run_twins(EMDB_OPT_FTRL, 16, 1000, 8);
}

/* One shard: all of a large batch in one group, duplicates throughout. */
Test(push_update, one_shard_large_batch)
{
	run_twins(EMDB_OPT_ADAM, 1, 5000, 8);
}

/* A batch whose gradients outgrow the core's cache (over 8 MB: 40000 IDs
 * of dim 64) takes the prefetching paths of the grouping and the pass. */
Test(push_update, batch_larger_than_the_cache)
{
	run_twins(EMDB_OPT_ADAGRAD, 64, 40000, 64);
}

/* A row the batch holds once, with no gradient waiting, is applied from
 * the caller's buffer; a row held twice is summed first; a row with a
 * gradient waiting (7, held twice) goes through the accumulators.  All of
 * them in one call, checked by value (SGD, lr 1, zero rows: a row is
 * minus the sum of what was pushed to it). */
Test(push_update, single_duplicate_and_waiting_rows)
{
	emdb_db *db = open_db(4);
	uint32_t t = make_sgd_lr1_table(db, 2);
	uint64_t wait_id = 7;
	float wait_g[2] = { 100, 200 };
	cr_assert_eq(emdb_push(db, t, &wait_id, 1, 2, wait_g), 0);
	uint64_t ids[7] = { 1, 2, 7, 2, 3, 7, 9 };
	float g[14] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14 };
	uint64_t rows = 0;
	cr_assert_eq(emdb_push_update(db, t, ids, 7, 2, g, &rows), 0);
	cr_assert_eq(rows, 5, "rows 1, 2, 3, 7 and 9");
	uint64_t q[5] = { 1, 2, 3, 7, 9 };
	float v[10];
	cr_assert_eq(emdb_lookup(db, t, q, 5, 2, v, NULL), 0);
	float want[10] = { -1, -2, -(3 + 7), -(4 + 8), -9, -10, -(100 + 5 + 11), -(200 + 6 + 12), -13, -14 };
	for (int i = 0; i < 10; i++)
		cr_assert_eq(v[i], want[i], "value %d: %g, want %g", i, v[i], want[i]);
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	cr_assert_eq(info.stats.step, 1);
	cr_assert_eq(info.stats.pending_rows, 0);
	cr_assert_eq(info.stats.calls_push, 2);
	cr_assert_eq(info.stats.calls_update, 1);
	emdb_db_close(db);
}

/* Bad input: a clear error, and the table as it was (no row, no step). */
Test(push_update, bad_input_changes_nothing)
{
	emdb_db *db = open_db(4);
	uint32_t t = make_table(db, "t", 4, EMDB_OPT_ADAM, EMDB_INIT_NORMAL, 0, 1);
	uint32_t u = make_table(db, "u", 4, EMDB_OPT_SGD, EMDB_INIT_ZEROS, 0, 0);
	uint64_t ids[3] = { 1, 2, 3 };
	float g[12] = { 0 };
	emdb_ticket *tu;
	cr_assert_eq(emdb_prefetch(db, u, ids, 3, &tu), 0);

	cr_assert_eq(emdb_push_update(db, 99, ids, 3, 4, g, NULL), EMDB_ERR_NO_TABLE);
	cr_assert_eq(emdb_push_update(db, t, ids, 3, 5, g, NULL), EMDB_ERR_DIM);
	cr_assert(strstr(emdb_last_error(), "dim"), "%s", emdb_last_error());
	cr_assert_eq(emdb_push_update(db, t, ids, 0, 4, g, NULL), EMDB_ERR_BATCH);
	cr_assert_eq(emdb_push_update(db, t, ids, 3, 4, NULL, NULL), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_push_update(db, t, NULL, 3, 4, g, NULL), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_push_update_ticket(db, t, NULL, 4, g, NULL), EMDB_ERR_INVALID);
	int rc = emdb_push_update_ticket(db, t, tu, 4, g, NULL);
	cr_assert_neq(rc, EMDB_OK, "a ticket of another table is refused");
	cr_assert(strstr(emdb_last_error(), "ticket"), "%s", emdb_last_error());

	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	cr_assert_eq(info.stats.rows, 0);
	cr_assert_eq(info.stats.step, 0);
	cr_assert_eq(info.stats.calls_push, 0);
	cr_assert_eq(emdb_table_describe(db, u, &info), 0);
	cr_assert_eq(info.stats.step, 0);
	cr_assert_eq(info.stats.pending_rows, 0);
	emdb_ticket_free(tu);
	emdb_db_close(db);
}

/* An allocation failing anywhere in the call, including while it makes
 * room in accumulators that hold other pushes' gradients (then rows of
 * the batch must be taken back into them), changes nothing: no row, no
 * gradient, no step.  The call that finally succeeds applies both the
 * waiting gradients and the batch. */
Test(push_update, allocation_failure_changes_nothing)
{
	emdb_db *db = open_db(64);
	uint32_t t = make_table(db, "t", 4, EMDB_OPT_ADAM, EMDB_INIT_NORMAL, 0, 1);
	enum { WAIT = 2000, N = 3000 };
	static uint64_t ids[N], all[N + WAIT];
	static float g[N * 4], v0[(N + WAIT) * 4], v1[(N + WAIT) * 4];
	static float s0[(N + WAIT) * 8], s1[(N + WAIT) * 8];
	for (int i = 0; i < N * 4; i++)
		g[i] = 0.01f * (float)(i % 7 + 1);
	for (int i = 0; i < WAIT; i++)
		ids[i] = scramble((uint64_t)i);
	cr_assert_eq(emdb_push(db, t, ids, WAIT, 4, g), 0);
	for (int i = 0; i < N; i++) /* a third of them waiting, the rest new */
		ids[i] = scramble((uint64_t)(i + WAIT / 2));
	for (int i = 0; i < N + WAIT; i++)
		all[i] = scramble((uint64_t)i);
	emdb_table_info before, after;
	cr_assert_eq(emdb_table_describe(db, t, &before), 0);
	cr_assert_eq(emdb_lookup(db, t, all, N + WAIT, 4, v0, NULL), 0);
	cr_assert_eq(emdb_read_state(db, t, all, N + WAIT, s0, NULL), 0);
	int k = 0, rc;
	for (;; k++) {
		emdb_alloc_fail_after((uint64_t)k);
		rc = emdb_push_update(db, t, ids, N, 4, g, NULL);
		emdb_alloc_fail_reset();
		if (rc == EMDB_OK)
			break;
		cr_assert_eq(rc, EMDB_ERR_NOMEM, "allocation %d failing: %s", k, emdb_last_error());
		cr_assert_eq(emdb_table_describe(db, t, &after), 0);
		cr_assert_eq(after.stats.rows, before.stats.rows);
		cr_assert_eq(after.stats.pending_rows, before.stats.pending_rows);
		cr_assert_eq(after.stats.step, before.stats.step);
		cr_assert_eq(emdb_lookup(db, t, all, N + WAIT, 4, v1, NULL), 0);
		cr_assert_eq(emdb_read_state(db, t, all, N + WAIT, s1, NULL), 0);
		cr_assert_eq(memcmp(v0, v1, sizeof(v0)), 0, "allocation %d failing changed a row", k);
		cr_assert_eq(memcmp(s0, s1, sizeof(s0)), 0, "allocation %d failing changed a state", k);
		cr_assert_lt(k, 10000);
	}
	cr_assert_gt(k, 8, "expected the accumulators' growth among the allocations, got %d", k);
	cr_assert_eq(emdb_table_describe(db, t, &after), 0);
	cr_assert_eq(after.stats.step, before.stats.step + 1);
	cr_assert_eq(after.stats.pending_rows, 0);
	emdb_db_close(db);
}
