/*
 * conn.c - a connection's state machine: cutting frames off the input,
 * backpressure, error-then-close, replies into the output, accounting.
 *
 * Invariants:
 *   1. Frames are run strictly in arrival order, each to completion,
 *      before the next is looked at; replies are appended in that order.
 *   2. c->frame is nonzero exactly while a frame's header is in the input
 *      but its body is not complete; it sizes the next receive so the
 *      whole frame lands in one place.
 *   3. paused <=> the output backlog passed output_buffer_limit and has not
 *      yet fallen under half of it.  While paused no frame is run and
 *      nothing is read: input stops growing, output only shrinks.  The
 *      backlog is the bytes of the blocks that hold unsent replies
 *      (obuf_queued), not only the replies' own bytes, so what a client
 *      that does not read costs is what is counted.
 *   4. Once closing is set no further frame is run and input is dropped;
 *      the connection is closed when its output is flushed or at
 *      close_deadline_ns, whichever comes first.
 *   5. accounted is what this connection last added to its thread's
 *      mem_buffers; conn_destroy takes it all back.
 *   6. Once SEND_EARLY_BYTES of replies are pending, each further frame
 *      is followed by conn_send_now: with pipelined big replies (Pull of
 *      4096 rows is 1 MiB) the peer copies reply i out of the socket
 *      while reply i+1 is built, instead of every reply of a burst of
 *      input waiting for the last one.
 *   7. A connection with answers_owed > 0 is owed answers that another
 *      thread will post (conn_owed_answers, net/loop.h io_completion): it
 *      is not closed for a drain or idleness while it waits.  Its peer's
 *      end of stream does close it (a worker that went away), and
 *      conn_destroy has the handlers withdraw what still waits for it
 *      (conn_handler.gone).
 *
 * State changes: conn_on_read (input, frames run), conn_on_written
 * (output, unpausing), conn_fail (closing), conn_destroy (everything).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/ssl.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "net/handle_int.h"
#include "net/conn.h"
#include "net/log.h"
#include "net/loop.h"
#include "net/server.h"
#include "net/stats.h"

#define CLOSE_GRACE_NS (2ull * 1000000000ull)
/* Replies pending past this are handed to the socket between frames
 * rather than after the whole input is run (invariant 6). */
#define SEND_EARLY_BYTES (64u << 10)

conn *conn_create(io_thread *t, int fd, bool loopback, const char *peer)
{
	conn *c = emdb_calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->t = t;
	c->srv = t->srv;
	c->fd = fd;
	c->id = atomic_fetch_add(&t->srv->next_conn_id, 1) + 1;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	c->loopback = loopback;
	c->opened_ns = c->last_recv_ns = stats_now_ns();
	c->role = PROTO_ROLE_NONE;
	c->worker_rank = EMDB_WORKER_NONE;
	inbuf_init(&c->in);
	obuf_init(&c->out);
	tickets_init(&c->tickets);
	if (c->srv->cluster) /* its tickets are the cluster layer's */
		tickets_set_free(&c->tickets, handle_cluster_ticket_free, c->srv->cluster);

	c->next = t->conns;
	if (t->conns)
		t->conns->prev = c;
	t->conns = c;
	t->n_conns++;
	atomic_fetch_add_explicit(&t->n_open, 1, memory_order_relaxed);
	return c;
}

static void account(conn *c)
{
	size_t now = c->in.cap + c->out.allocated;
	if (now != c->accounted) {
		atomic_fetch_add_explicit(&c->t->mem_buffers, (uint64_t)now - (uint64_t)c->accounted,
					  memory_order_relaxed);
		c->accounted = now;
	}
}

