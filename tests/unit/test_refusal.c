/*
 * test_refusal.c - a call refused for memory changes nothing: not the
 * table, and not the bytes counted in use, so that the room it did not
 * get is still there for the next call (issue 23, part 5: a Prefetch
 * over --max-memory kept 1 GB of row chunks and starved other tables).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/db.h>
#include <emdb/error.h>

#include "base/alloc_fault.h"
#include "tests/lib/helpers.h"

static uint64_t *id_range(uint64_t first, size_t n)
{
	uint64_t *ids = malloc(n * sizeof(*ids));
	for (size_t i = 0; i < n; i++)
		ids[i] = scramble(first + i);
	return ids;
}

static emdb_table_stats stats_of(emdb_db *db, uint32_t t)
{
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0, "%s", emdb_last_error());
	return info.stats;
}

static int prefetch(emdb_db *db, uint32_t t, uint64_t first, size_t n)
{
	uint64_t *ids = id_range(first, n);
	emdb_ticket *tk = NULL;
	int rc = emdb_prefetch(db, t, ids, n, &tk);
	emdb_ticket_free(tk);
	free(ids);
	return rc;
}

/* The report's case: a Prefetch of more new IDs than the limit leaves
 * room for is refused, takes none of that room, and a smaller one into
 * another table (and into the same) still fits. */
