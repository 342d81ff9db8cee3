/*
 * test_cluster_route.c - the cluster layer (cluster/cluster.h) on 1, 2
 * and 3 nodes in one process (tests/lib/cluster_mem.h: N engines joined
 * by an in-process link), against one engine holding every row.
 *
 * What is checked, as a user of the cluster would check it:
 *   - a mixed workload (Prefetch, Pull plain and pooled by IDs and by
 *     ticket, Push plain and pooled, Push+Update, Update, Lookup with
 *     found, IDs 0 and 2^64-1 among them), its home node changing every
 *     step, gives every output, row and optimizer state of one engine,
 *     bit for bit, on 2 and 3 nodes;
 *   - a training run with fixed seeds leaves bit-identical rows and
 *     optimizer state on 1, 2 and 3 nodes;
 *   - a request sends each other owner exactly one message;
 *   - a node that is down fails the requests that need it with NODE and
 *     a message naming it, while requests that do not need it go on;
 *   - tables created, dropped and reserved on any node exist alike on
 *     every node, and a change one node refuses applies nowhere;
 *   - a synchronous step of workers on different nodes is applied once
 *     on every node after the last arrival, and a resent arrival is not
 *     counted twice;
 *   - a request's IDs and gradients may be overwritten once
 *     cluster_submit returns (what emdb-server relies on to route a
 *     client's request without copying it).
 */
#ifdef EMDB_PLAIN_RUNNER /* under ThreadSanitizer */
#include "tests/lib/plain_runner.h"
#define cr_log_info(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr))
#else
#include <criterion/criterion.h>
#endif
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include <emdb/db.h>
#include <emdb/error.h>

#include "tests/lib/cluster_mem.h"
#include "tests/lib/cluster_req.h"

/* ---- the mixed workload against one engine --------------------------- */

