/*
 * node_link_conn.c - the node link's endpoints: the listener and the
 * endpoints other nodes open to this one, this node's endpoint to each
 * peer, the handshake on both sides (net/node_wire.h), reconnecting, and
 * the receiving of every active message.
 *
 * Invariants:
 *   1. Nothing a peer sends is served or believed before its endpoint's
 *      handshake passed: REQUEST only on an inbound endpoint in state
 *      IN_AUTHED, REPLY only on this node's endpoint to a peer whose
 *      handshake is done.  Anything else is counted in bad_messages and
 *      dropped; a request before authentication also drops its endpoint.
 *   2. UCX callbacks (endpoint errors) only mark what happened; the
 *      endpoint is closed and the calls are failed after progress, in
 *      nlc_handle_deferred, never inside ucp_worker_progress's callbacks.
 *   3. An inbound endpoint is freed only in nlc_handle_deferred, nlc_tick
 *      and at close, never while a message on it is being handled.
 *   4. A message body larger than NODE_MAX_MESSAGE, or a rendezvous
 *      message from an unauthenticated endpoint, is refused before any
 *      buffer is allocated for it.
 *   5. A peer is UP exactly while this node's endpoint to it has finished
 *      its handshake and has not failed.
 *
 * State changes: peers (ep, hs, state, backoff), the inbound list, the
 * link's state (through nl_set_state), counters of received messages.
 */
#include <netdb.h>
#include <stdio.h>
#include <string.h>

#include <event2/event.h>
#include <openssl/rand.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/clock.h"
#include "net/node_link_int.h"

#define MAX_INBOUND(l) (4u * (l)->n + 16u)

/* ---- endpoints ------------------------------------------------------ */

static void close_done(void *req, ucs_status_t st, void *user)
{
	node_link *l = user;
	(void)st;
	l->closing--;
	ucp_request_free(req);
}

void nlc_close_ep(node_link *l, ucp_ep_h ep)
{
	if (!ep)
		return;
	ucp_request_param_t prm = {
		.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
		.flags = UCP_EP_CLOSE_FLAG_FORCE,
		.cb.send = close_done,
		.user_data = l,
	};
	ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &prm);
	if (UCS_PTR_IS_PTR(r))
		l->closing++;
}

/* Endpoint error (inside progress): mark it, act afterwards (inv. 2). */
static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t st)
{
	if (*(int *)arg == EP_PEER) {
		peer *p = arg;
		if (p->ep != ep)
			return;
		p->ep_failed = true;
		p->ep_error = st;
		p->l->deferred = true;
	} else {
		inbound *in = arg;
		in->ep_failed = true;
		in->l->deferred = true;
	}
}

static void count_received(node_link *l, uint32_t rank, size_t len)
{
	if (rank >= l->n)
		return;
	peer_counters *c = &l->peers[rank].c;
	atomic_fetch_add_explicit(&c->bytes_received, NODE_HDR_LEN + len, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->msgs_received, 1, memory_order_relaxed);
}

inbound *nlc_inbound_by_gen(node_link *l, uint64_t gen)
{
	for (inbound *in = l->in; in; in = in->next)
		if (in->gen == gen)
			return in;
	return NULL;
}

/* The body of an error message as printable text. */
static void reason_of(const uint8_t *body, size_t len, char *out, size_t cap)
{
	size_t n = len < cap - 1 ? len : cap - 1;
	for (size_t i = 0; i < n; i++)
		out[i] = body[i] >= 0x20 && body[i] < 0x7f ? (char)body[i] : '?';
	out[n] = '\0';
}

/* ---- this node's endpoint to a peer ---------------------------------- */

void nlc_on_retry(int fd, short what, void *arg)
{
	peer *p = arg;
	if (!p->ep && !p->l->stopping) {
		nlc_connect(p->l, p);
		nl_pump(p->l);
	}
}

void nlc_schedule_retry(node_link *l, peer *p, uint32_t ms)
{
	if (l->stopping)
		return;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	event_add(p->ev_retry, &tv);
}

static bool all_up(node_link *l)
{
	for (uint32_t r = 0; r < l->n; r++)
		if (r != l->rank && atomic_load(&l->peers[r].state) != NODE_PEER_UP)
			return false;
	return true;
}

