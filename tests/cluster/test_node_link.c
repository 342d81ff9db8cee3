/*
 * test_node_link.c - the node-to-node link (net/node_link.h) alone: two or
 * three links in one process (and a peer in a child process where it must
 * die), over UCX on loopback TCP and over shared memory.
 *
 * What a user of the link would check: the cluster forms; a call comes
 * back with exactly the bytes the echo sent, small and large (rendezvous),
 * also when request and reply are handed over (call_owned, reply_owned);
 * the per-peer counters are byte-exact on both ends; a request with no
 * serve function is answered BUSY; an unanswered call ends with NODE by its
 * deadline and names the node; a peer killed with SIGKILL ends the calls in
 * flight to it with NODE at once (not by the deadline) and is taken back
 * when it restarts; a node with another secret is refused on both sides.
 *
 * Every wait is bounded (a few seconds); nothing is timed.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "cluster/link.h"
#include "net/cluster_conf.h"
#include "net/node_link.h"
#include "tests/lib/cluster_harness.h"

#define WAIT_MS 15000

static const char SECRET[] = "test-secret-0123456789abcdef";

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void make_conf(cluster_conf *c, unsigned n)
{
	char text[1024];
	size_t len = (size_t)snprintf(text, sizeof(text), "cluster_id linktest\npartitions 64\n");
	for (unsigned r = 0; r < n; r++)
		len += (size_t)snprintf(text + len, sizeof(text) - len, "node %u 127.0.0.1:%u\n", r, ch_free_port());
	char err[256];
	cr_assert_eq(cluster_conf_parse(text, len, "test", c, err, sizeof(err)), 0, "%s", err);
}

/* ---- a log that the tests read ---------------------------------------- */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_text[16384];

static void test_log(void *arg, int level, const char *msg)
{
	pthread_mutex_lock(&log_mu);
	size_t n = strlen(log_text);
	snprintf(log_text + n, sizeof(log_text) - n, "[%u] %s\n", (unsigned)(uintptr_t)arg, msg);
	pthread_mutex_unlock(&log_mu);
}

static bool log_has(const char *what)
{
	pthread_mutex_lock(&log_mu);
	bool yes = strstr(log_text, what) != NULL;
	pthread_mutex_unlock(&log_mu);
	return yes;
}

/* ---- links ------------------------------------------------------------ */

typedef struct node {
	node_link *link;
	cluster_link cl;
	/* held requests (the black-hole serve) */
	pthread_mutex_t mu;
	cluster_responder *held[64];
	int n_held;
} node;

static bool busy_poll; /* the links of the test poll UCX (cluster_busy_poll) */

static void open_node(node *nd, const cluster_conf *c, uint32_t rank, const char *secret, uint32_t timeout_ms)
{
	memset(nd, 0, sizeof(*nd));
	pthread_mutex_init(&nd->mu, NULL);
	node_link_config lc = NODE_LINK_CONFIG_INIT;
	lc.conf = c;
	lc.rank = rank;
	lc.secret = (const uint8_t *)secret;
	lc.secret_len = strlen(secret);
	lc.node_timeout_ms = timeout_ms;
	lc.busy_poll = busy_poll;
	lc.log = test_log;
	lc.log_arg = (void *)(uintptr_t)rank;
	char err[512];
	int rc = node_link_create(&lc, &nd->link, err, sizeof(err));
	cr_assert_eq(rc, EMDB_OK, "node_link_create rank %u: %s", rank, err);
	node_link_as_cluster_link(nd->link, &nd->cl);
}

static void wait_ready(node *nd)
{
	char err[512];
	int rc = node_link_wait_ready(nd->link, WAIT_MS, err, sizeof(err));
	cr_assert_eq(rc, EMDB_OK, "rank %u not ready: %s (%s)\nlog:\n%s", nd->cl.rank, emdb_err_name(rc), err, log_text);
}

static void echo(void *ctx, uint32_t from, const uint8_t *frame, size_t len, cluster_responder *r)
{
	node *nd = ctx;
	nd->cl.ops->reply(nd->cl.ctx, r, frame, len);
}

static void hold(void *ctx, uint32_t from, const uint8_t *frame, size_t len, cluster_responder *r)
{
	node *nd = ctx;
	pthread_mutex_lock(&nd->mu);
	cr_assert_lt(nd->n_held, 64);
	nd->held[nd->n_held++] = r;
	pthread_mutex_unlock(&nd->mu);
}

