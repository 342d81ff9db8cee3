/*
 * test_engine.c - the engine through its public API as a trainer and an
 * inference service use it: tables, Prefetch/Pull/Push/Update/Lookup,
 * tickets, pooling, initial values, statistics.
 */
#include <math.h>
#include <stdlib.h>

#include <emdb/alloc.h>
#include <emdb/db.h>

#include "db/init_math.h"
#include "tests/lib/helpers.h"

Test(engine, table_admin)
{
	emdb_db *db = open_db(16);
	uint32_t a = make_table(db, "users", 8, EMDB_OPT_SGD, EMDB_INIT_ZEROS, 0, 0);
	uint32_t b = make_table(db, "items.v2", 16, EMDB_OPT_ADAM, EMDB_INIT_UNIFORM, -0.1, 0.1);
	cr_assert_neq(a, b);

	uint32_t id;
	cr_assert_eq(emdb_table_find(db, "items.v2", &id), 0);
	cr_assert_eq(id, b);
	cr_assert_eq(emdb_table_find(db, "nope", &id), EMDB_ERR_NO_TABLE);

	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, b, &info), 0);
	cr_assert_str_eq(info.config.name, "items.v2");
	cr_assert_eq(info.config.dim, 16);
	cr_assert_eq(info.config.optimizer.kind, EMDB_OPT_ADAM);
	cr_assert_eq(info.stats.rows, 0);

	/* The configuration alone: the same as describe's, and the same errors. */
	emdb_table_config cfg;
	cr_assert_eq(emdb_table_get_config(db, b, &cfg), 0);
	cr_assert_str_eq(cfg.name, "items.v2");
	cr_assert_eq(cfg.dim, 16);
	cr_assert_eq(cfg.optimizer.kind, EMDB_OPT_ADAM);
	cr_assert_eq(cfg.init.kind, EMDB_INIT_UNIFORM);
	cr_assert_eq(cfg.init.a, info.config.init.a);
	cr_assert_eq(cfg.init.b, info.config.init.b);
	cr_assert_eq(cfg.optimizer.lr, info.config.optimizer.lr);
	cr_assert_eq(emdb_table_get_config(db, 999, &cfg), EMDB_ERR_NO_TABLE);
	cr_assert_eq(emdb_table_get_config(db, b, NULL), EMDB_ERR_INVALID);

	uint32_t ids[4];
	size_t n;
	cr_assert_eq(emdb_table_list(db, ids, 4, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(ids[0], a);
	cr_assert_eq(ids[1], b);

	emdb_table_config dup = EMDB_TABLE_CONFIG_INIT;
	strcpy(dup.name, "users");
	dup.dim = 4;
	cr_assert_eq(emdb_table_create(db, &dup, NULL), EMDB_ERR_EXISTS);

	cr_assert_eq(emdb_table_drop(db, a), 0);
	cr_assert_eq(emdb_table_drop(db, a), EMDB_ERR_NO_TABLE);
	cr_assert_eq(emdb_table_list(db, ids, 4, &n), 0);
	cr_assert_eq(n, 1);
	/* Ids are not reused. */
	uint32_t c = make_table(db, "users", 8, EMDB_OPT_SGD, EMDB_INIT_ZEROS, 0, 0);
	cr_assert_gt(c, b);
	emdb_db_close(db);
}

Test(engine, initial_values_follow_the_documented_formula)
{
	emdb_db *db = open_db(64);
	uint32_t u = make_table(db, "u", 37, EMDB_OPT_SGD, EMDB_INIT_UNIFORM, -0.5, 0.25);
	uint32_t g = make_table(db, "g", 6, EMDB_OPT_SGD, EMDB_INIT_NORMAL, 1.0, 0.01);
	uint64_t ids[3] = { 0, 77, UINT64_MAX };
	float out[3 * 37], want[37];

	cr_assert_eq(emdb_pull(db, u, ids, 3, 37, out), 0);
	for (int i = 0; i < 3; i++) {
		emdb_init_row(EMDB_INIT_UNIFORM, -0.5, 0.25, 1234, u, ids[i], 37, want);
		cr_assert_eq(memcmp(out + i * 37, want, sizeof(want)), 0, "row %d differs from the formula", i);
		for (int c = 0; c < 37; c++)
			cr_assert(out[i * 37 + c] >= -0.5f && out[i * 37 + c] < 0.25f);
	}
	/* The same ID in another table (other table id) gets other values. */
	float og[3 * 6];
	cr_assert_eq(emdb_pull(db, g, ids, 3, 6, og), 0);
	emdb_init_row(EMDB_INIT_NORMAL, 1.0, 0.01, 1234, g, 77, 6, want);
	cr_assert_eq(memcmp(og + 6, want, 6 * sizeof(float)), 0);
	emdb_db_close(db);
}

Test(engine, sgd_step_by_ids_and_by_ticket)
{
	emdb_db *db = open_db(8);
	uint32_t t = make_table(db, "t", 4, EMDB_OPT_SGD, EMDB_INIT_ZEROS, 0, 0);
	uint64_t ids[3] = { 5, 9, 5 };
	float g[12] = { 1, 2, 3, 4, 10, 10, 10, 10, 1, 1, 1, 1 };
	float out[12];

	emdb_ticket *tk;
	cr_assert_eq(emdb_prefetch(db, t, ids, 3, &tk), 0);
	cr_assert_eq(emdb_ticket_count(tk), 3);
	cr_assert_eq(emdb_ticket_table(tk), t);
	cr_assert_eq(emdb_push_ticket(db, t, tk, 4, g), 0);
	/* Before Update the rows are unchanged. */
	cr_assert_eq(emdb_pull_ticket(db, t, tk, 4, out), 0);
	for (int i = 0; i < 12; i++)
		cr_assert_eq(out[i], 0.0f);
	uint64_t rows;
	cr_assert_eq(emdb_update(db, t, &rows), 0);
	cr_assert_eq(rows, 2, "ID 5 twice and ID 9 once: two rows updated, got %llu", (unsigned long long)rows);
	cr_assert_eq(emdb_pull(db, t, ids, 3, 4, out), 0);
	/* lr 0.01, duplicate gradients of ID 5 summed: (1+1, 2+1, 3+1, 4+1). */
	float want5[4] = { -0.02f, -0.03f, -0.04f, -0.05f };
	for (int c = 0; c < 4; c++) {
		cr_assert_float_eq(out[c], want5[c], 1e-7);
		cr_assert_float_eq(out[8 + c], want5[c], 1e-7);
		cr_assert_float_eq(out[4 + c], -0.1f, 1e-7);
	}
	/* The ticket stays valid across the Update. */
	float again[12];
	cr_assert_eq(emdb_pull_ticket(db, t, tk, 4, again), 0);
	cr_assert_eq(memcmp(out, again, sizeof(out)), 0);
	emdb_ticket_free(tk);

	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	cr_assert_eq(info.stats.step, 1);
	cr_assert_eq(info.stats.rows, 2);
	cr_assert_eq(info.stats.pending_rows, 0);
	cr_assert_eq(info.stats.calls_prefetch, 1);
	cr_assert_eq(info.stats.calls_push, 1);
	cr_assert_eq(info.stats.calls_pull, 3);
	cr_assert_eq(info.stats.ids_pull, 9);
	cr_assert_eq(info.stats.rows_updated, 2);
	emdb_db_close(db);
}

/* Pull (plain and pooled), Update and Lookup take row addresses a block
 * of 512 at a time (db/ops.h): a batch of 1300 rows, all in one shard,
 * crosses two block boundaries in every loop.  Each row is checked against values computed
 * here from the documented rules. */
Test(engine, batches_longer_than_a_row_block)
{
	emdb_db *db = open_db(1);
	enum { N = 1300, D = 8 };
	uint32_t t = make_table(db, "t", D, EMDB_OPT_SGD, EMDB_INIT_UNIFORM, -1, 1);
	uint64_t *ids = malloc(N * sizeof(uint64_t)), *mixed = malloc(N * sizeof(uint64_t));
	float *out = malloc(N * D * sizeof(float)), *g = malloc(N * D * sizeof(float));
	float *want = malloc(N * D * sizeof(float));
	uint8_t *found = malloc(N);
	for (int i = 0; i < N; i++) {
		ids[i] = scramble((uint64_t)i);
		emdb_init_row(EMDB_INIT_UNIFORM, -1, 1, 1234, t, ids[i], D, want + i * D);
		for (int c = 0; c < D; c++)
			g[i * D + c] = 0.001f * (float)(i + 1) + 0.0001f * (float)c;
	}

	cr_assert_eq(emdb_pull(db, t, ids, N, D, out), 0);
	for (int i = 0; i < N * D; i++)
		cr_assert_eq(out[i], want[i], "pull: float %d of the initial rows", i);

	cr_assert_eq(emdb_push(db, t, ids, N, D, g), 0);
	uint64_t rows = 0;
	cr_assert_eq(emdb_update(db, t, &rows), 0);
	cr_assert_eq(rows, N);
	cr_assert_eq(emdb_pull(db, t, ids, N, D, out), 0);
	for (int i = 0; i < N * D; i++)
		cr_assert_float_eq(out[i], want[i] - 0.01f * g[i], 1e-6, "row %d after SGD", i / D);

	/* Pooled: bags of 0 to 12 rows (empty ones among them) across the
	 * blocks; each sum in request order, as the rule says, so exact. */
	enum { BAGS_MAX = N };
	uint64_t *off = malloc((BAGS_MAX + 1) * sizeof(uint64_t));
	size_t n_bags = 0;
	off[0] = 0;
	for (uint64_t at = 0; at < N; n_bags++) {
		uint64_t len = (n_bags * 5) % 13;
		at = at + len > N ? N : at + len;
		off[n_bags + 1] = at;
	}
	float *sums = malloc(n_bags * D * sizeof(float)), *ref = calloc(n_bags * D, sizeof(float));
	for (int pool = EMDB_POOL_SUM; pool <= EMDB_POOL_MEAN; pool++) {
		cr_assert_eq(emdb_pull_bags(db, t, ids, N, off, n_bags, (emdb_pool)pool, D, sums), 0, "%s",
			     emdb_last_error());
		for (size_t b = 0; b < n_bags; b++) {
			uint64_t cnt = off[b + 1] - off[b];
			for (int c = 0; c < D; c++) {
				float acc = 0;
				for (uint64_t i = off[b]; i < off[b + 1]; i++)
					acc += out[i * D + c];
				if (pool == EMDB_POOL_MEAN && cnt > 1)
					acc *= 1.0f / (float)cnt;
				ref[b * D + c] = acc;
			}
		}
		cr_assert_eq(memcmp(sums, ref, n_bags * D * sizeof(float)), 0, "pooled rows, pool %d", pool);
	}
	free(off);
	free(sums);
	free(ref);

	/* Every 7th ID unknown: Lookup's found flags and the zero default
	 * land at the right places across the blocks. */
	for (int i = 0; i < N; i++)
		mixed[i] = i % 7 == 3 ? scramble((uint64_t)(N + i)) : ids[i];
	float *look = malloc(N * D * sizeof(float));
	cr_assert_eq(emdb_lookup(db, t, mixed, N, D, look, found), 0);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(found[i], i % 7 != 3, "found[%d]", i);
		for (int c = 0; c < D; c++)
			cr_assert_eq(look[i * D + c], i % 7 == 3 ? 0.0f : out[i * D + c], "lookup row %d", i);
	}
	free(look);
	free(ids);
	free(mixed);
	free(out);
	free(g);
	free(want);
	free(found);
	emdb_db_close(db);
}

