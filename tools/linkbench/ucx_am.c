/*
 * ucx_am.c - one end of the bare UCX active-message exchanges (ucx_am.h).
 *
 * Design
 *   A request's AM header is 8 bytes, the length the answering end must
 *   answer with; its body is the asker's tx bytes.  The answering end
 *   answers from its handler when the body came eagerly, or from the
 *   completion of ucp_am_recv_data_nbx (the reply length travels as that
 *   receive's user data) when it came by rendezvous; the handler then
 *   returns UCS_INPROGRESS, as UCX requires.  The asking end counts a
 *   reply once its bytes are in, the same way.  Every send is from a
 *   buffer nobody writes while an exchange runs, so sends in flight may
 *   share it; the rendezvous receives land in one buffer, whose contents
 *   nobody reads.
 *
 * Invariants
 *   1. e->got counts replies whose bytes are in, never more than once.
 *   2. Any failure of a receive, an answer, an accept or an endpoint (a
 *      peer lost) sets e->failed; the exchanges check it and give up.
 */
#include "tools/linkbench/ucx_am.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"

#define AM_ID 7
#define STALL_NS 10000000000ull

static void send_done(void *req, ucs_status_t st, void *u)
{
	(void)st;
	(void)u;
	ucp_request_free(req);
}

int ucx_am_send(ucp_ep_h ep, const void *hdr, size_t hl, const void *buf, size_t len)
{
	ucp_request_param_t p = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_FLAGS,
				  .flags = UCP_AM_SEND_FLAG_REPLY,
				  .cb.send = send_done };
	ucs_status_ptr_t r = ucp_am_send_nbx(ep, AM_ID, hdr, hl, buf, len, &p);
	return UCS_PTR_IS_ERR(r) ? -1 : 0;
}

/* A rendezvous receive: its end, and the reply length to send once it
 * completes (an answering end). */
typedef struct rx_ctx {
	ucx_am_end *e;
	ucp_ep_h reply_ep;
	size_t want;
} rx_ctx;

static void landed(ucx_am_end *e, ucp_ep_h reply_ep, size_t want)
{
	if (e->role == UCX_AM_ASK)
		e->got++;
	else if (ucx_am_send(reply_ep, NULL, 0, e->tx, want) < 0)
		e->failed = 1;
}

static void rx_done(void *req, ucs_status_t st, size_t len, void *user)
{
	rx_ctx *rx = user;
	(void)len;
	if (st != UCS_OK)
		rx->e->failed = 1;
	else
		landed(rx->e, rx->reply_ep, rx->want);
	free(rx);
	ucp_request_free(req);
}

static ucs_status_t on_am(void *arg, const void *h, size_t hl, void *data, size_t len,
			  const ucp_am_recv_param_t *prm)
{
	ucx_am_end *e = arg;
	uint64_t want = 0;

	if (hl == sizeof(want))
		memcpy(&want, h, sizeof(want));
	if (!(prm->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
		landed(e, prm->reply_ep, (size_t)want);
		return UCS_OK;
	}
	/* The data is still the sender's: receive it, and answer (or count)
	 * from the completion; the handler keeps the message (INPROGRESS). */
	rx_ctx *rx = malloc(sizeof(*rx));
	if (!rx) {
		e->failed = 1;
		return UCS_OK;
	}
	*rx = (rx_ctx){ e, prm->reply_ep, (size_t)want };
	ucp_request_param_t rp = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
				   .cb.recv_am = rx_done,
				   .user_data = rx };
	ucs_status_ptr_t r = ucp_am_recv_data_nbx(e->worker, data, e->rx, len < e->rx_cap ? len : e->rx_cap, &rp);
	if (UCS_PTR_IS_ERR(r)) {
		e->failed = 1;
		free(rx);
	} else if (r == NULL) {
		landed(e, rx->reply_ep, rx->want);
		free(rx);
	}
	return UCS_INPROGRESS;
}

int ucx_am_end_open(ucx_am_end *e, ucx_am_role role, int wakeup)
{
	ucp_config_t *c;
	ucp_params_t pp = { .field_mask = UCP_PARAM_FIELD_FEATURES,
			    .features = UCP_FEATURE_AM | (wakeup ? UCP_FEATURE_WAKEUP : 0) };
	ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
				   .thread_mode = UCS_THREAD_MODE_SINGLE };

	memset(e, 0, sizeof(*e));
	e->role = role;
	e->efd = -1;
	if (ucp_config_read(NULL, NULL, &c) != UCS_OK)
		return -1;
	ucs_status_t st = ucp_init(&pp, c, &e->ctx);
	ucp_config_release(c);
	if (st != UCS_OK) {
		e->ctx = NULL;
		return -1;
	}
	if (ucp_worker_create(e->ctx, &wp, &e->worker) != UCS_OK) {
		e->worker = NULL;
		return -1;
	}
	if (wakeup && ucp_worker_get_efd(e->worker, &e->efd) != UCS_OK)
		return -1;
	ucp_am_handler_param_t ap = { .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
						    UCP_AM_HANDLER_PARAM_FIELD_FLAGS | UCP_AM_HANDLER_PARAM_FIELD_ARG,
				      .id = AM_ID,
				      .flags = UCP_AM_FLAG_WHOLE_MSG,
				      .cb = on_am,
				      .arg = e };
	return ucp_worker_set_am_recv_handler(e->worker, &ap) == UCS_OK ? 0 : -1;
}

