/*
 * node_link.c - the node-to-node link's life cycle, its thread and event
 * loop, its mailbox, and the calls of cluster/link.h (net/node_link.h).
 * Endpoints, handshakes and receiving are node_link_conn.c's.
 *
 * Invariants:
 *   1. One thread drives UCX: every ucp call after node_link_create's
 *      setup runs on the link's thread (the worker is single-threaded).
 *      Other threads reach it only through the mailbox (mail_post), which
 *      wakes the loop through an eventfd.
 *   2. The loop sleeps in libevent on the worker's event fd; before each
 *      sleep the worker is progressed until idle and armed again
 *      (pump: ucp_worker_arm answering BUSY means progress more).  With
 *      busy_poll the thread polls instead and never arms.
 *   3. A call is in exactly one place from call() to done(): the mailbox
 *      (not yet sent), or its peer's in-flight list (sent, awaiting the
 *      reply or the deadline); done() runs once, when it leaves the list
 *      (reply, deadline, peer lost, link closing) or when it could not be
 *      sent.  Its id, prev pointer and deadline live in link_priv[0..2].
 *   4. Counters count what the link itself sends and receives: every
 *      active message, its link header included, at the moment it is
 *      posted or delivered.
 *   5. The link's state moves FORMING -> READY <-> DEGRADED, or FORMING
 *      -> FAILED when a peer disagrees while forming; changes happen under
 *      mu and wake wait_ready.
 *
 * State changes: node_link_create (everything), the link thread (peers,
 * calls, inbound endpoints, counters), node_link_serve (serve, serve_ctx),
 * node_link_destroy (stop, free).
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <event2/event.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/clock.h"
#include "base/error_int.h"
#include "net/node_link_int.h"

static _Thread_local const node_link *tl_link; /* the link whose thread this is */

void nl_log(node_link *l, int level, const char *fmt, ...)
{
	if (!l->log_fn)
		return;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	l->log_fn(l->log_arg, level, msg);
}

bool nl_on_thread(const node_link *l)
{
	return tl_link == l;
}

void nl_set_state(node_link *l, node_link_state s, const char *why)
{
	pthread_mutex_lock(&l->mu);
	if (s == NODE_LINK_FAILED && why)
		snprintf(l->fail_reason, sizeof(l->fail_reason), "%s", why);
	atomic_store(&l->state, (int)s);
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->mu);
}

void nl_set_last_error(peer *p, const char *why)
{
	pthread_mutex_lock(&p->l->mu);
	snprintf(p->last_error, sizeof(p->last_error), "%s", why);
	pthread_mutex_unlock(&p->l->mu);
}

/* ---- messages out --------------------------------------------------- */

static tx *tx_alloc(node_link *l, node_kind kind, int32_t status, uint64_t call_id, size_t room, size_t len)
{
	tx *t = emdb_malloc(sizeof(*t) + room);
	if (!t)
		return NULL;
	node_hdr h = { .kind = (uint8_t)kind, .version = NODE_WIRE_VERSION, .status = status, .call_id = call_id };
	node_hdr_encode(&h, t->hdr);
	t->l = l;
	t->rank = UINT32_MAX;
	t->call = NULL;
	t->in_gen = 0;
	t->len = len;
	t->body = t->data;
	t->owned = NULL;
	t->release = NULL;
	t->release_arg = NULL;
	return t;
}

tx *nl_tx_new(node_link *l, node_kind kind, int32_t status, uint64_t call_id, const void *body, size_t len)
{
	tx *t = tx_alloc(l, kind, status, call_id, len, len);
	if (t && len)
		memcpy(t->data, body, len);
	return t;
}

tx *nl_tx_take(node_link *l, node_kind kind, int32_t status, uint64_t call_id, void *body, size_t len)
{
	tx *t = tx_alloc(l, kind, status, call_id, 0, len);
	if (!t) {
		emdb_free(body);
		return NULL;
	}
	t->body = body;
	t->owned = body;
	return t;
}

tx *nl_tx_lend(node_link *l, node_kind kind, uint64_t call_id, const void *body, size_t len,
	       void (*release)(void *arg), void *arg)
{
	tx *t = tx_alloc(l, kind, 0, call_id, 0, len);
	if (!t) {
		release(arg);
		return NULL;
	}
	t->body = body;
	t->release = release;
	t->release_arg = arg;
	return t;
}

void nl_tx_free(tx *t)
{
	if (t->release)
		t->release(t->release_arg);
	emdb_free(t->owned);
	emdb_free(t);
}

