/*
 * test_reserve.c - emdb_table_reserve: room made up front changes nothing a
 * user can read, and inserts up to it need no index resize and no new
 * chunk; bad input and allocation failures leave the table as it was.
 */
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/db.h>
#include <emdb/error.h>

#include "base/alloc_fault.h"
#include "tests/lib/helpers.h"

enum { DIM = 8, B = 4096 };

static void prefetch_range(emdb_db *db, uint32_t t, uint64_t first, uint64_t n)
{
	uint64_t *ids = malloc(B * sizeof(uint64_t));
	for (uint64_t base = 0; base < n; base += B) {
		size_t k = n - base < B ? (size_t)(n - base) : B;
		for (size_t i = 0; i < k; i++)
			ids[i] = scramble(first + base + i);
		emdb_ticket *tk;
		cr_assert_eq(emdb_prefetch(db, t, ids, k, &tk), 0, "%s", emdb_last_error());
		emdb_ticket_free(tk);
	}
	free(ids);
}

static emdb_table_stats stats_of(emdb_db *db, uint32_t t)
{
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0, "%s", emdb_last_error());
	return info.stats;
}

static uint64_t bytes_of(const emdb_table_stats *s)
{
	return s->bytes_vectors + s->bytes_optimizer + s->bytes_index + s->bytes_overhead;
}

/* Pull n rows of IDs scramble(first + i) into out[n * DIM]. */
static void pull_range(emdb_db *db, uint32_t t, uint64_t first, size_t n, float *out)
{
	uint64_t *ids = malloc(n * sizeof(uint64_t));
	for (size_t i = 0; i < n; i++)
		ids[i] = scramble(first + i);
	cr_assert_eq(emdb_pull(db, t, ids, n, DIM, out), 0, "%s", emdb_last_error());
	free(ids);
}

Test(reserve, inserts_up_to_the_room_need_no_resize_and_no_chunk)
{
	enum { N = 300000 };
	emdb_db *db = open_db(64);
	uint32_t t = make_table(db, "t", DIM, EMDB_OPT_ADAGRAD, EMDB_INIT_UNIFORM, -1, 1);
	prefetch_range(db, t, 0, 1000);
	emdb_table_stats s0 = stats_of(db, t);
	size_t alloc0 = emdb_alloc_bytes();

	cr_assert_eq(emdb_table_reserve(db, t, N), 0, "%s", emdb_last_error());
	emdb_table_stats s1 = stats_of(db, t);
	cr_assert_eq(s1.rows, s0.rows);
	cr_assert_eq(s1.step, s0.step);
	/* The room is there, and counted: rows of 8 floats and 8 of state. */
	cr_assert_gt(s1.index_resizes, s0.index_resizes);
	cr_assert_geq(bytes_of(&s1) - bytes_of(&s0), (uint64_t)(N - 1000) * DIM * 8,
		      "reserved %llu bytes", (unsigned long long)(bytes_of(&s1) - bytes_of(&s0)));
	cr_assert_geq(emdb_alloc_bytes() - alloc0, (size_t)(N - 1000) * DIM * 8);

	prefetch_range(db, t, 1000, N - 1000);
	emdb_table_stats s2 = stats_of(db, t);
	cr_assert_eq(s2.rows, N);
	cr_assert_eq(s2.index_resizes, s1.index_resizes, "%llu shard resizes after the reserve",
		     (unsigned long long)(s2.index_resizes - s1.index_resizes));
	cr_assert_eq(s2.bytes_index, s1.bytes_index);
	/* At most the one chunk a growing table maps ahead (2 MiB, marks). */
	cr_assert_leq(bytes_of(&s2), bytes_of(&s1) + (3u << 20), "grew by %llu bytes",
		      (unsigned long long)(bytes_of(&s2) - bytes_of(&s1)));

	/* Reserving what is there, or less, does nothing. */
	cr_assert_eq(emdb_table_reserve(db, t, N), 0);
	cr_assert_eq(emdb_table_reserve(db, t, 10), 0);
	cr_assert_eq(emdb_table_reserve(db, t, 0), 0);
	emdb_table_stats s3 = stats_of(db, t);
	cr_assert_eq(bytes_of(&s3), bytes_of(&s2));
	cr_assert_eq(s3.index_resizes, s2.index_resizes);
	emdb_db_close(db);
}

/* A table with room made first holds exactly what one without it holds:
 * the same initial values, the same rows after training steps.  (Two
 * databases, so that both tables have id 1: the id seeds initial values.) */
