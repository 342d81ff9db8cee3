/*
 * cluster_harness.h - clusters of emdb-server processes on this machine
 * for the black-box tests of tests/cluster/.
 *
 * ch_init writes, in a fresh temporary directory, a cluster file of N
 * nodes on free loopback ports and a secret file (mode 0600).  ch_spawn
 * starts node i (its own client port, Unix socket, port file and log);
 * ch_wait_ready waits until it writes its port file, which emdb-server
 * does only once the cluster formed; ch_wait_exit waits for an exit.
 * ch_stop_all, the tests' .fini fixture, SIGKILLs and reaps every node
 * and removes the directory, so it runs after a failed assertion too;
 * every node also dies with the test process (PR_SET_PDEATHSIG).
 *
 * UCX runs over TCP on loopback (UCX_TLS=tcp, UCX_NET_DEVICES=lo) unless
 * the caller set UCX_TLS first.  Every wait is bounded.
 */
#ifndef EMDB_TEST_CLUSTER_HARNESS_H
#define EMDB_TEST_CLUSTER_HARNESS_H

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/client.h>

#include "tests/lib/server_spawn.h"

#define CH_MAX 4

typedef struct ch_node {
	pid_t pid;
	unsigned node_port;  /* node-to-node (UCX listener) */
	unsigned port;       /* clients, once ready */
	char sock[128];
	char log[128];
	char portfile[128];
} ch_node;

typedef struct ch_cluster {
	int n;
	char netns[CH_MAX][32]; /* run node i in this network namespace ("": none) */
	char dir[64];
	char file[128];
	char secret[128];
	char bad_secret[128];
	ch_node node[CH_MAX];
} ch_cluster;

static ch_cluster ch; /* the running test's cluster */

static inline uint64_t ch_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline unsigned ch_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(a);
	cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		  getsockname(fd, (struct sockaddr *)&a, &len) == 0);
	close(fd);
	return ntohs(a.sin_port);
}

