/*
 * loop_event.c - the libevent backend of the I/O threads: readiness
 * events, recv(2) into the connection's input, sendmsg(2) of its reply
 * blocks.
 *
 * Invariants:
 *   1. Each thread has its own event_base, used only by that thread (no
 *      libevent locking is needed or enabled).
 *   2. A connection's read event is added iff conn_wants_read; its write
 *      event is added iff replies are pending and the socket refused some
 *      (replies are first sent at once, without waiting for an event).
 *   3. A callback touches a connection only until conn_close, which frees
 *      it: every path returns right after closing.
 *   4. One readable event reads at most IO_READ_BURST times
 *      (io_read_burst), so a busy connection cannot starve the others on
 *      its thread.
 *   5. A TLS connection that wants input and whose last receive did not
 *      find OpenSSL empty is activated again without waiting for the
 *      socket (OpenSSL reads ahead; bytes it holds raise no event), and
 *      only after its read event is added: an event activated first is
 *      not added (libevent), so its socket would go unwatched.
 *   6. After I/O, the loop sleeps in epoll_wait only once busy_poll_us of
 *      non-blocking polls found nothing (at once when it is 0).  e->events
 *      counts the I/O callbacks (not the tick's), which is how the loop
 *      knows it did I/O and a poll knows it found some.
 *
 * State changes: the per-connection ev_conn (events added or not).
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include <emdb/alloc.h>

#include "net/conn.h"
#include "net/log.h"
#include "net/loop.h"
#include "net/stats.h"

typedef struct ev_thread {
	struct event_base *base;
	struct event *wake;
	struct event *tick;
	uint64_t events; /* I/O callbacks run (invariant 6) */
} ev_thread;

typedef struct ev_conn {
	struct event *rd, *wr;
	bool rd_on, wr_on;
} ev_conn;

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
	uint64_t v;
	ssize_t r = read(fd, &v, sizeof(v));
	(void)r;
	io_thread *t = arg;
	((ev_thread *)t->be_state)->events++;
	io_thread_on_wake(t);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	io_thread_on_tick(arg);
}

static int ev_init(io_thread *t)
{
	ev_thread *e = emdb_calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	struct event_config *cfg = event_config_new();
	if (cfg) {
		event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK);
		e->base = event_base_new_with_config(cfg);
		event_config_free(cfg);
	}
	if (!e->base)
		goto fail;
	e->wake = event_new(e->base, t->wake_fd, EV_READ | EV_PERSIST, on_wake, t);
	e->tick = event_new(e->base, -1, EV_PERSIST, on_tick, t);
	struct timeval tv = { 0, IO_TICK_MS * 1000 };
	if (!e->wake || !e->tick || event_add(e->wake, NULL) || event_add(e->tick, &tv))
		goto fail;
	t->be_state = e;
	return 0;
fail:
	if (e->wake)
		event_free(e->wake);
	if (e->tick)
		event_free(e->tick);
	if (e->base)
		event_base_free(e->base);
	emdb_free(e);
	return -ENOMEM;
}

/* Poll without sleeping until busy_poll_us pass with nothing to do
 * (invariant 6).  Returns false once the loop was told to stop. */
static bool busy_poll(io_thread *t, ev_thread *e, uint64_t busy_ns)
{
	uint64_t seen = e->events, until = stats_now_ns() + busy_ns;
	do {
		int rc = event_base_loop(e->base, EVLOOP_NONBLOCK);
		if (rc < 0)
			log_error("io thread %u: event loop failed", t->index);
		if (rc != 0 || event_base_got_break(e->base))
			return false;
		if (e->events != seen) {
			seen = e->events;
			io_busy_poll_hit(t);
			until = stats_now_ns() + busy_ns;
		}
	} while (stats_now_ns() < until);
	return true;
}

static void ev_run(io_thread *t)
{
	ev_thread *e = t->be_state;
	uint64_t seen = e->events;
	for (;;) {
		uint64_t busy_ns = io_busy_poll_ns(t);
		if (busy_ns && e->events != seen && !busy_poll(t, e, busy_ns))
			return;
		seen = e->events;
		int rc = event_base_loop(e->base, EVLOOP_ONCE);
		if (rc != 0) { /* 1: nothing left to wait for, as dispatch ends */
			if (rc < 0)
				log_error("io thread %u: event loop failed", t->index);
			return;
		}
		if (event_base_got_break(e->base))
			return;
	}
}