static void send_done(void *req, ucs_status_t st, void *user)
{
	(void)st; /* a failed send shows as an endpoint error or a deadline */
	nl_tx_free(user);
	ucp_request_free(req);
}

int nl_send(node_link *l, ucp_ep_h ep, tx *t)
{
	ucp_request_param_t prm = {
		.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS,
		.flags = UCP_AM_SEND_FLAG_REPLY,
		.cb.send = send_done,
		.user_data = t,
	};
	if (t->rank < l->n) {
		peer_counters *c = &l->peers[t->rank].c;
		atomic_fetch_add_explicit(&c->bytes_sent, NODE_HDR_LEN + t->len, memory_order_relaxed);
		atomic_fetch_add_explicit(&c->msgs_sent, 1, memory_order_relaxed);
	}
	ucs_status_ptr_t r = ucp_am_send_nbx(ep, NODE_AM_ID, t->hdr, NODE_HDR_LEN, t->body, t->len, &prm);
	if (r == NULL) {
		nl_tx_free(t);
		return 0;
	}
	if (UCS_PTR_IS_ERR(r)) {
		nl_log(l, NODE_LOG_DEBUG, "node link: send failed: %s", ucs_status_string(UCS_PTR_STATUS(r)));
		nl_tx_free(t);
		return -1;
	}
	return 0;
}

/* ---- calls ---------------------------------------------------------- */

#define CALL_ID(c) ((c)->link_priv[0])
#define CALL_PREV(c) ((cluster_call *)(uintptr_t)(c)->link_priv[1])
#define CALL_DEADLINE(c) ((c)->link_priv[2])

void nl_unlink_call(peer *p, cluster_call *call)
{
	cluster_call *prev = CALL_PREV(call);
	if (prev)
		prev->next = call->next;
	else
		p->head = call->next;
	if (call->next)
		call->next->link_priv[1] = (uint64_t)(uintptr_t)prev;
	else
		p->tail = prev;
	call->next = NULL;
	call->link_priv[1] = 0;
}

void nl_finish_call(node_link *l, cluster_call *call, int rc, const uint8_t *frame, size_t len, const char *msg)
{
	(void)l;
	if (rc != EMDB_OK) {
		emdb__seterr(rc, "%s", msg ? msg : "");
		frame = NULL;
		len = 0;
	}
	call->done(call, rc, frame, len);
}

static void fail_one(node_link *l, peer *p, cluster_call *call, int rc, bool timed_out, const char *msg)
{
	nl_unlink_call(p, call);
	if (rc == EMDB_ERR_NODE)
		atomic_fetch_add_explicit(&p->c.calls_failed, 1, memory_order_relaxed);
	if (timed_out)
		atomic_fetch_add_explicit(&p->c.calls_timed_out, 1, memory_order_relaxed);
	nl_finish_call(l, call, rc, NULL, 0, msg);
}

void nl_fail_calls(node_link *l, peer *p, int rc, const char *msg)
{
	while (p->head)
		fail_one(l, p, p->head, rc, false, msg);
}

/* Send a call (link thread). */
static void start_call(node_link *l, tx *t)
{
	cluster_call *call = t->call;
	peer *p = &l->peers[t->rank];
	char msg[640];
	if (l->stopping) {
		nl_tx_free(t);
		nl_finish_call(l, call, EMDB_ERR_CLOSED, NULL, 0, "the node link is shutting down");
		return;
	}
	if (atomic_load(&p->state) != NODE_PEER_UP) {
		pthread_mutex_lock(&l->mu);
		snprintf(msg, sizeof(msg), "node %u (%s) is down: %s", p->rank, p->addr,
			 p->last_error[0] ? p->last_error : "not connected yet");
		pthread_mutex_unlock(&l->mu);
		atomic_fetch_add_explicit(&p->c.calls, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&p->c.calls_failed, 1, memory_order_relaxed);
		nl_tx_free(t);
		nl_finish_call(l, call, EMDB_ERR_NODE, NULL, 0, msg);
		return;
	}
	uint64_t id = ++l->next_call_id;
	node_hdr h = { .kind = NODE_REQUEST, .version = NODE_WIRE_VERSION, .status = 0, .call_id = id };
	node_hdr_encode(&h, t->hdr);
	call->peer = p->rank;
	call->next = NULL;
	CALL_ID(call) = id;
	call->link_priv[1] = (uint64_t)(uintptr_t)p->tail;
	CALL_DEADLINE(call) = call->deadline_ns ? call->deadline_ns
						: emdb__now_ns() + (uint64_t)l->timeout_ms * 1000000ull;
	if (p->tail)
		p->tail->next = call;
	else
		p->head = call;
	p->tail = call;
	atomic_fetch_add_explicit(&p->c.calls, 1, memory_order_relaxed);
	t->call = NULL;
	if (nl_send(l, p->ep, t) < 0) {
		snprintf(msg, sizeof(msg), "node %u (%s): the request could not be sent", p->rank, p->addr);
		fail_one(l, p, call, EMDB_ERR_NODE, false, msg);
	}
}

