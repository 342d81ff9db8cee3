/*
 * net/loop.h - an I/O thread: its event loop, its connections, and the
 * interface its two backends implement (loop_event.c on libevent,
 * loop_uring.c on liburing), in the manner of Redis's ae.c and ae_*.c.
 *
 * Every connection belongs to exactly one I/O thread for its whole life:
 * its bytes are received, its requests decoded and run on the engine, and
 * its replies sent, all on that thread.  Other threads talk to an I/O
 * thread only through its mailbox (io_thread_post_conn, io_thread_post,
 * io_thread_drain), which wakes it through an eventfd.
 *
 * The backend contract
 *   The backend moves bytes; the connection (net/conn.h) gives them
 *   meaning.  For each connection the backend
 *     - receives while conn_wants_read(c), into the space that
 *       conn_read_space gives right before each receive, and reports with
 *       conn_on_read(c, n) (n > 0 bytes, 0 end of stream, -errno);
 *     - sends while conn_wants_write(c), the iovecs of conn_out_iov, and
 *       reports with conn_on_written(c, n) (n > 0 bytes, -errno), or,
 *       for a send started by conn_send_now, with conn_out_sent(c, n);
 *     - when one of those returns -1, or the core calls conn_close, stops
 *       all I/O on the connection, closes its descriptor and calls
 *       conn_destroy exactly once, as soon as no operation of its is in
 *       flight (at once for libevent, after the last completion for
 *       io_uring);
 *     - after conn_on_read/conn_on_written return 0, and whenever the core
 *       calls conn_update, re-arms the connection for what it now wants.
 *       conn_update may send at once, and so may end up closing and
 *       destroying the connection before it returns.
 *   Per thread it calls io_thread_on_wake when the eventfd is readable (it
 *   reads the eventfd itself) and io_thread_on_tick about every
 *   IO_TICK_MS milliseconds.
 */
#ifndef EMDB_NET_LOOP_H
#define EMDB_NET_LOOP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "net/config.h"
#include "net/stats.h"

#define IO_TICK_MS 100

typedef struct server server;
typedef struct conn conn;
typedef struct io_thread io_thread;

typedef struct io_backend {
	const char *name;
	/* Set up t->be.  Returns 0 or -errno (the caller may then try
	 * another backend). */
	int (*init)(io_thread *t);
	/* Run the loop until io_thread_stop; called on the I/O thread. */
	void (*run)(io_thread *t);
	/* Make run() return after the current callback. */
	void (*stop)(io_thread *t);
	/* Release t->be once run() has returned. */
	void (*destroy)(io_thread *t);
	/* Start I/O on a new connection.  Returns 0 or -errno (the caller
	 * then destroys the connection). */
	int (*conn_open)(conn *c);
	/* What the connection wants changed: re-arm.  May close c. */
	void (*conn_update)(conn *c);
	/* Start sending the pending replies now, from inside frame
	 * processing, so the peer reads reply i while reply i+1 is being
	 * built.  Never closes c and never runs frames: a failed send is
	 * left for the next conn_update to find. */
	void (*conn_send_now)(conn *c);
	/* Stop I/O; conn_destroy(c) follows, now or after completions. */
	void (*conn_close)(conn *c);
} io_backend;

extern const io_backend io_backend_libevent;
extern const io_backend io_backend_uring;

/* For the backends' conn_send_now: sendmsg(2) the pending replies,
 * without blocking, until the socket is full or nothing is left, and
 * account them with conn_out_sent.  Call only while no other send of c
 * is in flight, so the bytes keep their order. */
void io_send_direct(conn *c);

/* The backends' receive and send, plain or through the connection's TLS
 * (net/tls.h): recv(2) and sendmsg(2) semantics (> 0 bytes; 0 end of
 * stream for io_recv, "nothing until the socket is readable" for
 * io_sendv; -1 with errno, EAGAIN for "try again when ready").  A TLS
 * failure is logged here and reported as EPROTO or EPIPE.  io_recv keeps
 * c->tls_drained and c->tls_want_write (net/conn.h) for the backend. */
ssize_t io_recv(conn *c, void *p, size_t n);
ssize_t io_sendv(conn *c, const struct iovec *iov, int n);

/* Readiness-driven I/O, for a backend told "readable" or "writable" (the
 * libevent backend for every connection, the io_uring one for TLS
 * connections, whose records OpenSSL reads and writes itself).
 *   io_read_burst: receive while c wants input, at most IO_READ_BURST
 *     times (so one busy connection cannot starve the others), until the
 *     socket is empty; reports each receive to the connection.
 *   io_flush: send pending replies until none is left or the socket is
 *     full (*blocked then says so: wait for "writable").
 * Both return 0, or -1 after closing c (then c is gone).  For a TLS
 * connection, afterwards: c->tls_drained false means OpenSSL may hold
 * input no readiness event will announce, so come back at once if c
 * wants input; c->tls_want_write means a read must wait for "writable". */
#define IO_READ_BURST 16
int io_read_burst(conn *c);
int io_flush(conn *c, bool *blocked);
/* On "writable": whether c's last receive was waiting for it (TLS); the
 * flag is cleared and the caller reads before anything else. */