/* Answer what hold() kept (late replies, dropped by the caller's link). */
static void release_held(node *nd)
{
	pthread_mutex_lock(&nd->mu);
	for (int i = 0; i < nd->n_held; i++)
		nd->cl.ops->reply(nd->cl.ctx, nd->held[i], "late", 4);
	nd->n_held = 0;
	pthread_mutex_unlock(&nd->mu);
}

/* ---- calls, waited for ------------------------------------------------ */

typedef struct waiter {
	cluster_call call;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	int rc;
	uint8_t *reply;
	size_t len;
	char msg[512];
} waiter;

static void on_done(cluster_call *call, int rc, const uint8_t *frame, size_t len)
{
	waiter *w = call->arg;
	pthread_mutex_lock(&w->mu);
	w->rc = rc;
	w->len = len;
	if (rc == EMDB_OK) {
		w->reply = malloc(len ? len : 1);
		memcpy(w->reply, frame, len);
	} else {
		snprintf(w->msg, sizeof(w->msg), "%s", emdb_last_error());
	}
	w->done = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

static void w_init(waiter *w)
{
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->call.done = on_done;
	w->call.arg = w;
}

/* Wait up to ms; true when done. */
static bool w_wait(waiter *w, long ms)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&w->mu);
	while (!w->done)
		if (pthread_cond_timedwait(&w->cv, &w->mu, &until) == ETIMEDOUT)
			break;
	bool d = w->done;
	pthread_mutex_unlock(&w->mu);
	return d;
}

static void w_free(waiter *w)
{
	free(w->reply);
	w->reply = NULL;
}

/* Call `to` from nd with frame, wait for the end; returns the rc. */
static int call_wait(node *nd, uint32_t to, const void *frame, size_t len, waiter *w)
{
	w_init(w);
	int rc = nd->cl.ops->call(nd->cl.ctx, to, frame, len, &w->call);
	if (rc != EMDB_OK)
		return rc;
	cr_assert(w_wait(w, WAIT_MS), "the call to %u never ended", to);
	return w->rc;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 131u + seed);
}

static void set_tcp(void)
{
	setenv("UCX_TLS", "tcp", 1);
	setenv("UCX_NET_DEVICES", "lo", 1);
}

static void set_shm(void)
{
	setenv("UCX_TLS", "posix,sysv,cma,tcp,self", 1);
	setenv("UCX_NET_DEVICES", "lo", 1);
	setenv("UCX_POSIX_ERROR_HANDLING", "y", 1);
	setenv("UCX_SYSV_ERROR_HANDLING", "y", 1);
}

/* Two links of a fresh two-node cluster over TCP: a (rank 0, ready) and
 * b (rank 1, `secret_b`, serving with `serve_b` when not NULL). */
static void open_pair(cluster_conf *c, node *a, node *b, uint32_t timeout_ms, cluster_serve_fn serve_b)
{
	set_tcp();
	make_conf(c, 2);
	open_node(a, c, 0, SECRET, timeout_ms);
	open_node(b, c, 1, SECRET, timeout_ms);
	if (serve_b)
		node_link_serve(b->link, serve_b, b);
	wait_ready(a);
}

static void close_pair(cluster_conf *c, node *a, node *b)
{
	node_link_destroy(a->link);
	node_link_destroy(b->link);
	cluster_conf_free(c);
}