/* This node's endpoint to p failed or was given up: close it, fail the
 * calls in flight, retry later. */
static void peer_refused(node_link *l, peer *p, const char *reason);

static void peer_lost(node_link *l, peer *p, const char *reason)
{
	if (p->pending_refusal[0]) {
		char why[sizeof(p->pending_refusal)];
		memcpy(why, p->pending_refusal, sizeof(why));
		p->pending_refusal[0] = '\0';
		peer_refused(l, p, why);
		return;
	}
	int was = atomic_load(&p->state);
	char msg[640];
	if (p->ep) {
		nlc_close_ep(l, p->ep);
		p->ep = NULL;
	}
	p->hs = HS_NONE;
	/* A node down keeps the reason it was lost for, not that of each
	 * failed reconnection. */
	if (was != NODE_PEER_DOWN)
		nl_set_last_error(p, reason);
	snprintf(msg, sizeof(msg), "node %u (%s): %s", p->rank, p->addr, reason);
	/* The state first: a caller woken by its failed call sees it. */
	if (was == NODE_PEER_UP) {
		atomic_store(&p->state, NODE_PEER_DOWN);
		nl_log(l, NODE_LOG_WARN, "node %u (%s) is down: %s", p->rank, p->addr, reason);
		if (atomic_load(&l->state) == NODE_LINK_READY) {
			nl_set_state(l, NODE_LINK_DEGRADED, NULL);
			nl_log(l, NODE_LOG_WARN, "cluster '%s' degraded: requests that need node %u fail until it is back",
			       l->conf.id, p->rank);
		}
	} else {
		nl_log(l, NODE_LOG_DEBUG, "node %u (%s): %s", p->rank, p->addr, reason);
	}
	nl_fail_calls(l, p, EMDB_ERR_NODE, msg);
	nlc_schedule_retry(l, p, p->backoff_ms);
	p->backoff_ms = p->backoff_ms * 2 > NODE_RETRY_MAX_MS ? NODE_RETRY_MAX_MS : p->backoff_ms * 2;
}

/* The peer disagreed or failed authentication (or refused us). */
static void peer_refused(node_link *l, peer *p, const char *reason)
{
	char msg[640];
	if (p->ep) {
		nlc_close_ep(l, p->ep);
		p->ep = NULL;
	}
	p->hs = HS_NONE;
	nl_set_last_error(p, reason);
	snprintf(msg, sizeof(msg), "node %u (%s): %s", p->rank, p->addr, reason);
	int was = atomic_exchange(&p->state, NODE_PEER_REFUSED);
	if (was != NODE_PEER_REFUSED)
		nl_log(l, NODE_LOG_ERROR, "refused %s", msg);
	if (atomic_load(&l->state) == NODE_LINK_FORMING)
		nl_set_state(l, NODE_LINK_FAILED, msg);
	else if (atomic_load(&l->state) == NODE_LINK_READY)
		nl_set_state(l, NODE_LINK_DEGRADED, NULL);
	nl_fail_calls(l, p, EMDB_ERR_NODE, msg);
	nlc_schedule_retry(l, p, NODE_RETRY_MAX_MS);
}

static void peer_up(node_link *l, peer *p)
{
	p->hs = HS_DONE;
	p->backoff_ms = NODE_RETRY_MIN_MS;
	uint64_t n = atomic_fetch_add(&p->c.connects, 1) + 1;
	nl_set_last_error(p, "");
	atomic_store(&p->state, NODE_PEER_UP);
	nl_log(l, NODE_LOG_INFO, "node %u (%s) is up%s", p->rank, p->addr, n > 1 ? " again" : "");
	if (!all_up(l))
		return;
	int s = atomic_load(&l->state);
	if (s == NODE_LINK_FORMING) {
		nl_set_state(l, NODE_LINK_READY, NULL);
		nl_log(l, NODE_LOG_INFO, "cluster '%s' ready: %u nodes agree, this node is rank %u", l->conf.id, l->n,
		       l->rank);
	} else if (s == NODE_LINK_DEGRADED) {
		nl_set_state(l, NODE_LINK_READY, NULL);
		nl_log(l, NODE_LOG_INFO, "cluster '%s' ready again: every node is up", l->conf.id);
	}
}

