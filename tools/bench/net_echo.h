/*
 * net_echo.h - the echo anchor of emdb-bench's network mode: a server that
 * answers each request with a response of a size the request names and
 * does nothing else, so that a client sending frames of an operation's
 * request size and receiving its response size, pipelined to the same
 * depth, measures the physical bound of that operation on that socket.
 */
#ifndef EMDB_BENCH_NET_ECHO_H
#define EMDB_BENCH_NET_ECHO_H

#include <stddef.h>
#include <stdint.h>

#include "tools/bench/harness.h"
#include "tools/bench/net_sock.h"

typedef struct net_echo net_echo;

/* Start the echo server, a thread of this process, listening on 127.0.0.1
 * (an ephemeral port) or on a Unix socket in dir; its connections get
 * SO_SNDBUF sndbuf (0: the kernel's default).  Stop with net_echo_stop.
 * Exits the process on failure. */
net_echo *net_echo_start(net_transport tr, const char *dir, int sndbuf);
void net_echo_stop(net_echo *e);

/* The rows the gathering echo copies into its responses (or the
 * scattering echo adds into): a region of
 * `rows` rows of row_bytes, and the stream of ranks (1-based; rank r is
 * row r - 1, as the network preload inserts ranks in order) it walks
 * through, `batch` ranks a response.  The region must outlive the echo's
 * measurements. */
typedef struct net_echo_rows {
	const uint8_t *region;
	size_t row_bytes;
	const uint64_t *ranks;
	size_t n_ranks;  /* a multiple of batch */
	size_t batch;
} net_echo_rows;

void net_echo_set_rows(net_echo *e, const net_echo_rows *rows);

/* What the echo server does besides echoing. */
typedef enum net_echo_work {
	NET_ECHO_NOTHING = 0,
	/* each response's first batch * row_bytes bytes are rows of
	 * net_echo_set_rows copied there (memcpy, each row prefetched 8
	 * rows ahead, as a Pull's gather) */
	NET_ECHO_GATHER,
	/* the request's last batch * row_bytes bytes are added, float by
	 * float, into those rows of the region (prefetched for writing 8
	 * ahead), as a Push accumulates into state kept per row */
	NET_ECHO_SCATTER,
} net_echo_work;

/* Requests of req bytes (>= 8), responses of resp bytes, `depth` in
 * flight on one connection, for `seconds` as harness_measure times it;
 * each response counts `units` (IDs).  With GATHER or SCATTER it is the
 * physical bound of an operation whose response must carry rows read at
 * random from memory, or whose request's rows must be added into
 * per-row state. */
void net_echo_measure(net_echo *e, size_t req, size_t resp, unsigned depth,
		      uint64_t units, net_echo_work work, double seconds, harness_result *out);

/* One request at a time for `seconds`: the latency of a round trip of
 * these sizes, added to out. */
void net_echo_latency(net_echo *e, size_t req, size_t resp, double seconds,
		      net_lat *out);

#endif
