/*
 * test_cluster_workers.c - several workers of one synchronous step pushing
 * the same IDs through different nodes of a cluster (in process,
 * tests/lib/cluster_mem.h): with ranks declared (cluster_req.ranked, the
 * node opcode PUSH_RANKED) the rows and optimizer state after several
 * steps are bit-identical whatever the workers' arrival order and on 1, 2
 * or 3 nodes, and equal to one engine given the same pushes with
 * emdb_push_as.
 *
 * Each step every worker prefetches its batch on its home node, pulls it
 * pooled (MEAN bags), derives its gradients from what it pulled, pushes
 * them as bags by ticket, plainly by IDs and as weighted bags (per-sample
 * weights), as its rank; then
 * the step is applied (an Update, or a synchronous step of the W workers
 * arriving from their threads).  The IDs overlap between workers and
 * repeat inside batches, and the gradients span six orders of magnitude,
 * so a sum in arrival order would show: the unranked run in two orders
 * differs (checked), and the ranked runs must not.
 */
#ifdef EMDB_PLAIN_RUNNER /* under ThreadSanitizer */
#include "tests/lib/plain_runner.h"
#else
#include <criterion/criterion.h>
#endif
#include <pthread.h>
#include <string.h>

#include <emdb/db.h>
#include <emdb/error.h>

#include "tests/lib/cluster_mem.h"

#define DIM 8
enum { N = 64, BAGS = 16, STEPS = 5, UNIVERSE = 48, WMAX = 3 };
#define SF (2 * DIM) /* Adam's state floats per row */

typedef struct result {
	float rows[UNIVERSE * DIM];
	float state[UNIVERSE * SF];
} result;

static emdb_table_config table_cfg(void)
{
	emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
	strcpy(c.name, "emb");
	c.dim = DIM;
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_ADAM, &c.optimizer), 0);
	c.optimizer.lr = 0.05;
	c.init = (emdb_init){ EMDB_INIT_UNIFORM, -0.1, 0.1 };
	c.seed = 77;
	return c;
}

static uint64_t id_of(uint64_t i)
{
	return i == 0 ? UINT64_MAX : (i + 1) * 0x9e3779b97f4a7c15ull; /* spread over owners */
}

/* Worker w's batch of step s: IDs of a shared universe, bag offsets. */
static void batch(int s, uint32_t w, uint64_t *ids, uint64_t *off)
{
	uint64_t x = 0xabcdu + (uint64_t)s * 7919 + w * 104729;
	for (size_t i = 0; i < N; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		ids[i] = id_of((x >> 33) % UNIVERSE);
	}
	for (size_t b = 0; b <= BAGS; b++)
		off[b] = b * (N / BAGS);
}

/* The gradient a worker derives from its pooled forward: magnitudes
 * 1e-3 .. 1e3 by position. */
static void grads_of(const float *pooled, uint32_t w, float *g)
{
	static const float scale[7] = { 1e-3f, 1e-2f, 1e-1f, 1.0f, 1e1f, 1e2f, 1e3f };
	for (size_t i = 0; i < BAGS * DIM; i++)
		g[i] = (pooled[i] + 0.01f * (float)(w + 1)) * scale[(i * 5 + w) % 7];
}

/* Per-sample weights of a worker's weighted pooled push. */
static void weights_of(uint32_t w, float *wt)
{
	for (size_t i = 0; i < N; i++)
		wt[i] = (float)((i + w) % 5 + 1) * 0.3f;
}

typedef struct worker {
	memnet *net;
	uint32_t nodes, w, W, table;
	int step;
	bool ranked, sync;
	int rc;
} worker;

static void run_req(memnet *net, uint32_t home, cluster_req *r)
{
	int rc = cluster_run(memnet_cl(net, home), r);
	cr_assert_eq(rc, EMDB_OK, "op %d on node %u: %d (%s)", (int)r->op, home, rc, r->msg);
}

/* One worker's part of a step: forward, pushes, and with sync its
 * arrival at the step.  Sets rc (asserts only on the main thread). */
