/*
 * handle_cluster.c - the data plane and table changes of a node in a
 * cluster: PREFETCH, TICKET_FREE, PULL, PUSH, PUSH_UPDATE, UPDATE, LOOKUP,
 * READ_STATE, TABLE_CREATE, TABLE_DROP and TABLE_RESERVE go through the
 * cluster layer (cluster/cluster.h) instead of the local engine when the
 * server is part of a cluster (s->cluster set).  handle.c sends those
 * opcodes here then; a server alone never comes here.
 *
 * A request is decoded as handle_data.c decodes it, its arrays copied
 * (the input buffer is reused once the handler returns, the owners answer
 * later), and submitted; the connection then owes the answer
 * (answers_owed) until the cluster layer's completion comes back to the
 * connection's I/O thread as an io_completion (net/loop.h), which writes
 * the reply or the error.
 *
 * Invariants:
 *   1. Exactly one reply per request: the handler's error when the
 *      cluster layer refuses it at once, else the completion's.
 *   2. A wire ticket of a clustered connection holds a cluster_ticket
 *      (the connection's ticket table frees it with cluster_ticket_free),
 *      and is resolved only within its connection, as on one node.
 *   3. The reply never exceeds max_frame: checked before submitting.
 *
 * State changes: the cluster's engines (through the cluster layer),
 * c->tickets (PREFETCH, TICKET_FREE), c->answers_owed.
 */
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/db.h>
#include <emdb/error.h>

#include "base/error_int.h"
#include "cluster/cluster.h"
#include "net/checkpoint.h"
#include "net/conn.h"
#include "net/handle_int.h"
#include "net/loop.h"
#include "net/server.h"

typedef struct routed {
	io_completion done; /* first: the record's address is its own */
	io_thread *t;
	cluster *cl;
	uint64_t req_id;
	uint16_t op;
	uint32_t n_rows;    /* rows of the reply's floats */
	uint32_t width;     /* floats per row */
	bool want_found;
	cluster_req r;
	emdb_table_config cfg; /* TABLE_CREATE */
	uint8_t *mem;       /* copies of the request's arrays and the outputs */
} routed;

bool handle_is_routed(uint16_t op)
{
	switch (op) {
	case PROTO_OP_PREFETCH:
	case PROTO_OP_PULL:
	case PROTO_OP_PUSH:
	case PROTO_OP_PUSH_UPDATE:
	case PROTO_OP_UPDATE:
	case PROTO_OP_LOOKUP:
	case PROTO_OP_READ_STATE:
	case PROTO_OP_TABLE_CREATE:
	case PROTO_OP_TABLE_DROP:
	case PROTO_OP_TABLE_RESERVE:
		return true;
	default:
		return false; /* TICKET_FREE is local: the ticket table's free frees the owners' parts */
	}
}

int handle_local_only(conn *c, const proto_hdr *h)
{
	if (!c->srv->cluster)
		return EMDB_OK;
	return handle_fail(EMDB_ERR_UNSUPPORTED,
			   "%s is not routed across a cluster yet: send it to a server that is not a cluster node",
			   proto_op_name(h->opcode));
}

void handle_cluster_ticket_free(void *cl, void *t)
{
	cluster_ticket_free(cl, t);
}

static void routed_free(routed *a)
{
	emdb_free(a->mem);
	emdb_free(a);
}