void nlc_connect(node_link *l, peer *p)
{
	char why[160];
	ucp_ep_params_t ep = {
		.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLER |
			      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
		.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
		.sockaddr = { (const struct sockaddr *)&p->sa, p->salen },
		.err_mode = UCP_ERR_HANDLING_MODE_PEER,
		.err_handler = { ep_error, p },
	};
	ucs_status_t st = ucp_ep_create(l->worker, &ep, &p->ep);
	if (st != UCS_OK) {
		p->ep = NULL;
		snprintf(why, sizeof(why), "cannot open an endpoint: %s", ucs_status_string(st));
		peer_lost(l, p, why);
		return;
	}
	p->ep_failed = false;
	p->pending_refusal[0] = '\0';
	p->attempt_ns = emdb__now_ns();
	node_hello h;
	uint8_t body[NODE_HELLO_MAX];
	node_hello_of(&l->conf, l->rank, p->rank, &h);
	if (RAND_bytes(p->nonce_c, NODE_NONCE_LEN) != 1) {
		peer_lost(l, p, "no random bytes for the handshake (OpenSSL)");
		return;
	}
	memcpy(h.nonce, p->nonce_c, NODE_NONCE_LEN);
	size_t n = node_hello_encode(&h, body);
	tx *t = nl_tx_new(l, NODE_HELLO, 0, 0, body, n);
	if (!t) {
		peer_lost(l, p, "out of memory for the handshake");
		return;
	}
	t->rank = p->rank;
	p->hs = HS_HELLO_SENT;
	if (nl_send(l, p->ep, t) < 0)
		peer_lost(l, p, "cannot send the handshake");
}

static void on_welcome(node_link *l, peer *p, const node_hdr *h, const uint8_t *body, size_t len)
{
	char why[256], reason[200];
	node_hello hh;
	const char *bad;
	uint8_t mac[NODE_MAC_LEN];
	if (h->status != EMDB_OK) {
		reason_of(body, len, reason, sizeof(reason));
		snprintf(why, sizeof(why), "it refused this node: %s", reason);
		peer_refused(l, p, why);
		return;
	}
	if (node_hello_decode(body, len, &hh, &bad) < 0) {
		snprintf(why, sizeof(why), "malformed handshake: %s", bad);
		peer_refused(l, p, why);
		return;
	}
	if (node_hello_check(&l->conf, l->rank, p->rank, &hh, reason, sizeof(reason)) < 0) {
		snprintf(why, sizeof(why), "it disagrees: %s", reason);
		peer_refused(l, p, why);
		return;
	}
	if (node_mac(l->secret, l->secret_len, true, l->conf.hash, l->rank, p->rank, p->nonce_c, hh.nonce, mac) < 0 ||
	    !node_mac_equal(mac, hh.mac)) {
		/* Our proof still goes, so that the other side finds the
		 * mismatch too whichever of the two connected first; we
		 * refuse once it answered (or the endpoint ends). */
		snprintf(p->pending_refusal, sizeof(p->pending_refusal),
			 "authentication failed: its proof does not match this node's cluster secret "
			 "(wrong cluster secret)");
	}
	node_hello me;
	uint8_t out[NODE_HELLO_MAX];
	node_hello_of(&l->conf, l->rank, p->rank, &me);
	memcpy(me.nonce, p->nonce_c, NODE_NONCE_LEN);
	if (node_mac(l->secret, l->secret_len, false, l->conf.hash, l->rank, p->rank, p->nonce_c, hh.nonce, me.mac) < 0) {
		peer_lost(l, p, "cannot compute the handshake's proof (OpenSSL)");
		return;
	}
	size_t n = node_hello_encode(&me, out);
	tx *t = nl_tx_new(l, NODE_PROOF, 0, 0, out, n);
	if (!t) {
		peer_lost(l, p, "out of memory for the handshake");
		return;
	}
	t->rank = p->rank;
	p->hs = HS_PROOF_SENT;
	if (nl_send(l, p->ep, t) < 0)
		peer_lost(l, p, "cannot send the handshake");
}

