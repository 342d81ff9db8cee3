/*
 * cluster/cluster.c - the cluster layer's handle (cluster.h): open and
 * close, the dispatch of a request to its module (route.c, steps.c,
 * admin.c, linktest.c), home tickets, traffic counters, and the small
 * helpers every module uses to talk through the link (cluster_int.h).
 *
 * Invariants:
 *   1. Every frame this layer sends goes through cluster__call and every
 *      answer through cluster__reply, so the counters see all traffic and
 *      every served request is answered exactly once (an error reply when
 *      even encoding the answer failed).
 *   2. The partition map is fixed for the cluster's life (epoch 1 until a
 *      reshard, a later issue, installs another).
 *
 * State changes: counters (atomics), tickets (otickets.c), the steps and
 * table changes this node coordinates (steps.c, admin.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/error_int.h"
#include "cluster/cluster_int.h"

int cluster_open(emdb_db *db, const cluster_link *link, uint32_t partitions, cluster **out)
{
	if (!db || !link || !link->ops || !out || !link->nodes || link->rank >= link->nodes)
		return emdb__seterr(EMDB_ERR_INVALID, "cluster_open: a database and a link of rank < nodes are needed");
	cluster *cl = emdb_calloc(1, sizeof(*cl));
	if (!cl)
		return emdb__seterr(EMDB_ERR_NOMEM, "cluster_open");
	emdb_db_config dc;
	emdb_db_get_config(db, &dc);
	cl->db = db;
	cl->link = *link;
	cl->rank = link->rank;
	cl->nodes = link->nodes;
	cl->max_batch = dc.max_batch;
	otickets_init(&cl->tickets);
	int rc = owner_map_init(&cl->map, cl->nodes, partitions);
	if (rc == EMDB_OK && !(cl->count = emdb_calloc(cl->nodes, sizeof(*cl->count))))
		rc = emdb__seterr(EMDB_ERR_NOMEM, "cluster_open: counters");
	if (rc == EMDB_OK)
		rc = steps_open(cl);
	if (rc == EMDB_OK)
		rc = admin_open(cl);
	if (rc == EMDB_OK)
		rc = ckpt_open(cl);
	if (rc) {
		cluster_close(cl);
		return rc;
	}
	*out = cl;
	return EMDB_OK;
}

void cluster_close(cluster *cl)
{
	if (!cl)
		return;
	serve_pool_stop(cl);
	ckpt_close(cl);
	linktest_close(cl);
	admin_close(cl);
	steps_close(cl);
	otickets_destroy(&cl->tickets);
	owner_map_destroy(&cl->map);
	emdb_free(cl->count);
	emdb_free(cl);
}

void cluster_peer_lost(cluster *cl, uint32_t rank)
{
	otickets_drop_peer(&cl->tickets, rank);
}

const owner_map *cluster_map(const cluster *cl)
{
	return &cl->map;
}

uint32_t cluster_rank(const cluster *cl)
{
	return cl->rank;
}

uint32_t cluster_nodes(const cluster *cl)
{
	return cl->nodes;
}

void cluster_get_counters(const cluster *cl, uint32_t rank, cluster_counters *out)
{
	memset(out, 0, sizeof(*out));
	if (rank >= cl->nodes)
		return;
	out->msgs_to = atomic_load(&cl->count[rank].msgs_to);
	out->bytes_to = atomic_load(&cl->count[rank].bytes_to);
	out->msgs_from = atomic_load(&cl->count[rank].msgs_from);
	out->bytes_from = atomic_load(&cl->count[rank].bytes_from);
}

int cluster_submit(cluster *cl, cluster_req *req)
{
	req->status = EMDB_OK;
	req->msg[0] = 0;
	req->rows = 0;
	req->ticket_out = NULL;
	req->table_out = 0;
	req->priv = NULL;
	if (!req->done) {
		cluster__set_msg(req, emdb__seterr(EMDB_ERR_INVALID, "cluster_submit: no done callback"), NULL);
		return EMDB_ERR_INVALID;
	}
	switch (req->op) {
	case CLUSTER_STEP:
		return steps_submit(cl, req);
	case CLUSTER_TABLE_CREATE:
	case CLUSTER_TABLE_DROP:
	case CLUSTER_TABLE_RESERVE:
	case CLUSTER_TABLE_ALTER:
		return admin_submit(cl, req);
	case CLUSTER_PREFETCH:
	case CLUSTER_PULL:
	case CLUSTER_PUSH:
	case CLUSTER_PUSH_UPDATE:
	case CLUSTER_UPDATE:
	case CLUSTER_LOOKUP:
	case CLUSTER_READ_STATE:
	case CLUSTER_LOAD:
		return route_submit(cl, req);
	case CLUSTER_SCAN:
		return scan_submit(cl, req);
	case CLUSTER_TABLE_STATS:
		return stats_submit(cl, req);
	case CLUSTER_LINKTEST:
		return linktest_submit(cl, req);
	}
	cluster__set_msg(req, emdb__seterr(EMDB_ERR_INVALID, "cluster_submit: unknown op %d", (int)req->op), NULL);
	return EMDB_ERR_INVALID;
}

/* ---- the blocking form ------------------------------------------------- */