static void mixed_against_one(uint32_t nodes)
{
	memnet *net = memnet_open(nodes, 64);
	cr_assert_not_null(net);
	emdb_db *ref;
	cr_assert_eq(emdb_db_open(NULL, &ref), 0);
	emdb_table_config cfg = table_cfg("mixed", EMDB_OPT_ADAM);
	uint32_t rt;
	cr_assert_eq(emdb_table_create(ref, &cfg, &rt), 0);
	uint32_t ct = cl_create(net, nodes - 1, &cfg);
	cr_assert_eq(ct, rt, "the cluster numbers the table %u, one engine %u", ct, rt);

	enum { N = 96, BAGS = 20 };
	uint64_t seed = 42, ids[N], ids2[N], off[BAGS + 1], all[64 * N];
	size_t n_all = 0;
	static float a[N * DIM], b[N * DIM], g[N * DIM];
	uint8_t fa[N], fb[N];
	for (int step = 0; step < 6; step++) {
		uint32_t home = (uint32_t)step % nodes;
		make_ids(ids, N, &seed);
		memcpy(all + n_all, ids, sizeof(ids));
		n_all += N;

		emdb_ticket *rtk;
		cr_assert_eq(emdb_prefetch(ref, rt, ids, N, &rtk), 0);
		cluster_req pf = { .op = CLUSTER_PREFETCH, .table = ct, .ids = ids, .n = N };
		run_req(net, home, &pf, EMDB_OK);
		cluster_ticket *ctk = pf.ticket_out;
		cr_assert_eq(cluster_ticket_count(ctk), N);

		/* Pull by ticket, plain. */
		cr_assert_eq(emdb_pull_ticket(ref, rt, rtk, DIM, a), 0);
		cluster_req pl = { .op = CLUSTER_PULL, .table = ct, .dim = DIM, .ticket = ctk, .out = b };
		run_req(net, home, &pl, EMDB_OK);
		SAME(a, b, N * DIM * 4, "pull by ticket");

		/* Pooled pulls: by IDs (SUM) and by ticket (MEAN). */
		make_ids(ids2, N, &seed);
		memcpy(all + n_all, ids2, sizeof(ids2));
		n_all += N;
		make_offsets(off, BAGS, N, &seed);
		cr_assert_eq(emdb_pull_bags(ref, rt, ids2, N, off, BAGS, EMDB_POOL_SUM, DIM, a), 0);
		cluster_req pb = { .op = CLUSTER_PULL, .table = ct, .dim = DIM, .ids = ids2, .n = N, .offsets = off,
				   .n_bags = BAGS, .pool = EMDB_POOL_SUM, .out = b };
		run_req(net, home, &pb, EMDB_OK);
		SAME(a, b, BAGS * DIM * 4, "pooled pull (sum) by IDs");
		cr_assert_eq(emdb_pull_bags_ticket(ref, rt, rtk, off, BAGS, EMDB_POOL_MEAN, DIM, a), 0);
		cluster_req pt = { .op = CLUSTER_PULL, .table = ct, .dim = DIM, .ticket = ctk, .offsets = off,
				   .n_bags = BAGS, .pool = EMDB_POOL_MEAN, .out = b };
		run_req(net, home, &pt, EMDB_OK);
		SAME(a, b, BAGS * DIM * 4, "pooled pull (mean) by ticket");

		/* Pushes: by ticket, pooled by IDs (MEAN), pooled by ticket
		 * (SUM), plain by IDs. */
		make_grads(g, N * DIM, &seed);
		cr_assert_eq(emdb_push_ticket(ref, rt, rtk, DIM, g), 0);
		cluster_req p1 = { .op = CLUSTER_PUSH, .table = ct, .dim = DIM, .ticket = ctk, .grads = g };
		run_req(net, home, &p1, EMDB_OK);
		cr_assert_eq(emdb_push_bags(ref, rt, ids2, N, off, BAGS, EMDB_POOL_MEAN, DIM, g), 0);
		cluster_req p2 = { .op = CLUSTER_PUSH, .table = ct, .dim = DIM, .ids = ids2, .n = N, .offsets = off,
				   .n_bags = BAGS, .pool = EMDB_POOL_MEAN, .grads = g };
		run_req(net, home, &p2, EMDB_OK);
		cr_assert_eq(emdb_push_bags_ticket(ref, rt, rtk, off, BAGS, EMDB_POOL_SUM, DIM, g + DIM), 0);
		cluster_req p3 = { .op = CLUSTER_PUSH, .table = ct, .dim = DIM, .ticket = ctk, .offsets = off,
				   .n_bags = BAGS, .pool = EMDB_POOL_SUM, .grads = g + DIM };
		run_req(net, home, &p3, EMDB_OK);
		cr_assert_eq(emdb_push(ref, rt, ids2, N, DIM, g), 0);
		cluster_req p4 = { .op = CLUSTER_PUSH, .table = ct, .dim = DIM, .ids = ids2, .n = N, .grads = g };
		run_req(net, home, &p4, EMDB_OK);

		/* The step: Update, or Push+Update (by IDs, then by ticket). */
		uint64_t rows_ref = 0;
		if (step % 3 == 0) {
			cr_assert_eq(emdb_update(ref, rt, &rows_ref), 0);
			cluster_req u = { .op = CLUSTER_UPDATE, .table = ct };
			run_req(net, home, &u, EMDB_OK);
			cr_assert_eq(u.rows, rows_ref, "update: %llu rows, one engine %llu", (unsigned long long)u.rows,
				     (unsigned long long)rows_ref);
		} else if (step % 3 == 1) {
			cr_assert_eq(emdb_push_update(ref, rt, ids, N, DIM, g, &rows_ref), 0);
			cluster_req u = { .op = CLUSTER_PUSH_UPDATE, .table = ct, .dim = DIM, .ids = ids, .n = N, .grads = g };
			run_req(net, home, &u, EMDB_OK);
			cr_assert_eq(u.rows, rows_ref);
		} else {
			cr_assert_eq(emdb_push_update_ticket(ref, rt, rtk, DIM, g, &rows_ref), 0);
			cluster_req u = { .op = CLUSTER_PUSH_UPDATE, .table = ct, .dim = DIM, .ticket = ctk, .grads = g };
			run_req(net, home, &u, EMDB_OK);
			cr_assert_eq(u.rows, rows_ref);
		}

		/* Lookup with found, of held and unseen IDs. */
		for (size_t i = 0; i < N; i++)
			ids2[i] = i % 2 ? ids[i] : ids[i] * 31 + 1000003;
		cr_assert_eq(emdb_lookup(ref, rt, ids2, N, DIM, a, fa), 0);
		cluster_req lk = { .op = CLUSTER_LOOKUP, .table = ct, .dim = DIM, .ids = ids2, .n = N, .out = b, .found = fb };
		run_req(net, home, &lk, EMDB_OK);
		SAME(a, b, N * DIM * 4, "lookup");
		SAME(fa, fb, N, "lookup's found");

		emdb_ticket_free(rtk);
		cluster_ticket_free(memnet_cl(net, home), ctk);
	}

	/* Every row and every optimizer state, read back from every node. */
	same_rows(net, nodes, ref, rt, ct, all, n_all, emdb_optimizer_state_floats(EMDB_OPT_ADAM, DIM));
	/* Rows live on their owners only, and every node took every step. */
	emdb_table_info ri, ci;
	cr_assert_eq(emdb_table_describe(ref, rt, &ri), 0);
	uint64_t rows = 0;
	for (uint32_t r = 0; r < nodes; r++) {
		cr_assert_eq(emdb_table_describe(memnet_db(net, r), ct, &ci), 0);
		rows += ci.stats.rows;
		cr_assert_eq(ci.stats.step, ri.stats.step, "node %u at step %llu, one engine at %llu", r,
			     (unsigned long long)ci.stats.step, (unsigned long long)ri.stats.step);
	}
	cr_assert_eq(rows, ri.stats.rows, "the nodes hold %llu rows, one engine %llu", (unsigned long long)rows,
		     (unsigned long long)ri.stats.rows);
	emdb_db_close(ref);
	memnet_close(net);
}

Test(cluster_route, mixed_workload_two_nodes_is_one_engine)
{
	mixed_against_one(2);
}

Test(cluster_route, mixed_workload_three_nodes_is_one_engine)
{
	mixed_against_one(3);
}

/* ---- training: 1, 2 and 3 nodes alike ---------------------------------- */

typedef struct trained {
	float *rows, *state;
} trained;