static void on_accept(node_link *l, peer *p, const node_hdr *h, const uint8_t *body, size_t len)
{
	char why[256], reason[200];
	if (p->pending_refusal[0]) {
		snprintf(why, sizeof(why), "%s", p->pending_refusal);
		p->pending_refusal[0] = '\0';
		peer_refused(l, p, why);
		return;
	}
	if (h->status != EMDB_OK) {
		reason_of(body, len, reason, sizeof(reason));
		snprintf(why, sizeof(why), "it refused this node: %s", reason);
		peer_refused(l, p, why);
		return;
	}
	peer_up(l, p);
}

/* ---- endpoints other nodes opened to this one ------------------------ */

static void drop_inbound_later(node_link *l, inbound *in)
{
	in->ep_failed = true;
	l->deferred = true;
}

static void refuse_inbound(node_link *l, inbound *in, node_kind kind, int status, const char *reason)
{
	if (in->rank < l->n) {
		char msg[640];
		nl_log(l, NODE_LOG_ERROR, "refused node %u (%s) connecting from %s: %s", in->rank,
		       l->peers[in->rank].addr, in->from, reason);
		/* A node of the file that disagrees or fails authentication
		 * keeps the cluster from forming: say so now, not at the
		 * start timeout. */
		snprintf(msg, sizeof(msg), "node %u (%s): %s", in->rank, l->peers[in->rank].addr, reason);
		if (atomic_load(&l->state) == NODE_LINK_FORMING)
			nl_set_state(l, NODE_LINK_FAILED, msg);
	} else
		nl_log(l, NODE_LOG_ERROR, "refused a node connecting from %s: %s", in->from, reason);
	tx *t = nl_tx_new(l, kind, status, 0, reason, strlen(reason));
	if (t) {
		t->rank = in->rank;
		nl_send(l, in->ep, t);
	}
	/* Dropped by the tick once past the timeout, or sooner when the
	 * other side closes it: the refusal gets the time to arrive. */
	in->state = IN_REFUSED;
}

static void on_hello(node_link *l, inbound *in, const uint8_t *body, size_t len)
{
	char reason[256];
	node_hello hh;
	const char *bad;
	if (node_hello_decode(body, len, &hh, &bad) < 0) {
		snprintf(reason, sizeof(reason), "malformed handshake: %s", bad);
		refuse_inbound(l, in, NODE_WELCOME, EMDB_ERR_PROTOCOL, reason);
		return;
	}
	if (hh.from < l->n && hh.from != l->rank)
		in->rank = hh.from; /* claimed: for the log and counters */
	count_received(l, in->rank, len);
	if (node_hello_check(&l->conf, l->rank, UINT32_MAX, &hh, reason, sizeof(reason)) < 0) {
		refuse_inbound(l, in, NODE_WELCOME, EMDB_ERR_INVALID, reason);
		return;
	}
	memcpy(in->nonce_c, hh.nonce, NODE_NONCE_LEN);
	node_hello me;
	uint8_t out[NODE_HELLO_MAX];
	node_hello_of(&l->conf, l->rank, in->rank, &me);
	if (RAND_bytes(in->nonce_a, NODE_NONCE_LEN) != 1 ||
	    node_mac(l->secret, l->secret_len, true, l->conf.hash, in->rank, l->rank, in->nonce_c, in->nonce_a,
		     me.mac) < 0) {
		refuse_inbound(l, in, NODE_WELCOME, EMDB_ERR_INTERNAL, "this node cannot compute its proof (OpenSSL)");
		return;
	}
	memcpy(me.nonce, in->nonce_a, NODE_NONCE_LEN);
	size_t n = node_hello_encode(&me, out);
	tx *t = nl_tx_new(l, NODE_WELCOME, 0, 0, out, n);
	if (!t) {
		drop_inbound_later(l, in);
		return;
	}
	t->rank = in->rank;
	in->state = IN_WELCOMED;
	nl_send(l, in->ep, t);
}

