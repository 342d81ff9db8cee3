/*
 * emdb-link-bench - what the node-to-node link costs over UCX itself.
 *
 *   emdb-link-bench [--calls N] [--big-calls N] [--big-bytes B]
 *
 * In one process, on loopback, with the transports UCX_TLS chooses (run
 * it with UCX_TLS=tcp, then with shared memory), one JSON line each for:
 *
 *   bare_small / bare_big  a ping-pong of UCX active messages between two
 *                          workers driven by one polling thread
 *                          (ucx_pair.h, shared with emdb-bench): a request
 *                          of 64 bytes (or B bytes, by rendezvous) and a
 *                          reply of 64 (8) bytes: UCX's own cost, no
 *                          threads, no copies, no event fd;
 *   link_small / link_big  the same sizes through two node links
 *                          (net/node_link.h): each call issued from the
 *                          previous one's done() on the caller's link
 *                          thread, the reply sent from the serve function
 *                          on the other's; the links sleep on UCX's event
 *                          fd as in emdb-server (--busy-poll: they poll).
 *
 * Figures: calls per second, the mean round trip in microseconds, and for
 * the big calls the goodput (request bytes per second).  No figure is a
 * pass or fail: docs/cluster.md records them with the command.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <emdb/error.h>

#include "base/clock.h"
#include "cluster/link.h"
#include "net/cluster_conf.h"
#include "net/node_link.h"
#include "tools/linkbench/ucx_pair.h"

#define SMALL 64

static unsigned free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(a);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || getsockname(fd, (struct sockaddr *)&a, &len)) {
		perror("free port");
		exit(1);
	}
	close(fd);
	return ntohs(a.sin_port);
}

static void report(const char *name, uint64_t calls, size_t req, size_t rep, uint64_t ns)
{
	double s = (double)ns / 1e9;
	printf("{\"bench\":\"%s\",\"ucx_tls\":\"%s\",\"calls\":%llu,\"request_bytes\":%zu,\"reply_bytes\":%zu,"
	       "\"seconds\":%.3f,\"calls_per_s\":%.0f,\"rtt_us\":%.2f,\"goodput_mb_s\":%.1f}\n",
	       name, getenv("UCX_TLS") ? getenv("UCX_TLS") : "default", (unsigned long long)calls, req, rep, s,
	       (double)calls / s, s * 1e6 / (double)calls, (double)calls * (double)req / s / 1e6);
	fflush(stdout);
}

/* ---- bare UCX (ucx_pair.h) ------------------------------------------ */

static void bare_run(ucx_pair *p, const char *name, uint64_t calls, size_t req, size_t rep)
{
	char err[256];
	/* warm up, then measure */
	for (int pass = 0; pass < 2; pass++) {
		uint64_t n = pass ? calls : calls / 10 + 1;
		ucx_pair_result r;
		if (ucx_pair_exchange(p, &req, &rep, 1, 1, n, 0, &r, err, sizeof(err)) < 0) {
			fprintf(stderr, "%s\n", err);
			exit(1);
		}
		if (pass)
			report(name, r.rounds, req, rep, r.ns);
	}
}