static trained train(uint32_t nodes, uint64_t *ids_all, size_t *n_all)
{
	memnet *net = memnet_open(nodes, 0);
	cr_assert_not_null(net);
	emdb_table_config cfg = table_cfg("emb", EMDB_OPT_ADAM);
	uint32_t t = cl_create(net, 0, &cfg);
	enum { N = 128, BAGS = 32, STEPS = 8 };
	uint64_t seed = 7, ids[N], off[BAGS + 1];
	static float out[BAGS * DIM], g[BAGS * DIM];
	*n_all = 0;
	for (int s = 0; s < STEPS; s++) {
		uint32_t home = (uint32_t)s % nodes;
		make_ids(ids, N, &seed);
		make_offsets(off, BAGS, N, &seed);
		memcpy(ids_all + *n_all, ids, sizeof(ids));
		*n_all += N;
		cluster_req pf = { .op = CLUSTER_PREFETCH, .table = t, .ids = ids, .n = N };
		run_req(net, home, &pf, EMDB_OK);
		cluster_req pl = { .op = CLUSTER_PULL, .table = t, .dim = DIM, .ticket = pf.ticket_out, .offsets = off,
				   .n_bags = BAGS, .pool = EMDB_POOL_MEAN, .out = out };
		run_req(net, home, &pl, EMDB_OK);
		for (size_t i = 0; i < BAGS * DIM; i++) /* a gradient that depends on the forward */
			g[i] = out[i] * 0.5f + (float)(i % 5) * 0.01f;
		cluster_req ps = { .op = CLUSTER_PUSH, .table = t, .dim = DIM, .ticket = pf.ticket_out, .offsets = off,
				   .n_bags = BAGS, .pool = EMDB_POOL_MEAN, .grads = g };
		run_req(net, home, &ps, EMDB_OK);
		cluster_req up = { .op = CLUSTER_UPDATE, .table = t };
		run_req(net, home, &up, EMDB_OK);
		cluster_ticket_free(memnet_cl(net, home), pf.ticket_out);
	}
	uint32_t sf = emdb_optimizer_state_floats(EMDB_OPT_ADAM, DIM);
	trained r = { malloc(*n_all * DIM * 4), malloc(*n_all * sf * 4) };
	uint8_t *found = malloc(*n_all);
	cr_assert(r.rows && r.state && found);
	cluster_req lk = { .op = CLUSTER_LOOKUP, .table = t, .dim = DIM, .ids = ids_all, .n = *n_all, .out = r.rows };
	run_req(net, 0, &lk, EMDB_OK);
	cluster_req rs = { .op = CLUSTER_READ_STATE, .table = t, .ids = ids_all, .n = *n_all, .out = r.state, .found = found };
	run_req(net, nodes - 1, &rs, EMDB_OK);
	for (size_t i = 0; i < *n_all; i++)
		cr_assert_eq(found[i], 1, "ID %llu of the batches is not held", (unsigned long long)ids_all[i]);
	free(found);
	memnet_close(net);
	return r;
}

/* The same run on one engine, without the cluster layer. */
static trained train_alone(const uint64_t *ids_all, size_t n_all)
{
	emdb_db *db;
	cr_assert_eq(emdb_db_open(NULL, &db), 0);
	emdb_table_config cfg = table_cfg("emb", EMDB_OPT_ADAM);
	uint32_t t;
	cr_assert_eq(emdb_table_create(db, &cfg, &t), 0);
	enum { N = 128, BAGS = 32, STEPS = 8 };
	uint64_t seed = 7, ids[N], off[BAGS + 1];
	static float out[BAGS * DIM], g[BAGS * DIM];
	for (int s = 0; s < STEPS; s++) {
		make_ids(ids, N, &seed);
		make_offsets(off, BAGS, N, &seed);
		emdb_ticket *tk;
		cr_assert_eq(emdb_prefetch(db, t, ids, N, &tk), 0);
		cr_assert_eq(emdb_pull_bags_ticket(db, t, tk, off, BAGS, EMDB_POOL_MEAN, DIM, out), 0);
		for (size_t i = 0; i < BAGS * DIM; i++)
			g[i] = out[i] * 0.5f + (float)(i % 5) * 0.01f;
		cr_assert_eq(emdb_push_bags_ticket(db, t, tk, off, BAGS, EMDB_POOL_MEAN, DIM, g), 0);
		cr_assert_eq(emdb_update(db, t, NULL), 0);
		emdb_ticket_free(tk);
	}
	uint32_t sf = emdb_optimizer_state_floats(EMDB_OPT_ADAM, DIM);
	trained r = { malloc(n_all * DIM * 4), malloc(n_all * sf * 4) };
	cr_assert(r.rows && r.state);
	cr_assert_eq(emdb_lookup(db, t, ids_all, n_all, DIM, r.rows, NULL), 0);
	cr_assert_eq(emdb_read_state(db, t, ids_all, n_all, r.state, NULL), 0);
	emdb_db_close(db);
	return r;
}

Test(cluster_route, training_is_bit_identical_on_1_2_3_nodes)
{
	static uint64_t ids[3][8 * 128];
	size_t n[3];
	trained t1 = train(1, ids[0], &n[0]);
	trained t2 = train(2, ids[1], &n[1]);
	trained t3 = train(3, ids[2], &n[2]);
	uint32_t sf = emdb_optimizer_state_floats(EMDB_OPT_ADAM, DIM);
	cr_assert_eq(n[0], n[1]);
	cr_assert_eq(n[0], n[2]);
	SAME(t1.rows, t2.rows, n[0] * DIM * 4, "rows on 2 nodes vs 1");
	SAME(t1.rows, t3.rows, n[0] * DIM * 4, "rows on 3 nodes vs 1");
	SAME(t1.state, t2.state, n[0] * sf * 4, "Adam state on 2 nodes vs 1");
	SAME(t1.state, t3.state, n[0] * sf * 4, "Adam state on 3 nodes vs 1");
	trained t0 = train_alone(ids[0], n[0]);
	SAME(t0.rows, t1.rows, n[0] * DIM * 4, "rows on 1 node vs one engine alone");
	SAME(t0.state, t1.state, n[0] * sf * 4, "Adam state on 1 node vs one engine alone");
	free(t0.rows), free(t0.state);
	free(t1.rows), free(t1.state), free(t2.rows), free(t2.state), free(t3.rows), free(t3.state);
}

