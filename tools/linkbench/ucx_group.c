/*
 * ucx_group.c - the bare UCX exchange between processes, a home and its
 * owners, each driven from its worker's event fd (ucx_group.h).
 *
 * Design
 *   The caller forks the owners first: each opens an answering end
 *   (ucx_am.h), listens on a free port of 127.0.0.1 and writes the port
 *   to its answer pipe.  Then it forks the home, which opens an asking
 *   end, connects to every owner's port and says it is ready.  The caller
 *   talks to them over two pipes each: to an owner, the buffer sizes the
 *   next exchange needs (grown while nothing is in flight); to the home,
 *   one exchange's command, answered with its result.  Between commands
 *   every process goes on progressing UCX (wiring up, keepalives) and
 *   watches its command pipe.
 *
 *   Progress is a node's (net/node_link.c, nl_pump): progress until idle,
 *   ucp_worker_arm (BUSY: progress more), then sleep in poll on the
 *   worker's event fd; the home skips the sleep when replies came, so that
 *   it posts the next round first, as a node posts the next request.
 *   busy_poll: progress without arming or sleeping.
 *
 * Invariants
 *   1. A child never returns into the caller's code: it ends with _exit,
 *      never runs the caller's atexit or signal handlers (reset to the
 *      default), and dies with the caller (PR_SET_PDEATHSIG, and a check
 *      of getppid at least every second).
 *   2. Every wait of the caller on a child is bounded (poll timeouts); a
 *      child that does not answer in time marks the group broken.
 *   3. A child holds only its own two pipe ends of the group's pipes.
 */
#define _GNU_SOURCE /* pipe2 */
#include "tools/linkbench/ucx_group.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"

#define N_PROCS (1 + UCX_GROUP_MAX_OWNERS)
#define START_MS 20000 /* for a child to come up */
#define REPLY_MS 15000 /* beyond an exchange's own time, for its answer */

struct ucx_group {
	unsigned owners;
	int busy_poll;
	pid_t pid[N_PROCS];  /* 0 the home, 1.. the owners */
	int cmd[N_PROCS];    /* the caller's write ends */
	int ans[N_PROCS];    /* the caller's read ends */
	unsigned port[N_PROCS];
	size_t rx[N_PROCS], tx[N_PROCS]; /* what each child's buffers hold */
	int broken;
};

typedef struct exch_cmd {
	uint32_t n, depth;
	uint64_t rounds, max_ns;
	uint32_t to[UCX_AM_MAX_MSGS];
	uint64_t req[UCX_AM_MAX_MSGS], rep[UCX_AM_MAX_MSGS];
} exch_cmd;

typedef struct exch_ans {
	int32_t rc;
	ucx_am_result res;
	char err[200];
} exch_ans;

typedef struct size_cmd {
	uint64_t rx, tx;
} size_cmd;

/* ---- pipes ------------------------------------------------------------ */

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Read exactly len bytes within ms milliseconds.  Returns 0, or -1 on
 * EOF, error or time-out. */