bool io_read_waited_for_write(conn *c);

/* Work finished off the I/O thread (a helper thread, a synchronous step
 * completed by another connection's thread, tomorrow a remote node)
 * comes back to a connection through one completion, as libuv's
 * uv_work_t comes back through its after_work_cb: the poster embeds an
 * io_completion in a record of its own, sets it with io_completion_init
 * and hands it to io_thread_post; the connection's thread then runs
 * done(c, w), c the connection, or NULL when it has gone (closed meanwhile,
 * or the thread ended first).  From that call on the record is done's to
 * free.  The loop knows nothing of what the answer means. */
typedef struct io_completion io_completion;
typedef void (*io_done_fn)(conn *c, io_completion *w);
struct io_completion {
	io_done_fn done;
	uint64_t conn_id;    /* conn.id of the connection it answers */
	io_completion *next; /* the mailbox's */
};

/* A connection accepted by the main thread, on its way to an I/O thread. */
typedef struct new_conn {
	int fd;
	bool loopback; /* Unix socket, 127.0.0.0/8 or ::1 */
	bool tls;      /* speaks TLS (TCP on a server with tls_cert_file) */
	bool unix_sock; /* came in on the Unix socket (max_unix_connections) */
	char peer[64]; /* "127.0.0.1:5342", "unix", ... for the log */
} new_conn;

struct io_thread {
	server *srv;
	unsigned index;
	const io_backend *be;
	void *be_state;
	pthread_t tid;
	int wake_fd; /* eventfd */

	/* mailbox: written by other threads under mbox_lock */
	pthread_mutex_t mbox_lock;
	new_conn *mbox;
	uint32_t mbox_n, mbox_cap;
	io_completion *done_head, *done_tail; /* FIFO of io_thread_post */
	bool mbox_drain;

	/* owned by the thread itself */
	conn *conns;          /* doubly linked list of live connections */
	uint32_t n_conns;     /* live and closing (not yet destroyed) */
	bool draining;
	bool stopped;
	uint64_t drain_deadline_ns;

	/* read by INFO from any thread */
	op_stats stats;
	_Atomic uint64_t mem_buffers;  /* input + output buffer bytes */
	_Atomic uint64_t n_open;       /* connections on this thread */
	_Atomic uint64_t n_paused;     /* connections not read: backpressure */
	_Atomic uint64_t n_tickets;    /* live tickets */
	_Atomic uint64_t bytes_in, bytes_out;
	_Atomic uint64_t frames_bad;   /* malformed frames answered and closed */
	_Atomic uint64_t handshake_timeouts, idle_timeouts; /* connections closed so */
	_Atomic uint64_t busy_poll_hits; /* polls that found work: sleeps saved */
};

/* Create the thread's state and backend (kind, falling back to libevent
 * with a log line when io_uring cannot be set up).  Returns 0 or -errno. */
int io_thread_init(io_thread *t, server *srv, unsigned index, io_backend_kind kind);
/* Start the OS thread.  Returns 0 or -errno. */
int io_thread_start(io_thread *t);
/* Wait for the thread to end (after io_thread_drain) and free its state. */
void io_thread_join(io_thread *t);
/* The two halves of io_thread_join: wait for the thread to end, then free
 * its state.  A server waits for all its threads before it frees any, as
 * one thread may still post a completion to another (io_thread_post). */
void io_thread_wait(io_thread *t);
/* Free the state of a thread that was never started. */
void io_thread_cleanup(io_thread *t);

/* For a completion that will answer c: done runs on c's thread. */
void io_completion_init(io_completion *w, const conn *c, io_done_fn done);
/* Queue w for t (any thread) and wake it.  Cannot fail: the record is the
 * poster's.  A request answered so counts in its connection's
 * answers_owed (net/conn.h) from its handler until its done runs. */
void io_thread_post(io_thread *t, io_completion *w);

/* Hand a connection over (any thread).  Returns 0, or -errno with the
 * descriptor left to the caller. */
int io_thread_post_conn(io_thread *t, const new_conn *nc);
/* Ask the thread to finish: stop reading, answer what was received, flush,
 * close every connection (forcibly after drain_timeout_ms), then exit. */
void io_thread_drain(io_thread *t);

/* For backends.
 * io_busy_poll_ns: busy_poll_us as CONFIG SET last left it, in ns.  After
 * handling events a backend polls for more, without sleeping, until this
 * long has passed with nothing found; each poll that finds work (an
 * event, or completions) counts once in busy_poll_hits.  Read before each
 * window, so a change takes effect once the window under way ends. */
uint64_t io_busy_poll_ns(const io_thread *t);
void io_busy_poll_hit(io_thread *t);
void io_thread_on_wake(io_thread *t);
void io_thread_on_tick(io_thread *t);
/* Called by conn_destroy once a connection of t is gone (unlinked and
 * freed): counts it out (unix_sock: of max_unix_connections), and ends a
 * drain that was waiting for it. */
void io_thread_forget(io_thread *t, bool unix_sock);

#endif