/* ---- one message per owner per request ---------------------------------- */

/* Bytes between node `home` and the others, both ways. */
static uint64_t traffic(memnet *net, uint32_t home)
{
	uint64_t b = 0;
	for (uint32_t r = 0; r < net->nodes; r++)
		if (r != home)
			b += memnet_bytes(net, home, r) + memnet_bytes(net, r, home);
	return b;
}

Test(cluster_route, one_message_per_owner_per_request)
{
	memnet *net = memnet_open(3, 0);
	cr_assert_not_null(net);
	emdb_table_config cfg = table_cfg("m", EMDB_OPT_SGD);
	uint32_t t = cl_create(net, 0, &cfg);
	memnet_quiesce(net);
	enum { N = 4096 };
	static uint64_t ids[N];
	static float out[N * DIM];
	for (size_t i = 0; i < N; i++)
		ids[i] = i * 2654435761u;
	uint64_t before[3];
	for (uint32_t r = 0; r < 3; r++)
		before[r] = memnet_calls(net, 1, r);
	/* What must cross: each remote owner's share of the IDs and rows. */
	uint64_t remote = 0;
	for (size_t i = 0; i < N; i++)
		remote += owner_of(cluster_map(memnet_cl(net, 1)), ids[i]) != 1;
	uint64_t b0 = traffic(net, 1);
	cluster_req pf = { .op = CLUSTER_PREFETCH, .table = t, .ids = ids, .n = N };
	run_req(net, 1, &pf, EMDB_OK);
	uint64_t b1 = traffic(net, 1);
	cluster_req pl = { .op = CLUSTER_PULL, .table = t, .dim = DIM, .ticket = pf.ticket_out, .out = out };
	run_req(net, 1, &pl, EMDB_OK);
	uint64_t b2 = traffic(net, 1);
	cluster_req pp = { .op = CLUSTER_PUSH, .table = t, .dim = DIM, .ids = ids, .n = N, .grads = out };
	run_req(net, 1, &pp, EMDB_OK);
	uint64_t b3 = traffic(net, 1);
	cr_log_info("node-to-node bytes per byte that must cross, %llu of %d IDs remote, dim %d: prefetch %.4f, pull by ticket %.4f, push %.4f",
		    (unsigned long long)remote, N, DIM, (double)(b1 - b0) / (double)(remote * 8),
		    (double)(b2 - b1) / (double)(remote * DIM * 4), (double)(b3 - b2) / (double)(remote * (8 + DIM * 4)));
	/* At most 1.1x the IDs and rows that must cross, headers included. */
	cr_assert_leq((b1 - b0) * 10, remote * 8 * 11, "prefetch: %llu bytes for %llu remote IDs",
		      (unsigned long long)(b1 - b0), (unsigned long long)remote);
	cr_assert_leq((b2 - b1) * 10, remote * DIM * 4 * 11, "pull by ticket: %llu bytes for %llu remote rows",
		      (unsigned long long)(b2 - b1), (unsigned long long)remote);
	cr_assert_leq((b3 - b2) * 10, remote * (8 + DIM * 4) * 11, "push: %llu bytes for %llu remote IDs and rows",
		      (unsigned long long)(b3 - b2), (unsigned long long)remote);
	for (uint32_t r = 0; r < 3; r++)
		if (r != 1)
			cr_assert_eq(memnet_calls(net, 1, r) - before[r], 3, "node 1 sent node %u %llu messages for 3 requests",
				     r, (unsigned long long)(memnet_calls(net, 1, r) - before[r]));
	/* An owner with no ID of the batch gets nothing. */
	uint64_t mine[64];
	size_t k = 0;
	for (uint64_t id = 0; k < 64; id++)
		if (owner_of(cluster_map(memnet_cl(net, 1)), id) == 0)
			mine[k++] = id;
	uint64_t to2 = memnet_calls(net, 1, 2);
	cluster_req lk = { .op = CLUSTER_LOOKUP, .table = t, .dim = DIM, .ids = mine, .n = 64, .out = out };
	run_req(net, 1, &lk, EMDB_OK);
	cr_assert_eq(memnet_calls(net, 1, 2), to2, "node 2 owns none of the IDs but was sent a message");
	cluster_ticket_free(memnet_cl(net, 1), pf.ticket_out);
	memnet_close(net);
}

/* ---- inputs free once cluster_submit returns (cluster.h "Ownership") ---- */

/* Submit r on home, overwrite `scribble` (the request's IDs and
 * gradients) as soon as cluster_submit returns, then wait for its end. */
static void submit_then_scribble(memnet *net, uint32_t home, cluster_req *r, void *scribble, size_t len)
{
	req_waiter w = REQ_WAITER_INIT;
	req_submit(net, home, r, &w);
	memset(scribble, 0xA5, len);
	req_wait_all(&w);
	cr_assert_eq(r->status, EMDB_OK, "op %d: %s", (int)r->op, r->msg);
}