static int read_within(int fd, void *buf, size_t len, int ms)
{
	char *p = buf;
	uint64_t end = emdb__now_ns() + (uint64_t)ms * 1000000u;
	while (len) {
		uint64_t now = emdb__now_ns();
		if (now >= end)
			return -1;
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int r = poll(&pf, 1, (int)((end - now) / 1000000u) + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		ssize_t got = read(fd, p, len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return -1;
		p += got;
		len -= (size_t)got;
	}
	return 0;
}

/* ---- the children --------------------------------------------------- */

typedef struct child {
	ucx_am_end e;
	int busy_poll;
	int cmd, ans;        /* this child's ends */
	pid_t parent;
	uint64_t got_seen;   /* the home: replies counted before the last wait */
} child;

static void child_exit(int code)
{
	_exit(code);
}

/* Progress until idle, then arm.  Returns 1 when the worker is armed (the
 * caller may sleep on its event fd), 0 when it must not sleep (busy_poll,
 * or the home got replies it must act on first), -1 on an arm failure. */
static int pump(child *c, int home)
{
	for (;;) {
		while (ucp_worker_progress(c->e.worker))
			;
		if (c->busy_poll || (home && c->e.got != c->got_seen))
			return 0;
		ucs_status_t st = ucp_worker_arm(c->e.worker);
		if (st == UCS_ERR_BUSY)
			continue;
		return st == UCS_OK ? 1 : -1;
	}
}

/* Sleep until the worker's event fd or the command pipe is readable (at
 * most ms), or just look at the pipe when polling.  Returns whether a
 * command (or EOF) is waiting. */
static int sleep_on(child *c, int armed, int ms)
{
	struct pollfd pf[2] = { { .fd = c->cmd, .events = POLLIN }, { .fd = c->e.efd, .events = POLLIN } };
	int r = poll(pf, armed ? 2 : 1, armed ? ms : 0);
	return r > 0 && (pf[0].revents & (POLLIN | POLLHUP));
}

/* The home's wait between posts (ucx_am_wait_fn). */
static int home_wait(void *ctx, char *err, size_t errlen)
{
	child *c = ctx;
	int armed = pump(c, 1);
	if (armed < 0) {
		snprintf(err, errlen, "UCX: ucp_worker_arm failed in the home");
		return -1;
	}
	if (armed) {
		struct pollfd pf = { .fd = c->e.efd, .events = POLLIN };
		if (poll(&pf, 1, 100) > 0)
			while (ucp_worker_progress(c->e.worker))
				;
	}
	c->got_seen = c->e.got;
	if (getppid() != c->parent) {
		snprintf(err, errlen, "the caller is gone");
		return -1;
	}
	return 0;
}

static void child_setup(child *c, int cmd, int ans, int busy_poll, pid_t parent)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE };
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_DFL);
	if (getppid() != parent)
		child_exit(1);
	memset(c, 0, sizeof(*c));
	c->cmd = cmd;
	c->ans = ans;
	c->busy_poll = busy_poll;
	c->parent = parent;
	c->e.efd = -1;
}

/* Between commands: keep UCX going, return once a command is waiting. */
static void idle(child *c, int home)
{
	uint64_t checked = emdb__now_ns();
	for (unsigned spins = 0;; spins++) {
		int armed = pump(c, home);
		if (armed < 0 || c->e.failed)
			child_exit(1);
		c->got_seen = c->e.got;
		/* Polling, the pipe is looked at every 256th turn only. */
		if ((armed || (spins & 255) == 0) && sleep_on(c, armed, 1000))
			return;
		uint64_t now = emdb__now_ns();
		if (now - checked > 1000000000ull) {
			if (getppid() != c->parent)
				child_exit(0);
			checked = now;
		}
	}
}

static void owner_main(child *c)
{
	uint32_t port = 0;
	if (ucx_am_end_open(&c->e, UCX_AM_ANSWER, !c->busy_poll) == 0) {
		port = ucx_am_free_port();
		if (ucx_am_listen(&c->e, port) < 0)
			port = 0;
	}
	if (write_all(c->ans, &port, sizeof(port)) < 0 || !port)
		child_exit(1);
	for (;;) {
		size_cmd s;
		idle(c, 0);
		if (read_within(c->cmd, &s, sizeof(s), 1000) < 0)
			child_exit(0); /* EOF: the group is closing */
		int32_t rc = ucx_am_reserve(&c->e, s.rx, s.tx);
		if (write_all(c->ans, &rc, sizeof(rc)) < 0)
			child_exit(1);
	}
}

