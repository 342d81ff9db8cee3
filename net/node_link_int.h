/*
 * net/node_link_int.h - the layout of the node-to-node link, shared by its
 * files: node_link.c (life cycle, thread, mailbox, calls, the cluster_link
 * table) and node_link_conn.c (endpoints, handshakes, receiving).
 *
 * Ownership: everything below belongs to the link's thread once it runs,
 * except the fields marked "any thread" (atomics, or behind mu).
 */
#ifndef EMDB_NET_NODE_LINK_INT_H
#define EMDB_NET_NODE_LINK_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include <ucp/api/ucp.h>

#include "net/node_link.h"
#include "net/node_wire.h"
#include "protocol/proto_node.h"

#define NODE_AM_ID 0x4e /* 'N': the one active message id of the link */
#define NODE_MAX_MESSAGE PROTO_NODE_FRAME_MAX /* larger bodies are refused */
#define NODE_RETRY_MIN_MS 50
#define NODE_RETRY_MAX_MS 1000

enum { EP_PEER = 1, EP_INBOUND = 2 };

/* The handshake steps of this node's endpoint to a peer. */
enum { HS_NONE = 0, HS_HELLO_SENT = 1, HS_PROOF_SENT = 2, HS_DONE = 3 };

typedef struct peer_counters {
	_Atomic uint64_t bytes_sent, msgs_sent, bytes_received, msgs_received;
	_Atomic uint64_t calls, calls_failed, calls_timed_out, requests_served, connects;
} peer_counters;

/* Another node, and this node's endpoint to it (its calls go there). */
typedef struct peer {
	int tag;                    /* EP_PEER: the endpoint error callback's argument */
	struct node_link *l;
	uint32_t rank;
	char addr[CLUSTER_HOST_MAX + 16];
	struct sockaddr_storage sa;
	socklen_t salen;
	ucp_ep_h ep;                /* NULL while not connected */
	int hs;                     /* HS_* */
	_Atomic int state;          /* node_peer_state; any thread reads */
	uint8_t nonce_c[NODE_NONCE_LEN];
	uint64_t attempt_ns;        /* when the current handshake began */
	uint32_t backoff_ms;
	struct event *ev_retry;
	ucs_status_t ep_error;      /* set by the error callback, handled after progress */
	bool ep_failed;
	cluster_call *head, *tail;  /* calls in flight, in id order */
	char pending_refusal[200];  /* its proof failed: refuse once our own
				       proof has reached it (so it can tell
				       too), or the endpoint ends */
	peer_counters c;            /* any thread */
	char last_error[160];       /* behind l->mu */
} peer;

/* An endpoint another node opened to this one (its calls come on it). */
typedef struct inbound {
	int tag;                    /* EP_INBOUND */
	struct node_link *l;
	struct inbound *next;
	ucp_ep_h ep;
	uint64_t gen;               /* names it in responders; never reused */
	uint32_t rank;              /* UINT32_MAX until its HELLO */
	int state;                  /* IN_* */
	uint64_t created_ns;
	bool ep_failed;
	uint8_t nonce_c[NODE_NONCE_LEN], nonce_a[NODE_NONCE_LEN];
	char from[64];              /* the connecting address, for logs */
} inbound;

enum { IN_NEW = 0, IN_WELCOMED = 1, IN_AUTHED = 2, IN_REFUSED = 3 };

/* One message on its way out: the link header (which UCX reads until the
 * send completes) and the body: a copy in the same block (nl_tx_new), or
 * a caller's block the link took over (nl_tx_take: body == owned). */
typedef struct tx {
	struct node_link *l;
	uint8_t hdr[NODE_HDR_LEN];
	uint32_t rank;              /* the peer it goes to */
	cluster_call *call;         /* REQUEST: the call */
	uint64_t in_gen;            /* REPLY: the inbound endpoint to answer on */
	size_t len;
	const uint8_t *body;        /* data, owned, or lent */
	void *owned;                /* freed with the tx; NULL for a copy */
	void (*release)(void *arg); /* a lent body: called with the tx's end */
	void *release_arg;
	uint8_t data[];
} tx;

struct cluster_responder {
	struct node_link *l;
	uint64_t in_gen;
	uint32_t from;
	uint64_t call_id;
};

typedef struct mail_item {
	void (*fn)(void *arg);
	void *arg;
} mail_item;