Test(cluster_route, ids_and_gradients_are_the_callers_once_submit_returns)
{
	memnet *net = memnet_open(3, 64);
	cr_assert_not_null(net);
	emdb_db *ref;
	cr_assert_eq(emdb_db_open(NULL, &ref), 0);
	emdb_table_config cfg = table_cfg("own", EMDB_OPT_SGD);
	uint32_t rt, ct = cl_create(net, 0, &cfg);
	cr_assert_eq(emdb_table_create(ref, &cfg, &rt), 0);
	enum { N = 300 };
	uint64_t seed = 9, ids[N], sent[N];
	static float g[N * DIM], gs[N * DIM], a[N * DIM], b[N * DIM];
	make_ids(ids, N, &seed);
	make_grads(g, N * DIM, &seed);
	for (uint32_t home = 0; home < 3; home++) {
		memcpy(sent, ids, sizeof(ids));
		cluster_req pl = { .op = CLUSTER_PULL, .table = ct, .dim = DIM, .ids = sent, .n = N, .out = b };
		submit_then_scribble(net, home, &pl, sent, sizeof(sent));
		cr_assert_eq(emdb_pull(ref, rt, ids, N, DIM, a), 0);
		SAME(a, b, sizeof(a), "pull by IDs, its IDs overwritten after submit");

		memcpy(sent, ids, sizeof(ids));
		memcpy(gs, g, sizeof(g));
		cluster_req ps = { .op = CLUSTER_PUSH, .table = ct, .dim = DIM, .ids = sent, .n = N, .grads = gs };
		submit_then_scribble(net, home, &ps, gs, sizeof(gs));
		cr_assert_eq(emdb_push(ref, rt, ids, N, DIM, g), 0);
		memcpy(sent, ids, sizeof(ids));
		memcpy(gs, g, sizeof(g));
		cluster_req pu = { .op = CLUSTER_PUSH_UPDATE, .table = ct, .dim = DIM, .ids = sent, .n = N, .grads = gs };
		submit_then_scribble(net, home, &pu, sent, sizeof(sent));
		uint64_t rows;
		cr_assert_eq(emdb_push_update(ref, rt, ids, N, DIM, g, &rows), 0);
		cr_assert_eq(pu.rows, rows);
	}
	cluster_req lk = { .op = CLUSTER_LOOKUP, .table = ct, .dim = DIM, .ids = ids, .n = N, .out = b };
	run_req(net, 1, &lk, EMDB_OK);
	cr_assert_eq(emdb_lookup(ref, rt, ids, N, DIM, a, NULL), 0);
	SAME(a, b, sizeof(a), "rows after pushes whose inputs were overwritten after submit");
	emdb_db_close(ref);
	memnet_close(net);
}

/* ---- a node that does not answer ------------------------------------------ */

Test(cluster_route, a_down_node_fails_what_needs_it_with_node)
{
	memnet *net = memnet_open(3, 0);
	cr_assert_not_null(net);
	emdb_table_config cfg = table_cfg("f", EMDB_OPT_SGD);
	uint32_t t = cl_create(net, 0, &cfg);
	const owner_map *map = cluster_map(memnet_cl(net, 0));
	uint64_t spread[30], near[30];
	size_t ks = 0, kn = 0;
	for (uint64_t id = 1; ks < 30 || kn < 30; id++) {
		if (ks < 30)
			spread[ks++] = id;
		if (kn < 30 && owner_of(map, id) != 2)
			near[kn++] = id;
	}
	static float out[30 * DIM];
	cluster_req ok = { .op = CLUSTER_PULL, .table = t, .dim = DIM, .ids = spread, .n = 30, .out = out };
	run_req(net, 0, &ok, EMDB_OK);

	memnet_set_down(net, 2, true);
	cluster_req bad = { .op = CLUSTER_PULL, .table = t, .dim = DIM, .ids = spread, .n = 30, .out = out };
	run_req(net, 0, &bad, EMDB_ERR_NODE);
	cr_assert(strstr(bad.msg, "node 2"), "the error names the node: %s", bad.msg);
	cluster_req pf = { .op = CLUSTER_PREFETCH, .table = t, .ids = spread, .n = 30 };
	run_req(net, 1, &pf, EMDB_ERR_NODE);
	cr_assert(pf.ticket_out == NULL, "a failed prefetch gave a ticket");
	cluster_req up = { .op = CLUSTER_UPDATE, .table = t };
	run_req(net, 1, &up, EMDB_ERR_NODE);
	/* What does not need node 2 goes on, from either other node. */
	for (uint32_t home = 0; home < 2; home++) {
		cluster_req lk = { .op = CLUSTER_LOOKUP, .table = t, .dim = DIM, .ids = near, .n = 30, .out = out };
		run_req(net, home, &lk, EMDB_OK);
		cluster_req pp = { .op = CLUSTER_PUSH, .table = t, .dim = DIM, .ids = near, .n = 30, .grads = out };
		run_req(net, home, &pp, EMDB_OK);
	}
	/* A table change needs every node: refused, applied nowhere. */
	emdb_table_config c2 = table_cfg("g", EMDB_OPT_SGD);
	cluster_req cr = { .op = CLUSTER_TABLE_CREATE, .cfg = &c2 };
	run_req(net, 1, &cr, EMDB_ERR_NODE);
	uint32_t id;
	for (uint32_t r = 0; r < 3; r++)
		cr_assert_eq(emdb_table_find(memnet_db(net, r), "g", &id), EMDB_ERR_NO_TABLE, "node %u has 'g'", r);
	memnet_set_down(net, 2, false);
	memnet_close(net);
}

/* ---- table changes on every node ------------------------------------------- */