/* Echo calls both ways, small and large, with exact counters. */
static void echo_round_trip(void)
{
	cluster_conf c;
	make_conf(&c, 2);
	node a, b;
	open_node(&a, &c, 0, SECRET, 10000);
	open_node(&b, &c, 1, SECRET, 10000);
	node_link_serve(a.link, echo, &a);
	node_link_serve(b.link, echo, &b);
	wait_ready(&a);
	wait_ready(&b);

	node_peer_info a0, b0, a1, b1;
	node_link_peer(a.link, 1, &a0);
	node_link_peer(b.link, 0, &b0);
	cr_assert_eq(a0.state, NODE_PEER_UP);
	cr_assert_eq(b0.state, NODE_PEER_UP);

	size_t sizes[] = { 0, 1, 100, 8192, 3u << 20 };
	uint64_t bytes = 0;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		uint8_t *buf = malloc(n ? n : 1);
		fill(buf, n, (unsigned)i);
		waiter w;
		int rc = call_wait(i % 2 ? &b : &a, i % 2 ? 0 : 1, buf, n, &w);
		cr_assert_eq(rc, EMDB_OK, "call of %zu bytes: %s %s", n, emdb_err_name(rc), w.msg);
		cr_assert_eq(w.len, n, "reply of %zu bytes for %zu", w.len, n);
		cr_assert(n == 0 || memcmp(w.reply, buf, n) == 0, "the echo of %zu bytes differs", n);
		w_free(&w);
		free(buf);
		bytes += 16 + n;
	}
	node_link_peer(a.link, 1, &a1);
	node_link_peer(b.link, 0, &b1);
	/* Every call: one request and one reply of 16 + n bytes each. */
	uint64_t sent_a = a1.bytes_sent - a0.bytes_sent, recv_a = a1.bytes_received - a0.bytes_received;
	uint64_t sent_b = b1.bytes_sent - b0.bytes_sent, recv_b = b1.bytes_received - b0.bytes_received;
	cr_assert_eq(sent_a + sent_b, 2 * bytes, "sent %llu + %llu, want %llu", (unsigned long long)sent_a,
		     (unsigned long long)sent_b, (unsigned long long)(2 * bytes));
	cr_assert_eq(sent_a, recv_b, "A sent %llu, B received %llu", (unsigned long long)sent_a,
		     (unsigned long long)recv_b);
	cr_assert_eq(sent_b, recv_a);
	cr_assert_eq(a1.msgs_sent - a0.msgs_sent, 5, "A sent 3 requests and 2 replies");
	cr_assert_eq(b1.msgs_received - b0.msgs_received, 5);
	cr_assert_eq(a1.calls - a0.calls, 3);
	cr_assert_eq(b1.requests_served - b0.requests_served, 3);
	cr_assert_eq(a1.calls_failed, 0);

	close_pair(&c, &a, &b);
}

Test(node_link, echo_over_tcp, .timeout = 60)
{
	set_tcp();
	echo_round_trip();
}

Test(node_link, echo_over_tcp_busy_polling, .timeout = 60)
{
	set_tcp();
	busy_poll = true;
	echo_round_trip();
}

Test(node_link, echo_over_shared_memory, .timeout = 60)
{
	set_shm();
	echo_round_trip();
}

/* Three links, every pair, calls from two threads at once. */
typedef struct caller {
	node *nd;
	uint32_t to;
	int ok;
} caller;

static void *call_many(void *arg)
{
	caller *c = arg;
	for (int i = 0; i < 200; i++) {
		uint32_t v[16];
		for (int k = 0; k < 16; k++)
			v[k] = (uint32_t)(i * 16 + k) ^ c->to;
		waiter w;
		if (call_wait(c->nd, c->to, v, sizeof(v), &w) == EMDB_OK && w.len == sizeof(v) &&
		    memcmp(w.reply, v, sizeof(v)) == 0)
			c->ok++;
		w_free(&w);
	}
	return NULL;
}

Test(node_link, three_nodes_concurrent_calls, .timeout = 90)
{
	set_tcp();
	cluster_conf c;
	make_conf(&c, 3);
	node nd[3];
	for (uint32_t r = 0; r < 3; r++)
		open_node(&nd[r], &c, r, SECRET, 10000);
	for (uint32_t r = 0; r < 3; r++)
		node_link_serve(nd[r].link, echo, &nd[r]);
	for (uint32_t r = 0; r < 3; r++)
		wait_ready(&nd[r]);
	caller cs[6];
	pthread_t th[6];
	int k = 0;
	for (uint32_t r = 0; r < 3; r++)
		for (uint32_t to = 0; to < 3; to++)
			if (to != r) {
				cs[k] = (caller){ &nd[r], to, 0 };
				pthread_create(&th[k], NULL, call_many, &cs[k]);
				k++;
			}
	for (int i = 0; i < k; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(cs[i].ok, 200, "caller %d: %d of 200 echoes right", i, cs[i].ok);
	}
	for (uint32_t r = 0; r < 3; r++)
		cr_assert_eq(node_link_get_state(nd[r].link), NODE_LINK_READY);
	for (uint32_t r = 0; r < 3; r++)
		node_link_destroy(nd[r].link);
	cluster_conf_free(&c);
}

