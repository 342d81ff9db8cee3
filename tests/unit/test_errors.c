/*
 * test_errors.c - bad input gets a clear error code and message and changes
 * nothing; an allocation failure injected at any point of a call leaves the
 * table exactly as it was, and the same call succeeds when retried.
 */
#include <stdlib.h>

#include <emdb/alloc.h>
#include <emdb/db.h>

#include "base/alloc_fault.h"
#include "tests/lib/helpers.h"

/* A fingerprint of everything a user can observe of a table. */
typedef struct snap {
	emdb_table_stats st;
	float vec[64 * 4];
	float state[64 * 8]; /* Adam: 2 * dim floats per row */
	uint8_t found[64];
} snap;

static uint64_t probe_ids[64];

static void take(emdb_db *db, uint32_t t, snap *s)
{
	memset(s, 0, sizeof(*s));
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(db, t, &info), 0);
	s->st = info.stats;
	for (int i = 0; i < 64; i++)
		probe_ids[i] = scramble((uint64_t)i * 7);
	cr_assert_eq(emdb_lookup(db, t, probe_ids, 64, 4, s->vec, s->found), 0);
	cr_assert_eq(emdb_read_state(db, t, probe_ids, 64, s->state, NULL), 0);
}

static void assert_same(const snap *a, const snap *b)
{
	cr_assert_eq(a->st.rows, b->st.rows, "rows %llu -> %llu", (unsigned long long)a->st.rows,
		     (unsigned long long)b->st.rows);
	cr_assert_eq(a->st.pending_rows, b->st.pending_rows);
	cr_assert_eq(a->st.step, b->st.step);
	cr_assert_eq(memcmp(a->vec, b->vec, sizeof(a->vec)), 0);
	cr_assert_eq(memcmp(a->state, b->state, sizeof(a->state)), 0);
	cr_assert_eq(memcmp(a->found, b->found, sizeof(a->found)), 0);
}

Test(errors, bad_input_is_refused_and_changes_nothing)
{
	emdb_db *db = open_db(8);
	uint32_t t = make_table(db, "t", 4, EMDB_OPT_ADAGRAD, EMDB_INIT_UNIFORM, -1, 1);
	uint32_t other = make_table(db, "o", 4, EMDB_OPT_SGD, EMDB_INIT_ZEROS, 0, 0);
	uint64_t ids[8];
	float buf[8 * 4], g[8 * 4];
	for (int i = 0; i < 8; i++)
		ids[i] = scramble((uint64_t)i * 7);
	for (int i = 0; i < 32; i++)
		g[i] = 1;
	cr_assert_eq(emdb_push(db, t, ids, 4, 4, g), 0);

	snap before, after;
	take(db, t, &before);
	emdb_ticket *tk_other, *tk = NULL;
	cr_assert_eq(emdb_prefetch(db, other, ids, 8, &tk_other), 0);

	cr_assert_eq(emdb_pull(db, 999, ids, 8, 4, buf), EMDB_ERR_NO_TABLE);
	cr_assert(strstr(emdb_last_error(), "999"), "message names the table: %s", emdb_last_error());
	cr_assert_eq(emdb_push(db, t, ids, 8, 5, g), EMDB_ERR_DIM);
	cr_assert(strstr(emdb_last_error(), "dim 5"), "%s", emdb_last_error());
	cr_assert_eq(emdb_pull(db, t, ids, 0, 4, buf), EMDB_ERR_BATCH);
	cr_assert_eq(emdb_prefetch(db, t, ids, 0, &tk), EMDB_ERR_BATCH);
	cr_assert_eq(emdb_prefetch(db, t, ids, (size_t)5 << 20, &tk), EMDB_ERR_BATCH);
	cr_assert_null(tk);
	cr_assert_eq(emdb_pull(db, t, NULL, 8, 4, buf), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_pull(db, t, ids, 8, 4, NULL), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_push(db, t, ids, 8, 4, NULL), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_lookup(db, t, ids, 8, 3, buf, NULL), EMDB_ERR_DIM);
	cr_assert_eq(emdb_push_ticket(db, t, tk_other, 4, g), EMDB_ERR_TICKET);
	cr_assert(strstr(emdb_last_error(), "ticket"), "%s", emdb_last_error());
	cr_assert_eq(emdb_pull_ticket(db, t, tk_other, 4, buf), EMDB_ERR_TICKET);
	cr_assert_eq(emdb_pull_ticket(db, t, NULL, 4, buf), EMDB_ERR_INVALID);
	uint64_t bad_offs[3] = { 0, 5, 3 };
	cr_assert_eq(emdb_pull_bags(db, t, ids, 8, bad_offs, 2, EMDB_POOL_SUM, 4, buf), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_push_bags(db, t, ids, 8, bad_offs, 2, EMDB_POOL_SUM, 4, g), EMDB_ERR_INVALID);
	uint64_t offs[3] = { 0, 4, 8 };
	cr_assert_eq(emdb_pull_bags(db, t, ids, 8, offs, 2, (emdb_pool)7, 4, buf), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_pull_bags(db, t, ids, 8, offs, 0, EMDB_POOL_SUM, 4, buf), EMDB_ERR_BATCH);
	cr_assert_eq(emdb_update(db, 12345, NULL), EMDB_ERR_NO_TABLE);

	take(db, t, &after);
	assert_same(&before, &after);
	emdb_ticket_free(tk_other);
	emdb_db_close(db);
}