/* The reply of a finished request, on its connection's thread. */
static int reply_ok(conn *c, routed *a)
{
	cluster_req *r = &a->r;
	switch (a->op) {
	case PROTO_OP_PREFETCH: {
		uint32_t max = (uint32_t)atomic_load_explicit(&c->srv->rt.max_tickets, memory_order_relaxed);
		proto_prefetch_resp m = { .table = r->table, .count = (uint32_t)cluster_ticket_count(r->ticket_out) };
		int rc = tickets_add(&c->tickets, r->ticket_out, max, &m.ticket);
		if (rc) {
			cluster_ticket_free(a->cl, r->ticket_out);
			return emdb__seterr(rc, "%u tickets are live on this connection (max_tickets), or no memory",
					    c->tickets.live);
		}
		atomic_fetch_add_explicit(&c->t->n_tickets, 1, memory_order_relaxed);
		rc = HANDLE_REPLY(c, a->req_id, proto_prefetch_resp_encode, &m);
		if (rc) {
			tickets_free(&c->tickets, m.ticket);
			atomic_fetch_sub_explicit(&c->t->n_tickets, 1, memory_order_relaxed);
		}
		return rc;
	}
	case PROTO_OP_PULL: {
		proto_pull_resp m = { a->n_rows, a->width, r->out };
		return HANDLE_REPLY(c, a->req_id, proto_pull_resp_encode, &m);
	}
	case PROTO_OP_LOOKUP: {
		proto_lookup_resp m = { a->n_rows, a->width, r->out, a->want_found ? r->found : NULL };
		return HANDLE_REPLY(c, a->req_id, proto_lookup_resp_encode, &m);
	}
	case PROTO_OP_READ_STATE: {
		proto_read_state_resp m = { a->n_rows, a->width, r->out, r->found };
		return HANDLE_REPLY(c, a->req_id, proto_read_state_resp_encode, &m);
	}
	case PROTO_OP_UPDATE:
	case PROTO_OP_PUSH_UPDATE: {
		proto_update_resp m = { r->rows };
		ckpts_note_step(c->srv->ckpts);
		return a->op == PROTO_OP_UPDATE ? HANDLE_REPLY(c, a->req_id, proto_update_resp_encode, &m)
						: HANDLE_REPLY(c, a->req_id, proto_push_update_resp_encode, &m);
	}
	case PROTO_OP_TABLE_CREATE: {
		proto_table_create_resp m = { r->table_out };
		return HANDLE_REPLY(c, a->req_id, proto_table_create_resp_encode, &m);
	}
	default: { /* PUSH, TABLE_DROP, TABLE_RESERVE: empty */
		uint8_t *p = conn_reply_reserve(c, PROTO_HDR_SIZE);
		size_t len;
		if (!p)
			return EMDB_ERR_NOMEM;
		proto_empty_encode(p, PROTO_HDR_SIZE, a->req_id, a->op, true, &len);
		obuf_commit(&c->out, len);
		return EMDB_OK;
	}
	}
}

/* On the connection's I/O thread; c NULL: it has gone. */
static void routed_done(conn *c, io_completion *w)
{
	routed *a = (routed *)w;
	if (!c) {
		if (a->r.status == EMDB_OK && a->op == PROTO_OP_PREFETCH)
			cluster_ticket_free(a->cl, a->r.ticket_out);
	} else if (a->r.status < 0) {
		conn_reply_err(c, a->req_id, a->op, a->r.status, a->r.msg);
	} else {
		int rc = reply_ok(c, a);
		if (rc < 0)
			conn_reply_err(c, a->req_id, a->op, rc,
				       rc == EMDB_ERR_NOMEM ? "no memory for the reply" : emdb_last_error());
	}
	routed_free(a);
}

/* On whichever thread finished the request. */
static void routed_finished(cluster_req *r)
{
	routed *a = r->arg;
	io_thread_post(a->t, &a->done);
}

/* Copy n bytes of src into the request's block at *at, 8-aligned. */
static void *take(uint8_t **at, const void *src, size_t n)
{
	void *p = *at;
	if (src && n)
		memcpy(p, src, n);
	*at += (n + 7) & ~(size_t)7;
	return p;
}

static int ticket_of(conn *c, uint64_t handle, const cluster_ticket **out)
{
	*out = tickets_get(&c->tickets, handle);
	if (!*out)
		return handle_fail(EMDB_ERR_TICKET, "ticket 0x%llx is not a live ticket of this connection",
				   (unsigned long long)handle);
	return EMDB_OK;
}

/* The reply's size against max_frame (invariant 3). */
static int check_rows(conn *c, uint64_t n_rows, uint32_t width, bool found)
{
	uint64_t bytes = PROTO_HDR_SIZE + 16 + n_rows * width * 4 + (found ? n_rows + 8 : 0);
	return handle_check_reply(c, bytes);
}