static void ev_stop(io_thread *t)
{
	ev_thread *e = t->be_state;
	event_base_loopbreak(e->base);
}

static void ev_destroy(io_thread *t)
{
	ev_thread *e = t->be_state;
	if (!e)
		return;
	/* Connections still open (a thread stopped without a drain) go with
	 * their base. */
	conn *next;
	for (conn *c = t->conns; c; c = next) {
		next = c->next;
		conn_close(c);
	}
	event_free(e->wake);
	event_free(e->tick);
	event_base_free(e->base);
	emdb_free(e);
	t->be_state = NULL;
}

static void ev_conn_close(conn *c)
{
	ev_conn *ec = c->be;
	if (ec) {
		if (ec->rd)
			event_free(ec->rd);
		if (ec->wr)
			event_free(ec->wr);
		emdb_free(ec);
		c->be = NULL;
	}
	close(c->fd);
	c->fd = -1;
	conn_destroy(c);
}

/* Bring c's events in line with what it wants.  May close c. */
static void sync_conn(conn *c)
{
	ev_conn *ec = c->be;
	bool blocked;
	if (io_flush(c, &blocked) < 0)
		return;
	bool want_rd = conn_wants_read(c);
	if (c->ssl)
		blocked |= c->tls_want_write;
	if (want_rd != ec->rd_on) {
		if (want_rd ? event_add(ec->rd, NULL) : event_del(ec->rd)) {
			conn_close(c);
			return;
		}
		ec->rd_on = want_rd;
	}
	if (blocked != ec->wr_on) {
		if (blocked ? event_add(ec->wr, NULL) : event_del(ec->wr)) {
			conn_close(c);
			return;
		}
		ec->wr_on = blocked;
	}
	/* OpenSSL may hold input the socket will not signal again (a burst
	 * cut short, or reading paused): come back for it.  Only once the
	 * event is added (invariant 5): libevent's event_add skips an event
	 * that is active, which then runs once and leaves the socket
	 * unwatched for good. */
	if (c->ssl && want_rd && !c->tls_drained)
		event_active(ec->rd, EV_READ, 0);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	conn *c = arg;
	((ev_thread *)c->t->be_state)->events++;
	if (io_read_burst(c) == 0)
		sync_conn(c);
}

static void on_writable(evutil_socket_t fd, short what, void *arg)
{
	conn *c = arg;
	ev_conn *ec = c->be;
	((ev_thread *)c->t->be_state)->events++;
	ec->wr_on = false; /* not EV_PERSIST: the event is spent */
	if (io_read_waited_for_write(c)) {
		/* TLS had to write before it could read on: read again,
		 * which ends in sync_conn. */
		on_readable(fd, EV_READ, c);
		return;
	}
	sync_conn(c);
}

static int ev_conn_open(conn *c)
{
	ev_thread *e = c->t->be_state;
	ev_conn *ec = emdb_calloc(1, sizeof(*ec));
	if (!ec)
		return -ENOMEM;
	ec->rd = event_new(e->base, c->fd, EV_READ | EV_PERSIST, on_readable, c);
	ec->wr = event_new(e->base, c->fd, EV_WRITE, on_writable, c);
	if (!ec->rd || !ec->wr) {
		if (ec->rd)
			event_free(ec->rd);
		if (ec->wr)
			event_free(ec->wr);
		emdb_free(ec);
		return -ENOMEM;
	}
	c->be = ec;
	if (event_add(ec->rd, NULL)) {
		event_free(ec->rd);
		event_free(ec->wr);
		emdb_free(ec);
		c->be = NULL;
		return -ENOMEM;
	}
	ec->rd_on = true;
	return 0;
}

static void ev_conn_update(conn *c)
{
	sync_conn(c);
}

const io_backend io_backend_libevent = {
	.name = "libevent",
	.init = ev_init,
	.run = ev_run,
	.stop = ev_stop,
	.destroy = ev_destroy,
	.conn_open = ev_conn_open,
	.conn_update = ev_conn_update,
	.conn_send_now = io_send_direct,
	.conn_close = ev_conn_close,
};
