/*
 * net_echo.c - the echo anchor (net_echo.h).
 *
 * Design
 *   Request frame: u32 request size, u32 response size (little-endian,
 *   this machine's order), then padding up to the request size.  The
 *   server reads the whole request, writes the response from a zeroed
 *   buffer, and touches nothing else: no parsing beyond the 8 bytes, no
 *   copy, no lookup.  The gathering variant (the response size's top bit
 *   set) first copies a batch of rows from a table-sized region into the
 *   response, each connection walking the bench's rank stream: the work
 *   a Pull cannot avoid, and nothing more.  The scattering variant (the
 *   next bit) adds the request's last rows of floats into the region's
 *   rows of the next ranks: a Push's accumulation into state kept per
 *   row.  One server thread per connection, like one I/O
 *   thread of emdb-server; the client sends on the harness thread and
 *   receives on its pipeline thread, like the client library.  Socket
 *   buffers as emdb's: the server side gets emdb-server's
 *   unix_send_buffer, the client side the client library's.
 *
 * Invariants
 *   1. The listener binds 127.0.0.1 or a path in the bench's temporary
 *      directory.
 *   2. net_echo_stop returns with every server thread joined.
 */
#include "tools/bench/net_echo.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ECHO_MAX_CONNS 64 /* one per measurement, all kept until net_echo_stop */

struct net_echo {
	int lfd;
	uint16_t port;
	char path[200];
	pthread_t acceptor;
	pthread_mutex_t mu;
	pthread_t conns[ECHO_MAX_CONNS];
	int conn_fds[ECHO_MAX_CONNS];
	int n_conns;
	int sndbuf; /* SO_SNDBUF of accepted connections, 0: the kernel's */
	volatile int stopping;
	net_echo_rows rows; /* region NULL: no gathering */
};

typedef struct echo_conn {
	int fd;
	const net_echo_rows *rows;
	size_t next; /* position in rows->ranks */
} echo_conn;

/* Bits of a request header's resp field: copy rows into the response
 * (a Pull's work), or add the request's last rows into the region's (a
 * Push's accumulation into per-row state). */
#define ECHO_GATHER 0x80000000u
#define ECHO_SCATTER 0x40000000u
#define ECHO_PREFETCH_ROWS 8u

/* The ranks of the connection's next batch of rows; moves on past them. */
static const uint64_t *take_ranks(echo_conn *c)
{
	const net_echo_rows *g = c->rows;
	const uint64_t *rk = g->ranks + c->next;
	c->next = (c->next + g->batch) % g->n_ranks;
	return rk;
}

/* The region's row of rank r (ranks start at 1, rows at 0). */
static uint8_t *rank_row(const net_echo_rows *g, uint64_t r)
{
	return (uint8_t *)g->region + (r - 1) * g->row_bytes;
}

/* Add the request's last batch rows of floats into the next batch of
 * region rows (in must hold at least batch * row_bytes). */
static void scatter_add(echo_conn *c, const char *in, size_t in_len)
{
	const net_echo_rows *g = c->rows;
	const uint64_t *rk = take_ranks(c);
	size_t rb = g->row_bytes, nf = rb / sizeof(float);
	const float *src = (const float *)(const void *)(in + in_len - g->batch * rb);
	for (size_t i = 0; i < g->batch; i++) {
		if (i + ECHO_PREFETCH_ROWS < g->batch)
			for (size_t o = 0; o < rb; o += 64)
				__builtin_prefetch(rank_row(g, rk[i + ECHO_PREFETCH_ROWS]) + o, 1, 3);
		float *dst = (float *)(void *)rank_row(g, rk[i]);
		for (size_t f = 0; f < nf; f++)
			dst[f] += src[i * nf + f];
	}
}

