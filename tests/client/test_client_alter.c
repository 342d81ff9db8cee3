/*
 * test_client_alter.c - hyperparameters changed at run time through the
 * client library (emdb_client_table_alter), over mem://, TCP and a Unix
 * socket: describe shows the new values at once, the next Update gives
 * the rows an engine twin table gives with the same alter, bit for bit,
 * and refusals are the engine's (INVALID, NO_TABLE) with nothing changed.
 */
#include <criterion/criterion.h>
#include <string.h>

#include <emdb/client.h>
#include <emdb/db.h>

#include "tests/lib/client_server.h"
#include "tests/lib/helpers.h"

#define D 8
#define N 64

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

static void run(const char *uri)
{
	emdb_client *c = test_client_open(uri, 30000);
	emdb_db *db = open_db(64);
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	strcpy(cfg.name, "ftrl");
	cfg.dim = D;
	emdb_optimizer_defaults(EMDB_OPT_FTRL, &cfg.optimizer);
	cfg.init = (emdb_init){ EMDB_INIT_NORMAL, 0, 0.1 };
	uint32_t tc, te;
	OK(emdb_client_table_create(c, &cfg, &tc));
	cr_assert_eq(emdb_table_create(db, &cfg, &te), 0);

	uint64_t ids[N];
	float g[N * D];
	for (int i = 0; i < N; i++)
		ids[i] = scramble((uint64_t)i);
	for (int k = 0; k < N * D; k++)
		g[k] = (float)(k % 9) * 0.25f - 1.0f;
	OK(emdb_client_push(c, tc, ids, N, D, g));
	OK(emdb_client_update(c, tc, NULL));
	cr_assert_eq(emdb_push(db, te, ids, N, D, g), 0);
	cr_assert_eq(emdb_update(db, te, NULL), 0);

	emdb_optimizer o = cfg.optimizer;
	o.lr = 0.25; /* FTRL's alpha */
	o.l1 = 0.01;
	o.l2 = 0.5;
	OK(emdb_client_table_alter(c, tc, &o));
	cr_assert_eq(emdb_table_alter(db, te, &o), 0);
	emdb_table_info info;
	OK(emdb_client_table_describe(c, tc, &info));
	cr_assert_eq(info.config.optimizer.lr, 0.25);
	cr_assert_eq(info.config.optimizer.l1, 0.01);
	cr_assert_eq(info.config.optimizer.l2, 0.5);
	cr_assert_eq(info.config.optimizer.beta, cfg.optimizer.beta);

	OK(emdb_client_push(c, tc, ids, N, D, g));
	OK(emdb_client_update(c, tc, NULL));
	cr_assert_eq(emdb_push(db, te, ids, N, D, g), 0);
	cr_assert_eq(emdb_update(db, te, NULL), 0);
	float vc[N * D], ve[N * D];
	OK(emdb_client_pull(c, tc, ids, N, D, vc));
	cr_assert_eq(emdb_pull(db, te, ids, N, D, ve), 0);
	cr_assert_eq(memcmp(vc, ve, sizeof(vc)), 0, "%s: rows after the altered step differ", uri);

	emdb_optimizer bad = o;
	bad.kind = EMDB_OPT_ADAM;
	cr_assert_eq(emdb_client_table_alter(c, tc, &bad), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_client_last_error(), "cannot become adam"), "%s", emdb_client_last_error());
	bad = o;
	bad.l2 = -3;
	cr_assert_eq(emdb_client_table_alter(c, tc, &bad), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_client_table_alter(c, tc + 100, &o), EMDB_ERR_NO_TABLE);
	cr_assert_eq(emdb_client_table_alter(c, tc, NULL), EMDB_ERR_INVALID);
	OK(emdb_client_table_describe(c, tc, &info));
	cr_assert_eq(info.config.optimizer.l2, 0.5, "a refused alter changed l2");

	emdb_db_close(db);
	emdb_client_close(c);
}

Test(client_alter, mem)
{
	run("mem://");
}

Test(client_alter, tcp, .init = srv_start, .fini = srv_stop)
{
	run(srv.tcp_uri);
}

Test(client_alter, unix_socket, .init = srv_start, .fini = srv_stop)
{
	run(srv.unix_uri);
}
