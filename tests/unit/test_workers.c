/*
 * test_workers.c - pushes that name their worker (emdb_push_as): the
 * gradients of several workers of one step summed per row in rank order,
 * whatever order their pushes arrive in.
 *
 * What a data-parallel trainer relies on: W = 2 and 3 workers pushing
 * overlapping IDs (plain, by ticket, as bags) in every arrival order leave
 * bit-identical rows and optimizer state after several steps; the sum is
 * exactly the one in rank order (a case where float order changes the
 * answer); one worker gets the bits an unranked push gets; a fused
 * Push+Update after ranked pushes includes them; a bad rank changes
 * nothing.  The data are order-sensitive: the same pushes without ranks
 * in two orders differ, so the equalities above are not vacuous.
 */
#include <stdlib.h>

#include <emdb/alloc.h>
#include <emdb/db.h>

#include "tests/lib/helpers.h"

enum { N = 96, DIM = 8, STEPS = 4, UNIVERSE = 64 };

/* Worker w's batch of step s: N IDs of a universe all workers share (so
 * they overlap, and repeat within a batch), gradients of magnitudes from
 * 1e-3 to 1e3 so that the order of float additions shows. */
static void worker_batch(int s, uint32_t w, uint64_t *ids, float *g)
{
	uint64_t x = 0x5eedu + (uint64_t)s * 977 + w * 131;
	for (size_t i = 0; i < N; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		ids[i] = scramble((x >> 33) % UNIVERSE);
	}
	for (size_t i = 0; i < (size_t)N * DIM; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		int e = (int)((x >> 40) % 7) - 3;
		float m = (float)((int)((x >> 20) % 2001) - 1000) / 1000.0f;
		float p = 1.0f;
		for (int k = 0; k < (e < 0 ? -e : e); k++)
			p = e < 0 ? p / 10.0f : p * 10.0f;
		g[i] = m * p;
	}
}

static emdb_db *open_one(uint32_t *t)
{
	emdb_db *db = open_db(16);
	*t = make_table(db, "t", DIM, EMDB_OPT_ADAM, EMDB_INIT_UNIFORM, -0.5, 0.5);
	return db;
}

/* Worker w's pushes of step s as `rank` (EMDB_WORKER_NONE: unranked):
 * its IDs plainly, the first half again by ticket, then bags of 4 (MEAN)
 * over the second half. */
static void worker_pushes(emdb_db *db, uint32_t t, int s, uint32_t w, uint32_t rank)
{
	uint64_t ids[N];
	float g[N * DIM];
	worker_batch(s, w, ids, g);
	emdb_push_batch b = { .ids = ids, .n = N, .dim = DIM, .grads = g };
	cr_assert_eq(emdb_push_as(db, t, rank, &b), 0, "%s", emdb_last_error());

	emdb_ticket *tk;
	cr_assert_eq(emdb_prefetch(db, t, ids, N / 2, &tk), 0);
	emdb_push_batch bt = { .ticket = tk, .dim = DIM, .grads = g + N / 2 * DIM };
	cr_assert_eq(emdb_push_as(db, t, rank, &bt), 0, "%s", emdb_last_error());
	emdb_ticket_free(tk);

	uint64_t off[N / 8 + 1];
	for (size_t k = 0; k <= N / 8; k++)
		off[k] = 4 * k;
	emdb_push_batch bb = { .ids = ids + N / 2, .n = N / 2, .offsets = off, .n_bags = N / 8,
			       .pool = EMDB_POOL_MEAN, .dim = DIM, .grads = g };
	cr_assert_eq(emdb_push_as(db, t, rank, &bb), 0, "%s", emdb_last_error());
}

/* STEPS steps; in each the W workers push in the order order[0..W)
 * (rotated by the step, so every worker is sometimes first), then the
 * Update.  ranked: each pushes as its own rank, else unranked. */
static void run(emdb_db *db, uint32_t t, const uint32_t *order, uint32_t W, bool ranked)
{
	for (int s = 0; s < STEPS; s++) {
		for (uint32_t k = 0; k < W; k++) {
			uint32_t w = order[(k + (uint32_t)s) % W];
			worker_pushes(db, t, s, w, ranked ? w : EMDB_WORKER_NONE);
		}
		cr_assert_eq(emdb_update(db, t, NULL), 0);
	}
}

/* Whether every row and its optimizer state are the same bits in a and b. */
static bool same_tables(emdb_db *a, uint32_t ta, emdb_db *b, uint32_t tb)
{
	uint64_t ids[UNIVERSE];
	static float va[UNIVERSE * DIM * 2], vb[UNIVERSE * DIM * 2];
	uint8_t fa[UNIVERSE], fb[UNIVERSE];
	for (uint64_t i = 0; i < UNIVERSE; i++)
		ids[i] = scramble(i);
	cr_assert_eq(emdb_lookup(a, ta, ids, UNIVERSE, DIM, va, fa), 0);
	cr_assert_eq(emdb_lookup(b, tb, ids, UNIVERSE, DIM, vb, fb), 0);
	if (memcmp(fa, fb, sizeof(fa)) || memcmp(va, vb, UNIVERSE * DIM * sizeof(float)))
		return false;
	cr_assert_eq(emdb_read_state(a, ta, ids, UNIVERSE, va, NULL), 0);
	cr_assert_eq(emdb_read_state(b, tb, ids, UNIVERSE, vb, NULL), 0);
	return memcmp(va, vb, sizeof(va)) == 0;
}