static void *worker_step(void *arg)
{
	worker *k = arg;
	uint32_t home = k->w % k->nodes;
	cluster *cl = memnet_cl(k->net, home);
	uint64_t ids[N], off[BAGS + 1];
	float pooled[BAGS * DIM], g[BAGS * DIM], gp[N * DIM];
	batch(k->step, k->w, ids, off);
	cluster_req pf = { .op = CLUSTER_PREFETCH, .table = k->table, .ids = ids, .n = N };
	if ((k->rc = cluster_run(cl, &pf)))
		return NULL;
	cluster_req pl = { .op = CLUSTER_PULL, .table = k->table, .dim = DIM, .ticket = pf.ticket_out,
			   .offsets = off, .n_bags = BAGS, .pool = EMDB_POOL_MEAN, .out = pooled };
	k->rc = cluster_run(cl, &pl);
	grads_of(pooled, k->w, g);
	for (size_t i = 0; i < N * DIM; i++)
		gp[i] = g[(i * 3) % (BAGS * DIM)] * 0.25f;
	cluster_req ps = { .op = CLUSTER_PUSH, .table = k->table, .dim = DIM, .ticket = pf.ticket_out,
			   .offsets = off, .n_bags = BAGS, .pool = EMDB_POOL_MEAN, .grads = g,
			   .ranked = k->ranked, .rank = k->w };
	if (!k->rc)
		k->rc = cluster_run(cl, &ps);
	cluster_req pi = { .op = CLUSTER_PUSH, .table = k->table, .dim = DIM, .ids = ids, .n = N, .grads = gp,
			   .ranked = k->ranked, .rank = k->w };
	if (!k->rc)
		k->rc = cluster_run(cl, &pi);
	float wt[N];
	weights_of(k->w, wt);
	cluster_req pw = { .op = CLUSTER_PUSH, .table = k->table, .dim = DIM, .ids = ids, .n = N, .offsets = off,
			   .n_bags = BAGS, .pool = EMDB_POOL_SUM, .weights = wt, .grads = g, .ranked = k->ranked,
			   .rank = k->w };
	if (!k->rc)
		k->rc = cluster_run(cl, &pw);
	cluster_ticket_free(cl, pf.ticket_out);
	if (!k->rc && k->sync) {
		cluster_req st = { .op = CLUSTER_STEP, .table = k->table, .workers = k->W, .worker = k->w + 1,
				   .timeout_ms = 60000 };
		k->rc = cluster_run(cl, &st);
	}
	return NULL;
}

/* STEPS steps of W workers on `nodes` nodes.  Sequential: each step the
 * workers push in order[] rotated by the step, then node s % nodes
 * updates.  sync: the workers run on threads and arrive at a synchronous
 * step of W (arrival order left to the scheduler). */
static void train(uint32_t nodes, uint32_t W, const uint32_t *order, bool ranked, bool sync, result *out)
{
	memnet *net = memnet_open(nodes, 0);
	cr_assert_not_null(net);
	emdb_table_config cfg = table_cfg();
	cluster_req cr = { .op = CLUSTER_TABLE_CREATE, .cfg = &cfg };
	run_req(net, 0, &cr);
	uint32_t t = cr.table_out;
	for (int s = 0; s < STEPS; s++) {
		worker ws[WMAX];
		pthread_t th[WMAX];
		for (uint32_t k = 0; k < W; k++) {
			uint32_t w = order[(k + (uint32_t)s) % W];
			ws[k] = (worker){ net, nodes, w, W, t, s, ranked, sync, 0 };
			if (sync)
				cr_assert_eq(pthread_create(&th[k], NULL, worker_step, &ws[k]), 0);
			else
				worker_step(&ws[k]);
		}
		for (uint32_t k = 0; k < W; k++) {
			if (sync)
				pthread_join(th[k], NULL);
			cr_assert_eq(ws[k].rc, EMDB_OK, "step %d, worker %u: %d", s, ws[k].w, ws[k].rc);
		}
		if (!sync) {
			cluster_req up = { .op = CLUSTER_UPDATE, .table = t };
			run_req(net, (uint32_t)s % nodes, &up);
		}
	}
	uint64_t ids[UNIVERSE];
	uint8_t found[UNIVERSE];
	for (uint64_t i = 0; i < UNIVERSE; i++)
		ids[i] = id_of(i);
	cluster_req lk = { .op = CLUSTER_LOOKUP, .table = t, .dim = DIM, .ids = ids, .n = UNIVERSE, .out = out->rows };
	run_req(net, 0, &lk);
	cluster_req rs = { .op = CLUSTER_READ_STATE, .table = t, .ids = ids, .n = UNIVERSE, .out = out->state,
			   .found = found };
	run_req(net, nodes - 1, &rs);
	memnet_close(net);
}

/* The same run on one engine, the workers pushing in rank order with
 * emdb_push_as. */
