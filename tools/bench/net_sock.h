/*
 * net_sock.h - the socket plumbing of emdb-bench's network mode: loopback
 * and Unix stream sockets, whole-buffer reads and writes, a buffered reader
 * for line protocols (RESP), and the pipeline that keeps up to `depth`
 * requests in flight on one connection for the echo and Redis anchors.
 */
#ifndef EMDB_BENCH_NET_SOCK_H
#define EMDB_BENCH_NET_SOCK_H

#include <pthread.h>
#include <semaphore.h>
#include <stddef.h>
#include <stdint.h>

typedef enum net_transport { NET_OFF = 0, NET_TCP, NET_UNIX } net_transport;

/* Connect to 127.0.0.1:port (port > 0) or to the Unix socket at path.
 * TCP_NODELAY is set on TCP; a Unix socket gets the client library's
 * send buffer (EMDB_CLIENT_UNIX_SNDBUF), so the anchors' clients send as
 * emdb's does.  Returns the fd, or -1 with errno set. */
int net_connect(uint16_t port, const char *path);

/* Listen on 127.0.0.1 with an ephemeral port (path NULL; *port gets it)
 * or on the Unix socket at path.  Exits the process on failure. */
int net_listen(const char *path, uint16_t *port);

/* A free ephemeral loopback port, for servers that cannot report the one
 * they bind (redis-server): bound, read back and released. */
uint16_t net_free_port(void);

/* Write or read exactly n bytes; 0, or -1 on error or end of stream. */
int net_write_all(int fd, const void *buf, size_t n);
int net_read_all(int fd, void *buf, size_t n);

/* A buffered reader: the connection's receive state. */
typedef struct net_rd {
	int fd;
	size_t pos, len;
	char buf[1 << 16];
} net_rd;

/* Read n bytes into dst (NULL: discard); 0, or -1 at end of stream. */
int net_rd_bytes(net_rd *r, void *dst, size_t n);
/* A line up to "\r\n" (excluded), NUL-terminated, into line[cap]; 0 or -1. */
int net_rd_line(net_rd *r, char *line, size_t cap);

/* The pipeline: the harness thread sends, a receiver thread consumes one
 * response per call of `recv_one` and posts `done`; `depth` bounds the
 * requests in flight.  recv_one returns 0, or -1 when the stream ended. */
typedef struct net_pipe {
	int fd;
	unsigned depth;
	unsigned inflight;
	sem_t done;
	pthread_t rx;
	int (*recv_one)(void *ctx, net_rd *r);
	void *ctx;
	net_rd *rd;
	volatile int stopping; /* set before the shutdown that ends rx */
} net_pipe;

void net_pipe_start(net_pipe *p, int fd, unsigned depth,
		    int (*recv_one)(void *ctx, net_rd *r), void *ctx);
/* Before sending: wait for a slot.  Returns 1 when a response completed
 * (the caller counts its units), 0 when a slot was free. */
int net_pipe_slot(net_pipe *p);
/* Wait for every request in flight. */
void net_pipe_drain(net_pipe *p);
/* Drain, shut the socket down, join the receiver, close the fd. */
void net_pipe_stop(net_pipe *p);

/* Latency of single requests, one at a time.  Zero-initialise, add
 * samples with net_lat_measure (several times: the rounds of a run that
 * interleaves the sides it compares), then net_lat_finish. */
typedef struct net_lat {
	double p50_us, p99_us, mean_us;
	uint64_t samples;
	double *s, sum; /* samples so far, in us */
	size_t n, cap;
} net_lat;

/* Call op(ctx) back to back for `seconds` (after a warm-up of a tenth of
 * that), adding each call's time to out; op exits the process on failure. */
void net_lat_measure(void (*op)(void *ctx), void *ctx, double seconds, net_lat *out);
/* Percentiles and mean of the samples added; frees them. */
void net_lat_finish(net_lat *l);

#endif