/* The cluster layer answers from its engine's helper thread, and hands
 * work back to the link's thread with post(): both from another thread. */
static pthread_t done_thread;
static pthread_t posted_thread;
static _Atomic int posted;

static void note_thread(cluster_call *call, int rc, const uint8_t *frame, size_t len)
{
	done_thread = pthread_self();
	on_done(call, rc, frame, len);
}

static void on_posted(void *arg)
{
	posted_thread = pthread_self();
	atomic_store(&posted, 1);
}

Test(node_link, reply_and_post_from_another_thread, .timeout = 60)
{
	cluster_conf c;
	node a, b;
	open_pair(&c, &a, &b, 10000, hold);
	waiter w;
	w_init(&w);
	w.call.done = note_thread;
	cr_assert_eq(a.cl.ops->call(a.cl.ctx, 1, "question", 8, &w.call), EMDB_OK);
	uint64_t end = now_ms() + WAIT_MS;
	for (;;) {
		pthread_mutex_lock(&b.mu);
		int n = b.n_held;
		pthread_mutex_unlock(&b.mu);
		if (n == 1 || now_ms() > end)
			break;
		sleep_ms(5);
	}
	cr_assert_eq(b.n_held, 1, "the request never reached the serve function");
	/* This thread answers: the reply is copied before reply() returns. */
	char answer[64];
	snprintf(answer, sizeof(answer), "answer from the test thread");
	cr_assert_eq(b.cl.ops->reply(b.cl.ctx, b.held[0], answer, strlen(answer)), EMDB_OK);
	memset(answer, 'x', sizeof(answer));
	b.n_held = 0;
	cr_assert(w_wait(&w, WAIT_MS));
	cr_assert_eq(w.rc, EMDB_OK, "%s %s", emdb_err_name(w.rc), w.msg);
	cr_assert_eq(w.len, strlen("answer from the test thread"));
	cr_assert(memcmp(w.reply, "answer from the test thread", w.len) == 0);
	w_free(&w);
	/* post() runs on the link's thread: the one that ran done(). */
	a.cl.ops->post(a.cl.ctx, on_posted, NULL);
	end = now_ms() + WAIT_MS;
	while (!atomic_load(&posted) && now_ms() < end)
		sleep_ms(5);
	cr_assert(atomic_load(&posted), "the posted function never ran");
	cr_assert(pthread_equal(posted_thread, done_thread));
	cr_assert(!pthread_equal(posted_thread, pthread_self()));
	close_pair(&c, &a, &b);
}

/* Echo with a frame of emdb_malloc handed over to reply_owned. */
static void echo_owned(void *ctx, uint32_t from, const uint8_t *frame, size_t len, cluster_responder *r)
{
	node *nd = ctx;
	uint8_t *copy = emdb_malloc(len ? len : 1);
	if (!copy) { /* the caller sees a reply that differs */
		nd->cl.ops->reply(nd->cl.ctx, r, "", 0);
		return;
	}
	memcpy(copy, frame, len);
	nd->cl.ops->reply_owned(nd->cl.ctx, r, copy, len);
}

Test(node_link, handed_over_frames_arrive_whole_and_are_freed, .timeout = 60)
{
	cluster_conf c;
	node a, b;
	open_pair(&c, &a, &b, 10000, echo_owned);
	size_t sizes[] = { 0, 100, 8192, 3u << 20 }; /* eager and rendezvous */
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		uint8_t *want = malloc(n ? n : 1), *frame = emdb_malloc(n ? n : 1);
		cr_assert(want && frame);
		fill(want, n, (unsigned)i + 7);
		memcpy(frame, want, n);
		waiter w;
		w_init(&w);
		cr_assert_eq(a.cl.ops->call_owned(a.cl.ctx, 1, frame, n, &w.call), EMDB_OK);
		cr_assert(w_wait(&w, WAIT_MS), "the call of %zu bytes never ended", n);
		cr_assert_eq(w.rc, EMDB_OK, "call of %zu bytes: %s %s", n, emdb_err_name(w.rc), w.msg);
		cr_assert_eq(w.len, n, "reply of %zu bytes for %zu", w.len, n);
		cr_assert(n == 0 || memcmp(w.reply, want, n) == 0, "the echo of %zu bytes differs", n);
		w_free(&w);
		free(want);
	}
	/* Refused at once: the frame is the link's all the same (the
	 * sanitizer's leak check sees it freed). */
	waiter w;
	w_init(&w);
	cr_assert_eq(a.cl.ops->call_owned(a.cl.ctx, 0, emdb_malloc(8), 8, &w.call), EMDB_ERR_INVALID);
	cr_assert_eq(a.cl.ops->call_owned(a.cl.ctx, 5, emdb_malloc(8), 8, &w.call), EMDB_ERR_INVALID);
	close_pair(&c, &a, &b);
}

