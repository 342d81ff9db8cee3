/*
 * loop_uring.c - the io_uring backend of the I/O threads (liburing):
 * completion-based receive and send, one of each in flight per connection
 * at most.  TLS connections are the exception: OpenSSL reads and writes
 * their records through its own calls, so for them the ring carries
 * one-shot readiness polls and the reads and writes are non-blocking
 * calls (io_read_burst, io_flush of net/loop.h), as in loop_event.c.
 *
 * Every operation carries its target in user_data: a ur_conn pointer with
 * the operation in the low bits, or one of the two thread-level tags.
 *
 * Invariants:
 *   1. A connection has at most one RECV (into the space conn_read_space
 *      gave) and one SENDMSG (of iovecs kept in its ur_conn) in flight;
 *      recv_busy/send_busy say which.  The buffers they point at do not
 *      move while they are in flight: inbuf moves only in
 *      conn_read_space, called right before a RECV is prepared, and obuf
 *      never moves committed bytes.
 *   2. A RECV is started only while conn_wants_read, a SENDMSG only while
 *      replies are pending and none is in flight.  conn_send_now's direct
 *      sendmsg(2) runs only while none is in flight either, so bytes
 *      leave in order.
 *   3. After conn_close, nothing new is started; shutdown(2) and cancel
 *      requests make the ones in flight finish, and the last completion
 *      closes the descriptor and destroys the connection.  Completions of
 *      a closed connection touch only its ur_conn.
 *   4. The eventfd read and the tick timeout are always re-armed until
 *      the thread stops.
 *   5. A TLS connection has at most one POLL_IN (or, when OpenSSL holds
 *      input already, a NOP in its place) and one POLL_OUT in flight,
 *      counted in recv_busy and send_busy like a RECV and a SENDMSG; a
 *      POLL_IN is armed while it wants input, a POLL_OUT while the socket
 *      refused replies or a read waits to write.
 *
 *   6. After I/O completions, the thread waits in the kernel only once
 *      busy_poll_us of watching the completion ring found nothing (at
 *      once when it is 0; the tick alone starts no watch).  The ring is
 *      set up with COOP_TASKRUN and TASKRUN_FLAG where the kernel has
 *      them: a completion that needs this thread in the kernel raises
 *      IORING_SQ_TASKRUN instead of interrupting it, and the watch enters
 *      the kernel for it (io_uring_get_events); a wait enters anyway.
 *
 * State changes: ur_conn flags (on submission and completion).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <liburing.h>

#include <emdb/alloc.h>

#include "base/spin.h"

#include "net/conn.h"
#include "net/log.h"
#include "net/loop.h"
#include "net/server.h"
#include "net/stats.h"

#define IOV_MAX_SEND 64

enum { OP_RECV = 1, OP_SEND = 2, OP_CANCEL = 3, OP_POLL_IN = 4, OP_POLL_OUT = 5, OP_MASK = 7 };
#define TAG_WAKE 8ull
#define TAG_TICK 16ull

typedef struct ur_thread {
	struct io_uring ring;
	uint64_t wake_buf;
	struct __kernel_timespec tick;
	bool stop;
} ur_thread;

typedef struct ur_conn {
	conn *c;
	bool recv_busy, send_busy; /* TLS: the POLL_IN, POLL_OUT in flight */
	bool closed;
	struct msghdr mh;
	struct iovec iov[IOV_MAX_SEND];
} ur_conn;

_Static_assert(_Alignof(ur_conn) >= 8, "the low user_data bits hold the operation");

static struct io_uring_sqe *get_sqe(ur_thread *u)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	if (!sqe) {
		io_uring_submit(&u->ring);
		sqe = io_uring_get_sqe(&u->ring);
	}
	return sqe;
}

static int arm_wake(io_thread *t, ur_thread *u)
{
	struct io_uring_sqe *sqe = get_sqe(u);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_read(sqe, t->wake_fd, &u->wake_buf, sizeof(u->wake_buf), 0);
	io_uring_sqe_set_data64(sqe, TAG_WAKE);
	return 0;
}

