/*
 * test_client_mem.c - what is particular to mem://: databases shared by
 * name or private, a caller's engine wrapped, the worker queue of the
 * asynchronous calls (abandoned futures included), the operations that
 * only a server has, and the options struct's size rule.
 */
#include <criterion/criterion.h>
#include <stddef.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/client.h>
#include <emdb/db.h>

#include "tests/lib/helpers.h"

#define OK(call) cr_assert_eq((call), EMDB_OK, "%s: %s", #call, emdb_client_last_error())

static uint32_t create(emdb_client *c, const char *name, uint32_t dim)
{
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	uint32_t id;
	strcpy(cfg.name, name);
	cfg.dim = dim;
	cfg.init = (emdb_init){ EMDB_INIT_UNIFORM, -1, 1 };
	OK(emdb_client_table_create(c, &cfg, &id));
	return id;
}

Test(client_mem, named_databases_are_shared_private_ones_are_not)
{
	emdb_client *a, *b, *p;
	uint32_t id;
	OK(emdb_client_connect("mem://jobA", NULL, &a));
	OK(emdb_client_connect("mem://jobA", NULL, &b));
	OK(emdb_client_connect("mem://", NULL, &p));
	create(a, "ads", 4);
	OK(emdb_client_table_find(b, "ads", &id)); /* b sees a's table */
	cr_assert_eq(emdb_client_table_find(p, "ads", &id), EMDB_ERR_NO_TABLE);

	/* The database lives while one handle holds it. */
	emdb_client_close(a);
	OK(emdb_client_table_find(b, "ads", &id));
	emdb_client_close(b);
	OK(emdb_client_connect("mem://jobA", NULL, &a));
	cr_assert_eq(emdb_client_table_find(a, "ads", &id), EMDB_ERR_NO_TABLE, "a closed database came back");
	emdb_client_close(a);
	emdb_client_close(p);
}

Test(client_mem, wrap_a_callers_engine)
{
	emdb_db *db = open_db(16);
	uint32_t t = make_table(db, "direct", 8, EMDB_OPT_SGD, EMDB_INIT_NORMAL, 0, 1);
	emdb_client *c;
	cr_assert_eq(emdb_client_wrap(NULL, NULL, &c), EMDB_ERR_INVALID);
	OK(emdb_client_wrap(db, NULL, &c));
	uint32_t id;
	OK(emdb_client_table_find(c, "direct", &id));
	cr_assert_eq(id, t);
	uint64_t ids[3] = { 1, 2, 3 };
	float a[24], b[24];
	OK(emdb_client_pull(c, t, ids, 3, 8, a));
	cr_assert_eq(emdb_pull(db, t, ids, 3, 8, b), 0);
	cr_assert_eq(memcmp(a, b, sizeof(a)), 0);
	emdb_client_close(c);
	/* The engine is still the caller's and still open. */
	cr_assert_eq(emdb_pull(db, t, ids, 3, 8, b), 0);
	emdb_db_close(db);
}

Test(client_mem, server_only_operations)
{
	emdb_client *c;
	OK(emdb_client_connect("mem://", NULL, &c));
	cr_assert_eq(emdb_client_role(c), EMDB_ROLE_ADMIN);
	cr_assert_str_eq(emdb_client_server(c), "emdb (in-process)");
	cr_assert_eq(emdb_client_max_batch(c), 4u << 20);
	cr_assert_eq(emdb_client_shutdown(c), EMDB_ERR_UNSUPPORTED);
	cr_assert_eq(emdb_client_config_set(c, "shards", "8"), EMDB_ERR_UNSUPPORTED);
	cr_assert(strstr(emdb_client_last_error(), "mem://"), "%s", emdb_client_last_error());
	emdb_client_kv *kv;
	size_t n;
	OK(emdb_client_config_get(c, "*", &kv, &n));
	cr_assert_eq(n, 4);
	cr_assert_str_eq(kv[0].key, "shards");
	cr_assert_str_eq(kv[0].value, "64");
	emdb_free(kv);
	OK(emdb_client_ping(c));
	emdb_client_close(c);
}

Test(client_mem, mem_config_and_options_size)
{
	emdb_db_config dbc = EMDB_DB_CONFIG_INIT;
	dbc.shards = 8;
	dbc.max_batch = 100;
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.mem_config = &dbc;
	emdb_client *c;
	OK(emdb_client_connect("mem://", &o, &c));
	cr_assert_eq(emdb_client_max_batch(c), 100);
	uint32_t t = create(c, "t", 2);
	static uint64_t ids[101];
	static float out[202];
	cr_assert_eq(emdb_client_pull(c, t, ids, 101, 2, out), EMDB_ERR_BATCH);
	emdb_client_close(c);

	/* A caller built against a shorter struct gets the defaults for
	 * the fields it does not know. */
	emdb_client_options old = EMDB_CLIENT_OPTIONS_INIT;
	old.size = offsetof(emdb_client_options, token);
	old.mem_config = &dbc; /* beyond size: ignored */
	OK(emdb_client_connect("mem://", &old, &c));
	cr_assert_eq(emdb_client_max_batch(c), 4u << 20);
	emdb_client_close(c);

	dbc.shards = 3;
	o.mem_config = &dbc;
	cr_assert_eq(emdb_client_connect("mem://", &o, &c), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_client_last_error(), "shards"), "%s", emdb_client_last_error());
}