Test(reserve, rows_equal_a_table_without_reserve)
{
	enum { N = 20000 };
	emdb_db *da = open_db(16), *dbb = open_db(16);
	uint32_t a = make_table(da, "t", DIM, EMDB_OPT_ADAM, EMDB_INIT_NORMAL, 0, 1);
	uint32_t b = make_table(dbb, "t", DIM, EMDB_OPT_ADAM, EMDB_INIT_NORMAL, 0, 1);
	cr_assert_eq(emdb_table_reserve(dbb, b, 4 * N), 0, "%s", emdb_last_error());
	uint64_t *ids = malloc(N * sizeof(uint64_t));
	float *g = malloc((size_t)N * DIM * sizeof(float));
	for (int step = 0; step < 3; step++) {
		for (int i = 0; i < N; i++) {
			ids[i] = scramble((uint64_t)(i % (N / 2 + step * 1000)));
			for (int c = 0; c < DIM; c++)
				g[i * DIM + c] = 0.01f * (float)((i + c + step) % 7) - 0.03f;
		}
		cr_assert_eq(emdb_push(da, a, ids, N, DIM, g), 0);
		cr_assert_eq(emdb_push(dbb, b, ids, N, DIM, g), 0);
		cr_assert_eq(emdb_update(da, a, NULL), 0);
		/* Room made between a push and its Update keeps the gradients. */
		cr_assert_eq(emdb_table_reserve(dbb, b, 5 * N + step), 0);
		cr_assert_eq(emdb_update(dbb, b, NULL), 0);
	}
	float *va = malloc((size_t)N * DIM * sizeof(float)), *vb = malloc((size_t)N * DIM * sizeof(float));
	pull_range(da, a, 0, N, va);
	pull_range(dbb, b, 0, N, vb);
	cr_assert_eq(memcmp(va, vb, (size_t)N * DIM * sizeof(float)), 0);
	emdb_table_stats sa = stats_of(da, a), sb = stats_of(dbb, b);
	cr_assert_eq(sa.rows, sb.rows);
	cr_assert_eq(sa.step, sb.step);
	cr_assert_eq(sa.rows_updated, sb.rows_updated);
	free(ids);
	free(g);
	free(va);
	free(vb);
	emdb_db_close(da);
	emdb_db_close(dbb);
}

Test(reserve, bad_input_changes_nothing)
{
	emdb_db *db = open_db(64);
	uint32_t t = make_table(db, "t", DIM, EMDB_OPT_SGD, EMDB_INIT_UNIFORM, -1, 1);
	prefetch_range(db, t, 0, 5000);
	emdb_table_stats s0 = stats_of(db, t);

	cr_assert_eq(emdb_table_reserve(db, t + 1, 1000), EMDB_ERR_NO_TABLE);
	cr_assert(strstr(emdb_last_error(), "no table"), "%s", emdb_last_error());
	cr_assert_eq(emdb_table_reserve(NULL, t, 1000), EMDB_ERR_INVALID);

	cr_assert_eq(emdb_table_reserve(db, t, UINT64_MAX), EMDB_ERR_LIMIT);
	cr_assert(strstr(emdb_last_error(), "do not fit"), "%s", emdb_last_error());

	/* More than the machine has: refused before anything is mapped. */
	cr_assert_eq(emdb_table_reserve(db, t, 1ull << 38), EMDB_ERR_NOMEM);
	cr_assert(strstr(emdb_last_error(), "memory this machine has available"), "%s", emdb_last_error());

	/* Over the allocation limit: refused up front with the figures. */
	emdb_alloc_set_limit(emdb_alloc_bytes() + (1u << 20));
	cr_assert_eq(emdb_table_reserve(db, t, 1000000), EMDB_ERR_NOMEM);
	cr_assert(strstr(emdb_last_error(), "memory limit"), "%s", emdb_last_error());
	emdb_alloc_set_limit(0);

	emdb_table_stats s1 = stats_of(db, t);
	cr_assert_eq(bytes_of(&s1), bytes_of(&s0));
	cr_assert_eq(s1.index_resizes, s0.index_resizes);
	cr_assert_eq(s1.rows, s0.rows);
	emdb_db_close(db);
}

/* An allocation failing at any point of a reserve: NOMEM, and the rows
 * read back as before; the table keeps working and the reserve, tried
 * again, succeeds. */
Test(reserve, allocation_failure_midway_keeps_the_rows)
{
	enum { N = 3000 };
	emdb_db *db = open_db(64);
	uint32_t t = make_table(db, "t", DIM, EMDB_OPT_SGD, EMDB_INIT_UNIFORM, -1, 1);
	prefetch_range(db, t, 0, N);
	float *before = malloc((size_t)N * DIM * sizeof(float)), *after = malloc((size_t)N * DIM * sizeof(float));
	pull_range(db, t, 0, N, before);
	int k = 0, rc;
	for (;; k++) {
		emdb_alloc_fail_after((uint64_t)k);
		rc = emdb_table_reserve(db, t, 400000);
		emdb_alloc_fail_reset();
		if (rc == 0)
			break;
		cr_assert_eq(rc, EMDB_ERR_NOMEM, "allocation %d failing: %s", k, emdb_last_error());
		pull_range(db, t, 0, N, after);
		cr_assert_eq(memcmp(before, after, (size_t)N * DIM * sizeof(float)), 0);
		cr_assert_eq(stats_of(db, t).rows, N);
		cr_assert_lt(k, 100000, "the reserve never succeeds");
	}
	cr_assert_gt(k, 3, "expected several allocations to inject into, got %d", k);
	emdb_table_stats s = stats_of(db, t);
	prefetch_range(db, t, N, 300000);
	cr_assert_eq(stats_of(db, t).index_resizes, s.index_resizes);
	pull_range(db, t, 0, N, after);
	cr_assert_eq(memcmp(before, after, (size_t)N * DIM * sizeof(float)), 0);
	free(before);
	free(after);
	emdb_db_close(db);
}