/* A peer lost (killed, timed out): the end's exchange gives up (inv. 2). */
static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t st)
{
	ucx_am_end *e = arg;
	(void)ep;
	(void)st;
	e->failed = 1;
}

static void on_conn(ucp_conn_request_h req, void *arg)
{
	ucx_am_end *e = arg;
	ucp_ep_params_t ep = { .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
					     UCP_EP_PARAM_FIELD_ERR_HANDLER,
			       .conn_request = req,
			       .err_mode = UCP_ERR_HANDLING_MODE_PEER,
			       .err_handler = { on_ep_error, e } };
	if (e->ep || ucp_ep_create(e->worker, &ep, &e->ep) != UCS_OK)
		e->failed = 1;
}

static struct sockaddr_in loopback(unsigned port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return sa;
}

int ucx_am_listen(ucx_am_end *e, unsigned port)
{
	struct sockaddr_in sa = loopback(port);
	ucp_listener_params_t lp = { .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
						   UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
				     .sockaddr = { (struct sockaddr *)&sa, sizeof(sa) },
				     .conn_handler = { on_conn, e } };
	if (!port || ucp_listener_create(e->worker, &lp, &e->listener) != UCS_OK) {
		e->listener = NULL;
		return -1;
	}
	return 0;
}

int ucx_am_connect(ucx_am_end *e, unsigned port, ucp_ep_h *out)
{
	struct sockaddr_in sa = loopback(port);
	ucp_ep_params_t ep = { .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
					     UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER,
			       .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
			       .sockaddr = { (struct sockaddr *)&sa, sizeof(sa) },
			       .err_mode = UCP_ERR_HANDLING_MODE_PEER,
			       .err_handler = { on_ep_error, e } };
	if (ucp_ep_create(e->worker, &ep, out) != UCS_OK) {
		*out = NULL;
		return -1;
	}
	return 0;
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

int ucx_am_reserve(ucx_am_end *e, size_t rx, size_t tx)
{
	return grow(&e->rx, &e->rx_cap, rx ? rx : 1) < 0 || grow(&e->tx, &e->tx_cap, tx ? tx : 1) < 0 ? -1 : 0;
}

int ucx_am_rounds(ucx_am_end *a, const ucp_ep_h *to, const size_t *req, const size_t *rep, unsigned n,
		  unsigned depth, uint64_t rounds, uint64_t max_ns, ucx_am_wait_fn wait, void *ctx,
		  ucx_am_result *out, char *err, size_t errlen)
{
	uint64_t round_bytes = 0;

	memset(out, 0, sizeof(*out));
	if (n == 0 || n > UCX_AM_MAX_MSGS || depth == 0) {
		snprintf(err, errlen, "bare UCX exchange: %u messages a round, depth %u", n, depth);
		return -1;
	}
	for (unsigned i = 0; i < n; i++) {
		a->hdr[i] = rep[i];
		round_bytes += req[i] + rep[i];
	}
	/* Round k is complete once n*(k+1) replies came; none of round k
	 * is posted before round k-depth is complete. */
	uint64_t sent = 0, base = a->got, t0 = emdb__now_ns(), last = t0, seen = base;
	for (;;) {
		uint64_t done = (a->got - base) / n, now = emdb__now_ns();
		if (max_ns && now - t0 >= max_ns && rounds > sent)
			rounds = sent; /* time is up: finish what is in flight */
		if (done >= rounds)
			break;
		while (sent < rounds && sent - done < depth) {
			for (unsigned i = 0; i < n; i++) {
				if (ucx_am_send(to[i], &a->hdr[i], sizeof(a->hdr[i]), a->tx, req[i]) < 0) {
					snprintf(err, errlen, "UCX: a send failed");
					return -1;
				}
			}
			sent++;
		}
		if (wait(ctx, err, errlen) < 0)
			return -1;
		if (a->failed) {
			snprintf(err, errlen, "UCX: a peer failed, or a reply could not be received");
			return -1;
		}
		if (a->got != seen) {
			seen = a->got;
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

void ucx_am_ep_close(ucp_ep_h ep, ucp_worker_h w, ucp_worker_h other)
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

void ucx_am_end_close(ucx_am_end *e)
{
	if (e->listener)
		ucp_listener_destroy(e->listener);
	if (e->worker)
		ucp_worker_destroy(e->worker);
	if (e->ctx)
		ucp_cleanup(e->ctx);
	free(e->rx);
	free(e->tx);
	memset(e, 0, sizeof(*e));
	e->efd = -1;
}

unsigned ucx_am_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = loopback(0);
	socklen_t len = sizeof(a);
	unsigned port = 0;
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}
