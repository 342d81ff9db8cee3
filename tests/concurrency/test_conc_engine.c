/*
 * test_conc_engine.c - many threads on one database at once.
 *
 * 1. Threads prefetch, pull and push overlapping IDs (duplicates within and
 *    across batches) while others look rows up; after they join, one Update
 *    gives the same rows as one thread doing all the pushes, within float
 *    summation order (docs/engine.md, "Summation order").
 * 2. Updates run while readers pull: no reader ever sees a torn row.
 * 3. Tables are created and dropped while other threads use them.
 * 4. Pushes race with Updates and no gradient is lost or applied twice.
 * 5. Each push is applied whole by one Update, never split over two.
 * 6. Threads growing the same index shard at once lose no ID.
 * 7. Push+Update in one call (emdb_push_update) racing with pushes, Updates
 *    and readers: every gradient applied once, every call applied whole.
 * 8. Concurrent emdb_push_update calls are serializable: every row sees
 *    them in one and the same order.
 * 9. Room made (emdb_table_reserve) while threads insert into the same
 *    shards: no ID lost.
 * This file runs under ThreadSanitizer in CI (label "concurrency").
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <emdb/db.h>

#include "tests/lib/helpers.h"

enum { THREADS = 4, ROUNDS = 30, BATCH = 512, POOL = 3000, DIM = 8 };

typedef struct worker {
	emdb_db *db;
	uint32_t table;
	int tid;
	int use_ticket;
} worker;

static void batch_ids(int tid, int round, uint64_t *ids)
{
	uint64_t s = (uint64_t)tid * 1000003u + (uint64_t)round * 7919u + 1;
	for (int i = 0; i < BATCH; i++) {
		s = s * 6364136223846793005ULL + 1442695040888963407ULL;
		ids[i] = scramble((s >> 33) % POOL); /* heavy overlap, duplicates */
	}
}

static void batch_grads(int tid, int round, float *g)
{
	for (int i = 0; i < BATCH * DIM; i++)
		g[i] = (float)((tid * 31 + round * 17 + i) % 13) * 0.125f - 0.75f;
}

static void *work(void *arg)
{
	worker *w = arg;
	uint64_t ids[BATCH];
	static _Thread_local float g[BATCH * DIM], out[BATCH * DIM];
	for (int r = 0; r < ROUNDS; r++) {
		batch_ids(w->tid, r, ids);
		batch_grads(w->tid, r, g);
		if (w->use_ticket) {
			emdb_ticket *tk;
			cr_assert_eq(emdb_prefetch(w->db, w->table, ids, BATCH, &tk), 0);
			cr_assert_eq(emdb_pull_ticket(w->db, w->table, tk, DIM, out), 0);
			cr_assert_eq(emdb_push_ticket(w->db, w->table, tk, DIM, g), 0);
			emdb_ticket_free(tk);
		} else {
			cr_assert_eq(emdb_pull(w->db, w->table, ids, BATCH, DIM, out), 0);
			cr_assert_eq(emdb_push(w->db, w->table, ids, BATCH, DIM, g), 0);
			cr_assert_eq(emdb_lookup(w->db, w->table, ids, BATCH, DIM, out, NULL), 0);
		}
	}
	return NULL;
}