Test(engine, update_leaves_unpushed_rows_bit_identical)
{
	emdb_db *db = open_db(16);
	uint32_t t = make_table(db, "t", 16, EMDB_OPT_ADAM, EMDB_INIT_NORMAL, 0, 1);
	enum { N = 1000 };
	uint64_t ids[N];
	float *before = malloc(N * 16 * sizeof(float)), *after = malloc(N * 16 * sizeof(float));
	float *g = calloc(10 * 16, sizeof(float));
	for (int i = 0; i < N; i++)
		ids[i] = scramble((uint64_t)i);
	for (int i = 0; i < 10 * 16; i++)
		g[i] = 0.5f;
	cr_assert_eq(emdb_pull(db, t, ids, N, 16, before), 0);
	cr_assert_eq(emdb_push(db, t, ids, 10, 16, g), 0);
	cr_assert_eq(emdb_update(db, t, NULL), 0);
	cr_assert_eq(emdb_update(db, t, NULL), 0); /* nothing pending: no row changes */
	cr_assert_eq(emdb_pull(db, t, ids, N, 16, after), 0);
	for (int i = 0; i < N; i++) {
		int same = memcmp(before + i * 16, after + i * 16, 16 * sizeof(float)) == 0;
		cr_assert_eq(same, i >= 10, "row %d %s", i, same ? "unchanged" : "changed");
	}
	free(before);
	free(after);
	free(g);
	emdb_db_close(db);
}

