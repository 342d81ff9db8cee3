/*
 * test_client_ops.c - every operation of the client library, over mem://,
 * TCP and a Unix socket, against the in-process engine: the same calls
 * on a fresh database give the same ids, bytes, counts and error codes.
 * Push-and-Update in one call (emdb_client_push_update, by IDs and by
 * ticket) leaves the rows and optimizer state bit for bit as a Push then
 * an Update of a twin table of the engine leave them, step after step.
 * Room made up front (emdb_client_table_reserve) spares the inserts that
 * fill it every index resize, changes no row, and its refusals are the
 * engine's (NO_TABLE, LIMIT, and NOMEM over the server's max_memory).
 *
 * The network tests start emdb-server on loopback with an ephemeral port
 * and a Unix socket in a temporary directory, and kill it in their .fini
 * (tests/lib/client_server.h).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/client.h>
#include <emdb/db.h>

#include "tests/lib/client_server.h"
#include "tests/lib/helpers.h"

#define N 300

static test_server srv;

static void srv_start(void)
{
	test_server_start(&srv, NULL);
}

static void srv_stop(void)
{
	test_server_stop(&srv);
}

static emdb_table_config table_cfg(const char *name, uint32_t dim, emdb_opt_kind opt, emdb_init_kind init,
				   double a, double b)
{
	emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
	strcpy(c.name, name);
	c.dim = dim;
	emdb_optimizer_defaults(opt, &c.optimizer);
	c.optimizer.lr = 0.1;
	c.init = (emdb_init){ init, a, b };
	c.seed = 99;
	c.lookup_default = EMDB_DEFAULT_INIT;
	return c;
}

/* The client call and the engine call must agree on the result code. */
#define SAME_RC(client_call, engine_call)                                                        \
	do {                                                                                     \
		int rc_c_ = (client_call);                                                       \
		int rc_e_ = (engine_call);                                                       \
		cr_assert_eq(rc_c_, rc_e_, "%s -> %s (%s), engine %s (%s)", #client_call,        \
			     emdb_err_name(rc_c_), emdb_client_last_error(), emdb_err_name(rc_e_), \
			     emdb_last_error());                                                 \
	} while (0)

#define OK(call) cr_assert_eq((call), EMDB_OK, "%s: %s", #call, emdb_client_last_error())

static void same_floats(const float *a, const float *b, size_t n, const char *what)
{
	cr_assert_eq(memcmp(a, b, n * sizeof(float)), 0, "%s: client and engine vectors differ", what);
}

static void same_stats(const emdb_table_stats *a, const emdb_table_stats *b)
{
	cr_assert_eq(a->rows, b->rows);
	cr_assert_eq(a->step, b->step);
	cr_assert_eq(a->pending_rows, b->pending_rows);
	cr_assert_eq(a->bytes_vectors, b->bytes_vectors);
	cr_assert_eq(a->bytes_optimizer, b->bytes_optimizer);
	cr_assert_eq(a->calls_prefetch, b->calls_prefetch);
	cr_assert_eq(a->calls_pull, b->calls_pull);
	cr_assert_eq(a->calls_push, b->calls_push);
	cr_assert_eq(a->calls_update, b->calls_update);
	cr_assert_eq(a->calls_lookup, b->calls_lookup);
	cr_assert_eq(a->ids_prefetch, b->ids_prefetch);
	cr_assert_eq(a->ids_pull, b->ids_pull);
	cr_assert_eq(a->ids_push, b->ids_push);
	cr_assert_eq(a->ids_lookup, b->ids_lookup);
	cr_assert_eq(a->lookup_misses, b->lookup_misses);
	cr_assert_eq(a->rows_updated, b->rows_updated);
}

/* Drive every operation through c and the same ones on a fresh engine. */
/* Field by field: the structs' padding bytes carry no meaning. */
static void same_optimizer(const emdb_optimizer *a, const emdb_optimizer *b)
{
	cr_assert_eq(a->kind, b->kind);
	cr_assert_eq(a->lr, b->lr);
	cr_assert_eq(a->eps, b->eps);
	cr_assert_eq(a->beta1, b->beta1);
	cr_assert_eq(a->beta2, b->beta2);
	cr_assert_eq(a->lr_decay, b->lr_decay);
	cr_assert_eq(a->initial_accumulator, b->initial_accumulator);
	cr_assert_eq(a->beta, b->beta);
	cr_assert_eq(a->l1, b->l1);
	cr_assert_eq(a->l2, b->l2);
}