/* Every order of W workers against the first. */
static void all_orders_equal(uint32_t W)
{
	static const uint32_t orders3[6][3] = { { 0, 1, 2 }, { 0, 2, 1 }, { 1, 0, 2 },
						{ 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 } };
	static const uint32_t orders2[2][2] = { { 0, 1 }, { 1, 0 } };
	uint32_t n_orders = W == 3 ? 6 : 2;
	uint32_t tref;
	emdb_db *ref = open_one(&tref);
	run(ref, tref, W == 3 ? orders3[0] : orders2[0], W, true);
	for (uint32_t o = 1; o < n_orders; o++) {
		uint32_t t;
		emdb_db *db = open_one(&t);
		run(db, t, W == 3 ? orders3[o] : orders2[o], W, true);
		cr_assert(same_tables(ref, tref, db, t), "W=%u, order %u: rows or state differ from order 0", W, o);
		emdb_db_close(db);
	}
	emdb_db_close(ref);
}

Test(workers, two_workers_any_arrival_order)
{
	all_orders_equal(2);
}

Test(workers, three_workers_any_arrival_order)
{
	all_orders_equal(3);
}

/* The same pushes unranked depend on their order: the data would show a
 * sum made in arrival order. */
Test(workers, unranked_sums_follow_arrival)
{
	static const uint32_t fwd[3] = { 0, 1, 2 }, back[3] = { 2, 1, 0 };
	uint32_t ta, tb;
	emdb_db *a = open_one(&ta), *b = open_one(&tb);
	run(a, ta, fwd, 3, false);
	run(b, tb, back, 3, false);
	cr_assert(!same_tables(a, ta, b, tb), "the test data must be sensitive to the order of the sums");
	emdb_db_close(a);
	emdb_db_close(b);
}

/* SGD lr 1 from zero: the row is minus the gradient.  Worker 0 pushes 1,
 * worker 1 1e8, worker 2 -1e8, arriving 2, 1, 0: in rank order the sum is
 * (1 + 1e8) - 1e8 = 0 in float32, in arrival order (-1e8 + 1e8) + 1 = 1.
 * An unranked push of 0.5 comes first in either case. */
Test(workers, sum_is_in_rank_order)
{
	emdb_db *db = open_db(4);
	uint32_t t = make_sgd_lr1_table(db, 1);
	uint64_t id = 42;
	float none = 0.5f, g[3] = { 1.0f, 1e8f, -1e8f };
	emdb_push_batch b = { .ids = &id, .n = 1, .dim = 1 };
	for (int w = 2; w >= 0; w--) {
		b.grads = &g[w];
		cr_assert_eq(emdb_push_as(db, t, (uint32_t)w, &b), 0, "%s", emdb_last_error());
		if (w == 1) {
			cr_assert_eq(emdb_push(db, t, &id, 1, 1, &none), 0);
		}
	}
	emdb_table_info x;
	cr_assert_eq(emdb_table_describe(db, t, &x), 0);
	cr_assert_eq(x.stats.pending_rows, 4, "the shared row and three workers' rows wait");
	uint64_t rows = 0;
	cr_assert_eq(emdb_update(db, t, &rows), 0);
	cr_assert_eq(rows, 1);
	float v;
	cr_assert_eq(emdb_pull(db, t, &id, 1, 1, &v), 0);
	float want = -(((0.5f + 1.0f) + 1e8f) + -1e8f);
	cr_assert(v == want, "row %.9g, want %.9g (rank order)", v, want);
	cr_assert(v != -(((-1e8f + 1e8f) + 1.0f) + 0.5f));
	emdb_db_close(db);
}

/* One worker, ranked or not: the same bits. */
Test(workers, one_worker_as_unranked)
{
	static const uint32_t one[1] = { 0 };
	uint32_t ta, tb;
	emdb_db *a = open_one(&ta), *b = open_one(&tb);
	run(a, ta, one, 1, true);
	run(b, tb, one, 1, false);
	cr_assert(same_tables(a, ta, b, tb));
	emdb_db_close(a);
	emdb_db_close(b);
}

/* A fused Push+Update after ranked pushes applies them, summed in rank
 * order before its own gradients, whichever worker came first. */
