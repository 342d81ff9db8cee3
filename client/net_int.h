/*
 * net_int.h - the state of a tcp://, tls:// or unix:// handle, shared by
 * client/net.c (requests, responses, the receiving thread) and
 * client/net_dial.c (connecting: the socket, TLS).  Internal to the client
 * library.
 */
#ifndef EMDB_CLIENT_NET_INT_H
#define EMDB_CLIENT_NET_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include <emdb/client.h>

#include "client/client_int.h"
#include "client/uri.h"

#define NET_BUCKETS 256              /* pending table, by id & (NET_BUCKETS-1) */
#define NET_FLAT_MAX 2048            /* small requests are encoded on the stack */
#define NET_BODY_MAX (256u << 20)    /* largest non-vector body we buffer */
#define NET_HELLO_BODY_MAX 65536u
#define NET_AHEAD 16384u             /* small reads fill a buffer this large */

typedef struct net_state {
	int fd;
	char peer[CL_URI_HOST_MAX + 16]; /* "tcp://host:port" or "unix://path", for messages */
	pthread_t rx;
	bool rx_started;
	pthread_cond_t rx_cond;           /* the receiver waits for work here */
	bool reading;                     /* a thread holds the read side */
	uint32_t n_pending;
	pthread_mutex_t send_lock;
	uint64_t next_id;                 /* atomic */
	emdb_future *pending[NET_BUCKETS];
	bool broken;
	char broken_msg[CL_MSG_MAX];
	uint64_t *orphans;                /* ticket handles to release */
	size_t n_orphans, cap_orphans;
	uint32_t max_body;                /* the server's, from HELLO */
	uint8_t *rxbuf;                   /* reader: bodies to decode */
	size_t rxcap;
	/* Reader: bytes received ahead of what was asked for (recv_full),
	 * ahead[ahead_off .. ahead_len). */
	size_t ahead_off, ahead_len;
	uint8_t ahead[NET_AHEAD];
	/* Reader: the socket's SO_RCVTIMEO in ms (0: none), UINT32_MAX
	 * until first set. */
	uint32_t rcv_ms;
	/* emdb_client_options.busy_poll_us, in ns: block_first polls this
	 * long before it blocks. */
	uint64_t busy_poll_ns;
	/* tls:// only (NULL otherwise).  OpenSSL forbids two threads in one
	 * SSL at once, and the sender and the reader run side by side:
	 * tls_lock is held for each non-blocking SSL call, never across a
	 * wait.  The socket stays non-blocking. */
	SSL_CTX *tls_ctx;
	SSL *ssl;
	pthread_mutex_t tls_lock;
	bool rd_wants_wr; /* reader: the last TLS read must wait for POLLOUT */
} net_state;

/* Connect n->fd to u within deadline (0: none): the socket, and for
 * tls:// the context (CA, client certificate: the options' files before
 * the URI's) and the handshake, which leaves n->ssl ready and the socket
 * non-blocking; any other socket is left blocking, for block_first's
 * first wait (every other call passes MSG_DONTWAIT).  n->peer names the
 * server.  Errors: as emdb_client_connect's for connecting, the message
 * set; on error the caller frees n (net_state_free). */
int net_dial(net_state *n, const cl_uri *u, const emdb_client_options *o, uint64_t deadline);

/* Milliseconds until `deadline` for poll(): -1 without one, 0 once past. */
static inline int ms_until(uint64_t deadline)
{
	if (!deadline)
		return -1;
	uint64_t now = cl_now_ns();
	if (now >= deadline)
		return 0;
	uint64_t ms = (deadline - now + 999999) / 1000000;
	return ms > 1000000000 ? 1000000000 : (int)ms;
}

#endif