typedef struct run_wait {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	cluster_done_fn user_done;
	void *user_arg;
} run_wait;

static void run_done(cluster_req *req)
{
	run_wait *w = req->arg;
	pthread_mutex_lock(&w->mu);
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

int cluster_run(cluster *cl, cluster_req *req)
{
	run_wait w = { .done = false, .user_done = req->done, .user_arg = req->arg };
	pthread_mutex_init(&w.mu, NULL);
	pthread_cond_init(&w.cv, NULL);
	req->done = run_done;
	req->arg = &w;
	int rc = cluster_submit(cl, req);
	if (rc == EMDB_OK) {
		pthread_mutex_lock(&w.mu);
		while (!w.done)
			pthread_cond_wait(&w.cv, &w.mu);
		pthread_mutex_unlock(&w.mu);
		rc = req->status;
	}
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
	req->done = w.user_done;
	req->arg = w.user_arg;
	if (rc)
		emdb__seterr(rc, "%s", req->msg);
	return rc;
}

/* ---- home tickets -------------------------------------------------------- */

/* A TICKET_FREE in flight: nobody waits for its answer. */
static void free_done(cluster_call *call, int rc, const uint8_t *frame, size_t len)
{
	(void)cluster__req_of(call);
}

void cluster_ticket_free(cluster *cl, cluster_ticket *t)
{
	if (!t)
		return;
	for (uint32_t r = 0; r < t->nodes; r++) {
		struct ticket_part *p = &t->part[r];
		emdb_ticket_free(p->local);
		if (!p->handle)
			continue;
		proto_node_msg m = { .hdr = cluster__hdr(cl, PROTO_NODE_TICKET_FREE, t->table, false) };
		m.u.sel.ticket = p->handle;
		/* On failure the owner frees it when it loses this node. */
		(void)cluster__send_for(cl, r, &m, NULL, free_done, 0);
	}
	emdb_free(t);
}

size_t cluster_ticket_count(const cluster_ticket *t)
{
	return t->n;
}

uint32_t cluster_ticket_table(const cluster_ticket *t)
{
	return t->table;
}

/* ---- helpers (cluster_int.h) ----------------------------------------------- */

static void count_call(cluster *cl, uint32_t rank, size_t len)
{
	atomic_fetch_add_explicit(&cl->count[rank].msgs_to, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&cl->count[rank].bytes_to, len, memory_order_relaxed);
}

int cluster__call(cluster *cl, uint32_t rank, const void *frame, size_t len, cluster_call *call)
{
	if (rank >= cl->nodes || rank == cl->rank)
		return emdb__seterr(EMDB_ERR_INTERNAL, "cluster: call to rank %u from rank %u of %u", rank, cl->rank,
				    cl->nodes);
	int rc = cl->link.ops->call(cl->link.ctx, rank, frame, len, call);
	if (rc == EMDB_OK)
		count_call(cl, rank, len);
	return rc;
}

int cluster__call_owned(cluster *cl, uint32_t rank, uint8_t *frame, size_t len, cluster_call *call)
{
	if (!cl->link.ops->call_owned || rank >= cl->nodes || rank == cl->rank) {
		int rc = cluster__call(cl, rank, frame, len, call);
		emdb_free(frame);
		return rc;
	}
	int rc = cl->link.ops->call_owned(cl->link.ctx, rank, frame, len, call);
	if (rc == EMDB_OK)
		count_call(cl, rank, len);
	return rc;
}

int cluster__call_lent(cluster *cl, uint32_t rank, const void *frame, size_t len, cluster_call *call,
		       void (*release)(void *arg), void *arg)
{
	if (!cl->link.ops->call_lent || rank >= cl->nodes || rank == cl->rank) {
		int rc = cluster__call(cl, rank, frame, len, call);
		release(arg);
		return rc;
	}
	int rc = cl->link.ops->call_lent(cl->link.ctx, rank, frame, len, call, release, arg);
	if (rc == EMDB_OK)
		count_call(cl, rank, len);
	return rc;
}

void cluster__reply(cluster *cl, cluster_responder *r, uint16_t op, uint32_t table, uint8_t *frame, size_t len,
		    int status)
{
	uint8_t err[PROTO_NODE_HDR_SIZE + 8 + PROTO_ERRMSG_MAX + 8];
	if (!frame) {
		if (!proto_node_op_known(op))
			op = PROTO_NODE_NONE;
		if (status >= 0)
			status = EMDB_ERR_INTERNAL;
		proto_node_err_encode(err, sizeof(err), op, table, cl->map.epoch, status, emdb_last_error(), &len);
	}
	if (frame && cl->link.ops->reply_owned) {
		cl->link.ops->reply_owned(cl->link.ctx, r, frame, len);
		return;
	}
	cl->link.ops->reply(cl->link.ctx, r, frame ? frame : err, len);
	emdb_free(frame);
}

void cluster__reply_rows(cluster *cl, cluster_responder *r, uint16_t op, uint32_t table, int status, uint64_t rows,
			 const char *msg)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	if (status == EMDB_OK) {
		proto_node_msg rep = { .hdr = cluster__hdr(cl, op, table, true) };
		rep.u.rows.rows = rows;
		status = cluster__encode(&rep, &buf, &len, NULL);
	} else if (msg) {
		emdb__seterr(status, "%s", msg);
	}
	cluster__reply(cl, r, op, table, buf, len, status);
}