Test(concurrency, parallel_push_equals_serial)
{
	emdb_db *par = open_db(64), *ser = open_db(64);
	uint32_t tp = make_table(par, "t", DIM, EMDB_OPT_ADAGRAD, EMDB_INIT_UNIFORM, -0.1, 0.1);
	uint32_t ts = make_table(ser, "t", DIM, EMDB_OPT_ADAGRAD, EMDB_INIT_UNIFORM, -0.1, 0.1);

	for (int step = 0; step < 2; step++) {
		pthread_t th[THREADS];
		worker w[THREADS];
		for (int i = 0; i < THREADS; i++) {
			w[i] = (worker){ par, tp, i + step * THREADS, i % 2 };
			pthread_create(&th[i], NULL, work, &w[i]);
		}
		for (int i = 0; i < THREADS; i++) {
			worker s = { ser, ts, i + step * THREADS, 0 };
			work(&s);
		}
		for (int i = 0; i < THREADS; i++)
			pthread_join(th[i], NULL);
		cr_assert_eq(emdb_update(par, tp, NULL), 0);
		cr_assert_eq(emdb_update(ser, ts, NULL), 0);
	}

	uint64_t ids[POOL];
	static float a[POOL * DIM], b[POOL * DIM], sa[POOL * DIM], sb[POOL * DIM];
	uint8_t fa[POOL], fb[POOL];
	for (int i = 0; i < POOL; i++)
		ids[i] = scramble((uint64_t)i);
	cr_assert_eq(emdb_lookup(par, tp, ids, POOL, DIM, a, fa), 0);
	cr_assert_eq(emdb_lookup(ser, ts, ids, POOL, DIM, b, fb), 0);
	cr_assert_eq(emdb_read_state(par, tp, ids, POOL, sa, NULL), 0);
	cr_assert_eq(emdb_read_state(ser, ts, ids, POOL, sb, NULL), 0);
	cr_assert_eq(memcmp(fa, fb, POOL), 0, "both hold the same IDs");
	for (int i = 0; i < POOL * DIM; i++) {
		cr_assert(fabsf(a[i] - b[i]) <= 1e-5f * (1 + fabsf(b[i])), "weight %d: %g vs %g", i, a[i], b[i]);
		cr_assert(fabsf(sa[i] - sb[i]) <= 1e-4f * (1 + fabsf(sb[i])), "state %d: %g vs %g", i, sa[i], sb[i]);
	}
	emdb_table_info ip, is;
	cr_assert_eq(emdb_table_describe(par, tp, &ip), 0);
	cr_assert_eq(emdb_table_describe(ser, ts, &is), 0);
	cr_assert_eq(ip.stats.rows, is.stats.rows);
	cr_assert_eq(ip.stats.step, 2);
	emdb_db_close(par);
	emdb_db_close(ser);
}

/* SGD from zeros with gradients equal across a row's columns keeps every
 * row's columns equal; a torn read would show two different values.  (Test
 * 5 below shares this state between its pushers, updaters and reader.) */
typedef struct reader {
	emdb_db *db;
	uint32_t table;
	atomic_int *stop;
	atomic_long checked;
} reader;

static void *read_loop(void *arg)
{
	reader *r = arg;
	uint64_t ids[256];
	static _Thread_local float out[256 * 64];
	for (int i = 0; i < 256; i++)
		ids[i] = scramble((uint64_t)i);
	while (!atomic_load(r->stop)) {
		cr_assert_eq(emdb_pull(r->db, r->table, ids, 256, 64, out), 0);
		for (int i = 0; i < 256; i++)
			for (int c = 1; c < 64; c++)
				cr_assert_eq(out[i * 64 + c], out[i * 64], "row %d torn at column %d", i, c);
		r->checked++;
	}
	return NULL;
}

Test(concurrency, updates_never_tear_rows_under_readers)
{
	emdb_db *db = open_db(16);
	uint32_t t = make_table(db, "t", 64, EMDB_OPT_SGD, EMDB_INIT_ZEROS, 0, 0);
	uint64_t ids[256];
	static float g[256 * 64];
	for (int i = 0; i < 256; i++)
		ids[i] = scramble((uint64_t)i);
	atomic_int stop = 0;
	reader rd[2] = { { db, t, &stop, 0 }, { db, t, &stop, 0 } };
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, read_loop, &rd[i]);
	/* At least 200 steps, and on until the readers have checked 50 pulls
	 * between them, so they really ran beside the Updates however the
	 * threads were scheduled (a fast writer can finish 200 steps before
	 * a reader thread has started). */
	int step = 0;
	for (; step < 200 || (atomic_load(&rd[0].checked) + atomic_load(&rd[1].checked) < 50 &&
			      step < 2000000); step++) {
		for (int i = 0; i < 256; i++)
			for (int c = 0; c < 64; c++)
				g[i * 64 + c] = (float)((i + step) % 7 + 1);
		cr_assert_eq(emdb_push(db, t, ids, 256, 64, g), 0);
		cr_assert_eq(emdb_update(db, t, NULL), 0);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	cr_assert_geq(atomic_load(&rd[0].checked) + atomic_load(&rd[1].checked), 50,
		      "the readers checked too few pulls in %d steps", step);
	emdb_db_close(db);
}