static void on_proof(node_link *l, inbound *in, const uint8_t *body, size_t len)
{
	char reason[256];
	node_hello hh;
	const char *bad;
	uint8_t mac[NODE_MAC_LEN];
	count_received(l, in->rank, len);
	if (node_hello_decode(body, len, &hh, &bad) < 0) {
		snprintf(reason, sizeof(reason), "malformed handshake: %s", bad);
		refuse_inbound(l, in, NODE_ACCEPT, EMDB_ERR_PROTOCOL, reason);
		return;
	}
	if (node_hello_check(&l->conf, l->rank, in->rank, &hh, reason, sizeof(reason)) < 0) {
		refuse_inbound(l, in, NODE_ACCEPT, EMDB_ERR_INVALID, reason);
		return;
	}
	if (memcmp(hh.nonce, in->nonce_c, NODE_NONCE_LEN) != 0 ||
	    node_mac(l->secret, l->secret_len, false, l->conf.hash, in->rank, l->rank, in->nonce_c, in->nonce_a, mac) <
		    0 ||
	    !node_mac_equal(mac, hh.mac)) {
		refuse_inbound(l, in, NODE_ACCEPT, EMDB_ERR_AUTH,
			       "authentication failed: its proof does not match this node's cluster secret (wrong cluster secret)");
		return;
	}
	/* An older endpoint from the same node (before it restarted) goes. */
	for (inbound *o = l->in; o; o = o->next)
		if (o != in && o->rank == in->rank)
			drop_inbound_later(l, o);
	in->state = IN_AUTHED;
	tx *t = nl_tx_new(l, NODE_ACCEPT, 0, 0, NULL, 0);
	if (t) {
		t->rank = in->rank;
		nl_send(l, in->ep, t);
	}
	nl_log(l, NODE_LOG_INFO, "node %u (%s) connected to this node from %s", in->rank, l->peers[in->rank].addr,
	       in->from);
}

static void on_conn_request(ucp_conn_request_h req, void *arg)
{
	node_link *l = arg;
	uint32_t count = 0;
	for (inbound *o = l->in; o; o = o->next)
		count++;
	inbound *in = l->stopping || count >= MAX_INBOUND(l) ? NULL : emdb_calloc(1, sizeof(*in));
	if (!in) {
		if (!l->stopping)
			nl_log(l, NODE_LOG_WARN, "node link: refusing a connection: %s",
			       count >= MAX_INBOUND(l) ? "too many unauthenticated connections" : "out of memory");
		ucp_listener_reject(l->listener, req);
		return;
	}
	in->tag = EP_INBOUND;
	in->l = l;
	in->rank = UINT32_MAX;
	in->created_ns = emdb__now_ns();
	snprintf(in->from, sizeof(in->from), "?");
	ucp_conn_request_attr_t ca = { .field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR };
	if (ucp_conn_request_query(req, &ca) == UCS_OK) {
		char host[NI_MAXHOST], serv[NI_MAXSERV];
		if (getnameinfo((struct sockaddr *)&ca.client_address, sizeof(ca.client_address), host, sizeof(host),
				serv, sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) == 0)
			snprintf(in->from, sizeof(in->from), "%.46s:%.8s", host, serv);
	}
	ucp_ep_params_t ep = {
		.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER |
			      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
		.conn_request = req,
		.err_mode = UCP_ERR_HANDLING_MODE_PEER,
		.err_handler = { ep_error, in },
	};
	ucs_status_t st = ucp_ep_create(l->worker, &ep, &in->ep);
	if (st != UCS_OK) {
		nl_log(l, NODE_LOG_WARN, "node link: cannot accept a connection from %s: %s", in->from,
		       ucs_status_string(st));
		emdb_free(in);
		return;
	}
	in->gen = l->next_gen++;
	in->next = l->in;
	l->in = in;
}

int nlc_listen(node_link *l, char *err, size_t errlen)
{
	peer *self = &l->peers[l->rank];
	ucp_listener_params_t lp = {
		.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
		.sockaddr = { (const struct sockaddr *)&self->sa, self->salen },
		.conn_handler = { on_conn_request, l },
	};
	ucs_status_t st = ucp_listener_create(l->worker, &lp, &l->listener);
	if (st != UCS_OK) {
		l->listener = NULL;
		snprintf(err, errlen, "node link: cannot listen on %s (rank %u in the cluster file): %s", self->addr,
			 l->rank, ucs_status_string(st));
		return -1;
	}
	return 0;
}

/* ---- receiving ------------------------------------------------------ */

