/*
 * ucx_am.h - one end of the bare UCX active-message exchanges
 * (ucx_pair.h: two ends in one process; ucx_group.h: one end per
 * process): a UCX context and worker with the exchange's handler, an
 * asking end (counts replies) or an answering end (answers each request
 * with the length its 8-byte header names).  Large messages come by
 * rendezvous and are received into the end's rx buffer, as the node link
 * receives them, so a reply means the request's bytes arrived.
 *
 * Transports are UCX's environment's (UCX_TLS, UCX_NET_DEVICES ...);
 * endpoints are in peer error-handling mode as net/node_link.c opens them.
 *
 * Thread safety: an end is used by one thread at a time.
 */
#ifndef EMDB_TOOLS_UCX_AM_H
#define EMDB_TOOLS_UCX_AM_H

#include <stddef.h>
#include <stdint.h>

#include <ucp/api/ucp.h>

#define UCX_AM_MAX_MSGS 16 /* messages per round */

typedef enum ucx_am_role { UCX_AM_ASK, UCX_AM_ANSWER } ucx_am_role;

typedef struct ucx_am_end {
	ucx_am_role role;
	ucp_context_h ctx;
	ucp_worker_h worker;
	int efd;              /* the worker's event fd; -1 unless opened with wakeup */
	ucp_ep_h ep;          /* an answering end: the endpoint it accepted */
	ucp_listener_h listener;
	uint8_t *rx, *tx;     /* rendezvous receives land in rx; sends come from tx */
	size_t rx_cap, tx_cap;
	uint64_t got;         /* an asking end: replies whose bytes are in */
	int failed;           /* a receive, an answer or an accept failed */
	uint64_t hdr[UCX_AM_MAX_MSGS]; /* the headers of an asker's requests:
				  UCX reads them until a send completes */
} ucx_am_end;

typedef struct ucx_am_result {
	uint64_t rounds;   /* rounds completed */
	uint64_t ns;       /* from the first send to the last reply */
	uint64_t bytes;    /* payload bytes both ways, every round */
} ucx_am_result;

/* Progress an asking end's exchange once (poll, or wait for its event fd
 * and progress); returns 0, or -1 when it cannot go on (err set). */
typedef int (*ucx_am_wait_fn)(void *ctx, char *err, size_t errlen);

/* Open e's context and worker and set its handler.  wakeup: also get the
 * worker's event fd (ucp_worker_arm, then wait on e->efd).  Returns 0, or
 * -1 (e is then closable).  Close with ucx_am_end_close. */
int ucx_am_end_open(ucx_am_end *e, ucx_am_role role, int wakeup);

/* Listen on 127.0.0.1:port (an answering end); the first connection
 * becomes e->ep.  Returns 0 or -1. */
int ucx_am_listen(ucx_am_end *e, unsigned port);

/* Connect to 127.0.0.1:port.  Returns 0 or -1. */
int ucx_am_connect(ucx_am_end *e, unsigned port, ucp_ep_h *out);

/* Grow e's buffers to at least rx and tx bytes; only while no receive is
 * in flight.  Returns 0 or -1 (out of memory). */
int ucx_am_reserve(ucx_am_end *e, size_t rx, size_t tx);

/* Send len bytes of buf with the hl-byte header hdr (read by UCX until
 * the send completes).  Returns 0 or -1. */
int ucx_am_send(ucp_ep_h ep, const void *hdr, size_t hl, const void *buf, size_t len);

/* Run rounds of n messages (1..UCX_AM_MAX_MSGS) from the asking end a:
 * message i of a round goes to to[i] with req[i] bytes, answered with
 * rep[i]; up to `depth` rounds in flight, wait(ctx) between posts.  Stops
 * after `rounds` rounds, or once max_ns passed (0: no limit) with the
 * rounds in flight finished.  a's buffers must hold the sizes
 * (ucx_am_reserve).  Returns 0, or -1 with a message in err when a send
 * failed, wait failed or no reply came for 10 s. */
int ucx_am_rounds(ucx_am_end *a, const ucp_ep_h *to, const size_t *req, const size_t *rep, unsigned n,
		  unsigned depth, uint64_t rounds, uint64_t max_ns, ucx_am_wait_fn wait, void *ctx,
		  ucx_am_result *out, char *err, size_t errlen);

/* Close ep, progressing w (and other, when not NULL) for up to 2 s. */
void ucx_am_ep_close(ucp_ep_h ep, ucp_worker_h w, ucp_worker_h other);

/* Close e's listener, worker and context and free its buffers (not its
 * endpoints: ucx_am_ep_close them first).  A zeroed end is a no-op. */
void ucx_am_end_close(ucx_am_end *e);

/* A free TCP port on 127.0.0.1, or 0. */
unsigned ucx_am_free_port(void);

#endif
