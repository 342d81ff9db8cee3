/*
 * test_client_workers.c - emdb_client_options.worker_rank: a trainer's
 * workers, each with its own handle and rank, push overlapping IDs;
 * whichever pushes first, the rows and optimizer state come out the same
 * bits (the database sums per row in rank order, emdb_push_as), over
 * mem:// and over TCP to an emdb-server (the WORKER request, protocol
 * version 4), and both give the same bits.  Without ranks the same data
 * in the two orders differ, so the equalities are not vacuous.  A rank out
 * of range is refused.
 *
 * The server is started on loopback with an ephemeral port and killed in
 * the test's .fini.
 */
#include <criterion/criterion.h>
#include <string.h>

#include <emdb/client.h>
#include <emdb/db.h>

#include "tests/lib/client_server.h"
#include "tests/lib/helpers.h"

#define DIM 4
#define N 32
#define U 20 /* IDs in all */
#define OK(call) cr_assert_eq((call), EMDB_OK, "%s: %s", #call, emdb_client_last_error())

static test_server srv;

static void srv_start(void)
{
	test_server_start(&srv, NULL);
}

static void srv_stop(void)
{
	test_server_stop(&srv);
}

/* A handle for worker `rank`: over db (mem://) when db is set, else to
 * the server. */
static emdb_client *worker_handle(emdb_db *db, uint32_t rank)
{
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.worker_rank = rank;
	emdb_client *c = NULL;
	if (db)
		OK(emdb_client_wrap(db, &o, &c));
	else
		OK(emdb_client_connect(srv.tcp_uri, &o, &c));
	return c;
}

static void batch(uint32_t w, int s, uint64_t *ids, float *g)
{
	for (size_t i = 0; i < N; i++)
		ids[i] = scramble((i * 7 + w * 3 + (size_t)s) % U);
	static const float mag[5] = { 1e-3f, 1.0f, 1e3f, -1e3f, 1e-1f };
	for (size_t i = 0; i < N * DIM; i++)
		g[i] = mag[(i + w + (size_t)s) % 5] * (float)(1 + i % 7) / 7.0f;
}

/* A table of its own for each run (zero initial values, so its id does
 * not matter); three steps of workers 0 and 1 pushing (worker `first`
 * first), then an Update; the rows and state of the U IDs into out. */
static void run(bool mem, uint32_t first, bool ranked, float *out)
{
	static int runs;
	emdb_db *db = mem ? open_db(8) : NULL;
	emdb_client *c[2] = { worker_handle(db, ranked ? 0 : EMDB_WORKER_NONE),
			      worker_handle(db, ranked ? 1 : EMDB_WORKER_NONE) };
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	snprintf(cfg.name, sizeof(cfg.name), "t%d", runs++);
	cfg.dim = DIM;
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_ADAGRAD, &cfg.optimizer), 0);
	uint32_t t;
	OK(emdb_client_table_create(c[0], &cfg, &t));
	for (int s = 0; s < 3; s++) {
		for (uint32_t k = 0; k < 2; k++) {
			uint32_t w = k ? 1 - first : first;
			uint64_t ids[N];
			float g[N * DIM];
			batch(w, s, ids, g);
			OK(emdb_client_push(c[w], t, ids, N, DIM, g));
		}
		OK(emdb_client_update(c[0], t, NULL));
	}
	uint64_t ids[U];
	for (uint64_t i = 0; i < U; i++)
		ids[i] = scramble(i);
	OK(emdb_client_lookup(c[1], t, ids, U, DIM, out, NULL));
	OK(emdb_client_read_state(c[0], t, ids, U, DIM, out + U * DIM, NULL));
	emdb_client_close(c[0]);
	emdb_client_close(c[1]);
	if (db)
		emdb_db_close(db);
}

static void either_order(bool mem, float *a)
{
	static float b[2 * U * DIM];
	run(mem, 0, true, a);
	run(mem, 1, true, b);
	cr_assert(memcmp(a, b, sizeof(b)) == 0, "%s: worker 1 first changed rows or state", mem ? "mem" : "tcp");
	run(mem, 0, false, a);
	run(mem, 1, false, b);
	cr_assert(memcmp(a, b, sizeof(b)) != 0, "the data must be sensitive to the order of unranked sums");
	run(mem, 1, true, a);
}

Test(client_workers, mem_and_tcp_workers_in_either_order_give_the_same_bits, .init = srv_start,
     .fini = srv_stop, .timeout = 120)
{
	static float m[2 * U * DIM], n[2 * U * DIM];
	either_order(true, m);
	either_order(false, n);
	cr_assert(memcmp(m, n, sizeof(m)) == 0, "mem:// and the server differ");
}

Test(client_workers, a_bad_rank_is_refused)
{
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	emdb_client *c = (emdb_client *)1;
	o.worker_rank = EMDB_WORKERS_MAX;
	cr_assert_eq(emdb_client_connect("mem://", &o, &c), EMDB_ERR_INVALID);
	cr_assert_null(c);
	cr_assert_not_null(strstr(emdb_client_last_error(), "worker_rank"));
}