Test(cluster_route, table_changes_apply_on_every_node_or_none)
{
	memnet *net = memnet_open(3, 0);
	cr_assert_not_null(net);
	emdb_table_config a = table_cfg("a", EMDB_OPT_SGD), b = table_cfg("b", EMDB_OPT_ADAGRAD);
	uint32_t ta = cl_create(net, 2, &a);
	uint32_t tb = cl_create(net, 1, &b);
	cr_assert_neq(ta, tb);
	for (uint32_t r = 0; r < 3; r++) {
		uint32_t id;
		cr_assert_eq(emdb_table_find(memnet_db(net, r), "a", &id), 0, "node %u lacks 'a'", r);
		cr_assert_eq(id, ta);
		cr_assert_eq(emdb_table_find(memnet_db(net, r), "b", &id), 0, "node %u lacks 'b'", r);
		cr_assert_eq(id, tb);
	}
	/* One node refuses (it has a table of that name): nobody creates. */
	emdb_table_config x = table_cfg("x", EMDB_OPT_SGD);
	cr_assert_eq(emdb_table_create(memnet_db(net, 1), &x, NULL), 0);
	cluster_req cx = { .op = CLUSTER_TABLE_CREATE, .cfg = &x };
	run_req(net, 2, &cx, EMDB_ERR_EXISTS);
	cr_assert(strstr(cx.msg, "node 1"), "the refusal names the node: %s", cx.msg);
	uint32_t id;
	cr_assert_eq(emdb_table_find(memnet_db(net, 0), "x", &id), EMDB_ERR_NO_TABLE);
	cr_assert_eq(emdb_table_find(memnet_db(net, 2), "x", &id), EMDB_ERR_NO_TABLE);
	/* A bad configuration: refused everywhere. */
	emdb_table_config bad = table_cfg("bad", EMDB_OPT_SGD);
	bad.dim = 0;
	cluster_req cb = { .op = CLUSTER_TABLE_CREATE, .cfg = &bad };
	run_req(net, 1, &cb, EMDB_ERR_INVALID);
	/* Node 1 gave an id to 'x' that the others did not: the next table
	 * still gets one id on every node. */
	emdb_table_config c = table_cfg("c", EMDB_OPT_SGD);
	uint32_t tc = cl_create(net, 0, &c);
	for (uint32_t r = 0; r < 3; r++) {
		cr_assert_eq(emdb_table_find(memnet_db(net, r), "c", &id), 0);
		cr_assert_eq(id, tc, "node %u numbers 'c' %u, not %u", r, id, tc);
	}
	/* Reserve and drop from any node. */
	cluster_req rv = { .op = CLUSTER_TABLE_RESERVE, .table = ta, .rows_in = 10000 };
	run_req(net, 1, &rv, EMDB_OK);
	cluster_req dr = { .op = CLUSTER_TABLE_DROP, .table = tb };
	run_req(net, 2, &dr, EMDB_OK);
	for (uint32_t r = 0; r < 3; r++)
		cr_assert_eq(emdb_table_find(memnet_db(net, r), "b", &id), EMDB_ERR_NO_TABLE, "node %u kept 'b'", r);
	cluster_req dr2 = { .op = CLUSTER_TABLE_DROP, .table = tb };
	run_req(net, 0, &dr2, EMDB_ERR_NO_TABLE);
	memnet_close(net);
}

/* ---- synchronous steps across nodes ---------------------------------------- */

typedef struct worker {
	memnet *net;
	uint32_t home, table;
	uint64_t key;
	int rc;
	uint64_t rows;
	char msg[256];
} worker;

static void *worker_step(void *arg)
{
	worker *w = arg;
	cluster_req r = { .op = CLUSTER_STEP, .table = w->table, .workers = 3, .worker = w->key, .timeout_ms = 20000 };
	w->rc = cluster_run(memnet_cl(w->net, w->home), &r);
	w->rows = r.rows;
	snprintf(w->msg, sizeof(w->msg), "%s", r.msg);
	return NULL;
}

