/*
 * loop.c - the I/O thread's core, shared by both backends: the mailbox
 * (new connections, replies decided on other threads, the drain), the
 * connection list, the tick, the drain, busy polling's setting.  It
 * knows connections (net/conn.h) but not what their requests mean: work
 * finished elsewhere returns as io_completions, whose done callbacks say.
 *
 * Invariants:
 *   1. Only the thread itself touches conns, n_conns, draining and its
 *      backend; other threads go through the mailbox (mbox_lock) and the
 *      eventfd.
 *   2. A descriptor posted to the mailbox is owned by the thread from then
 *      on: it becomes a connection or is closed, never leaked.
 *   3. After a drain starts no new connection is served, and the thread
 *      stops its loop exactly when its last connection is destroyed (at
 *      once if it had none).
 *   4. A connection still open drain_timeout_ms after the drain started is
 *      closed, replies unsent or not, so a drain always ends.
 *   5. A connection that has no role handshake_timeout_ms after it was
 *      accepted (TLS handshake, HELLO and AUTH all count) gets a TIMEOUT
 *      error and is closed, so silent clients cannot hold
 *      max_connections' slots; one with a role that has sent nothing for
 *      idle_timeout_s (not even the rest of a frame it began) with no
 *      reply owed is closed without a word, as Redis's `timeout` does.
 *      Both are checked on the tick, so they act up to IO_TICK_MS late.
 *      Past its deadline a connection is let off only while the thread
 *      itself is behind on it (thread_is_behind: it wants input and the
 *      kernel or OpenSSL holds bytes it could read now), and never past
 *      twice the deadline.  Bytes buffered otherwise (a TLS record cut
 *      short, input of a connection held back by backpressure) are the
 *      client's doing and suspend nothing.
 *   6. Every completion posted to the mailbox (io_thread_post) runs its
 *      done exactly once, in posting order: with its connection if that
 *      still lives, before a drain that the same wake brings (the answers
 *      are owed), else with NULL, at the latest in io_thread_cleanup.
 *      Only a post that finds the completion list empty writes the
 *      eventfd: a list that holds something has a wake pending, because
 *      both backends read the eventfd before they take the list
 *      (run_completions), so a post they miss wrote after that read.
 *
 * State changes: io_thread_on_wake (completions, new connections, drain
 * start), io_thread_on_tick (timeouts), io_thread_forget (counts, stop).
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "net/conn.h"
#include "net/log.h"
#include "net/loop.h"
#include "net/server.h"
#include "net/stats.h"
#include "net/tls.h"
#include "protocol/tls_io.h"

#define IOV_MAX_DIRECT 64

ssize_t io_recv(conn *c, void *p, size_t n)
{
	if (!c->ssl)
		return recv(c->fd, p, n, MSG_DONTWAIT);
	short want = POLLIN;
	ssize_t k = tls_io_recv(c->ssl, p, n, &want);
	c->tls_drained = k < 0 && errno == EAGAIN;
	c->tls_want_write = c->tls_drained && want == POLLOUT;
	if (k < 0 && errno == EPROTO)
		log_info("conn %llu (%s): TLS: %s", (unsigned long long)c->id, c->peer, tls_io_error());
	return k;
}

ssize_t io_sendv(conn *c, const struct iovec *iov, int n)
{
	if (!c->ssl) {
		struct msghdr mh = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n };
		return sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	short want = POLLOUT;
	ssize_t k = tls_io_sendv(c->ssl, iov, n, &want);
	if (k < 0 && errno == EAGAIN && want == POLLIN)
		return 0;
	if (k < 0 && errno != EAGAIN) {
		log_info("conn %llu (%s): TLS: %s", (unsigned long long)c->id, c->peer, tls_io_error());
		errno = EPIPE;
	}
	return k;
}

int io_read_burst(conn *c)
{
	for (int i = 0; i < IO_READ_BURST && conn_wants_read(c); i++) {
		uint8_t *p;
		size_t n;
		if (conn_read_space(c, &p, &n) < 0) {
			conn_close(c);
			return -1;
		}
		ssize_t r = io_recv(c, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (conn_on_read(c, r < 0 ? -errno : r) < 0) {
			conn_close(c);
			return -1;
		}
		if (r <= 0 || ((size_t)r < n && !c->ssl))
			break; /* end of stream, or the socket is empty for now
				* (a TLS read returns a record at a time: only
				* EAGAIN says it is empty) */
	}
	return 0;
}

