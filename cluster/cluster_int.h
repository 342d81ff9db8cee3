/*
 * cluster/cluster_int.h - the cluster layer's private state, shared by its
 * files: cluster.c (handle, counters), route.c (the home node's
 * requests), serve.c (the owner's side), otickets.c (tickets held for
 * peers), steps.c (synchronous steps) and admin.c (table changes).
 */
#ifndef EMDB_CLUSTER_INT_H
#define EMDB_CLUSTER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster/cluster.h"
#include "protocol/proto_node.h"

typedef struct step_barrier step_barrier; /* db/step.h */

/* The rank that coordinates synchronous steps and table changes. */
#define CLUSTER_COORDINATOR 0u

/* Owner tickets live for peers at once, at most (LIMIT beyond). */
#define OTICKETS_MAX (1u << 20)

typedef struct oticket_slot {
	emdb_ticket *t; /* NULL when free */
	uint32_t gen;
	uint32_t from;  /* the peer that holds it */
	uint32_t next_free;
} oticket_slot;

/* The tickets this node holds as an owner for its peers' PREFETCHes,
 * by handle (generation << 32 | slot + 1), under one reader-writer lock
 * (uses shared). */
typedef struct otickets {
	pthread_rwlock_t mu;
	oticket_slot *slots;
	uint32_t cap, live, free_head;
} otickets;

typedef struct peer_counters {
	_Atomic uint64_t msgs_to, bytes_to, msgs_from, bytes_from;
} peer_counters;

typedef struct admin_state admin_state; /* admin.c */
typedef struct lt_frame lt_frame;       /* linktest.c */
#define LT_ECHO_CACHE 8 /* ECHO reply frames kept, by size */
#define LT_ECHO_KEEP_MAX (16u << 20) /* larger ECHO replies are made per message */
typedef struct ckpt_state ckpt_state;   /* ckpt.c */
typedef struct serve_pool serve_pool;   /* strand.c */

struct cluster {
	emdb_db *db;
	cluster_link link;
	owner_map map;
	uint32_t rank, nodes;
	uint32_t max_batch;
	otickets tickets;
	step_barrier *steps;   /* the steps this node coordinates */
	admin_state *admin;
	ckpt_state *ckpt;
	peer_counters *count;  /* [nodes] */
	_Atomic bool linktest_busy; /* linktest.c: one at a time */
	lt_frame *echo_frames[LT_ECHO_CACHE]; /* linktest.c, link thread */
	uint32_t echo_next;
	serve_pool *pool;      /* strand.c; NULL: every request on the link's thread */
};

/* The part of one request that one owner answers. */
struct cluster_ticket {
	uint32_t table;
	uint32_t nodes;
	size_t n;
	struct ticket_part {
		uint32_t n;
		const uint32_t *pos;  /* request positions, ascending */
		uint64_t handle;      /* the owner's ticket (remote)  */
		emdb_ticket *local;   /* this node's part             */
	} part[];
};

/* ---- cluster.c ----------------------------------------------------- */

/* Send frame[0..len) to rank through the link, counting it.  Errors as
 * the link's call (done() then never runs). */
int cluster__call(cluster *cl, uint32_t rank, const void *frame, size_t len, cluster_call *call);
/* As cluster__call, but frame (an emdb_malloc block) is handed over: freed
 * here or by the link, sent without a copy where the link can. */
int cluster__call_owned(cluster *cl, uint32_t rank, uint8_t *frame, size_t len, cluster_call *call);
/* As cluster__call, the frame lent (cluster/link.h, Ownership):
 * release(arg) runs once, also on an error return.  A link without
 * call_lent gets a copy. */
int cluster__call_lent(cluster *cl, uint32_t rank, const void *frame, size_t len, cluster_call *call,
		       void (*release)(void *arg), void *arg);
/* Answer a request served for `from` with frame[0..len) (emdb_malloc'd:
 * freed here) or, when frame is NULL, with an error reply of status and
 * emdb_last_error()'s message. */
void cluster__reply(cluster *cl, cluster_responder *r, uint16_t op, uint32_t table, uint8_t *frame,
		    size_t len, int status);
/* Answer a request of op with its ROWS (or empty) reply, or, when
 * status < 0, an error reply with msg (NULL: emdb_last_error() as it is). */
void cluster__reply_rows(cluster *cl, cluster_responder *r, uint16_t op, uint32_t table, int status, uint64_t rows,
			 const char *msg);
/* A request frame: header for op/table at this node's epoch. */
proto_node_hdr cluster__hdr(const cluster *cl, uint16_t op, uint32_t table, bool response);
/* Encode m into a new emdb_malloc'd buffer (*buf, *len); where as
 * proto_node_encode.  Errors: NOMEM, INVALID. */
int cluster__encode(const proto_node_msg *m, uint8_t **buf, size_t *len, proto_node_where *where);
/* Decode a peer's frame, copying it first when it is not 8-aligned
 * (*copy then owns the copy: emdb_free it when done with m). */
