/*
 * net_sock.c - sockets for emdb-bench's network mode (net_sock.h).
 *
 * Design
 *   The anchors (echo, Redis) must cost the client no more than the emdb
 *   client library does, so they use plain blocking sockets: the sending
 *   side on the harness thread, the receiving side on one thread per
 *   connection, as the client library does.  A semaphore carries
 *   completions from receiver to sender, which is what bounds the requests
 *   in flight to the pipelining depth.
 *
 * Invariants
 *   1. Every listener binds 127.0.0.1 or a Unix socket path: nothing is
 *      reachable from another machine.
 *   2. A receiver ends only at end of stream; net_pipe_stop causes it by
 *      shutting the socket down after the pipeline drained.
 */
#include "tools/bench/net_sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <emdb/client.h>

#include "tools/bench/harness.h"

static void unix_addr(struct sockaddr_un *a, const char *path)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(a->sun_path))
		harness_die("socket path too long: %s", path);
	strcpy(a->sun_path, path);
}

int net_connect(uint16_t port, const char *path)
{
	int fd, one = 1;

	if (path) {
		struct sockaddr_un a;
		unix_addr(&a, path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
			goto fail;
		int sndbuf = EMDB_CLIENT_UNIX_SNDBUF;
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
		return fd;
	}
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		goto fail;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
fail:;
	int e = errno;
	close(fd);
	errno = e;
	return -1;
}

int net_listen(const char *path, uint16_t *port)
{
	int fd, one = 1;

	if (path) {
		struct sockaddr_un a;
		unix_addr(&a, path);
		unlink(path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 16) < 0)
			harness_die("listen on %s: %s", path, strerror(errno));
		return fd;
	}
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		harness_die("socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		harness_die("listen on 127.0.0.1: %s", strerror(errno));
	*port = ntohs(a.sin_port);
	return fd;
}

uint16_t net_free_port(void)
{
	uint16_t port;
	int fd = net_listen(NULL, &port);
	close(fd);
	return port;
}

int net_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

int net_read_all(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n) {
		ssize_t k = recv(fd, p, n, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int rd_fill(net_rd *r)
{
	ssize_t k;
	do
		k = recv(r->fd, r->buf, sizeof(r->buf), 0);
	while (k < 0 && errno == EINTR);
	if (k <= 0)
		return -1;
	r->pos = 0;
	r->len = (size_t)k;
	return 0;
}

int net_rd_bytes(net_rd *r, void *dst, size_t n)
{
	char *d = dst;
	while (n) {
		size_t have = r->len - r->pos;
		if (!have) {
			/* Large payloads go straight to their destination. */
			if (n >= sizeof(r->buf) && d) {
				if (net_read_all(r->fd, d, n) < 0)
					return -1;
				return 0;
			}
			if (rd_fill(r) < 0)
				return -1;
			continue;
		}
		if (have > n)
			have = n;
		if (d) {
			memcpy(d, r->buf + r->pos, have);
			d += have;
		}
		r->pos += have;
		n -= have;
	}
	return 0;
}

int net_rd_line(net_rd *r, char *line, size_t cap)
{
	size_t k = 0;
	for (;;) {
		if (r->pos == r->len && rd_fill(r) < 0)
			return -1;
		char c = r->buf[r->pos++];
		if (c == '\n' && k > 0 && line[k - 1] == '\r') {
			line[k - 1] = 0;
			return 0;
		}
		if (k + 1 >= cap)
			return -1;
		line[k++] = c;
	}
}

static void *pipe_rx(void *arg)
{
	net_pipe *p = arg;
	while (p->recv_one(p->ctx, p->rd) == 0)
		sem_post(&p->done);
	if (!p->stopping)
		harness_die("an anchor's server closed the connection");
	return NULL;
}

void net_pipe_start(net_pipe *p, int fd, unsigned depth,
		    int (*recv_one)(void *ctx, net_rd *r), void *ctx)
{
	memset(p, 0, sizeof(*p));
	p->fd = fd;
	p->depth = depth;
	p->recv_one = recv_one;
	p->ctx = ctx;
	p->rd = calloc(1, sizeof(*p->rd));
	if (!p->rd)
		harness_die("out of memory");
	p->rd->fd = fd;
	sem_init(&p->done, 0, 0);
	if (pthread_create(&p->rx, NULL, pipe_rx, p) != 0)
		harness_die("cannot start a receiver thread");
}

static void pipe_wait(net_pipe *p)
{
	while (sem_wait(&p->done) < 0 && errno == EINTR)
		;
	p->inflight--;
}

int net_pipe_slot(net_pipe *p)
{
	int completed = 0;
	if (p->inflight == p->depth) {
		pipe_wait(p);
		completed = 1;
	}
	p->inflight++;
	return completed;
}

void net_pipe_drain(net_pipe *p)
{
	while (p->inflight)
		pipe_wait(p);
}

void net_pipe_stop(net_pipe *p)
{
	net_pipe_drain(p);
	p->stopping = 1;
	shutdown(p->fd, SHUT_RDWR);
	pthread_join(p->rx, NULL);
	close(p->fd);
	sem_destroy(&p->done);
	free(p->rd);
	p->rd = NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

void net_lat_measure(void (*op)(void *ctx), void *ctx, double seconds, net_lat *out)
{
	double t0, end = harness_now() + seconds / 10;

	while (harness_now() < end)
		op(ctx);
	end = harness_now() + seconds;
	do {
		t0 = harness_now();
		op(ctx);
		if (out->n == out->cap) {
			size_t cap = out->cap ? 2 * out->cap : 1 << 16;
			double *g = realloc(out->s, cap * sizeof(double));
			if (!g)
				harness_die("out of memory");
			out->s = g;
			out->cap = cap;
		}
		out->s[out->n] = (harness_now() - t0) * 1e6;
		out->sum += out->s[out->n++];
	} while (harness_now() < end);
}

void net_lat_finish(net_lat *l)
{
	size_t n = l->n;

	if (n) {
		qsort(l->s, n, sizeof(double), cmp_double);
		l->mean_us = l->sum / (double)n;
		l->p50_us = l->s[n / 2];
		l->p99_us = l->s[(size_t)((double)(n - 1) * 0.99)];
	}
	l->samples = n;
	free(l->s);
	l->s = NULL;
	l->n = l->cap = 0;
}