struct node_link {
	cluster_conf conf;
	uint32_t rank, n;
	uint8_t secret[NODE_LINK_SECRET_MAX];
	size_t secret_len;
	uint32_t timeout_ms;
	bool busy_poll;
	void (*log_fn)(void *arg, int level, const char *msg);
	void *log_arg;

	ucp_context_h ctx;
	ucp_worker_h worker;
	ucp_listener_h listener;
	int efd;

	struct event_base *base;
	struct event *ev_efd, *ev_mail, *ev_tick;
	pthread_t thread;
	bool thread_started;
	_Atomic bool stop;          /* busy-poll loop: leave */

	/* any thread, behind mu: the mailbox, the state's waiters, texts */
	pthread_mutex_t mu;
	pthread_cond_t cond;        /* state changes; mailbox room */
	int mail_fd;                /* eventfd */
	mail_item *q;
	size_t q_head, q_len, q_cap;
	bool closed;                /* no more mail */
	char fail_reason[640];
	_Atomic int state;          /* node_link_state */

	peer *peers;                /* [n]; peers[rank] is this node (unused) */
	inbound *in;
	uint64_t next_call_id, next_gen;
	uint32_t closing;           /* endpoint closes not yet complete */
	bool stopping;
	bool deferred;              /* an endpoint failed: handle after progress */

	_Atomic(cluster_serve_fn) serve;
	_Atomic(void *) serve_ctx;
	_Atomic uint64_t bad_messages; /* malformed or out-of-place, dropped */
	_Atomic uint64_t late_replies; /* for calls already ended */
};

typedef struct node_link node_link;

/* node_link.c */
void nl_log(node_link *l, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool nl_on_thread(const node_link *l);
/* Progress the worker until idle, handle what its callbacks deferred, arm
 * it for the next sleep: after every callback of the loop that used UCX. */
void nl_pump(node_link *l);
void nl_set_state(node_link *l, node_link_state s, const char *why);
void nl_set_last_error(peer *p, const char *why);
/* End a call (link thread): rc, the reply or NULL, and for an error the
 * message emdb_last_error() gives during done(). */
void nl_finish_call(node_link *l, cluster_call *call, int rc, const uint8_t *frame, size_t len, const char *msg);
void nl_fail_calls(node_link *l, peer *p, int rc, const char *msg);
void nl_unlink_call(peer *p, cluster_call *call);
void nl_tx_free(tx *t);
/* Post a message (ownership of t passes); returns 0 or -1 (t freed). */
int nl_send(node_link *l, ucp_ep_h ep, tx *t);
tx *nl_tx_new(node_link *l, node_kind kind, int32_t status, uint64_t call_id, const void *body, size_t len);
/* As nl_tx_new, but body (an emdb_malloc block) is taken, not copied; it
 * is freed with the tx, or at once when NULL is returned. */
tx *nl_tx_take(node_link *l, node_kind kind, int32_t status, uint64_t call_id, void *body, size_t len);
/* As nl_tx_new, but body is lent (cluster/link.h): release(arg) runs
 * when the tx is freed, or at once when NULL is returned. */
tx *nl_tx_lend(node_link *l, node_kind kind, uint64_t call_id, const void *body, size_t len,
	       void (*release)(void *arg), void *arg);
/* A REPLY from peer p's endpoint; a REQUEST on an authenticated inbound
 * endpoint (link thread; body valid for the call). */
void nl_reply_arrived(node_link *l, peer *p, const node_hdr *h, const uint8_t *body, size_t len);
void nl_request_arrived(node_link *l, inbound *in, const node_hdr *h, const uint8_t *body, size_t len);

/* node_link_conn.c */
int nlc_listen(node_link *l, char *err, size_t errlen);
int nlc_register_am(node_link *l, char *err, size_t errlen);
void nlc_connect(node_link *l, peer *p);
void nlc_schedule_retry(node_link *l, peer *p, uint32_t ms);
/* The retry timer's callback (libevent; arg is the peer). */
void nlc_on_retry(int fd, short what, void *arg);
void nlc_close_ep(node_link *l, ucp_ep_h ep);
/* After progress: endpoints that failed, inbound endpoints to drop. */
bool nlc_handle_deferred(node_link *l);
/* The periodic checks: handshakes and unauthenticated endpoints past the
 * timeout. */
void nlc_tick(node_link *l, uint64_t now);
inbound *nlc_inbound_by_gen(node_link *l, uint64_t gen);
/* Close every endpoint and the listener (link thread, at stop). */
void nlc_close_all(node_link *l);

#endif