int io_flush(conn *c, bool *blocked)
{
	*blocked = false;
	while (conn_wants_write(c)) {
		struct iovec iov[IOV_MAX_DIRECT];
		int n = conn_out_iov(c, iov, IOV_MAX_DIRECT);
		ssize_t w = io_sendv(c, iov, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w == 0 && c->ssl)
			return 0; /* TLS needs to read first: the read side calls back */
		if ((w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) || w == 0) {
			*blocked = true;
			return 0;
		}
		if (conn_on_written(c, w < 0 ? -errno : w) < 0) {
			conn_close(c);
			return -1;
		}
	}
	return 0;
}

bool io_read_waited_for_write(conn *c)
{
	if (!c->tls_want_write)
		return false;
	c->tls_want_write = false;
	return true;
}

void io_send_direct(conn *c)
{
	while (conn_wants_write(c)) {
		struct iovec iov[IOV_MAX_DIRECT];
		int n = conn_out_iov(c, iov, IOV_MAX_DIRECT);
		ssize_t w = io_sendv(c, iov, n);
		if (w <= 0)
			return; /* full, or an error the next conn_update meets */
		conn_out_sent(c, (size_t)w);
	}
}

int io_thread_init(io_thread *t, server *srv, unsigned index, io_backend_kind kind)
{
	memset(t, 0, sizeof(*t));
	t->srv = srv;
	t->index = index;
	t->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->wake_fd < 0)
		return -errno;
	pthread_mutex_init(&t->mbox_lock, NULL);
	t->be = kind == IO_BACKEND_URING ? &io_backend_uring : &io_backend_libevent;
	int rc = t->be->init(t);
	if (rc < 0 && t->be == &io_backend_uring) {
		log_warn("io thread %u: io_uring setup failed (%s): using libevent", index,
			 strerror(-rc));
		t->be = &io_backend_libevent;
		rc = t->be->init(t);
	}
	if (rc < 0) {
		close(t->wake_fd);
		pthread_mutex_destroy(&t->mbox_lock);
		return rc;
	}
	return 0;
}

static void *thread_main(void *arg)
{
	io_thread *t = arg;
	char name[16];
	snprintf(name, sizeof(name), "emdb-io-%u", t->index);
	pthread_setname_np(pthread_self(), name);
	t->be->run(t);
	return NULL;
}

int io_thread_start(io_thread *t)
{
	int rc = pthread_create(&t->tid, NULL, thread_main, t);
	return rc ? -rc : 0;
}

void io_thread_cleanup(io_thread *t)
{
	t->be->destroy(t);
	for (uint32_t i = 0; i < t->mbox_n; i++)
		close(t->mbox[i].fd);
	emdb_free(t->mbox);
	t->mbox = NULL;
	t->mbox_n = 0;
	/* Completions that came after the thread's last wake: their
	 * connections are gone with it (invariant 6). */
	io_completion *w, *next;
	for (w = t->done_head; w; w = next) {
		next = w->next;
		w->done(NULL, w);
	}
	t->done_head = t->done_tail = NULL;
	close(t->wake_fd);
	pthread_mutex_destroy(&t->mbox_lock);
}

void io_thread_wait(io_thread *t)
{
	pthread_join(t->tid, NULL);
}

void io_thread_join(io_thread *t)
{
	io_thread_wait(t);
	io_thread_cleanup(t);
}

static void wake(io_thread *t)
{
	uint64_t one = 1;
	ssize_t w = write(t->wake_fd, &one, sizeof(one));
	(void)w; /* EAGAIN: the counter is already nonzero, a wake is pending */
}

/* Append the item of `size` bytes to a mailbox array of *n items in room
 * for *cap, doubling the room (first `first`) when it is full.  Called with
 * mbox_lock held.  Returns 0, or -ENOMEM with nothing changed. */
static int mbox_append(void **arr, uint32_t *n, uint32_t *cap, uint32_t first, size_t size, const void *item)
{
	if (*n == *cap) {
		uint32_t room = *cap ? *cap * 2 : first;
		void *m = emdb_realloc(*arr, (size_t)room * size);
		if (!m)
			return -ENOMEM;
		*arr = m;
		*cap = room;
	}
	memcpy((char *)*arr + (size_t)(*n)++ * size, item, size);
	return 0;
}