static int arm_tick(ur_thread *u)
{
	struct io_uring_sqe *sqe = get_sqe(u);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_timeout(sqe, &u->tick, 0, 0);
	io_uring_sqe_set_data64(sqe, TAG_TICK);
	return 0;
}

static int ur_init(io_thread *t)
{
	ur_thread *u = emdb_calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	net_config cfg;
	server_config_copy(t->srv, &cfg);
	/* Cooperative task running (invariant 6); kernels before 5.19 know
	 * neither flag. */
	int rc = io_uring_queue_init(cfg.uring_entries, &u->ring,
				     IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG);
	if (rc == -EINVAL)
		rc = io_uring_queue_init(cfg.uring_entries, &u->ring, 0);
	if (rc < 0) {
		emdb_free(u);
		return rc;
	}
	struct io_uring_probe *probe = io_uring_get_probe_ring(&u->ring);
	bool ok = probe && io_uring_opcode_supported(probe, IORING_OP_RECV) &&
		  io_uring_opcode_supported(probe, IORING_OP_SENDMSG) &&
		  io_uring_opcode_supported(probe, IORING_OP_ASYNC_CANCEL) &&
		  io_uring_opcode_supported(probe, IORING_OP_READ) &&
		  io_uring_opcode_supported(probe, IORING_OP_TIMEOUT);
	if (probe)
		io_uring_free_probe(probe);
	if (!ok) {
		io_uring_queue_exit(&u->ring);
		emdb_free(u);
		return -EOPNOTSUPP;
	}
	u->tick.tv_sec = 0;
	u->tick.tv_nsec = IO_TICK_MS * 1000000ll;
	if ((rc = arm_wake(t, u)) < 0 || (rc = arm_tick(u)) < 0) {
		io_uring_queue_exit(&u->ring);
		emdb_free(u);
		return rc;
	}
	t->be_state = u;
	return 0;
}

static void ur_conn_finish(ur_conn *uc)
{
	conn *c = uc->c;
	close(c->fd);
	c->fd = -1;
	c->be = NULL;
	emdb_free(uc);
	conn_destroy(c);
}

static void submit_cancel(ur_thread *u, ur_conn *uc, int op)
{
	struct io_uring_sqe *sqe = get_sqe(u);
	if (!sqe)
		return; /* shutdown(2) alone will finish it */
	io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)uc | (uint64_t)op, 0);
	io_uring_sqe_set_data64(sqe, OP_CANCEL);
}

static void ur_conn_close(conn *c)
{
	ur_conn *uc = c->be;
	ur_thread *u = c->t->be_state;
	uc->closed = true;
	if (!uc->recv_busy && !uc->send_busy) {
		ur_conn_finish(uc);
		return;
	}
	shutdown(c->fd, SHUT_RDWR);
	if (uc->recv_busy)
		submit_cancel(u, uc, c->ssl ? OP_POLL_IN : OP_RECV);
	if (uc->send_busy)
		submit_cancel(u, uc, c->ssl ? OP_POLL_OUT : OP_SEND);
}

/* Queue a SENDMSG of the pending replies.  Returns 0, or -1 when the
 * submission queue has no room. */
static int start_send(conn *c)
{
	ur_conn *uc = c->be;
	struct io_uring_sqe *sqe = get_sqe(c->t->be_state);
	if (!sqe)
		return -1;
	int n = conn_out_iov(c, uc->iov, IOV_MAX_SEND);
	memset(&uc->mh, 0, sizeof(uc->mh));
	uc->mh.msg_iov = uc->iov;
	uc->mh.msg_iovlen = (size_t)n;
	io_uring_prep_sendmsg(sqe, c->fd, &uc->mh, MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)uc | OP_SEND);
	uc->send_busy = true;
	return 0;
}

/* conn_send_now: with no SENDMSG in flight, a plain non-blocking
 * sendmsg(2) on this thread.  Through the ring, the send's completion
 * would wait for the loop, and every later reply of the same input with
 * it; what the socket does not take now goes by SENDMSG from sync_conn. */
static void ur_conn_send_now(conn *c)
{
	ur_conn *uc = c->be;
	if (!uc->closed && !uc->send_busy)
		io_send_direct(c);
}