static void start_call_mail(void *arg)
{
	tx *t = arg;
	start_call(t->l, t);
}

void nl_reply_arrived(node_link *l, peer *p, const node_hdr *h, const uint8_t *body, size_t len)
{
	cluster_call *call = p->head;
	while (call && CALL_ID(call) != h->call_id)
		call = call->next;
	if (!call) {
		atomic_fetch_add_explicit(&l->late_replies, 1, memory_order_relaxed);
		return;
	}
	nl_unlink_call(p, call);
	if (h->status == EMDB_OK) {
		call->done(call, EMDB_OK, body, len);
		return;
	}
	char msg[640];
	int rc = h->status;
	if (rc >= 0 || !strcmp(emdb_strerror(rc), "unknown error"))
		rc = EMDB_ERR_PROTOCOL;
	snprintf(msg, sizeof(msg), "node %u (%s): %.*s", p->rank, p->addr, (int)(len > 256 ? 256 : len),
		 (const char *)body);
	for (char *q = msg; *q; q++)
		if ((unsigned char)*q < 0x20)
			*q = '?';
	if (rc == EMDB_ERR_NODE)
		atomic_fetch_add_explicit(&p->c.calls_failed, 1, memory_order_relaxed);
	nl_finish_call(l, call, rc, NULL, 0, msg);
}

/* The deadlines of the calls in flight (link thread). */
static void expire_calls(node_link *l, uint64_t now)
{
	for (uint32_t r = 0; r < l->n; r++) {
		peer *p = &l->peers[r];
		cluster_call *call = p->head;
		while (call) {
			cluster_call *next = call->next;
			if (CALL_DEADLINE(call) <= now) {
				char msg[640];
				if (call->deadline_ns)
					snprintf(msg, sizeof(msg), "node %u (%s) did not answer by the call's deadline",
						 p->rank, p->addr);
				else
					snprintf(msg, sizeof(msg), "node %u (%s) did not answer within %u ms (node_timeout_ms)",
						 p->rank, p->addr, l->timeout_ms);
				fail_one(l, p, call, EMDB_ERR_NODE, true, msg);
			}
			call = next;
		}
	}
}

/* ---- the loop ------------------------------------------------------- */

/* Progress until idle, handle what the callbacks deferred, arm (inv. 2). */
void nl_pump(node_link *l)
{
	for (;;) {
		while (ucp_worker_progress(l->worker))
			;
		if (nlc_handle_deferred(l))
			continue;
		if (l->busy_poll)
			return;
		ucs_status_t st = ucp_worker_arm(l->worker);
		if (st == UCS_ERR_BUSY)
			continue;
		if (st != UCS_OK)
			nl_log(l, NODE_LOG_ERROR, "node link: ucp_worker_arm: %s", ucs_status_string(st));
		return;
	}
}

static void on_efd(evutil_socket_t fd, short what, void *arg)
{
	nl_pump(arg);
}

/* Run what other threads posted, oldest first. */
static void drain_mail(node_link *l)
{
	for (;;) {
		mail_item it;
		pthread_mutex_lock(&l->mu);
		if (!l->q_len) {
			pthread_mutex_unlock(&l->mu);
			return;
		}
		it = l->q[l->q_head];
		l->q_head = (l->q_head + 1) % l->q_cap;
		l->q_len--;
		pthread_cond_broadcast(&l->cond);
		pthread_mutex_unlock(&l->mu);
		it.fn(it.arg);
	}
}

static void on_mail(evutil_socket_t fd, short what, void *arg)
{
	node_link *l = arg;
	uint64_t v;
	ssize_t r = read(fd, &v, sizeof(v));
	(void)r;
	drain_mail(l);
	nl_pump(l);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	node_link *l = arg;
	uint64_t now = emdb__now_ns();
	expire_calls(l, now);
	nlc_tick(l, now);
	nl_pump(l);
}

/* Queue fn(arg) for the link's thread.  Returns 0, or -1 once the link is
 * closed.  Waits for room only when the queue cannot grow. */