Test(engine, lookup_is_read_only_with_defaults)
{
	emdb_db *db = open_db(8);
	emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
	strcpy(c.name, "serve");
	c.dim = 5;
	c.init.kind = EMDB_INIT_UNIFORM;
	c.init.a = 1;
	c.init.b = 2;
	c.lookup_default = EMDB_DEFAULT_INIT;
	uint32_t t, z;
	cr_assert_eq(emdb_table_create(db, &c, &t), 0);
	z = make_table(db, "zeros", 5, EMDB_OPT_SGD, EMDB_INIT_UNIFORM, 1, 2);

	uint64_t held = 10, ids[2] = { 10, 11 };
	float v[10], pulled[5];
	uint8_t found[2];
	cr_assert_eq(emdb_pull(db, t, &held, 1, 5, pulled), 0);
	cr_assert_eq(emdb_lookup(db, t, ids, 2, 5, v, found), 0);
	cr_assert_eq(found[0], 1);
	cr_assert_eq(found[1], 0);
	cr_assert_eq(memcmp(v, pulled, sizeof(pulled)), 0);
	float want[5];
	emdb_init_row(EMDB_INIT_UNIFORM, 1, 2, 0, t, 11, 5, want);
	cr_assert_eq(memcmp(v + 5, want, sizeof(want)), 0, "INIT default is the row's would-be initial value");

	cr_assert_eq(emdb_lookup(db, z, ids, 2, 5, v, NULL), 0);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(v[i], 0.0f, "ZEROS default");

	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	cr_assert_eq(info.stats.rows, 1, "Lookup inserted a row");
	cr_assert_eq(info.stats.lookup_misses, 1);
	cr_assert_eq(emdb_table_describe(db, z, &info), 0);
	cr_assert_eq(info.stats.rows, 0);
	emdb_db_close(db);
}

