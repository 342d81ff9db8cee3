/*
 * emdb-link-bench - what the node-to-node link costs over UCX itself.
 *
 *   emdb-link-bench [--calls N] [--big-calls N] [--big-bytes B]
 *
 * In one process, on loopback, with the transports UCX_TLS chooses (run
 * it with UCX_TLS=tcp, then with shared memory), one JSON line each for:
 *
 *   bare_small / bare_big  a ping-pong of UCX active messages between two
 *                          workers driven by one polling thread: a request
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

#include <ucp/api/ucp.h>

#include <emdb/error.h>

#include "base/clock.h"
#include "cluster/link.h"
#include "net/cluster_conf.h"
#include "net/node_link.h"

#define AM_ID 7
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

/* ---- bare UCX ------------------------------------------------------- */

typedef struct bare_side {
	ucp_context_h ctx;
	ucp_worker_h worker;
	ucp_ep_h ep;
	uint8_t *buf;
	size_t reply_len;
	volatile uint64_t got;
	volatile int pending_rx;
} bare_side;

static bare_side A, B;
static ucp_listener_h bare_listener;

static void nop_send(void *req, ucs_status_t st, void *u)
{
	ucp_request_free(req);
}

static void bare_send(ucp_ep_h ep, const void *buf, size_t len)
{
	ucp_request_param_t p = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_FLAGS,
				  .flags = UCP_AM_SEND_FLAG_REPLY,
				  .cb.send = nop_send };
	ucs_status_ptr_t r = ucp_am_send_nbx(ep, AM_ID, NULL, 0, buf, len, &p);
	if (UCS_PTR_IS_ERR(r)) {
		fprintf(stderr, "send: %s\n", ucs_status_string(UCS_PTR_STATUS(r)));
		exit(1);
	}
}

static void b_rx_done(void *req, ucs_status_t st, size_t len, void *u)
{
	B.pending_rx = 0;
	bare_send(B.ep, B.buf, B.reply_len);
	ucp_request_free(req);
}

/* B answers every request; big ones arrive by rendezvous. */
static ucs_status_t b_recv(void *arg, const void *h, size_t hl, void *data, size_t len, const ucp_am_recv_param_t *p)
{
	B.ep = p->reply_ep;
	if (p->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
		ucp_request_param_t rp = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.recv_am = b_rx_done };
		ucs_status_ptr_t r = ucp_am_recv_data_nbx(B.worker, data, B.buf, len, &rp);
		if (r == NULL)
			bare_send(B.ep, B.buf, B.reply_len);
		else
			B.pending_rx = 1;
		return UCS_INPROGRESS;
	}
	bare_send(B.ep, B.buf, B.reply_len);
	return UCS_OK;
}

static ucs_status_t a_recv(void *arg, const void *h, size_t hl, void *data, size_t len, const ucp_am_recv_param_t *p)
{
	A.got++;
	return UCS_OK;
}

static void bare_conn(ucp_conn_request_h req, void *arg)
{
	ucp_ep_params_t ep = { .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
			       .conn_request = req,
			       .err_mode = UCP_ERR_HANDLING_MODE_PEER };
	ucp_ep_create(B.worker, &ep, &B.ep);
}

static void bare_init(bare_side *s, ucp_am_recv_callback_t cb)
{
	ucp_config_t *c;
	ucp_params_t pp = { .field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM };
	ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
				   .thread_mode = UCS_THREAD_MODE_SINGLE };
	if (ucp_config_read(NULL, NULL, &c) != UCS_OK || ucp_init(&pp, c, &s->ctx) != UCS_OK ||
	    ucp_worker_create(s->ctx, &wp, &s->worker) != UCS_OK) {
		fprintf(stderr, "UCX init failed\n");
		exit(1);
	}
	ucp_config_release(c);
	ucp_am_handler_param_t ap = { .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
						    UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
				      .id = AM_ID,
				      .flags = UCP_AM_FLAG_WHOLE_MSG,
				      .cb = cb };
	ucp_worker_set_am_recv_handler(s->worker, &ap);
}

static void progress_both(void)
{
	ucp_worker_progress(A.worker);
	ucp_worker_progress(B.worker);
}

static void bare_run(const char *name, uint64_t calls, size_t req, size_t rep)
{
	uint8_t *out = calloc(1, req);
	B.reply_len = rep;
	/* warm up, then measure */
	for (int pass = 0; pass < 2; pass++) {
		uint64_t n = pass ? calls : calls / 10 + 1;
		A.got = 0;
		uint64_t t0 = emdb__now_ns();
		for (uint64_t i = 0; i < n; i++) {
			bare_send(A.ep, out, req);
			while (A.got <= i)
				progress_both();
		}
		if (pass)
			report(name, n, req, rep, emdb__now_ns() - t0);
	}
	free(out);
}

static void bare(uint64_t small_calls, uint64_t big_calls, size_t big)
{
	bare_init(&A, a_recv);
	bare_init(&B, b_recv);
	B.buf = calloc(1, big > SMALL ? big : SMALL);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)free_port()) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ucp_listener_params_t lp = { .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
						   UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
				     .sockaddr = { (struct sockaddr *)&sa, sizeof(sa) },
				     .conn_handler = { bare_conn, NULL } };
	if (ucp_listener_create(B.worker, &lp, &bare_listener) != UCS_OK) {
		fprintf(stderr, "listener failed\n");
		exit(1);
	}
	ucp_ep_params_t ep = { .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
					     UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
			       .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
			       .sockaddr = { (struct sockaddr *)&sa, sizeof(sa) },
			       .err_mode = UCP_ERR_HANDLING_MODE_PEER };
	if (ucp_ep_create(A.worker, &ep, &A.ep) != UCS_OK) {
		fprintf(stderr, "connect failed\n");
		exit(1);
	}
	bare_run("bare_small", small_calls, SMALL, SMALL);
	bare_run("bare_big", big_calls, big, 8);
	/* The processes ends here; UCX's teardown is not what we measure. */
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