static void home_main(child *c, const unsigned *port, unsigned owners)
{
	ucp_ep_h ep[UCX_GROUP_MAX_OWNERS];
	int32_t ok = ucx_am_end_open(&c->e, UCX_AM_ASK, !c->busy_poll);
	for (unsigned k = 0; ok == 0 && k < owners; k++)
		ok = ucx_am_connect(&c->e, port[k], &ep[k]);
	if (write_all(c->ans, &ok, sizeof(ok)) < 0 || ok)
		child_exit(1);
	for (;;) {
		exch_cmd x;
		exch_ans a;
		ucp_ep_h to[UCX_AM_MAX_MSGS];
		size_t req[UCX_AM_MAX_MSGS], rep[UCX_AM_MAX_MSGS], max_req = 1, max_rep = 1;
		idle(c, 1);
		if (read_within(c->cmd, &x, sizeof(x), 1000) < 0)
			child_exit(0);
		memset(&a, 0, sizeof(a));
		for (unsigned i = 0; i < x.n && i < UCX_AM_MAX_MSGS; i++) {
			to[i] = ep[x.to[i] < owners ? x.to[i] : 0];
			req[i] = (size_t)x.req[i];
			rep[i] = (size_t)x.rep[i];
			max_req = req[i] > max_req ? req[i] : max_req;
			max_rep = rep[i] > max_rep ? rep[i] : max_rep;
		}
		if (ucx_am_reserve(&c->e, max_rep, max_req) < 0) {
			a.rc = -1;
			snprintf(a.err, sizeof(a.err), "out of memory in the home");
		} else {
			c->got_seen = c->e.got;
			a.rc = ucx_am_rounds(&c->e, to, req, rep, x.n, x.depth, x.rounds, x.max_ns, home_wait, c, &a.res,
					     a.err, sizeof(a.err));
		}
		if (write_all(c->ans, &a, sizeof(a)) < 0)
			child_exit(1);
	}
}

/* ---- the caller's side --------------------------------------------- */

/* Fork child i with a fresh pair of pipes; the child runs body and never
 * returns.  Returns 0 or -1. */