int io_thread_post_conn(io_thread *t, const new_conn *nc)
{
	pthread_mutex_lock(&t->mbox_lock);
	void *arr = t->mbox;
	int rc = mbox_append(&arr, &t->mbox_n, &t->mbox_cap, 64, sizeof(*nc), nc);
	t->mbox = arr;
	pthread_mutex_unlock(&t->mbox_lock);
	if (rc == 0)
		wake(t);
	return rc;
}

void io_completion_init(io_completion *w, const conn *c, io_done_fn done)
{
	w->done = done;
	w->conn_id = c->id;
	w->next = NULL;
}

void io_thread_post(io_thread *t, io_completion *w)
{
	w->next = NULL;
	pthread_mutex_lock(&t->mbox_lock);
	bool first = !t->done_head;
	if (t->done_tail)
		t->done_tail->next = w;
	else
		t->done_head = w;
	t->done_tail = w;
	pthread_mutex_unlock(&t->mbox_lock);
	if (first) /* invariant 6: else a wake is pending */
		wake(t);
}

void io_thread_drain(io_thread *t)
{
	pthread_mutex_lock(&t->mbox_lock);
	t->mbox_drain = true;
	pthread_mutex_unlock(&t->mbox_lock);
	wake(t);
}

static void maybe_stop(io_thread *t)
{
	if (t->draining && t->n_conns == 0 && !t->stopped) {
		t->stopped = true;
		log_debug("io thread %u: drained", t->index);
		t->be->stop(t);
	}
}

static void start_drain(io_thread *t)
{
	uint64_t ms = atomic_load(&t->srv->rt.drain_timeout_ms);
	t->draining = true;
	t->drain_deadline_ns = stats_now_ns() + ms * 1000000ull;
	/* Every connection stops reading; those with nothing left to send
	 * go now, the rest once their replies are out. */
	conn *next;
	for (conn *c = t->conns; c; c = next) {
		next = c->next;
		if (c->dead)
			continue;
		if (!c->paused && obuf_pending(&c->out) == 0 && !conn_owed_answers(c))
			conn_close(c);
		else
			conn_update(c);
	}
	maybe_stop(t);
}

static void open_conn(io_thread *t, const new_conn *nc)
{
	conn *c = conn_create(t, nc->fd, nc->loopback, nc->peer);
	if (!c) {
		log_warn("io thread %u: no memory for a connection from %s", t->index, nc->peer);
		close(nc->fd);
		server_conn_gone(t->srv, nc->unix_sock);
		return;
	}
	c->unix_sock = nc->unix_sock;
	log_debug("conn %llu (%s): accepted on io thread %u", (unsigned long long)c->id, c->peer,
		  t->index);
	int rc = 0;
	if (nc->tls && !(c->ssl = tls_server_accept(t->srv->tls, nc->fd)))
		rc = -ENOMEM;
	if (rc == 0)
		rc = t->be->conn_open(c);
	if (rc < 0) {
		log_warn("conn %llu (%s): cannot start I/O: %s", (unsigned long long)c->id, c->peer,
			 strerror(-rc));
		close(c->fd);
		c->dead = true;
		conn_destroy(c);
	}
}

/* Work finished elsewhere (io_thread_post), to its connection if that is
 * still here; done frees the record either way. */
static void complete(io_thread *t, io_completion *w)
{
	conn *c = t->conns;
	while (c && c->id != w->conn_id)
		c = c->next;
	if (!c || c->dead) {
		w->done(NULL, w);
		return;
	}
	c->answers_owed--;
	w->done(c, w);
	conn_update(c); /* may destroy c */
}

static void run_completions(io_thread *t)
{
	for (;;) {
		pthread_mutex_lock(&t->mbox_lock);
		io_completion *w = t->done_head;
		t->done_head = t->done_tail = NULL;
		pthread_mutex_unlock(&t->mbox_lock);
		if (!w)
			return;
		while (w) {
			io_completion *next = w->next;
			complete(t, w);
			w = next;
		}
	}
}

void io_thread_on_wake(io_thread *t)
{
	new_conn batch[64];
	/* Before a drain that may have come with them: the answers are owed. */
	run_completions(t);
	for (;;) {
		uint32_t n = 0;
		bool drain;
		pthread_mutex_lock(&t->mbox_lock);
		while (n < 64 && t->mbox_n > 0)
			batch[n++] = t->mbox[--t->mbox_n];
		drain = t->mbox_drain;
		pthread_mutex_unlock(&t->mbox_lock);
		for (uint32_t i = 0; i < n; i++) {
			if (t->draining || drain) {
				close(batch[i].fd);
				server_conn_gone(t->srv, batch[i].unix_sock);
			} else {
				open_conn(t, &batch[i]);
			}
		}
		if (drain && !t->draining)
			start_drain(t);
		if (n < 64)
			break;
	}
}