Test(node_link, no_serve_function_answers_busy, .timeout = 60)
{
	cluster_conf c;
	node a, b;
	open_pair(&c, &a, &b, 10000, NULL);
	waiter w;
	int rc = call_wait(&a, 1, "x", 1, &w);
	cr_assert_eq(rc, EMDB_ERR_BUSY, "%s %s", emdb_err_name(rc), w.msg);
	cr_assert(strstr(w.msg, "node 1"), "%s", w.msg);
	/* Calls to itself or to no node are refused at once. */
	cr_assert_eq(a.cl.ops->call(a.cl.ctx, 0, "x", 1, &w.call), EMDB_ERR_INVALID);
	cr_assert_eq(a.cl.ops->call(a.cl.ctx, 2, "x", 1, &w.call), EMDB_ERR_INVALID);
	close_pair(&c, &a, &b);
}

Test(node_link, unanswered_call_ends_at_its_deadline, .timeout = 60)
{
	cluster_conf c;
	node a, b;
	open_pair(&c, &a, &b, 300, hold);
	waiter w;
	int rc = call_wait(&a, 1, "ping", 4, &w);
	cr_assert_eq(rc, EMDB_ERR_NODE, "%s", emdb_err_name(rc));
	cr_assert(strstr(w.msg, "node 1 (127.0.0.1:") && strstr(w.msg, "within 300 ms"), "%s", w.msg);
	node_peer_info p;
	node_link_peer(a.link, 1, &p);
	cr_assert_eq(p.calls_timed_out, 1);
	cr_assert_eq(p.calls_failed, 1);
	cr_assert_eq(p.state, NODE_PEER_UP, "a slow peer is not a lost one");
	/* A call with its own deadline, in the past: ends at the next tick. */
	w_init(&w);
	w.call.deadline_ns = 1;
	cr_assert_eq(a.cl.ops->call(a.cl.ctx, 1, "x", 1, &w.call), EMDB_OK);
	cr_assert(w_wait(&w, WAIT_MS));
	cr_assert_eq(w.rc, EMDB_ERR_NODE);
	cr_assert(strstr(w.msg, "deadline"), "%s", w.msg);
	release_held(&b); /* late: dropped by a */
	sleep_ms(100);
	close_pair(&c, &a, &b);
}

static bool wait_state(node *nd, uint32_t rank, node_peer_state want, long ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	node_peer_info p;
	do {
		node_link_peer(nd->link, rank, &p);
		if (p.state == want)
			return true;
		sleep_ms(10);
	} while (now_ms() < end);
	return false;
}

Test(node_link, wrong_secret_is_refused_on_both_sides, .timeout = 60)
{
	set_tcp();
	cluster_conf c;
	make_conf(&c, 2);
	node a, b;
	open_node(&a, &c, 0, SECRET, 2000);
	open_node(&b, &c, 1, "another-secret-of-some-length", 2000);
	char err[512];
	int rc = node_link_wait_ready(a.link, WAIT_MS, err, sizeof(err));
	cr_assert_eq(rc, EMDB_ERR_NODE, "%s: %s", emdb_err_name(rc), err);
	cr_assert(strstr(err, "node 1 (127.0.0.1:") && strstr(err, "secret"), "%s", err);
	rc = node_link_wait_ready(b.link, WAIT_MS, err, sizeof(err));
	cr_assert_eq(rc, EMDB_ERR_NODE, "%s: %s", emdb_err_name(rc), err);
	cr_assert(strstr(err, "node 0") && strstr(err, "secret"), "%s", err);
	cr_assert(log_has("refused node 1"), "%s", log_text);
	/* Whichever side refused first, each ends up refusing the other. */
	cr_assert(wait_state(&a, 1, NODE_PEER_REFUSED, WAIT_MS), "%s", log_text);
	cr_assert(wait_state(&b, 0, NODE_PEER_REFUSED, WAIT_MS), "%s", log_text);
	node_peer_info p;
	node_link_peer(a.link, 1, &p);
	cr_assert_eq(p.connects, 0);
	waiter w;
	w_init(&w);
	cr_assert_eq(a.cl.ops->call(a.cl.ctx, 1, "x", 1, &w.call), EMDB_ERR_NODE);
	close_pair(&c, &a, &b);
}

