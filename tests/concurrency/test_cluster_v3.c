/*
 * test_cluster_v3.c - the version-3 operations on a cluster (cluster/:
 * weighted pooled Pull and Push, TABLE_ALTER, TABLE_SCAN, TABLE_LOAD) and
 * its per-node statistics, on 2 and 3 nodes in one process
 * (tests/lib/cluster_mem.h), against one engine holding every row.
 *
 * What is checked, as a user of the cluster would check it:
 *   - weighted pooled Pull and Push, by IDs and by ticket, with repeated
 *     IDs across bags, give the outputs, rows and optimizer state of one
 *     engine bit for bit, and a weighted push sends each owner one
 *     message;
 *   - TABLE_ALTER from any node changes the table on every node, and a
 *     training run altered half-way stays bit-identical to one engine; a
 *     change one node refuses, or one a down node cannot take, applies
 *     nowhere;
 *   - a scan from any node with small pages returns every row of every
 *     node exactly once, with the rows and state one engine holds, even
 *     with Updates and inserts between pages; a cursor naming a node the
 *     cluster lacks is refused;
 *   - TABLE_LOAD splits rows by owner: read back from any node they are
 *     what one engine loaded (an ID given twice gets its last row), and
 *     each row lives on its owner only;
 *   - per-node statistics sum to one engine's rows; a down node is
 *     reported as unknown, not as 0.
 */
#ifdef EMDB_PLAIN_RUNNER /* under ThreadSanitizer */
#include "tests/lib/plain_runner.h"
#define cr_log_info(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr))
#else
#include <criterion/criterion.h>
#endif
#include <string.h>

#include <emdb/db.h>
#include <emdb/error.h>

#include "tests/lib/cluster_mem.h"

#include "tests/lib/cluster_req.h"

/* A cluster and one engine, each with the table cfg (created on the
 * cluster from node `home`), numbered alike. */
typedef struct twin {
	memnet *net;
	emdb_db *ref;
	uint32_t rt, ct;
} twin;

static twin twin_open(uint32_t nodes, const emdb_table_config *cfg, uint32_t home)
{
	twin t = { .net = memnet_open(nodes, 64) };
	cr_assert_not_null(t.net);
	cr_assert_eq(emdb_db_open(NULL, &t.ref), 0);
	cr_assert_eq(emdb_table_create(t.ref, cfg, &t.rt), 0);
	t.ct = cl_create(t.net, home, cfg);
	cr_assert_eq(t.ct, t.rt, "the cluster numbers the table %u, one engine %u", t.ct, t.rt);
	return t;
}

static void twin_close(twin *t)
{
	emdb_db_close(t->ref);
	memnet_close(t->net);
}

/* ---- weighted pooled Pull and Push ---------------------------------- */

