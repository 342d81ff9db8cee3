/*
 * cluster/link.h - the seam between the cluster layer and the transport
 * that carries its messages to the other nodes.
 *
 * The cluster layer (cluster/: owners, routing, steps and admin across
 * nodes) speaks to the other nodes only through a cluster_link: a table of
 * functions and a context.  emdb-server implements it over UCX
 * (net/node_link*.c); tests implement it in process, with several engines
 * in one program, so the routing and its determinism are tested without
 * sockets.
 *
 * A message is one node-to-node frame (protocol/proto_node.h) in each
 * direction: a request and its reply.  The link knows nothing of what a
 * frame means; it carries bytes, counts them per peer, authenticates its
 * peers when it connects, and ends every call exactly once.
 *
 * Ownership, as in LMDB's notes:
 *   - The frame handed to call() is the caller's; the link copies or sends
 *     it before call() returns.  The frame handed to call_owned() (a block
 *     of emdb_malloc) becomes the link's, which sends it without a copy
 *     and frees it with emdb_free once sent, or at once on an error.
 *   - The cluster_call record is the caller's and must live until its
 *     done() has run; done() runs exactly once, on the link's own thread,
 *     with the reply (valid only during the callback) or an error.
 *   - The reply bytes handed to reply() are copied before it returns;
 *     those handed to reply_owned() become the link's, as for call_owned.
 *   - A frame lent with call_lent() or reply_lent() stays the caller's
 *     and unchanged until the link calls release(arg), once per lending,
 *     when UCX no longer reads it (sent, or at once on an error); the
 *     same frame may be lent to several messages at once.
 *
 * Errors ending a call: EMDB_ERR_NODE (the peer is down, unreachable, or
 * did not answer by the deadline; the message names its rank and
 * address), EMDB_ERR_CLOSED (the link is shutting down), EMDB_ERR_NOMEM.
 * A call that ends in error may or may not have been applied by the peer:
 * callers that resend make their requests idempotent (steps carry the
 * worker and step number).
 */
#ifndef EMDB_CLUSTER_LINK_H
#define EMDB_CLUSTER_LINK_H

#include <stddef.h>
#include <stdint.h>

typedef struct cluster_call cluster_call;

/* Runs once per call on the link's thread.  rc is EMDB_OK with the peer's
 * reply frame in [frame, frame + len), or an error with frame NULL. */
typedef void (*cluster_reply_fn)(cluster_call *call, int rc, const uint8_t *frame, size_t len);

struct cluster_call {
	cluster_reply_fn done;
	void *arg;           /* the caller's */
	uint32_t peer;       /* rank called; set by the link */
	cluster_call *next;  /* the link's, while the call is in flight */
	uint64_t deadline_ns; /* emdb__now_ns() clock; 0: the link's default */
	uint64_t link_priv[4]; /* the link's, while the call is in flight */
};

/* The answer to one request received from a peer: handed to the serve
 * function, finished by exactly one reply() (from any thread). */
typedef struct cluster_responder cluster_responder;

/* Called by the link for each request frame a peer sends, on the link's
 * thread.  The frame is valid only during the call; a handler that
 * answers later copies what it needs. */
typedef void (*cluster_serve_fn)(void *ctx, uint32_t from, const uint8_t *frame, size_t len,
				 cluster_responder *r);

typedef struct cluster_link_ops {
	/* Send a request to node `rank` (never this node's own).  Returns
	 * EMDB_OK (done() will run), or an error with done() never run. */
	int (*call)(void *link, uint32_t rank, const void *frame, size_t len, cluster_call *call);
	/* Answer a request handed to serve; frees r.  Any thread. */
	int (*reply)(void *link, cluster_responder *r, const void *frame, size_t len);
	/* Run fn(arg) on the link's thread soon (any thread; the way work
	 * finished elsewhere, e.g. an engine call on a helper thread, comes
	 * back to the link's thread).  Cannot fail once the link runs. */
	void (*post)(void *link, void (*fn)(void *arg), void *arg);
	/* Optional (NULL: the cluster layer calls call / reply and frees the
	 * frame itself): as call and reply, but the link takes frame, a block
	 * of emdb_malloc, and sends it without copying it (see Ownership). */
	int (*call_owned)(void *link, uint32_t rank, void *frame, size_t len, cluster_call *call);
	int (*reply_owned)(void *link, cluster_responder *r, void *frame, size_t len);
	/* Optional (NULL: the cluster layer sends a copy with call_owned /
	 * reply_owned): as those, but frame is lent (see Ownership); release
	 * runs on the link's thread, or before an error return. */
	int (*call_lent)(void *link, uint32_t rank, const void *frame, size_t len, cluster_call *call,
			 void (*release)(void *arg), void *arg);
	int (*reply_lent)(void *link, cluster_responder *r, const void *frame, size_t len,
			  void (*release)(void *arg), void *arg);
} cluster_link_ops;

typedef struct cluster_link {
	const cluster_link_ops *ops;
	void *ctx;       /* first argument of every op */
	uint32_t rank;   /* this node */
	uint32_t nodes;  /* N, ranks 0 .. N-1 */
	/* Bytes the link adds to every frame it carries and counts in its
	 * per-peer counters (its own header); 0 for a link that adds none.
	 * A linktest (cluster/linktest.c) sizes its frames by it. */
	uint32_t frame_overhead;
} cluster_link;

#endif