typedef struct churn {
	emdb_db *db;
	atomic_int *stop;
} churn;

static void *use_tables(void *arg)
{
	churn *c = arg;
	uint64_t ids[64];
	float v[64 * 4];
	for (int i = 0; i < 64; i++)
		ids[i] = (uint64_t)i;
	while (!atomic_load(c->stop)) {
		uint32_t list[8];
		size_t n;
		cr_assert_eq(emdb_table_list(c->db, list, 8, &n), 0);
		for (size_t i = 0; i < n && i < 8; i++) {
			int rc = emdb_push(c->db, list[i], ids, 64, 4, v);
			cr_assert(rc == 0 || rc == EMDB_ERR_NO_TABLE, "push: %s", emdb_last_error());
			rc = emdb_pull(c->db, list[i], ids, 64, 4, v);
			cr_assert(rc == 0 || rc == EMDB_ERR_NO_TABLE, "pull: %s", emdb_last_error());
		}
	}
	return NULL;
}

Test(concurrency, drop_while_in_use)
{
	emdb_db *db = open_db(8);
	atomic_int stop = 0;
	churn c = { db, &stop };
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, use_tables, &c);
	for (int round = 0; round < 100; round++) {
		char name[16];
		snprintf(name, sizeof(name), "t%d", round);
		uint32_t id = make_table(db, name, 4, EMDB_OPT_ADAM, EMDB_INIT_NORMAL, 0, 1);
		uint64_t rows;
		cr_assert_eq(emdb_update_all(db, &rows), 0);
		cr_assert_eq(emdb_table_drop(db, id), 0);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	emdb_db_close(db);
}

/* Pushes racing with Updates: every gradient lands in exactly one step.
 * SGD with lr 1 and gradients of 1 keeps every value an exact integer, so
 * the final rows must equal minus the number of pushes of each ID. */
typedef struct pusher {
	emdb_db *db;
	uint32_t table;
	int tid;
} pusher;

enum { P_IDS = 64, P_ROUNDS = 300 };

static void *push_loop(void *arg)
{
	pusher *p = arg;
	uint64_t ids[P_IDS];
	float g[P_IDS * 4];
	for (int i = 0; i < P_IDS * 4; i++)
		g[i] = 1.0f;
	for (int r = 0; r < P_ROUNDS; r++) {
		for (int i = 0; i < P_IDS; i++)
			ids[i] = (uint64_t)((i + r + p->tid) % P_IDS);
		cr_assert_eq(emdb_push(p->db, p->table, ids, P_IDS, 4, g), 0);
	}
	return NULL;
}

static void *update_loop(void *arg)
{
	pusher *p = arg;
	for (int r = 0; r < P_ROUNDS; r++)
		cr_assert_eq(emdb_update(p->db, p->table, NULL), 0);
	return NULL;
}

Test(concurrency, pushes_racing_updates_lose_nothing)
{
	emdb_db *db = open_db(8);
	uint32_t t = make_sgd_lr1_table(db, 4);
	/* Two updaters: one helps apply the other's pass (ops_update.c). */
	pusher p[4] = { { db, t, 0 }, { db, t, 1 }, { db, t, 2 }, { db, t, 3 } };
	pthread_t th[4];
	pthread_create(&th[0], NULL, push_loop, &p[0]);
	pthread_create(&th[1], NULL, push_loop, &p[1]);
	pthread_create(&th[2], NULL, update_loop, &p[2]);
	pthread_create(&th[3], NULL, update_loop, &p[3]);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(emdb_update(db, t, NULL), 0);
	uint64_t ids[P_IDS];
	float v[P_IDS * 4];
	for (int i = 0; i < P_IDS; i++)
		ids[i] = (uint64_t)i;
	cr_assert_eq(emdb_lookup(db, t, ids, P_IDS, 4, v, NULL), 0);
	/* Each pusher pushes every ID once per round. */
	for (int i = 0; i < P_IDS * 4; i++)
		cr_assert_eq(v[i], -2.0f * P_ROUNDS, "value %d is %g", i, v[i]);
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	cr_assert_eq(info.stats.pending_rows, 0);
	emdb_db_close(db);
}