int cluster__decode(const uint8_t *frame, size_t len, proto_node_msg *m, uint8_t **copy);
/* A call made for a local request (cluster__send_for). */
typedef struct req_call {
	cluster_call call;
	cluster_req *req;
} req_call;

/* Send m to rank on behalf of req; done(call, ...) runs with the reply
 * and takes req back with cluster__req_of(call) (which frees the call).
 * deadline_ns 0: the link's default.  Errors as cluster__call. */
int cluster__send_for(cluster *cl, uint32_t rank, const proto_node_msg *m, cluster_req *req, cluster_reply_fn done,
		      uint64_t deadline_ns);
cluster_req *cluster__req_of(cluster_call *call);

/* The reply to a request of `want` whose answer is ROWS, for a local
 * request: true with *value set, or false after finishing req with the
 * error (the link's, prefixed with who, or the peer's). */
bool cluster__take_reply(cluster_req *req, int rc, const uint8_t *frame, size_t len, uint16_t want,
			 const char *who, uint64_t *value);
/* Finish req with status and printf message (status < 0) and run done. */
void cluster__finish(cluster_req *req, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Set req->msg from status and the current emdb_last_error(). */
void cluster__set_msg(cluster_req *req, int status, const char *prefix);

/* ---- route.c ------------------------------------------------------- */

int route_submit(cluster *cl, cluster_req *req);

/* ---- scan.c: TABLE_SCAN across nodes ------------------------------- */

int scan_submit(cluster *cl, cluster_req *req);
void scan_serve(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r);

/* ---- stats.c: statistics of every node ----------------------------- */

int stats_submit(cluster *cl, cluster_req *req);
void stats_serve(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r);

/* ---- linktest.c: the node-to-node path measured ------------------- */

int linktest_submit(cluster *cl, cluster_req *req);
/* Answer a peer's ECHO (serve.c): its reply_len zero bytes. */
void linktest_echo(cluster *cl, cluster_responder *r, const proto_node_msg *m);
/* Drop the ECHO reply frames kept (cluster_close). */
void linktest_close(cluster *cl);

/* ---- serve.c, strand.c: the owner's side --------------------------- */

/* Decode, check and run one request frame of `from` (cluster_serve's
 * work, wherever it runs); replies once. */
void cluster__serve_frame(cluster *cl, uint32_t from, const uint8_t *frame, size_t len, cluster_responder *r);
/* Queue a copy of the frame on from's strand (from < nodes, cl->pool
 * set); it runs in arrival order.  Replies NOMEM when it cannot. */
void serve_pool_take(cluster *cl, uint32_t from, const uint8_t *frame, size_t len, cluster_responder *r);
/* Run what is queued, stop and free the pool (cluster_close). */
void serve_pool_stop(cluster *cl);

/* ---- otickets.c ---------------------------------------------------- */

int otickets_init(otickets *o);
void otickets_destroy(otickets *o);
/* Take t for peer from; *handle its handle.  Errors: LIMIT, NOMEM (t not
 * taken). */
int otickets_add(otickets *o, uint32_t from, emdb_ticket *t, uint64_t *handle);
/* Run fn(t, arg) on the ticket of handle held for from, under the lock
 * (a ticket is never freed while in use).  Errors: TICKET. */
int otickets_use(otickets *o, uint32_t from, uint64_t handle, int (*fn)(const emdb_ticket *t, void *arg),
		 void *arg);
int otickets_free(otickets *o, uint32_t from, uint64_t handle);
/* Free every ticket held for from (UINT32_MAX: for everyone). */
void otickets_drop_peer(otickets *o, uint32_t from);

/* ---- steps.c ------------------------------------------------------- */

int steps_open(cluster *cl);
void steps_close(cluster *cl);
int steps_submit(cluster *cl, cluster_req *req);
void steps_serve(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r);

/* ---- admin.c ------------------------------------------------------- */

int admin_open(cluster *cl);
void admin_close(cluster *cl);
int admin_submit(cluster *cl, cluster_req *req);
/* TABLE_ADMIN, TABLE_PREPARE, TABLE_COMMIT, TABLE_ABORT from a peer. */
void admin_serve(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r);

/* ---- ckpt.c -------------------------------------------------------- */

int ckpt_open(cluster *cl);
void ckpt_close(cluster *cl);
/* An Update-like request (UPDATE, PUSH_UPDATE, LOAD; the table changes
 * ALTER, CREATE, DROP) about to start: 1 when
 * a cluster checkpoint holds Updates (req is deferred: it starts when the
 * hold ends, and its done runs then), 0 when it may go (it counts as in
 * flight until its done).  Other requests: 0. */
int ckpt_gate_enter(cluster *cl, cluster_req *req);
/* req, let go by ckpt_gate_enter, was refused before it started. */
void ckpt_gate_cancel(cluster *cl, cluster_req *req);
/* Release a hold whose timeout passed. */
void ckpt_tick(cluster *cl, uint64_t now_ns);
/* CKPT_ASK, CKPT_HOLD, CKPT_WRITE, CKPT_END from a peer. */
void ckpt_serve(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r);

#endif