Test(cluster_route, a_step_of_workers_on_three_nodes_applies_once)
{
	memnet *net = memnet_open(3, 0);
	cr_assert_not_null(net);
	emdb_table_config cfg = table_cfg("s", EMDB_OPT_SGD);
	uint32_t t = cl_create(net, 0, &cfg);
	static float g[16 * DIM];
	for (size_t i = 0; i < 16 * DIM; i++)
		g[i] = 1.0f;
	uint64_t ids[3][16];
	for (uint32_t w = 0; w < 3; w++) {
		for (uint64_t i = 0; i < 16; i++)
			ids[w][i] = w * 1000 + i;
		cluster_req p = { .op = CLUSTER_PUSH, .table = t, .dim = DIM, .ids = ids[w], .n = 16, .grads = g };
		run_req(net, w, &p, EMDB_OK);
	}
	worker ws[4] = {
		{ net, 1, t, 11, 0, 0, "" }, { net, 1, t, 11, 0, 0, "" }, /* node 1's worker arrives twice */
		{ net, 2, t, 12, 0, 0, "" }, { net, 0, t, 10, 0, 0, "" },
	};
	pthread_t th[4];
	emdb_table_info info;
	for (int k = 0; k < 3; k++) {
		/* Arrive, and wait until the coordinator has counted it. */
		uint64_t sent = memnet_calls(net, ws[k].home, 0);
		cr_assert_eq(pthread_create(&th[k], NULL, worker_step, &ws[k]), 0);
		while (ws[k].home != 0 && memnet_calls(net, ws[k].home, 0) == sent)
			sched_yield();
		memnet_quiesce(net);
		if (k == 1) { /* the resend replaced the first arrival */
			pthread_join(th[0], NULL);
			cr_assert_eq(ws[0].rc, EMDB_ERR_BUSY, "the superseded arrival: %d %s", ws[0].rc, ws[0].msg);
		}
		for (uint32_t r = 0; r < 3; r++) {
			cr_assert_eq(emdb_table_describe(memnet_db(net, r), t, &info), 0);
			cr_assert_eq(info.stats.step, 0, "node %u applied the step before its third worker", r);
		}
	}
	cr_assert_eq(pthread_create(&th[3], NULL, worker_step, &ws[3]), 0);
	for (int k = 1; k < 4; k++) {
		pthread_join(th[k], NULL);
		cr_assert_eq(ws[k].rc, EMDB_OK, "worker %d: %s", k, ws[k].msg);
		cr_assert_eq(ws[k].rows, 48, "worker %d heard %llu rows updated", k, (unsigned long long)ws[k].rows);
	}
	for (uint32_t r = 0; r < 3; r++) {
		cr_assert_eq(emdb_table_describe(memnet_db(net, r), t, &info), 0);
		cr_assert_eq(info.stats.step, 1, "node %u is at step %llu", r, (unsigned long long)info.stats.step);
	}
	/* The rows are one engine's after the three pushes and one Update. */
	emdb_db *ref;
	cr_assert_eq(emdb_db_open(NULL, &ref), 0);
	uint32_t rt;
	cr_assert_eq(emdb_table_create(ref, &cfg, &rt), 0);
	for (uint32_t w = 0; w < 3; w++)
		cr_assert_eq(emdb_push(ref, rt, ids[w], 16, DIM, g), 0);
	cr_assert_eq(emdb_update(ref, rt, NULL), 0);
	static float a[48 * DIM], b[48 * DIM];
	cr_assert_eq(emdb_lookup(ref, rt, &ids[0][0], 48, DIM, a, NULL), 0);
	cluster_req lk = { .op = CLUSTER_LOOKUP, .table = t, .dim = DIM, .ids = &ids[0][0], .n = 48, .out = b };
	run_req(net, 2, &lk, EMDB_OK);
	SAME(a, b, sizeof(a), "rows after the step");
	emdb_db_close(ref);
	memnet_close(net);
}

/* A worker that leaves (its connection closed) is answered CLOSED and no
 * longer counts: the step then needs another arrival. */
Test(cluster_route, a_worker_that_leaves_no_longer_counts)
{
	memnet *net = memnet_open(3, 0);
	cr_assert_not_null(net);
	emdb_table_config cfg = table_cfg("l", EMDB_OPT_SGD);
	uint32_t t = cl_create(net, 0, &cfg);
	worker ws[3] = {
		{ net, 1, t, 21, 0, 0, "" }, { net, 2, t, 22, 0, 0, "" }, { net, 0, t, 20, 0, 0, "" },
	};
	pthread_t th[3];
	emdb_table_info info;
	uint64_t sent = memnet_calls(net, 1, 0);
	cr_assert_eq(pthread_create(&th[0], NULL, worker_step, &ws[0]), 0);
	while (memnet_calls(net, 1, 0) == sent)
		sched_yield();
	memnet_quiesce(net);
	cluster_step_leave(memnet_cl(net, 1), 21);
	pthread_join(th[0], NULL);
	cr_assert_eq(ws[0].rc, EMDB_ERR_CLOSED, "the worker that left: %d %s", ws[0].rc, ws[0].msg);
	/* Two more arrive: with the first gone the step is still one short. */
	sent = memnet_calls(net, 2, 0);
	cr_assert_eq(pthread_create(&th[1], NULL, worker_step, &ws[1]), 0);
	while (memnet_calls(net, 2, 0) == sent)
		sched_yield();
	memnet_quiesce(net);
	cr_assert_eq(pthread_create(&th[2], NULL, worker_step, &ws[2]), 0);
	memnet_quiesce(net);
	for (uint32_t r = 0; r < 3; r++) {
		cr_assert_eq(emdb_table_describe(memnet_db(net, r), t, &info), 0);
		cr_assert_eq(info.stats.step, 0, "node %u applied a step of 2 arrivals out of 3", r);
	}
	/* The third completes it. */
	worker again = { net, 1, t, 21, 0, 0, "" };
	pthread_t th3;
	cr_assert_eq(pthread_create(&th3, NULL, worker_step, &again), 0);
	pthread_join(th3, NULL);
	pthread_join(th[1], NULL);
	pthread_join(th[2], NULL);
	cr_assert_eq(again.rc, EMDB_OK, "%s", again.msg);
	cr_assert_eq(ws[1].rc, EMDB_OK, "%s", ws[1].msg);
	cr_assert_eq(ws[2].rc, EMDB_OK, "%s", ws[2].msg);
	for (uint32_t r = 0; r < 3; r++) {
		cr_assert_eq(emdb_table_describe(memnet_db(net, r), t, &info), 0);
		cr_assert_eq(info.stats.step, 1, "node %u is at step %llu", r, (unsigned long long)info.stats.step);
	}
	memnet_close(net);
}

/* ---- numbered steps: a resend is never counted twice ----------------------- */

typedef struct ranked {
	memnet *net;
	uint32_t home, table, rank;
	uint64_t key, session, seq;
	int rc;
	uint64_t rows;
	char msg[256];
} ranked;

#define EMDB_FUTURE_PENDING_ 1 /* not yet ended (no emdb_err is positive) */