static void weighted_against_one(uint32_t nodes)
{
	emdb_table_config cfg = table_cfg("weighted", EMDB_OPT_ADAGRAD);
	twin tw = twin_open(nodes, &cfg, 0);
	memnet *net = tw.net;
	emdb_db *ref = tw.ref;
	uint32_t rt = tw.rt, ct = tw.ct;

	enum { N = 120, BAGS = 30, STEPS = 5 };
	uint64_t seed = 7, ids[N], off[BAGS + 1], all[STEPS * N];
	static float w[N], a[N * DIM], b[N * DIM], g[BAGS * DIM];
	size_t n_all = 0;
	for (int step = 0; step < STEPS; step++) {
		uint32_t home = (uint32_t)(step + 1) % nodes;
		make_ids(ids, N, &seed);
		memcpy(all + n_all, ids, sizeof(ids));
		n_all += N;
		make_offsets(off, BAGS, N, &seed);
		make_grads(w, N, &seed);

		/* By IDs. */
		cr_assert_eq(emdb_pull_bags_weighted(ref, rt, ids, N, off, BAGS, EMDB_POOL_SUM, w, DIM, a), 0);
		cluster_req pl = { .op = CLUSTER_PULL, .table = ct, .dim = DIM, .ids = ids, .n = N, .offsets = off,
				   .n_bags = BAGS, .pool = EMDB_POOL_SUM, .weights = w, .out = b };
		run_req(net, home, &pl, EMDB_OK);
		SAME(a, b, BAGS * DIM * 4, "weighted pooled pull by IDs");
		make_grads(g, BAGS * DIM, &seed);
		cr_assert_eq(emdb_push_bags_weighted(ref, rt, ids, N, off, BAGS, EMDB_POOL_SUM, w, DIM, g), 0);
		cluster_req ps = { .op = CLUSTER_PUSH, .table = ct, .dim = DIM, .ids = ids, .n = N, .offsets = off,
				   .n_bags = BAGS, .pool = EMDB_POOL_SUM, .weights = w, .grads = g };
		run_req(net, home, &ps, EMDB_OK);

		/* By ticket, with other weights. */
		emdb_ticket *rtk;
		cr_assert_eq(emdb_prefetch(ref, rt, ids, N, &rtk), 0);
		cluster_req pf = { .op = CLUSTER_PREFETCH, .table = ct, .ids = ids, .n = N };
		run_req(net, home, &pf, EMDB_OK);
		make_grads(w, N, &seed);
		cr_assert_eq(emdb_pull_bags_weighted_ticket(ref, rt, rtk, off, BAGS, EMDB_POOL_SUM, w, DIM, a), 0);
		cluster_req pt = { .op = CLUSTER_PULL, .table = ct, .dim = DIM, .ticket = pf.ticket_out, .offsets = off,
				   .n_bags = BAGS, .pool = EMDB_POOL_SUM, .weights = w, .out = b };
		run_req(net, home, &pt, EMDB_OK);
		SAME(a, b, BAGS * DIM * 4, "weighted pooled pull by ticket");
		make_grads(g, BAGS * DIM, &seed);
		cr_assert_eq(emdb_push_bags_weighted_ticket(ref, rt, rtk, off, BAGS, EMDB_POOL_SUM, w, DIM, g), 0);
		uint64_t before[MEMNET_MAX];
		for (uint32_t r = 0; r < nodes; r++)
			before[r] = memnet_calls(net, home, r);
		cluster_req pu = { .op = CLUSTER_PUSH, .table = ct, .dim = DIM, .ticket = pf.ticket_out, .offsets = off,
				   .n_bags = BAGS, .pool = EMDB_POOL_SUM, .weights = w, .grads = g };
		run_req(net, home, &pu, EMDB_OK);
		for (uint32_t r = 0; r < nodes; r++)
			cr_assert_leq(memnet_calls(net, home, r) - before[r], 1, "a weighted push sent node %u %llu messages",
				      r, (unsigned long long)(memnet_calls(net, home, r) - before[r]));
		emdb_ticket_free(rtk);
		cluster_ticket_free(memnet_cl(net, home), pf.ticket_out);

		/* MEAN with weights is refused on its face, as on one node. */
		cluster_req bad = pl;
		bad.pool = EMDB_POOL_MEAN;
		run_req(net, home, &bad, EMDB_ERR_INVALID);
		cr_assert_eq(emdb_pull_bags_weighted(ref, rt, ids, N, off, BAGS, EMDB_POOL_MEAN, w, DIM, a),
			     EMDB_ERR_INVALID);

		uint64_t rows_ref;
		cr_assert_eq(emdb_update(ref, rt, &rows_ref), 0);
		cluster_req u = { .op = CLUSTER_UPDATE, .table = ct };
		run_req(net, home, &u, EMDB_OK);
		cr_assert_eq(u.rows, rows_ref);
	}
	same_rows(net, nodes, ref, rt, ct, all, n_all, emdb_optimizer_state_floats(EMDB_OPT_ADAGRAD, DIM));
	twin_close(&tw);
}