/* The next batch of rows into out (cap bytes at least batch * row_bytes). */
static void gather(echo_conn *c, char *out)
{
	const net_echo_rows *g = c->rows;
	const uint64_t *rk = take_ranks(c);
	size_t rb = g->row_bytes;
	for (size_t i = 0; i < g->batch; i++) {
		if (i + ECHO_PREFETCH_ROWS < g->batch)
			for (size_t o = 0; o < rb; o += 64)
				__builtin_prefetch(rank_row(g, rk[i + ECHO_PREFETCH_ROWS]) + o, 0, 3);
		memcpy(out + i * rb, rank_row(g, rk[i]), rb);
	}
}

static void *serve(void *arg)
{
	echo_conn *c = arg;
	net_rd *r = calloc(1, sizeof(*r));
	char *out = NULL, *in = NULL;
	size_t out_cap = 0, in_cap = 0;
	uint32_t hdr[2];

	if (!r)
		harness_die("out of memory");
	r->fd = c->fd;
	while (net_rd_bytes(r, hdr, sizeof(hdr)) == 0) {
		/* The body lands in one buffer of its size, in as few receives
		 * as the socket allows, as emdb-server receives a frame: read
		 * through the 64 KiB reader it would cost one system call per
		 * 64 KiB, and the bound would be slower than the server. */
		if (hdr[0] < 8)
			break;
		if (hdr[0] - 8 > in_cap) {
			free(in);
			in_cap = hdr[0] - 8;
			in = malloc(in_cap);
			if (!in)
				harness_die("out of memory");
		}
		if (net_rd_bytes(r, in, hdr[0] - 8) < 0)
			break;
		int gather_rows = (hdr[1] & ECHO_GATHER) != 0, scatter = (hdr[1] & ECHO_SCATTER) != 0;
		hdr[1] &= ~(ECHO_GATHER | ECHO_SCATTER);
		size_t need = c->rows->batch * c->rows->row_bytes;
		if ((gather_rows && (!c->rows->region || hdr[1] < need)) ||
		    (scatter && (!c->rows->region || hdr[0] - 8 < need)))
			break;
		if (scatter)
			scatter_add(c, in, hdr[0] - 8);
		if (hdr[1] > out_cap) {
			free(out);
			out_cap = hdr[1];
			out = calloc(1, out_cap);
			if (!out)
				harness_die("out of memory");
		}
		if (gather_rows)
			gather(c, out);
		if (net_write_all(c->fd, out, hdr[1]) < 0)
			break;
	}
	free(out);
	free(in);
	free(r);
	free(c);
	return NULL;
}

static void *accept_loop(void *arg)
{
	net_echo *e = arg;
	for (;;) {
		int fd = accept(e->lfd, NULL, NULL);
		echo_conn *c;
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL;
		}
		pthread_mutex_lock(&e->mu);
		if (e->stopping || e->n_conns == ECHO_MAX_CONNS || !(c = malloc(sizeof(*c)))) {
			pthread_mutex_unlock(&e->mu);
			close(fd);
			continue;
		}
		c->fd = fd;
		c->rows = &e->rows;
		c->next = 0;
		if (e->sndbuf)
			setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &e->sndbuf, sizeof(e->sndbuf));
		if (!e->path[0]) {
			/* As emdb-server does (net/listen.c): without it a small
			 * reply waits for the peer's delayed ACK (Nagle), and the
			 * bound would be slower than the server it bounds. */
			int one = 1;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		}
		e->conn_fds[e->n_conns] = fd;
		if (pthread_create(&e->conns[e->n_conns], NULL, serve, c) != 0)
			harness_die("cannot start an echo thread");
		e->n_conns++;
		pthread_mutex_unlock(&e->mu);
	}
}

net_echo *net_echo_start(net_transport tr, const char *dir, int sndbuf)
{
	net_echo *e = calloc(1, sizeof(*e));

	if (!e)
		harness_die("out of memory");
	e->sndbuf = sndbuf;
	if (tr == NET_UNIX)
		snprintf(e->path, sizeof(e->path), "%s/echo.sock", dir);
	e->lfd = net_listen(tr == NET_UNIX ? e->path : NULL, &e->port);
	pthread_mutex_init(&e->mu, NULL);
	if (pthread_create(&e->acceptor, NULL, accept_loop, e) != 0)
		harness_die("cannot start the echo server");
	return e;
}