void conn_destroy(conn *c)
{
	io_thread *t = c->t;
	bool unix_sock = c->unix_sock;
	log_debug("conn %llu (%s): closed", (unsigned long long)c->id, c->peer);
	if (c->answers_owed)
		c->srv->handler->gone(c);
	atomic_fetch_sub_explicit(&t->n_tickets, c->tickets.live, memory_order_relaxed);
	SSL_free(c->ssl);
	tickets_destroy(&c->tickets);
	inbuf_destroy(&c->in);
	obuf_destroy(&c->out);
	account(c);
	if (c->paused)
		atomic_fetch_sub_explicit(&t->n_paused, 1, memory_order_relaxed);
	if (c->prev)
		c->prev->next = c->next;
	else
		t->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	emdb_free(c);
	io_thread_forget(t, unix_sock);
}

void conn_close(conn *c)
{
	if (c->dead)
		return;
	c->dead = true;
	c->t->be->conn_close(c);
}

void conn_update(conn *c)
{
	if (!c->dead)
		c->t->be->conn_update(c);
}

bool conn_wants_read(const conn *c)
{
	return !c->dead && !c->closing && !c->paused && !c->eof && !c->t->draining;
}

bool conn_wants_write(const conn *c)
{
	return !c->dead && obuf_pending(&c->out) > 0;
}

static uint64_t output_limit(const conn *c)
{
	return atomic_load_explicit(&c->srv->rt.output_buffer_limit, memory_order_relaxed);
}

/* ---- replies -------------------------------------------------------- */

void *conn_reply_reserve(conn *c, size_t n)
{
	return obuf_reserve(&c->out, n);
}

int conn_reply_err(conn *c, uint64_t id, uint16_t op, int status, const char *text)
{
	/* The message is often emdb_last_error(), which the encoder's own
	 * size query overwrites: keep a copy. */
	char msg[PROTO_ERRMSG_MAX + 1];
	snprintf(msg, sizeof(msg), "%s", text ? text : "");
	stats_record_error(&c->t->stats, status);
	size_t len = 0;
	if (op != PROTO_OP_NONE && !proto_op_known(op))
		op = PROTO_OP_NONE;
	proto_err_encode(NULL, 0, id, op, status, msg, &len);
	uint8_t *p = len ? obuf_reserve(&c->out, len) : NULL;
	if (!p || proto_err_encode(p, len, id, op, status, msg, &len) != EMDB_OK) {
		obuf_cancel(&c->out);
		log_warn("conn %llu (%s): cannot buffer an error reply (%s %s: %s): closing",
			 (unsigned long long)c->id, c->peer, proto_op_name(op), emdb_err_name(status),
			 emdb_last_error());
		c->closing = true;
		c->close_deadline_ns = stats_now_ns();
		return EMDB_ERR_NOMEM;
	}
	obuf_commit(&c->out, len);
	return EMDB_OK;
}

int conn_reply_empty(conn *c, uint64_t id, uint16_t op)
{
	uint8_t *p = obuf_reserve(&c->out, PROTO_HDR_SIZE);
	size_t len;
	if (!p)
		return EMDB_ERR_NOMEM;
	int rc = proto_empty_encode(p, PROTO_HDR_SIZE, id, op, true, &len);
	if (rc) {
		obuf_cancel(&c->out);
		return rc;
	}
	obuf_commit(&c->out, len);
	return EMDB_OK;
}

/* Reply, then close once sent (or after the grace period). */
static void reply_and_close(conn *c, uint64_t id, uint16_t op, int status, const char *msg)
{
	log_info("conn %llu (%s): %s: %s; closing", (unsigned long long)c->id, c->peer,
		 emdb_err_name(status), msg);
	conn_reply_err(c, id, op, status, msg);
	c->closing = true;
	/* A TLS connection whose handshake never finished cannot carry the
	 * reply: no grace to wait out, close at the next tick. */
	bool deliverable = !c->ssl || SSL_is_init_finished(c->ssl);
	c->close_deadline_ns = stats_now_ns() + (deliverable ? CLOSE_GRACE_NS : 0);
	c->frame = 0;
}