static void *ranked_step(void *arg)
{
	ranked *w = arg;
	cluster_req r = { .op = CLUSTER_STEP, .table = w->table, .workers = 2, .worker = w->key, .timeout_ms = 20000,
			  .seq = w->seq, .session = w->session, .rank = w->rank };
	int rc = cluster_run(memnet_cl(w->net, w->home), &r);
	w->rows = r.rows;
	snprintf(w->msg, sizeof(w->msg), "%s", r.msg);
	__atomic_store_n(&w->rc, rc, __ATOMIC_RELEASE);
	return NULL;
}

static uint64_t steps_on(memnet *net, uint32_t t, uint32_t node)
{
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(memnet_db(net, node), t, &info), 0);
	return info.stats.step;
}

/* Worker 0 (home node 1) arrives and waits at the coordinator; returns
 * once counted. */
static void arrive_and_wait_counted(memnet *net, ranked *w, pthread_t *th)
{
	uint64_t sent = memnet_calls(net, w->home, 0);
	cr_assert_eq(pthread_create(th, NULL, ranked_step, w), 0);
	while (memnet_calls(net, w->home, 0) == sent)
		sched_yield();
	memnet_quiesce(net);
}

/* w's arrival run to its end within 10 s: past that, the coordinator's
 * steps are expired (as its tick would), so a resend that was wrongly
 * counted ends with TIMEOUT instead of hanging the test. */
static void run_bounded(memnet *net, ranked *w)
{
	pthread_t th;
	w->rc = EMDB_FUTURE_PENDING_;
	cr_assert_eq(pthread_create(&th, NULL, ranked_step, w), 0);
	for (int i = 0; i < 1000 && __atomic_load_n(&w->rc, __ATOMIC_ACQUIRE) == EMDB_FUTURE_PENDING_; i++)
		usleep(10000);
	if (__atomic_load_n(&w->rc, __ATOMIC_ACQUIRE) == EMDB_FUTURE_PENDING_)
		cluster_tick(memnet_cl(net, 0), UINT64_MAX);
	pthread_join(th, NULL);
}

/* Worker 0's step 1 is applied while its call has (as far as it knows)
 * failed; it resends step 1 through another node and connection: answered
 * with the step's rows, applied nowhere again, and step 2 still waits for
 * both workers.  An older step than the last applied one is refused. */
Test(cluster_route, a_numbered_resend_after_its_step_applied_is_answered_not_counted)
{
	memnet *net = memnet_open(3, 0);
	cr_assert_not_null(net);
	emdb_table_config cfg = table_cfg("q", EMDB_OPT_SGD);
	uint32_t t = cl_create(net, 0, &cfg);
	static float g[16 * DIM];
	for (size_t i = 0; i < 16 * DIM; i++)
		g[i] = 0.5f;
	uint64_t ids[16];
	for (uint64_t i = 0; i < 16; i++)
		ids[i] = i * 7;
	cluster_req p = { .op = CLUSTER_PUSH, .table = t, .dim = DIM, .ids = ids, .n = 16, .grads = g };
	run_req(net, 1, &p, EMDB_OK);

	ranked a = { net, 1, t, 0, 41, 0xa11ce, 1, 0, 0, "" }, b = { net, 0, t, 1, 40, 0xb0b, 1, 0, 0, "" };
	pthread_t th;
	arrive_and_wait_counted(net, &a, &th);
	for (uint32_t r = 0; r < 3; r++)
		cr_assert_eq(steps_on(net, t, r), 0, "node %u applied the step before its second worker", r);
	run_bounded(net, &b);
	pthread_join(th, NULL);
	cr_assert_eq(b.rc, EMDB_OK, "%s", b.msg);
	cr_assert_eq(a.rc, EMDB_OK, "%s", a.msg);
	cr_assert_eq(a.rows, 16);
	cr_assert_eq(b.rows, 16);

	/* The resend, from node 2 on another connection. */
	ranked again = { net, 2, t, 0, 42, 0xa11ce, 1, 0, 0, "" };
	run_bounded(net, &again);
	cr_assert_eq(again.rc, EMDB_OK, "%s", again.msg);
	cr_assert_eq(again.rows, 16, "the resend heard %llu rows", (unsigned long long)again.rows);
	for (uint32_t r = 0; r < 3; r++)
		cr_assert_eq(steps_on(net, t, r), 1, "node %u applied the step again", r);

	/* Step 2: worker 0 alone does not complete it. */
	run_req(net, 1, &p, EMDB_OK);
	a.seq = 2;
	arrive_and_wait_counted(net, &a, &th);
	for (uint32_t r = 0; r < 3; r++)
		cr_assert_eq(steps_on(net, t, r), 1, "node %u applied step 2 with one worker (the resend counted)", r);
	b.seq = 2;
	run_bounded(net, &b);
	pthread_join(th, NULL);
	cr_assert_eq(b.rc, EMDB_OK, "%s", b.msg);
	cr_assert_eq(a.rc, EMDB_OK, "%s", a.msg);
	for (uint32_t r = 0; r < 3; r++)
		cr_assert_eq(steps_on(net, t, r), 2, "node %u", r);

	/* Step 1 is forgotten now: refused, through the wire and locally. */
	again.seq = 1;
	run_bounded(net, &again);
	cr_assert_eq(again.rc, EMDB_ERR_INVALID, "%d %s", again.rc, again.msg);
	cr_assert(strstr(again.msg, "from the past"), "%s", again.msg);
	again.home = 0;
	run_bounded(net, &again);
	cr_assert_eq(again.rc, EMDB_ERR_INVALID, "%d %s", again.rc, again.msg);
	for (uint32_t r = 0; r < 3; r++)
		cr_assert_eq(steps_on(net, t, r), 2, "node %u", r);
	memnet_close(net);
}
