/*
 * net/node_link.h - the node-to-node link over UCX: the transport behind
 * cluster/link.h in emdb-server.
 *
 * One link per node: one ucp context and worker, a ucp listener on this
 * node's address from the cluster file, one endpoint to every other node
 * (opened by this node, for its calls) and the endpoints the others opened
 * to it (for their calls; replies go back on them).  A thread of the link
 * runs a libevent loop with the worker's event fd armed in it (or polls the
 * worker, with busy_poll), so the link needs nothing of the rest of the
 * server: tests run several links in one process.
 *
 * Membership and trust: every endpoint starts with a handshake that checks
 * the cluster id, the membership hash, the protocol version and both ranks,
 * and authenticates both nodes with the shared secret (challenge-response
 * HMAC-SHA256, net/node_wire.h).  A peer that disagrees or fails is refused
 * and logged with the reason; nothing it sends is served.
 *
 * The link is "ready" once this node's endpoint to every other node has
 * completed its handshake; "degraded" when one went down after that.  A
 * peer that goes down (endpoint error, e.g. its process died) fails every
 * call in flight to it at once with EMDB_ERR_NODE, and the link keeps
 * reconnecting to it (every 50 ms at first, backing off to 1 s), so a
 * restarted node is taken back as soon as its handshake passes.
 *
 * Calls: cluster/link.h's contract.  Each call has a deadline (the call's
 * deadline_ns, else now + node_timeout_ms); an overdue call ends with
 * EMDB_ERR_NODE ("node R (HOST:PORT) did not answer within N ms", also
 * in emdb_last_error() during done()).  A request arriving while no serve
 * function is installed is answered EMDB_ERR_BUSY by the link itself.
 *
 * Threads: create, wait_ready, serve, report and destroy from any one
 * thread (the server's main thread); the cluster_link ops from any thread
 * as cluster/link.h says.
 */
#ifndef EMDB_NET_NODE_LINK_H
#define EMDB_NET_NODE_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/link.h"
#include "net/cluster_conf.h"

typedef struct node_link node_link;

#define NODE_LINK_TIMEOUT_MS_DEFAULT 3000u
#define NODE_LINK_SECRET_MAX 1024

/* Log levels handed to the log function: those of net/log.h. */
enum { NODE_LOG_DEBUG = 0, NODE_LOG_INFO = 1, NODE_LOG_WARN = 2, NODE_LOG_ERROR = 3 };

typedef struct node_link_config {
	uint32_t size;             /* sizeof(node_link_config) */
	const cluster_conf *conf;  /* copied by node_link_create */
	uint32_t rank;             /* this node */
	const uint8_t *secret;     /* the cluster secret, copied; 1..NODE_LINK_SECRET_MAX bytes */
	size_t secret_len;
	uint32_t node_timeout_ms;  /* a call's default deadline; a handshake's too */
	bool busy_poll;            /* poll the worker instead of sleeping on its fd */
	/* Where the link's log lines go (any thread); NULL: nowhere. */
	void (*log)(void *arg, int level, const char *msg);
	void *log_arg;
} node_link_config;

#define NODE_LINK_CONFIG_INIT { sizeof(node_link_config), NULL, 0, NULL, 0, NODE_LINK_TIMEOUT_MS_DEFAULT, false, NULL, NULL }

typedef enum node_link_state {
	NODE_LINK_FORMING = 0,  /* not every peer reached yet */
	NODE_LINK_READY = 1,    /* every peer up */
	NODE_LINK_DEGRADED = 2, /* was ready; some peer is down now */
	NODE_LINK_FAILED = 3,   /* a peer disagreed while forming (see wait_ready) */
} node_link_state;

typedef enum node_peer_state {
	NODE_PEER_SELF = 0,
	NODE_PEER_CONNECTING = 1, /* endpoint opened, handshake under way */
	NODE_PEER_UP = 2,
	NODE_PEER_DOWN = 3,       /* lost or unreachable; retrying */
	NODE_PEER_REFUSED = 4,    /* disagreed or failed authentication; retrying slowly */
} node_peer_state;

/* One peer's figures: the link's own counters of its active messages (the
 * link header included), byte-exact, both endpoints together. */
typedef struct node_peer_info {
	uint32_t rank;
	char addr[CLUSTER_HOST_MAX + 16];
	node_peer_state state;
	uint64_t bytes_sent, msgs_sent, bytes_received, msgs_received;
	uint64_t calls;           /* calls sent to it */
	uint64_t calls_failed;    /* ended in error (timeouts, loss, refusals) */
	uint64_t calls_timed_out; /* of which past their deadline */
	uint64_t requests_served; /* its requests handed to the serve function */
	uint64_t connects;        /* handshakes completed (1 + reconnections) */
	char last_error[160];     /* while not up: why (the loss, for a node
				     that was up; else the latest failure) */
} node_peer_info;

/* Create the link: ucp context and worker, the listener bound to this
 * rank's address, the thread; connecting to the peers starts at once.
 * Returns EMDB_OK, or an error with the reason in err (bad config,
 * address in use, UCX failure).  Free with node_link_destroy. */
int node_link_create(const node_link_config *cfg, node_link **out, char *err, size_t errlen);

/* Wait up to timeout_ms for the link to be ready.  Returns EMDB_OK when
 * ready; EMDB_ERR_NODE when a peer disagreed or failed authentication
 * while forming (err names it and why: the cluster cannot form as
 * configured); EMDB_ERR_TIMEOUT when still forming, with err naming the
 * first peer not up and its last error. */
int node_link_wait_ready(node_link *l, uint32_t timeout_ms, char *err, size_t errlen);

/* Install the function that serves peers' requests (NULL: none; requests
 * are then answered BUSY).  Any thread; requests received afterwards get
 * it. */
void node_link_serve(node_link *l, cluster_serve_fn fn, void *ctx);

/* The link as cluster/link.h's table; valid until node_link_destroy. */
void node_link_as_cluster_link(node_link *l, cluster_link *out);

/* This node's rank, the node count, the state now. */
uint32_t node_link_rank(const node_link *l);
uint32_t node_link_nodes(const node_link *l);
node_link_state node_link_get_state(const node_link *l);
const cluster_conf *node_link_conf(const node_link *l);
/* Snapshot of peer `rank` (this node's own rank gives NODE_PEER_SELF and
 * zeros).  Any thread. */
void node_link_peer(node_link *l, uint32_t rank, node_peer_info *out);

const char *node_link_state_name(node_link_state s);
const char *node_peer_state_name(node_peer_state s);

/* Stop the thread (calls in flight end with EMDB_ERR_CLOSED first), close
 * the endpoints and the listener, free everything.  Every request handed
 * to the serve function must have been replied to before.  NULL: no-op. */
void node_link_destroy(node_link *l);

#endif