Test(errors, bad_configs_name_the_field)
{
	emdb_db *db;
	emdb_db_config dc = EMDB_DB_CONFIG_INIT;
	dc.shards = 48;
	cr_assert_eq(emdb_db_open(&dc, &db), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_last_error(), "shards"), "%s", emdb_last_error());
	dc.shards = 64;
	dc.size = 0;
	cr_assert_eq(emdb_db_open(&dc, &db), EMDB_ERR_INVALID);

	db = open_db(4);
	emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
	c.dim = 4;
	strcpy(c.name, "bad name");
	cr_assert_eq(emdb_table_create(db, &c, NULL), EMDB_ERR_INVALID);
	strcpy(c.name, "ok");
	c.dim = 0;
	cr_assert_eq(emdb_table_create(db, &c, NULL), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_last_error(), "dim"), "%s", emdb_last_error());
	c.dim = 4;
	c.optimizer.lr = -1;
	cr_assert_eq(emdb_table_create(db, &c, NULL), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_last_error(), "lr"), "%s", emdb_last_error());
	c.optimizer.lr = 0.1;
	c.init.kind = EMDB_INIT_UNIFORM;
	c.init.a = 1;
	c.init.b = 0;
	cr_assert_eq(emdb_table_create(db, &c, NULL), EMDB_ERR_INVALID);
	size_t n;
	cr_assert_eq(emdb_table_list(db, NULL, 0, &n), 0);
	cr_assert_eq(n, 0, "no table was created by a refused call");
	emdb_db_close(db);
}

/* Run `op` with the k-th allocation failing, for every k until it
 * succeeds: each failure must leave the table as it was. */
typedef int (*op_fn)(emdb_db *db, uint32_t t, int round);

static uint64_t big_ids[20000];
static float big_grads[20000 * 4];

static int op_prefetch(emdb_db *db, uint32_t t, int round)
{
	emdb_ticket *tk = NULL;
	int rc = emdb_prefetch(db, t, big_ids, 20000, &tk);
	cr_assert((rc == 0) == (tk != NULL));
	emdb_ticket_free(tk);
	return rc;
}

static int op_push(emdb_db *db, uint32_t t, int round)
{
	return emdb_push(db, t, big_ids, 20000, 4, big_grads);
}

static int op_push_update(emdb_db *db, uint32_t t, int round)
{
	return emdb_push_update(db, t, big_ids, 20000, 4, big_grads, NULL);
}

