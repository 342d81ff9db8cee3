/*
 * net.c - the tcp://, tls:// and unix:// transport: one socket, many
 * requests in flight, one receiving thread, and synchronous calls that
 * read their own response.  Connecting (the socket, TLS) is net_dial.c's;
 * the handle's state is net_int.h's.
 *
 * Sending.  The submitting thread encodes its request (protocol/proto.h;
 * the big ones as a scatter-gather list whose arrays are the caller's own
 * ids, offsets and gradients, never copied), registers the future in the
 * table of requests sent under its id, then writes the frame with
 * sendmsg() under send_lock, so that frames of different threads never
 * interleave.  Every send and receive passes MSG_DONTWAIT: a full socket
 * buffer is waited out with poll() until the request's deadline.
 *
 * Receiving.  One thread at a time holds the socket's read side
 * (`reading`): the receiver thread, or a synchronous call (net_run) that
 * found nobody reading when it queued its request.  That call then reads
 * frames itself until its own response is in, completing any others it
 * meets, and hands the read side back; a single call in flight, the usual
 * inference Lookup, so costs no thread hand-off at all (the receiver
 * would have to wake, then wake the caller).  Its first wait for the
 * response is a blocking recv() bounded by SO_RCVTIMEO, set to the
 * handle's timeout (the socket itself is blocking, for this one call):
 * poll() then recv() would cost one more system call per Lookup.  With
 * busy_poll_us, non-blocking recv()s come first, for up to that long.  The
 * receiver sleeps while no request is pending or someone else reads.
 * The reader reads a header, finds the future by the request id, marks
 * it RUNNING and reads the body straight into the caller's buffers where
 * the body is vectors (PULL, LOOKUP, READ_STATE: fixed part first,
 * checked, then the floats into `out`), or into its own buffer to decode
 * (everything else).  Then it completes the future, which wakes its
 * waiter.  A response whose request is gone (timed out or
 * abandoned) is read and dropped; if it was a PREFETCH, its ticket handle
 * is queued and released by the next sender (the receiver never takes
 * send_lock, so a sender blocked on a full socket can never wait for it).
 *
 * Operations.  What differs from one operation to the next is its row of
 * CL_OP_MAP (client/client_int.h), expanded by net_ops.c into net_ops:
 * the wire opcode, the encoder (a flat frame, or a scatter-gather list
 * for the big requests), and how the response reaches the caller (decoded
 * from a buffered body, or vectors straight into the caller's array).
 * This file knows no operation, except the vector responses' layouts
 * (recv_vector_resp) and a PREFETCH's ticket (drop_response).
 *
 * TLS.  A tls:// handle does the handshake right after connecting
 * (net_dial.c: the server's certificate and name are checked there),
 * then moves the same frames through one SSL (protocol/tls_io.h): sends and receives become
 * non-blocking SSL calls, each made holding tls_lock (OpenSSL allows one
 * thread in an SSL at a time; the sender and the reader run side by side),
 * and waits are poll() outside the lock.  The socket stays non-blocking,
 * so a synchronous call's first wait polls instead of blocking in recv.
 * Bytes OpenSSL has already read count as readable.  A send that had to
 * wait has handed its first record to OpenSSL, which will send it before
 * anything else, so a timeout then breaks the handle, as one after the
 * first byte does over plain TCP.
 *
 * Invariants:
 *   1. `pending` holds exactly the QUEUED futures, keyed by request id,
 *      and n_pending counts them; ids come from one counter and are never
 *      reused on a connection.
 *   2. Once the handshake is over, only the holder of `reading` reads the
 *      socket, and only it turns a pending future RUNNING; a RUNNING
 *      future is completed by that thread before it gives `reading` back
 *      (future.c inv. 2).  `reading` is taken and given back under
 *      c->lock; whoever gives it back with requests still pending wakes
 *      the receiver.
 *   3. Frames are written whole under send_lock or the handle is broken:
 *      a send that fails or times out after its first byte leaves the
 *      stream unframed, so it breaks the handle.  One that times out
 *      before any byte was written fails only its own request.
 *   4. `broken` is sticky.  Breaking completes every pending future with
 *      EMDB_ERR_CLOSED, refuses every later request, and shuts the socket
 *      down so the receiver and any blocked sender return at once.
 *   5. A body that stops arriving half-way for the handle's timeout breaks
 *      the handle (it cannot be resynchronised); a silent server between
 *      frames does not (waiters time out by their own deadlines).
 *
 * State changes: pending, n_pending, reading, broken, orphans under
 * c->lock; the socket's write side under send_lock; its read side and
 * rxbuf by the holder of `reading` only; the SSL (tls://) under tls_lock,
 * taken inside send_lock or by the holder of `reading`, never the other
 * way round.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/client.h>

#include "client/client_int.h"
#include "client/net_int.h"
#include "client/uri.h"
#include "protocol/proto.h"
#include "protocol/tls_io.h"

/* ---- socket I/O ---------------------------------------------------- */


/* One sendmsg(2), or its TLS form: sendmsg's results, and for TLS *events
 * says what to wait for after EAGAIN.  A TLS send that must wait has
 * already committed its first record to OpenSSL, which will send it
 * before anything else: *committed says so. */
