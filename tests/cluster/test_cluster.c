/*
 * test_cluster.c - clusters of emdb-server processes on loopback
 * (tests/lib/cluster_harness.h), as an operator sees them: three nodes
 * form and INFO cluster shows every peer up on every node; a node with
 * another secret stops every start with an error naming it; a node that
 * never comes stops the start after cluster_start_timeout_ms, naming it;
 * a node killed with SIGKILL shows down on the others within the node
 * timeout while they keep answering, and rejoins when restarted; a
 * node's /metrics carries each peer's state and traffic; the version-3
 * operations (weighted Pull and Push, table alter, export and import)
 * work across three nodes, and INFO, DESCRIBE and cluster info give the
 * cluster's rows per node and in total (unknown with a node down); a
 * linktest moves rounds x its sizes through the link (the nodes' own
 * counters agree), refuses bad requests and other roles with nothing
 * sent, and names a node killed under it.
 *
 * Each test bounds every wait (seconds); the fixture kills every node.
 */
#define _GNU_SOURCE /* tests/lib/cli_run.h */
#include <criterion/criterion.h>
#include <pthread.h>

#include <emdb/db.h>

#include "tests/lib/cli_run.h"
#include "tests/lib/cluster_harness.h"
#include "tests/lib/http_scrape.h"

#define READY_MS 20000

static void fini(void)
{
	ch_stop_all();
}

static const char *const fast[] = { "--node-timeout-ms", "1000", "--cluster-start-timeout-ms", "15000", NULL };

static void start_all(int n)
{
	ch_init(n);
	for (int i = 0; i < n; i++)
		ch_spawn(i, NULL, fast);
	for (int i = 0; i < n; i++)
		ch_wait_ready(i, READY_MS);
}

Test(cluster, three_nodes_form_and_show_every_peer, .fini = fini, .timeout = 120)
{
	start_all(3);
	for (int i = 0; i < 3; i++) {
		char *t = ch_info(i);
		char want[128];
		cr_assert(strstr(t, "enabled: yes\n") && strstr(t, "nodes: 3\n") && strstr(t, "state: ready\n"), "%s", t);
		snprintf(want, sizeof(want), "rank: %d\n", i);
		cr_assert(strstr(t, want), "%s", t);
		cr_assert(strstr(t, "partitions: 1024\n") && strstr(t, "epoch: 1\n"), "%s", t);
		for (int r = 0; r < 3; r++) {
			snprintf(want, sizeof(want), "node_%d: addr=127.0.0.1:%u state=%s", r, ch.node[r].node_port,
				 r == i ? "self" : "up");
			cr_assert(strstr(t, want), "node %d lacks '%s':\n%s", i, want, t);
		}
		cr_assert(strstr(ch_log(i), "ready: 3 nodes agree"), "%s", ch_log(i));
		emdb_free(t);
	}
	/* INFO with every section carries it too. */
	emdb_client *c = ch_client(0);
	char *all = NULL;
	cr_assert_eq(emdb_client_info(c, NULL, &all), EMDB_OK);
	cr_assert(strstr(all, "# Cluster\nenabled: yes\n"), "%s", all);
	emdb_free(all);
	emdb_client_close(c);

	/* emdb-cli cluster info, as a table and as JSON. */
	char uri[200];
	snprintf(uri, sizeof(uri), "unix://%s", ch.node[1].sock);
	cli_run r = run_cli_env(NULL, NULL, ARGS("-u", uri, "cluster", "info"));
	EXPECT(r, 0);
	expect_has(r.out, "rank 1 of 3, ready, 1024 partitions, epoch 1");
	char row[128];
	snprintf(row, sizeof(row), "127.0.0.1:%u", ch.node[2].node_port);
	expect_has(r.out, row);
	expect_has(r.out, " up ");
	run_free(&r);
	r = run_cli_env(NULL, NULL, ARGS("-u", uri, "--json", "cluster", "info"));
	EXPECT(r, 0);
	jv *j = json_out(&r);
	cr_assert(jbool(j, "cluster.enabled"));
	cr_assert_eq(jnum(j, "cluster.rank"), 1);
	cr_assert_str_eq(jstr(j, "cluster.state"), "ready");
	cr_assert_str_eq(jstr(j, "cluster.nodes.1.state"), "self");
	cr_assert_str_eq(jstr(j, "cluster.nodes.0.state"), "up");
	cr_assert_str_eq(jstr(j, "cluster.nodes.2.state"), "up");
	cr_assert_gt(jnum(j, "cluster.nodes.0.bytes_sent"), 0, "the handshake's bytes count");
	run_free(&r);
}