static void bare(uint64_t small_calls, uint64_t big_calls, size_t big)
{
	char err[256];
	ucx_pair *p;
	if (ucx_pair_open(&p, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	bare_run(p, "bare_small", small_calls, SMALL, SMALL);
	bare_run(p, "bare_big", big_calls, big, 8);
	ucx_pair_close(p);
}

/* ---- through the link ------------------------------------------------ */

typedef struct lb {
	cluster_link a, b;
	cluster_call call;
	const uint8_t *req;
	size_t req_len, rep_len;
	uint64_t left;
	int err;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	uint8_t reply[SMALL];
} lb;

static lb L;

static void serve(void *ctx, uint32_t from, const uint8_t *frame, size_t len, cluster_responder *r)
{
	L.b.ops->reply(L.b.ctx, r, L.reply, L.rep_len);
}

static void finish(int err)
{
	pthread_mutex_lock(&L.mu);
	L.err = err;
	L.done = true;
	pthread_cond_signal(&L.cv);
	pthread_mutex_unlock(&L.mu);
}

static void next_call(void *arg);

static void on_done(cluster_call *call, int rc, const uint8_t *frame, size_t len)
{
	if (rc != EMDB_OK) {
		fprintf(stderr, "call: %s %s\n", emdb_err_name(rc), emdb_last_error());
		finish(rc);
		return;
	}
	if (--L.left == 0) {
		finish(0);
		return;
	}
	next_call(NULL);
}

static void next_call(void *arg)
{
	L.call = (cluster_call){ .done = on_done };
	int rc = L.a.ops->call(L.a.ctx, 1, L.req, L.req_len, &L.call);
	if (rc != EMDB_OK) {
		fprintf(stderr, "call: %s %s\n", emdb_err_name(rc), emdb_last_error());
		finish(rc);
	}
}

static void link_run(const char *name, uint64_t calls, size_t req, size_t rep)
{
	uint8_t *out = calloc(1, req);
	L.req = out;
	L.req_len = req;
	L.rep_len = rep;
	for (int pass = 0; pass < 2; pass++) {
		uint64_t n = pass ? calls : calls / 10 + 1;
		L.left = n;
		L.done = false;
		uint64_t t0 = emdb__now_ns();
		L.a.ops->post(L.a.ctx, next_call, NULL); /* calls start on A's link thread */
		pthread_mutex_lock(&L.mu);
		while (!L.done)
			pthread_cond_wait(&L.cv, &L.mu);
		pthread_mutex_unlock(&L.mu);
		if (L.err)
			exit(1);
		if (pass)
			report(name, n, req, rep, emdb__now_ns() - t0);
	}
	free(out);
}

static void through_link(uint64_t small_calls, uint64_t big_calls, size_t big, bool busy)
{
	char text[256], err[256];
	size_t len = (size_t)snprintf(text, sizeof(text), "cluster_id bench\nnode 0 127.0.0.1:%u\nnode 1 127.0.0.1:%u\n",
				      free_port(), free_port());
	cluster_conf c;
	if (cluster_conf_parse(text, len, "bench", &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	node_link *la, *lb_;
	static const char secret[] = "emdb-link-bench-secret";
	node_link_config lc = NODE_LINK_CONFIG_INIT;
	lc.conf = &c;
	lc.secret = (const uint8_t *)secret;
	lc.secret_len = sizeof(secret) - 1;
	lc.node_timeout_ms = 30000;
	lc.busy_poll = busy;
	if (node_link_create(&lc, &la, err, sizeof(err)) != EMDB_OK) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	lc.rank = 1;
	if (node_link_create(&lc, &lb_, err, sizeof(err)) != EMDB_OK) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	node_link_as_cluster_link(la, &L.a);
	node_link_as_cluster_link(lb_, &L.b);
	node_link_serve(lb_, serve, NULL);
	if (node_link_wait_ready(la, 10000, err, sizeof(err)) != EMDB_OK) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	link_run(busy ? "link_small_busy_poll" : "link_small", small_calls, SMALL, SMALL);
	link_run(busy ? "link_big_busy_poll" : "link_big", big_calls, big, 8);
	node_peer_info p;
	node_link_peer(la, 1, &p);
	printf("{\"bench\":\"link_counters\",\"bytes_sent\":%llu,\"msgs_sent\":%llu,\"bytes_received\":%llu,"
	       "\"msgs_received\":%llu}\n",
	       (unsigned long long)p.bytes_sent, (unsigned long long)p.msgs_sent, (unsigned long long)p.bytes_received,
	       (unsigned long long)p.msgs_received);
	node_link_destroy(la);
	node_link_destroy(lb_);
	cluster_conf_free(&c);
}

int main(int argc, char **argv)
{
	uint64_t calls = 20000, big_calls = 500;
	size_t big = 1u << 20;
	bool busy = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--calls") && i + 1 < argc)
			calls = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--big-calls") && i + 1 < argc)
			big_calls = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--big-bytes") && i + 1 < argc)
			big = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--busy-poll"))
			busy = true;
		else {
			fprintf(stderr, "usage: emdb-link-bench [--calls N] [--big-calls N] [--big-bytes B] [--busy-poll]\n");
			return 2;
		}
	}
	if (!calls || !big_calls || big < SMALL) {
		fprintf(stderr, "emdb-link-bench: counts must be positive and --big-bytes at least %d\n", SMALL);
		return 2;
	}
	pthread_mutex_init(&L.mu, NULL);
	pthread_cond_init(&L.cv, NULL);
	through_link(calls, big_calls, big, busy);
	bare(calls, big_calls, big);
	return 0;
}