/* 5. A push is applied whole by one Update, never split across two: two
 * threads push gradients of 1 to all of 512 IDs (spread over every shard)
 * while two others Update, and a reader pulls all 512 between Updates.
 * With SGD, lr 1 and zero initial values each row is minus the number of
 * pushes applied to it, so every pull must see all rows equal. */
enum { W_IDS = 512, W_ROUNDS = 200 };

/* The batch of every push of 5 and 7: all W_IDS IDs, gradients of 1. */
static void whole_batch(uint64_t *ids, float *g)
{
	for (int i = 0; i < W_IDS; i++)
		ids[i] = scramble((uint64_t)i);
	for (int i = 0; i < W_IDS * 4; i++)
		g[i] = 1.0f;
}

static void *whole_push(void *arg)
{
	reader *w = arg;
	static _Thread_local uint64_t ids[W_IDS];
	static _Thread_local float g[W_IDS * 4];
	whole_batch(ids, g);
	for (int r = 0; r < W_ROUNDS; r++)
		cr_assert_eq(emdb_push(w->db, w->table, ids, W_IDS, 4, g), 0);
	return NULL;
}

static void *whole_update(void *arg)
{
	reader *w = arg;
	while (!atomic_load(w->stop))
		cr_assert_eq(emdb_update(w->db, w->table, NULL), 0);
	return NULL;
}

static void *whole_read(void *arg)
{
	reader *w = arg;
	static _Thread_local uint64_t ids[W_IDS];
	static _Thread_local float v[W_IDS * 4];
	for (int i = 0; i < W_IDS; i++)
		ids[i] = scramble((uint64_t)i);
	while (!atomic_load(w->stop)) {
		cr_assert_eq(emdb_lookup(w->db, w->table, ids, W_IDS, 4, v, NULL), 0);
		for (int i = 1; i < W_IDS * 4; i++)
			cr_assert_eq(v[i], v[0], "row %d is %g, row 0 is %g: a push was split", i / 4, v[i], v[0]);
		atomic_fetch_add(&w->checked, 1);
	}
	return NULL;
}