static void train_alone(uint32_t W, result *out)
{
	emdb_db *db;
	cr_assert_eq(emdb_db_open(NULL, &db), 0);
	emdb_table_config cfg = table_cfg();
	uint32_t t;
	cr_assert_eq(emdb_table_create(db, &cfg, &t), 0);
	for (int s = 0; s < STEPS; s++) {
		for (uint32_t w = 0; w < W; w++) {
			uint64_t ids[N], off[BAGS + 1];
			float pooled[BAGS * DIM], g[BAGS * DIM], gp[N * DIM];
			batch(s, w, ids, off);
			emdb_ticket *tk;
			cr_assert_eq(emdb_prefetch(db, t, ids, N, &tk), 0);
			cr_assert_eq(emdb_pull_bags_ticket(db, t, tk, off, BAGS, EMDB_POOL_MEAN, DIM, pooled), 0);
			grads_of(pooled, w, g);
			for (size_t i = 0; i < N * DIM; i++)
				gp[i] = g[(i * 3) % (BAGS * DIM)] * 0.25f;
			emdb_push_batch pb = { .ticket = tk, .offsets = off, .n_bags = BAGS, .pool = EMDB_POOL_MEAN,
					       .dim = DIM, .grads = g };
			cr_assert_eq(emdb_push_as(db, t, w, &pb), 0, "%s", emdb_last_error());
			emdb_push_batch pi = { .ids = ids, .n = N, .dim = DIM, .grads = gp };
			cr_assert_eq(emdb_push_as(db, t, w, &pi), 0, "%s", emdb_last_error());
			float wt[N];
			weights_of(w, wt);
			emdb_push_batch pw = { .ids = ids, .n = N, .offsets = off, .n_bags = BAGS, .pool = EMDB_POOL_SUM,
					       .weights = wt, .dim = DIM, .grads = g };
			cr_assert_eq(emdb_push_as(db, t, w, &pw), 0, "%s", emdb_last_error());
			emdb_ticket_free(tk);
		}
		cr_assert_eq(emdb_update(db, t, NULL), 0);
	}
	uint64_t ids[UNIVERSE];
	for (uint64_t i = 0; i < UNIVERSE; i++)
		ids[i] = id_of(i);
	cr_assert_eq(emdb_lookup(db, t, ids, UNIVERSE, DIM, out->rows, NULL), 0);
	cr_assert_eq(emdb_read_state(db, t, ids, UNIVERSE, out->state, NULL), 0);
	emdb_db_close(db);
}

static bool same(const result *a, const result *b)
{
	return memcmp(a, b, sizeof(*a)) == 0;
}

static result ref, got;

Test(cluster_workers, three_workers_any_order_on_1_2_3_nodes_are_one_engine)
{
	static const uint32_t orders[3][3] = { { 0, 1, 2 }, { 2, 1, 0 }, { 1, 0, 2 } };
	train_alone(3, &ref);
	for (uint32_t nodes = 1; nodes <= 3; nodes++) {
		for (int o = 0; o < 3; o++) {
			train(nodes, 3, orders[o], true, false, &got);
			cr_assert(same(&ref, &got), "%u nodes, order %d: rows or Adam state differ from one engine's",
				  nodes, o);
		}
	}
}

Test(cluster_workers, two_workers_either_order_on_1_2_3_nodes)
{
	static const uint32_t fwd[2] = { 0, 1 }, back[2] = { 1, 0 };
	train_alone(2, &ref);
	for (uint32_t nodes = 1; nodes <= 3; nodes++) {
		train(nodes, 2, fwd, true, false, &got);
		cr_assert(same(&ref, &got), "%u nodes, worker 0 first: differs from one engine's", nodes);
		train(nodes, 2, back, true, false, &got);
		cr_assert(same(&ref, &got), "%u nodes, worker 1 first: differs from one engine's", nodes);
	}
}

/* Workers on threads arriving at a synchronous step of 3, as trainers do. */
Test(cluster_workers, a_synchronous_step_of_three_threads_is_one_engine)
{
	static const uint32_t order[3] = { 0, 1, 2 };
	train_alone(3, &ref);
	for (uint32_t nodes = 1; nodes <= 3; nodes++) {
		train(nodes, 3, order, true, true, &got);
		cr_assert(same(&ref, &got), "%u nodes, synchronous step: differs from one engine's", nodes);
	}
}

/* Without ranks the sums follow arrival: the data show it. */
Test(cluster_workers, unranked_pushes_depend_on_arrival_order)
{
	static const uint32_t fwd[3] = { 0, 1, 2 }, back[3] = { 2, 1, 0 };
	static result a;
	train(2, 3, fwd, false, false, &a);
	train(2, 3, back, false, false, &got);
	cr_assert(!same(&a, &got), "the test data must be sensitive to the order of the sums");
}