static int op_pull(emdb_db *db, uint32_t t, int round)
{
	static float out[20000 * 4];
	return emdb_pull(db, t, big_ids, 20000, 4, out);
}

static void inject_everywhere(op_fn op, const char *what)
{
	emdb_db *db = open_db(64);
	uint32_t t = make_table(db, "t", 4, EMDB_OPT_ADAM, EMDB_INIT_NORMAL, 0, 1);
	for (int i = 0; i < 20000; i++) {
		big_ids[i] = scramble((uint64_t)i * 7); /* the probe IDs are among them */
		for (int c = 0; c < 4; c++)
			big_grads[i * 4 + c] = 0.25f * (float)(c + 1);
	}
	snap before, after;
	take(db, t, &before);
	int k = 0, rc;
	uint64_t injected0 = emdb_alloc_injected_failures();
	for (;; k++) {
		emdb_alloc_fail_after((uint64_t)k);
		rc = op(db, t, k);
		emdb_alloc_fail_reset();
		if (rc == 0)
			break;
		cr_assert_eq(rc, EMDB_ERR_NOMEM, "%s with allocation %d failing: %s", what, k, emdb_last_error());
		take(db, t, &after);
		assert_same(&before, &after);
		cr_assert_lt(k, 10000, "%s never succeeds", what);
	}
	cr_assert_gt(k, 3, "%s: expected several allocations to inject into, got %d", what, k);
	cr_assert_gt(emdb_alloc_injected_failures(), injected0);
	/* The successful call did its whole job. */
	take(db, t, &after);
	cr_assert_eq(after.st.rows, 20000);
	if (op == op_push) {
		cr_assert_eq(after.st.pending_rows, 20000);
		cr_assert_eq(emdb_update(db, t, NULL), 0);
	}
	if (op == op_push_update) {
		cr_assert_eq(after.st.pending_rows, 0);
		cr_assert_eq(after.st.step, before.st.step + 1);
		cr_assert_eq(after.st.rows_updated, 20000);
	}
	emdb_db_close(db);
}

Test(errors, injected_allocation_failure_in_prefetch)
{
	inject_everywhere(op_prefetch, "prefetch");
}

Test(errors, injected_allocation_failure_in_push)
{
	inject_everywhere(op_push, "push");
}

Test(errors, injected_allocation_failure_in_push_update)
{
	inject_everywhere(op_push_update, "push_update");
}

Test(errors, injected_allocation_failure_in_pull)
{
	inject_everywhere(op_pull, "pull");
}

Test(errors, memory_limit_refuses_without_damage)
{
	emdb_db *db = open_db(16);
	uint32_t t = make_table(db, "t", 4, EMDB_OPT_SGD, EMDB_INIT_ZEROS, 0, 0);
	for (int i = 0; i < 20000; i++)
		big_ids[i] = scramble((uint64_t)i * 7);
	snap before, after;
	take(db, t, &before);
	emdb_alloc_set_limit(emdb_alloc_bytes() + 4096);
	emdb_ticket *tk = NULL;
	cr_assert_eq(emdb_prefetch(db, t, big_ids, 20000, &tk), EMDB_ERR_NOMEM);
	cr_assert(strstr(emdb_last_error(), "limit"), "%s", emdb_last_error());
	emdb_alloc_set_limit(0);
	take(db, t, &after);
	assert_same(&before, &after);
	emdb_db_close(db);
}

Test(errors, strings_for_every_code)
{
	cr_assert_str_eq(emdb_err_name(EMDB_ERR_DIM), "DIM");
	cr_assert_str_eq(emdb_strerror(EMDB_OK), "success");
	cr_assert_str_eq(emdb_strerror(-999), "unknown error");
	cr_assert_str_eq(emdb_err_name(-999), "UNKNOWN");
	for (int e = 0; e >= EMDB_ERR_NOSPACE; e--) /* the last code */
		cr_assert_str_neq(emdb_err_name(e), "UNKNOWN", "code %d has no name", e);
}