void conn_fail(conn *c, uint64_t id, uint16_t op, int status, const char *msg)
{
	atomic_fetch_add_explicit(&c->t->frames_bad, 1, memory_order_relaxed);
	reply_and_close(c, id, op, status, msg);
}

void conn_timeout(conn *c, const char *msg)
{
	reply_and_close(c, 0, PROTO_OP_NONE, EMDB_ERR_TIMEOUT, msg);
	conn_update(c);
}

/* ---- input ---------------------------------------------------------- */

static void set_paused(conn *c, bool on)
{
	if (c->paused == on)
		return;
	c->paused = on;
	if (on)
		atomic_fetch_add_explicit(&c->t->n_paused, 1, memory_order_relaxed);
	else
		atomic_fetch_sub_explicit(&c->t->n_paused, 1, memory_order_relaxed);
}

/* The highest header version c accepts: HELLO's choice, 1 before it. */
static uint8_t conn_version(const conn *c)
{
	return c->version ? c->version : 1;
}

/* A header that proto_hdr_decode refused: answer and close.  The id and
 * opcode are echoed only when the magic was right (h holds the raw
 * fields) and the opcode is known on this connection, i.e. known and of
 * a version it speaks (docs/protocol.md): the answer carries the
 * opcode's version.  Otherwise id 0 and opcode NONE. */
static void bad_header(conn *c, int rc, const proto_hdr *h)
{
	char msg[320];
	snprintf(msg, sizeof(msg), "%s", emdb_last_error());
	bool known = proto_op_known_at(h->opcode, conn_version(c));
	conn_fail(c, known ? h->id : 0, known ? h->opcode : PROTO_OP_NONE, rc, msg);
}

/* Run the complete frames at the front of the input. */
static void run_frames(conn *c)
{
	uint64_t limit = output_limit(c);

	while (!c->closing && !c->paused) {
		if (c->skip) {
			size_t drop = inbuf_len(&c->in) < c->skip ? inbuf_len(&c->in) : (size_t)c->skip;
			inbuf_consume(&c->in, drop);
			c->skip -= drop;
			if (c->skip)
				break;
		}
		size_t len = inbuf_len(&c->in);
		if (len < PROTO_HDR_SIZE) {
			c->frame = 0;
			break;
		}
		if (obuf_queued(&c->out) >= limit) {
			set_paused(c, true);
			break;
		}
		const uint8_t *p = inbuf_data(&c->in);
		proto_hdr h;
		uint32_t max_body = PROTO_PREAUTH_BODY_MAX;
		if (c->role != PROTO_ROLE_NONE)
			max_body = (uint32_t)atomic_load_explicit(&c->srv->rt.max_frame,
								  memory_order_relaxed);
		int rc = proto_hdr_decode(p, len, &h, max_body);
		if (rc < 0) {
			bad_header(c, rc, &h);
			break;
		}
		if (h.version > conn_version(c)) {
			/* The frame's version is its opcode's (proto_hdr_decode):
			 * an opcode this connection does not have, answered as
			 * an unknown one is (a PUSH_UPDATE after HELLO chose 1). */
			char msg[128];
			snprintf(msg, sizeof(msg), "%s frame of version %u on a version %u connection%s",
				 proto_op_name(h.opcode), h.version, conn_version(c),
				 c->version ? "" : " (before HELLO)");
			conn_fail(c, 0, PROTO_OP_NONE, EMDB_ERR_PROTOCOL, msg);
			break;
		}
		if (proto_hdr_is_response(&h)) {
			conn_fail(c, h.id, h.opcode, EMDB_ERR_PROTOCOL,
				  "a response frame was sent to the server");
			break;
		}
		size_t total = PROTO_HDR_SIZE + (size_t)h.body_len;
		if (len < total) {
			c->frame = total;
			break;
		}
		c->frame = 0;
		c->srv->handler->frame(c, &h, p + PROTO_HDR_SIZE);
		inbuf_consume(&c->in, total);
		if (obuf_pending(&c->out) >= SEND_EARLY_BYTES)
			c->t->be->conn_send_now(c);
	}
}