proto_node_hdr cluster__hdr(const cluster *cl, uint16_t op, uint32_t table, bool response)
{
	proto_node_hdr h = { PROTO_NODE_VERSION, response ? PROTO_NODE_FLAG_RESPONSE : 0, op, 0, table,
			     cl->map.epoch, 0 };
	return h;
}

int cluster__encode(const proto_node_msg *m, uint8_t **buf, size_t *len, proto_node_where *where)
{
	*buf = NULL;
	int rc = proto_node_encode(NULL, 0, m, len, where);
	if (rc != EMDB_ERR_LIMIT)
		return rc ? rc : emdb__seterr(EMDB_ERR_INTERNAL, "node frame of no bytes");
	/* 8-aligned, as emdb_malloc's blocks are */
	if (!(*buf = emdb_malloc(*len)))
		return emdb__seterr(EMDB_ERR_NOMEM, "a node frame of %zu bytes", *len);
	rc = proto_node_encode(*buf, *len, m, len, where);
	if (rc) {
		emdb_free(*buf);
		*buf = NULL;
	}
	return rc;
}

int cluster__decode(const uint8_t *frame, size_t len, proto_node_msg *m, uint8_t **copy)
{
	*copy = NULL;
	if (frame && (uintptr_t)frame % 8) {
		if (!(*copy = emdb_malloc(len ? len : 1))) {
			memset(m, 0, sizeof(*m));
			return emdb__seterr(EMDB_ERR_NOMEM, "copying a node frame of %zu bytes", len);
		}
		memcpy(*copy, frame, len);
		frame = *copy;
	}
	return proto_node_decode(frame, len, m);
}

void cluster__set_msg(cluster_req *req, int status, const char *prefix)
{
	req->status = status;
	snprintf(req->msg, sizeof(req->msg), "%s%s", prefix ? prefix : "", status ? emdb_last_error() : "");
}

int cluster__send_for(cluster *cl, uint32_t rank, const proto_node_msg *m, cluster_req *req, cluster_reply_fn done,
		      uint64_t deadline_ns)
{
	uint8_t *buf = NULL;
	size_t len;
	req_call *rq = emdb_calloc(1, sizeof(*rq));
	int rc = rq ? cluster__encode(m, &buf, &len, NULL) : emdb__seterr(EMDB_ERR_NOMEM, "a node call");
	if (rc == EMDB_OK) {
		rq->req = req;
		rq->call.done = done;
		rq->call.arg = rq;
		rq->call.deadline_ns = deadline_ns;
		rc = cluster__call_owned(cl, rank, buf, len, &rq->call);
	} else {
		emdb_free(buf);
	}
	if (rc)
		emdb_free(rq);
	return rc;
}

cluster_req *cluster__req_of(cluster_call *call)
{
	req_call *rq = call->arg;
	cluster_req *req = rq->req;
	emdb_free(rq);
	return req;
}

bool cluster__take_reply(cluster_req *req, int rc, const uint8_t *frame, size_t len, uint16_t want,
			 const char *who, uint64_t *value)
{
	if (rc < 0) {
		cluster__finish(req, rc, "%s: %s", who, emdb_last_error());
		return false;
	}
	proto_node_msg m;
	uint8_t *copy;
	rc = cluster__decode(frame, len, &m, &copy);
	if (rc == EMDB_OK && (m.hdr.opcode != want || !(m.hdr.flags & PROTO_NODE_FLAG_RESPONSE)))
		rc = emdb__seterr(EMDB_ERR_PROTOCOL, "answered node %s with node %s", proto_node_op_name(want),
				  proto_node_op_name(m.hdr.opcode));
	bool ok = false;
	if (rc)
		cluster__finish(req, rc, "%s: %s", who, emdb_last_error());
	else if (m.hdr.status < 0)
		cluster__finish(req, m.hdr.status, "%.*s", (int)m.u.err.len, m.u.err.p ? m.u.err.p : "");
	else {
		*value = m.u.rows.rows;
		ok = true;
	}
	emdb_free(copy);
	return ok;
}

void cluster__finish(cluster_req *req, int status, const char *fmt, ...)
{
	req->status = status;
	req->msg[0] = 0;
	if (status && fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(req->msg, sizeof(req->msg), fmt, ap);
		va_end(ap);
	}
	req->priv = NULL;
	req->done(req);
}
