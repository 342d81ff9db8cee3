/*
 * test_cluster_ranked.c - three trainer workers, one per node of a
 * cluster of three emdb-server processes on loopback
 * (tests/lib/cluster_harness.h), each declaring its rank
 * (emdb_client_options.worker_rank: WORKER, then PUSH_RANKED between the
 * nodes), push overlapping IDs in one order and then in the reverse
 * order: both runs leave every row and Adam state bit-identical to one
 * engine in this process given the same pushes in rank order
 * (emdb_push_as).
 *
 * Every wait is bounded; the fixture kills every node.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <string.h>

#include <emdb/client.h>
#include <emdb/db.h>

#include "tests/lib/cluster_harness.h"

#define READY_MS 20000
#define DIM 8
enum { W = 3, N = 64, STEPS = 4, U = 50 };

static void fini(void)
{
	ch_stop_all();
}

static const char *const fast[] = { "--node-timeout-ms", "2000", "--cluster-start-timeout-ms", "15000", NULL };

/* Zero initial values: the table's id (different per run) changes nothing. */
static emdb_table_config cfg_of(const char *name)
{
	emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
	snprintf(c.name, sizeof(c.name), "%s", name);
	c.dim = DIM;
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_ADAM, &c.optimizer), 0);
	return c;
}

static uint64_t id_of(uint64_t i)
{
	return (i + 1) * 0x9e3779b97f4a7c15ull;
}

/* Worker w's batch of step s: shared IDs, gradients over six orders of
 * magnitude. */
static void batch(int s, int w, uint64_t *ids, float *g)
{
	uint64_t x = 0x77u + (uint64_t)s * 31 + (uint64_t)w * 1009;
	static const float mag[6] = { 1e-3f, 1e-1f, 1.0f, 1e1f, 1e3f, -1e3f };
	for (size_t i = 0; i < N; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		ids[i] = id_of((x >> 33) % U);
	}
	for (size_t i = 0; i < N * DIM; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		g[i] = mag[(x >> 40) % 6] * (float)((x >> 20) % 1000 + 1) / 997.0f;
	}
}

static emdb_client *worker_client(int node, uint32_t rank)
{
	char uri[200];
	snprintf(uri, sizeof(uri), "unix://%s", ch.node[node].sock);
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.worker_rank = rank;
	emdb_client *c = NULL;
	int rc = emdb_client_connect(uri, &o, &c);
	cr_assert_eq(rc, EMDB_OK, "connect to node %d as worker %u: %s", node, rank, emdb_client_last_error());
	return c;
}

/* rows[U*DIM] then state[U*2*DIM]. */
static void reference(float *out)
{
	emdb_db *db;
	cr_assert_eq(emdb_db_open(NULL, &db), 0);
	emdb_table_config cfg = cfg_of("ref");
	uint32_t t;
	cr_assert_eq(emdb_table_create(db, &cfg, &t), 0);
	for (int s = 0; s < STEPS; s++) {
		for (int w = 0; w < W; w++) {
			uint64_t ids[N];
			float g[N * DIM];
			batch(s, w, ids, g);
			emdb_push_batch b = { .ids = ids, .n = N, .dim = DIM, .grads = g };
			cr_assert_eq(emdb_push_as(db, t, (uint32_t)w, &b), 0, "%s", emdb_last_error());
		}
		cr_assert_eq(emdb_update(db, t, NULL), 0);
	}
	uint64_t ids[U];
	for (uint64_t i = 0; i < U; i++)
		ids[i] = id_of(i);
	cr_assert_eq(emdb_lookup(db, t, ids, U, DIM, out, NULL), 0);
	cr_assert_eq(emdb_read_state(db, t, ids, U, out + U * DIM, NULL), 0);
	emdb_db_close(db);
}

/* A run on table `name`: each step the workers push in order[], then a
 * node updates; the rows and state read back through node 2. */
static void run(emdb_client **c, const char *name, const int *order, float *out)
{
	emdb_table_config cfg = cfg_of(name);
	uint32_t t;
	cr_assert_eq(emdb_client_table_create(c[0], &cfg, &t), EMDB_OK, "%s", emdb_client_last_error());
	for (int s = 0; s < STEPS; s++) {
		for (int k = 0; k < W; k++) {
			int w = order[k];
			uint64_t ids[N];
			float g[N * DIM];
			batch(s, w, ids, g);
			cr_assert_eq(emdb_client_push(c[w], t, ids, N, DIM, g), EMDB_OK, "worker %d: %s", w,
				     emdb_client_last_error());
		}
		cr_assert_eq(emdb_client_update(c[s % W], t, NULL), EMDB_OK, "%s", emdb_client_last_error());
	}
	uint64_t ids[U];
	for (uint64_t i = 0; i < U; i++)
		ids[i] = id_of(i);
	cr_assert_eq(emdb_client_lookup(c[2], t, ids, U, DIM, out, NULL), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_eq(emdb_client_read_state(c[1], t, ids, U, 2 * DIM, out + U * DIM, NULL), EMDB_OK, "%s",
		     emdb_client_last_error());
}

Test(cluster_ranked, ranked_workers_on_three_nodes_in_either_order_are_one_engine, .fini = fini,
     .timeout = 180)
{
	static float ref[U * DIM * 3], got[U * DIM * 3];
	reference(ref);
	ch_init(3);
	for (int i = 0; i < 3; i++)
		ch_spawn(i, NULL, fast);
	for (int i = 0; i < 3; i++)
		ch_wait_ready(i, READY_MS);
	emdb_client *c[W];
	for (int w = 0; w < W; w++)
		c[w] = worker_client(w, (uint32_t)w);
	static const int fwd[W] = { 0, 1, 2 }, back[W] = { 2, 1, 0 };
	run(c, "fwd", fwd, got);
	cr_assert(memcmp(ref, got, sizeof(ref)) == 0, "workers 0, 1, 2: rows or state differ from one engine's");
	run(c, "back", back, got);
	cr_assert(memcmp(ref, got, sizeof(ref)) == 0, "workers 2, 1, 0: rows or state differ from one engine's");
	for (int w = 0; w < W; w++)
		emdb_client_close(c[w]);
}