static int mail_post(node_link *l, void (*fn)(void *), void *arg)
{
	pthread_mutex_lock(&l->mu);
	for (;;) {
		if (l->closed) {
			pthread_mutex_unlock(&l->mu);
			return -1;
		}
		if (l->q_len < l->q_cap)
			break;
		size_t cap = l->q_cap ? l->q_cap * 2 : 64;
		mail_item *q = emdb_malloc(cap * sizeof(*q));
		if (q) {
			for (size_t i = 0; i < l->q_len; i++)
				q[i] = l->q[(l->q_head + i) % l->q_cap];
			emdb_free(l->q);
			l->q = q;
			l->q_cap = cap;
			l->q_head = 0;
			break;
		}
		if (nl_on_thread(l)) { /* cannot wait for ourselves: run it now */
			pthread_mutex_unlock(&l->mu);
			fn(arg);
			return 0;
		}
		pthread_cond_wait(&l->cond, &l->mu);
	}
	l->q[(l->q_head + l->q_len) % l->q_cap] = (mail_item){ fn, arg };
	bool wake = l->q_len++ == 0;
	pthread_mutex_unlock(&l->mu);
	if (wake) {
		uint64_t one = 1;
		ssize_t w = write(l->mail_fd, &one, sizeof(one));
		(void)w;
	}
	return 0;
}

static void connect_all(void *arg)
{
	node_link *l = arg;
	for (uint32_t r = 0; r < l->n; r++)
		if (r != l->rank)
			nlc_connect(l, &l->peers[r]);
}

static void stop_now(void *arg)
{
	node_link *l = arg;
	l->stopping = true;
	for (uint32_t r = 0; r < l->n; r++)
		nl_fail_calls(l, &l->peers[r], EMDB_ERR_CLOSED, "the node link is shutting down");
	nlc_close_all(l);
	atomic_store(&l->stop, true);
	event_base_loopbreak(l->base);
}

static void *link_thread(void *arg)
{
	node_link *l = arg;
	tl_link = l;
	pthread_setname_np(pthread_self(), "emdb-link");
	nl_pump(l);
	if (l->busy_poll) {
		while (!atomic_load(&l->stop)) {
			event_base_loop(l->base, EVLOOP_NONBLOCK);
			if (!atomic_load(&l->stop))
				nl_pump(l);
		}
	} else {
		event_base_dispatch(l->base);
	}
	/* Mail that came after the stop: calls end CLOSED (stopping is set). */
	pthread_mutex_lock(&l->mu);
	for (;;) {
		if (!l->q_len) {
			l->closed = true;
			pthread_cond_broadcast(&l->cond);
			break;
		}
		pthread_mutex_unlock(&l->mu);
		drain_mail(l);
		pthread_mutex_lock(&l->mu);
	}
	pthread_mutex_unlock(&l->mu);
	/* The endpoint closes under way finish here, bounded. */
	uint64_t until = emdb__now_ns() + 2000000000ull;
	while (l->closing && emdb__now_ns() < until)
		ucp_worker_progress(l->worker);
	tl_link = NULL;
	return NULL;
}

/* ---- the cluster_link table ----------------------------------------- */

/* call() and call_owned(): the checks, then t (given, or NULL: made
 * from frame) to the link's thread.  t is the link's whatever happens. */
static int call_tx(node_link *l, uint32_t rank, const void *frame, size_t len, cluster_call *call, tx *t)
{
	if (rank >= l->n || rank == l->rank || !call || !call->done) {
		if (t)
			nl_tx_free(t);
		return emdb__seterr(EMDB_ERR_INVALID, "node link: cannot call rank %u (this node is %u of %u)", rank,
				    l->rank, l->n);
	}
	if (len > NODE_MAX_MESSAGE) {
		if (t)
			nl_tx_free(t);
		return emdb__seterr(EMDB_ERR_LIMIT, "node link: a %zu-byte request is over the link's limit", len);
	}
	peer *p = &l->peers[rank];
	if (atomic_load(&p->state) != NODE_PEER_UP) {
		char why[160];
		pthread_mutex_lock(&l->mu);
		snprintf(why, sizeof(why), "%s", p->last_error[0] ? p->last_error : "not connected yet");
		pthread_mutex_unlock(&l->mu);
		atomic_fetch_add_explicit(&p->c.calls, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&p->c.calls_failed, 1, memory_order_relaxed);
		if (t)
			nl_tx_free(t);
		return emdb__seterr(EMDB_ERR_NODE, "node %u (%s) is down: %s", rank, p->addr, why);
	}
	if (!t)
		t = nl_tx_new(l, NODE_REQUEST, 0, 0, frame, len);
	if (!t)
		return emdb__seterr(EMDB_ERR_NOMEM, "node link: no memory for a %zu-byte request", len);
	t->rank = rank;
	t->call = call;
	if (nl_on_thread(l)) {
		start_call(l, t);
		return EMDB_OK;
	}
	if (mail_post(l, start_call_mail, t) < 0) {
		nl_tx_free(t);
		return emdb__seterr(EMDB_ERR_CLOSED, "the node link is shutting down");
	}
	return EMDB_OK;
}