static void classify(node_link *l, ucp_ep_h ep, peer **p, inbound **in)
{
	*p = NULL;
	*in = NULL;
	for (uint32_t r = 0; r < l->n; r++)
		if (r != l->rank && l->peers[r].ep == ep) {
			*p = &l->peers[r];
			return;
		}
	for (inbound *i = l->in; i; i = i->next)
		if (i->ep == ep) {
			*in = i;
			return;
		}
}

static void bad(node_link *l, const node_hdr *h, const char *why)
{
	atomic_fetch_add_explicit(&l->bad_messages, 1, memory_order_relaxed);
	nl_log(l, NODE_LOG_DEBUG, "node link: dropped a %s message: %s", node_kind_name(h->kind), why);
}

static void deliver(node_link *l, const node_hdr *h, ucp_ep_h ep, const uint8_t *body, size_t len)
{
	peer *p;
	inbound *in;
	classify(l, ep, &p, &in);
	if (in && (in->ep_failed || in->state == IN_REFUSED)) {
		bad(l, h, "its endpoint is being dropped");
		return;
	}
	switch (h->kind) {
	case NODE_HELLO:
		if (!in || in->state != IN_NEW) {
			bad(l, h, "not the start of a handshake");
			return;
		}
		on_hello(l, in, body, len);
		return;
	case NODE_PROOF:
		if (!in || in->state != IN_WELCOMED) {
			bad(l, h, "out of place in the handshake");
			return;
		}
		on_proof(l, in, body, len);
		return;
	case NODE_REQUEST:
		if (!in || in->state != IN_AUTHED) {
			if (in)
				drop_inbound_later(l, in);
			bad(l, h, "a request before the handshake");
			return;
		}
		count_received(l, in->rank, len);
		nl_request_arrived(l, in, h, body, len);
		return;
	case NODE_WELCOME:
		if (!p || p->hs != HS_HELLO_SENT) {
			bad(l, h, "out of place in the handshake");
			return;
		}
		count_received(l, p->rank, len);
		on_welcome(l, p, h, body, len);
		return;
	case NODE_ACCEPT:
		if (!p || p->hs != HS_PROOF_SENT) {
			bad(l, h, "out of place in the handshake");
			return;
		}
		count_received(l, p->rank, len);
		on_accept(l, p, h, body, len);
		return;
	case NODE_REPLY:
		if (!p || p->hs != HS_DONE) {
			bad(l, h, "a reply on an endpoint without calls");
			return;
		}
		count_received(l, p->rank, len);
		nl_reply_arrived(l, p, h, body, len);
		return;
	}
	bad(l, h, "unknown kind");
}

/* A rendezvous message under way into its own buffer. */
typedef struct rx {
	node_link *l;
	node_hdr h;
	ucp_ep_h ep;
	size_t len;
	uint8_t data[];
} rx;

static void rx_done(void *req, ucs_status_t st, size_t length, void *user)
{
	rx *x = user;
	if (st == UCS_OK)
		deliver(x->l, &x->h, x->ep, x->data, length);
	else
		atomic_fetch_add_explicit(&x->l->bad_messages, 1, memory_order_relaxed);
	emdb_free(x);
	ucp_request_free(req);
}

/* Only what an authenticated peer may send comes by rendezvous (inv. 4). */
static bool may_receive_large(node_link *l, const node_hdr *h, ucp_ep_h ep, size_t len)
{
	peer *p;
	inbound *in;
	if (len > NODE_MAX_MESSAGE)
		return false;
	classify(l, ep, &p, &in);
	if (h->kind == NODE_REQUEST)
		return in && in->state == IN_AUTHED && !in->ep_failed;
	if (h->kind == NODE_REPLY)
		return p && p->hs == HS_DONE;
	return false;
}