/* A node's Prometheus endpoint shows each peer: up, with the link's
 * traffic, then down once it is killed. */
Test(cluster, metrics_show_each_peer, .fini = fini, .timeout = 120)
{
	ch_init(2);
	unsigned mport = ch_free_port();
	char mport_s[16];
	snprintf(mport_s, sizeof(mport_s), "%u", mport);
	const char *const with_metrics[] = { "--node-timeout-ms", "1000", "--cluster-start-timeout-ms", "15000",
					     "--metrics-port", mport_s, NULL };
	ch_spawn(0, NULL, with_metrics);
	ch_spawn(1, NULL, fast);
	ch_wait_ready(0, READY_MS);
	ch_wait_ready(1, READY_MS);

	char up[160], sent[160], recv_[160];
	snprintf(up, sizeof(up), "emdb_peer_up{peer=\"1\",address=\"127.0.0.1:%u\"}", ch.node[1].node_port);
	snprintf(sent, sizeof(sent), "emdb_peer_sent_bytes_total{peer=\"1\",address=\"127.0.0.1:%u\"}",
		 ch.node[1].node_port);
	snprintf(recv_, sizeof(recv_), "emdb_peer_received_bytes_total{peer=\"1\",address=\"127.0.0.1:%u\"}",
		 ch.node[1].node_port);
	http_resp r = scrape((uint16_t)mport);
	EXPECT_SAMPLE(r.body, up, 1);
	cr_assert_gt(value_of(r.body, sent), 0, "%s", r.body);
	cr_assert_gt(value_of(r.body, recv_), 0, "%s", r.body);
	cr_assert(!strstr(r.body, "peer=\"0\""), "a node is not its own peer:\n%s", r.body);
	http_free(&r);

	ch_kill(1);
	double v = 1;
	for (uint64_t end = ch_now_ms() + 15000; v != 0 && ch_now_ms() < end;) {
		usleep(100 * 1000);
		r = scrape((uint16_t)mport);
		v = value_of(r.body, up);
		http_free(&r);
	}
	cr_assert_eq(v, 0, "peer 1 still up in /metrics 15 s after SIGKILL");
}

/* INFO's cluster section on every node: rows= of each node, summed. */
static uint64_t info_rows_sum(int i, int nodes)
{
	char *t = ch_info(i);
	uint64_t sum = 0;
	for (int r = 0; r < nodes; r++) {
		char key[32];
		snprintf(key, sizeof(key), "node_%d: ", r);
		const char *line = strstr(t, key);
		cr_assert_not_null(line, "%s", t);
		const char *rows = strstr(line, " rows=");
		cr_assert(rows && rows < strchr(line, '\n'), "node %d's line has no rows: %s", r, t);
		cr_assert(strncmp(rows + 6, "unknown", 7) != 0, "node %d's rows unknown on a healthy cluster:\n%s", r, t);
		sum += strtoull(rows + 6, NULL, 10);
	}
	emdb_free(t);
	return sum;
}

/* The version-3 operations on a 3-node cluster, through the client and
 * emdb-cli, as on one node: weighted pooled Pull, table alter seen from
 * every node, export of every node's rows and import into another table
 * (rows at their owners), and the cluster's rows in INFO, DESCRIBE and
 * cluster info. */