Test(cluster_v3, weighted_pull_push_two_nodes_is_one_engine)
{
	weighted_against_one(2);
}

Test(cluster_v3, weighted_pull_push_three_nodes_is_one_engine)
{
	weighted_against_one(3);
}

/* ---- TABLE_ALTER ------------------------------------------------------ */

static double lr_on(memnet *net, uint32_t r, uint32_t table)
{
	emdb_table_config c;
	cr_assert_eq(emdb_table_get_config(memnet_db(net, r), table, &c), 0);
	return c.optimizer.lr;
}

Test(cluster_v3, alter_applies_on_every_node_or_none)
{
	const uint32_t nodes = 3;
	emdb_table_config cfg = table_cfg("sched", EMDB_OPT_ADAM);
	twin tw = twin_open(nodes, &cfg, 1);
	memnet *net = tw.net;
	emdb_db *ref = tw.ref;
	uint32_t rt = tw.rt, ct = tw.ct;

	enum { N = 64, STEPS = 6 };
	uint64_t seed = 3, ids[N], all[N * STEPS];
	static float g[N * DIM];
	for (int step = 0; step < STEPS; step++) {
		uint32_t home = (uint32_t)step % nodes;
		if (step == 3) { /* a learning-rate schedule, from a node that is not the coordinator */
			emdb_optimizer o = cfg.optimizer;
			o.lr = 0.0125;
			o.beta1 = 0.8;
			cr_assert_eq(emdb_table_alter(ref, rt, &o), 0);
			cluster_req al = { .op = CLUSTER_TABLE_ALTER, .table = ct, .opt = &o };
			run_req(net, 2, &al, EMDB_OK);
			for (uint32_t r = 0; r < nodes; r++)
				cr_assert_eq(lr_on(net, r, ct), 0.0125, "node %u has lr %g", r, lr_on(net, r, ct));
		}
		make_ids(ids, N, &seed);
		memcpy(all + step * N, ids, sizeof(ids));
		make_grads(g, N * DIM, &seed);
		uint64_t rows_ref;
		cr_assert_eq(emdb_push_update(ref, rt, ids, N, DIM, g, &rows_ref), 0);
		cluster_req pu = { .op = CLUSTER_PUSH_UPDATE, .table = ct, .dim = DIM, .ids = ids, .n = N, .grads = g };
		run_req(net, home, &pu, EMDB_OK);
		cr_assert_eq(pu.rows, rows_ref);
	}
	same_rows(net, nodes, ref, rt, ct, all, N * STEPS, emdb_optimizer_state_floats(EMDB_OPT_ADAM, DIM));

	/* Refused on every node (another kind): nothing changes anywhere. */
	emdb_optimizer bad = cfg.optimizer;
	bad.kind = EMDB_OPT_SGD;
	cluster_req r1 = { .op = CLUSTER_TABLE_ALTER, .table = ct, .opt = &bad };
	run_req(net, 1, &r1, EMDB_ERR_INVALID);
	cr_assert(strstr(r1.msg, "alter"), "%s", r1.msg);
	/* A bad value, and an unknown table. */
	emdb_optimizer neg = cfg.optimizer;
	neg.lr = -1;
	cluster_req r2 = { .op = CLUSTER_TABLE_ALTER, .table = ct, .opt = &neg };
	run_req(net, 0, &r2, EMDB_ERR_INVALID);
	cluster_req r3 = { .op = CLUSTER_TABLE_ALTER, .table = ct + 40, .opt = &cfg.optimizer };
	run_req(net, 2, &r3, EMDB_ERR_NO_TABLE);
	/* A node that is down cannot take it: applied nowhere. */
	memnet_set_down(net, 2, true);
	emdb_optimizer o2 = cfg.optimizer;
	o2.lr = 0.5;
	cluster_req r4 = { .op = CLUSTER_TABLE_ALTER, .table = ct, .opt = &o2 };
	run_req(net, 1, &r4, EMDB_ERR_NODE);
	cr_assert(strstr(r4.msg, "node 2"), "the refusal names the node: %s", r4.msg);
	memnet_set_down(net, 2, false);
	for (uint32_t r = 0; r < nodes; r++)
		cr_assert_eq(lr_on(net, r, ct), 0.0125, "node %u has lr %g after refusals", r, lr_on(net, r, ct));
	twin_close(&tw);
}

