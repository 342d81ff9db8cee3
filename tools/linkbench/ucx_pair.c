/*
 * ucx_pair.c - a bare UCX active-message exchange between two workers of
 * one process (ucx_pair.h).
 *
 * Design
 *   A request's AM header is 8 bytes, the length B must answer with; its
 *   body is req[i] bytes of A's send buffer.  B answers from its handler
 *   when the body came eagerly, or from the completion of
 *   ucp_am_recv_data_nbx (the reply length travels as that receive's
 *   user data) when it came by rendezvous; the handler then returns
 *   UCS_INPROGRESS, as UCX requires, and the receive completes
 *   before B answers, so a reply means the request's bytes arrived.  Every send is from a buffer nobody
 *   writes while the exchange runs, so sends in flight may share it; the
 *   rendezvous receives of one exchange land in one buffer, whose
 *   contents nobody reads.
 *
 * Invariants
 *   1. A counts replies once their bytes are in (a rendezvous reply is
 *      received into A's buffer, as B receives requests); round k is
 *      complete once n*(k+1) replies came.
 *   2. No send is posted for round k until round k-depth is complete.
 *   3. The exchange returns only after every reply it asked for came (or
 *      with -1, when one did not come within 10 s).
 */
#include "tools/linkbench/ucx_pair.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include "base/clock.h"

#define AM_ID 7
#define STALL_NS 10000000000ull

typedef struct side {
	ucp_context_h ctx;
	ucp_worker_h worker;
	ucp_ep_h ep;
} side;

struct ucx_pair {
	side a, b;
	ucp_listener_h listener;
	ucp_ep_h b_ep;       /* B's endpoint of the connection (accepted) */
	uint8_t *a_buf, *a_rx, *b_rx, *b_tx;
	size_t a_cap, arx_cap, rx_cap, tx_cap;
	uint64_t hdr[UCX_PAIR_MAX_MSGS]; /* the AM headers of A's requests: UCX
				    reads them until a send completes */
	uint64_t got;        /* replies A received */
	int failed;          /* a send of B's failed */
};

static void send_done(void *req, ucs_status_t st, void *u)
{
	(void)st;
	(void)u;
	ucp_request_free(req);
}

static int am_send(ucp_ep_h ep, const void *hdr, size_t hl, const void *buf, size_t len)
{
	ucp_request_param_t p = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_FLAGS,
				  .flags = UCP_AM_SEND_FLAG_REPLY,
				  .cb.send = send_done };
	ucs_status_ptr_t r = ucp_am_send_nbx(ep, AM_ID, hdr, hl, buf, len, &p);
	return UCS_PTR_IS_ERR(r) ? -1 : 0;
}

static void b_answer(ucx_pair *p, size_t len)
{
	if (am_send(p->b_ep, NULL, 0, p->b_tx, len) < 0)
		p->failed = 1;
}

/* A rendezvous receive of B's: its reply length, kept until it completes. */
typedef struct rx_ctx {
	ucx_pair *p;
	size_t want;
} rx_ctx;

static void b_rx_done(void *req, ucs_status_t st, size_t len, void *user)
{
	rx_ctx *rx = user;
	(void)len;
	if (st != UCS_OK)
		rx->p->failed = 1;
	else
		b_answer(rx->p, rx->want);
	free(rx);
	ucp_request_free(req);
}

/* B: answer each request with the length its header names. */
static ucs_status_t b_recv(void *arg, const void *h, size_t hl, void *data, size_t len,
			   const ucp_am_recv_param_t *prm)
{
	ucx_pair *p = arg;
	uint64_t want = 0;

	if (hl == sizeof(want))
		memcpy(&want, h, sizeof(want));
	p->b_ep = prm->reply_ep;
	if (prm->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
		/* The answer goes once the data is in, from the receive's
		 * completion; the handler keeps the message (INPROGRESS). */
		rx_ctx *rx = malloc(sizeof(*rx));
		if (!rx) {
			p->failed = 1;
			return UCS_OK;
		}
		*rx = (rx_ctx){ p, (size_t)want };
		ucp_request_param_t rp = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
					   .cb.recv_am = b_rx_done,
					   .user_data = rx };
		ucs_status_ptr_t r = ucp_am_recv_data_nbx(p->b.worker, data, p->b_rx,
							  len < p->rx_cap ? len : p->rx_cap, &rp);
		if (UCS_PTR_IS_ERR(r)) {
			p->failed = 1;
			free(rx);
		} else if (r == NULL) {
			b_answer(p, rx->want);
			free(rx);
		}
		return UCS_INPROGRESS;
	}
	b_answer(p, (size_t)want);
	return UCS_OK;
}