Test(engine, pooling_sum_and_mean_like_embedding_bag)
{
	emdb_db *db = open_db(4);
	uint32_t t = make_table(db, "bag", 3, EMDB_OPT_SGD, EMDB_INIT_UNIFORM, -1, 1);
	uint64_t ids[6] = { 1, 2, 3, 2, 4, 5 };
	uint64_t offs[5] = { 0, 3, 3, 5, 6 }; /* bags {1,2,3} {} {2,4} {5} */
	float rows[18], sum[12], mean[12];
	cr_assert_eq(emdb_pull(db, t, ids, 6, 3, rows), 0);
	cr_assert_eq(emdb_pull_bags(db, t, ids, 6, offs, 4, EMDB_POOL_SUM, 3, sum), 0);
	cr_assert_eq(emdb_pull_bags(db, t, ids, 6, offs, 4, EMDB_POOL_MEAN, 3, mean), 0);
	for (int b = 0; b < 4; b++)
		for (int c = 0; c < 3; c++) {
			float s = 0;
			for (uint64_t i = offs[b]; i < offs[b + 1]; i++)
				s += rows[i * 3 + c];
			uint64_t cnt = offs[b + 1] - offs[b];
			cr_assert_float_eq(sum[b * 3 + c], s, 1e-6);
			cr_assert_float_eq(mean[b * 3 + c], cnt ? s / (float)cnt : 0.0f, 1e-6);
		}
	emdb_ticket *tk;
	float viat[12];
	cr_assert_eq(emdb_prefetch(db, t, ids, 6, &tk), 0);
	cr_assert_eq(emdb_pull_bags_ticket(db, t, tk, offs, 4, EMDB_POOL_MEAN, 3, viat), 0);
	cr_assert_eq(memcmp(viat, mean, sizeof(mean)), 0);

	/* Backward of MEAN: each ID of bag b gets grad[b] / |b|; ID 2 is in two bags. */
	float bg[12] = { 3, 3, 3, 9, 9, 9, 2, 2, 2, 1, 1, 1 };
	float before[18], after[18];
	cr_assert_eq(emdb_pull_ticket(db, t, tk, 3, before), 0);
	cr_assert_eq(emdb_push_bags_ticket(db, t, tk, offs, 4, EMDB_POOL_MEAN, 3, bg), 0);
	cr_assert_eq(emdb_update(db, t, NULL), 0);
	cr_assert_eq(emdb_pull_ticket(db, t, tk, 3, after), 0);
	float gsum[6] = { 1, 1 + 1, 1, 1 + 1, 1, 1 }; /* per position: bag0 3/3, bag2 2/2, bag3 1/1 */
	for (int p = 0; p < 6; p++)
		cr_assert_float_eq(after[p * 3], before[p * 3] - 0.01f * gsum[p], 1e-6, "position %d", p);
	emdb_ticket_free(tk);
	emdb_db_close(db);
}