Test(workers, push_update_after_ranked_pushes)
{
	uint32_t ta, tb;
	emdb_db *a = open_one(&ta), *b = open_one(&tb);
	uint64_t ids[N];
	float g[N * DIM];
	for (int s = 0; s < STEPS; s++) {
		worker_pushes(a, ta, s, 0, 0);
		worker_pushes(a, ta, s, 1, 1);
		worker_pushes(b, tb, s, 1, 1);
		worker_pushes(b, tb, s, 0, 0);
		worker_batch(s + 100, 2, ids, g);
		cr_assert_eq(emdb_push_update(a, ta, ids, N, DIM, g, NULL), 0, "%s", emdb_last_error());
		cr_assert_eq(emdb_push_update(b, tb, ids, N, DIM, g, NULL), 0, "%s", emdb_last_error());
	}
	cr_assert(same_tables(a, ta, b, tb));
	emdb_table_info x;
	cr_assert_eq(emdb_table_describe(a, ta, &x), 0);
	cr_assert_eq(x.stats.step, STEPS);
	cr_assert_eq(x.stats.pending_rows, 0);
	emdb_db_close(a);
	emdb_db_close(b);
}

Test(workers, bad_rank_changes_nothing)
{
	uint32_t t;
	emdb_db *db = open_one(&t);
	uint64_t ids[N];
	float g[N * DIM];
	worker_batch(0, 0, ids, g);
	emdb_push_batch b = { .ids = ids, .n = N, .dim = DIM, .grads = g };
	cr_assert_eq(emdb_push_as(db, t, EMDB_WORKERS_MAX, &b), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_push_as(db, t, 0, NULL), EMDB_ERR_INVALID);
	b.n_bags = 2; /* bags without offsets */
	cr_assert_eq(emdb_push_as(db, t, 0, &b), EMDB_ERR_INVALID);
	emdb_table_info x;
	cr_assert_eq(emdb_table_describe(db, t, &x), 0);
	cr_assert_eq(x.stats.rows, 0);
	cr_assert_eq(x.stats.pending_rows, 0);
	uint64_t rows = 1;
	cr_assert_eq(emdb_update(db, t, &rows), 0);
	cr_assert_eq(rows, 0);
	emdb_db_close(db);
}

/* Memory: a ranked push takes at most twice the accumulator memory of
 * the same push unranked (its worker's map and room in the shared one,
 * docs/engine.md), all of it checked against the memory limit first: a
 * ranked push that does not fit is refused with NOMEM and keeps nothing,
 * where the unranked one fits. */
enum { BIG = 40000, BDIM = 32 };

static size_t push_cost(uint32_t rank, size_t limit_over, int *rc)
{
	emdb_db *db = open_db(16);
	uint32_t t = make_table(db, "m", BDIM, EMDB_OPT_SGD, EMDB_INIT_ZEROS, 0, 0);
	static uint64_t ids[BIG];
	static float g[BIG * BDIM];
	for (size_t i = 0; i < BIG; i++)
		ids[i] = scramble(i);
	for (size_t i = 0; i < (size_t)BIG * BDIM; i++)
		g[i] = 1.0f;
	emdb_ticket *tk;
	cr_assert_eq(emdb_prefetch(db, t, ids, BIG, &tk), 0);
	size_t before = emdb_alloc_bytes();
	if (limit_over)
		emdb_alloc_set_limit(before + limit_over);
	emdb_push_batch b = { .ticket = tk, .dim = BDIM, .grads = g };
	*rc = emdb_push_as(db, t, rank, &b);
	size_t cost = emdb_alloc_bytes() - before;
	emdb_alloc_set_limit(0);
	if (*rc != EMDB_OK) {
		emdb_table_info x;
		cr_assert_eq(emdb_table_describe(db, t, &x), 0);
		cr_assert_eq(x.stats.pending_rows, 0);
		uint64_t rows = 1;
		cr_assert_eq(emdb_update(db, t, &rows), 0);
		cr_assert_eq(rows, 0, "a refused push left gradients");
	}
	emdb_ticket_free(tk);
	emdb_db_close(db);
	return cost;
}

Test(workers, memory_is_bounded_and_checked_first)
{
	int rc;
	size_t plain = push_cost(EMDB_WORKER_NONE, 0, &rc);
	cr_assert_eq(rc, EMDB_OK);
	size_t ranked = push_cost(1, 0, &rc);
	cr_assert_eq(rc, EMDB_OK);
	cr_assert_gt(ranked, plain);
	cr_assert_leq(ranked, 2 * plain + 16 * 4 * 64, "ranked %zu, plain %zu",
		      ranked, plain);
	size_t room = plain + plain / 2;
	size_t kept = push_cost(1, room, &rc);
	cr_assert_eq(rc, EMDB_ERR_NOMEM, "a ranked push over the limit: %d", rc);
	cr_assert(strstr(emdb_last_error(), "memory limit"), "%s", emdb_last_error());
	cr_assert_eq(kept, 0, "the refused push kept %zu bytes", kept);
	(void)push_cost(EMDB_WORKER_NONE, room, &rc);
	cr_assert_eq(rc, EMDB_OK, "the same push unranked fits: %s", emdb_last_error());
}