static void compare_with_engine(emdb_client *c)
{
	emdb_db *db = open_db(64);
	uint32_t u_c, u_e, i_c, i_e, id;

	/* ---- tables ---- */
	emdb_table_config users = table_cfg("users", 8, EMDB_OPT_SGD, EMDB_INIT_UNIFORM, -0.5, 0.5);
	emdb_table_config items = table_cfg("items.v2", 5, EMDB_OPT_ADAM, EMDB_INIT_NORMAL, 0, 0.1);
	SAME_RC(emdb_client_table_create(c, &users, &u_c), emdb_table_create(db, &users, &u_e));
	SAME_RC(emdb_client_table_create(c, &items, &i_c), emdb_table_create(db, &items, &i_e));
	cr_assert_eq(u_c, u_e);
	cr_assert_eq(i_c, i_e);
	SAME_RC(emdb_client_table_create(c, &users, NULL), emdb_table_create(db, &users, NULL));
	emdb_table_config bad = users;
	bad.dim = 0;
	strcpy(bad.name, "bad");
	SAME_RC(emdb_client_table_create(c, &bad, NULL), emdb_table_create(db, &bad, NULL));
	bad = users;
	bad.size = 0;
	SAME_RC(emdb_client_table_create(c, &bad, NULL), emdb_table_create(db, &bad, NULL));

	OK(emdb_client_table_find(c, "items.v2", &id));
	cr_assert_eq(id, i_e);
	SAME_RC(emdb_client_table_find(c, "nope", &id), emdb_table_find(db, "nope", &id));

	emdb_table_info ic, ie;
	OK(emdb_client_table_describe(c, i_c, &ic));
	cr_assert_eq(emdb_table_describe(db, i_e, &ie), 0);
	cr_assert_eq(ic.id, ie.id);
	cr_assert_str_eq(ic.config.name, "items.v2");
	cr_assert_eq(ic.config.dim, 5);
	cr_assert_eq(ic.config.optimizer.kind, EMDB_OPT_ADAM);
	same_optimizer(&ic.config.optimizer, &ie.config.optimizer);
	cr_assert_eq(ic.config.init.kind, ie.config.init.kind);
	cr_assert_eq(ic.config.init.a, ie.config.init.a);
	cr_assert_eq(ic.config.init.b, ie.config.init.b);
	cr_assert_eq(ic.config.seed, 99);
	cr_assert_eq(ic.config.lookup_default, EMDB_DEFAULT_INIT);
	SAME_RC(emdb_client_table_describe(c, 777, &ic), emdb_table_describe(db, 777, &ie));
	SAME_RC(emdb_client_table_describe(c, 0, &ic), emdb_table_describe(db, 0, &ie));

	uint32_t lc[4], le[4];
	size_t nc, ne;
	OK(emdb_client_table_list(c, lc, 4, &nc));
	cr_assert_eq(emdb_table_list(db, le, 4, &ne), 0);
	cr_assert_eq(nc, ne);
	cr_assert_eq(memcmp(lc, le, nc * sizeof(uint32_t)), 0);
	OK(emdb_client_table_list(c, NULL, 0, &nc));
	cr_assert_eq(nc, 2);

	/* ---- Prefetch and Pull ---- */
	static uint64_t ids[N], ids2[N], offsets[41];
	static float vc[N * 8], ve[N * 8], g[N * 8];
	for (int i = 0; i < N; i++) {
		ids[i] = scramble((uint64_t)(i % 200)); /* duplicates */
		ids2[i] = scramble((uint64_t)(i + 150));
	}
	for (int b = 0; b <= 40; b++) /* 40 bags of 7 IDs, the last of 27 */
		offsets[b] = b == 40 ? N : (uint64_t)b * (N / 40);
	offsets[7] = offsets[6]; /* bag 6 empty, bag 7 of 14 */

	emdb_client_ticket *tc;
	emdb_ticket *te;
	OK(emdb_client_prefetch(c, u_c, ids, N, &tc));
	cr_assert_eq(emdb_prefetch(db, u_e, ids, N, &te), 0);
	cr_assert_eq(emdb_client_ticket_count(tc), emdb_ticket_count(te));
	cr_assert_eq(emdb_client_ticket_table(tc), u_c);

	OK(emdb_client_pull_ticket(c, u_c, tc, 8, vc));
	cr_assert_eq(emdb_pull_ticket(db, u_e, te, 8, ve), 0);
	same_floats(vc, ve, N * 8, "pull_ticket");
	OK(emdb_client_pull(c, u_c, ids2, N, 8, vc));
	cr_assert_eq(emdb_pull(db, u_e, ids2, N, 8, ve), 0);
	same_floats(vc, ve, N * 8, "pull");
	OK(emdb_client_pull_bags(c, u_c, ids, N, offsets, 40, EMDB_POOL_SUM, 8, vc));
	cr_assert_eq(emdb_pull_bags(db, u_e, ids, N, offsets, 40, EMDB_POOL_SUM, 8, ve), 0);
	same_floats(vc, ve, 40 * 8, "pull_bags sum");
	OK(emdb_client_pull_bags_ticket(c, u_c, tc, offsets, 40, EMDB_POOL_MEAN, 8, vc));
	cr_assert_eq(emdb_pull_bags_ticket(db, u_e, te, offsets, 40, EMDB_POOL_MEAN, 8, ve), 0);
	same_floats(vc, ve, 40 * 8, "pull_bags_ticket mean");

	/* ---- Push and Update ---- */
	for (int i = 0; i < N * 8; i++)
		g[i] = (float)((i * 37) % 101 - 50) / 64.0f;
	OK(emdb_client_push(c, u_c, ids2, N, 8, g));
	cr_assert_eq(emdb_push(db, u_e, ids2, N, 8, g), 0);
	OK(emdb_client_push_ticket(c, u_c, tc, 8, g));
	cr_assert_eq(emdb_push_ticket(db, u_e, te, 8, g), 0);
	OK(emdb_client_push_bags(c, u_c, ids, N, offsets, 40, EMDB_POOL_MEAN, 8, g));
	cr_assert_eq(emdb_push_bags(db, u_e, ids, N, offsets, 40, EMDB_POOL_MEAN, 8, g), 0);
	OK(emdb_client_push_bags_ticket(c, u_c, tc, offsets, 40, EMDB_POOL_SUM, 8, g));
	cr_assert_eq(emdb_push_bags_ticket(db, u_e, te, offsets, 40, EMDB_POOL_SUM, 8, g), 0);
	uint64_t rc_rows = 1, re_rows = 2;
	OK(emdb_client_update(c, u_c, &rc_rows));
	cr_assert_eq(emdb_update(db, u_e, &re_rows), 0);
	cr_assert_eq(rc_rows, re_rows);
	cr_assert_gt(rc_rows, 0);
	OK(emdb_client_pull_ticket(c, u_c, tc, 8, vc));
	cr_assert_eq(emdb_pull_ticket(db, u_e, te, 8, ve), 0);
	same_floats(vc, ve, N * 8, "pull after update");

	/* Adam on the second table, then update all. */
	OK(emdb_client_push(c, i_c, ids, N, 5, g));
	cr_assert_eq(emdb_push(db, i_e, ids, N, 5, g), 0);
	OK(emdb_client_update_all(c, &rc_rows));
	cr_assert_eq(emdb_update_all(db, &re_rows), 0);
	cr_assert_eq(rc_rows, re_rows);
	OK(emdb_client_pull(c, i_c, ids, N, 5, vc));
	cr_assert_eq(emdb_pull(db, i_e, ids, N, 5, ve), 0);
	same_floats(vc, ve, N * 5, "adam pull after update_all");

	/* ---- Lookup and state ---- */
	static uint64_t lk[N];
	static uint8_t fc[N], fe[N];
	for (int i = 0; i < N; i++)
		lk[i] = i % 2 ? ids[i] : 1000000 + (uint64_t)i; /* half unknown */
	OK(emdb_client_lookup(c, i_c, lk, N, 5, vc, fc));
	cr_assert_eq(emdb_lookup(db, i_e, lk, N, 5, ve, fe), 0);
	same_floats(vc, ve, N * 5, "lookup");
	cr_assert_eq(memcmp(fc, fe, N), 0);
	cr_assert_eq(fc[0], 0);
	cr_assert_eq(fc[1], 1);
	OK(emdb_client_lookup(c, u_c, lk, N - 1, 8, vc, NULL)); /* odd n: padding */
	cr_assert_eq(emdb_lookup(db, u_e, lk, N - 1, 8, ve, NULL), 0);
	same_floats(vc, ve, (N - 1) * 8, "lookup without found");

	uint32_t per = emdb_optimizer_state_floats(EMDB_OPT_ADAM, 5);
	float *sc = calloc((size_t)N * per, sizeof(float)), *se = calloc((size_t)N * per, sizeof(float));
	OK(emdb_client_read_state(c, i_c, lk, N - 1, per, sc, fc));
	cr_assert_eq(emdb_read_state(db, i_e, lk, N - 1, se, fe), 0);
	same_floats(sc, se, (size_t)(N - 1) * per, "read_state");
	cr_assert_eq(memcmp(fc, fe, N - 1), 0);

	/* ---- asynchronous forms ---- */
	emdb_client_ticket *ta = NULL;
	uint64_t rows_a = 0;
	emdb_future *f1 = emdb_client_prefetch_async(c, u_c, ids2, N, &ta);
	cr_assert_eq(emdb_future_wait(f1, -1), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_not_null(ta);
	cr_assert_eq(emdb_client_ticket_count(ta), N);
	emdb_future *f2 = emdb_client_pull_ticket_async(c, u_c, ta, 8, vc);
	static float lo[N * 5];
	emdb_future *f3 = emdb_client_lookup_async(c, i_c, lk, N, 5, lo, fc);
	cr_assert_eq(emdb_future_wait(f2, -1), EMDB_OK);
	cr_assert_eq(emdb_future_wait(f3, -1), EMDB_OK);
	cr_assert_eq(emdb_future_wait(f3, 0), EMDB_OK); /* the result stays */
	static float ref[N * 8];
	emdb_ticket *te2;
	cr_assert_eq(emdb_prefetch(db, u_e, ids2, N, &te2), 0);
	emdb_ticket_free(te2);
	cr_assert_eq(emdb_pull(db, u_e, ids2, N, 8, ref), 0);
	same_floats(vc, ref, N * 8, "pull_ticket_async");
	cr_assert_eq(emdb_lookup(db, i_e, lk, N, 5, ref, fe), 0);
	same_floats(lo, ref, N * 5, "lookup_async");
	cr_assert_eq(memcmp(fc, fe, N), 0);
	emdb_future *f4 = emdb_client_push_ticket_async(c, u_c, ta, 8, g);
	cr_assert_eq(emdb_future_wait(f4, -1), EMDB_OK);
	cr_assert_eq(emdb_push(db, u_e, ids2, N, 8, g), 0);
	emdb_future *f5 = emdb_client_update_async(c, u_c, &rows_a);
	cr_assert_eq(emdb_future_wait(f5, -1), EMDB_OK);
	cr_assert_eq(emdb_update(db, u_e, &re_rows), 0);
	cr_assert_eq(rows_a, re_rows);
	emdb_future *f6 = emdb_client_pull_bags_async(c, u_c, ids2, N, offsets, 40, EMDB_POOL_SUM, 8, vc);
	cr_assert_eq(emdb_future_wait(f6, -1), EMDB_OK);
	cr_assert_eq(emdb_pull_bags(db, u_e, ids2, N, offsets, 40, EMDB_POOL_SUM, 8, ref), 0);
	same_floats(vc, ref, 40 * 8, "pull_bags_async");
	emdb_future *f7 = emdb_client_push_bags_async(c, u_c, ids2, N, offsets, 40, EMDB_POOL_SUM, 8, g);
	emdb_future *f8 = emdb_client_push_async(c, i_c, ids, N, 5, g);
	cr_assert_eq(emdb_future_wait(f7, -1), EMDB_OK);
	cr_assert_eq(emdb_future_wait(f8, -1), EMDB_OK);
	cr_assert_eq(emdb_push_bags(db, u_e, ids2, N, offsets, 40, EMDB_POOL_SUM, 8, g), 0);
	cr_assert_eq(emdb_push(db, i_e, ids, N, 5, g), 0);
	emdb_future *f9 = emdb_client_update_all_async(c, &rows_a);
	cr_assert_eq(emdb_future_wait(f9, -1), EMDB_OK);
	cr_assert_eq(emdb_update_all(db, &re_rows), 0);
	cr_assert_eq(rows_a, re_rows);
	emdb_future *f10 = emdb_client_pull_bags_ticket_async(c, u_c, ta, offsets, 40, EMDB_POOL_MEAN, 8, vc);
	emdb_future *f11 = emdb_client_push_bags_ticket_async(c, u_c, ta, offsets, 40, EMDB_POOL_MEAN, 8, g);
	cr_assert_eq(emdb_future_wait(f10, -1), EMDB_OK);
	cr_assert_eq(emdb_future_wait(f11, -1), EMDB_OK);
	emdb_future *f12 = emdb_client_pull_async(c, u_c, ids2, N, 8, ve);
	cr_assert_eq(emdb_future_wait(f12, -1), EMDB_OK);
	cr_assert_eq(emdb_pull(db, u_e, ids2, N, 8, ref), 0);
	same_floats(ve, ref, N * 8, "pull_async");
	emdb_future *fs[] = { f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12 };
	for (size_t k = 0; k < sizeof(fs) / sizeof(fs[0]); k++)
		emdb_future_free(fs[k]);
	/* f10 and f11 on the engine's side. */
	cr_assert_eq(emdb_pull_bags(db, u_e, ids2, N, offsets, 40, EMDB_POOL_MEAN, 8, ref), 0);
	same_floats(vc, ref, 40 * 8, "pull_bags_ticket_async");
	cr_assert_eq(emdb_push_bags(db, u_e, ids2, N, offsets, 40, EMDB_POOL_MEAN, 8, g), 0);

	/* ---- statistics ---- */
	emdb_db_stats sc_, se_;
	OK(emdb_client_stats(c, &sc_));
	cr_assert_eq(emdb_db_get_stats(db, &se_), 0);
	cr_assert_eq(sc_.tables, se_.tables);
	same_stats(&sc_.total, &se_.total);
	OK(emdb_client_table_describe(c, u_c, &ic));
	cr_assert_eq(emdb_table_describe(db, u_e, &ie), 0);
	same_stats(&ic.stats, &ie.stats);

	/* ---- errors: the engine's codes, whatever the transport ---- */
	OK(emdb_client_read_state(c, i_c, lk, 3, per, sc, NULL));
	cr_assert_eq(emdb_client_read_state(c, i_c, lk, 3, per + 1, sc, NULL), EMDB_ERR_DIM);
	cr_assert_eq(emdb_client_read_state(c, 999, lk, 3, per, sc, NULL), EMDB_ERR_NO_TABLE);
	free(sc);
	free(se);
	SAME_RC(emdb_client_pull(c, u_c, ids, N, 7, vc), emdb_pull(db, u_e, ids, N, 7, ve));
	SAME_RC(emdb_client_pull(c, 999, ids, N, 8, vc), emdb_pull(db, 999, ids, N, 8, ve));
	SAME_RC(emdb_client_pull(c, u_c, ids, 0, 8, vc), emdb_pull(db, u_e, ids, 0, 8, ve));
	SAME_RC(emdb_client_pull_ticket(c, i_c, tc, 5, vc), emdb_pull_ticket(db, i_e, te, 5, ve));
	SAME_RC(emdb_client_push_ticket(c, i_c, tc, 5, g), emdb_push_ticket(db, i_e, te, 5, g));
	SAME_RC(emdb_client_pull_bags(c, u_c, ids, N, offsets, 0, EMDB_POOL_SUM, 8, vc),
		emdb_pull_bags(db, u_e, ids, N, offsets, 0, EMDB_POOL_SUM, 8, ve));
	SAME_RC(emdb_client_pull_bags(c, u_c, ids, N, offsets, 40, (emdb_pool)9, 8, vc),
		emdb_pull_bags(db, u_e, ids, N, offsets, 40, (emdb_pool)9, 8, ve));
	SAME_RC(emdb_client_pull_bags(c, u_c, ids, N - 1, offsets, 40, EMDB_POOL_SUM, 8, vc),
		emdb_pull_bags(db, u_e, ids, N - 1, offsets, 40, EMDB_POOL_SUM, 8, ve));
	SAME_RC(emdb_client_push(c, u_c, ids, N, 4, g), emdb_push(db, u_e, ids, N, 4, g));
	SAME_RC(emdb_client_lookup(c, 999, ids, N, 8, vc, NULL), emdb_lookup(db, 999, ids, N, 8, ve, NULL));
	SAME_RC(emdb_client_update(c, 999, NULL), emdb_update(db, 999, NULL));
	SAME_RC(emdb_client_update(c, 0, NULL), emdb_update(db, 0, NULL));
	SAME_RC(emdb_client_table_drop(c, 999), emdb_table_drop(db, 999));
	cr_assert_eq(emdb_client_pull(c, u_c, NULL, N, 8, vc), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_client_pull(c, u_c, ids, N, 8, NULL), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_client_pull_ticket(c, u_c, NULL, 8, vc), EMDB_ERR_INVALID);
	cr_assert_neq(emdb_client_last_error()[0], 0);
	emdb_future *fe_ = emdb_client_pull_ticket_async(c, u_c, NULL, 8, vc);
	cr_assert_eq(emdb_future_wait(fe_, -1), EMDB_ERR_INVALID);
	emdb_future_free(fe_);
	emdb_client_ticket *tnone = (emdb_client_ticket *)1;
	cr_assert_eq(emdb_client_prefetch(c, 999, ids, N, &tnone), EMDB_ERR_NO_TABLE);
	cr_assert_null(tnone);

	/* ---- server and connection ---- */
	OK(emdb_client_ping(c));
	char *text = NULL;
	OK(emdb_client_info(c, NULL, &text));
	cr_assert(text && strlen(text) > 0);
	cr_assert(strstr(text, "# "), "%s", text);
	emdb_free(text);
	OK(emdb_client_info(c, "all", &text));
	emdb_free(text);
	cr_assert_eq(emdb_client_info(c, "no-such-section", &text), EMDB_ERR_INVALID);
	cr_assert_null(text);
	emdb_client_kv *kv;
	size_t nkv;
	OK(emdb_client_config_get(c, "*", &kv, &nkv));
	cr_assert_geq(nkv, 4);
	emdb_free(kv);
	OK(emdb_client_config_get(c, "max_batch", &kv, &nkv));
	cr_assert_eq(nkv, 1);
	cr_assert_str_eq(kv[0].key, "max_batch");
	cr_assert_eq(strtoull(kv[0].value, NULL, 10), emdb_client_max_batch(c));
	emdb_free(kv);
	OK(emdb_client_config_get(c, "zzz*", &kv, &nkv));
	cr_assert_eq(nkv, 0);
	emdb_free(kv);
	cr_assert_eq(emdb_client_role(c), EMDB_ROLE_ADMIN);
	cr_assert_gt(strlen(emdb_client_server(c)), 0);

	/* ---- drop: tickets of a dropped table fail with NO_TABLE ---- */
	SAME_RC(emdb_client_table_drop(c, u_c), emdb_table_drop(db, u_e));
	SAME_RC(emdb_client_table_describe(c, u_c, &ic), emdb_table_describe(db, u_e, &ie));
	SAME_RC(emdb_client_pull_ticket(c, u_c, tc, 8, vc), emdb_pull_ticket(db, u_e, te, 8, ve));
	OK(emdb_client_table_list(c, lc, 4, &nc));
	cr_assert_eq(nc, 1);
	cr_assert_eq(lc[0], i_c);

	emdb_client_ticket_free(ta);
	emdb_client_ticket_free(tc);
	emdb_ticket_free(te);
	emdb_db_close(db);
}

/* ---- Push and Update in one call ----------------------------------- */

#define PU_N 96     /* IDs per batch, with duplicates */
#define PU_STEPS 4

/* The rows and optimizer state of ids in table tc of c and in its twin te
 * of db, read without inserting, are the same bits, and so are the
 * tables' step, rows and pending gradients. */
static void same_tables(emdb_client *c, uint32_t tc, emdb_db *db, uint32_t te, const uint64_t *ids,
			size_t n, uint32_t dim, emdb_opt_kind opt, const char *what)
{
	uint32_t per = emdb_optimizer_state_floats(opt, dim);
	size_t width = dim > per ? dim : per;
	float *xc = calloc(n * width, sizeof(float)), *xe = calloc(n * width, sizeof(float));
	uint8_t *fc = calloc(n, 1), *fe = calloc(n, 1);
	cr_assert(xc && xe && fc && fe);
	OK(emdb_client_lookup(c, tc, ids, n, dim, xc, fc));
	cr_assert_eq(emdb_lookup(db, te, ids, n, dim, xe, fe), 0);
	same_floats(xc, xe, n * dim, what);
	cr_assert_eq(memcmp(fc, fe, n), 0, "%s: found flags differ", what);
	if (per) {
		OK(emdb_client_read_state(c, tc, ids, n, per, xc, NULL));
		cr_assert_eq(emdb_read_state(db, te, ids, n, xe, NULL), 0);
		same_floats(xc, xe, n * per, what);
	}
	emdb_table_info ic, ie;
	OK(emdb_client_table_describe(c, tc, &ic));
	cr_assert_eq(emdb_table_describe(db, te, &ie), 0);
	cr_assert_eq(ic.stats.step, ie.stats.step, "%s: step %llu, twin %llu", what,
		     (unsigned long long)ic.stats.step, (unsigned long long)ie.stats.step);
	cr_assert_eq(ic.stats.rows, ie.stats.rows, "%s", what);
	cr_assert_eq(ic.stats.pending_rows, ie.stats.pending_rows, "%s", what);
	free(xc);
	free(xe);
	free(fc);
	free(fe);
}

static uint64_t step_of(emdb_client *c, uint32_t t)
{
	emdb_table_info info;
	OK(emdb_client_table_describe(c, t, &info));
	cr_assert_eq(info.stats.pending_rows, 0, "gradients left after an Update");
	return info.stats.step;
}

/* Push-and-Update through c, Push then Update on a twin table of a fresh
 * engine (same id, config and seed, so the same initial rows), for SGD and
 * Adam: by IDs and by ticket, with duplicate IDs in the batch, after a
 * Push still pending, and asynchronously; then the errors, which apply
 * nothing. */
static void push_update_matches_push_then_update(emdb_client *c)
{
	emdb_db *db = open_db(64);
	static const emdb_opt_kind opts[] = { EMDB_OPT_SGD, EMDB_OPT_ADAM };
	static uint64_t ids[PU_N], other[PU_N], both[2 * PU_N];
	static float g[PU_N * 9], g2[PU_N * 9]; /* room for dim + 1 */
	for (int i = 0; i < PU_N; i++) {
		ids[i] = scramble((uint64_t)(i % 61));    /* 35 IDs twice */
		other[i] = scramble((uint64_t)(40 + i)); /* half of them in ids */
		both[i] = ids[i];
		both[PU_N + i] = other[i];
	}
	emdb_client_ticket *prev_tk = NULL;
	for (size_t k = 0; k < sizeof(opts) / sizeof(opts[0]); k++) {
		uint32_t dim = k ? 5 : 8, tc, te;
		emdb_table_config cfg = table_cfg(k ? "pu_adam" : "pu_sgd", dim, opts[k],
						  EMDB_INIT_UNIFORM, -0.5, 0.5);
		OK(emdb_client_table_create(c, &cfg, &tc));
		cr_assert_eq(emdb_table_create(db, &cfg, &te), 0);
		cr_assert_eq(tc, te, "the twin needs the same table id (it seeds the rows)");
		emdb_client_ticket *tk;
		emdb_ticket *et;
		OK(emdb_client_prefetch(c, tc, ids, PU_N, &tk));
		cr_assert_eq(emdb_prefetch(db, te, ids, PU_N, &et), 0);
		same_tables(c, tc, db, te, both, 2 * PU_N, dim, opts[k], "before any step");

		for (int s = 0; s < PU_STEPS; s++) {
			char what[96];
			snprintf(what, sizeof(what), "%s step %d", cfg.name, s);
			for (int i = 0; i < PU_N * 9; i++) {
				g[i] = (float)((i * 37 + s * 11) % 101 - 50) / 64.0f;
				g2[i] = (float)((i * 13 + s * 7) % 29 - 14) / 32.0f;
			}
			uint64_t step0 = step_of(c, tc), rows_c = 7, rows_e = 9;
			if (s == 2) {
				/* A Push pending: the fused call applies it too, in one step. */
				OK(emdb_client_push(c, tc, other, PU_N, dim, g2));
				cr_assert_eq(emdb_push(db, te, other, PU_N, dim, g2), 0);
			}
			if (s % 2 == 0) {
				OK(emdb_client_push_update(c, tc, ids, PU_N, dim, g, &rows_c));
				cr_assert_eq(emdb_push(db, te, ids, PU_N, dim, g), 0);
			} else {
				OK(emdb_client_push_update_ticket(c, tc, tk, dim, g, &rows_c));
				cr_assert_eq(emdb_push_ticket(db, te, et, dim, g), 0);
			}
			cr_assert_eq(emdb_update(db, te, &rows_e), 0);
			cr_assert_eq(rows_c, rows_e, "%s: %llu rows updated, twin %llu", what,
				     (unsigned long long)rows_c, (unsigned long long)rows_e);
			cr_assert_eq(rows_c, s == 2 ? 136 : 61, "%s: 61 IDs, 136 with the pending Push", what);
			cr_assert_eq(step_of(c, tc), step0 + 1, "%s: one step", what);
			same_tables(c, tc, db, te, both, 2 * PU_N, dim, opts[k], what);
		}

		/* Asynchronous forms; NULL rows_out is allowed. */
		uint64_t rows_a = 0, rows_e = 0;
		emdb_future *f = emdb_client_push_update_async(c, tc, other, PU_N, dim, g2, &rows_a);
		cr_assert_eq(emdb_future_wait(f, -1), EMDB_OK, "%s", emdb_client_last_error());
		emdb_future_free(f);
		cr_assert_eq(emdb_push(db, te, other, PU_N, dim, g2), 0);
		cr_assert_eq(emdb_update(db, te, &rows_e), 0);
		cr_assert_eq(rows_a, rows_e);
		f = emdb_client_push_update_ticket_async(c, tc, tk, dim, g, NULL);
		cr_assert_eq(emdb_future_wait(f, -1), EMDB_OK, "%s", emdb_client_last_error());
		emdb_future_free(f);
		cr_assert_eq(emdb_push_ticket(db, te, et, dim, g), 0);
		cr_assert_eq(emdb_update(db, te, NULL), 0);
		same_tables(c, tc, db, te, both, 2 * PU_N, dim, opts[k], "async");

		/* Errors: the engine's codes, nothing pushed, no step. */
		uint64_t step0 = step_of(c, tc);
		static float snap[2 * PU_N * 8], now[2 * PU_N * 8];
		OK(emdb_client_lookup(c, tc, both, 2 * PU_N, dim, snap, NULL));
		SAME_RC(emdb_client_push_update(c, tc, ids, PU_N, dim + 1, g, NULL),
			emdb_push_update(db, te, ids, PU_N, dim + 1, g, NULL));
		cr_assert_eq(emdb_client_push_update(c, tc, ids, PU_N, dim + 1, g, NULL), EMDB_ERR_DIM);
		SAME_RC(emdb_client_push_update_ticket(c, tc, tk, dim + 1, g, NULL),
			emdb_push_update_ticket(db, te, et, dim + 1, g, NULL));
		SAME_RC(emdb_client_push_update(c, 999, ids, PU_N, dim, g, NULL),
			emdb_push_update(db, 999, ids, PU_N, dim, g, NULL));
		cr_assert_eq(emdb_client_push_update(c, 999, ids, PU_N, dim, g, NULL), EMDB_ERR_NO_TABLE);
		SAME_RC(emdb_client_push_update(c, tc, ids, 0, dim, g, NULL),
			emdb_push_update(db, te, ids, 0, dim, g, NULL));
		if (prev_tk) /* a ticket of the SGD table on the Adam table */
			cr_assert_eq(emdb_client_push_update_ticket(c, tc, prev_tk, dim, g, NULL),
				     EMDB_ERR_TICKET, "%s", emdb_client_last_error());
		cr_assert_eq(emdb_client_push_update(c, tc, ids, PU_N, dim, NULL, NULL), EMDB_ERR_INVALID);
		cr_assert_eq(emdb_client_push_update(c, tc, NULL, PU_N, dim, g, NULL), EMDB_ERR_INVALID);
		cr_assert_eq(emdb_client_push_update_ticket(c, tc, NULL, dim, g, NULL), EMDB_ERR_INVALID);
		f = emdb_client_push_update_async(c, tc, ids, PU_N, dim + 1, g, NULL);
		cr_assert_eq(emdb_future_wait(f, -1), EMDB_ERR_DIM);
		emdb_future_free(f);
		cr_assert_eq(step_of(c, tc), step0, "a refused Push-and-Update advanced the step");
		OK(emdb_client_lookup(c, tc, both, 2 * PU_N, dim, now, NULL));
		same_floats(now, snap, 2 * PU_N * dim, "rows after refused calls");
		same_tables(c, tc, db, te, both, 2 * PU_N, dim, opts[k], "after errors");

		emdb_client_ticket_free(prev_tk);
		prev_tk = tk;
		emdb_ticket_free(et);
	}
	emdb_client_ticket_free(prev_tk);
	emdb_db_close(db);
}

/* ---- room made up front -------------------------------------------- */

#define RES_N 4000    /* rows reserved, then inserted                  */
#define RES_BATCH 500 /* IDs per Prefetch                              */
#define RES_SHARDS 4  /* few shards, so that RES_N IDs resize an index
			 that has no room made (64 would hold them all) */

static void srv_start_few_shards(void)
{
	static const char *const flags[] = { "--shards", "4", NULL };
	test_server_start(&srv, flags);
}

static emdb_table_info describe(emdb_client *c, uint32_t t)
{
	emdb_table_info info;
	OK(emdb_client_table_describe(c, t, &info));
	return info;
}

/* Room for RES_N rows, then RES_N new IDs inserted by Prefetch: no index
 * shard is resized on the way (a twin table of the engine, without the
 * room, is), and the rows read back as the twin's, before and after a
 * training step.  Then the engine's refusals, unchanged. */
static void reserve_then_insert(emdb_client *c)
{
	emdb_db *db = open_db(RES_SHARDS);
	emdb_table_config cfg = table_cfg("room", 4, EMDB_OPT_ADAGRAD, EMDB_INIT_UNIFORM, -0.5, 0.5);
	uint32_t tc, te;
	OK(emdb_client_table_create(c, &cfg, &tc));
	cr_assert_eq(emdb_table_create(db, &cfg, &te), 0);
	cr_assert_eq(tc, te, "the twin needs the same table id (it seeds the rows)");

	emdb_table_info before = describe(c, tc);
	OK(emdb_client_table_reserve(c, tc, RES_N));
	emdb_table_info room = describe(c, tc);
	cr_assert_gt(room.stats.bytes_index, before.stats.bytes_index, "no index room was made");
	cr_assert_eq(room.stats.rows, 0, "a reservation inserts no row");
	/* Asking for no more room than there is does nothing. */
	OK(emdb_client_table_reserve(c, tc, RES_N / 2));
	OK(emdb_client_table_reserve(c, tc, 0));
	emdb_table_info again = describe(c, tc);
	cr_assert_eq(again.stats.bytes_index, room.stats.bytes_index);
	cr_assert_eq(again.stats.index_resizes, room.stats.index_resizes);

	static uint64_t ids[RES_N];
	static float vc[RES_N * 4], ve[RES_N * 4], g[RES_N * 4];
	for (int i = 0; i < RES_N; i++)
		ids[i] = scramble((uint64_t)i + 7000);
	for (int b = 0; b < RES_N; b += RES_BATCH) {
		emdb_client_ticket *tk;
		emdb_ticket *et;
		OK(emdb_client_prefetch(c, tc, ids + b, RES_BATCH, &tk));
		cr_assert_eq(emdb_prefetch(db, te, ids + b, RES_BATCH, &et), 0);
		emdb_client_ticket_free(tk);
		emdb_ticket_free(et);
	}
	emdb_table_info full = describe(c, tc), twin;
	cr_assert_eq(emdb_table_describe(db, te, &twin), 0);
	cr_assert_eq(full.stats.rows, RES_N);
	cr_assert_eq(full.stats.index_resizes, room.stats.index_resizes,
		     "%llu index resizes inserting into the room made",
		     (unsigned long long)(full.stats.index_resizes - room.stats.index_resizes));
	cr_assert_eq(twin.stats.rows, RES_N);
	cr_assert_gt(twin.stats.index_resizes, 0,
		     "the twin without room never resized: the check above proves nothing");

	/* The rows are the twin's, and so are they after a step. */
	OK(emdb_client_pull(c, tc, ids, RES_N, 4, vc));
	cr_assert_eq(emdb_pull(db, te, ids, RES_N, 4, ve), 0);
	same_floats(vc, ve, RES_N * 4, "rows inserted into the room");
	for (int i = 0; i < RES_N * 4; i++)
		g[i] = (float)((i * 29) % 53 - 26) / 32.0f;
	uint64_t rows_c = 0, rows_e = 1;
	OK(emdb_client_push(c, tc, ids, RES_N, 4, g));
	cr_assert_eq(emdb_push(db, te, ids, RES_N, 4, g), 0);
	OK(emdb_client_update(c, tc, &rows_c));
	cr_assert_eq(emdb_update(db, te, &rows_e), 0);
	cr_assert_eq(rows_c, RES_N);
	cr_assert_eq(rows_e, RES_N);
	OK(emdb_client_pull(c, tc, ids, RES_N, 4, vc));
	cr_assert_eq(emdb_pull(db, te, ids, RES_N, 4, ve), 0);
	same_floats(vc, ve, RES_N * 4, "rows after a step");

	/* Refusals: the engine's codes and messages, whatever the transport. */
	emdb_table_info stepped = describe(c, tc);
	SAME_RC(emdb_client_table_reserve(c, 999, 10), emdb_table_reserve(db, 999, 10));
	cr_assert_eq(emdb_client_table_reserve(c, 999, 10), EMDB_ERR_NO_TABLE);
	SAME_RC(emdb_client_table_reserve(c, tc, UINT64_MAX), emdb_table_reserve(db, te, UINT64_MAX));
	cr_assert_eq(emdb_client_table_reserve(c, tc, UINT64_MAX), EMDB_ERR_LIMIT);
	cr_assert(strstr(emdb_client_last_error(), "do not fit in a table"), "%s",
		  emdb_client_last_error());
	emdb_table_info refused = describe(c, tc);
	cr_assert_eq(refused.stats.bytes_index, stepped.stats.bytes_index, "a refusal made room");
	cr_assert_eq(refused.stats.bytes_overhead, stepped.stats.bytes_overhead, "a refusal made room");
	OK(emdb_client_table_drop(c, tc));
	cr_assert_eq(emdb_table_drop(db, te), 0);
	SAME_RC(emdb_client_table_reserve(c, tc, 10), emdb_table_reserve(db, te, 10));
	emdb_db_close(db);
}

/* Over a socket: room over the server's max_memory is refused with the
 * engine's NOMEM and message, before any of it is made. */
static void reserve_over_max_memory(emdb_client *c)
{
	emdb_table_config cfg = table_cfg("too_big", 4, EMDB_OPT_SGD, EMDB_INIT_ZEROS, 0, 0);
	uint32_t t;
	OK(emdb_client_table_create(c, &cfg, &t));
	emdb_table_info before = describe(c, t);
	OK(emdb_client_config_set(c, "max_memory", "256M"));
	int rc = emdb_client_table_reserve(c, t, 1000000000);
	cr_assert_eq(rc, EMDB_ERR_NOMEM, "%s: %s", emdb_err_name(rc), emdb_client_last_error());
	cr_assert(strstr(emdb_client_last_error(), "table 'too_big': room for 1000000000 rows needs about"),
		  "%s", emdb_client_last_error());
	cr_assert(strstr(emdb_client_last_error(), "over the memory limit"), "%s",
		  emdb_client_last_error());
	OK(emdb_client_config_set(c, "max_memory", "0"));
	emdb_table_info after = describe(c, t);
	cr_assert_eq(after.stats.bytes_index, before.stats.bytes_index);
	cr_assert_eq(after.stats.bytes_overhead, before.stats.bytes_overhead);
	OK(emdb_client_table_drop(c, t));
}

/* Run body over a new handle of uri (options o, NULL for the defaults). */
static void over(const char *uri, const emdb_client_options *o, void (*body)(emdb_client *))
{
	emdb_client *c;
	OK(emdb_client_connect(uri, o, &c));
	body(c);
	emdb_client_close(c);
}

Test(client_ops, mem)
{
	over("mem://", NULL, compare_with_engine);
}

Test(client_ops, mem_without_workers)
{
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.mem_threads = 0;
	over("mem://", &o, compare_with_engine);
}

Test(client_ops, tcp, .init = srv_start, .fini = srv_stop)
{
	over(srv.tcp_uri, NULL, compare_with_engine);
}

Test(client_ops, unix_socket, .init = srv_start, .fini = srv_stop)
{
	over(srv.unix_uri, NULL, compare_with_engine);
}

Test(client_ops, push_update_mem)
{
	over("mem://", NULL, push_update_matches_push_then_update);
}

Test(client_ops, push_update_tcp, .init = srv_start, .fini = srv_stop)
{
	over(srv.tcp_uri, NULL, push_update_matches_push_then_update);
}

Test(client_ops, push_update_unix_socket, .init = srv_start, .fini = srv_stop)
{
	over(srv.unix_uri, NULL, push_update_matches_push_then_update);
}

Test(client_ops, reserve_mem)
{
	emdb_db_config dc = EMDB_DB_CONFIG_INIT;
	dc.shards = RES_SHARDS;
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.mem_config = &dc;
	over("mem://", &o, reserve_then_insert);
}

Test(client_ops, reserve_tcp, .init = srv_start_few_shards, .fini = srv_stop)
{
	over(srv.tcp_uri, NULL, reserve_then_insert);
	over(srv.tcp_uri, NULL, reserve_over_max_memory);
}

Test(client_ops, reserve_unix_socket, .init = srv_start_few_shards, .fini = srv_stop)
{
	over(srv.unix_uri, NULL, reserve_then_insert);
}
