/*
 * test_conc_workers.c - workers of a data-parallel step pushing at the
 * same time, each as its rank (emdb_push_as), into one engine: after
 * every step's Update the rows and optimizer state are bit-identical to
 * the same pushes made one worker after another in rank order, however
 * the threads interleave (and under ThreadSanitizer, with no race).  And
 * Updates racing ranked pushes: a push then lands in one step or the
 * next, whole, so that run is checked for losing and doubling nothing
 * rather than for bits.
 */
#include <pthread.h>
#include <stdlib.h>

#include <emdb/db.h>

#include "tests/lib/helpers.h"

enum { W = 3, STEPS = 12, PUSHES = 4, N = 256, DIM = 8, U = 200 };

typedef struct worker {
	emdb_db *db;
	uint32_t table;
	uint32_t rank;
	int step;
	pthread_barrier_t *go;
	int rc;
} worker;

static void batch(int s, uint32_t w, int k, uint64_t *ids, float *g)
{
	uint64_t x = 0x1234u + (uint64_t)s * 65537 + w * 257 + (uint64_t)k * 17;
	static const float mag[5] = { 1e-3f, 1e-1f, 1.0f, 1e2f, -1e3f };
	for (size_t i = 0; i < N; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		ids[i] = scramble((x >> 33) % U);
	}
	for (size_t i = 0; i < (size_t)N * DIM; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		g[i] = mag[(x >> 40) % 5] * (float)((x >> 20) % 999 + 1) / 1000.0f;
	}
}

static void pushes(emdb_db *db, uint32_t t, int s, uint32_t w, int *rc)
{
	uint64_t ids[N];
	static __thread float g[N * DIM];
	for (int k = 0; k < PUSHES && !*rc; k++) {
		batch(s, w, k, ids, g);
		emdb_push_batch b = { .ids = ids, .n = N, .dim = DIM, .grads = g };
		*rc = emdb_push_as(db, t, w, &b);
	}
}

static void *worker_main(void *arg)
{
	worker *k = arg;
	pthread_barrier_wait(k->go);
	pushes(k->db, k->table, k->step, k->rank, &k->rc);
	return NULL;
}

static void snapshot(emdb_db *db, uint32_t t, float *out)
{
	uint64_t ids[U];
	for (uint64_t i = 0; i < U; i++)
		ids[i] = scramble(i);
	cr_assert_eq(emdb_lookup(db, t, ids, U, DIM, out, NULL), 0);
	cr_assert_eq(emdb_read_state(db, t, ids, U, out + U * DIM, NULL), 0);
}

Test(conc_workers, concurrent_ranked_pushes_equal_rank_order)
{
	emdb_db *par = open_db(16), *seq = open_db(16);
	uint32_t tp = make_table(par, "t", DIM, EMDB_OPT_ADAM, EMDB_INIT_UNIFORM, -0.1, 0.1);
	uint32_t ts = make_table(seq, "t", DIM, EMDB_OPT_ADAM, EMDB_INIT_UNIFORM, -0.1, 0.1);
	static float a[U * DIM * 3], b[U * DIM * 3];
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, W);
	for (int s = 0; s < STEPS; s++) {
		worker k[W];
		pthread_t th[W];
		for (uint32_t w = 0; w < W; w++) {
			k[w] = (worker){ par, tp, w, s, &go, 0 };
			cr_assert_eq(pthread_create(&th[w], NULL, worker_main, &k[w]), 0);
		}
		for (uint32_t w = 0; w < W; w++) {
			pthread_join(th[w], NULL);
			cr_assert_eq(k[w].rc, 0, "step %d, worker %u: %s", s, w, emdb_last_error());
		}
		cr_assert_eq(emdb_update(par, tp, NULL), 0);
		int rc = 0;
		for (uint32_t w = 0; w < W; w++)
			pushes(seq, ts, s, w, &rc);
		cr_assert_eq(rc, 0);
		cr_assert_eq(emdb_update(seq, ts, NULL), 0);
		snapshot(par, tp, a);
		snapshot(seq, ts, b);
		cr_assert(memcmp(a, b, sizeof(a)) == 0, "step %d: concurrent workers differ from rank order", s);
	}
	pthread_barrier_destroy(&go);
	emdb_db_close(par);
	emdb_db_close(seq);
}

/* An Update racing ranked pushes: every gradient is applied exactly once
 * (SGD lr 1 from zero: the rows' sum is minus every gradient pushed). */
typedef struct racer {
	emdb_db *db;
	uint32_t table, rank;
	int rc;
} racer;

static void *racer_main(void *arg)
{
	racer *r = arg;
	float g[N];
	uint64_t ids[N];
	for (int k = 0; k < 40 && !r->rc; k++) {
		for (size_t i = 0; i < N; i++) {
			ids[i] = (i * 7 + r->rank + (size_t)k) % 64;
			g[i] = 1.0f;
		}
		emdb_push_batch b = { .ids = ids, .n = N, .dim = 1, .grads = g };
		r->rc = emdb_push_as(r->db, r->table, r->rank, &b);
	}
	return NULL;
}

Test(conc_workers, updates_racing_ranked_pushes_lose_nothing)
{
	emdb_db *db = open_db(8);
	uint32_t t = make_sgd_lr1_table(db, 1);
	racer r[W];
	pthread_t th[W];
	for (uint32_t w = 0; w < W; w++) {
		r[w] = (racer){ db, t, w, 0 };
		cr_assert_eq(pthread_create(&th[w], NULL, racer_main, &r[w]), 0);
	}
	for (int u = 0; u < 50; u++)
		cr_assert_eq(emdb_update(db, t, NULL), 0);
	for (uint32_t w = 0; w < W; w++) {
		pthread_join(th[w], NULL);
		cr_assert_eq(r[w].rc, 0, "%s", emdb_last_error());
	}
	cr_assert_eq(emdb_update(db, t, NULL), 0);
	uint64_t ids[64];
	float v[64];
	for (uint64_t i = 0; i < 64; i++)
		ids[i] = i;
	cr_assert_eq(emdb_lookup(db, t, ids, 64, 1, v, NULL), 0);
	double sum = 0;
	for (int i = 0; i < 64; i++)
		sum += v[i];
	cr_assert(sum == -(double)(W * 40 * N), "rows sum to %.1f, want %d", sum, -(W * 40 * N));
	emdb_table_info x;
	cr_assert_eq(emdb_table_describe(db, t, &x), 0);
	cr_assert_eq(x.stats.pending_rows, 0);
	emdb_db_close(db);
}
