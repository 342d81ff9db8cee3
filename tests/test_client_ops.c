/*
 * test_client_ops.c - every operation of the client library, over mem://,
 * TCP and a Unix socket, against the in-process engine: the same calls
 * on a fresh database give the same ids, bytes, counts and error codes.
 *
 * The network tests start emdb-server on loopback with an ephemeral port
 * and a Unix socket in a temporary directory, and kill it in their .fini
 * (tests/test_client_server.h).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/client.h>
#include <emdb/db.h>

#include "tests/helpers.h"
#include "tests/test_client_server.h"

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

Test(client_ops, mem)
{
	emdb_client *c;
	OK(emdb_client_connect("mem://", NULL, &c));
	compare_with_engine(c);
	emdb_client_close(c);
}

Test(client_ops, mem_without_workers)
{
	emdb_client *c;
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.mem_threads = 0;
	OK(emdb_client_connect("mem://", &o, &c));
	compare_with_engine(c);
	emdb_client_close(c);
}

Test(client_ops, tcp, .init = srv_start, .fini = srv_stop)
{
	emdb_client *c;
	OK(emdb_client_connect(srv.tcp_uri, NULL, &c));
	compare_with_engine(c);
	emdb_client_close(c);
}

Test(client_ops, unix_socket, .init = srv_start, .fini = srv_stop)
{
	emdb_client *c;
	OK(emdb_client_connect(srv.unix_uri, NULL, &c));
	compare_with_engine(c);
	emdb_client_close(c);
}