Test(cluster, v3_operations_work_across_three_nodes, .fini = fini, .timeout = 180)
{
	start_all(3);
	emdb_client *c = ch_client(1);
	emdb_table_config tc = EMDB_TABLE_CONFIG_INIT;
	strcpy(tc.name, "t");
	tc.dim = 4;
	tc.optimizer.kind = EMDB_OPT_ADAGRAD;
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_ADAGRAD, &tc.optimizer), EMDB_OK);
	uint32_t id;
	cr_assert_eq(emdb_client_table_create(c, &tc, &id), EMDB_OK, "%s", emdb_client_last_error());

	/* Rows on every node, and a weighted pooled Pull equal to the weighted
	 * sum of the rows pulled one by one. */
	enum { N = 600 };
	static uint64_t ids[N];
	static float rows[N * 4], grads[N * 4];
	for (size_t i = 0; i < N; i++)
		ids[i] = i * 7919 + 3;
	cr_assert_eq(emdb_client_pull(c, id, ids, N, 4, rows), EMDB_OK, "%s", emdb_client_last_error());
	for (size_t i = 0; i < N * 4; i++)
		grads[i] = (float)(i % 13) / 13.0f - 0.5f;
	cr_assert_eq(emdb_client_push(c, id, ids, N, 4, grads), EMDB_OK);
	uint64_t updated = 0;
	cr_assert_eq(emdb_client_update(c, id, &updated), EMDB_OK);
	cr_assert_eq(updated, N);
	cr_assert_eq(emdb_client_pull(c, id, ids, N, 4, rows), EMDB_OK);
	const uint64_t offs[3] = { 0, 2, 3 };
	const float w[3] = { 0.5f, -2.0f, 3.0f };
	float out[8];
	cr_assert_eq(emdb_client_pull_bags_weighted(c, id, ids, 3, offs, 2, EMDB_POOL_SUM, w, 4, out), EMDB_OK, "%s",
		     emdb_client_last_error());
	for (int k = 0; k < 4; k++) {
		float b0 = 0.0f, b1 = 0.0f;
		b0 += w[0] * rows[k];
		b0 += w[1] * rows[4 + k];
		b1 += w[2] * rows[8 + k];
		cr_assert_eq(out[k], b0, "bag 0 column %d: %g, want %g", k, out[k], b0);
		cr_assert_eq(out[4 + k], b1);
	}
	const float g2[8] = { 1, 1, 1, 1, 2, 2, 2, 2 };
	cr_assert_eq(emdb_client_push_bags_weighted(c, id, ids, 3, offs, 2, EMDB_POOL_SUM, w, 4, g2), EMDB_OK, "%s",
		     emdb_client_last_error());

	/* The cluster's rows: INFO on every node, DESCRIBE and STATS. */
	for (int i = 0; i < 3; i++)
		cr_assert_eq(info_rows_sum(i, 3), N, "INFO on node %d", i);
	emdb_table_info info;
	cr_assert_eq(emdb_client_table_describe(c, id, &info), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_eq(info.stats.rows, N, "DESCRIBE says %llu rows", (unsigned long long)info.stats.rows);
	cr_assert_eq(info.stats.step, 1);

	/* table alter from node 2 through the CLI: every node has it. */
	char uri[3][200];
	for (int i = 0; i < 3; i++)
		snprintf(uri[i], sizeof(uri[i]), "unix://%s", ch.node[i].sock);
	cli_run r = run_cli_env(NULL, NULL, ARGS("-u", uri[2], "table", "alter", "t", "lr=0.125"));
	EXPECT(r, 0);
	run_free(&r);
	for (int i = 0; i < 3; i++) {
		emdb_client *ci = ch_client(i);
		emdb_table_info ti;
		cr_assert_eq(emdb_client_table_describe(ci, id, &ti), EMDB_OK);
		cr_assert_eq(ti.config.optimizer.lr, 0.125, "node %d has lr %g", i, ti.config.optimizer.lr);
		emdb_client_close(ci);
	}
	/* A refused alter (another kind) changes nothing anywhere. */
	emdb_optimizer bad = info.config.optimizer;
	bad.kind = EMDB_OPT_SGD;
	cr_assert_eq(emdb_client_table_alter(c, id, &bad), EMDB_ERR_INVALID);

	/* export from node 0 in small pages, import on node 1 into another
	 * table: the same rows and state, read through node 2. */
	char path[200];
	snprintf(path, sizeof(path), "%s/t.rows", ch.dir);
	r = run_cli_env(NULL, NULL, ARGS("-u", uri[0], "export", "t", path));
	EXPECT(r, 0);
	expect_has(r.out, "exported 600 rows");
	run_free(&r);
	strcpy(tc.name, "t2");
	uint32_t id2;
	cr_assert_eq(emdb_client_table_create(c, &tc, &id2), EMDB_OK);
	r = run_cli_env(NULL, NULL, ARGS("-u", uri[1], "import", "t2", path));
	EXPECT(r, 0);
	expect_has(r.out, "imported 600 rows");
	run_free(&r);
	unlink(path);
	emdb_client *c2 = ch_client(2);
	static float a[N * 4], b[N * 4];
	static uint8_t found[N];
	cr_assert_eq(emdb_client_lookup(c2, id, ids, N, 4, a, NULL), EMDB_OK);
	cr_assert_eq(emdb_client_lookup(c2, id2, ids, N, 4, b, found), EMDB_OK);
	cr_assert(memcmp(a, b, sizeof(a)) == 0, "the imported rows differ from the exported table's");
	for (size_t i = 0; i < N; i++)
		cr_assert_eq(found[i], 1, "ID %llu not imported", (unsigned long long)ids[i]);
	emdb_table_info info2;
	cr_assert_eq(emdb_client_table_describe(c2, id2, &info2), EMDB_OK);
	cr_assert_eq(info2.stats.rows, N);

	/* emdb-cli cluster info: each node's rows, summed. */
	r = run_cli_env(NULL, NULL, ARGS("-u", uri[0], "--json", "cluster", "info"));
	EXPECT(r, 0);
	jv *j = json_out(&r);
	double sum = 0;
	for (int i = 0; i < 3; i++) {
		char key[64];
		snprintf(key, sizeof(key), "cluster.nodes.%d.rows", i);
		cr_assert_gt(jnum(j, key), 0, "node %d holds no row", i);
		sum += jnum(j, key);
	}
	cr_assert_eq(sum, 2 * N, "the nodes' rows sum to %g", sum);
	cr_assert_eq(jnum(j, "cluster.cluster_rows"), 2 * N);
	run_free(&r);

	/* A node down: its rows are unknown, not 0, and the total with it. */
	ch_kill(2);
	cr_assert(ch_info_until(0, "rows=unknown", 15000), "node 2's rows not unknown after SIGKILL");
	char *t = ch_info(0);
	cr_assert(strstr(t, "cluster_rows: unknown\n"), "%s", t);
	emdb_free(t);
	cr_assert_eq(emdb_client_table_describe(c, id, &info), EMDB_ERR_NODE, "%s", emdb_client_last_error());
	cr_assert(strstr(emdb_client_last_error(), "node 2"), "%s", emdb_client_last_error());
	emdb_client_close(c2);
	emdb_client_close(c);
}

