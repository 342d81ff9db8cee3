/*
 * handle_cluster.c - the data plane, table changes and statistics of a
 * node in a cluster: PREFETCH, PULL, PULL_WEIGHTED, PUSH, PUSH_WEIGHTED,
 * PUSH_UPDATE, UPDATE, LOOKUP, READ_STATE, TABLE_CREATE, TABLE_DROP,
 * TABLE_RESERVE, TABLE_ALTER, TABLE_SCAN, TABLE_LOAD, TABLE_DESCRIBE,
 * STATS and INFO (its cluster section) go through the cluster layer
 * (cluster/cluster.h) instead of the local engine when the server is part
 * of a cluster (s->cluster set), and so does LINKTEST, which exists only
 * there.  handle.c sends those opcodes here then; a server alone comes
 * here only for handle_linktest, its refusal.  TABLE_LIST stays local: every node
 * holds the same tables (table changes apply on all or none).
 *
 * A request is decoded as handle_data.c decodes it and submitted.  The
 * input buffer is reused once the handler returns and the owners answer
 * later, so what the cluster layer reads after cluster_submit returns is
 * copied into the request's block (a pooled Pull's offsets and weights,
 * TABLE_LOAD's arrays); IDs and gradients of the routed data ops are
 * read inside cluster_submit only (cluster.h "Ownership") and are not.
 * The reply of a PULL, LOOKUP or READ_STATE is laid out at submit in a
 * block of its own, the parts write their rows straight into it, and it
 * joins the connection's output as it is (reply_frame, obuf_adopt).  The
 * connection then owes the answer (answers_owed) until the cluster
 * layer's completion comes back to the connection's I/O thread as an
 * io_completion (net/loop.h), which writes the reply or the error.
 *
 * Invariants:
 *   1. Exactly one reply per request: the handler's error when the
 *      cluster layer refuses it at once, else the completion's.
 *   2. A wire ticket of a clustered connection holds a cluster_ticket
 *      (the connection's ticket table frees it with cluster_ticket_free),
 *      and is resolved only within its connection, as on one node.
 *   3. The reply never exceeds max_frame: checked before submitting.
 *   4. TABLE_DESCRIBE and STATS answer for the whole cluster (rows and
 *      bytes summed over the nodes, cluster_stats_total) or fail with the
 *      node that did not answer: never a total that misses a node.  INFO
 *      shows every node's rows and bytes, "unknown" for one that did not
 *      answer.
 *
 * State changes: the cluster's engines (through the cluster layer),
 * c->tickets (PREFETCH, TICKET_FREE), c->answers_owed.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <emdb/alloc.h>
#include <emdb/db.h>
#include <emdb/error.h>

#include "base/error_int.h"
#include "cluster/cluster.h"
#include "net/checkpoint.h"
#include "net/conn.h"
#include "net/handle_int.h"
#include "net/info.h"
#include "net/loop.h"
#include "net/obuf.h"
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
	emdb_optimizer opt;    /* TABLE_ALTER */
	char section[PROTO_NAME_MAX + 1]; /* INFO */
	uint8_t *mem;       /* copies of the request's arrays and the outputs */
	void *frame;        /* PULL, LOOKUP, READ_STATE: the reply, rows landing in it */
	size_t frame_len;
} routed;

bool handle_is_routed(uint16_t op)
{
	switch (op) {
	case PROTO_OP_PREFETCH:
	case PROTO_OP_PULL:
	case PROTO_OP_PULL_WEIGHTED:
	case PROTO_OP_PUSH:
	case PROTO_OP_PUSH_WEIGHTED:
	case PROTO_OP_PUSH_UPDATE:
	case PROTO_OP_UPDATE:
	case PROTO_OP_LOOKUP:
	case PROTO_OP_READ_STATE:
	case PROTO_OP_TABLE_CREATE:
	case PROTO_OP_TABLE_DROP:
	case PROTO_OP_TABLE_RESERVE:
	case PROTO_OP_TABLE_ALTER:
	case PROTO_OP_TABLE_SCAN:
	case PROTO_OP_TABLE_LOAD:
	case PROTO_OP_TABLE_DESCRIBE:
	case PROTO_OP_STATS:
	case PROTO_OP_INFO:
	case PROTO_OP_LINKTEST:
		return true;
	default:
		return false; /* TICKET_FREE is local: the ticket table's free frees the owners' parts */
	}
}