static ucs_status_t am_recv(void *arg, const void *header, size_t hlen, void *data, size_t len,
			    const ucp_am_recv_param_t *param)
{
	node_link *l = arg;
	node_hdr h;
	if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) || node_hdr_decode(header, hlen, &h) < 0) {
		atomic_fetch_add_explicit(&l->bad_messages, 1, memory_order_relaxed);
		nl_log(l, NODE_LOG_DEBUG, "node link: dropped a message without a valid link header");
		return UCS_OK;
	}
	if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
		deliver(l, &h, param->reply_ep, data, len);
		return UCS_OK;
	}
	if (!may_receive_large(l, &h, param->reply_ep, len)) {
		bad(l, &h, "a large message from an endpoint not allowed to send one");
		return UCS_ERR_REJECTED;
	}
	rx *x = emdb_malloc(sizeof(*x) + len);
	if (!x) {
		nl_log(l, NODE_LOG_WARN, "node link: no memory for a %zu-byte message", len);
		return UCS_ERR_NO_MEMORY;
	}
	x->l = l;
	x->h = h;
	x->ep = param->reply_ep;
	x->len = len;
	ucp_request_param_t prm = {
		.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
		.cb.recv_am = rx_done,
		.user_data = x,
	};
	ucs_status_ptr_t r = ucp_am_recv_data_nbx(l->worker, data, x->data, len, &prm);
	if (r == NULL) {
		deliver(l, &h, x->ep, x->data, len);
		emdb_free(x);
	} else if (UCS_PTR_IS_ERR(r)) {
		atomic_fetch_add_explicit(&l->bad_messages, 1, memory_order_relaxed);
		emdb_free(x);
	}
	/* UCX owns the descriptor once ucp_am_recv_data_nbx was called; the
	 * request (if any) is ours until rx_done. */
	return UCS_INPROGRESS;
}

int nlc_register_am(node_link *l, char *err, size_t errlen)
{
	ucp_am_handler_param_t ap = {
		.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
			      UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG,
		.id = NODE_AM_ID,
		.flags = UCP_AM_FLAG_WHOLE_MSG,
		.cb = am_recv,
		.arg = l,
	};
	ucs_status_t st = ucp_worker_set_am_recv_handler(l->worker, &ap);
	if (st != UCS_OK) {
		snprintf(err, errlen, "node link: cannot register its active message: %s", ucs_status_string(st));
		return -1;
	}
	return 0;
}

/* ---- after progress, periodically, at close -------------------------- */

static void free_inbound(node_link *l, inbound **link)
{
	inbound *in = *link;
	*link = in->next;
	nlc_close_ep(l, in->ep);
	emdb_free(in);
}

bool nlc_handle_deferred(node_link *l)
{
	if (!l->deferred)
		return false;
	l->deferred = false;
	for (uint32_t r = 0; r < l->n; r++) {
		peer *p = &l->peers[r];
		if (r == l->rank || !p->ep_failed)
			continue;
		p->ep_failed = false;
		char why[160];
		if (p->hs == HS_DONE)
			snprintf(why, sizeof(why), "connection lost (%s)", ucs_status_string(p->ep_error));
		else
			snprintf(why, sizeof(why), "cannot connect (%s)", ucs_status_string(p->ep_error));
		peer_lost(l, p, why);
	}
	for (inbound **i = &l->in; *i;) {
		if ((*i)->ep_failed)
			free_inbound(l, i);
		else
			i = &(*i)->next;
	}
	return true;
}

void nlc_tick(node_link *l, uint64_t now)
{
	uint64_t limit = (uint64_t)l->timeout_ms * 1000000ull;
	for (uint32_t r = 0; r < l->n; r++) {
		peer *p = &l->peers[r];
		if (r == l->rank || !p->ep || (p->hs != HS_HELLO_SENT && p->hs != HS_PROOF_SENT))
			continue;
		if (now - p->attempt_ns > limit) {
			char why[160];
			snprintf(why, sizeof(why), "no answer to the handshake within %u ms", l->timeout_ms);
			peer_lost(l, p, why);
		}
	}
	for (inbound **i = &l->in; *i;) {
		if ((*i)->state != IN_AUTHED && now - (*i)->created_ns > limit)
			free_inbound(l, i);
		else
			i = &(*i)->next;
	}
}

void nlc_close_all(node_link *l)
{
	for (uint32_t r = 0; r < l->n; r++) {
		peer *p = &l->peers[r];
		if (r == l->rank)
			continue;
		if (p->ev_retry)
			event_del(p->ev_retry);
		nlc_close_ep(l, p->ep);
		p->ep = NULL;
	}
	while (l->in)
		free_inbound(l, &l->in);
	if (l->listener) {
		ucp_listener_destroy(l->listener);
		l->listener = NULL;
	}
}