static int spawn(ucx_group *g, unsigned i, char *err, size_t errlen)
{
	int down[2], up[2];
	pid_t parent = getpid();
	if (pipe2(down, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	if (pipe2(up, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		close(down[0]);
		close(down[1]);
		return -1;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(down[0]);
		close(down[1]);
		close(up[0]);
		close(up[1]);
		return -1;
	}
	if (pid == 0) {
		child c;
		for (unsigned k = 0; k < N_PROCS; k++) {
			if (g->cmd[k] >= 0)
				close(g->cmd[k]);
			if (g->ans[k] >= 0)
				close(g->ans[k]);
		}
		close(down[1]);
		close(up[0]);
		child_setup(&c, down[0], up[1], g->busy_poll, parent);
		if (i == 0)
			home_main(&c, &g->port[1], g->owners);
		else
			owner_main(&c);
		child_exit(0);
	}
	close(down[0]);
	close(up[1]);
	g->pid[i] = pid;
	g->cmd[i] = down[1];
	g->ans[i] = up[0];
	return 0;
}

int ucx_group_open(ucx_group **out, unsigned owners, int busy_poll, char *err, size_t errlen)
{
	ucx_group *g = calloc(1, sizeof(*g));
	*out = NULL;
	if (!g) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (owners == 0 || owners > UCX_GROUP_MAX_OWNERS) {
		snprintf(err, errlen, "bare UCX group: %u owners (1..%u)", owners, UCX_GROUP_MAX_OWNERS);
		free(g);
		return -1;
	}
	g->owners = owners;
	g->busy_poll = busy_poll;
	for (unsigned k = 0; k < N_PROCS; k++)
		g->cmd[k] = g->ans[k] = -1;
	for (unsigned k = 1; k <= owners; k++) {
		uint32_t port;
		if (spawn(g, k, err, errlen) < 0)
			goto fail;
		if (read_within(g->ans[k], &port, sizeof(port), START_MS) < 0 || !port) {
			snprintf(err, errlen, "bare UCX owner %u did not come up (UCX context, worker or listener)", k);
			goto fail;
		}
		g->port[k] = port;
	}
	int32_t ok;
	if (spawn(g, 0, err, errlen) < 0)
		goto fail;
	if (read_within(g->ans[0], &ok, sizeof(ok), START_MS) < 0 || ok) {
		snprintf(err, errlen, "bare UCX home did not come up (UCX context, worker or connect)");
		goto fail;
	}
	*out = g;
	return 0;
fail:
	ucx_group_close(g);
	return -1;
}

pid_t ucx_group_pid(const ucx_group *g, unsigned i)
{
	return g && i <= g->owners ? g->pid[i] : 0;
}

int ucx_group_exchange(ucx_group *g, const unsigned *to, const size_t *req, const size_t *rep, unsigned n,
		       unsigned depth, uint64_t rounds, uint64_t max_ns, ucx_am_result *out, char *err,
		       size_t errlen)
{
	exch_cmd x = { .n = n, .depth = depth, .rounds = rounds, .max_ns = max_ns };
	exch_ans a;

	memset(out, 0, sizeof(*out));
	if (g->broken) {
		snprintf(err, errlen, "bare UCX group: broken by an earlier failure");
		return -1;
	}
	if (n == 0 || n > UCX_AM_MAX_MSGS || depth == 0) {
		snprintf(err, errlen, "bare UCX group: %u messages a round, depth %u", n, depth);
		return -1;
	}
	/* Each owner's buffers hold the largest request and reply it gets. */
	for (unsigned i = 0; i < n; i++) {
		if (to[i] >= g->owners) {
			snprintf(err, errlen, "bare UCX group: no owner %u", to[i]);
			return -1;
		}
		x.to[i] = to[i];
		x.req[i] = req[i];
		x.rep[i] = rep[i];
	}
	for (unsigned k = 1; k <= g->owners; k++) {
		size_cmd s = { 1, 1 };
		for (unsigned i = 0; i < n; i++)
			if (to[i] == k - 1) {
				s.rx = req[i] > s.rx ? req[i] : s.rx;
				s.tx = rep[i] > s.tx ? rep[i] : s.tx;
			}
		if (s.rx <= g->rx[k] && s.tx <= g->tx[k])
			continue;
		int32_t rc;
		if (write_all(g->cmd[k], &s, sizeof(s)) < 0 || read_within(g->ans[k], &rc, sizeof(rc), REPLY_MS) < 0 ||
		    rc) {
			snprintf(err, errlen, "bare UCX owner %u could not take %llu-byte requests", k,
				 (unsigned long long)s.rx);
			g->broken = 1;
			return -1;
		}
		g->rx[k] = s.rx;
		g->tx[k] = s.tx;
	}
	int ms = max_ns ? (int)(max_ns / 1000000u) + REPLY_MS : 600000;
	if (write_all(g->cmd[0], &x, sizeof(x)) < 0 || read_within(g->ans[0], &a, sizeof(a), ms) < 0) {
		snprintf(err, errlen, "bare UCX home did not answer");
		g->broken = 1;
		return -1;
	}
	if (a.rc) {
		snprintf(err, errlen, "%s", a.err);
		g->broken = 1;
		return -1;
	}
	*out = a.res;
	return 0;
}

void ucx_group_close(ucx_group *g)
{
	if (!g)
		return;
	for (unsigned k = 0; k < N_PROCS; k++) {
		if (g->pid[k] > 0)
			kill(g->pid[k], SIGTERM);
		if (g->cmd[k] >= 0)
			close(g->cmd[k]);
		if (g->ans[k] >= 0)
			close(g->ans[k]);
	}
	uint64_t end = emdb__now_ns() + 2000000000ull;
	for (unsigned k = 0; k < N_PROCS; k++) {
		if (g->pid[k] <= 0)
			continue;
		while (waitpid(g->pid[k], NULL, WNOHANG) == 0) {
			if (emdb__now_ns() >= end) {
				kill(g->pid[k], SIGKILL);
				waitpid(g->pid[k], NULL, 0);
				break;
			}
			struct timespec ts = { 0, 5000000 };
			nanosleep(&ts, NULL);
		}
	}
	free(g);
}