/* Whether the thread, not the client, is late on c: c wants input and
 * there is some the thread could read at once, in the kernel's socket
 * buffer or decrypted by OpenSSL (after a long request stalled the
 * thread, a client's HELLO or next request may be waiting there).  The
 * start of a TLS record (SSL_has_pending) does not count: OpenSSL needs
 * the rest from the client before anything can be read, and a client
 * that sends 6 bytes of a record and stops must not escape its deadline
 * (issue 23). */
static bool thread_is_behind(const conn *c)
{
	int n = 0;
	if (!conn_wants_read(c))
		return false;
	if (c->ssl && SSL_pending(c->ssl) > 0)
		return true;
	return ioctl(c->fd, FIONREAD, &n) == 0 && n > 0;
}

/* Whether a deadline of limit_ns, elapsed_ns under way, is missed
 * (invariant 5): passed, and the thread is not the one late, or passed
 * twice over whatever the reason. */
static bool deadline_missed(const conn *c, uint64_t elapsed_ns, uint64_t limit_ns)
{
	if (elapsed_ns < limit_ns)
		return false;
	return elapsed_ns / 2 >= limit_ns || !thread_is_behind(c);
}

/* handshake_timeout_ms and idle_timeout_s (invariant 5); may destroy c. */
static void check_timeouts(conn *c, uint64_t now, uint64_t handshake_ns, uint64_t idle_ns)
{
	if (c->closing)
		return;
	if (handshake_ns && c->role == PROTO_ROLE_NONE && deadline_missed(c, now - c->opened_ns, handshake_ns)) {
		atomic_fetch_add_explicit(&c->t->handshake_timeouts, 1, memory_order_relaxed);
		bool tls_done = !c->ssl || SSL_is_init_finished(c->ssl);
		conn_timeout(c, !tls_done    ? "the TLS handshake did not finish within handshake_timeout_ms"
				: c->version ? "AUTH did not come within handshake_timeout_ms"
					     : "HELLO did not come within handshake_timeout_ms");
		return;
	}
	if (idle_ns && c->role != PROTO_ROLE_NONE && !obuf_pending(&c->out) && !conn_owed_answers(c) &&
	    deadline_missed(c, now - c->last_recv_ns, idle_ns)) {
		log_info("conn %llu (%s): idle for idle_timeout_s: closing", (unsigned long long)c->id,
			 c->peer);
		atomic_fetch_add_explicit(&c->t->idle_timeouts, 1, memory_order_relaxed);
		conn_close(c);
	}
}

uint64_t io_busy_poll_ns(const io_thread *t)
{
	return atomic_load_explicit(&t->srv->rt.busy_poll_us, memory_order_relaxed) * 1000u;
}

void io_busy_poll_hit(io_thread *t)
{
	atomic_fetch_add_explicit(&t->busy_poll_hits, 1, memory_order_relaxed);
}

void io_thread_on_tick(io_thread *t)
{
	uint64_t now = stats_now_ns();
	bool force = t->draining && now >= t->drain_deadline_ns;
	uint64_t handshake_ns = atomic_load(&t->srv->rt.handshake_timeout_ms) * 1000000ull;
	uint64_t idle_ns = atomic_load(&t->srv->rt.idle_timeout_s) * 1000000000ull;
	conn *next;
	for (conn *c = t->conns; c; c = next) {
		next = c->next;
		if (c->dead)
			continue;
		if (force) {
			log_warn("conn %llu (%s): drain timeout: closing with %zu reply bytes unsent",
				 (unsigned long long)c->id, c->peer, obuf_pending(&c->out));
			conn_close(c);
		} else if (c->closing && now >= c->close_deadline_ns) {
			conn_close(c);
		} else if (!t->draining) {
			check_timeouts(c, now, handshake_ns, idle_ns);
		}
	}
}

void io_thread_forget(io_thread *t, bool unix_sock)
{
	t->n_conns--;
	atomic_fetch_sub_explicit(&t->n_open, 1, memory_order_relaxed);
	server_conn_gone(t->srv, unix_sock);
	maybe_stop(t);
}