void handle_cluster_ticket_free(void *cl, void *t)
{
	cluster_ticket_free(cl, t);
}

static void routed_free(routed *a)
{
	obuf_detached_free(a->frame);
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
	case PROTO_OP_PULL:
	case PROTO_OP_PULL_WEIGHTED:
	case PROTO_OP_LOOKUP:
	case PROTO_OP_READ_STATE: /* complete in its own block: no copy */
		obuf_adopt(&c->out, a->frame, a->frame_len);
		a->frame = NULL;
		return EMDB_OK;
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
	case PROTO_OP_TABLE_SCAN: {
		proto_table_scan_resp m = { .next_cursor = r->next_cursor, .step = r->step, .n = (uint32_t)r->rows,
					    .dim = r->dim, .per_row = a->width, .ids = r->ids_out, .vecs = r->out,
					    .state = a->width ? r->state : NULL };
		return HANDLE_REPLY(c, a->req_id, proto_table_scan_resp_encode, &m);
	}
	case PROTO_OP_TABLE_DESCRIBE: {
		proto_table_describe_resp m;
		int rc = emdb_table_describe(c->srv->db, r->table, &m.info);
		if (rc == EMDB_OK)
			rc = cluster_stats_total(a->cl, r->per_node, &m.info.stats, NULL);
		return rc ? rc : HANDLE_REPLY(c, a->req_id, proto_table_describe_resp_encode, &m);
	}
	case PROTO_OP_STATS: {
		proto_stats_resp m;
		uint64_t alloc = 0;
		int rc = emdb_db_get_stats(c->srv->db, &m.stats);
		if (rc == EMDB_OK)
			rc = cluster_stats_total(a->cl, r->per_node, &m.stats.total, &alloc);
		if (rc)
			return rc;
		m.stats.alloc_bytes = alloc;
		m.stats.alloc_peak = 0; /* a peak per node: INFO memory has this node's */
		return HANDLE_REPLY(c, a->req_id, proto_stats_resp_encode, &m);
	}
	case PROTO_OP_INFO: {
		char *text = NULL;
		size_t len = 0;
		int rc = info_build(c->srv, a->section, r->per_node, &text, &len);
		if (rc)
			return rc;
		proto_info_resp m = { .text = { text, (uint32_t)len } };
		rc = HANDLE_REPLY(c, a->req_id, proto_info_resp_encode, &m);
		emdb_free(text);
		return rc;
	}
	case PROTO_OP_LINKTEST: {
		proto_linktest_resp m = { .rounds = r->rounds, .elapsed_ns = r->elapsed_ns, .bytes_sent = r->bytes_sent,
					  .bytes_received = r->bytes_received };
		return HANDLE_REPLY(c, a->req_id, proto_linktest_resp_encode, &m);
	}
	default: { /* PUSH, PUSH_WEIGHTED, TABLE_DROP, TABLE_RESERVE, TABLE_ALTER: empty */
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

static const float no_weights[1]; /* a weighted request's, when it has none */
static float no_rows[1]; /* the rows of a reply with none (READ_STATE of SGD) */
static const uint64_t no_ids[1]; /* a request's IDs, when it has none */

/* With a ticket, a weighted request's weights are one per ID of the
 * ticket (the decoder checked them against the IDs otherwise). */
static int check_weights(const cluster_ticket *tk, const float *weights, uint32_t n_weights)
{
	if (tk && weights && n_weights != cluster_ticket_count(tk))
		return handle_fail(EMDB_ERR_BATCH, "%u weights for a ticket of %zu IDs", n_weights,
				   cluster_ticket_count(tk));
	return EMDB_OK;
}

/* The reply's size against max_frame (invariant 3). */
static int check_rows(conn *c, uint64_t n_rows, uint32_t width, bool found)
{
	uint64_t bytes = PROTO_HDR_SIZE + 16 + n_rows * width * 4 + (found ? n_rows + 8 : 0);
	return handle_check_reply(c, bytes);
}

/* The reply of a PULL, LOOKUP or READ_STATE laid out (everything but
 * the rows and found flags) into buf[cap], as its proto_*_resp_begin
 * does; same return convention. */
static int layout(const routed *a, uint8_t *buf, size_t cap, float **vecs, uint8_t **found, size_t *len)
{
	switch (a->op) {
	case PROTO_OP_PULL:
		return proto_pull_resp_begin(buf, cap, a->req_id, a->n_rows, a->width, vecs, len);
	case PROTO_OP_PULL_WEIGHTED:
		return proto_pull_weighted_resp_begin(buf, cap, a->req_id, a->n_rows, a->width, vecs, len);
	case PROTO_OP_LOOKUP:
		return proto_lookup_resp_begin(buf, cap, a->req_id, a->n_rows, a->width, a->want_found, vecs, found,
					       len);
	default:
		return proto_read_state_resp_begin(buf, cap, a->req_id, a->n_rows, a->width, vecs, found, len);
	}
}

/* The reply frame made at submit, in a block of its own
 * (obuf_detached_new): the cluster layer writes the rows (and found
 * flags) straight into it as the parts come in, and the completion
 * appends it to the connection's output as it is (obuf_adopt), where
 * assembling the rows elsewhere and encoding them into the output would
 * copy them once more. */
static int reply_frame(routed *a)
{
	cluster_req *r = &a->r;
	float *vecs = NULL;
	uint8_t *found = NULL;
	size_t len = 0;
	int rc = layout(a, NULL, 0, &vecs, &found, &len);
	if (rc != EMDB_ERR_LIMIT)
		return handle_fail(rc ? rc : EMDB_ERR_INTERNAL, "laying out a reply of %u rows", a->n_rows);
	if (!(a->frame = obuf_detached_new(len)))
		return handle_fail(EMDB_ERR_NOMEM, "no memory for a reply of %zu bytes", len);
	if ((rc = layout(a, a->frame, len, &vecs, &found, &a->frame_len)))
		return handle_fail(rc, "laying out a reply of %u rows", a->n_rows);
	r->out = vecs ? vecs : no_rows;
	r->found = a->want_found ? found : NULL;
	return EMDB_OK;
}

/* TABLE_SCAN: one page of the cluster's cursor; the page's reply checked
 * against max_frame first, as on one node (net/handle_scan.c). */
static int scan_begin(conn *c, const proto_table_scan_req *q, routed *a, size_t *bytes)
{
	cluster_req *r = &a->r;
	emdb_table_config cfg;
	int rc = emdb_table_get_config(c->srv->db, q->table, &cfg);
	if (rc)
		return rc;
	uint32_t sf = (q->flags & PROTO_SCAN_STATE) ? emdb_optimizer_state_floats(cfg.optimizer.kind, cfg.dim) : 0;
	uint64_t row_bytes = 8 + 4ull * q->dim + 4ull * sf;
	if (q->max_rows && handle_check_reply(c, PROTO_HDR_SIZE + 32 + (size_t)q->max_rows * row_bytes + 16))
		return handle_fail(EMDB_ERR_LIMIT,
				   "a page of %u rows of %llu bytes would pass the largest frame: ask for fewer rows per page",
				   q->max_rows, (unsigned long long)row_bytes);
	*r = (cluster_req){ .op = CLUSTER_SCAN, .table = q->table, .dim = q->dim, .cursor = q->cursor,
			    .max_rows = q->max_rows, .done = routed_finished, .arg = a };
	a->width = sf;
	size_t cap = q->max_rows ? q->max_rows : 1;
	*bytes = cap * (size_t)row_bytes + 32;
	if (!(a->mem = emdb_malloc(*bytes)))
		return EMDB_OK; /* NOMEM, said by the caller */
	uint8_t *at = a->mem;
	r->ids_out = take(&at, NULL, cap * 8);
	r->out = take(&at, NULL, cap * (size_t)q->dim * 4);
	r->state = sf ? take(&at, NULL, cap * (size_t)sf * 4) : NULL;
	return EMDB_OK;
}

/* TABLE_LOAD: the rows copied (the input buffer is reused), per_row
 * checked against the table's state width (DIM), as on one node. */
static int load_begin(conn *c, const proto_table_load_req *q, routed *a, size_t *bytes)
{
	cluster_req *r = &a->r;
	emdb_table_config cfg;
	int rc = emdb_table_get_config(c->srv->db, q->table, &cfg);
	if (rc)
		return rc;
	uint32_t sf = emdb_optimizer_state_floats(cfg.optimizer.kind, cfg.dim);
	if (q->dim != cfg.dim)
		return handle_fail(EMDB_ERR_DIM, "table '%s': dim %u given, table has %u", cfg.name, q->dim, cfg.dim);
	if (q->per_row && q->per_row != sf)
		return handle_fail(EMDB_ERR_DIM, "table %u keeps %u state floats per row, not %u", q->table, sf,
				   q->per_row);
	*r = (cluster_req){ .op = CLUSTER_LOAD, .table = q->table, .dim = q->dim, .n = q->n, .done = routed_finished,
			    .arg = a };
	*bytes = (size_t)q->n * (8 + 4 * (size_t)q->dim + 4 * (size_t)q->per_row) + 32;
	if (!(a->mem = emdb_malloc(*bytes)))
		return EMDB_OK;
	uint8_t *at = a->mem;
	r->ids = take(&at, q->ids ? q->ids : (const uint64_t[]){ 0 }, (size_t)q->n * 8);
	r->vecs = take(&at, q->vecs ? q->vecs : (const float[]){ 0 }, (size_t)q->n * q->dim * 4);
	r->state = q->per_row ? take(&at, q->state ? q->state : (const float[]){ 0 }, (size_t)q->n * q->per_row * 4)
			      : NULL;
	return EMDB_OK;
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
		r->ids = m.prefetch_req.ids ? m.prefetch_req.ids : no_ids; /* read in submit only */
		break;
	}
	case PROTO_OP_PULL:
	case PROTO_OP_PULL_WEIGHTED:
	case PROTO_OP_LOOKUP:
	case PROTO_OP_READ_STATE: {
		const uint64_t *ids = NULL, *offsets = NULL;
		const float *weights = NULL;
		uint32_t table, n_ids = 0, n_bags = 0, n_weights = 0;
		if (h->opcode == PROTO_OP_PULL || h->opcode == PROTO_OP_PULL_WEIGHTED) {
			proto_pull_req *q = h->opcode == PROTO_OP_PULL ? &m.pull_req : &m.pull_weighted_req.pull;
			if (h->opcode == PROTO_OP_PULL_WEIGHTED) {
				n_weights = m.pull_weighted_req.n_weights;
				weights = m.pull_weighted_req.weights ? m.pull_weighted_req.weights : no_weights;
			}
			if (q->ticket && (rc = ticket_of(c, q->ticket, &tk)))
				break;
			if ((rc = check_weights(tk, weights, n_weights)))
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
		/* the IDs are read in cluster_submit only; offsets and weights
		 * when the pooled rows are assembled, so they are copied */
		in = (n_bags ? ((size_t)n_bags + 1) * 8 : 0) + (size_t)n_weights * 4;
		if (in && !(a->mem = emdb_malloc(in + 16)))
			break;
		uint8_t *at = a->mem;
		r->ids = tk ? NULL : ids ? ids : no_ids;
		r->offsets = n_bags ? take(&at, offsets, ((size_t)n_bags + 1) * 8) : NULL;
		r->weights = weights ? take(&at, weights, (size_t)n_weights * 4) : NULL;
		rc = reply_frame(a);
		break;
	}
	case PROTO_OP_PUSH:
	case PROTO_OP_PUSH_WEIGHTED:
	case PROTO_OP_PUSH_UPDATE: {
		proto_push_req *q = h->opcode == PROTO_OP_PUSH_WEIGHTED ? &m.push_weighted_req.push : &m.push_req;
		const float *weights = NULL;
		uint32_t n_weights = 0;
		if (h->opcode == PROTO_OP_PUSH_WEIGHTED) {
			n_weights = m.push_weighted_req.n_weights;
			weights = m.push_weighted_req.weights ? m.push_weighted_req.weights : no_weights;
		}
		if (q->ticket && (rc = ticket_of(c, q->ticket, &tk)))
			break;
		if ((rc = check_weights(tk, weights, n_weights)))
			break;
		if (tk && !q->n_bags && q->n_rows != cluster_ticket_count(tk)) {
			rc = handle_fail(EMDB_ERR_BATCH, "%u gradient rows for a ticket of %zu IDs", q->n_rows,
					 cluster_ticket_count(tk));
			break;
		}
		*r = (cluster_req){ .op = h->opcode == PROTO_OP_PUSH_UPDATE ? CLUSTER_PUSH_UPDATE : CLUSTER_PUSH,
				    .table = q->table, .dim = q->dim, .ticket = tk, .n = q->n_ids, .n_bags = q->n_bags,
				    .pool = (emdb_pool)q->pool, .done = routed_finished, .arg = a,
				    .ranked = h->opcode != PROTO_OP_PUSH_UPDATE && c->worker_rank != EMDB_WORKER_NONE,
				    .rank = c->worker_rank };
		/* cluster_submit reads every input of a push before it returns
		 * (cluster.h "Ownership"): no copy of the gradients */
		r->ids = tk ? NULL : q->ids ? q->ids : no_ids;
		r->offsets = q->n_bags ? q->offsets : NULL;
		r->weights = weights;
		r->grads = q->grads ? q->grads : no_weights;
		break;
	}
	case PROTO_OP_UPDATE: {
		proto_update_req *q = &m.update_req;
		uint64_t timeout = atomic_load(&s->rt.update_barrier_timeout_ms);
		*r = (cluster_req){ .op = q->workers >= 2 ? CLUSTER_STEP : CLUSTER_UPDATE, .table = q->table,
				    .workers = q->workers, .worker = c->id, .seq = q->seq, .session = q->session,
				    .rank = q->seq ? c->worker_rank : 0,
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
	case PROTO_OP_TABLE_ALTER:
		a->opt = m.table_alter_req.opt;
		*r = (cluster_req){ .op = CLUSTER_TABLE_ALTER, .table = m.table_alter_req.table, .opt = &a->opt,
				    .done = routed_finished, .arg = a };
		break;
	case PROTO_OP_TABLE_SCAN:
		rc = scan_begin(c, &m.table_scan_req, a, &out);
		break;
	case PROTO_OP_TABLE_LOAD:
		rc = load_begin(c, &m.table_load_req, a, &in);
		break;
	case PROTO_OP_TABLE_DESCRIBE:
	case PROTO_OP_STATS:
	case PROTO_OP_INFO: {
		uint32_t table = 0;
		if (h->opcode == PROTO_OP_TABLE_DESCRIBE) {
			table = m.table_describe_req.table;
			if (!table && (rc = emdb_table_find(s->db, m.table_describe_req.name, &table)))
				break;
		} else if (h->opcode == PROTO_OP_INFO) {
			if ((rc = handle_cstr(m.info_req.section, a->section, sizeof(a->section), "INFO section")))
				break;
			if (a->section[0] && strcasecmp(a->section, "all") && strcasecmp(a->section, "default") &&
			    strcasecmp(a->section, "cluster")) {
				routed_free(a);
				return handle_info(c, h, body); /* nothing of the other nodes in it */
			}
		}
		*r = (cluster_req){ .op = CLUSTER_TABLE_STATS, .table = table, .done = routed_finished, .arg = a };
		out = cluster_nodes(s->cluster) * sizeof(cluster_node_stats);
		if ((a->mem = emdb_malloc(out)))
			r->per_node = (cluster_node_stats *)a->mem;
		break;
	}
	case PROTO_OP_LINKTEST: { /* the messages are read in cluster_submit only */
		const proto_linktest_req *q = &m.linktest_req;
		*r = (cluster_req){ .op = CLUSTER_LINKTEST, .n = q->n, .depth = q->depth,
				    .duration_ns = (uint64_t)q->duration_ms * 1000000ull, .done = routed_finished,
				    .arg = a };
		/* more than LINKTEST_MAX is refused before a message is read:
		 * copy no more than that */
		uint32_t n = q->n < LINKTEST_MAX ? q->n : LINKTEST_MAX;
		in = ((size_t)n + 1) * sizeof(cluster_linktest_msg);
		if (!(a->mem = emdb_malloc(in)))
			break;
		cluster_linktest_msg *lm = (cluster_linktest_msg *)a->mem;
		for (uint32_t i = 0; i < n; i++)
			lm[i] = (cluster_linktest_msg){ .rank = q->msgs[i].rank, .req_bytes = q->msgs[i].request_bytes,
							.rep_bytes = q->msgs[i].reply_bytes };
		r->msgs = lm;
		break;
	}
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

/* LINKTEST on a server alone: there is no link to test. */
int handle_linktest(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_linktest_req q;
	int rc = proto_linktest_req_decode(h, body, &q);
	if (rc)
		return rc;
	return handle_fail(EMDB_ERR_UNSUPPORTED,
			   "LINKTEST: this server is not part of a cluster; it measures the links between cluster nodes");
}