/* ---- TABLE_SCAN -------------------------------------------------------- */

typedef struct scanned {
	uint64_t *ids;
	float *vecs, *state;
	size_t n, pages;
} scanned;

/* A whole scan from home in pages of `page` rows; between pages, every
 * `mutate` pages, an Update and an insert of fresh IDs through the
 * cluster (mutate 0: none). */
static scanned scan_all(memnet *net, uint32_t home, uint32_t ct, uint32_t sf, uint32_t page, size_t cap,
			int mutate)
{
	scanned s = { malloc(cap * 8), malloc(cap * DIM * 4), malloc(cap * sf * 4 + 4), 0, 0 };
	cr_assert(s.ids && s.vecs && s.state);
	uint64_t cursor = 0, fresh = 1ull << 40;
	do {
		cr_assert_leq(s.n + page, cap, "the scan returned more rows than the table holds");
		cluster_req r = { .op = CLUSTER_SCAN, .table = ct, .dim = DIM, .cursor = cursor, .max_rows = page,
				  .ids_out = s.ids + s.n, .out = s.vecs + s.n * DIM, .state = s.state + s.n * sf };
		run_req(net, home, &r, EMDB_OK);
		cr_assert_leq(r.rows, page);
		s.n += r.rows;
		s.pages++;
		cursor = r.next_cursor;
		cr_assert_lt(s.pages, 100000, "the scan does not end");
		if (mutate && s.pages % mutate == 0) {
			cluster_req u = { .op = CLUSTER_UPDATE, .table = ct };
			run_req(net, (home + 1) % net->nodes, &u, EMDB_OK);
			uint64_t ins[4] = { fresh, fresh + 1, fresh + 2, fresh + 3 };
			fresh += 4;
			float v[4 * DIM];
			cluster_req p = { .op = CLUSTER_PULL, .table = ct, .dim = DIM, .ids = ins, .n = 4, .out = v };
			run_req(net, home, &p, EMDB_OK);
		}
	} while (cursor);
	return s;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

Test(cluster_v3, scan_returns_every_row_of_every_node_once)
{
	const uint32_t nodes = 3;
	emdb_table_config cfg = table_cfg("scan", EMDB_OPT_ADAGRAD);
	twin tw = twin_open(nodes, &cfg, 0);
	memnet *net = tw.net;
	emdb_db *ref = tw.ref;
	uint32_t rt = tw.rt, ct = tw.ct;
	uint32_t sf = emdb_optimizer_state_floats(EMDB_OPT_ADAGRAD, DIM);

	enum { N = 200 };
	uint64_t ids[N];
	static float g[N * DIM];
	for (size_t i = 0; i < N; i++)
		ids[i] = i * 0x9E3779B97F4A7C15ull + (i == 7 ? 0 : 1); /* spread over the partitions */
	ids[5] = 0, ids[9] = UINT64_MAX;
	uint64_t seed = 11;
	make_grads(g, N * DIM, &seed);
	uint64_t rows;
	cr_assert_eq(emdb_push_update(ref, rt, ids, N, DIM, g, &rows), 0);
	cluster_req pu = { .op = CLUSTER_PUSH_UPDATE, .table = ct, .dim = DIM, .ids = ids, .n = N, .grads = g };
	run_req(net, 1, &pu, EMDB_OK);

	/* Quiet: the scan is the table, row for row and state for state. */
	scanned s = scan_all(net, 2, ct, sf, 7, N + 8, 0);
	cr_assert_eq(s.n, N, "the scan returned %zu rows of %d", s.n, N);
	float *a = malloc(N * DIM * 4), *sa = malloc(N * sf * 4);
	cr_assert(a && sa);
	cr_assert_eq(emdb_lookup(ref, rt, s.ids, s.n, DIM, a, NULL), 0);
	cr_assert_eq(emdb_read_state(ref, rt, s.ids, s.n, sa, NULL), 0);
	SAME(a, s.vecs, s.n * DIM * 4, "scanned rows");
	SAME(sa, s.state, s.n * sf * 4, "scanned state");
	uint64_t sorted[N], want[N];
	memcpy(sorted, s.ids, sizeof(sorted));
	memcpy(want, ids, sizeof(want));
	qsort(sorted, N, 8, cmp_u64);
	qsort(want, N, 8, cmp_u64);
	cr_assert(memcmp(sorted, want, sizeof(want)) == 0, "the scan's IDs are not the table's");
	free(s.ids), free(s.vecs), free(s.state);

	/* Updates and inserts between pages: every row that was there at the
	 * start comes back exactly once. */
	s = scan_all(net, 0, ct, sf, 5, N + 4 * 1000, 3);
	qsort(s.ids, s.n, 8, cmp_u64);
	for (size_t i = 1; i < s.n; i++)
		cr_assert_neq(s.ids[i], s.ids[i - 1], "ID %llu returned twice", (unsigned long long)s.ids[i]);
	for (size_t i = 0; i < N; i++)
		cr_assert_not_null(bsearch(&want[i], s.ids, s.n, 8, cmp_u64), "ID %llu missing",
				   (unsigned long long)want[i]);
	free(s.ids), free(s.vecs), free(s.state);

	/* A cursor naming node 5 of 3, a bad dim, a page of 0: refused. */
	uint64_t i1[4];
	float v1[4 * DIM];
	cluster_req bad = { .op = CLUSTER_SCAN, .table = ct, .dim = DIM, .cursor = 5ull << CLUSTER_SCAN_NODE_SHIFT,
			    .max_rows = 4, .ids_out = i1, .out = v1 };
	run_req(net, 1, &bad, EMDB_ERR_INVALID);
	bad.cursor = 0, bad.dim = DIM + 1;
	run_req(net, 1, &bad, EMDB_ERR_DIM);
	bad.dim = DIM, bad.max_rows = 0;
	run_req(net, 1, &bad, EMDB_ERR_BATCH);
	/* A down node's page fails with NODE, naming it. */
	memnet_set_down(net, 1, true);
	cluster_req down = { .op = CLUSTER_SCAN, .table = ct, .dim = DIM, .cursor = 1ull << CLUSTER_SCAN_NODE_SHIFT,
			     .max_rows = 4, .ids_out = i1, .out = v1 };
	run_req(net, 0, &down, EMDB_ERR_NODE);
	cr_assert(strstr(down.msg, "node 1"), "%s", down.msg);
	memnet_set_down(net, 1, false);
	free(a), free(sa);
	twin_close(&tw);
}

/* ---- TABLE_LOAD and per-node statistics ------------------------------- */

Test(cluster_v3, load_splits_rows_by_owner_and_reads_back)
{
	const uint32_t nodes = 3;
	emdb_table_config cfg = table_cfg("load", EMDB_OPT_ADAGRAD);
	twin tw = twin_open(nodes, &cfg, 2);
	memnet *net = tw.net;
	emdb_db *ref = tw.ref;
	uint32_t rt = tw.rt, ct = tw.ct;
	uint32_t sf = emdb_optimizer_state_floats(EMDB_OPT_ADAGRAD, DIM);

	enum { N = 150 };
	uint64_t seed = 5, ids[N];
	static float v[N * DIM], st[N * DIM];
	make_ids(ids, N, &seed); /* repeated IDs: the last row wins */
	make_grads(v, N * DIM, &seed);
	make_grads(st, N * sf, &seed);
	for (size_t i = 0; i < N * sf; i++)
		st[i] = st[i] < 0 ? -st[i] : st[i];
	cr_assert_eq(emdb_table_load(ref, rt, ids, N, DIM, v, st), 0);
	cluster_req ld = { .op = CLUSTER_LOAD, .table = ct, .dim = DIM, .ids = ids, .n = N, .vecs = v, .state = st };
	run_req(net, 1, &ld, EMDB_OK);
	/* Without state: new rows get the initial state, held rows keep theirs. */
	uint64_t more[N];
	for (size_t i = 0; i < N; i++)
		more[i] = i % 2 ? ids[i] : ids[i] + 1000003;
	make_grads(v, N * DIM, &seed);
	cr_assert_eq(emdb_table_load(ref, rt, more, N, DIM, v, NULL), 0);
	cluster_req l2 = { .op = CLUSTER_LOAD, .table = ct, .dim = DIM, .ids = more, .n = N, .vecs = v };
	run_req(net, 0, &l2, EMDB_OK);
	same_rows(net, nodes, ref, rt, ct, ids, N, sf);
	same_rows(net, nodes, ref, rt, ct, more, N, sf);

	/* Refused on its face, nothing written: a bad dim, no rows. */
	cluster_req bad = l2;
	bad.dim = DIM + 1;
	run_req(net, 2, &bad, EMDB_ERR_DIM);
	bad.dim = DIM, bad.n = 0;
	run_req(net, 2, &bad, EMDB_ERR_BATCH);

	/* Each row on its owner only: the nodes' rows sum to one engine's,
	 * and the statistics say so per node, from any node. */
	emdb_table_info ri;
	cr_assert_eq(emdb_table_describe(ref, rt, &ri), 0);
	for (uint32_t home = 0; home < nodes; home++) {
		cluster_node_stats per[MEMNET_MAX];
		cluster_req sr = { .op = CLUSTER_TABLE_STATS, .table = ct, .per_node = per };
		run_req(net, home, &sr, EMDB_OK);
		uint64_t sum = 0;
		for (uint32_t r = 0; r < nodes; r++) {
			emdb_table_info ci;
			cr_assert_eq(per[r].status, EMDB_OK);
			cr_assert_eq(emdb_table_describe(memnet_db(net, r), ct, &ci), 0);
			cr_assert_eq(per[r].stats.rows, ci.stats.rows, "node %u's rows", r);
			cr_assert_gt(per[r].stats.rows, 0, "node %u holds no row", r);
			cr_assert_gt(per[r].alloc_bytes, 0);
			sum += per[r].stats.rows;
		}
		cr_assert_eq(sum, ri.stats.rows, "the nodes hold %llu rows, one engine %llu", (unsigned long long)sum,
			     (unsigned long long)ri.stats.rows);
	}
	/* Totals over every table (table 0), and a down node: unknown. */
	memnet_set_down(net, 1, true);
	cluster_node_stats per[MEMNET_MAX];
	cluster_req sr = { .op = CLUSTER_TABLE_STATS, .table = 0, .per_node = per };
	run_req(net, 0, &sr, EMDB_OK);
	cr_assert_eq(per[0].status, EMDB_OK);
	cr_assert_eq(per[1].status, EMDB_ERR_NODE, "a down node's statistics: %d", per[1].status);
	cr_assert_eq(per[2].status, EMDB_OK);
	cr_assert_gt(per[2].stats.rows, 0);
	memnet_set_down(net, 1, false);
	cluster_req nt = { .op = CLUSTER_TABLE_STATS, .table = ct + 9, .per_node = per };
	run_req(net, 0, &nt, EMDB_ERR_NO_TABLE);
	twin_close(&tw);
}