Test(refusal, prefetch_over_the_limit_keeps_no_memory)
{
	emdb_db *db = open_db(64);
	uint32_t a = make_table(db, "a", 64, EMDB_OPT_SGD, EMDB_INIT_UNIFORM, -1, 1);
	uint32_t b = make_table(db, "b", 64, EMDB_OPT_SGD, EMDB_INIT_UNIFORM, -1, 1);
	size_t before = emdb_alloc_bytes();
	/* 200,000 rows of 256 bytes need 51 MB; 16 MB are left. */
	emdb_alloc_set_limit(before + (16u << 20));
	int rc = prefetch(db, a, 0, 200000);
	cr_assert_eq(rc, EMDB_ERR_NOMEM, "rc %d: %s", rc, emdb_last_error());
	cr_assert(strstr(emdb_last_error(), "memory limit"), "%s", emdb_last_error());
	cr_assert_eq(emdb_alloc_bytes(), before, "a refused Prefetch kept %zd bytes",
		     (ssize_t)(emdb_alloc_bytes() - before));
	cr_assert_eq(stats_of(db, a).rows, 0);
	cr_assert_eq(stats_of(db, a).calls_prefetch, 0);
	cr_assert_eq(prefetch(db, b, 0, 20000), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(stats_of(db, b).rows, 20000);
	cr_assert_eq(prefetch(db, a, 0, 20000), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(stats_of(db, a).rows, 20000);
	emdb_alloc_set_limit(0);
	emdb_db_close(db);
}

/* Pull resolves (and inserts) like Prefetch: the same refusal. */
Test(refusal, pull_over_the_limit_keeps_no_memory)
{
	enum { N = 200000, DIM = 64 };
	emdb_db *db = open_db(64);
	uint32_t a = make_table(db, "a", DIM, EMDB_OPT_SGD, EMDB_INIT_UNIFORM, -1, 1);
	uint64_t *ids = id_range(0, N);
	float *out = malloc((size_t)N * DIM * sizeof(float));
	size_t before = emdb_alloc_bytes();
	emdb_alloc_set_limit(before + (16u << 20));
	cr_assert_eq(emdb_pull(db, a, ids, N, DIM, out), EMDB_ERR_NOMEM);
	cr_assert_eq(emdb_alloc_bytes(), before);
	cr_assert_eq(stats_of(db, a).rows, 0);
	emdb_alloc_set_limit(0);
	free(out);
	free(ids);
	emdb_db_close(db);
}

/* A Push whose rows have room but whose gradient accumulators do not:
 * refused before any accumulator grows, nothing pending, bytes as they
 * were; with the limit lifted the same Push goes through. */
Test(refusal, push_over_the_limit_keeps_no_memory)
{
	enum { N = 20000, DIM = 64 };
	emdb_db *db = open_db(64);
	uint32_t a = make_table(db, "a", DIM, EMDB_OPT_SGD, EMDB_INIT_UNIFORM, -1, 1);
	/* Rows and index for the batch and its reservation made up front:
	 * the accumulators (5 MB) are all the Push still has to grow. */
	cr_assert_eq(emdb_table_reserve(db, a, 3 * N), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(prefetch(db, a, 0, N), EMDB_OK, "%s", emdb_last_error());
	uint64_t *ids = id_range(0, N);
	float *g = calloc((size_t)N * DIM, sizeof(float));
	size_t before = emdb_alloc_bytes();
	emdb_alloc_set_limit(before + (1u << 20));
	int rc = emdb_push(db, a, ids, N, DIM, g);
	cr_assert_eq(rc, EMDB_ERR_NOMEM, "rc %d: %s", rc, emdb_last_error());
	cr_assert_eq(emdb_alloc_bytes(), before, "a refused Push kept %zd bytes",
		     (ssize_t)(emdb_alloc_bytes() - before));
	emdb_table_stats s = stats_of(db, a);
	cr_assert_eq(s.pending_rows, 0);
	cr_assert_eq(s.calls_push, 0);
	cr_assert_eq(s.rows, N);
	/* The same through a ticket. */
	emdb_ticket *tk;
	emdb_alloc_set_limit(0);
	cr_assert_eq(emdb_prefetch(db, a, ids, N, &tk), EMDB_OK, "%s", emdb_last_error());
	before = emdb_alloc_bytes();
	emdb_alloc_set_limit(before + (1u << 20));
	cr_assert_eq(emdb_push_ticket(db, a, tk, DIM, g), EMDB_ERR_NOMEM);
	cr_assert_eq(emdb_alloc_bytes(), before);
	emdb_alloc_set_limit(0);
	cr_assert_eq(emdb_push_ticket(db, a, tk, DIM, g), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(stats_of(db, a).pending_rows, N);
	emdb_ticket_free(tk);
	free(g);
	free(ids);
	emdb_db_close(db);
}

/* A call tried with its k-th allocation failing, k = 0, 1, ... until it
 * succeeds: every failure must be NOMEM, leave the bytes in use as they
 * were (unless bytes_may_grow) and pass `check`. */
typedef struct inject {
	emdb_db *db;
	uint32_t table;
	bool bytes_may_grow;
	int (*attempt)(struct inject *in);
	void (*check)(struct inject *in, int k); /* may be NULL */
	emdb_table_config cfg;                     /* what attempt uses */
	emdb_ticket *tk;
	const float *grads;
	emdb_table_stats s0;
} inject;

/* Returns the number of failed tries. */
static int inject_until_ok(inject *in, int most)
{
	size_t before = emdb_alloc_bytes();
	for (int k = 0; k < most; k++) {
		emdb_alloc_fail_after((uint64_t)k);
		int rc = in->attempt(in);
		emdb_alloc_fail_reset();
		if (rc == EMDB_OK)
			return k;
		cr_assert_eq(rc, EMDB_ERR_NOMEM, "allocation %d failing: %s", k, emdb_last_error());
		if (!in->bytes_may_grow)
			cr_assert_eq(emdb_alloc_bytes(), before, "allocation %d failing kept %zd bytes", k,
				     (ssize_t)(emdb_alloc_bytes() - before));
		if (in->check)
			in->check(in, k);
	}
	cr_assert_fail("the call never succeeds in %d tries", most);
	return most;
}

static int try_prefetch_8000(inject *in)
{
	return prefetch(in->db, in->table, 0, 8000);
}

static void no_rows(inject *in, int k)
{
	cr_assert_eq(stats_of(in->db, in->table).rows, 0, "allocation %d failing", k);
}

/* An allocation failing anywhere inside a Prefetch that grows the table
 * by several chunks: NOMEM, and every chunk it mapped before the failure
 * is given back.  8,000 rows of 1 KiB are four chunks of 2 MiB; their
 * IDs fit the index shards' first capacity, so only the rows grow. */
Test(refusal, allocation_failure_midway_maps_no_chunk)
{
	emdb_db *db = open_db(64);
	inject in = { .db = db, .attempt = try_prefetch_8000, .check = no_rows };
	in.table = make_table(db, "a", 256, EMDB_OPT_SGD, EMDB_INIT_UNIFORM, -1, 1);
	uint64_t index0 = stats_of(db, in.table).bytes_index;
	int k = inject_until_ok(&in, 1000);
	cr_assert_gt(k, 4, "expected the chunks' allocations to inject into, got %d", k);
	cr_assert_eq(stats_of(db, in.table).rows, 8000);
	cr_assert_eq(stats_of(db, in.table).bytes_index, index0,
		     "the index grew: the test no longer isolates the rows");
	emdb_db_close(db);
}

static int try_reserve_100000(inject *in)
{
	return emdb_table_reserve(in->db, in->table, 100000);
}

static void no_chunk_kept(inject *in, int k)
{
	emdb_table_stats s = stats_of(in->db, in->table);
	cr_assert_eq(s.rows, in->s0.rows);
	cr_assert_eq(s.bytes_overhead, in->s0.bytes_overhead, "allocation %d failing kept %lld bytes of chunks", k,
		     (long long)(s.bytes_overhead - in->s0.bytes_overhead));
}

/* An allocation failing anywhere inside emdb_table_reserve: NOMEM, the
 * rows as they were, and no row chunk kept (bytes_overhead counts the
 * chunks mapped beyond the rows); the index may keep shards it grew. */
Test(refusal, reserve_failure_midway_keeps_no_chunk)
{
	emdb_db *db = open_db(64);
	inject in = { .db = db, .bytes_may_grow = true, .attempt = try_reserve_100000, .check = no_chunk_kept };
	in.table = make_table(db, "a", 64, EMDB_OPT_SGD, EMDB_INIT_UNIFORM, -1, 1);
	cr_assert_eq(prefetch(db, in.table, 0, 3000), EMDB_OK, "%s", emdb_last_error());
	in.s0 = stats_of(db, in.table);
	int k = inject_until_ok(&in, 10000);
	/* Shards grown by a failed try stay grown, so the tries do not
	 * count the index's allocations; the chunks' are all retried. */
	cr_assert_gt(k, 12, "expected the index's and the chunks' allocations to inject into, got %d", k);
	emdb_table_stats s1 = stats_of(db, in.table);
	cr_assert_gt(s1.bytes_index, in.s0.bytes_index);
	cr_assert_gt(s1.bytes_overhead, in.s0.bytes_overhead);
	emdb_db_close(db);
}

static int try_create(inject *in)
{
	return emdb_table_create(in->db, &in->cfg, &in->table);
}

static void no_table(inject *in, int k)
{
	uint32_t id;
	cr_assert_eq(emdb_table_find(in->db, in->cfg.name, &id), EMDB_ERR_NO_TABLE, "allocation %d failing", k);
}

/* An allocation failing anywhere inside emdb_table_create: NOMEM, no
 * table, and the bytes in use as before. */
Test(refusal, create_failure_midway_keeps_no_memory)
{
	emdb_db *db = open_db(64);
	inject in = { .db = db, .attempt = try_create, .check = no_table, .cfg = EMDB_TABLE_CONFIG_INIT };
	strcpy(in.cfg.name, "a");
	in.cfg.dim = 16;
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_ADAM, &in.cfg.optimizer), 0);
	cr_assert_gt(inject_until_ok(&in, 10000), 2, "expected several allocations to inject into");
	emdb_db_close(db);
}

enum { PUSH_N = 3000, PUSH_DIM = 32 };

static int try_push_ticket(inject *in)
{
	return emdb_push_ticket(in->db, in->table, in->tk, PUSH_DIM, in->grads);
}

static void nothing_pending(inject *in, int k)
{
	cr_assert_eq(stats_of(in->db, in->table).pending_rows, 0, "allocation %d failing", k);
}

/* An allocation failing anywhere inside a Push through a ticket into one
 * index shard (so one accumulator): NOMEM, nothing pending, and the
 * accumulator's memory as before, its slot arrays included when its key
 * array is what failed. */
Test(refusal, push_failure_midway_keeps_no_accumulator_memory)
{
	emdb_db *db = open_db(1);
	inject in = { .db = db, .attempt = try_push_ticket, .check = nothing_pending };
	in.table = make_table(db, "a", PUSH_DIM, EMDB_OPT_SGD, EMDB_INIT_UNIFORM, -1, 1);
	uint64_t *ids = id_range(0, PUSH_N);
	float *g = calloc((size_t)PUSH_N * PUSH_DIM, sizeof(float));
	in.grads = g;
	cr_assert_eq(emdb_prefetch(db, in.table, ids, PUSH_N, &in.tk), EMDB_OK, "%s", emdb_last_error());
	int k = inject_until_ok(&in, 1000);
	cr_assert_geq(k, 2, "expected the slot and key arrays to inject into, got %d", k);
	cr_assert_eq(stats_of(db, in.table).pending_rows, PUSH_N);
	emdb_ticket_free(in.tk);
	free(g);
	free(ids);
	emdb_db_close(db);
}