Test(node_link, different_membership_is_refused, .timeout = 60)
{
	set_tcp();
	cluster_conf c, other;
	make_conf(&c, 2);
	/* The same nodes, another partition count. */
	char text[512], err[512];
	char a0[300], a1[300];
	cluster_conf_addr(&c, 0, a0, sizeof(a0));
	cluster_conf_addr(&c, 1, a1, sizeof(a1));
	size_t len = (size_t)snprintf(text, sizeof(text), "cluster_id linktest\npartitions 128\nnode 0 %s\nnode 1 %s\n",
				      a0, a1);
	cr_assert_eq(cluster_conf_parse(text, len, "other", &other, err, sizeof(err)), 0, "%s", err);
	node a, b;
	open_node(&a, &c, 0, SECRET, 2000);
	open_node(&b, &other, 1, SECRET, 2000);
	int rc = node_link_wait_ready(a.link, WAIT_MS, err, sizeof(err));
	cr_assert_eq(rc, EMDB_ERR_NODE, "%s: %s", emdb_err_name(rc), err);
	cr_assert(strstr(err, "node 1") && strstr(err, "partitions"), "%s", err);
	close_pair(&c, &a, &b);
	cluster_conf_free(&other);
}

Test(node_link, unreachable_node_times_out_naming_it, .timeout = 60)
{
	set_tcp();
	cluster_conf c;
	make_conf(&c, 2);
	node a;
	open_node(&a, &c, 0, SECRET, 500);
	char err[512];
	int rc = node_link_wait_ready(a.link, 1500, err, sizeof(err));
	cr_assert_eq(rc, EMDB_ERR_TIMEOUT, "%s: %s", emdb_err_name(rc), err);
	cr_assert(strstr(err, "node 1 (127.0.0.1:") && strstr(err, "not reachable"), "%s", err);
	cr_assert_eq(node_link_get_state(a.link), NODE_LINK_FORMING);
	node_link_destroy(a.link);
	cluster_conf_free(&c);
}

/* ---- a peer in a child process: SIGKILL and restart ------------------- */

/* The child is this test program run again (a fresh process: no UCX state
 * inherited through fork) with EMDB_LINK_PEER_CONF set: this constructor
 * then runs rank 1 of that cluster, echoing (or holding every request,
 * with EMDB_LINK_PEER_HOLD), until killed, and never reaches Criterion. */
static node peer_node;

static void peer_hold(void *ctx, uint32_t from, const uint8_t *frame, size_t len, cluster_responder *r)
{
	if (peer_node.n_held < 64)
		peer_node.held[peer_node.n_held++] = r;
}

__attribute__((constructor)) static void peer_main(void)
{
	const char *text = getenv("EMDB_LINK_PEER_CONF");
	if (!text)
		return;
	cluster_conf c;
	char err[512];
	if (cluster_conf_parse(text, strlen(text), "peer", &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "peer: %s\n", err);
		_exit(1);
	}
	node_link_config lc = NODE_LINK_CONFIG_INIT;
	lc.conf = &c;
	lc.rank = 1;
	lc.secret = (const uint8_t *)SECRET;
	lc.secret_len = strlen(SECRET);
	lc.node_timeout_ms = 60000;
	if (node_link_create(&lc, &peer_node.link, err, sizeof(err)) != EMDB_OK) {
		fprintf(stderr, "peer: %s\n", err);
		_exit(1);
	}
	node_link_as_cluster_link(peer_node.link, &peer_node.cl);
	node_link_serve(peer_node.link, getenv("EMDB_LINK_PEER_HOLD") ? peer_hold : echo, &peer_node);
	for (;;)
		pause();
}