Test(cluster, wrong_secret_stops_the_start_naming_the_node, .fini = fini, .timeout = 120)
{
	ch_init(3);
	ch_spawn(0, NULL, fast);
	ch_spawn(1, NULL, fast);
	ch_spawn(2, ch.bad_secret, fast);
	for (int i = 0; i < 3; i++) {
		int st = ch_wait_exit(i, READY_MS);
		cr_assert(st != -1, "node %d still runs with a node of another secret:\n%s", i, ch_log(i));
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "node %d: status 0x%x\n%s", i, st, ch_log(i));
		cr_assert(strstr(ch_log(i), "secret"), "node %d's log does not say why:\n%s", i, ch_log(i));
	}
	/* Node 0 names the culprit, node 2 names whom it could not join. */
	cr_assert(strstr(ch_log(0), "node 2 (127.0.0.1:"), "%s", ch_log(0));
	cr_assert(strstr(ch_log(0), "refused node 2"), "%s", ch_log(0));
	cr_assert(strstr(ch_log(2), "cannot form cluster"), "%s", ch_log(2));
}

Test(cluster, unreachable_node_stops_the_start_after_the_timeout, .fini = fini, .timeout = 60)
{
	ch_init(2);
	static const char *const quick[] = { "--node-timeout-ms", "300", "--cluster-start-timeout-ms", "1500", NULL };
	ch_spawn(0, NULL, quick);
	int st = ch_wait_exit(0, 20000);
	cr_assert(st != -1, "node 0 waits for ever for a node that never comes");
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status 0x%x\n%s", st, ch_log(0));
	char want[64];
	snprintf(want, sizeof(want), "node 1 (127.0.0.1:%u) is not reachable", ch.node[1].node_port);
	cr_assert(strstr(ch_log(0), want), "%s", ch_log(0));
	cr_assert(strstr(ch_log(0), "cluster_start_timeout_ms"), "%s", ch_log(0));
	struct stat sb;
	cr_assert_neq(stat(ch.node[0].portfile, &sb), 0, "a node that never formed wrote its port file");
}

