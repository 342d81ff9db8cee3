/*
 * test_cluster_netns.c - two emdb-server nodes in two network namespaces
 * joined by a veth pair, UCX over TCP only: the cluster forms across a
 * real (virtual) link instead of loopback, requests routed across it give
 * one engine's rows, and a node killed on one side shows down on the
 * other.
 *
 * It needs root and `ip netns`; elsewhere it skips with a message.  The
 * namespaces carry the test's pid in their names, and the fixture deletes
 * them (which deletes the veth pair) and kills both nodes, even after a
 * failed assertion.
 */
#include <criterion/criterion.h>
#include <stdarg.h>

#include <emdb/client.h>
#include <emdb/db.h>

#include "tests/lib/cluster_harness.h"

static char ns_a[32], ns_b[32];

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void fini(void)
{
	ch_stop_all();
	if (ns_a[0])
		sh("ip netns del %s 2>/dev/null", ns_a);
	if (ns_b[0])
		sh("ip netns del %s 2>/dev/null", ns_b);
	ns_a[0] = ns_b[0] = 0;
}

Test(cluster_netns, two_namespaces_over_veth, .fini = fini, .timeout = 120)
{
	if (geteuid() != 0 || access("/usr/sbin/ip", X_OK) != 0)
		cr_skip_test("needs root and /usr/sbin/ip to make network namespaces");
	int id = (int)getpid();
	unsigned net = (unsigned)id % 250 + 1;
	snprintf(ns_a, sizeof(ns_a), "emdb%da", id);
	snprintf(ns_b, sizeof(ns_b), "emdb%db", id);
	if (sh("ip netns add %s 2>/dev/null", ns_a) != 0) {
		ns_a[0] = 0;
		cr_skip_test("cannot create a network namespace here (ip netns add failed)");
	}
	cr_assert_eq(sh("ip netns add %s", ns_b), 0);
	/* Both ends are named emdb0 inside their namespace, so one
	 * UCX_NET_DEVICES serves both nodes. */
	cr_assert_eq(sh("ip link add v%da type veth peer name v%db", id, id), 0);
	cr_assert_eq(sh("ip link set v%da netns %s && ip link set v%db netns %s", id, ns_a, id, ns_b), 0);
	cr_assert_eq(sh("ip -n %s link set v%da name emdb0 && ip -n %s link set v%db name emdb0", ns_a, id, ns_b, id), 0);
	cr_assert_eq(sh("ip -n %s addr add 10.231.%u.1/24 dev emdb0 && ip -n %s addr add 10.231.%u.2/24 dev emdb0", ns_a,
			net, ns_b, net),
		     0);
	cr_assert_eq(sh("ip -n %s link set emdb0 up && ip -n %s link set lo up && "
			"ip -n %s link set emdb0 up && ip -n %s link set lo up",
			ns_a, ns_a, ns_b, ns_b),
		     0);
	char h0[32], h1[32];
	snprintf(h0, sizeof(h0), "10.231.%u.1", net);
	snprintf(h1, sizeof(h1), "10.231.%u.2", net);
	const char *const hosts[] = { h0, h1 };
	setenv("UCX_TLS", "tcp", 1);
	setenv("UCX_NET_DEVICES", "emdb0", 1);
	ch_init_hosts(2, hosts);
	snprintf(ch.netns[0], sizeof(ch.netns[0]), "%s", ns_a);
	snprintf(ch.netns[1], sizeof(ch.netns[1]), "%s", ns_b);
	static const char *const flags[] = { "--node-timeout-ms", "1000", "--cluster-start-timeout-ms", "20000", NULL };
	ch_spawn(0, NULL, flags);
	ch_spawn(1, NULL, flags);
	ch_wait_ready(0, 30000);
	ch_wait_ready(1, 30000);
	for (int i = 0; i < 2; i++) {
		char *t = ch_info(i);
		char want[96];
		snprintf(want, sizeof(want), "node_%d: addr=%s:7900 state=up", 1 - i, hosts[1 - i]);
		cr_assert(strstr(t, "state: ready\n") && strstr(t, want), "node %d:\n%s", i, t);
		emdb_free(t);
	}
	/* Requests routed across the veth: rows owned by both nodes, pulled,
	 * pushed and updated through node 1, read through node 0, as one
	 * engine in this process has them. */
	emdb_client *c0 = ch_client(0), *c1 = ch_client(1);
	emdb_table_config tc = EMDB_TABLE_CONFIG_INIT;
	strcpy(tc.name, "veth");
	tc.dim = 8;
	tc.init = (emdb_init){ EMDB_INIT_UNIFORM, -1, 1 };
	uint32_t t, lt;
	cr_assert_eq(emdb_client_table_create(c1, &tc, &t), EMDB_OK, "%s", emdb_client_last_error());
	emdb_db *db;
	cr_assert_eq(emdb_db_open(NULL, &db), 0);
	cr_assert_eq(emdb_table_create(db, &tc, &lt), 0);
	static uint64_t ids[256];
	static float a[256 * 8], b[256 * 8];
	for (int i = 0; i < 256; i++)
		ids[i] = (uint64_t)i * 7919;
	cr_assert_eq(emdb_client_pull(c1, t, ids, 256, 8, a), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_eq(emdb_pull(db, lt, ids, 256, 8, b), 0);
	cr_assert(memcmp(a, b, sizeof(a)) == 0, "pulled rows differ from one engine's");
	cr_assert_eq(emdb_client_push(c1, t, ids, 256, 8, a), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_eq(emdb_push(db, lt, ids, 256, 8, b), 0);
	cr_assert_eq(emdb_client_update(c1, t, NULL), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_eq(emdb_update(db, lt, NULL), 0);
	cr_assert_eq(emdb_client_lookup(c0, t, ids, 256, 8, a, NULL), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_eq(emdb_lookup(db, lt, ids, 256, 8, b, NULL), 0);
	cr_assert(memcmp(a, b, sizeof(a)) == 0, "updated rows differ from one engine's");
	emdb_db_close(db);
	emdb_client_close(c0);
	emdb_client_close(c1);

	ch_kill(1);
	char down[96];
	snprintf(down, sizeof(down), "node_1: addr=%s:7900 state=down", h1);
	cr_assert(ch_info_until(0, down, 10000), "node 0 does not see node 1 down:\n%s", ch_log(0));
}
