/*
 * test_client_weights.c - the per-sample weights of pooled Pull and Push
 * through the client library (emdb_client_pull_bags_weighted,
 * emdb_client_push_bags_weighted and their ticket and _async forms), over
 * mem://, TCP and a Unix socket: the vectors and the rows after an Update
 * are those of the same engine calls on a twin table, bit for bit, and
 * the refusals (MEAN with weights, NULL weights, a weight count that is
 * not the ticket's) are the engine's codes, with the handle still usable.
 *
 * The network tests start emdb-server on loopback with an ephemeral port
 * and a Unix socket in a temporary directory, and kill it in their .fini
 * (tests/lib/client_server.h).
 */
#include <criterion/criterion.h>
#include <string.h>

#include <emdb/client.h>
#include <emdb/db.h>

#include "tests/lib/client_server.h"
#include "tests/lib/helpers.h"

#define D 6
#define N 200
#define NB 30

static test_server srv;

static void srv_start(void)
{
	test_server_start(&srv, NULL);
}

static void srv_stop(void)
{
	test_server_stop(&srv);
}

#define OK(call) cr_assert_eq((call), EMDB_OK, "%s: %s", #call, emdb_client_last_error())

static emdb_table_config cfg_of(const char *name)
{
	emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
	strcpy(c.name, name);
	c.dim = D;
	emdb_optimizer_defaults(EMDB_OPT_ADAGRAD, &c.optimizer);
	c.optimizer.lr = 0.05;
	c.init = (emdb_init){ EMDB_INIT_UNIFORM, -0.5, 0.5 };
	c.seed = 7;
	return c;
}

