/*
 * test_client_scan.c - scan and load through the client library
 * (emdb_client_table_scan, emdb_client_table_load) over mem://, TCP and a
 * Unix socket: a scan in pages gives every row once, with the vectors and
 * state Lookup and read_state give; loading what it gave into a fresh
 * table reproduces the rows bit for bit; a state width that is not the
 * table's is DIM, and a page too large for the server's frame is LIMIT.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/client.h>
#include <emdb/db.h>

#include "tests/lib/client_server.h"
#include "tests/lib/helpers.h"

#define D 16
#define SF D /* Adagrad */
#define N 2500
#define PAGE 300

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

static uint32_t make(emdb_client *c, const char *name)
{
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	strcpy(cfg.name, name);
	cfg.dim = D;
	emdb_optimizer_defaults(EMDB_OPT_ADAGRAD, &cfg.optimizer);
	cfg.init = (emdb_init){ EMDB_INIT_UNIFORM, -1, 1 };
	cfg.seed = 3;
	uint32_t t;
	OK(emdb_client_table_create(c, &cfg, &t));
	return t;
}

static void run(const char *uri)
{
	emdb_client *c = test_client_open(uri, 30000);
	uint32_t src = make(c, "src"), dst = make(c, "dst");
	uint64_t *ids = malloc(N * 8);
	float *g = malloc(N * D * 4);
	for (int i = 0; i < N; i++)
		ids[i] = i == 0 ? 0 : i == 1 ? UINT64_MAX : scramble((uint64_t)i);
	for (int k = 0; k < N * D; k++)
		g[k] = (float)(k % 5) - 2;
	OK(emdb_client_push(c, src, ids, N, D, g));
	OK(emdb_client_update(c, src, NULL));

	uint64_t *all = malloc(N * 8), cursor = 0, step = 0, pid[PAGE];
	float *vecs = malloc(N * D * 4), *state = malloc(N * SF * 4);
	size_t total = 0, n = 0;
	int pages = 0;
	do {
		OK(emdb_client_table_scan(c, src, cursor, PAGE, D, SF, all + total, vecs + total * D,
					  state + total * SF, &n, &cursor, &step));
		cr_assert_leq(n, PAGE);
		cr_assert_eq(step, 1);
		total += n;
		cr_assert_lt(++pages, 100);
	} while (cursor);
	cr_assert_eq(total, N, "%s: %zu rows scanned", uri, total);
	float *lv = malloc(N * D * 4), *ls = malloc(N * SF * 4);
	OK(emdb_client_lookup(c, src, all, N, D, lv, NULL));
	OK(emdb_client_read_state(c, src, all, N, SF, ls, NULL));
	cr_assert_eq(memcmp(lv, vecs, (size_t)N * D * 4), 0, "%s: scanned vectors", uri);
	cr_assert_eq(memcmp(ls, state, (size_t)N * SF * 4), 0, "%s: scanned state", uri);

	/* Into the other table, in two loads; then the same rows there. */
	OK(emdb_client_table_load(c, dst, all, N / 2, D, vecs, SF, state));
	OK(emdb_client_table_load(c, dst, all + N / 2, N - N / 2, D, vecs + (N / 2) * D, SF,
				  state + (N / 2) * SF));
	OK(emdb_client_lookup(c, dst, all, N, D, lv, NULL));
	OK(emdb_client_read_state(c, dst, all, N, SF, ls, NULL));
	cr_assert_eq(memcmp(lv, vecs, (size_t)N * D * 4), 0, "%s: loaded vectors", uri);
	cr_assert_eq(memcmp(ls, state, (size_t)N * SF * 4), 0, "%s: loaded state", uri);
	emdb_table_info info;
	OK(emdb_client_table_describe(c, dst, &info));
	cr_assert_eq(info.stats.rows, N);

	/* Without state; and a wrong width. */
	OK(emdb_client_table_scan(c, src, 0, PAGE, D, 0, pid, vecs, NULL, &n, &cursor, NULL));
	cr_assert_eq(n, PAGE);
	cr_assert_eq(emdb_client_table_scan(c, src, 0, PAGE, D, SF + 1, pid, vecs, state, &n, &cursor, NULL),
		     EMDB_ERR_DIM, "%s", emdb_client_last_error());
	cr_assert_eq(emdb_client_table_load(c, dst, all, 4, D, vecs, 2 * SF, state), EMDB_ERR_DIM);
	cr_assert_eq(emdb_client_table_scan(c, src, 0, PAGE, D, SF, NULL, vecs, state, &n, &cursor, NULL),
		     EMDB_ERR_INVALID);
	cr_assert_eq(emdb_client_table_load(c, 99, all, 4, D, vecs, 0, NULL), EMDB_ERR_NO_TABLE);
	OK(emdb_client_ping(c));
	free(ids);
	free(g);
	free(all);
	free(vecs);
	free(state);
	free(lv);
	free(ls);
	emdb_client_close(c);
}

Test(client_scan, mem)
{
	run("mem://");
}

Test(client_scan, tcp, .init = srv_start, .fini = srv_stop)
{
	run(srv.tcp_uri);
}

Test(client_scan, unix_socket, .init = srv_start, .fini = srv_stop)
{
	run(srv.unix_uri);
}

/* A page must fit a frame: the server refuses one that would not, before
 * it sets anything aside, and the connection goes on. */
Test(client_scan, a_page_larger_than_a_frame_is_limit, .init = srv_start, .fini = srv_stop)
{
	emdb_client *c = test_client_open(srv.tcp_uri, 30000);
	OK(emdb_client_config_set(c, "max_frame", "1M"));
	uint32_t t = make(c, "big");
	static uint64_t ids[100000];
	static float vecs[1];
	size_t n;
	uint64_t next;
	int rc = emdb_client_table_scan(c, t, 0, 100000, D, 0, ids, vecs, NULL, &n, &next, NULL);
	cr_assert_eq(rc, EMDB_ERR_LIMIT, "%s: %s", emdb_err_name(rc), emdb_client_last_error());
	cr_assert(strstr(emdb_client_last_error(), "ask for fewer rows"), "%s", emdb_client_last_error());
	OK(emdb_client_ping(c));
	emdb_client_close(c);
}