static int op_call(void *ctx, uint32_t rank, const void *frame, size_t len, cluster_call *call)
{
	return call_tx(ctx, rank, frame, len, call, NULL);
}

static int op_call_owned(void *ctx, uint32_t rank, void *frame, size_t len, cluster_call *call)
{
	tx *t = nl_tx_take(ctx, NODE_REQUEST, 0, 0, frame, len);
	if (!t)
		return emdb__seterr(EMDB_ERR_NOMEM, "node link: no memory for a %zu-byte request", len);
	return call_tx(ctx, rank, frame, len, call, t);
}

static int op_call_lent(void *ctx, uint32_t rank, const void *frame, size_t len, cluster_call *call,
			void (*release)(void *arg), void *arg)
{
	tx *t = nl_tx_lend(ctx, NODE_REQUEST, 0, frame, len, release, arg);
	if (!t)
		return emdb__seterr(EMDB_ERR_NOMEM, "node link: no memory for a %zu-byte request", len);
	return call_tx(ctx, rank, frame, len, call, t);
}

static void send_reply(void *arg)
{
	tx *t = arg;
	node_link *l = t->l;
	inbound *in = l->stopping ? NULL : nlc_inbound_by_gen(l, t->in_gen);
	if (!in || in->state != IN_AUTHED || in->ep_failed) {
		/* The asker's endpoint is gone: its call ends by its own
		 * deadline or endpoint error. */
		nl_tx_free(t);
		return;
	}
	nl_send(l, in->ep, t);
}

/* reply() and reply_owned(): t made from the reply (NULL: none could
 * be), sent from the link's thread. */
static int reply_tx(node_link *l, cluster_responder *r, size_t len, tx *t)
{
	int rc = EMDB_OK;
	if (!t) {
		/* Answer with the error alone, so the asker learns at once. */
		static const char why[] = "the node could not hold its reply";
		rc = len > NODE_MAX_MESSAGE ? EMDB_ERR_LIMIT : EMDB_ERR_NOMEM;
		t = nl_tx_new(l, NODE_REPLY, rc, r->call_id, why, sizeof(why) - 1);
		emdb__seterr(rc, "node link: a %zu-byte reply", len);
	}
	if (t) {
		t->rank = r->from;
		t->in_gen = r->in_gen;
		if (nl_on_thread(l)) {
			send_reply(t);
		} else if (mail_post(l, send_reply, t) < 0) {
			nl_tx_free(t);
			rc = emdb__seterr(EMDB_ERR_CLOSED, "the node link is shutting down");
		}
	}
	emdb_free(r);
	return rc;
}

static int op_reply(void *ctx, cluster_responder *r, const void *frame, size_t len)
{
	node_link *l = ctx;
	tx *t = len <= NODE_MAX_MESSAGE ? nl_tx_new(l, NODE_REPLY, 0, r->call_id, frame, len) : NULL;
	return reply_tx(l, r, len, t);
}

static int op_reply_owned(void *ctx, cluster_responder *r, void *frame, size_t len)
{
	node_link *l = ctx;
	tx *t = NULL;
	if (len <= NODE_MAX_MESSAGE)
		t = nl_tx_take(l, NODE_REPLY, 0, r->call_id, frame, len);
	else
		emdb_free(frame);
	return reply_tx(l, r, len, t);
}

static int op_reply_lent(void *ctx, cluster_responder *r, const void *frame, size_t len,
			 void (*release)(void *arg), void *arg)
{
	node_link *l = ctx;
	tx *t = NULL;
	if (len <= NODE_MAX_MESSAGE)
		t = nl_tx_lend(l, NODE_REPLY, r->call_id, frame, len, release, arg);
	else
		release(arg);
	return reply_tx(l, r, len, t);
}

static void op_post(void *ctx, void (*fn)(void *arg), void *arg)
{
	node_link *l = ctx;
	if (mail_post(l, fn, arg) < 0)
		nl_log(l, NODE_LOG_ERROR, "node link: work posted after the link closed is dropped");
}