static ssize_t sock_sendv(net_state *n, proto_iov *v, short *events, bool *committed)
{
	*events = POLLOUT;
	if (!n->ssl) {
		struct msghdr mh = { .msg_iov = v->iov, .msg_iovlen = (size_t)v->n };
		return sendmsg(n->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	pthread_mutex_lock(&n->tls_lock);
	ssize_t k = tls_io_sendv(n->ssl, v->iov, v->n, events);
	int e = errno;
	pthread_mutex_unlock(&n->tls_lock);
	if (k < 0 && e == EAGAIN)
		*committed = true;
	errno = e;
	return k;
}

/* errno's text, or for a TLS failure OpenSSL's reason. */
static const char *sock_error(const net_state *n, int e)
{
	return n->ssl && e == EPROTO ? tls_io_error() : strerror(e);
}

/* Write the whole of v.  *sent counts the bytes written.  Returns EMDB_OK,
 * TIMEOUT (deadline passed) or CLOSED (the socket failed; msg says how). */
static int send_all(net_state *n, proto_iov *v, uint64_t deadline, size_t *sent, char *msg, size_t msglen)
{
	size_t left = v->len;
	bool committed = false;
	*sent = 0;
	while (left) {
		short events;
		ssize_t k = sock_sendv(n, v, &events, &committed);
		if (k > 0) {
			*sent += (size_t)k;
			left = proto_iov_advance(v, (size_t)k);
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd p = { .fd = n->fd, .events = events };
			int w = ms_until(deadline);
			if (w == 0 || poll(&p, 1, w) == 0) {
				snprintf(msg, msglen, "sending to %s: no socket space within the timeout", n->peer);
				if (committed && *sent == 0)
					*sent = 1; /* part of the frame is in OpenSSL's hands */
				return EMDB_ERR_TIMEOUT;
			}
			continue;
		}
		snprintf(msg, msglen, "sending to %s: %s", n->peer, k < 0 ? sock_error(n, errno) : "nothing written");
		return EMDB_ERR_CLOSED;
	}
	return EMDB_OK;
}

/* Copy up to len bytes received ahead into p; returns how many. */
static size_t take_ahead(net_state *n, uint8_t *p, size_t len)
{
	size_t k = n->ahead_len - n->ahead_off;
	if (k > len)
		k = len;
	memcpy(p, n->ahead + n->ahead_off, k);
	n->ahead_off += k;
	return k;
}

/* recv(2) with MSG_DONTWAIT, or its TLS form with recv's results (a TLS
 * failure is EPROTO; n->rd_wants_wr says an EAGAIN waits for POLLOUT). */
static ssize_t sock_recv(net_state *n, void *p, size_t len)
{
	if (!n->ssl)
		return recv(n->fd, p, len, MSG_DONTWAIT);
	short want = POLLIN;
	pthread_mutex_lock(&n->tls_lock);
	ssize_t k = tls_io_recv(n->ssl, p, len, &want);
	int e = errno;
	pthread_mutex_unlock(&n->tls_lock);
	n->rd_wants_wr = k < 0 && e == EAGAIN && want == POLLOUT;
	errno = e;
	return k;
}

/* What a reader that got EAGAIN waits for. */
static short rd_events(const net_state *n)
{
	return n->rd_wants_wr ? POLLOUT : POLLIN;
}

/* Whether OpenSSL holds received bytes that poll() would not report. */
static bool tls_pending(net_state *n)
{
	if (!n->ssl)
		return false;
	pthread_mutex_lock(&n->tls_lock);
	bool p = tls_io_pending(n->ssl);
	pthread_mutex_unlock(&n->tls_lock);
	return p;
}

/* Read exactly len bytes.  `idle`: the first byte may take forever (we are
 * between frames).  Otherwise each wait for more bytes lasts at most
 * stall_ms (0 = no limit) and never goes past deadline (0 = none).
 * Returns EMDB_OK, CLOSED (EOF or error) or TIMEOUT; msg says which.
 *
 * Bytes come from the read-ahead buffer first.  A read smaller than half
 * of it refills it with whatever the socket holds, so that a small
 * response (a header, a Lookup's few fields and floats) costs one recv,
 * not one per field; a larger one goes straight into buf. */
static int recv_full(net_state *n, void *buf, size_t len, bool idle, uint32_t stall_ms,
		     uint64_t deadline, char *msg, size_t msglen)
{
	uint8_t *p = buf;
	size_t got = take_ahead(n, p, len);
	if (got) {
		p += got;
		len -= got;
		idle = false;
	}
	while (len) {
		bool small = len < NET_AHEAD / 2;
		ssize_t k = small ? sock_recv(n, n->ahead, NET_AHEAD) : sock_recv(n, p, len);
		if (k > 0) {
			size_t used = (size_t)k;
			if (small) {
				n->ahead_off = 0;
				n->ahead_len = (size_t)k;
				used = take_ahead(n, p, len);
			}
			p += used;
			len -= used;
			idle = false;
			continue;
		}
		if (k == 0) {
			snprintf(msg, msglen, "%s closed the connection", n->peer);
			return EMDB_ERR_CLOSED;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			snprintf(msg, msglen, "receiving from %s: %s", n->peer, sock_error(n, errno));
			return EMDB_ERR_CLOSED;
		}
		int w = ms_until(deadline);
		if (!idle && stall_ms && (w < 0 || (uint32_t)w > stall_ms))
			w = (int)stall_ms;
		if (idle && !deadline)
			w = -1;
		struct pollfd pf = { .fd = n->fd, .events = rd_events(n) };
		int r = w == 0 ? 0 : poll(&pf, 1, w);
		if (r == 0) {
			snprintf(msg, msglen, "receiving from %s: %s", n->peer,
				 idle ? "no response within the timeout" : "the response stalled half-way");
			return EMDB_ERR_TIMEOUT;
		}
	}
	return EMDB_OK;
}

/* ---- the table of requests sent ------------------------------------ */

static void pending_add_locked(net_state *n, emdb_future *f)
{
	emdb_future **b = &n->pending[f->req_id & (NET_BUCKETS - 1)];
	n->n_pending++;
	f->prev = NULL;
	f->next = *b;
	if (*b)
		(*b)->prev = f;
	*b = f;
}

static void pending_del_locked(net_state *n, emdb_future *f)
{
	n->n_pending--;
	if (f->prev)
		f->prev->next = f->next;
	else
		n->pending[f->req_id & (NET_BUCKETS - 1)] = f->next;
	if (f->next)
		f->next->prev = f->prev;
	f->next = f->prev = NULL;
}

static emdb_future *pending_find_locked(net_state *n, uint64_t id)
{
	emdb_future *f = n->pending[id & (NET_BUCKETS - 1)];
	while (f && f->req_id != id)
		f = f->next;
	return f;
}

static void net_unlink_locked(emdb_client *c, emdb_future *f)
{
	pending_del_locked(c->priv, f);
}

/* Invariant 4. */
static void net_break(emdb_client *c, const char *why)
{
	net_state *n = c->priv;
	pthread_mutex_lock(&c->lock);
	if (!n->broken) {
		n->broken = true;
		snprintf(n->broken_msg, sizeof(n->broken_msg), "connection lost: %.400s", why);
		for (size_t b = 0; b < NET_BUCKETS; b++) {
			while (n->pending[b]) {
				emdb_future *f = n->pending[b];
				pending_del_locked(n, f);
				cl_complete_locked(f, EMDB_ERR_CLOSED, n->broken_msg);
			}
		}
		pthread_cond_broadcast(&n->rx_cond);
	}
	pthread_mutex_unlock(&c->lock);
	shutdown(n->fd, SHUT_RDWR);
}

/* ---- submitting ---------------------------------------------------- */

/* Send TICKET_FREE for handle as request `id`; caller holds send_lock. */
static int send_ticket_free(emdb_client *c, uint64_t handle, char *msg, size_t msglen)
{
	net_state *n = c->priv;
	uint8_t buf[64];
	size_t len, sent;
	proto_ticket_free_req r = { handle };
	uint64_t id = __atomic_fetch_add(&n->next_id, 1, __ATOMIC_RELAXED);
	if (proto_ticket_free_req_encode(buf, sizeof(buf), id, &r, &len) != EMDB_OK)
		return EMDB_OK; /* cannot happen for a u64; nothing to release */
	proto_iov v = { .n = 1, .len = len };
	v.iov[0].iov_base = buf;
	v.iov[0].iov_len = len;
	uint32_t ms = __atomic_load_n(&c->timeout_ms, __ATOMIC_RELAXED);
	int rc = send_all(n, &v, ms ? cl_now_ns() + (uint64_t)ms * 1000000ull : 0, &sent, msg, msglen);
	if (rc != EMDB_OK)
		net_break(c, msg);
	return rc;
}

/* Release the tickets of abandoned Prefetches; caller holds send_lock. */
static void flush_orphans(emdb_client *c)
{
	net_state *n = c->priv;
	char msg[CL_MSG_MAX];
	for (;;) {
		uint64_t h = 0;
		pthread_mutex_lock(&c->lock);
		if (n->n_orphans && !n->broken)
			h = n->orphans[--n->n_orphans];
		pthread_mutex_unlock(&c->lock);
		if (!h || send_ticket_free(c, h, msg, sizeof(msg)) != EMDB_OK)
			return;
	}
}

/* Give the socket's read side back (invariant 2). */
static void rx_release(emdb_client *c)
{
	net_state *n = c->priv;
	pthread_mutex_lock(&c->lock);
	n->reading = false;
	if (n->n_pending)
		pthread_cond_signal(&n->rx_cond);
	pthread_mutex_unlock(&c->lock);
}

/* Queue f and send it.  With `self`, also take the socket's read side if
 * nobody holds it, and return true when taken: the caller must then read
 * until f is done and call rx_release.  Otherwise the receiver is woken if
 * it sleeps. */
static bool net_send(emdb_client *c, emdb_future *f, bool self)
{
	net_state *n = c->priv;
	char msg[CL_MSG_MAX];
	uint8_t flat[NET_FLAT_MAX] __attribute__((aligned(8)));
	uint8_t *heap = NULL;
	proto_iov v;
	size_t sent;
	bool mine = false;

	uint16_t op = net_ops[f->a.op].wire;
	if (proto_op_version(op) > c->version) {
		/* The server would take it for an unknown opcode and close
		 * the connection: refuse it here, sending nothing. */
		snprintf(msg, sizeof(msg),
			 "%s: the server speaks protocol version %u; %s needs version %u", f->a.what,
			 c->version, proto_op_name(op), proto_op_version(op));
		cl_complete(f, EMDB_ERR_UNSUPPORTED, msg);
		return false;
	}
	f->req_id = __atomic_fetch_add(&n->next_id, 1, __ATOMIC_RELAXED);
	int rc = net_encode(&f->a, f->req_id, &v, flat, &heap, msg, sizeof(msg));
	if (rc == EMDB_OK && v.len - PROTO_HDR_SIZE > n->max_body) {
		snprintf(msg, sizeof(msg), "%s: a %zu-byte request exceeds the server's limit of %u bytes",
			 f->a.what, v.len - PROTO_HDR_SIZE, n->max_body);
		rc = EMDB_ERR_LIMIT;
	}
	if (rc != EMDB_OK) {
		emdb_free(heap);
		cl_complete(f, rc, msg);
		return false;
	}

	pthread_mutex_lock(&c->lock);
	if (n->broken) {
		cl_complete_locked(f, EMDB_ERR_CLOSED, n->broken_msg);
		pthread_mutex_unlock(&c->lock);
		emdb_free(heap);
		return false;
	}
	pending_add_locked(n, f);
	f->state = FUT_QUEUED;
	if (!n->reading) {
		if (self)
			mine = n->reading = true;
		else
			pthread_cond_signal(&n->rx_cond);
	}
	bool orphans = n->n_orphans != 0;
	pthread_mutex_unlock(&c->lock);

	pthread_mutex_lock(&n->send_lock);
	if (orphans)
		flush_orphans(c);
	rc = send_all(n, &v, f->deadline, &sent, msg, sizeof(msg));
	pthread_mutex_unlock(&n->send_lock);
	emdb_free(heap);
	if (rc == EMDB_OK)
		return mine;
	if (rc == EMDB_ERR_TIMEOUT && sent == 0) {
		/* Invariant 3: nothing of it went out; only it fails. */
		pthread_mutex_lock(&c->lock);
		if (f->state == FUT_QUEUED) {
			pending_del_locked(n, f);
			char m2[CL_MSG_MAX];
			snprintf(m2, sizeof(m2), "%s: %.400s", f->a.what, msg);
			cl_complete_locked(f, EMDB_ERR_TIMEOUT, m2);
		}
		pthread_mutex_unlock(&c->lock);
	} else {
		net_break(c, msg);
	}
	if (mine)
		rx_release(c);
	return false;
}

static void net_submit(emdb_client *c, emdb_future *f)
{
	net_send(c, f, false);
}

static void net_ticket_release(emdb_client *c, emdb_client_ticket *t)
{
	net_state *n = c->priv;
	char msg[CL_MSG_MAX];
	if (!t->handle)
		return;
	pthread_mutex_lock(&c->lock);
	bool broken = n->broken;
	pthread_mutex_unlock(&c->lock);
	if (broken)
		return; /* the server freed the connection's tickets */
	pthread_mutex_lock(&n->send_lock);
	send_ticket_free(c, t->handle, msg, sizeof(msg));
	pthread_mutex_unlock(&n->send_lock);
}

/* ---- receiving ----------------------------------------------------- */

/* Drop len body bytes. */
static int discard(net_state *n, uint64_t len, uint32_t stall, char *msg, size_t msglen)
{
	uint8_t sink[4096];
	while (len) {
		size_t k = len < sizeof(sink) ? (size_t)len : sizeof(sink);
		int rc = recv_full(n, sink, k, false, stall, 0, msg, msglen);
		if (rc != EMDB_OK)
			return rc;
		len -= k;
	}
	return EMDB_OK;
}

/* Read a whole body of len bytes into n->rxbuf. */
static int recv_body(net_state *n, uint32_t len, uint32_t stall, char *msg, size_t msglen)
{
	if (len > n->rxcap) {
		uint8_t *b = emdb_malloc(len);
		if (!b)
			return EMDB_ERR_NOMEM;
		emdb_free(n->rxbuf);
		n->rxbuf = b;
		n->rxcap = len;
	}
	return recv_full(n, n->rxbuf, len, false, stall, 0, msg, msglen);
}

static size_t pad8(size_t x)
{
	return (x + 7) & ~(size_t)7;
}

/* A segment of a vector response: `len` bytes to `dst`, or to a sink
 * (checked to be zero when `zero`) when dst is NULL. */
typedef struct seg {
	void *dst;
	size_t len;
	bool zero;
} seg;

/* Receive a vector response body: the fixed part (fixed_len bytes, into
 * fixed[]) is read and checked by `check` first; then the segments.
 * Returns the operation's result in *res; the return value is a stream
 * error (the handle breaks) or EMDB_OK. */
static int recv_vectors(net_state *n, const proto_hdr *h, uint32_t stall, uint8_t *fixed, size_t fixed_len,
			const seg *segs, int n_segs, int *res, char *msg, size_t msglen)
{
	uint64_t total = fixed_len;
	for (int i = 0; i < n_segs; i++)
		total += segs[i].len;
	if (h->body_len != total) {
		snprintf(msg, msglen, "%s response of %u bytes, expected %llu", proto_op_name(h->opcode),
			 h->body_len, (unsigned long long)total);
		*res = EMDB_ERR_PROTOCOL;
		return discard(n, h->body_len, stall, msg, msglen) == EMDB_OK ? EMDB_OK : EMDB_ERR_CLOSED;
	}
	int rc = recv_full(n, fixed, fixed_len, false, stall, 0, msg, msglen);
	if (rc != EMDB_OK)
		return rc;
	for (int i = 0; i < n_segs; i++) {
		if (segs[i].dst) {
			rc = recv_full(n, segs[i].dst, segs[i].len, false, stall, 0, msg, msglen);
		} else {
			uint8_t pad[8] = { 0 };
			if (segs[i].len <= sizeof(pad)) {
				rc = recv_full(n, pad, segs[i].len, false, stall, 0, msg, msglen);
				for (size_t k = 0; rc == EMDB_OK && segs[i].zero && k < segs[i].len; k++)
					if (pad[k] && *res == EMDB_OK) {
						snprintf(msg, msglen, "%s response: nonzero padding",
							 proto_op_name(h->opcode));
						*res = EMDB_ERR_PROTOCOL;
					}
			} else {
				rc = discard(n, segs[i].len, stall, msg, msglen);
			}
		}
		if (rc != EMDB_OK)
			return rc;
	}
	return EMDB_OK;
}

static uint32_t rd32(const uint8_t *p)
{
	uint32_t x;
	memcpy(&x, p, 4);
	return x;
}

/* Checked rows * width * 4 as a size_t, or SIZE_MAX. */
static size_t floats_bytes(size_t rows, size_t width)
{
	size_t b;
	if (__builtin_mul_overflow(rows, width, &b) || __builtin_mul_overflow(b, (size_t)4, &b) ||
	    b > UINT32_MAX)
		return SIZE_MAX;
	return b;
}

/* PULL, LOOKUP, READ_STATE with status 0: straight into the outputs. */
static int recv_vector_resp(net_state *n, emdb_future *f, const proto_hdr *h, uint32_t stall, int *res, char *msg,
			    size_t msglen)
{
	cl_args *a = &f->a;
	uint8_t fixed[16];
	seg s[4];
	int ns = 0;
	size_t rows = a->n_rows;
	size_t width = a->op == CL_READ_STATE ? a->per_row : a->dim;
	size_t vb = floats_bytes(rows, width);
	size_t fixed_len = a->op == CL_LOOKUP ? 16 : 8;

	if (vb == SIZE_MAX) {
		snprintf(msg, msglen, "%s: response larger than a frame", a->what);
		*res = EMDB_ERR_PROTOCOL;
		return discard(n, h->body_len, stall, msg, msglen);
	}
	if (a->op == CL_READ_STATE) {
		/* The width is the server's to tell: read the fixed part
		 * first, so that a table of another width is a DIM error and
		 * not a short read into state. */
		if (h->body_len < 8) {
			*res = EMDB_ERR_PROTOCOL;
			snprintf(msg, msglen, "READ_STATE response of %u bytes", h->body_len);
			return discard(n, h->body_len, stall, msg, msglen);
		}
		int rc = recv_full(n, fixed, 8, false, stall, 0, msg, msglen);
		if (rc != EMDB_OK)
			return rc;
		if (rd32(fixed) != a->n || rd32(fixed + 4) != a->per_row) {
			snprintf(msg, msglen, "%s: table %u keeps %u state floats per row, not %u", a->what,
				 a->table, rd32(fixed + 4), a->per_row);
			*res = rd32(fixed) != a->n ? EMDB_ERR_PROTOCOL : EMDB_ERR_DIM;
			return discard(n, h->body_len - 8, stall, msg, msglen);
		}
		s[ns++] = (seg){ a->out, vb, false };
		s[ns++] = (seg){ NULL, pad8(vb) - vb, true };
		s[ns++] = (seg){ a->found, a->n, false };
		s[ns++] = (seg){ NULL, pad8(a->n) - a->n, true };
		proto_hdr rest = *h;
		rest.body_len -= 8;
		return recv_vectors(n, &rest, stall, fixed, 0, s, ns, res, msg, msglen);
	}

	s[ns++] = (seg){ a->out, vb, false };
	s[ns++] = (seg){ NULL, pad8(vb) - vb, true };
	if (a->op == CL_LOOKUP && a->found) {
		s[ns++] = (seg){ a->found, a->n, false };
		s[ns++] = (seg){ NULL, pad8(a->n) - a->n, true };
	}
	int rc = recv_vectors(n, h, stall, fixed, fixed_len, s, ns, res, msg, msglen);
	if (rc != EMDB_OK || *res != EMDB_OK)
		return rc;
	bool ok = rd32(fixed) == rows && rd32(fixed + 4) == a->dim;
	if (a->op == CL_LOOKUP)
		ok = ok && rd32(fixed + 8) == (a->found ? PROTO_LOOKUP_FOUND : 0u) && rd32(fixed + 12) == 0;
	if (!ok) {
		snprintf(msg, msglen, "%s: the response's shape is not the request's", a->what);
		*res = EMDB_ERR_PROTOCOL;
	}
	return EMDB_OK;
}

/* A response nobody waits for.  A PREFETCH's ticket becomes an orphan. */
static int drop_response(emdb_client *c, const proto_hdr *h, uint32_t stall, char *msg, size_t msglen)
{
	net_state *n = c->priv;
	if (h->opcode != PROTO_OP_PREFETCH || h->status != 0 || h->body_len > 64)
		return discard(n, h->body_len, stall, msg, msglen);
	int rc = recv_body(n, h->body_len, stall, msg, msglen);
	if (rc != EMDB_OK)
		return rc;
	proto_prefetch_resp r;
	if (proto_prefetch_resp_decode(h, n->rxbuf, &r) != EMDB_OK)
		return EMDB_OK;
	pthread_mutex_lock(&c->lock);
	if (n->n_orphans == n->cap_orphans) {
		size_t cap = n->cap_orphans ? 2 * n->cap_orphans : 16;
		uint64_t *o = emdb_realloc(n->orphans, cap * sizeof(*o));
		if (o) {
			n->orphans = o;
			n->cap_orphans = cap;
		}
	}
	if (n->n_orphans < n->cap_orphans)
		n->orphans[n->n_orphans++] = r.ticket;
	/* else: the server frees it when the connection closes */
	pthread_mutex_unlock(&c->lock);
	return EMDB_OK;
}

/* Whether the socket has bytes to read (or an error or end to report)
 * before the monotonic time `deadline` (0: wait for ever). */
static bool wait_readable(net_state *n, uint64_t deadline)
{
	if (n->ahead_off < n->ahead_len || tls_pending(n))
		return true;
	for (;;) {
		struct pollfd pf = { .fd = n->fd, .events = rd_events(n) };
		int w = ms_until(deadline);
		int r = w == 0 ? 0 : poll(&pf, 1, w);
		if (r > 0)
			return true;
		if (r == 0)
			return false;
		if (errno != EINTR)
			return true; /* let recv report it */
	}
}

/* busy_poll_us where the first wait polls (tls://, or a deadline too near
 * for SO_RCVTIMEO): poll(2) without a timeout until there is something to
 * read or the window passes. */
static bool busy_poll_readable(net_state *n)
{
	uint64_t until = cl_now_ns() + n->busy_poll_ns;
	do {
		struct pollfd pf = { .fd = n->fd, .events = rd_events(n) };
		if (n->ahead_off < n->ahead_len || tls_pending(n) || poll(&pf, 1, 0) != 0)
			return true;
	} while (cl_now_ns() < until);
	return false;
}

/* busy_poll_us: non-blocking recv() into the read-ahead buffer until it
 * gets something or the window passes.  recv's result; -1 with EAGAIN
 * when nothing came (or polling is off). */
static ssize_t busy_poll_first(net_state *n)
{
	if (!n->busy_poll_ns) {
		errno = EAGAIN;
		return -1;
	}
	uint64_t until = cl_now_ns() + n->busy_poll_ns;
	for (;;) {
		ssize_t k = recv(n->fd, n->ahead, NET_AHEAD, MSG_DONTWAIT);
		if (k >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			return k;
		if (cl_now_ns() >= until) {
			errno = EAGAIN;
			return -1;
		}
	}
}

/* A synchronous call's first wait: busy_poll_first, then one blocking
 * recv() into the read-ahead buffer, which SO_RCVTIMEO ends after the
 * handle's timeout `ms` (0: none).
 * The call's deadline is its submission plus that timeout, so the wait
 * ends at most the time since submission late; where that is over a
 * millisecond (or a signal cut the wait short), poll() takes over as for
 * every later wait.  Returns EMDB_OK (bytes, or an end or error for
 * recv_full to report) or EMDB_ERR_TIMEOUT (nothing read). */
static int block_first(net_state *n, uint32_t ms, uint64_t deadline)
{
	if (n->ahead_off < n->ahead_len)
		return EMDB_OK;
	/* TLS keeps the socket non-blocking: a blocking SSL_read would hold
	 * tls_lock against the senders. */
	if (n->ssl || (deadline && cl_now_ns() + (uint64_t)ms * 1000000ull > deadline + 1000000ull))
		return (n->busy_poll_ns && busy_poll_readable(n)) || wait_readable(n, deadline) ? EMDB_OK
											: EMDB_ERR_TIMEOUT;
	if (n->rcv_ms != ms) {
		struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
		if (setsockopt(n->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0)
			return !deadline || wait_readable(n, deadline) ? EMDB_OK : EMDB_ERR_TIMEOUT;
		n->rcv_ms = ms;
	}
	ssize_t k = busy_poll_first(n);
	if (k < 0 && errno == EAGAIN)
		k = recv(n->fd, n->ahead, NET_AHEAD, 0);
	if (k > 0) {
		n->ahead_off = 0;
		n->ahead_len = (size_t)k;
		return EMDB_OK;
	}
	if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return EMDB_ERR_TIMEOUT;
	if (k < 0 && errno == EINTR && deadline && !wait_readable(n, deadline))
		return EMDB_ERR_TIMEOUT;
	return EMDB_OK;
}

/* Read and dispatch one frame; the caller holds `reading`.  `block`: this
 * is a synchronous call's first wait (block_first).  Returns EMDB_OK,
 * EMDB_ERR_TIMEOUT when no frame began before `deadline` (0: wait for
 * ever; nothing was read then), or EMDB_ERR_CLOSED when the handle broke
 * (net_break done). */
static int rx_frame(emdb_client *c, uint64_t deadline, bool block)
{
	net_state *n = c->priv;
	char msg[CL_MSG_MAX];

	uint8_t hb[PROTO_HDR_SIZE];
	proto_hdr h;
	uint32_t stall = __atomic_load_n(&c->timeout_ms, __ATOMIC_RELAXED);
	if (block) {
		int w = block_first(n, stall, deadline);
		if (w != EMDB_OK)
			return w;
	} else if (deadline && !wait_readable(n, deadline)) {
		return EMDB_ERR_TIMEOUT;
	}
	int rc = recv_full(n, hb, sizeof(hb), true, stall, 0, msg, sizeof(msg));
	if (rc != EMDB_OK) {
		net_break(c, msg);
		return EMDB_ERR_CLOSED;
	}
	rc = proto_hdr_decode(hb, sizeof(hb), &h, UINT32_MAX);
	if (rc != EMDB_OK || !proto_hdr_is_response(&h) || h.version > c->version) {
		const char *why = rc != EMDB_OK ? emdb_last_error()
				  : h.version > c->version ? "a version above the connection's"
				  : "a request where a response was due";
		snprintf(msg, sizeof(msg), "malformed frame from %s: %s", n->peer, why);
		net_break(c, msg);
		return EMDB_ERR_CLOSED;
	}
	if (h.opcode == PROTO_OP_NONE) {
		/* The server could not parse one of our frames and
		 * closes: report its words. */
		char smsg[CL_MSG_MAX] = "";
		proto_str s;
		if (h.body_len <= 2 * PROTO_ERRMSG_MAX &&
		    recv_body(n, h.body_len, stall, msg, sizeof(msg)) == EMDB_OK &&
		    proto_err_decode(&h, n->rxbuf, &s) == EMDB_OK)
			snprintf(smsg, sizeof(smsg), "%.*s", (int)s.len, s.p ? s.p : "");
		/* The server's words are cut to fit beside the peer's name. */
		snprintf(msg, sizeof(msg), "%s refused a frame (%s): %.200s", n->peer,
			 emdb_err_name(h.status), smsg);
		net_break(c, msg);
		return EMDB_ERR_CLOSED;
	}

	pthread_mutex_lock(&c->lock);
	emdb_future *f = pending_find_locked(n, h.id);
	if (f) {
		pending_del_locked(n, f);
		f->state = FUT_RUNNING;
	}
	pthread_mutex_unlock(&c->lock);

	if (!f) {
		rc = drop_response(c, &h, stall, msg, sizeof(msg));
		if (rc != EMDB_OK) {
			net_break(c, msg);
			return EMDB_ERR_CLOSED;
		}
		return EMDB_OK;
	}

	int res = EMDB_OK;
	msg[0] = 0;
	if (h.opcode != net_ops[f->a.op].wire) {
		snprintf(msg, sizeof(msg), "%s: a %s response to a %s request", n->peer,
			 proto_op_name(h.opcode), proto_op_name(net_ops[f->a.op].wire));
		cl_complete(f, EMDB_ERR_PROTOCOL, msg);
		net_break(c, msg);
		return EMDB_ERR_CLOSED;
	}
	if (h.status < 0) {
		proto_str s = { NULL, 0 };
		res = h.status;
		if (h.body_len > 2 * PROTO_ERRMSG_MAX) {
			rc = discard(n, h.body_len, stall, msg, sizeof(msg));
			snprintf(msg, sizeof(msg), "%s", emdb_strerror(res));
		} else {
			rc = recv_body(n, h.body_len, stall, msg, sizeof(msg));
			if (rc == EMDB_OK && proto_err_decode(&h, n->rxbuf, &s) == EMDB_OK)
				snprintf(msg, sizeof(msg), "%.*s", (int)s.len, s.p ? s.p : "");
			else if (rc == EMDB_OK)
				snprintf(msg, sizeof(msg), "%s (malformed error body)", emdb_strerror(res));
		}
	} else if (net_ops[f->a.op].vectors) {
		rc = recv_vector_resp(n, f, &h, stall, &res, msg, sizeof(msg));
	} else if (h.body_len > NET_BODY_MAX) {
		res = EMDB_ERR_LIMIT;
		snprintf(msg, sizeof(msg), "%s: a %u-byte response is more than the client buffers",
			 f->a.what, h.body_len);
		rc = discard(n, h.body_len, stall, msg, sizeof(msg));
	} else {
		rc = recv_body(n, h.body_len, stall, msg, sizeof(msg));
		if (rc == EMDB_ERR_NOMEM) {
			res = rc;
			snprintf(msg, sizeof(msg), "%s: out of memory for a %u-byte response", f->a.what,
				 h.body_len);
			rc = discard(n, h.body_len, stall, msg, sizeof(msg));
		} else if (rc == EMDB_OK) {
			res = net_decode_resp(c, f, &h, n->rxbuf, msg, sizeof(msg));
		}
	}
	if (rc != EMDB_OK) {
		char why[CL_MSG_MAX];
		snprintf(why, sizeof(why), "%s", msg);
		snprintf(msg, sizeof(msg), "connection lost: %.400s", why);
		cl_complete(f, EMDB_ERR_CLOSED, msg);
		net_break(c, why);
		return EMDB_ERR_CLOSED;
	}
	cl_complete(f, res, msg);
	return EMDB_OK;
}

/* The receiving thread: reads while requests are pending and nobody else
 * reads (invariant 2); sleeps otherwise; ends when the handle breaks. */
static void *receiver(void *arg)
{
	emdb_client *c = arg;
	net_state *n = c->priv;

	for (;;) {
		pthread_mutex_lock(&c->lock);
		while (!n->broken && (n->n_pending == 0 || n->reading))
			pthread_cond_wait(&n->rx_cond, &c->lock);
		if (n->broken) {
			pthread_mutex_unlock(&c->lock);
			return NULL;
		}
		n->reading = true;
		pthread_mutex_unlock(&c->lock);
		int rc = rx_frame(c, 0, false);
		pthread_mutex_lock(&c->lock);
		n->reading = false;
		pthread_mutex_unlock(&c->lock);
		if (rc != EMDB_OK)
			return NULL;
	}
}

/* A synchronous call: when it can take the read side, it reads until its
 * own response is in instead of waiting for the receiver to hand it over;
 * then (or when another thread reads) it waits like any call. */
static void net_run(emdb_client *c, emdb_future *f)
{
	if (net_send(c, f, true)) {
		for (bool first = true;; first = false) {
			pthread_mutex_lock(&c->lock);
			bool done = f->state == FUT_DONE;
			pthread_mutex_unlock(&c->lock);
			/* TIMEOUT: f's deadline passed with no frame begun;
			 * cl_wait_locked below fails it.  CLOSED: net_break
			 * completed it. */
			if (done || rx_frame(c, f->deadline, first) != EMDB_OK)
				break;
		}
		rx_release(c);
	}
	pthread_mutex_lock(&c->lock);
	cl_wait_locked(f, UINT64_MAX);
	pthread_mutex_unlock(&c->lock);
}



/* One request/response exchange during the handshake, before the receiver
 * runs.  The response body lands in n->rxbuf. */
static int exchange(net_state *n, const uint8_t *frame, size_t len, uint16_t op, uint64_t deadline,
		    proto_hdr *h)
{
	char msg[CL_MSG_MAX];
	size_t sent;
	proto_iov v = { .n = 1, .len = len };
	v.iov[0].iov_base = (void *)frame;
	v.iov[0].iov_len = len;
	int rc = send_all(n, &v, deadline, &sent, msg, sizeof(msg));
	if (rc == EMDB_OK) {
		uint8_t hb[PROTO_HDR_SIZE];
		rc = recv_full(n, hb, sizeof(hb), true, 0, deadline, msg, sizeof(msg));
		if (rc == EMDB_OK) {
			rc = proto_hdr_decode(hb, sizeof(hb), h, NET_HELLO_BODY_MAX);
			if (rc != EMDB_OK || !proto_hdr_is_response(h) ||
			    (h->opcode != op && h->opcode != PROTO_OP_NONE)) {
				snprintf(msg, sizeof(msg), "%s does not speak the emdb protocol (%s)", n->peer,
					 rc != EMDB_OK ? emdb_last_error() : "unexpected frame");
				rc = EMDB_ERR_PROTOCOL;
			}
		}
		if (rc == EMDB_OK)
			rc = recv_body(n, h->body_len, 0, msg, sizeof(msg));
	}
	if (rc == EMDB_ERR_TIMEOUT)
		return cl_seterr(rc, "emdb_client_connect: %s: no answer to %s within the connect timeout", n->peer,
				 proto_op_name(op));
	if (rc != EMDB_OK)
		return cl_seterr(rc, "emdb_client_connect: %s", msg);
	if (h->status < 0) {
		proto_str s = { NULL, 0 };
		proto_err_decode(h, n->rxbuf, &s);
		return cl_seterr(h->status, "emdb_client_connect: %s refused %s: %.*s", n->peer, proto_op_name(op),
				 (int)s.len, s.p ? s.p : "");
	}
	return EMDB_OK;
}

static int handshake(emdb_client *c, const char *token, const char *name, uint64_t deadline)
{
	net_state *n = c->priv;
	uint8_t buf[PROTO_HDR_SIZE + 16 + PROTO_TOKEN_MAX + PROTO_NAME_MAX] __attribute__((aligned(8)));
	size_t len;
	proto_hdr h;
	int rc;

	proto_hello_req hr = { PROTO_VERSION_MIN, PROTO_VERSION_MAX, proto_cstr(name) };
	if (hr.name.len > PROTO_NAME_MAX)
		return cl_seterr(EMDB_ERR_INVALID, "emdb_client_connect: client name longer than %d bytes",
				 PROTO_NAME_MAX);
	rc = proto_hello_req_encode(buf, sizeof(buf), n->next_id++, &hr, &len);
	if (rc != EMDB_OK)
		return cl_seterr(rc, "emdb_client_connect: %s", emdb_last_error());
	rc = exchange(n, buf, len, PROTO_OP_HELLO, deadline, &h);
	if (rc != EMDB_OK)
		return rc;
	proto_hello_resp r;
	if (proto_hello_resp_decode(&h, n->rxbuf, &r) != EMDB_OK)
		return cl_seterr(EMDB_ERR_PROTOCOL, "emdb_client_connect: %s: bad HELLO response: %s", n->peer,
				 emdb_last_error());
	if (r.version < PROTO_VERSION_MIN || r.version > PROTO_VERSION_MAX)
		return cl_seterr(EMDB_ERR_PROTOCOL,
				 "emdb_client_connect: %s chose protocol version %u, this client offered "
				 "%u..%u", n->peer, r.version, PROTO_VERSION_MIN, PROTO_VERSION_MAX);
	c->version = (uint8_t)r.version;
	n->max_body = r.max_body;
	c->max_batch = r.max_batch;
	snprintf(c->server, sizeof(c->server), "%.*s", (int)r.server.len, r.server.p ? r.server.p : "");
	/* A server that requires no token serves only loopback clients,
	 * as admins, from HELLO on (docs/protocol.md). */
	c->role = EMDB_ROLE_ADMIN;

	if (!token && !(r.flags & PROTO_HELLO_AUTH_REQUIRED))
		return EMDB_OK;
	if (!token)
		return cl_seterr(EMDB_ERR_AUTH,
				 "emdb_client_connect: %s requires a token (?token=... in the URI, or "
				 "emdb_client_options.token)", n->peer);
	proto_auth_req ar = { proto_cstr(token) };
	if (ar.token.len > PROTO_TOKEN_MAX)
		return cl_seterr(EMDB_ERR_INVALID, "emdb_client_connect: token longer than %d bytes",
				 PROTO_TOKEN_MAX);
	rc = proto_auth_req_encode(buf, sizeof(buf), n->next_id++, &ar, &len);
	if (rc != EMDB_OK)
		return cl_seterr(rc, "emdb_client_connect: %s", emdb_last_error());
	rc = exchange(n, buf, len, PROTO_OP_AUTH, deadline, &h);
	if (rc != EMDB_OK)
		return rc;
	proto_auth_resp ra;
	if (proto_auth_resp_decode(&h, n->rxbuf, &ra) != EMDB_OK)
		return cl_seterr(EMDB_ERR_PROTOCOL, "emdb_client_connect: %s: bad AUTH response: %s", n->peer,
				 emdb_last_error());
	c->role = (emdb_role)ra.role;
	return EMDB_OK;
}

/* After the handshake, for a handle with emdb_client_options.worker_rank:
 * WORKER (version 4), so the server sums this connection's pushes as that
 * worker's.  An older server cannot: UNSUPPORTED, nothing sent. */
static int declare_worker(emdb_client *c, uint64_t deadline)
{
	net_state *n = c->priv;
	if (c->worker_rank == EMDB_WORKER_NONE)
		return EMDB_OK;
	if (c->version < proto_op_version(PROTO_OP_WORKER))
		return cl_seterr(EMDB_ERR_UNSUPPORTED,
				 "emdb_client_connect: %s speaks protocol version %u; a worker rank "
				 "(emdb_client_options.worker_rank) needs version %u",
				 n->peer, c->version, proto_op_version(PROTO_OP_WORKER));
	uint8_t buf[PROTO_HDR_SIZE + 8] __attribute__((aligned(8)));
	size_t len;
	proto_worker_req w = { c->worker_rank };
	int rc = proto_worker_req_encode(buf, sizeof(buf), n->next_id++, &w, &len);
	if (rc != EMDB_OK)
		return cl_seterr(rc, "emdb_client_connect: %s", emdb_last_error());
	proto_hdr h;
	return exchange(n, buf, len, PROTO_OP_WORKER, deadline, &h);
}

static void net_state_free(net_state *n)
{
	SSL_free(n->ssl);
	SSL_CTX_free(n->tls_ctx);
	pthread_mutex_destroy(&n->tls_lock);
	if (n->fd >= 0)
		close(n->fd);
	pthread_mutex_destroy(&n->send_lock);
	pthread_cond_destroy(&n->rx_cond);
	emdb_free(n->orphans);
	emdb_free(n->rxbuf);
	emdb_free(n);
}

static void net_close(emdb_client *c)
{
	net_state *n = c->priv;
	if (n->ssl) {
		/* Best effort close_notify: the server then sees a clean end. */
		pthread_mutex_lock(&n->tls_lock);
		SSL_shutdown(n->ssl);
		pthread_mutex_unlock(&n->tls_lock);
	}
	net_break(c, "closed by the client");
	if (n->rx_started)
		pthread_join(n->rx, NULL);
	net_state_free(n);
}

static const cl_transport net_transport = {
	.name = "net",
	.submit = net_submit,
	.run = net_run,
	.unlink_locked = net_unlink_locked,
	.ticket_release = net_ticket_release,
	.close = net_close,
};

int cl_net_open(emdb_client *c, const cl_uri *u, const emdb_client_options *o)
{
	net_state *n = emdb_calloc(1, sizeof(*n));
	if (!n)
		return cl_seterr(EMDB_ERR_NOMEM, "emdb_client_connect: out of memory");
	n->fd = -1;
	n->next_id = 1;
	pthread_mutex_init(&n->send_lock, NULL);
	pthread_mutex_init(&n->tls_lock, NULL);
	pthread_cond_init(&n->rx_cond, NULL);
	const char *scheme = u->kind == CL_URI_TLS ? "tls" : "tcp";
	if (u->kind == CL_URI_UNIX)
		snprintf(n->peer, sizeof(n->peer), "unix://%s", u->path);
	else if (strchr(u->host, ':'))
		snprintf(n->peer, sizeof(n->peer), "%s://[%s]:%u", scheme, u->host, u->port);
	else
		snprintf(n->peer, sizeof(n->peer), "%s://%s:%u", scheme, u->host, u->port);

	uint64_t deadline = o->connect_timeout_ms ? cl_now_ns() + (uint64_t)o->connect_timeout_ms * 1000000ull : 0;
	const char *token = o->token ? o->token : u->token;
	const char *name = o->client_name ? o->client_name : u->client_name ? u->client_name : "emdb-client";
	n->rcv_ms = UINT32_MAX;
	n->busy_poll_ns = (uint64_t)o->busy_poll_us * 1000u;
	int rc = net_dial(n, u, o, deadline);
	if (rc == EMDB_OK) {
		c->priv = n;
		c->tr = &net_transport;
		rc = handshake(c, token, name, deadline);
	}
	if (rc == EMDB_OK)
		rc = declare_worker(c, deadline);
	if (rc == EMDB_OK && pthread_create(&n->rx, NULL, receiver, c) != 0)
		rc = cl_seterr(EMDB_ERR_NOMEM, "emdb_client_connect: cannot start the receiving thread");
	if (rc != EMDB_OK) {
		net_state_free(n);
		c->priv = NULL;
		return rc;
	}
	n->rx_started = true;
	return EMDB_OK;
}
