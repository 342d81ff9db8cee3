/*
 * net/conn.h - one client connection: its buffers, its protocol state
 * (HELLO, AUTH, role, version), its tickets, backpressure and closing.
 *
 * Life cycle
 *   conn_create (I/O thread, from the mailbox) -> backend conn_open ->
 *   reads and writes through the conn_* calls below -> close (a -1 from
 *   conn_on_read/conn_on_written, or conn_close) -> backend stops I/O and
 *   calls conn_destroy, which frees the tickets and buffers.
 *
 * Request flow
 *   Bytes land in c->in (net/inbuf.h).  conn_on_read cuts complete frames
 *   off the front, checks each header, and hands the frame, in place, to
 *   the server's conn_handler (below: net/handle.h's handle_requests),
 *   which runs it on the engine and appends the reply to c->out.  The
 *   I/O core (loop, backends, conn) calls the request layer only through
 *   that table, so it includes none of it.  Many requests may be in the
 *   buffer at once (pipelining); their replies go out in order, each
 *   carrying its request id.
 *
 * Backpressure
 *   While the memory holding a connection's unsent replies (obuf_queued)
 *   reaches output_buffer_limit, no more of its requests are run and
 *   nothing more is read from it, so a client that does not read costs at
 *   most that much memory, plus the one reply being built (at most
 *   max_frame, checked before it is reserved), plus its input buffer, and
 *   never stalls the thread's other connections.  A refused request gives
 *   back what it reserved (net/obuf.h).  Running resumes when the backlog
 *   falls under half the limit.
 *
 * Errors
 *   A malformed frame (bad magic, version, opcode, lengths, body) gets an
 *   error reply (request id 0 when the header could not be trusted), and
 *   the connection is closed once that reply is sent (or after a grace
 *   period if the client does not read).  An engine error, a refused role
 *   or a limit is just an error reply; the connection stays.
 */
#ifndef EMDB_NET_CONN_H
#define EMDB_NET_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "net/inbuf.h"
#include "net/obuf.h"
#include "net/tickets.h"
#include "protocol/proto.h"

typedef struct io_thread io_thread;
typedef struct server server;

#define CONN_NAME_MAX 64

typedef struct conn {
	io_thread *t;
	server *srv;
	struct conn *prev, *next; /* the thread's list */
	int fd;
	uint64_t id;                 /* process-wide, for the log */
	char peer[64];
	char client[CONN_NAME_MAX];  /* HELLO name, sanitised */
	bool loopback;
	bool unix_sock;   /* on the Unix socket: counted in max_unix_connections */

	inbuf in;
	obuf out;
	size_t frame;     /* size of the frame at in's head once its header is in */
	uint64_t skip;    /* body bytes still to discard (frame refused: NOMEM) */

	proto_role role;
	uint8_t version;  /* 0 until HELLO */
	uint32_t worker_rank; /* WORKER: its pushes are this worker's
				 (emdb_push_as); EMDB_WORKER_NONE: none */
	bool paused;      /* backpressure: not running requests, not reading */
	bool closing;     /* error reply sent: close once flushed */
	bool eof;         /* the peer will send nothing more */
	bool dead;        /* closed; the backend still holds it */
	uint64_t close_deadline_ns;
	uint64_t opened_ns;    /* accepted (for handshake_timeout_ms)   */
	uint64_t last_recv_ns; /* bytes last arrived (for idle_timeout_s) */
	uint32_t answers_owed;  /* requests whose handler answers later through an
				   io_completion (net/loop.h): UPDATEs waiting in
				   synchronous steps, TABLE_RESERVEs on threads of
				   their own.  The handler adds one, the loop takes
				   it off before the completion's done runs. */
	size_t accounted; /* buffer bytes last added to t->mem_buffers */

	ticket_table tickets;
	void *be;         /* the backend's per-connection state */

	/* TLS (net/tls.h), NULL on a plain connection.  The I/O thread reads
	 * and writes through it (io_recv, io_sendv in net/loop.h). */
	struct ssl_st *ssl;
	bool tls_drained;    /* the last receive found nothing buffered */
	bool tls_want_write; /* the last receive needs the socket writable */
} conn;

/* The layer that gives frames their meaning, set once in the server
 * (server.h) before any connection is served. */
typedef struct conn_handler {
	/* Run one frame whose header is checked (net/handle.h, handle_frame). */
	void (*frame)(conn *c, const proto_hdr *h, const uint8_t *body);
	/* c is being destroyed with answers owed: withdraw what waits for it
	 * elsewhere (net/handle.h, handle_conn_gone). */
	void (*gone)(conn *c);
} conn_handler;

/* A new connection on thread t for descriptor fd (not yet opened by the
 * backend).  Returns NULL on NOMEM. */
conn *conn_create(io_thread *t, int fd, bool loopback, const char *peer);
/* Free everything the connection holds (tickets included) and unlink it
 * from its thread.  The descriptor must be closed already.  Called by the
 * backend once, when no I/O of c is in flight. */
void conn_destroy(conn *c);
/* Close c from the core (drain, timeouts): the backend stops I/O and
 * destroys it, possibly before this returns. */
void conn_close(conn *c);
/* Tell the backend that c's wishes changed; may destroy c. */
void conn_update(conn *c);

bool conn_wants_read(const conn *c);
bool conn_wants_write(const conn *c);

/* Space for the next receive.  Returns 0, or -1 when even a minimal
 * buffer cannot be had (close the connection). */
int conn_read_space(conn *c, uint8_t **p, size_t *n);
/* n > 0 bytes arrived in that space, 0 end of stream, < 0 -errno.
 * Returns 0, or -1: close now. */
int conn_on_read(conn *c, ssize_t n);
/* Up to max iovecs of unsent reply bytes; returns how many. */
int conn_out_iov(conn *c, struct iovec *iov, int max);
/* n > 0 reply bytes were sent, or < 0 -errno.  Returns 0, or -1: close. */
int conn_on_written(conn *c, ssize_t n);
/* n > 0 reply bytes went out by a backend's conn_send_now: only the
 * bookkeeping of conn_on_written, nothing that runs frames or closes. */
void conn_out_sent(conn *c, size_t n);

/* For the handlers: replies.  All return EMDB_OK, or NOMEM when the reply
 * cannot be buffered (the connection is then marked closing).  Every error
 * reply passes conn_reply_err, which counts it by status in the thread's
 * op_stats (net/stats.h). */
int conn_reply_err(conn *c, uint64_t id, uint16_t op, int status, const char *msg);

/* Whether c is owed answers another thread will post to its I/O thread
 * (answers_owed): while it is, neither a drain nor idleness closes c. */
static inline bool conn_owed_answers(const conn *c)
{
	return c->answers_owed != 0;
}
int conn_reply_empty(conn *c, uint64_t id, uint16_t op);
/* Space for a reply of n bytes (8-aligned), to be finished with
 * obuf_commit(&c->out, len) or obuf_cancel(&c->out).  NULL: NOMEM. */
void *conn_reply_reserve(conn *c, size_t n);
/* After a malformed frame: reply, then close once sent. */
void conn_fail(conn *c, uint64_t id, uint16_t op, int status, const char *msg);
/* From the tick, for a deadline the client missed: a TIMEOUT error
 * (request id 0) carrying msg, then close once sent.  May destroy c. */
void conn_timeout(conn *c, const char *msg);

#endif