Test(concurrency, each_push_is_applied_whole)
{
	emdb_db *db = open_db(64);
	uint32_t t = make_sgd_lr1_table(db, 4);
	atomic_int stop = 0;
	reader w = { db, t, &stop, 0 };
	pthread_t push[2], upd[2], rd;
	pthread_create(&rd, NULL, whole_read, &w);
	for (int i = 0; i < 2; i++) {
		pthread_create(&upd[i], NULL, whole_update, &w);
		pthread_create(&push[i], NULL, whole_push, &w);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(push[i], NULL);
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(upd[i], NULL);
	pthread_join(rd, NULL);
	cr_assert_eq(emdb_update(db, t, NULL), 0);
	uint64_t id0 = scramble(0);
	float v[4];
	cr_assert_eq(emdb_lookup(db, t, &id0, 1, 4, v, NULL), 0);
	cr_assert_eq(v[0], -2.0f * W_ROUNDS, "every push applied once: %g", v[0]);
	cr_assert_gt(atomic_load(&w.checked), 0, "the reader checked no pull");
	emdb_db_close(db);
}

/* 6. Threads insert distinct IDs into a one-shard table at once, so that
 * they all need the same shard grown again and again: a grown slot array
 * is built outside the shard's lock and dropped when another thread grew
 * the shard first (index/dit.c).  Every ID is found afterwards, once. */
enum { G_THREADS = 4, G_IDS = 40000, G_BATCH = 500 };

typedef struct grower {
	emdb_db *db;
	uint32_t table;
	int tid;
} grower;

static void *grow_loop(void *arg)
{
	grower *g = arg;
	static _Thread_local uint64_t ids[G_BATCH];
	for (int b = 0; b < G_IDS / G_BATCH; b++) {
		for (int i = 0; i < G_BATCH; i++)
			ids[i] = scramble((uint64_t)g->tid * G_IDS + (uint64_t)b * G_BATCH + (uint64_t)i);
		emdb_ticket *tk;
		cr_assert_eq(emdb_prefetch(g->db, g->table, ids, G_BATCH, &tk), 0, "%s", emdb_last_error());
		emdb_ticket_free(tk);
	}
	return NULL;
}

Test(concurrency, one_shard_grown_by_many_threads_loses_nothing)
{
	emdb_db *db = open_db(1);
	uint32_t t = make_sgd_lr1_table(db, 4);
	grower g[G_THREADS];
	pthread_t th[G_THREADS];
	for (int i = 0; i < G_THREADS; i++) {
		g[i] = (grower){ db, t, i };
		pthread_create(&th[i], NULL, grow_loop, &g[i]);
	}
	for (int i = 0; i < G_THREADS; i++)
		pthread_join(th[i], NULL);
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	cr_assert_eq(info.stats.rows, (uint64_t)G_THREADS * G_IDS);
	cr_assert_gt(info.stats.index_resizes, 10, "only %llu resizes",
		     (unsigned long long)info.stats.index_resizes);
	static uint64_t ids[G_THREADS * G_IDS];
	static float v[G_THREADS * G_IDS * 4];
	static uint8_t found[G_THREADS * G_IDS];
	for (int i = 0; i < G_THREADS * G_IDS; i++)
		ids[i] = scramble((uint64_t)i);
	cr_assert_eq(emdb_lookup(db, t, ids, G_THREADS * G_IDS, 4, v, found), 0);
	for (int i = 0; i < G_THREADS * G_IDS; i++)
		cr_assert_eq(found[i], 1, "ID %d lost", i);
	emdb_db_close(db);
}

/* 9. Three threads insert 40000 IDs each into a 4-shard table while a
 * fourth makes room in growing steps (index shards grown under inserters,
 * chunks mapped and backed beside rows being handed out): every ID is
 * found afterwards, once. */
typedef struct reserver {
	emdb_db *db;
	uint32_t table;
} reserver;

static void *reserve_loop(void *arg)
{
	reserver *r = arg;
	for (uint64_t rows = 10000; rows <= 200000; rows += 15000)
		cr_assert_eq(emdb_table_reserve(r->db, r->table, rows), 0, "%s", emdb_last_error());
	/* 5M rows of 16 bytes: enough chunks (38) for helper threads to back
	 * them beside this one. */
	cr_assert_eq(emdb_table_reserve(r->db, r->table, 5000000), 0, "%s", emdb_last_error());
	return NULL;
}

Test(concurrency, reserve_beside_inserts_loses_nothing)
{
	enum { INSERTERS = G_THREADS - 1 };
	emdb_db *db = open_db(4);
	uint32_t t = make_sgd_lr1_table(db, 4);
	grower g[INSERTERS];
	pthread_t th[INSERTERS], rt;
	reserver r = { db, t };
	pthread_create(&rt, NULL, reserve_loop, &r);
	for (int i = 0; i < INSERTERS; i++) {
		g[i] = (grower){ db, t, i };
		pthread_create(&th[i], NULL, grow_loop, &g[i]);
	}
	for (int i = 0; i < INSERTERS; i++)
		pthread_join(th[i], NULL);
	pthread_join(rt, NULL);
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	cr_assert_eq(info.stats.rows, (uint64_t)INSERTERS * G_IDS);
	static uint64_t ids[INSERTERS * G_IDS];
	static float v[INSERTERS * G_IDS * 4];
	static uint8_t found[INSERTERS * G_IDS];
	for (int i = 0; i < INSERTERS * G_IDS; i++)
		ids[i] = scramble((uint64_t)i);
	cr_assert_eq(emdb_lookup(db, t, ids, INSERTERS * G_IDS, 4, v, found), 0);
	for (int i = 0; i < INSERTERS * G_IDS; i++) {
		cr_assert_eq(found[i], 1, "ID %d lost", i);
		for (int c = 0; c < 4; c++)
			cr_assert_eq(v[i * 4 + c], 0.0f, "ID %d: column %d is %g", i, c, v[i * 4 + c]);
	}
	emdb_db_close(db);
}

/* 7. Two threads step with emdb_push_update (by IDs and by ticket) while one
 * pushes and one updates, and a reader checks that every lookup sees all
 * 512 rows equal (SGD, lr 1, gradients of 1, zero initial values: each row
 * is minus the pushes applied to it, so a call applied in part, or a row
 * read half-written, shows as unequal rows).  At the end every row is
 * minus the total of pushes: none lost, none applied twice. */
typedef struct stepper {
	reader *w;
	int use_ticket;
	uint64_t rows; /* rows updated, summed over the calls */
} stepper;

static void *fused_step(void *arg)
{
	stepper *st = arg;
	reader *w = st->w;
	static _Thread_local uint64_t ids[W_IDS];
	static _Thread_local float g[W_IDS * 4];
	whole_batch(ids, g);
	for (int r = 0; r < W_ROUNDS; r++) {
		uint64_t rows = 0;
		if (st->use_ticket) {
			emdb_ticket *tk;
			cr_assert_eq(emdb_prefetch(w->db, w->table, ids, W_IDS, &tk), 0);
			cr_assert_eq(emdb_push_update_ticket(w->db, w->table, tk, 4, g, &rows), 0,
				     "%s", emdb_last_error());
			emdb_ticket_free(tk);
		} else {
			cr_assert_eq(emdb_push_update(w->db, w->table, ids, W_IDS, 4, g, &rows), 0,
				     "%s", emdb_last_error());
		}
		st->rows += rows;
	}
	return NULL;
}

Test(concurrency, push_update_racing_pushes_and_updates)
{
	emdb_db *db = open_db(64);
	uint32_t t = make_sgd_lr1_table(db, 4);
	atomic_int stop = 0;
	reader w = { db, t, &stop, 0 };
	stepper st[2] = { { &w, 0, 0 }, { &w, 1, 0 } };
	pthread_t fused[2], push, upd, rd;
	pthread_create(&rd, NULL, whole_read, &w);
	pthread_create(&upd, NULL, whole_update, &w);
	pthread_create(&push, NULL, whole_push, &w);
	for (int i = 0; i < 2; i++)
		pthread_create(&fused[i], NULL, fused_step, &st[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(fused[i], NULL);
	pthread_join(push, NULL);
	atomic_store(&stop, 1);
	pthread_join(upd, NULL);
	pthread_join(rd, NULL);
	cr_assert_eq(emdb_update(db, t, NULL), 0);
	static uint64_t ids[W_IDS];
	static float v[W_IDS * 4];
	for (int i = 0; i < W_IDS; i++)
		ids[i] = scramble((uint64_t)i);
	cr_assert_eq(emdb_lookup(db, t, ids, W_IDS, 4, v, NULL), 0);
	for (int i = 0; i < W_IDS * 4; i++)
		cr_assert_eq(v[i], -3.0f * W_ROUNDS, "value %d is %g: every push applied once", i, v[i]);
	cr_assert_gt(atomic_load(&w.checked), 0, "the reader checked no pull");
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	cr_assert_eq(info.stats.pending_rows, 0);
	cr_assert_eq(info.stats.ids_push, 3ull * W_ROUNDS * W_IDS);
	cr_assert_leq(st[0].rows + st[1].rows, info.stats.rows_updated);
	emdb_db_close(db);
}

/* 8. Threads step one table with emdb_push_update, by IDs and by ticket,
 * every call holding all S_IDS IDs once (or, every third round, twice) in
 * an order of its own, with one gradient for every row.  Adagrad does not
 * commute (a then b moves a row other than b then a) and every row starts
 * at zero, so if the calls behave as run one after another, in one order
 * for all rows, every row ends bit-identical, values and state; a row
 * that missed a call, got one twice, or saw two calls in the other order
 * stands out.  Under TSan fewer rounds keep the test within seconds. */
#if defined(__SANITIZE_THREAD__)
#define S_ROUNDS 40
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define S_ROUNDS 40
#endif
#endif
#ifndef S_ROUNDS
#define S_ROUNDS 200
#endif
enum { S_THREADS = 3, S_IDS = 3000, S_DIM = 16 };

typedef struct serial_stepper {
	emdb_db *db;
	uint32_t table;
	int tid;
} serial_stepper;

static uint64_t lcg_next(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return *s >> 33;
}

static void *serial_step(void *arg)
{
	serial_stepper *st = arg;
	uint64_t *ids = malloc(2 * S_IDS * sizeof(*ids));
	float *g = malloc(2 * S_IDS * S_DIM * sizeof(*g));
	cr_assert(ids && g);
	for (int r = 0; r < S_ROUNDS; r++) {
		size_t n = r % 3 == 2 ? 2 * S_IDS : S_IDS;
		uint64_t seed = (uint64_t)st->tid * 1000003u + (uint64_t)r * 7919u + 1;
		for (size_t i = 0; i < n; i++)
			ids[i] = scramble(i % S_IDS);
		for (size_t i = n - 1; i > 0; i--) {
			size_t j = lcg_next(&seed) % (i + 1);
			uint64_t x = ids[i];
			ids[i] = ids[j];
			ids[j] = x;
		}
		/* One gradient per call, for every row, distinct per call;
		 * a repeated ID's two copies sum to twice it, exactly. */
		float v = 0.001f * (float)(1 + st->tid + S_THREADS * r);
		for (size_t i = 0; i < n; i++)
			for (int c = 0; c < S_DIM; c++)
				g[i * S_DIM + c] = (c % 2 ? -v : v) * (float)(c + 1);
		if ((r + st->tid) % 2) {
			emdb_ticket *tk;
			cr_assert_eq(emdb_prefetch(st->db, st->table, ids, n, &tk), 0, "%s", emdb_last_error());
			cr_assert_eq(emdb_push_update_ticket(st->db, st->table, tk, S_DIM, g, NULL), 0,
				     "%s", emdb_last_error());
			emdb_ticket_free(tk);
		} else {
			cr_assert_eq(emdb_push_update(st->db, st->table, ids, n, S_DIM, g, NULL), 0,
				     "%s", emdb_last_error());
		}
	}
	free(ids);
	free(g);
	return NULL;
}

Test(concurrency, push_update_calls_are_serializable)
{
	emdb_db *db = open_db(64);
	uint32_t t = make_table(db, "t", S_DIM, EMDB_OPT_ADAGRAD, EMDB_INIT_ZEROS, 0, 0);
	serial_stepper st[S_THREADS];
	pthread_t th[S_THREADS];
	for (int i = 0; i < S_THREADS; i++) {
		st[i] = (serial_stepper){ db, t, i };
		pthread_create(&th[i], NULL, serial_step, &st[i]);
	}
	for (int i = 0; i < S_THREADS; i++)
		pthread_join(th[i], NULL);

	static uint64_t ids[S_IDS];
	static float v[S_IDS * S_DIM], sum[S_IDS * S_DIM];
	static uint8_t found[S_IDS];
	for (int i = 0; i < S_IDS; i++)
		ids[i] = scramble((uint64_t)i);
	cr_assert_eq(emdb_lookup(db, t, ids, S_IDS, S_DIM, v, found), 0);
	cr_assert_eq(emdb_read_state(db, t, ids, S_IDS, sum, NULL), 0);
	for (int i = 0; i < S_IDS; i++)
		cr_assert_eq(found[i], 1, "ID %d not held", i);
	for (int c = 0; c < S_DIM; c++)
		cr_assert(v[c] != 0 && sum[c] > 0, "row 0 column %d untrained: value %g, sum %g", c,
			  v[c], sum[c]);
	for (int i = 1; i < S_IDS; i++)
		for (int c = 0; c < S_DIM; c++) {
			float a = v[i * S_DIM + c], sa = sum[i * S_DIM + c];
			cr_assert(memcmp(&a, &v[c], sizeof(a)) == 0,
				  "row %d column %d is %.9g, row 0's %.9g: calls not serialized", i, c, a,
				  v[c]);
			cr_assert(memcmp(&sa, &sum[c], sizeof(sa)) == 0,
				  "row %d column %d has sum %.9g, row 0 %.9g: calls not serialized", i, c,
				  sa, sum[c]);
		}
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	cr_assert_eq(info.stats.step, (uint64_t)S_THREADS * S_ROUNDS, "step %llu",
		     (unsigned long long)info.stats.step);
	cr_assert_eq(info.stats.rows, S_IDS);
	cr_assert_eq(info.stats.pending_rows, 0);
	emdb_db_close(db);
}