int conn_read_space(conn *c, uint8_t **p, size_t *n)
{
	while (inbuf_space(&c->in, c->frame, p, n) != 0) {
		if (!c->frame)
			return -1;
		/* The pending frame does not fit in memory: refuse it with
		 * NOMEM (it was not run, nothing changed) and drop its body
		 * as it arrives. */
		proto_hdr h;
		proto_hdr_decode(inbuf_data(&c->in), inbuf_len(&c->in), &h, UINT32_MAX);
		char msg[160];
		snprintf(msg, sizeof(msg), "a request of %zu bytes does not fit under max_memory",
			 c->frame);
		log_info("conn %llu (%s): %s", (unsigned long long)c->id, c->peer, msg);
		conn_reply_err(c, h.id, h.opcode, EMDB_ERR_NOMEM, msg);
		c->skip = c->frame - inbuf_len(&c->in);
		inbuf_consume(&c->in, inbuf_len(&c->in));
		c->frame = 0;
	}
	account(c);
	return 0;
}

/* After any I/O: should the connection go? */
static int settle(conn *c)
{
	account(c);
	size_t pending = obuf_pending(&c->out);
	if (pending)
		return 0;
	if (c->closing)
		return -1;
	if (c->paused)
		return 0;
	if (c->eof)
		return -1; /* nothing more will come: a worker gone leaves its steps */
	if (conn_owed_answers(c))
		return 0;
	if (c->t->draining)
		return -1; /* no more is taken */
	return 0;
}

int conn_on_read(conn *c, ssize_t n)
{
	if (n < 0) {
		if (n != -ECONNRESET)
			log_debug("conn %llu (%s): receive: %s", (unsigned long long)c->id, c->peer,
				  strerror((int)-n));
		return -1;
	}
	if (n == 0) {
		c->eof = true;
		/* Not paused means every complete frame has run: what is left
		 * is the start of a frame that will never be finished. */
		if (!c->closing && !c->paused && !c->skip && inbuf_len(&c->in) > 0) {
			char msg[128];
			snprintf(msg, sizeof(msg), "the stream ended inside a frame (%zu of %zu bytes)",
				 inbuf_len(&c->in), c->frame ? c->frame : (size_t)PROTO_HDR_SIZE);
			proto_hdr h = { 0 };
			if (c->frame)
				proto_hdr_decode(inbuf_data(&c->in), inbuf_len(&c->in), &h, UINT32_MAX);
			conn_fail(c, h.id, h.opcode, EMDB_ERR_PROTOCOL, msg);
		}
	} else if (!c->closing && !c->t->draining) {
		c->last_recv_ns = stats_now_ns();
		inbuf_commit(&c->in, (size_t)n);
		atomic_fetch_add_explicit(&c->t->bytes_in, (uint64_t)n, memory_order_relaxed);
		run_frames(c);
	}
	return settle(c);
}

int conn_out_iov(conn *c, struct iovec *iov, int max)
{
	return obuf_iov(&c->out, iov, max);
}

void conn_out_sent(conn *c, size_t n)
{
	obuf_consume(&c->out, n);
	atomic_fetch_add_explicit(&c->t->bytes_out, (uint64_t)n, memory_order_relaxed);
}

int conn_on_written(conn *c, ssize_t n)
{
	if (n < 0) {
		if (n != -EPIPE && n != -ECONNRESET)
			log_debug("conn %llu (%s): send: %s", (unsigned long long)c->id, c->peer,
				  strerror((int)-n));
		return -1;
	}
	conn_out_sent(c, (size_t)n);
	if (c->paused && obuf_queued(&c->out) <= output_limit(c) / 2) {
		set_paused(c, false);
		run_frames(c);
	}
	return settle(c);
}
