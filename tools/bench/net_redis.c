/*
 * net_redis.c - RESP by hand for the Redis anchor (net_redis.h).
 *
 * Design
 *   Commands are RESP arrays of bulk strings.  A key is the ID's 8 bytes
 *   as they lie in memory; a value is the row's dim float32s, so Redis
 *   moves exactly the bytes emdb moves.  The commands of every batch are
 *   encoded once, before timing, so the client's cost per command is one
 *   send, as for the emdb client (which sends IDs from the caller's
 *   array).  Replies are parsed on the pipeline's receiver thread; MGET
 *   values are copied into an output array as a Pull's would be.
 *
 * Invariants
 *   1. Every reply is read in full before the next one: a bulk reply's
 *      declared length is consumed even where its bytes are discarded.
 *   2. An error reply ("-ERR ...") ends the process with its text.
 */
#include "tools/bench/net_redis.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/bench/net_sock.h"

struct net_redis {
	int fd;
	uint16_t port;
	char sock[160];
	net_rd rd;     /* synchronous replies */
};

typedef struct buf {
	char *p;
	size_t n, cap;
} buf;

static void put(buf *b, const void *s, size_t n)
{
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->n + n)
			cap *= 2;
		char *g = realloc(b->p, cap);
		if (!g)
			harness_die("out of memory");
		b->p = g;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

static void put_bulk(buf *b, const void *s, size_t n)
{
	char hdr[32];
	int k = snprintf(hdr, sizeof(hdr), "$%zu\r\n", n);
	put(b, hdr, (size_t)k);
	put(b, s, n);
	put(b, "\r\n", 2);
}

static void put_array(buf *b, size_t n)
{
	char hdr[32];
	int k = snprintf(hdr, sizeof(hdr), "*%zu\r\n", n);
	put(b, hdr, (size_t)k);
}

static int redis_fd(const net_redis *r)
{
	int fd = net_connect(r->port, r->sock[0] ? r->sock : NULL);
	if (fd < 0)
		harness_die("connect to redis-server: %s", strerror(errno));
	return fd;
}

net_redis *net_redis_connect(const net_server *s)
{
	net_redis *r = calloc(1, sizeof(*r));
	if (!r)
		harness_die("out of memory");
	r->port = s->port;
	snprintf(r->sock, sizeof(r->sock), "%s", s->sock);
	r->fd = redis_fd(r);
	r->rd.fd = r->fd;
	return r;
}

void net_redis_close(net_redis *r)
{
	if (r) {
		close(r->fd);
		free(r);
	}
}

/* One reply; MGET values go to out (NULL: discarded), val bytes each. */
static int read_reply(net_rd *rd, char *out, size_t val)
{
	char line[128];
	long long n;

	if (net_rd_line(rd, line, sizeof(line)) < 0)
		return -1;
	switch (line[0]) {
	case '+':
	case ':':
		return 0;
	case '-':
		harness_die("redis-server: %s", line + 1);
	case '$':
		n = atoll(line + 1);
		if (n < 0)
			return 0;
		if (net_rd_bytes(rd, out, (size_t)n) < 0 || net_rd_bytes(rd, NULL, 2) < 0)
			return -1;
		return 0;
	case '*':
		n = atoll(line + 1);
		for (long long i = 0; i < n; i++)
			if (read_reply(rd, out ? out + (size_t)i * val : NULL, val) < 0)
				return -1;
		return 0;
	default:
		harness_die("redis-server: unexpected reply '%s'", line);
	}
}

void net_redis_load(net_redis *r, const uint64_t *ids, size_t n, uint32_t dim,
		    const float *vecs)
{
	buf b = { 0 };

	put_array(&b, 1 + 2 * n);
	put_bulk(&b, "MSET", 4);
	for (size_t i = 0; i < n; i++) {
		put_bulk(&b, &ids[i], 8);
		put_bulk(&b, vecs + i * dim, (size_t)dim * 4);
	}
	if (net_write_all(r->fd, b.p, b.n) < 0 || read_reply(&r->rd, NULL, 0) < 0)
		harness_die("redis-server: MSET failed");
	free(b.p);
}

typedef struct redis_run {
	net_pipe pipe;
	buf *cmds;
	size_t n_cmds;
	size_t batch, val;
	char *out;
} redis_run;

static int redis_recv(void *arg, net_rd *rd)
{
	redis_run *c = arg;
	return read_reply(rd, c->out, c->val);
}

static uint64_t redis_step(void *arg, unsigned t, uint64_t iter)
{
	redis_run *c = arg;
	const buf *b = &c->cmds[iter % c->n_cmds];
	int done = net_pipe_slot(&c->pipe);

	(void)t;
	if (net_write_all(c->pipe.fd, b->p, b->n) < 0)
		harness_die("redis-server: send: %s", strerror(errno));
	return done ? c->batch : 0;
}

void net_redis_measure(net_redis *r, const pool *p, uint32_t dim, int put_vals,
		       unsigned depth, double seconds, harness_result *out)
{
	redis_run c = { .batch = p->batch, .val = (size_t)dim * 4 };
	float *vals = calloc(p->batch * dim, sizeof(float));

	/* Bound the encoded commands to ~256 MB. */
	c.n_cmds = p->batches;
	while (c.n_cmds > 1 && c.n_cmds * p->batch * (c.val + 32) > (256u << 20))
		c.n_cmds /= 2;
	c.cmds = calloc(c.n_cmds, sizeof(buf));
	c.out = malloc(p->batch * c.val);
	if (!vals || !c.cmds || !c.out)
		harness_die("out of memory");
	for (size_t i = 0; i < p->batch * dim; i++)
		vals[i] = 1e-4f;
	for (size_t k = 0; k < c.n_cmds; k++) {
		const uint64_t *ids = pool_ids(p, 0, k);
		buf *b = &c.cmds[k];
		put_array(b, 1 + (put_vals ? 2 : 1) * p->batch);
		put_bulk(b, put_vals ? "MSET" : "MGET", 4);
		for (size_t i = 0; i < p->batch; i++) {
			put_bulk(b, &ids[i], 8);
			if (put_vals)
				put_bulk(b, vals + i * dim, c.val);
		}
	}
	net_pipe_start(&c.pipe, redis_fd(r), depth, redis_recv, &c);
	harness_measure(1, seconds, redis_step, &c, out);
	net_pipe_stop(&c.pipe);
	for (size_t k = 0; k < c.n_cmds; k++)
		free(c.cmds[k].p);
	free(c.cmds);
	free(c.out);
	free(vals);
}

typedef struct get_ctx {
	net_redis *r;
	const pool *p;
	size_t i;
	size_t val;
	char *out;
} get_ctx;

static void get_once(void *arg)
{
	get_ctx *g = arg;
	buf b = { 0 };
	uint64_t id = g->p->ids[g->i++ % g->p->len];

	put_array(&b, 2);
	put_bulk(&b, "GET", 3);
	put_bulk(&b, &id, 8);
	if (net_write_all(g->r->fd, b.p, b.n) < 0 || read_reply(&g->r->rd, g->out, g->val) < 0)
		harness_die("redis-server: GET failed");
	free(b.p);
}

void net_redis_get_latency(net_redis *r, const pool *p, uint32_t dim,
			   double seconds, net_lat *out)
{
	get_ctx g = { .r = r, .p = p, .val = (size_t)dim * 4, .i = out->n };
	g.out = malloc(g.val);
	if (!g.out)
		harness_die("out of memory");
	net_lat_measure(get_once, &g, seconds, out);
	free(g.out);
}