/* A TLS connection: OpenSSL reads and writes its records itself, so the
 * ring only says when the socket is ready (one-shot polls) and the reads
 * and writes are the libevent backend's (io_read_burst, io_flush).  Arm
 * what c waits for.  May close c. */
static void tls_sync(conn *c)
{
	ur_conn *uc = c->be;
	ur_thread *u = c->t->be_state;
	bool blocked;
	if (io_flush(c, &blocked) < 0)
		return;
	blocked |= c->tls_want_write;
	if (conn_wants_read(c) && !uc->recv_busy) {
		struct io_uring_sqe *sqe = get_sqe(u);
		if (!sqe) {
			conn_close(c);
			return;
		}
		/* Input OpenSSL already holds raises no readiness: come back at
		 * once (invariant 5). */
		if (c->tls_drained)
			io_uring_prep_poll_add(sqe, c->fd, POLLIN);
		else
			io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)uc | OP_POLL_IN);
		uc->recv_busy = true;
	}
	if (blocked && !uc->send_busy) {
		struct io_uring_sqe *sqe = get_sqe(u);
		if (!sqe) {
			conn_close(c);
			return;
		}
		io_uring_prep_poll_add(sqe, c->fd, POLLOUT);
		io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)uc | OP_POLL_OUT);
		uc->send_busy = true;
	}
}

/* A TLS connection's poll came back: read (POLL_IN, or POLL_OUT where a
 * read was waiting to write), then arm again.  May close c. */
static void tls_ready(conn *c, int op)
{
	bool read = op == OP_POLL_IN || io_read_waited_for_write(c);
	if (read && io_read_burst(c) < 0)
		return;
	tls_sync(c);
}

/* Start what c wants and is not already in flight.  May close c. */
static void sync_conn(conn *c)
{
	ur_conn *uc = c->be;
	ur_thread *u = c->t->be_state;
	if (uc->closed)
		return;
	if (c->ssl) {
		tls_sync(c);
		return;
	}
	if (!uc->send_busy && conn_wants_write(c) && start_send(c) < 0) {
		conn_close(c);
		return;
	}
	if (!uc->recv_busy && conn_wants_read(c)) {
		uint8_t *p;
		size_t n;
		if (conn_read_space(c, &p, &n) < 0) {
			conn_close(c);
			return;
		}
		struct io_uring_sqe *sqe = get_sqe(u);
		if (!sqe) {
			conn_close(c);
			return;
		}
		io_uring_prep_recv(sqe, c->fd, p, n, 0);
		io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)uc | OP_RECV);
		uc->recv_busy = true;
	}
}

static void on_conn_cqe(ur_conn *uc, int op, int res)
{
	conn *c = uc->c;
	if (op == OP_RECV || op == OP_POLL_IN)
		uc->recv_busy = false;
	else
		uc->send_busy = false;
	if (uc->closed) {
		if (!uc->recv_busy && !uc->send_busy)
			ur_conn_finish(uc);
		return;
	}
	if (c->ssl) {
		tls_ready(c, op); /* a poll's result is in the socket: the read says */
		return;
	}
	int rc;
	if (op == OP_RECV) {
		if (res == -EAGAIN || res == -EINTR || res == -ECANCELED)
			rc = 0;
		else
			rc = conn_on_read(c, res);
	} else {
		/* a stream send that moved nothing is a dead peer */
		rc = (res == -EAGAIN || res == -EINTR) ? 0 : conn_on_written(c, res ? res : -EPIPE);
	}
	if (rc < 0) {
		conn_close(c);
		return;
	}
	sync_conn(c);
}

/* Submit what is queued and watch the completion ring for busy_ns
 * (invariant 6).  Returns whether a completion came. */
static bool busy_poll(io_thread *t, ur_thread *u, uint64_t busy_ns)
{
	io_uring_submit(&u->ring);
	uint64_t until = stats_now_ns() + busy_ns;
	while (!io_uring_cq_ready(&u->ring))
		if (IO_URING_READ_ONCE(*u->ring.sq.kflags) & IORING_SQ_TASKRUN)
			io_uring_get_events(&u->ring);
		else if (stats_now_ns() >= until)
			return false;
		else
			cpu_relax();
	io_busy_poll_hit(t);
	return true;
}