static const cluster_link_ops ops = {
	.call = op_call,
	.reply = op_reply,
	.post = op_post,
	.call_owned = op_call_owned,
	.reply_owned = op_reply_owned,
	.call_lent = op_call_lent,
	.reply_lent = op_reply_lent,
};

void node_link_as_cluster_link(node_link *l, cluster_link *out)
{
	out->ops = &ops;
	out->ctx = l;
	out->rank = l->rank;
	out->nodes = l->n;
	out->frame_overhead = NODE_HDR_LEN;
}

void node_link_serve(node_link *l, cluster_serve_fn fn, void *ctx)
{
	atomic_store(&l->serve, NULL);
	atomic_store(&l->serve_ctx, ctx);
	atomic_store(&l->serve, fn);
}

void nl_request_arrived(node_link *l, inbound *in, const node_hdr *h, const uint8_t *body, size_t len)
{
	cluster_serve_fn fn = atomic_load(&l->serve);
	void *ctx = atomic_load(&l->serve_ctx);
	int status = 0;
	const char *why = NULL;
	cluster_responder *r = NULL;
	if (!fn) {
		status = EMDB_ERR_BUSY;
		why = "the node does not serve its peers yet";
	} else if (!(r = emdb_malloc(sizeof(*r)))) {
		status = EMDB_ERR_NOMEM;
		why = "the node is out of memory";
	}
	if (status) {
		tx *t = nl_tx_new(l, NODE_REPLY, status, h->call_id, why, strlen(why));
		if (t) {
			t->rank = in->rank;
			nl_send(l, in->ep, t);
		}
		return;
	}
	*r = (cluster_responder){ .l = l, .in_gen = in->gen, .from = in->rank, .call_id = h->call_id };
	atomic_fetch_add_explicit(&l->peers[in->rank].c.requests_served, 1, memory_order_relaxed);
	fn(ctx, in->rank, body, len, r);
}

/* ---- create, wait, report, destroy ---------------------------------- */

static int resolve(const cluster_node *n, struct sockaddr_storage *sa, socklen_t *len, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
	char port[8];
	snprintf(port, sizeof(port), "%u", n->port);
	int rc = getaddrinfo(n->host, port, &hints, &res);
	if (rc != 0 || !res) {
		snprintf(err, errlen, "cannot resolve %s: %s", n->host, gai_strerror(rc));
		return -1;
	}
	memcpy(sa, res->ai_addr, res->ai_addrlen);
	*len = (socklen_t)res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static int setup_ucx(node_link *l, char *err, size_t errlen)
{
	/* A restarted node binds its address again at once, while the
	 * connections of its previous life linger in TIME_WAIT (SO_REUSEADDR
	 * on the listener); an operator's own setting wins. */
	setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
	ucp_config_t *uc;
	ucs_status_t st = ucp_config_read(NULL, NULL, &uc);
	if (st != UCS_OK) {
		snprintf(err, errlen, "UCX configuration: %s", ucs_status_string(st));
		return -1;
	}
	ucp_params_t pp = {
		.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME,
		.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
		.name = "emdb-node",
	};
	st = ucp_init(&pp, uc, &l->ctx);
	ucp_config_release(uc);
	if (st != UCS_OK) {
		snprintf(err, errlen, "UCX init: %s", ucs_status_string(st));
		return -1;
	}
	ucp_worker_params_t wp = {
		.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
		.thread_mode = UCS_THREAD_MODE_SINGLE,
	};
	st = ucp_worker_create(l->ctx, &wp, &l->worker);
	if (st != UCS_OK) {
		snprintf(err, errlen, "UCX worker: %s", ucs_status_string(st));
		return -1;
	}
	if (!l->busy_poll) {
		st = ucp_worker_get_efd(l->worker, &l->efd);
		if (st != UCS_OK) {
			snprintf(err, errlen, "UCX worker event fd: %s", ucs_status_string(st));
			return -1;
		}
	}
	return nlc_register_am(l, err, errlen) < 0 || nlc_listen(l, err, errlen) < 0 ? -1 : 0;
}

static int setup_loop(node_link *l)
{
	struct event_config *ec = event_config_new();
	if (ec) {
		event_config_set_flag(ec, EVENT_BASE_FLAG_NOLOCK);
		l->base = event_base_new_with_config(ec);
		event_config_free(ec);
	}
	if (!l->base)
		return -1;
	l->mail_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->mail_fd < 0)
		return -1;
	l->ev_mail = event_new(l->base, l->mail_fd, EV_READ | EV_PERSIST, on_mail, l);
	l->ev_tick = event_new(l->base, -1, EV_PERSIST, on_tick, l);
	uint32_t tick_ms = l->timeout_ms / 10;
	tick_ms = tick_ms < 5 ? 5 : tick_ms > 100 ? 100 : tick_ms;
	struct timeval tv = { tick_ms / 1000, (tick_ms % 1000) * 1000 };
	if (!l->ev_mail || !l->ev_tick || event_add(l->ev_mail, NULL) || event_add(l->ev_tick, &tv))
		return -1;
	if (!l->busy_poll) {
		l->ev_efd = event_new(l->base, l->efd, EV_READ | EV_PERSIST, on_efd, l);
		if (!l->ev_efd || event_add(l->ev_efd, NULL))
			return -1;
	}
	for (uint32_t r = 0; r < l->n; r++) {
		if (r == l->rank)
			continue;
		l->peers[r].ev_retry = event_new(l->base, -1, 0, nlc_on_retry, &l->peers[r]);
		if (!l->peers[r].ev_retry)
			return -1;
	}
	return 0;
}