Test(cluster, killed_node_shows_down_and_rejoins, .fini = fini, .timeout = 120)
{
	start_all(3);
	ch_kill(2);
	char down[64], up2[64];
	snprintf(down, sizeof(down), "node_2: addr=127.0.0.1:%u state=down", ch.node[2].node_port);
	for (int i = 0; i < 2; i++) {
		cr_assert(ch_info_until(i, down, 10000), "node %d does not see node 2 down:\n%s", i, ch_log(i));
		char *t = ch_info(i);
		cr_assert(strstr(t, "state: degraded\n"), "%s", t);
		cr_assert(strstr(t, "node_2_last_error: connection lost"), "%s", t);
		emdb_free(t);
	}
	/* The others keep answering what does not need node 2; a table
	 * change needs every node, so it is refused, naming node 2. */
	emdb_client *c = ch_client(1);
	cr_assert_eq(emdb_client_ping(c), EMDB_OK);
	emdb_table_config tc = EMDB_TABLE_CONFIG_INIT;
	strcpy(tc.name, "t");
	tc.dim = 4;
	uint32_t id;
	cr_assert_eq(emdb_client_table_create(c, &tc, &id), EMDB_ERR_NODE, "%s", emdb_client_last_error());
	cr_assert(strstr(emdb_client_last_error(), "node 2"), "%s", emdb_client_last_error());
	emdb_client_close(c);

	/* Restarted, it forms with the others again. */
	ch_spawn(2, NULL, fast);
	ch_wait_ready(2, READY_MS);
	snprintf(up2, sizeof(up2), "node_2: addr=127.0.0.1:%u state=up", ch.node[2].node_port);
	for (int i = 0; i < 2; i++) {
		cr_assert(ch_info_until(i, up2, 10000), "node %d does not take node 2 back:\n%s", i, ch_log(i));
		cr_assert(ch_info_until(i, "state: ready\n", 10000));
		char *t = ch_info(i);
		cr_assert(strstr(t, "connects=2"), "%s", t);
		emdb_free(t);
	}
	char *t = ch_info(2);
	cr_assert(strstr(t, "state: ready\n"), "%s", t);
	emdb_free(t);
	/* With node 2 back, the table change applies on every node. */
	c = ch_client(1);
	cr_assert_eq(emdb_client_table_create(c, &tc, &id), EMDB_OK, "%s", emdb_client_last_error());
	emdb_client_close(c);
	c = ch_client(2);
	uint32_t id2;
	cr_assert_eq(emdb_client_table_find(c, "t", &id2), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_eq(id2, id);
	emdb_client_close(c);
}

/* ---- linktest ------------------------------------------------------------ */

static const char *const lt_args[] = { "--node-timeout-ms", "3000", "--cluster-start-timeout-ms", "15000",
				       "--admin-token", "adm", "--trainer-token", "trn", "--reader-token", "rdr",
				       NULL };

static emdb_client *lt_client(int i, const char *token)
{
	char uri[256];
	snprintf(uri, sizeof(uri), "unix://%s?token=%s", ch.node[i].sock, token);
	emdb_client *c = NULL;
	cr_assert_eq(emdb_client_connect(uri, NULL, &c), EMDB_OK, "connect to node %d: %s", i,
		     emdb_client_last_error());
	return c;
}

/* Node i's link counter `key` towards peer `peer` (INFO cluster). */
static uint64_t lt_counter(emdb_client *c, int peer, const char *key)
{
	char *t = NULL, head[32], k[40];
	cr_assert_eq(emdb_client_info(c, "cluster", &t), EMDB_OK, "%s", emdb_client_last_error());
	snprintf(head, sizeof(head), "\nnode_%d: ", peer);
	snprintf(k, sizeof(k), " %s=", key);
	const char *line = strstr(t, head);
	cr_assert_not_null(line, "%s", t);
	const char *end = strchr(line + 1, '\n');
	const char *at = strstr(line, k);
	cr_assert(at && (!end || at < end), "no %s for node %d:\n%s", key, peer, t);
	uint64_t v = strtoull(at + strlen(k), NULL, 10);
	emdb_free(t);
	return v;
}

static void lt_refused(emdb_client *c, const emdb_linktest_msg *m, size_t n, uint32_t depth, uint32_t ms,
		       const char *why)
{
	emdb_linktest_result res;
	int rc = emdb_client_linktest(c, m, n, depth, ms, &res);
	cr_assert_eq(rc, EMDB_ERR_INVALID, "%s: %d %s\n%s", why, rc, emdb_client_last_error(), ch_log(0));
	cr_assert(strstr(emdb_client_last_error(), why), "'%s' not in: %s", why, emdb_client_last_error());
}

/* A linktest of 1 s on a thread of its own, retried while BUSY. */
typedef struct lt_bg {
	emdb_client *c;
	const emdb_linktest_msg *m;
	emdb_linktest_result res;
	int rc;
	char msg[256];
} lt_bg;

static void *lt_run_bg(void *arg)
{
	lt_bg *b = arg;
	/* the main thread's short ones may hold the node's one slot */
	b->rc = EMDB_ERR_BUSY;
	for (int tries = 0; tries < 200 && b->rc == EMDB_ERR_BUSY; tries++)
		b->rc = emdb_client_linktest(b->c, b->m, 2, 2, 1000, &b->res);
	snprintf(b->msg, sizeof(b->msg), "%s", b->rc ? emdb_client_last_error() : "");
	return NULL;
}

Test(cluster, linktest_measures_the_link_and_refuses_what_it_cannot, .fini = fini, .timeout = 120)
{
	ch_init(3);
	for (int i = 0; i < 3; i++)
		ch_spawn(i, NULL, lt_args);
	for (int i = 0; i < 3; i++)
		ch_wait_ready(i, READY_MS);
	emdb_client *adm = lt_client(0, "adm");
	emdb_client *peer1 = lt_client(1, "adm");

	/* Sizes on the ECHO grid: frames of 4112 and 65552 bytes as the
	 * link counts them (its 16-byte header included). */
	emdb_linktest_msg m[65];
	for (int i = 0; i < 65; i++)
		m[i] = (emdb_linktest_msg){ .rank = 1 + i % 2, .request_bytes = 4112, .reply_bytes = 65552 };
	uint64_t sent0 = lt_counter(adm, 1, "bytes_sent"), recv0 = lt_counter(adm, 1, "bytes_received");
	uint64_t in0 = lt_counter(peer1, 0, "bytes_received");
	emdb_linktest_result res;
	cr_assert_eq(emdb_client_linktest(adm, m, 2, 4, 300, &res), EMDB_OK, "%s\n%s", emdb_client_last_error(), ch_log(0));
	cr_assert_gt(res.rounds, 0);
	cr_assert_gt(res.elapsed_ns, 0);
	cr_assert_eq(res.bytes_sent, res.rounds * 2 * 4112);
	cr_assert_eq(res.bytes_received, res.rounds * 2 * 65552);
	/* The link's own counters saw at least that much, on both ends
	 * (INFO itself adds its few messages). */
	cr_assert_geq(lt_counter(adm, 1, "bytes_sent") - sent0, res.rounds * 4112);
	cr_assert_geq(lt_counter(adm, 1, "bytes_received") - recv0, res.rounds * 65552);
	cr_assert_geq(lt_counter(peer1, 0, "bytes_received") - in0, res.rounds * 4112);

	/* A size below the smallest ECHO rounds up to it (56 and 48 bytes). */
	m[0].request_bytes = m[0].reply_bytes = 1;
	cr_assert_eq(emdb_client_linktest(adm, m, 1, 1, 50, &res), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_gt(res.rounds, 0);
	cr_assert_eq(res.bytes_sent, res.rounds * 56);
	cr_assert_eq(res.bytes_received, res.rounds * 48);
	m[0].request_bytes = 4112, m[0].reply_bytes = 65552;

	/* A reply larger than the owner keeps for the next echoes (16 MiB) is
	 * made per message, with the same count of bytes.  (node_timeout_ms
	 * is 3 s: a loaded sanitizer build took over 1 s for one of these.) */
	emdb_linktest_msg big = { .rank = 2, .request_bytes = 4112, .reply_bytes = (16u << 20) + 4096 + 16 };
	cr_assert_eq(emdb_client_linktest(adm, &big, 1, 1, 50, &res), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_gt(res.rounds, 0);
	cr_assert_eq(res.bytes_received, res.rounds * big.reply_bytes);

	/* Bad requests: INVALID with the reason, and not one message sent
	 * (the counters move by exactly what one INFO sends). */
	uint64_t a = lt_counter(adm, 1, "msgs_sent"), b = lt_counter(adm, 1, "msgs_sent");
	lt_refused(adm, m, 2, 0, 100, "depth 0");
	lt_refused(adm, m, 2, 65, 100, "depth 65");
	lt_refused(adm, m, 65, 1, 100, "65 messages");
	lt_refused(adm, m, 0, 1, 100, "0 messages");
	lt_refused(adm, m, 2, 1, 0, "a duration of 0.000 s");
	lt_refused(adm, m, 2, 1, 10001, "a duration of 10.001 s");
	emdb_linktest_msg bad = m[0];
	bad.rank = 0;
	lt_refused(adm, &bad, 1, 1, 100, "goes to rank 0");
	bad.rank = 3;
	lt_refused(adm, &bad, 1, 1, 100, "goes to rank 3");
	bad = m[0];
	bad.reply_bytes = (1ull << 31) + 17;
	lt_refused(adm, &bad, 1, 1, 100, "a node frame is at most");
	bad.reply_bytes = 1ull << 30; /* 1 GiB replies, 2 in flight */
	lt_refused(adm, &bad, 1, 2, 100, "in flight");
	uint64_t c = lt_counter(adm, 1, "msgs_sent");
	cr_assert_eq(c - b, b - a, "refused linktests sent messages: %llu, not %llu", (unsigned long long)(c - b),
		     (unsigned long long)(b - a));

	/* One at a time per node: a second, from another connection while
	 * the first runs, is BUSY; the first is not disturbed. */
	lt_bg bg = { .c = adm, .m = m };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, lt_run_bg, &bg), 0);
	emdb_client *adm2 = lt_client(0, "adm");
	int busy = EMDB_OK;
	for (int tries = 0; tries < 200 && busy != EMDB_ERR_BUSY; tries++) {
		busy = emdb_client_linktest(adm2, m, 1, 1, 1, &res);
		if (busy != EMDB_ERR_BUSY)
			server_sleep_ms(5);
	}
	if (busy != EMDB_ERR_BUSY)
		pthread_join(th, NULL);
	cr_assert_eq(busy, EMDB_ERR_BUSY, "%d %s; the long one: %d %s", busy, emdb_client_last_error(), bg.rc, bg.msg);
	cr_assert(strstr(emdb_client_last_error(), "runs on this node already"), "%s", emdb_client_last_error());
	cr_assert_eq(pthread_join(th, NULL), 0);
	cr_assert_eq(bg.rc, EMDB_OK, "%s", bg.msg);
	cr_assert_gt(bg.res.rounds, 0);
	emdb_client_close(adm2);

	/* Only an admin may run one. */
	emdb_client *trn = lt_client(0, "trn"), *rdr = lt_client(0, "rdr");
	cr_assert_eq(emdb_client_linktest(trn, m, 2, 1, 100, &res), EMDB_ERR_AUTH);
	cr_assert_eq(emdb_client_linktest(rdr, m, 2, 1, 100, &res), EMDB_ERR_AUTH);
	emdb_client_close(trn);
	emdb_client_close(rdr);

	/* emdb-cli cluster linktest, as text and as JSON. */
	char uri[256];
	snprintf(uri, sizeof(uri), "unix://%s?token=adm", ch.node[2].sock);
	cli_run r = run_cli_env(NULL, NULL,
				ARGS("-u", uri, "cluster", "linktest", "--seconds", "0.2", "--depth", "2", "--request",
				     "1K", "--reply", "8K"));
	EXPECT(r, 0);
	expect_has(r.out, "to node 0, 1)");
	expect_has(r.out, "1024 bytes out, 8192 back, 2 rounds in flight");
	expect_has(r.out, "rounds/s");
	expect_has(r.out, "MB/s");
	expect_has(r.out, "per message:");
	run_free(&r);
	r = run_cli_env(NULL, NULL, ARGS("-u", uri, "--json", "cluster", "linktest", "--seconds", "0.1"));
	EXPECT(r, 0);
	expect_has(r.out, "\"rounds\":");
	expect_has(r.out, "\"us_per_message\":");
	run_free(&r);

	/* A node killed under a linktest: NODE, naming it. */
	ch_kill(2);
	int rc = emdb_client_linktest(adm, m, 2, 4, 3000, &res);
	cr_assert_eq(rc, EMDB_ERR_NODE, "%d %s", rc, emdb_client_last_error());
	cr_assert(strstr(emdb_client_last_error(), "node 2"), "%s", emdb_client_last_error());
	/* The node keeps its other link: a test of node 1 alone works. */
	cr_assert_eq(emdb_client_linktest(adm, m, 1, 1, 50, &res), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_gt(res.rounds, 0);
	emdb_client_close(peer1);
	emdb_client_close(adm);
}