Test(engine, memory_stats_and_bytes_per_row)
{
	emdb_db *db = open_db(64);
	uint32_t t = make_table(db, "big", 8, EMDB_OPT_ADAGRAD, EMDB_INIT_ZEROS, 0, 0);
	enum { N = 200000, B = 4096 };
	uint64_t *ids = malloc(B * sizeof(uint64_t));
	emdb_ticket *tk;
	for (int base = 0; base < N; base += B) {
		int n = N - base < B ? N - base : B;
		for (int i = 0; i < n; i++)
			ids[i] = scramble((uint64_t)(base + i));
		cr_assert_eq(emdb_prefetch(db, t, ids, (size_t)n, &tk), 0);
		emdb_ticket_free(tk);
	}
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	cr_assert_eq(info.stats.rows, N);
	cr_assert_eq(info.stats.bytes_vectors, (uint64_t)N * 8 * 4);
	cr_assert_eq(info.stats.bytes_optimizer, (uint64_t)N * 8 * 4);
	double idx = (double)info.stats.bytes_index / N;
	cr_assert_leq(idx, 32.0, "index costs %.1f bytes per row, target <= 32", idx);
	/* Beyond the rows: the unused part of the last chunk and the one chunk
	 * a growing table keeps mapped ahead (2 MiB each), marks, each row's
	 * ID (8 bytes, for scans), directories and the table's own
	 * structures; never a chunk per batch. */
	cr_assert_lt(info.stats.bytes_overhead, ((uint64_t)5 << 20) + (uint64_t)N * 8, "overhead %llu bytes",
		     (unsigned long long)info.stats.bytes_overhead);
	emdb_db_stats ds;
	cr_assert_eq(emdb_db_get_stats(db, &ds), 0);
	cr_assert_eq(ds.tables, 1);
	cr_assert_eq(ds.total.rows, N);
	cr_assert_geq(ds.alloc_bytes, info.stats.bytes_vectors + info.stats.bytes_index);
	free(ids);
	emdb_db_close(db);
}

Test(engine, dropped_table_ticket_fails_cleanly)
{
	emdb_db *db = open_db(4);
	uint32_t t = make_table(db, "t", 2, EMDB_OPT_SGD, EMDB_INIT_ZEROS, 0, 0);
	uint64_t id = 1;
	float v[2];
	emdb_ticket *tk;
	cr_assert_eq(emdb_prefetch(db, t, &id, 1, &tk), 0);
	cr_assert_eq(emdb_table_drop(db, t), 0);
	cr_assert_eq(emdb_pull_ticket(db, t, tk, 2, v), EMDB_ERR_NO_TABLE);
	emdb_ticket_free(tk); /* frees the table's memory now */
	emdb_db_close(db);
	cr_assert_eq(emdb_alloc_bytes(), 0, "everything freed, %zu bytes left", emdb_alloc_bytes());
}