static inline void ch_write(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* A cluster of n nodes at hosts[i] (NULL: all on 127.0.0.1, on free
 * ports; else on port 7900), not started. */
static inline void ch_init_hosts(int n, const char *const *hosts)
{
	memset(&ch, 0, sizeof(ch));
	cr_assert_leq(n, CH_MAX);
	ch.n = n;
	strcpy(ch.dir, "/tmp/emdb-cluster-XXXXXX");
	cr_assert_not_null(mkdtemp(ch.dir), "mkdtemp: %s", strerror(errno));
	snprintf(ch.file, sizeof(ch.file), "%s/cluster", ch.dir);
	snprintf(ch.secret, sizeof(ch.secret), "%s/secret", ch.dir);
	snprintf(ch.bad_secret, sizeof(ch.bad_secret), "%s/bad-secret", ch.dir);
	char text[1024];
	size_t len = (size_t)snprintf(text, sizeof(text), "# written by cluster_harness.h\ncluster_id test-%d\n",
				      (int)getpid());
	for (int i = 0; i < n; i++) {
		ch_node *nd = &ch.node[i];
		nd->node_port = hosts ? 7900 : ch_free_port();
		snprintf(nd->sock, sizeof(nd->sock), "%s/node%d.sock", ch.dir, i);
		snprintf(nd->log, sizeof(nd->log), "%s/node%d.log", ch.dir, i);
		snprintf(nd->portfile, sizeof(nd->portfile), "%s/node%d.port", ch.dir, i);
		len += (size_t)snprintf(text + len, sizeof(text) - len, "node %d %s:%u\n", i,
					hosts ? hosts[i] : "127.0.0.1", nd->node_port);
	}
	ch_write(ch.file, text, 0644);
	ch_write(ch.secret, "cluster-harness-secret-0123456789\n", 0600);
	ch_write(ch.bad_secret, "not-the-cluster-secret-9876543210\n", 0600);
	if (!getenv("UCX_TLS")) {
		setenv("UCX_TLS", "tcp", 1);
		setenv("UCX_NET_DEVICES", "lo", 1);
	}
}

static inline void ch_init(int n)
{
	ch_init_hosts(n, NULL);
}

/* The whole log of node i (static buffer, last 32 KiB). */
static inline const char *ch_log(int i)
{
	static char text[32768];
	return server_file_tail(ch.node[i].log, text, sizeof(text));
}

/* Start node i with extra flags (NULL-terminated, may be NULL); do not
 * wait.  secret: the secret file (NULL: the cluster's). */
static inline void ch_spawn(int i, const char *secret, const char *const *extra)
{
#ifndef EMDB_SERVER_BIN
	(void)i;
	(void)secret;
	(void)extra;
	cr_skip_test("emdb-server is not part of this build");
#else
	ch_node *nd = &ch.node[i];
	char rank[16];
	snprintf(rank, sizeof(rank), "%d", i);
	unlink(nd->portfile);
	unlink(nd->sock);
	const char *argv[64];
	int argc = 0;
	if (ch.netns[i][0]) {
		argv[argc++] = "/usr/sbin/ip";
		argv[argc++] = "netns";
		argv[argc++] = "exec";
		argv[argc++] = ch.netns[i];
	}
	const char *const base[] = {
		server_bin(), "--bind", "127.0.0.1", "--port", "0", "--port-file", nd->portfile, "--unix-socket",
		nd->sock, "--io-threads", "1", "--log-file", nd->log, "--cluster-file", ch.file, "--cluster-rank",
		rank, "--cluster-secret-file", secret ? secret : ch.secret,
	};
	for (size_t k = 0; k < sizeof(base) / sizeof(base[0]); k++)
		argv[argc++] = base[k];
	for (int k = 0; extra && extra[k] && argc < 62; k++)
		argv[argc++] = extra[k];
	argv[argc] = NULL;
	pid_t p = server_fork(argv, nd->log);
	nd->pid = p;
#endif
}

/* Wait up to ms for node i to be ready (its port file); fails the test
 * with its log if it exits or does not get there. */
static inline void ch_wait_ready(int i, long ms)
{
	ch_node *nd = &ch.node[i];
	uint64_t end = ch_now_ms() + (uint64_t)ms;
	while (ch_now_ms() < end) {
		int st;
		if (nd->pid > 0 && waitpid(nd->pid, &st, WNOHANG) == nd->pid) {
			nd->pid = 0;
			cr_assert_fail("node %d exited at start (status 0x%x):\n%s", i, st, ch_log(i));
		}
		FILE *f = fopen(nd->portfile, "r");
		unsigned port = 0;
		if (f) {
			char nl = 0;
			if (fscanf(f, "%u%c", &port, &nl) < 2 || nl != '\n')
				port = 0;
			fclose(f);
		}
		if (port) {
			nd->port = port;
			return;
		}
		server_sleep_ms(10);
	}
	cr_assert_fail("node %d not ready within %ld ms:\n%s", i, ms, ch_log(i));
}

/* Wait up to ms for node i to exit; its wait status, or -1 if it runs. */
static inline int ch_wait_exit(int i, long ms)
{
	ch_node *nd = &ch.node[i];
	uint64_t end = ch_now_ms() + (uint64_t)ms;
	while (nd->pid > 0) {
		int st;
		if (waitpid(nd->pid, &st, WNOHANG) == nd->pid) {
			nd->pid = 0;
			return st;
		}
		if (ch_now_ms() > end)
			return -1;
		server_sleep_ms(10);
	}
	return -1;
}

static inline void ch_kill(int i)
{
	ch_node *nd = &ch.node[i];
	if (nd->pid > 0) {
		kill(nd->pid, SIGKILL);
		while (waitpid(nd->pid, NULL, 0) < 0 && errno == EINTR)
			;
		nd->pid = 0;
	}
}

/* The .fini fixture: every node killed, every file removed. */
static inline void ch_stop_all(void)
{
	for (int i = 0; i < CH_MAX; i++)
		ch_kill(i);
	if (!ch.dir[0])
		return;
	for (int i = 0; i < ch.n; i++) {
		unlink(ch.node[i].sock);
		unlink(ch.node[i].log);
		unlink(ch.node[i].portfile);
		char tmp[160];
		snprintf(tmp, sizeof(tmp), "%s.tmp", ch.node[i].portfile);
		unlink(tmp);
	}
	unlink(ch.file);
	unlink(ch.secret);
	unlink(ch.bad_secret);
	rmdir(ch.dir);
	ch.dir[0] = 0;
}

/* A client of node i over its Unix socket. */
static inline emdb_client *ch_client(int i)
{
	char uri[200];
	snprintf(uri, sizeof(uri), "unix://%s", ch.node[i].sock);
	emdb_client *c = NULL;
	int rc = emdb_client_connect(uri, NULL, &c);
	cr_assert_eq(rc, EMDB_OK, "connect to node %d: %s", i, emdb_last_error());
	return c;
}

/* INFO cluster of node i (malloc'd by the client library; free with
 * emdb_free). */
static inline char *ch_info(int i)
{
	emdb_client *c = ch_client(i);
	char *text = NULL;
	int rc = emdb_client_info(c, "cluster", &text);
	emdb_client_close(c);
	cr_assert_eq(rc, EMDB_OK, "INFO cluster on node %d: %s", i, emdb_last_error());
	return text;
}

/* Poll node i's INFO cluster until it contains `what`, up to ms. */
static inline bool ch_info_until(int i, const char *what, long ms)
{
	uint64_t end = ch_now_ms() + (uint64_t)ms;
	do {
		char *t = ch_info(i);
		bool yes = strstr(t, what) != NULL;
		emdb_free(t);
		if (yes)
			return true;
		server_sleep_ms(20);
	} while (ch_now_ms() < end);
	return false;
}

#endif