void net_echo_stop(net_echo *e)
{
	pthread_mutex_lock(&e->mu);
	e->stopping = 1;
	pthread_mutex_unlock(&e->mu);
	shutdown(e->lfd, SHUT_RDWR);
	pthread_join(e->acceptor, NULL);
	close(e->lfd);
	for (int i = 0; i < e->n_conns; i++) {
		shutdown(e->conn_fds[i], SHUT_RDWR);
		pthread_join(e->conns[i], NULL);
		close(e->conn_fds[i]);
	}
	if (e->path[0])
		unlink(e->path);
	pthread_mutex_destroy(&e->mu);
	free(e);
}

void net_echo_set_rows(net_echo *e, const net_echo_rows *rows)
{
	pthread_mutex_lock(&e->mu);
	e->rows = *rows;
	pthread_mutex_unlock(&e->mu);
}

static int echo_connect(net_echo *e)
{
	int fd = net_connect(e->port, e->path[0] ? e->path : NULL);
	if (fd < 0)
		harness_die("connect to the echo server: %s", strerror(errno));
	return fd;
}

typedef struct echo_client {
	net_pipe pipe;
	char *req, *resp;
	size_t req_n, resp_n;
	uint64_t units;
} echo_client;

static int echo_recv(void *arg, net_rd *r)
{
	echo_client *c = arg;
	return net_rd_bytes(r, c->resp, c->resp_n);
}

static uint64_t echo_step(void *arg, unsigned t, uint64_t iter)
{
	echo_client *c = arg;
	int done = net_pipe_slot(&c->pipe);

	(void)t;
	(void)iter;
	if (net_write_all(c->pipe.fd, c->req, c->req_n) < 0)
		harness_die("echo: send: %s", strerror(errno));
	return done ? c->units : 0;
}

static void client_init(echo_client *c, size_t req, size_t resp, net_echo_work work)
{
	uint32_t hdr[2] = { (uint32_t)req, (uint32_t)resp | (work == NET_ECHO_GATHER ? ECHO_GATHER : 0) |
						 (work == NET_ECHO_SCATTER ? ECHO_SCATTER : 0) };

	memset(c, 0, sizeof(*c));
	c->req = calloc(1, req);
	c->resp = malloc(resp ? resp : 1);
	if (!c->req || !c->resp)
		harness_die("out of memory");
	memcpy(c->req, hdr, sizeof(hdr));
	c->req_n = req;
	c->resp_n = resp;
}

void net_echo_measure(net_echo *e, size_t req, size_t resp, unsigned depth,
		      uint64_t units, net_echo_work work, double seconds, harness_result *out)
{
	echo_client c;

	client_init(&c, req, resp, work);
	c.units = units;
	net_pipe_start(&c.pipe, echo_connect(e), depth, echo_recv, &c);
	harness_measure(1, seconds, echo_step, &c, out);
	net_pipe_stop(&c.pipe);
	free(c.req);
	free(c.resp);
}

typedef struct echo_sync {
	echo_client c;
	int fd;
} echo_sync;

static void echo_once(void *arg)
{
	echo_sync *s = arg;
	if (net_write_all(s->fd, s->c.req, s->c.req_n) < 0 ||
	    net_read_all(s->fd, s->c.resp, s->c.resp_n) < 0)
		harness_die("echo: %s", strerror(errno));
}

void net_echo_latency(net_echo *e, size_t req, size_t resp, double seconds,
		      net_lat *out)
{
	echo_sync s;

	client_init(&s.c, req, resp, NET_ECHO_NOTHING);
	s.fd = echo_connect(e);
	net_lat_measure(echo_once, &s, seconds, out);
	close(s.fd);
	free(s.c.req);
	free(s.c.resp);
}