static void ur_run(io_thread *t)
{
	ur_thread *u = t->be_state;
	bool did_io = false; /* the last batch held more than the tick */
	while (!u->stop) {
		uint64_t busy_ns = io_busy_poll_ns(t);
		bool ready = io_uring_cq_ready(&u->ring) || (busy_ns && did_io && busy_poll(t, u, busy_ns));
		/* With completions at hand, only submit: no wait, and no
		 * system call when nothing is queued. */
		int rc = ready ? io_uring_submit(&u->ring) : io_uring_submit_and_wait(&u->ring, 1);
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
			log_error("io thread %u: io_uring_submit_and_wait: %s", t->index, strerror(-rc));
			break;
		}
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		/* Handle one batch; handlers may queue new submissions. */
		struct {
			uint64_t data;
			int res;
		} batch[256];
		io_uring_for_each_cqe(&u->ring, head, cqe)
		{
			batch[seen].data = cqe->user_data;
			batch[seen].res = cqe->res;
			if (++seen == 256)
				break;
		}
		io_uring_cq_advance(&u->ring, seen);
		did_io = false;
		for (unsigned i = 0; i < seen; i++) {
			uint64_t d = batch[i].data;
			int res = batch[i].res;
			did_io |= d != TAG_TICK;
			if (d == TAG_WAKE) {
				io_thread_on_wake(t);
				if (!u->stop)
					arm_wake(t, u);
			} else if (d == TAG_TICK) {
				io_thread_on_tick(t);
				if (!u->stop)
					arm_tick(u);
			} else if ((d & OP_MASK) == OP_CANCEL) {
				/* nothing: the cancelled operation completes itself */
			} else {
				on_conn_cqe((ur_conn *)(uintptr_t)(d & ~(uint64_t)OP_MASK),
					    (int)(d & OP_MASK), res);
			}
		}
	}
}

static void ur_stop(io_thread *t)
{
	ur_thread *u = t->be_state;
	u->stop = true;
}

static void ur_destroy(io_thread *t)
{
	ur_thread *u = t->be_state;
	if (!u)
		return;
	/* Connections left (a thread stopped without a drain): close them
	 * and wait for their operations to come back. */
	conn *next;
	for (conn *c = t->conns; c; c = next) {
		next = c->next;
		conn_close(c);
	}
	while (t->conns) {
		struct io_uring_cqe *cqe;
		io_uring_submit(&u->ring);
		if (io_uring_wait_cqe(&u->ring, &cqe) < 0)
			break;
		uint64_t d = cqe->user_data;
		int res = cqe->res;
		io_uring_cqe_seen(&u->ring, cqe);
		if (d != TAG_WAKE && d != TAG_TICK && (d & OP_MASK) != OP_CANCEL)
			on_conn_cqe((ur_conn *)(uintptr_t)(d & ~(uint64_t)OP_MASK), (int)(d & OP_MASK),
				    res);
	}
	io_uring_queue_exit(&u->ring);
	emdb_free(u);
	t->be_state = NULL;
}

static int ur_conn_open(conn *c)
{
	ur_conn *uc = emdb_calloc(1, sizeof(*uc));
	if (!uc)
		return -ENOMEM;
	uc->c = c;
	c->be = uc;
	/* io_uring waits for readiness itself; a blocking descriptor keeps
	 * it from ever answering EAGAIN.  A TLS connection is read and
	 * written with non-blocking calls after its polls: it stays so. */
	int fl = fcntl(c->fd, F_GETFL);
	if (fl >= 0 && !c->ssl)
		fcntl(c->fd, F_SETFL, fl & ~O_NONBLOCK);
	sync_conn(c);
	return 0;
}

static void ur_conn_update(conn *c)
{
	sync_conn(c);
}

const io_backend io_backend_uring = {
	.name = "uring",
	.init = ur_init,
	.run = ur_run,
	.stop = ur_stop,
	.destroy = ur_destroy,
	.conn_open = ur_conn_open,
	.conn_update = ur_conn_update,
	.conn_send_now = ur_conn_send_now,
	.conn_close = ur_conn_close,
};