static void a_rx_done(void *req, ucs_status_t st, size_t len, void *user)
{
	ucx_pair *p = user;
	(void)len;
	if (st != UCS_OK)
		p->failed = 1;
	else
		p->got++;
	ucp_request_free(req);
}

/* A: count each reply once its bytes are in (large ones by rendezvous). */
static ucs_status_t a_recv(void *arg, const void *h, size_t hl, void *data, size_t len,
			   const ucp_am_recv_param_t *prm)
{
	ucx_pair *p = arg;
	(void)h;
	(void)hl;
	if (prm->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
		ucp_request_param_t rp = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
					   .cb.recv_am = a_rx_done,
					   .user_data = p };
		ucs_status_ptr_t r = ucp_am_recv_data_nbx(p->a.worker, data, p->a_rx,
							  len < p->arx_cap ? len : p->arx_cap, &rp);
		if (UCS_PTR_IS_ERR(r))
			p->failed = 1;
		else if (r == NULL)
			p->got++;
		return UCS_INPROGRESS;
	}
	p->got++;
	return UCS_OK;
}

static void b_conn(ucp_conn_request_h req, void *arg)
{
	ucx_pair *p = arg;
	ucp_ep_params_t ep = { .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
			       .conn_request = req,
			       .err_mode = UCP_ERR_HANDLING_MODE_PEER };
	if (ucp_ep_create(p->b.worker, &ep, &p->b.ep) != UCS_OK)
		p->failed = 1;
}

static int side_init(side *s, ucp_am_recv_callback_t cb, ucx_pair *p)
{
	ucp_config_t *c;
	ucp_params_t pp = { .field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM };
	ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
				   .thread_mode = UCS_THREAD_MODE_SINGLE };
	if (ucp_config_read(NULL, NULL, &c) != UCS_OK)
		return -1;
	ucs_status_t st = ucp_init(&pp, c, &s->ctx);
	ucp_config_release(c);
	if (st != UCS_OK) {
		s->ctx = NULL;
		return -1;
	}
	if (ucp_worker_create(s->ctx, &wp, &s->worker) != UCS_OK) {
		s->worker = NULL;
		return -1;
	}
	ucp_am_handler_param_t ap = { .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
						    UCP_AM_HANDLER_PARAM_FIELD_FLAGS | UCP_AM_HANDLER_PARAM_FIELD_ARG,
				      .id = AM_ID,
				      .flags = UCP_AM_FLAG_WHOLE_MSG,
				      .cb = cb,
				      .arg = p };
	return ucp_worker_set_am_recv_handler(s->worker, &ap) == UCS_OK ? 0 : -1;
}

static unsigned free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(a);
	unsigned port = 0;
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static void progress(ucx_pair *p)
{
	ucp_worker_progress(p->a.worker);
	ucp_worker_progress(p->b.worker);
}

int ucx_pair_open(ucx_pair **out, char *err, size_t errlen)
{
	ucx_pair *p = calloc(1, sizeof(*p));
	*out = NULL;
	if (!p) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (side_init(&p->a, a_recv, p) < 0 || side_init(&p->b, b_recv, p) < 0) {
		snprintf(err, errlen, "UCX: cannot open a context and worker (ucx_info -d lists the transports)");
		goto fail;
	}
	unsigned port = free_port();
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ucp_listener_params_t lp = { .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
						   UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
				     .sockaddr = { (struct sockaddr *)&sa, sizeof(sa) },
				     .conn_handler = { b_conn, p } };
	if (!port || ucp_listener_create(p->b.worker, &lp, &p->listener) != UCS_OK) {
		snprintf(err, errlen, "UCX: cannot listen on 127.0.0.1:%u", port);
		p->listener = NULL;
		goto fail;
	}
	ucp_ep_params_t ep = { .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
					     UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
			       .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
			       .sockaddr = { (struct sockaddr *)&sa, sizeof(sa) },
			       .err_mode = UCP_ERR_HANDLING_MODE_PEER };
	if (ucp_ep_create(p->a.worker, &ep, &p->a.ep) != UCS_OK) {
		snprintf(err, errlen, "UCX: cannot connect to 127.0.0.1:%u", port);
		p->a.ep = NULL;
		goto fail;
	}
	*out = p;
	return 0;
fail:
	ucx_pair_close(p);
	return -1;
}