/* Run rank 1 of c in a child process. */
static pid_t spawn_peer(const cluster_conf *c, bool holding)
{
	char text[1024], a0[300], a1[300];
	cluster_conf_addr(c, 0, a0, sizeof(a0));
	cluster_conf_addr(c, 1, a1, sizeof(a1));
	snprintf(text, sizeof(text), "cluster_id %s\npartitions %u\nnode 0 %s\nnode 1 %s\n", c->id, c->partitions, a0,
		 a1);
	pid_t parent = getpid();
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		setenv("EMDB_LINK_PEER_CONF", text, 1);
		if (holding)
			setenv("EMDB_LINK_PEER_HOLD", "1", 1);
		char *const argv[] = { "test_node_link", NULL };
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	return pid;
}

static void kill_peer(pid_t pid)
{
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}


static void killed_peer(void)
{
	cluster_conf c;
	make_conf(&c, 2);
	pid_t child = spawn_peer(&c, true);
	node a;
	/* A minute's deadline: the call below must end by the loss of the
	 * peer, not by its deadline. */
	open_node(&a, &c, 0, SECRET, 60000);
	wait_ready(&a);
	waiter w;
	w_init(&w);
	cr_assert_eq(a.cl.ops->call(a.cl.ctx, 1, "held", 4, &w.call), EMDB_OK);
	sleep_ms(200); /* the request reaches the child */
	kill_peer(child);
	cr_assert(w_wait(&w, WAIT_MS), "the call to a killed node never ended");
	cr_assert_eq(w.rc, EMDB_ERR_NODE, "%s", emdb_err_name(w.rc));
	cr_assert(strstr(w.msg, "node 1 (127.0.0.1:"), "%s", w.msg);
	node_peer_info p;
	node_link_peer(a.link, 1, &p);
	cr_assert_eq(p.calls_timed_out, 0, "ended by the deadline, not by the loss: %s", w.msg);
	cr_assert_eq(p.state, NODE_PEER_DOWN);
	cr_assert_eq(node_link_get_state(a.link), NODE_LINK_DEGRADED);
	/* While it is down, calls fail at once. */
	w_init(&w);
	cr_assert_eq(a.cl.ops->call(a.cl.ctx, 1, "x", 1, &w.call), EMDB_ERR_NODE);
	cr_assert(strstr(emdb_last_error(), "node 1"), "%s", emdb_last_error());

	/* It restarts: taken back, calls work again. */
	child = spawn_peer(&c, false);
	cr_assert(wait_state(&a, 1, NODE_PEER_UP, WAIT_MS), "the restarted node was not taken back:\n%s", log_text);
	cr_assert_eq(node_link_get_state(a.link), NODE_LINK_READY);
	int rc = call_wait(&a, 1, "again", 5, &w);
	cr_assert_eq(rc, EMDB_OK, "%s %s", emdb_err_name(rc), w.msg);
	cr_assert_eq(w.len, 5);
	w_free(&w);
	node_link_peer(a.link, 1, &p);
	cr_assert_eq(p.connects, 2);
	kill_peer(child);
	node_link_destroy(a.link);
	cluster_conf_free(&c);
}

Test(node_link, killed_peer_ends_calls_and_rejoins_over_tcp, .timeout = 90)
{
	set_tcp();
	killed_peer();
}

/* Over shared memory UCX notices a dead peer only at its keepalive (about
 * 20 s): a call in flight to a SIGKILLed peer still ends, by its deadline,
 * naming the node; nothing hangs. */
Test(node_link, killed_peer_over_shared_memory_ends_by_the_deadline, .timeout = 90)
{
	set_shm();
	cluster_conf c;
	make_conf(&c, 2);
	pid_t child = spawn_peer(&c, true);
	node a;
	open_node(&a, &c, 0, SECRET, 1000);
	wait_ready(&a);
	waiter w;
	w_init(&w);
	cr_assert_eq(a.cl.ops->call(a.cl.ctx, 1, "held", 4, &w.call), EMDB_OK);
	sleep_ms(100);
	kill_peer(child);
	cr_assert(w_wait(&w, WAIT_MS), "the call to a killed node never ended");
	cr_assert_eq(w.rc, EMDB_ERR_NODE, "%s", emdb_err_name(w.rc));
	cr_assert(strstr(w.msg, "node 1 (127.0.0.1:"), "%s", w.msg);
	node_link_destroy(a.link);
	cluster_conf_free(&c);
}