static int copy_conf(node_link *l, const cluster_conf *c)
{
	l->conf = *c;
	l->conf.node = emdb_malloc(c->nodes * sizeof(*c->node));
	if (!l->conf.node)
		return -1;
	memcpy(l->conf.node, c->node, c->nodes * sizeof(*c->node));
	return 0;
}

static void free_link(node_link *l)
{
	if (l->peers) {
		for (uint32_t r = 0; r < l->n; r++)
			if (l->peers[r].ev_retry)
				event_free(l->peers[r].ev_retry);
	}
	if (l->ev_efd)
		event_free(l->ev_efd);
	if (l->ev_mail)
		event_free(l->ev_mail);
	if (l->ev_tick)
		event_free(l->ev_tick);
	if (l->base)
		event_base_free(l->base);
	if (l->mail_fd >= 0)
		close(l->mail_fd);
	while (l->in) { /* their endpoints were closed by nlc_close_all */
		inbound *next = l->in->next;
		emdb_free(l->in);
		l->in = next;
	}
	if (l->listener)
		ucp_listener_destroy(l->listener);
	if (l->worker)
		ucp_worker_destroy(l->worker);
	if (l->ctx)
		ucp_cleanup(l->ctx);
	emdb_free(l->peers);
	emdb_free(l->q);
	cluster_conf_free(&l->conf);
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->mu);
	memset(l->secret, 0, sizeof(l->secret));
	emdb_free(l);
}