static void run(const char *uri)
{
	emdb_client *c = test_client_open(uri, 30000);
	emdb_db *db = open_db(64);
	emdb_table_config cfg = cfg_of("w");
	uint32_t tc, te;
	OK(emdb_client_table_create(c, &cfg, &tc));
	cr_assert_eq(emdb_table_create(db, &cfg, &te), 0);
	cr_assert_eq(tc, te, "the same table id on both");

	uint64_t ids[N], offs[NB + 1];
	float w[N], g[NB * D];
	for (int i = 0; i < N; i++) {
		ids[i] = i % 3 ? scramble((uint64_t)i % 70) : (uint64_t)i % 5;
		w[i] = (float)((i * 37) % 11) * 0.25f - 1.0f;
	}
	for (int b = 0; b <= NB; b++)
		offs[b] = (uint64_t)(b * N / NB);
	offs[3] = offs[4]; /* an empty bag */
	for (int k = 0; k < NB * D; k++)
		g[k] = (float)(k % 13) * 0.1f - 0.6f;

	float vc[NB * D], ve[NB * D];
	OK(emdb_client_pull_bags_weighted(c, tc, ids, N, offs, NB, EMDB_POOL_SUM, w, D, vc));
	cr_assert_eq(emdb_pull_bags_weighted(db, te, ids, N, offs, NB, EMDB_POOL_SUM, w, D, ve), 0);
	cr_assert_eq(memcmp(vc, ve, sizeof(vc)), 0, "%s: pull_bags_weighted differs from the engine's", uri);

	emdb_client_ticket *tk;
	emdb_ticket *et;
	OK(emdb_client_prefetch(c, tc, ids, N, &tk));
	cr_assert_eq(emdb_prefetch(db, te, ids, N, &et), 0);
	OK(emdb_client_pull_bags_weighted_ticket(c, tc, tk, offs, NB, EMDB_POOL_SUM, w, D, vc));
	cr_assert_eq(memcmp(vc, ve, sizeof(vc)), 0, "%s: by ticket", uri);

	/* Two steps of weighted pushes, by IDs, ticket and asynchronously. */
	OK(emdb_client_push_bags_weighted(c, tc, ids, N, offs, NB, EMDB_POOL_SUM, w, D, g));
	cr_assert_eq(emdb_push_bags_weighted(db, te, ids, N, offs, NB, EMDB_POOL_SUM, w, D, g), 0);
	OK(emdb_client_push_bags_weighted_ticket(c, tc, tk, offs, NB, EMDB_POOL_SUM, w, D, g));
	cr_assert_eq(emdb_push_bags_weighted_ticket(db, te, et, offs, NB, EMDB_POOL_SUM, w, D, g), 0);
	OK(emdb_client_update(c, tc, NULL));
	cr_assert_eq(emdb_update(db, te, NULL), 0);
	emdb_future *f = emdb_client_push_bags_weighted_async(c, tc, ids, N, offs, NB, EMDB_POOL_SUM, w, D, g);
	OK(emdb_future_wait(f, 30000));
	emdb_future_free(f);
	f = emdb_client_push_bags_weighted_ticket_async(c, tc, tk, offs, NB, EMDB_POOL_SUM, w, D, g);
	OK(emdb_future_wait(f, 30000));
	emdb_future_free(f);
	cr_assert_eq(emdb_push_bags_weighted(db, te, ids, N, offs, NB, EMDB_POOL_SUM, w, D, g), 0);
	cr_assert_eq(emdb_push_bags_weighted_ticket(db, te, et, offs, NB, EMDB_POOL_SUM, w, D, g), 0);
	OK(emdb_client_update(c, tc, NULL));
	cr_assert_eq(emdb_update(db, te, NULL), 0);

	float rc_[N * D], re[N * D];
	OK(emdb_client_pull(c, tc, ids, N, D, rc_));
	cr_assert_eq(emdb_pull(db, te, ids, N, D, re), 0);
	cr_assert_eq(memcmp(rc_, re, sizeof(rc_)), 0, "%s: rows after weighted pushes differ", uri);
	f = emdb_client_pull_bags_weighted_async(c, tc, ids, N, offs, NB, EMDB_POOL_SUM, w, D, vc);
	OK(emdb_future_wait(f, 30000));
	emdb_future_free(f);
	cr_assert_eq(emdb_pull_bags_weighted(db, te, ids, N, offs, NB, EMDB_POOL_SUM, w, D, ve), 0);
	cr_assert_eq(memcmp(vc, ve, sizeof(vc)), 0, "%s: pull_bags_weighted_async", uri);

	/* Refusals: the engine's codes; nothing applied; the handle works. */
	cr_assert_eq(emdb_client_pull_bags_weighted(c, tc, ids, N, offs, NB, EMDB_POOL_MEAN, w, D, vc),
		     EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_client_last_error(), "need pooling SUM"), "%s", emdb_client_last_error());
	cr_assert_eq(emdb_client_push_bags_weighted(c, tc, ids, N, offs, NB, EMDB_POOL_MEAN, w, D, g),
		     EMDB_ERR_INVALID);
	cr_assert_eq(emdb_client_push_bags_weighted(c, tc, ids, N, offs, NB, EMDB_POOL_SUM, NULL, D, g),
		     EMDB_ERR_INVALID);
	emdb_client_ticket *small;
	OK(emdb_client_prefetch(c, tc, ids, N / 2, &small));
	cr_assert_eq(emdb_client_push_bags_weighted_ticket(c, tc, small, offs, NB, EMDB_POOL_SUM, w, D, g),
		     EMDB_ERR_INVALID, "offsets ending past the ticket's count: %s", emdb_client_last_error());
	emdb_client_ticket_free(small);
	emdb_table_info info;
	OK(emdb_client_table_describe(c, tc, &info));
	cr_assert_eq(info.stats.pending_rows, 0, "%s: a refused push left gradients", uri);

	emdb_client_ticket_free(tk);
	emdb_ticket_free(et);
	emdb_db_close(db);
	emdb_client_close(c);
}

Test(client_weights, mem)
{
	run("mem://");
}

Test(client_weights, tcp, .init = srv_start, .fini = srv_stop)
{
	run(srv.tcp_uri);
}

Test(client_weights, unix_socket, .init = srv_start, .fini = srv_stop)
{
	run(srv.unix_uri);
}