static int grow(uint8_t **buf, size_t *cap, size_t want)
{
	if (want <= *cap)
		return 0;
	uint8_t *n = realloc(*buf, want);
	if (!n)
		return -1;
	memset(n, 0x5a, want);
	*buf = n;
	*cap = want;
	return 0;
}

int ucx_pair_exchange(ucx_pair *p, const size_t *req, const size_t *rep, unsigned n, unsigned depth,
		      uint64_t rounds, uint64_t max_ns, ucx_pair_result *out, char *err, size_t errlen)
{
	size_t max_req = 1, max_rep = 1, round_bytes = 0;

	memset(out, 0, sizeof(*out));
	if (n == 0 || n > UCX_PAIR_MAX_MSGS || depth == 0) {
		snprintf(err, errlen, "ucx_pair: %u messages a round, depth %u", n, depth);
		return -1;
	}
	for (unsigned i = 0; i < n; i++) {
		max_req = req[i] > max_req ? req[i] : max_req;
		max_rep = rep[i] > max_rep ? rep[i] : max_rep;
		round_bytes += req[i] + rep[i];
	}
	if (grow(&p->a_buf, &p->a_cap, max_req) < 0 || grow(&p->b_rx, &p->rx_cap, max_req) < 0 ||
	    grow(&p->b_tx, &p->tx_cap, max_rep) < 0 || grow(&p->a_rx, &p->arx_cap, max_rep) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (unsigned i = 0; i < n; i++)
		p->hdr[i] = rep[i];
	uint64_t sent = 0, base = p->got, t0 = emdb__now_ns(), last = t0, seen = base;
	for (;;) {
		uint64_t done = (p->got - base) / n, now = emdb__now_ns();
		if (max_ns && now - t0 >= max_ns && rounds > sent)
			rounds = sent; /* time is up: finish what is in flight */
		if (done >= rounds)
			break;
		while (sent < rounds && sent - done < depth) {
			for (unsigned i = 0; i < n; i++) {
				if (am_send(p->a.ep, &p->hdr[i], sizeof(p->hdr[i]), p->a_buf, req[i]) < 0) {
					snprintf(err, errlen, "UCX: a send failed");
					return -1;
				}
			}
			sent++;
		}
		progress(p);
		if (p->failed) {
			snprintf(err, errlen, "UCX: B could not answer");
			return -1;
		}
		if (p->got != seen) {
			seen = p->got;
			last = now;
		} else if (now - last > STALL_NS) {
			snprintf(err, errlen, "UCX: no reply within 10 s");
			return -1;
		}
	}
	out->rounds = rounds;
	out->ns = emdb__now_ns() - t0;
	out->bytes = rounds * round_bytes;
	return 0;
}

static void ep_close(ucp_worker_h w, ucp_ep_h ep, ucp_worker_h other)
{
	ucp_request_param_t prm = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE };
	ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &prm);
	if (UCS_PTR_IS_PTR(r)) {
		uint64_t end = emdb__now_ns() + 2000000000ull;
		while (ucp_request_check_status(r) == UCS_INPROGRESS && emdb__now_ns() < end) {
			ucp_worker_progress(w);
			if (other)
				ucp_worker_progress(other);
		}
		ucp_request_free(r);
	}
}

void ucx_pair_close(ucx_pair *p)
{
	if (!p)
		return;
	if (p->a.ep)
		ep_close(p->a.worker, p->a.ep, p->b.worker);
	if (p->b.ep)
		ep_close(p->b.worker, p->b.ep, p->a.worker);
	if (p->listener)
		ucp_listener_destroy(p->listener);
	side *sides[2] = { &p->a, &p->b };
	for (int i = 0; i < 2; i++) {
		if (sides[i]->worker)
			ucp_worker_destroy(sides[i]->worker);
		if (sides[i]->ctx)
			ucp_cleanup(sides[i]->ctx);
	}
	free(p->a_buf);
	free(p->a_rx);
	free(p->b_rx);
	free(p->b_tx);
	free(p);
}
