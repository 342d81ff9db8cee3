/*
 * test_cluster_strand.c - owners serving their peers' requests on serve
 * threads (cluster_set_serve_threads, cluster/strand.c), on 3 nodes in one
 * process (tests/lib/cluster_mem.h).
 *
 * What is checked, as a user of the cluster would check it:
 *   - a peer's requests run in the order they arrived: a Load of rows
 *     then a Lookup of the same IDs, sent back to back without waiting,
 *     the Lookup always sees that Load, round after round;
 *   - two peers' requests to one owner do run at once (the pool's count
 *     of requests running together reaches 2), and the answers are still
 *     every row as loaded;
 *   - table changes from a peer run on the link's thread in their turn
 *     (the pool counts them there) and the data-plane ones on the pool.
 */
#ifdef EMDB_PLAIN_RUNNER /* under ThreadSanitizer */
#include "tests/lib/plain_runner.h"
#else
#include <criterion/criterion.h>
#endif
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/db.h>
#include <emdb/error.h>

#include "tests/lib/cluster_mem.h"
#include "tests/lib/cluster_req.h"

#define OWNER 0u

/* 3 nodes, each serving on 3 threads. */
static memnet *open_pooled(void)
{
	setenv("EMDB_TEST_SERVE_THREADS", "3", 1);
	memnet *net = memnet_open(3, 64);
	cr_assert_not_null(net);
	cluster_serve_counters c;
	cluster_get_serve_counters(memnet_cl(net, OWNER), &c);
	cr_assert_eq(c.threads, 3);
	return net;
}

/* n IDs that node OWNER owns, from start on. */
static void owned_ids(memnet *net, uint64_t *ids, size_t n, uint64_t start)
{
	const owner_map *m = cluster_map(memnet_cl(net, OWNER));
	for (size_t i = 0; i < n; start++)
		if (owner_of(m, start) == OWNER)
			ids[i++] = start;
}

enum { N = 64, ROUNDS = 150 };

Test(cluster_strand, a_peers_requests_run_in_arrival_order)
{
	memnet *net = open_pooled();
	emdb_table_config cfg = table_cfg("order", EMDB_OPT_SGD);
	uint32_t t = cl_create(net, 1, &cfg);
	uint64_t ids[N];
	owned_ids(net, ids, N, 1);
	static float vecs[N * DIM], out[N * DIM];
	req_waiter w = REQ_WAITER_INIT;
	for (int round = 1; round <= ROUNDS; round++) {
		for (size_t i = 0; i < N * DIM; i++)
			vecs[i] = (float)round + (float)i / 4096.0f;
		cluster_req load = { .op = CLUSTER_LOAD, .table = t, .ids = ids, .n = N, .dim = DIM, .vecs = vecs };
		cluster_req look = { .op = CLUSTER_LOOKUP, .table = t, .ids = ids, .n = N, .dim = DIM, .out = out };
		req_submit(net, 1, &load, &w);
		req_submit(net, 1, &look, &w); /* sent before the Load is answered */
		req_wait_all(&w);
		cr_assert_eq(load.status, EMDB_OK, "round %d: load: %s", round, load.msg);
		cr_assert_eq(look.status, EMDB_OK, "round %d: lookup: %s", round, look.msg);
		cr_assert(memcmp(out, vecs, sizeof(out)) == 0, "round %d: the Lookup did not see the Load before it",
			  round);
	}
	cluster_serve_counters c;
	cluster_get_serve_counters(memnet_cl(net, OWNER), &c);
	cr_assert_geq(c.on_pool, 2 * ROUNDS, "Loads and Lookups on the pool: %llu", (unsigned long long)c.on_pool);
	cr_assert_gt(c.on_link, 0, "the table's creation ran on the link's thread");
	memnet_close(net);
}

/* One peer's stream of Lookups, DEPTH in flight, checked against rows. */
typedef struct peer_arg {
	memnet *net;
	uint32_t home, table;
	const uint64_t *ids;
	const float *rows;
	int bad;
} peer_arg;

enum { BIG = 2048, BDIM = DIM, DEPTH = 4, MAX_ROUNDS = 400 };

static _Atomic bool both_ran;

static void *peer_lookups(void *arg)
{
	peer_arg *a = arg;
	float *out = malloc((size_t)DEPTH * BIG * BDIM * sizeof(float));
	req_waiter w = REQ_WAITER_INIT;
	for (int round = 0; round < MAX_ROUNDS && !atomic_load(&both_ran); round++) {
		cluster_req r[DEPTH];
		for (int d = 0; d < DEPTH; d++) {
			r[d] = (cluster_req){ .op = CLUSTER_LOOKUP, .table = a->table, .ids = a->ids, .n = BIG,
					      .dim = BDIM, .out = out + (size_t)d * BIG * BDIM };
			req_submit(a->net, a->home, &r[d], &w);
		}
		req_wait_all(&w);
		for (int d = 0; d < DEPTH; d++)
			if (r[d].status || memcmp(r[d].out, a->rows, (size_t)BIG * BDIM * sizeof(float)))
				a->bad++;
		cluster_serve_counters c;
		cluster_get_serve_counters(memnet_cl(a->net, OWNER), &c);
		if (c.max_running >= 2)
			atomic_store(&both_ran, true);
	}
	free(out);
	return NULL;
}

Test(cluster_strand, two_peers_run_at_once)
{
	memnet *net = open_pooled();
	emdb_table_config cfg = table_cfg("both", EMDB_OPT_SGD);
	uint32_t t = cl_create(net, 0, &cfg);
	uint64_t *ids = malloc(BIG * sizeof(*ids));
	float *rows = malloc((size_t)BIG * BDIM * sizeof(float));
	owned_ids(net, ids, BIG, 1000);
	for (size_t i = 0; i < (size_t)BIG * BDIM; i++)
		rows[i] = (float)i;
	cr_assert_eq(emdb_table_load(memnet_db(net, OWNER), t, ids, BIG, BDIM, rows, NULL), EMDB_OK);
	peer_arg a[2] = { { net, 1, t, ids, rows, 0 }, { net, 2, t, ids, rows, 0 } };
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, peer_lookups, &a[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	cluster_serve_counters c;
	cluster_get_serve_counters(memnet_cl(net, OWNER), &c);
	cr_assert_eq(a[0].bad + a[1].bad, 0, "%d Lookups answered wrong", a[0].bad + a[1].bad);
	cr_assert_geq(c.max_running, 2, "two peers' requests never ran at once (%llu on the pool)",
		      (unsigned long long)c.on_pool);
	free(rows);
	free(ids);
	memnet_close(net);
}

Test(cluster_strand, the_pool_is_set_once)
{
	memnet *net = open_pooled();
	cr_assert_eq(cluster_set_serve_threads(memnet_cl(net, 1), 2), EMDB_ERR_INVALID);
	cr_assert_eq(cluster_set_serve_threads(NULL, 2), EMDB_ERR_INVALID);
	memnet_close(net);
}
