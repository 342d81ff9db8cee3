/*
 * test_cluster.c - clusters of emdb-server processes on loopback
 * (tests/lib/cluster_harness.h), as an operator sees them: three nodes
 * form and INFO cluster shows every peer up on every node; a node with
 * another secret stops every start with an error naming it; a node that
 * never comes stops the start after cluster_start_timeout_ms, naming it;
 * a node killed with SIGKILL shows down on the others within the node
 * timeout while they keep answering, and rejoins when restarted; a
 * node's /metrics carries each peer's state and traffic.
 *
 * Each test bounds every wait (seconds); the fixture kills every node.
 */
#define _GNU_SOURCE /* tests/lib/cli_run.h */
#include <criterion/criterion.h>

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

/* The operations not routed across nodes yet (protocol version 3) are
 * refused on a cluster node with UNSUPPORTED, naming the operation, and
 * change nothing. */
Test(cluster, unrouted_operations_are_refused, .fini = fini, .timeout = 120)
{
	start_all(2);
	emdb_client *c = ch_client(0);
	emdb_table_config tc = EMDB_TABLE_CONFIG_INIT;
	strcpy(tc.name, "t");
	tc.dim = 4;
	uint32_t id;
	cr_assert_eq(emdb_client_table_create(c, &tc, &id), EMDB_OK, "%s", emdb_client_last_error());
	emdb_table_info before, after;
	cr_assert_eq(emdb_client_table_describe(c, id, &before), EMDB_OK);

	emdb_optimizer opt = before.config.optimizer;
	opt.lr = before.config.optimizer.lr * 2 + 1;
	cr_assert_eq(emdb_client_table_alter(c, id, &opt), EMDB_ERR_UNSUPPORTED, "%s", emdb_client_last_error());
	cr_assert(strstr(emdb_client_last_error(), "not routed across a cluster"), "%s",
		  emdb_client_last_error());
	cr_assert_eq(emdb_client_table_describe(c, id, &after), EMDB_OK);
	cr_assert_eq(after.config.optimizer.lr, before.config.optimizer.lr, "the refused alter changed lr");

	uint64_t ids[4], next = 0, step = 0;
	float vecs[16];
	size_t n = 0;
	cr_assert_eq(emdb_client_table_scan(c, id, 0, 4, 4, 0, ids, vecs, NULL, &n, &next, &step),
		     EMDB_ERR_UNSUPPORTED, "%s", emdb_client_last_error());

	const uint64_t q[2] = { 1, 2 }, offs[2] = { 0, 2 };
	const float w[2] = { 1, 1 };
	float out[4];
	cr_assert_eq(emdb_client_pull_bags_weighted(c, id, q, 2, offs, 1, EMDB_POOL_SUM, w, 4, out),
		     EMDB_ERR_UNSUPPORTED, "%s", emdb_client_last_error());
	/* and the connection goes on */
	cr_assert_eq(emdb_client_ping(c), EMDB_OK);
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