int node_link_create(const node_link_config *cfg, node_link **out, char *err, size_t errlen)
{
	if (!cfg || cfg->size < sizeof(node_link_config) || !cfg->conf || cfg->rank >= cfg->conf->nodes ||
	    !cfg->secret || !cfg->secret_len || cfg->secret_len > NODE_LINK_SECRET_MAX || !cfg->node_timeout_ms) {
		snprintf(err, errlen, "node link: invalid configuration (rank, cluster file, secret, timeout)");
		return EMDB_ERR_INVALID;
	}
	node_link *l = emdb_calloc(1, sizeof(*l));
	if (!l) {
		snprintf(err, errlen, "node link: out of memory");
		return EMDB_ERR_NOMEM;
	}
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cond, NULL);
	l->mail_fd = -1;
	l->efd = -1;
	l->rank = cfg->rank;
	l->n = cfg->conf->nodes;
	memcpy(l->secret, cfg->secret, cfg->secret_len);
	l->secret_len = cfg->secret_len;
	l->timeout_ms = cfg->node_timeout_ms;
	l->busy_poll = cfg->busy_poll;
	l->log_fn = cfg->log;
	l->log_arg = cfg->log_arg;
	l->next_gen = 1;
	atomic_store(&l->state, l->n == 1 ? NODE_LINK_READY : NODE_LINK_FORMING);
	int rc = EMDB_ERR_NOMEM;
	if (copy_conf(l, cfg->conf) < 0 || !(l->peers = emdb_calloc(l->n, sizeof(*l->peers)))) {
		snprintf(err, errlen, "node link: out of memory");
		goto fail;
	}
	for (uint32_t r = 0; r < l->n; r++) {
		peer *p = &l->peers[r];
		p->tag = EP_PEER;
		p->l = l;
		p->rank = r;
		p->backoff_ms = NODE_RETRY_MIN_MS;
		cluster_conf_addr(&l->conf, r, p->addr, sizeof(p->addr));
		atomic_store(&p->state, r == l->rank ? NODE_PEER_SELF : NODE_PEER_CONNECTING);
		if (resolve(&l->conf.node[r], &p->sa, &p->salen, err, errlen) < 0) {
			rc = EMDB_ERR_INVALID;
			goto fail;
		}
	}
	rc = EMDB_ERR_IO;
	if (setup_ucx(l, err, errlen) < 0)
		goto fail;
	if (setup_loop(l) < 0) {
		snprintf(err, errlen, "node link: cannot set up its event loop");
		goto fail;
	}
	/* The thread takes no signal: they are the process's main thread's. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int prc = mail_post(l, connect_all, l) < 0 ? -1 : pthread_create(&l->thread, NULL, link_thread, l);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (prc != 0) {
		snprintf(err, errlen, "node link: cannot start its thread");
		goto fail;
	}
	l->thread_started = true;
	nl_log(l, NODE_LOG_INFO, "node link: rank %u of %u in cluster '%s', listening on %s (UCX %s)", l->rank, l->n,
	       l->conf.id, l->peers[l->rank].addr, ucp_get_version_string());
	*out = l;
	return EMDB_OK;
fail:
	free_link(l);
	return rc;
}

int node_link_wait_ready(node_link *l, uint32_t timeout_ms, char *err, size_t errlen)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&l->mu);
	int rc = EMDB_ERR_TIMEOUT;
	for (;;) {
		int s = atomic_load(&l->state);
		if (s == NODE_LINK_READY || s == NODE_LINK_DEGRADED) {
			rc = EMDB_OK;
			break;
		}
		if (s == NODE_LINK_FAILED) {
			snprintf(err, errlen, "%s", l->fail_reason);
			rc = EMDB_ERR_NODE;
			break;
		}
		if (pthread_cond_timedwait(&l->cond, &l->mu, &until) == ETIMEDOUT)
			break;
	}
	if (rc == EMDB_ERR_TIMEOUT) {
		for (uint32_t r = 0; r < l->n; r++) {
			peer *p = &l->peers[r];
			int ps = atomic_load(&p->state);
			if (ps == NODE_PEER_UP || ps == NODE_PEER_SELF)
				continue;
			snprintf(err, errlen, "node %u (%s) is not reachable: %s", r, p->addr,
				 p->last_error[0] ? p->last_error : "no answer to the handshake");
			break;
		}
	}
	pthread_mutex_unlock(&l->mu);
	return rc;
}

uint32_t node_link_rank(const node_link *l)
{
	return l->rank;
}

uint32_t node_link_nodes(const node_link *l)
{
	return l->n;
}

node_link_state node_link_get_state(const node_link *l)
{
	return (node_link_state)atomic_load(&((node_link *)l)->state);
}

const cluster_conf *node_link_conf(const node_link *l)
{
	return &l->conf;
}

void node_link_peer(node_link *l, uint32_t rank, node_peer_info *out)
{
	memset(out, 0, sizeof(*out));
	if (rank >= l->n)
		return;
	peer *p = &l->peers[rank];
	out->rank = rank;
	snprintf(out->addr, sizeof(out->addr), "%s", p->addr);
	out->state = (node_peer_state)atomic_load(&p->state);
#define LD(f) out->f = atomic_load_explicit(&p->c.f, memory_order_relaxed)
	LD(bytes_sent);
	LD(msgs_sent);
	LD(bytes_received);
	LD(msgs_received);
	LD(calls);
	LD(calls_failed);
	LD(calls_timed_out);
	LD(requests_served);
	LD(connects);
#undef LD
	pthread_mutex_lock(&l->mu);
	snprintf(out->last_error, sizeof(out->last_error), "%s", p->last_error);
	pthread_mutex_unlock(&l->mu);
}

const char *node_link_state_name(node_link_state s)
{
	switch (s) {
	case NODE_LINK_FORMING: return "forming";
	case NODE_LINK_READY: return "ready";
	case NODE_LINK_DEGRADED: return "degraded";
	case NODE_LINK_FAILED: return "failed";
	}
	return "?";
}

const char *node_peer_state_name(node_peer_state s)
{
	switch (s) {
	case NODE_PEER_SELF: return "self";
	case NODE_PEER_CONNECTING: return "connecting";
	case NODE_PEER_UP: return "up";
	case NODE_PEER_DOWN: return "down";
	case NODE_PEER_REFUSED: return "refused";
	}
	return "?";
}

void node_link_destroy(node_link *l)
{
	if (!l)
		return;
	if (l->thread_started) {
		if (mail_post(l, stop_now, l) == 0)
			pthread_join(l->thread, NULL);
	}
	free_link(l);
}
