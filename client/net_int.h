/*
 * net_int.h - the state of a tcp://, tls:// or unix:// handle, shared by
 * client/net.c (requests, responses, the receiving thread),
 * client/net_dial.c (connecting: the socket, TLS) and client/net_ops.c
 * (each operation's wire form).  Internal to the client library.
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
#include "protocol/proto.h"

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

/* ---- net_ops.c: each operation's wire form (CL_OP_MAP) ------------- */

/* A small request's encoder: the whole frame `id` of wire opcode op into
 * buf[cap], as protocol/proto.h's encoders do (LIMIT: *len is the size
 * needed).  A refusal of its own (the request cannot be sent at all)
 * writes msg. */
typedef int (*enc_flat_fn)(const cl_args *a, uint16_t op, uint64_t id, uint8_t *buf, size_t cap,
			   size_t *len, char *msg, size_t msglen);
/* A big request's encoder: v refers to the caller's arrays. */
typedef int (*enc_iov_fn)(const cl_args *a, uint64_t id, proto_iov *v);
/* Deliver a decoded response m of f's request to f's outputs: EMDB_OK,
 * or NOMEM. */
typedef int (*dec_fn)(emdb_client *c, emdb_future *f, const proto_msg *m);

typedef struct net_op {
	uint16_t wire;     /* the opcode it travels as */
	bool vectors;      /* RX_VECTORS: the floats go straight to the outputs */
	enc_flat_fn flat;  /* ENC_FLAT, or NULL */
	enc_iov_fn iov;    /* ENC_IOV, or NULL */
	dec_fn dec;        /* RX_BODY's, NULL: nothing to deliver */
} net_op;

/* CL_OP_MAP's encode and receive columns, indexed by cl_op. */
extern const net_op net_ops[CL_OP_COUNT];

/* Encode a's request as frame `id` into v: arrays by reference, or the
 * whole frame flat in flat[NET_FLAT_MAX] or, when larger, in *heap
 * (emdb_malloc'd; the caller frees it).  Returns EMDB_OK or the encoder's
 * error, with the message in msg. */
int net_encode(const cl_args *a, uint64_t id, proto_iov *v, uint8_t *flat, uint8_t **heap, char *msg,
	       size_t msglen);
/* Decode a buffered body of f's opcode and deliver it to f's outputs.
 * Returns the operation's result (PROTOCOL or NOMEM with msg). */
int net_decode_resp(emdb_client *c, emdb_future *f, const proto_hdr *h, const uint8_t *body,
		    char *msg, size_t msglen);

#endif