/* Many futures on one worker, half of them freed while still queued or
 * running: the rest complete with the right rows, nothing is touched
 * after its free (ASan would tell), and abandoned Prefetches leak no
 * ticket. */
Test(client_mem, abandoned_futures_in_the_queue)
{
	enum { F = 200, FN = 16, FD = 4 };
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.mem_threads = 1;
	emdb_client *c;
	OK(emdb_client_connect("mem://", &o, &c));
	uint32_t t = create(c, "q", FD);
	static uint64_t ids[F][FN];
	static float out[F][FN * FD], want[FN * FD];
	static emdb_client_ticket *tk[F];
	emdb_future *f[F];
	for (int round = 0; round < 20; round++) {
		/* Submit all, then free the odd ones while the worker is
		 * taking the even ones off the queue's head. */
		for (int r = 0; r < F; r++) {
			for (int i = 0; i < FN; i++)
				ids[r][i] = (uint64_t)(r * 3 + i + round);
			f[r] = r % 4 == 3 ? emdb_client_prefetch_async(c, t, ids[r], FN, &tk[r])
					  : emdb_client_pull_async(c, t, ids[r], FN, FD, out[r]);
		}
		for (int r = 1; r < F; r += 2)
			emdb_future_free(f[r]);
		for (int r = 0; r < F; r += 2) {
			cr_assert_eq(emdb_future_wait(f[r], -1), EMDB_OK, "%s", emdb_client_last_error());
			emdb_future_free(f[r]);
			OK(emdb_client_pull(c, t, ids[r], FN, FD, want));
			cr_assert_eq(memcmp(out[r], want, sizeof(want)), 0, "request %d", r);
		}
	}
	emdb_client_close(c);
}

Test(client_mem, async_without_workers_completes_at_submission)
{
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.mem_threads = 0;
	emdb_client *c;
	OK(emdb_client_connect("mem://", &o, &c));
	uint32_t t = create(c, "z", 2);
	uint64_t ids[2] = { 9, 10 };
	emdb_client_ticket *tk = NULL;
	emdb_future *f = emdb_client_prefetch_async(c, t, ids, 2, &tk);
	cr_assert_null(tk, "the ticket is delivered by wait or poll, not before");
	cr_assert_eq(emdb_future_poll(f), EMDB_OK);
	cr_assert_not_null(tk);
	cr_assert_eq(emdb_client_ticket_count(tk), 2);
	emdb_future_free(f);
	/* An undelivered ticket is freed with its future (ASan: no leak). */
	emdb_client_ticket *lost = NULL;
	emdb_future_free(emdb_client_prefetch_async(c, t, ids, 2, &lost));
	cr_assert_null(lost);
	/* Errors found at submission complete the future. */
	f = emdb_client_pull_async(c, 999, ids, 2, 2, (float[4]){ 0 });
	cr_assert_eq(emdb_future_poll(f), EMDB_ERR_NO_TABLE);
	cr_assert(strstr(emdb_client_last_error(), "999"), "%s", emdb_client_last_error());
	emdb_future_free(f);
	emdb_client_ticket_free(tk);
	emdb_client_close(c);
}

Test(client_mem, null_futures_and_handles)
{
	cr_assert_eq(emdb_future_wait(NULL, -1), EMDB_ERR_NOMEM);
	cr_assert_eq(emdb_future_poll(NULL), EMDB_ERR_NOMEM);
	emdb_future_free(NULL);
	emdb_client_ticket_free(NULL);
	emdb_client_close(NULL);
	cr_assert_eq(emdb_client_ping(NULL), EMDB_ERR_INVALID);
	cr_assert_null(emdb_client_update_async(NULL, 1, NULL));
}

Test(client_mem, tickets_belong_to_their_handle)
{
	emdb_client *a, *b;
	OK(emdb_client_connect("mem://same", NULL, &a));
	OK(emdb_client_connect("mem://same", NULL, &b));
	uint32_t t = create(a, "t", 2);
	uint64_t ids[2] = { 1, 2 };
	float out[4];
	emdb_client_ticket *tk;
	OK(emdb_client_prefetch(a, t, ids, 2, &tk));
	cr_assert_eq(emdb_client_pull_ticket(b, t, tk, 2, out), EMDB_ERR_INVALID);
	OK(emdb_client_pull_ticket(a, t, tk, 2, out));
	emdb_client_ticket_free(tk);
	emdb_client_close(b);
	emdb_client_close(a);
}