int handle_routed(conn *c, const proto_hdr *h, const uint8_t *body)
{
	server *s = c->srv;
	proto_msg m;
	int rc = proto_msg_decode(h, body, &m);
	if (rc)
		return rc;
	routed *a = emdb_calloc(1, sizeof(*a));
	if (!a)
		return EMDB_ERR_NOMEM;
	a->t = c->t;
	a->cl = s->cluster;
	a->req_id = h->id;
	a->op = h->opcode;
	io_completion_init(&a->done, c, routed_done);
	cluster_req *r = &a->r;
	r->done = routed_finished;
	r->arg = a;
	const cluster_ticket *tk = NULL;
	emdb_table_config cfg;
	size_t in = 0, out = 0;
	switch (h->opcode) {
	case PROTO_OP_PREFETCH: {
		uint32_t max = (uint32_t)atomic_load_explicit(&s->rt.max_tickets, memory_order_relaxed);
		if (c->tickets.live >= max) {
			rc = handle_fail(EMDB_ERR_LIMIT, "%u tickets are live on this connection (max_tickets): free some first",
					 c->tickets.live);
			break;
		}
		*r = (cluster_req){ .op = CLUSTER_PREFETCH, .table = m.prefetch_req.table, .n = m.prefetch_req.n,
				    .done = routed_finished, .arg = a };
		in = (size_t)m.prefetch_req.n * 8;
		if (!(a->mem = emdb_malloc(in + 8)))
			break;
		uint8_t *at = a->mem;
		r->ids = take(&at, m.prefetch_req.ids, in);
		break;
	}
	case PROTO_OP_PULL:
	case PROTO_OP_LOOKUP:
	case PROTO_OP_READ_STATE: {
		const uint64_t *ids = NULL, *offsets = NULL;
		uint32_t table, n_ids = 0, n_bags = 0;
		if (h->opcode == PROTO_OP_PULL) {
			proto_pull_req *q = &m.pull_req;
			if (q->ticket && (rc = ticket_of(c, q->ticket, &tk)))
				break;
			table = q->table, ids = q->ids, n_ids = q->n_ids, offsets = q->offsets, n_bags = q->n_bags;
			*r = (cluster_req){ .op = CLUSTER_PULL, .dim = q->dim, .pool = (emdb_pool)q->pool, .n_bags = n_bags };
			a->width = q->dim;
			a->n_rows = n_bags ? n_bags : tk ? (uint32_t)cluster_ticket_count(tk) : n_ids;
		} else if (h->opcode == PROTO_OP_LOOKUP) {
			proto_lookup_req *q = &m.lookup_req;
			table = q->table, ids = q->ids, n_ids = q->n;
			*r = (cluster_req){ .op = CLUSTER_LOOKUP, .dim = q->dim };
			a->width = q->dim;
			a->n_rows = q->n;
			a->want_found = q->want_found;
		} else {
			proto_read_state_req *q = &m.read_state_req;
			table = q->table, ids = q->ids, n_ids = q->n;
			if ((rc = emdb_table_get_config(s->db, table, &cfg)))
				break;
			*r = (cluster_req){ .op = CLUSTER_READ_STATE };
			a->width = emdb_optimizer_state_floats(cfg.optimizer.kind, cfg.dim);
			a->n_rows = q->n;
			a->want_found = true;
		}
		if ((rc = check_rows(c, a->n_rows, a->width, a->want_found)))
			break;
		r->table = table, r->ticket = tk, r->n = n_ids, r->done = routed_finished, r->arg = a;
		in = (size_t)n_ids * 8 + (n_bags ? ((size_t)n_bags + 1) * 8 : 0);
		out = (size_t)a->n_rows * a->width * 4 + a->n_rows + 16;
		if (!(a->mem = emdb_malloc(in + out + 16)))
			break;
		uint8_t *at = a->mem;
		r->ids = tk ? NULL : take(&at, ids ? ids : (const uint64_t[]){ 0 }, (size_t)n_ids * 8);
		r->offsets = n_bags ? take(&at, offsets, ((size_t)n_bags + 1) * 8) : NULL;
		r->out = take(&at, NULL, (size_t)a->n_rows * a->width * 4);
		r->found = a->want_found ? take(&at, NULL, a->n_rows) : NULL;
		break;
	}
	case PROTO_OP_PUSH:
	case PROTO_OP_PUSH_UPDATE: {
		proto_push_req *q = &m.push_req;
		if (q->ticket && (rc = ticket_of(c, q->ticket, &tk)))
			break;
		if (tk && !q->n_bags && q->n_rows != cluster_ticket_count(tk)) {
			rc = handle_fail(EMDB_ERR_BATCH, "%u gradient rows for a ticket of %zu IDs", q->n_rows,
					 cluster_ticket_count(tk));
			break;
		}
		*r = (cluster_req){ .op = h->opcode == PROTO_OP_PUSH ? CLUSTER_PUSH : CLUSTER_PUSH_UPDATE,
				    .table = q->table, .dim = q->dim, .ticket = tk, .n = q->n_ids, .n_bags = q->n_bags,
				    .pool = (emdb_pool)q->pool, .done = routed_finished, .arg = a,
				    .ranked = h->opcode == PROTO_OP_PUSH && c->worker_rank != EMDB_WORKER_NONE,
				    .rank = c->worker_rank };
		in = (size_t)q->n_ids * 8 + (q->n_bags ? ((size_t)q->n_bags + 1) * 8 : 0) +
		     (size_t)q->n_rows * q->dim * 4;
		if (!(a->mem = emdb_malloc(in + 24)))
			break;
		uint8_t *at = a->mem;
		r->ids = tk ? NULL : take(&at, q->ids ? q->ids : (const uint64_t[]){ 0 }, (size_t)q->n_ids * 8);
		r->offsets = q->n_bags ? take(&at, q->offsets, ((size_t)q->n_bags + 1) * 8) : NULL;
		r->grads = take(&at, q->grads, (size_t)q->n_rows * q->dim * 4);
		break;
	}
	case PROTO_OP_UPDATE: {
		proto_update_req *q = &m.update_req;
		uint64_t timeout = atomic_load(&s->rt.update_barrier_timeout_ms);
		*r = (cluster_req){ .op = q->workers >= 2 ? CLUSTER_STEP : CLUSTER_UPDATE, .table = q->table,
				    .workers = q->workers, .worker = c->id,
				    .timeout_ms = timeout > UINT32_MAX ? UINT32_MAX : (uint32_t)timeout,
				    .done = routed_finished, .arg = a };
		break;
	}
	case PROTO_OP_TABLE_CREATE:
		a->cfg = m.table_create_req.cfg;
		*r = (cluster_req){ .op = CLUSTER_TABLE_CREATE, .cfg = &a->cfg, .done = routed_finished, .arg = a };
		break;
	case PROTO_OP_TABLE_DROP:
		*r = (cluster_req){ .op = CLUSTER_TABLE_DROP, .table = m.table_drop_req.table, .done = routed_finished,
				    .arg = a };
		break;
	case PROTO_OP_TABLE_RESERVE:
		*r = (cluster_req){ .op = CLUSTER_TABLE_RESERVE, .table = m.table_reserve_req.table,
				    .rows_in = m.table_reserve_req.rows, .done = routed_finished, .arg = a };
		break;
	default:
		rc = handle_fail(EMDB_ERR_INTERNAL, "%s is not routed", proto_op_name(h->opcode));
	}
	if (rc == EMDB_OK && (in || out) && !a->mem)
		rc = handle_fail(EMDB_ERR_NOMEM, "no memory to copy a request of %zu bytes", in + out);
	if (rc == EMDB_OK && (rc = cluster_submit(s->cluster, r)) != EMDB_OK)
		handle_fail(rc, "%s", r->msg);
	if (rc) {
		routed_free(a);
		return rc;
	}
	c->answers_owed++;
	return HANDLED_OK; /* answered by routed_done */
}
