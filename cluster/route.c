/*
 * cluster/route.c - the home node's side of a data-plane request
 * (cluster.h): split by owner, one message per remote owner in ring
 * order, the local part on the engine, the answers assembled in request
 * order, one completion.
 *
 * Invariants:
 *   1. A request is checked here as the engine would check it on one
 *      node (table, ticket, batch, dim, offsets) before any part leaves:
 *      a request refused on its face changes nothing anywhere.
 *   2. The split is stable: part[r].pos lists the request positions owned
 *      by rank r in ascending order, so each owner sees its IDs (and
 *      duplicates) in request order, which is what makes the sums of
 *      duplicate gradients, and so every float, those of one node
 *      (docs/cluster.md "Determinism").  A ticket keeps its split.
 *   3. Exactly one message per remote owner that has a part (every remote
 *      node for UPDATE and PUSH_UPDATE, whose step advances everywhere),
 *      sent for k = 1 .. N-1 to rank (r + k) mod N (HypeReca 5.4's ring),
 *      then the local part runs on the caller's thread.
 *   4. `pending` counts the parts not finished plus one held by
 *      route_submit until everything is sent, so the request ends exactly
 *      once, after its last part, on the thread that finished it.  The
 *      first failing part writes req->msg (a CAS on status picks it); the
 *      finisher reads it after the last decrement (acq_rel).
 *   5. Parts write disjoint positions of the caller's outputs.  The
 *      local part's rows go between the engine and the request's own
 *      buffers at its request positions (db/db_cluster.h's positional
 *      forms: no private copy to gather or scatter); a remote part's rows
 *      are scattered from its owner's reply frame.  Pooled
 *      PULL assembles the rows in request order first and pools here
 *      exactly as db/ops_pull.c pools (float32 sums in position order from
 *      zero, MEAN times 1/count): pooling at the owners would sum in
 *      another order.  Pooled PUSH sends each owner every bag it touches
 *      once, with the engine's scale for it, and the owner adds it with the
 *      same fused multiply-add as emdb_push_bags (emdb__push_mapped).
 *      With per-sample weights (PULL_WEIGHTED, PUSH_WEIGHTED: SUM only)
 *      the pooling here multiplies each row by its weight as db/ops_pull.c
 *      does, and the push sends each owner the bags it touches once with
 *      the weight of each of its positions (PROTO_NODE_GRADS_WEIGHTED),
 *      added as emdb_push_bags_weighted adds them
 *      (emdb__push_mapped_weighted).
 *
 *   6. LOAD (emdb_table_load across nodes) is split like any batch: each
 *      owner writes its rows in request order, so an ID given twice gets
 *      its last row, as on one node.
 *   7. UPDATE, PUSH_UPDATE and LOAD pass cluster/ckpt.c's gate first: while a
 *      cluster checkpoint holds Updates they wait there, and start here
 *      when it lets them go.
 *
 * State changes: the owners' engines (through their parts), the caller's
 * outputs, req's results.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/error_int.h"
#include "cluster/cluster_int.h"
#include "db/db_cluster.h"
#include "db/ops.h"

typedef struct route_op route_op;

typedef struct route_part {
	cluster_call call;
	route_op *op;
	uint32_t rank;
	uint32_t n;
	const uint32_t *pos;
} route_part;

struct route_op {
	cluster *cl;
	cluster_req *req;
	_Atomic uint32_t pending;
	_Atomic int status;
	_Atomic uint64_t rows;
	size_t n;            /* positions of the request */
	uint32_t width;      /* floats per output row: dim or state floats */
	float *assembled;    /* pooled PULL: [n][dim] in request order */
	uint32_t *bag_of;    /* pooled PULL/PUSH: [n] */
	uint32_t *pos;       /* an ID split's positions, which parts point into */
	cluster_ticket *tk;  /* PREFETCH: the ticket being built */
	route_part part[];   /* [nodes] */
};

/* The node opcode of a request's parts: PUSH_RANKED for a worker's push. */
static uint16_t node_op_of(const cluster_req *req)
{
	switch (req->op) {
	case CLUSTER_PREFETCH:
		return PROTO_NODE_PREFETCH;
	case CLUSTER_PULL:
		return PROTO_NODE_PULL;
	case CLUSTER_PUSH:
		return req->ranked ? PROTO_NODE_PUSH_RANKED : PROTO_NODE_PUSH;
	case CLUSTER_PUSH_UPDATE:
		return PROTO_NODE_PUSH_UPDATE;
	case CLUSTER_UPDATE:
		return PROTO_NODE_UPDATE;
	case CLUSTER_LOOKUP:
		return PROTO_NODE_LOOKUP;
	case CLUSTER_READ_STATE:
		return PROTO_NODE_READ_STATE;
	case CLUSTER_LOAD:
		return PROTO_NODE_LOAD;
	default:
		return 0;
	}
}

/* ---- checks (invariant 1) -------------------------------------------- */

static int check_req(cluster *cl, cluster_req *req, uint32_t *width)
{
	emdb_table_config cfg;
	int rc;
	cluster_op op = req->op;
	*width = 0;
	if (op == CLUSTER_UPDATE)
		return req->table ? emdb_table_get_config(cl->db, req->table, &cfg) : EMDB_OK;
	bool takes_ticket = op == CLUSTER_PULL || op == CLUSTER_PUSH || op == CLUSTER_PUSH_UPDATE;
	bool bags = req->offsets || req->n_bags;
	if ((!req->ids && !(takes_ticket && req->ticket)) || (req->ids && req->ticket))
		return emdb__seterr(EMDB_ERR_INVALID, "cluster: give IDs or a ticket");
	if ((op == CLUSTER_PULL || op == CLUSTER_LOOKUP || op == CLUSTER_READ_STATE) && !req->out)
		return emdb__seterr(EMDB_ERR_INVALID, "cluster: NULL output buffer");
	if ((op == CLUSTER_PUSH || op == CLUSTER_PUSH_UPDATE) && !req->grads)
		return emdb__seterr(EMDB_ERR_INVALID, "cluster: NULL gradient buffer");
	if (op == CLUSTER_LOAD && !req->vecs)
		return emdb__seterr(EMDB_ERR_INVALID, "cluster: NULL vectors to load");
	if (bags && op != CLUSTER_PULL && op != CLUSTER_PUSH)
		return emdb__seterr(EMDB_ERR_INVALID, "cluster: bags only in PULL and PUSH");
	if (req->weights && !bags)
		return emdb__seterr(EMDB_ERR_INVALID, "cluster: per-sample weights only with bags");
	if ((rc = emdb_table_get_config(cl->db, req->table, &cfg)))
		return rc;
	if (req->ticket && req->ticket->table != req->table)
		return emdb__seterr(EMDB_ERR_TICKET, "ticket of table %u used on table '%s' (id %u)",
				    req->ticket->table, cfg.name, req->table);
	size_t n = req->ticket ? req->ticket->n : req->n;
	if (n == 0 || n > cl->max_batch)
		return emdb__seterr(EMDB_ERR_BATCH, "table '%s': batch of %zu IDs, allowed 1..%u", cfg.name, n,
				    cl->max_batch);
	uint32_t dim = op == CLUSTER_PREFETCH || op == CLUSTER_READ_STATE ? cfg.dim : req->dim;
	if (dim != cfg.dim)
		return emdb__seterr(EMDB_ERR_DIM, "table '%s': dim %u given, table has %u", cfg.name, dim, cfg.dim);
	if (bags && (rc = ops_check_bags(req->offsets, req->n_bags, n, req->pool)))
		return rc;
	if (req->weights && (rc = ops_check_weights(req->weights, req->pool)))
		return rc;
	if (bags && n > UINT32_MAX)
		return emdb__seterr(EMDB_ERR_BATCH, "cluster: %zu IDs in bags", n);
	*width = op == CLUSTER_READ_STATE || op == CLUSTER_LOAD ? emdb_optimizer_state_floats(cfg.optimizer.kind, cfg.dim)
								: cfg.dim;
	if (op == CLUSTER_LOAD && !req->state)
		*width = 0;
	return EMDB_OK;
}

/* ---- ending ---------------------------------------------------------- */

/* Free what a prefetch built so far: local parts now, owners' by message. */
static void drop_ticket(cluster *cl, cluster_ticket *tk)
{
	cluster_ticket_free(cl, tk);
}

static void pool_assembled(route_op *op)
{
	cluster_req *req = op->req;
	uint32_t dim = req->dim;
	float *out = req->out;
	memset(out, 0, req->n_bags * dim * sizeof(float));
	size_t bag = 0;
	for (size_t i = 0; i < op->n; i++) {
		while (req->offsets[bag + 1] <= i)
			bag++;
		const float *r = op->assembled + i * dim;
		float *o = out + bag * dim;
		if (req->weights) { /* the engine's expression, for its bits */
			float w = req->weights[i];
			for (uint32_t c = 0; c < dim; c++)
				o[c] += w * r[c];
		} else {
			for (uint32_t c = 0; c < dim; c++)
				o[c] += r[c];
		}
	}
	if (req->pool != EMDB_POOL_MEAN)
		return;
	for (size_t k = 0; k < req->n_bags; k++) {
		uint64_t cnt = req->offsets[k + 1] - req->offsets[k];
		if (cnt > 1) {
			float inv = 1.0f / (float)cnt;
			float *o = out + k * dim;
			for (uint32_t c = 0; c < dim; c++)
				o[c] *= inv;
		}
	}
}

static void op_free(route_op *op)
{
	emdb_free(op->assembled);
	emdb_free(op->bag_of);
	emdb_free(op->pos);
	emdb_free(op);
}

static void op_finish(route_op *op)
{
	cluster_req *req = op->req;
	int status = atomic_load(&op->status);
	req->priv = NULL;
	if (status == EMDB_OK) {
		if (req->op == CLUSTER_PULL && op->assembled)
			pool_assembled(op);
		if (req->op == CLUSTER_PREFETCH) {
			req->ticket_out = op->tk;
			op->tk = NULL;
		}
	} else if (op->tk) {
		drop_ticket(op->cl, op->tk);
	}
	req->rows = atomic_load(&op->rows);
	req->status = status;
	if (status == EMDB_OK)
		req->msg[0] = 0;
	op_free(op);
	req->done(req);
}

static void part_end(route_op *op)
{
	if (atomic_fetch_sub_explicit(&op->pending, 1, memory_order_acq_rel) == 1)
		op_finish(op);
}

/* The first failure of the request names itself (invariant 4). */
static void part_fail(route_op *op, uint32_t rank, int status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void part_fail(route_op *op, uint32_t rank, int status, const char *fmt, ...)
{
	int expect = EMDB_OK;
	if (atomic_compare_exchange_strong(&op->status, &expect, status)) {
		char why[200];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, sizeof(why), fmt, ap);
		va_end(ap);
		if (rank == op->cl->rank)
			snprintf(op->req->msg, sizeof(op->req->msg), "%s", why);
		else
			snprintf(op->req->msg, sizeof(op->req->msg), "node %u: %s", rank, why);
	}
}

/* ---- gathering and scattering by position ---------------------------- */

static void gather_ids(uint64_t *dst, const uint64_t *ids, const uint32_t *pos, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		dst[k] = ids[pos[k]];
}

static void gather_rows(float *dst, const float *src, const uint32_t *pos, uint32_t n, uint32_t width)
{
	for (uint32_t k = 0; k < n; k++)
		memcpy(dst + (size_t)k * width, src + (size_t)pos[k] * width, width * sizeof(float));
}

static void scatter_rows(float *dst, const float *src, const uint32_t *pos, uint32_t n, uint32_t width)
{
	for (uint32_t k = 0; k < n; k++)
		memcpy(dst + (size_t)pos[k] * width, src + (size_t)k * width, width * sizeof(float));
}

static void scatter_bytes(uint8_t *dst, const uint8_t *src, const uint32_t *pos, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		dst[pos[k]] = src[k];
}

/* Pooled PUSH: the distinct bags of a part's positions (ascending, as
 * positions are), counted, or written: row_of[k] the part-local row of
 * position k's bag, scale[row] its engine scale (weighted: scale[k] the
 * weight of position k), grads its gradient. */
static uint32_t bag_rows(const route_op *op, const route_part *p)
{
	uint32_t rows = 0, last = UINT32_MAX;
	for (uint32_t k = 0; k < p->n; k++) {
		uint32_t b = op->bag_of[p->pos[k]];
		rows += b != last;
		last = b;
	}
	return rows;
}

static void bag_fill(const route_op *op, const route_part *p, uint32_t *row_of, float *scale, float *grads)
{
	const cluster_req *req = op->req;
	uint32_t row = UINT32_MAX, last = UINT32_MAX;
	for (uint32_t k = 0; k < p->n; k++) {
		uint32_t b = op->bag_of[p->pos[k]];
		if (b != last) {
			row++;
			last = b;
			uint64_t cnt = req->offsets[b + 1] - req->offsets[b];
			if (!req->weights)
				scale[row] = (req->pool == EMDB_POOL_MEAN && cnt > 1) ? 1.0f / (float)cnt : 1.0f;
			memcpy(grads + (size_t)row * req->dim, req->grads + (size_t)b * req->dim, req->dim * sizeof(float));
		}
		if (req->weights)
			scale[k] = req->weights[p->pos[k]];
		row_of[k] = row;
	}
}

/* ---- the local part ---------------------------------------------------- */

/* Scratch for the local part, one block: the part's IDs (none with a
 * ticket), pooled PUSH's row of each position and its scales, LOAD's
 * rows and state.  Rows to and from the request's buffers are not
 * copied: the engine's positional forms (db/db_cluster.h) read and
 * write them at the part's request positions (invariant 5). */
typedef struct local_buf {
	uint64_t *ids;
	uint32_t *row_of;
	float *scale;
	float *f;
} local_buf;

static int local_alloc(local_buf *b, uint32_t n_ids, uint32_t n_rowof, size_t n_scale, size_t n_floats)
{
	size_t bytes = (size_t)n_ids * 8 + (size_t)n_rowof * 4 + n_scale * 4 + n_floats * 4 + 32;
	uint8_t *m = emdb_malloc(bytes);
	memset(b, 0, sizeof(*b));
	if (!m)
		return emdb__seterr(EMDB_ERR_NOMEM, "cluster: %zu bytes of scratch for the local part", bytes);
	b->ids = (uint64_t *)m;
	b->f = (float *)(b->ids + n_ids);
	b->row_of = (uint32_t *)(b->f + n_floats);
	b->scale = (float *)(b->row_of + n_rowof);
	return EMDB_OK;
}

/* Pooled PUSH's local part reads the bags' gradients where the request
 * has them: position k takes bag row_of[k] of req->grads, times the
 * bag's engine scale (scale[bag], every bag) or its own weight (scale[k]),
 * the values bag_fill sends an owner, so the adds are the same. */
static void bag_map_local(const route_op *op, const route_part *p, uint32_t *row_of, float *scale)
{
	const cluster_req *req = op->req;
	for (uint32_t k = 0; k < p->n; k++) {
		row_of[k] = op->bag_of[p->pos[k]];
		if (req->weights)
			scale[k] = req->weights[p->pos[k]];
	}
	if (req->weights)
		return;
	for (size_t b = 0; b < req->n_bags; b++) {
		uint64_t cnt = req->offsets[b + 1] - req->offsets[b];
		scale[b] = (req->pool == EMDB_POOL_MEAN && cnt > 1) ? 1.0f / (float)cnt : 1.0f;
	}
}

static int run_local(route_op *op, route_part *p)
{
	cluster *cl = op->cl;
	cluster_req *req = op->req;
	emdb_db *db = cl->db;
	uint32_t n = p->n, dim = req->dim, w = op->width;
	const emdb_ticket *lt = req->ticket ? req->ticket->part[p->rank].local : NULL;
	bool bags = op->bag_of != NULL;
	bool push_bags = req->op == CLUSTER_PUSH && bags;
	local_buf b;
	int rc;

	if (req->op == CLUSTER_UPDATE) {
		uint64_t updated = 0;
		rc = req->table ? emdb_update(db, req->table, &updated) : emdb_update_all(db, &updated);
		atomic_fetch_add(&op->rows, updated);
		return rc;
	}
	size_t floats = req->op == CLUSTER_LOAD ? (size_t)n * (dim + w) : 0;
	size_t scales = push_bags ? (req->weights ? n : req->n_bags) : 0;
	if ((rc = local_alloc(&b, lt ? 0 : n, push_bags ? n : 0, scales, floats)))
		return rc;
	const uint64_t *ids = lt ? NULL : b.ids;
	if (!lt && req->ids)
		gather_ids(b.ids, req->ids, p->pos, n);
	uint64_t got_rows = 0;
	switch (req->op) {
	case CLUSTER_PREFETCH: {
		emdb_ticket *t;
		rc = emdb_prefetch(db, req->table, b.ids, n, &t);
		if (rc == EMDB_OK)
			op->tk->part[p->rank].local = t;
		break;
	}
	case CLUSTER_PULL:
		rc = emdb__pull_at(db, req->table, ids, n, lt, dim, p->pos, op->assembled ? op->assembled : req->out);
		break;
	case CLUSTER_PUSH:
		if (push_bags) {
			bag_map_local(op, p, b.row_of, b.scale);
			rc = emdb__push_mapped_as(db, req->table, req->ranked ? req->rank : EMDB_WORKER_NONE, ids, n,
						  lt, b.row_of, req->weights ? NULL : b.scale,
						  req->weights ? b.scale : NULL, req->n_bags, dim, req->grads);
		} else { /* row_of the positions, no scale: the plain adds */
			rc = emdb__push_mapped_as(db, req->table, req->ranked ? req->rank : EMDB_WORKER_NONE, ids, n,
						  lt, p->pos, NULL, NULL, op->n, dim, req->grads);
		}
		break;
	case CLUSTER_PUSH_UPDATE:
		if (!n)
			rc = emdb_update(db, req->table, &got_rows);
		else
			rc = emdb__push_update_at(db, req->table, ids, n, lt, dim, p->pos, req->grads, &got_rows);
		break;
	case CLUSTER_LOOKUP:
		rc = emdb__lookup_at(db, req->table, ids, n, dim, p->pos, req->out, req->found);
		break;
	case CLUSTER_READ_STATE:
		rc = emdb__read_state_at(db, req->table, ids, n, p->pos, req->out, req->found);
		break;
	case CLUSTER_LOAD:
		gather_rows(b.f, req->vecs, p->pos, n, dim);
		if (w)
			gather_rows(b.f + (size_t)n * dim, req->state, p->pos, n, w);
		rc = emdb_table_load(db, req->table, b.ids, n, dim, b.f, w ? b.f + (size_t)n * dim : NULL);
		break;
	default:
		rc = emdb__seterr(EMDB_ERR_INTERNAL, "cluster: op %d is not routed", (int)req->op);
	}
	atomic_fetch_add(&op->rows, got_rows);
	emdb_free(b.ids);
	return rc;
}

/* ---- remote parts ------------------------------------------------------ */

/* Does this part go out (or run) at all?  Parts without positions do
 * not, except for the ops that advance the step everywhere. */
static bool part_needed(const route_op *op, const route_part *p)
{
	return p->n || op->req->op == CLUSTER_UPDATE || op->req->op == CLUSTER_PUSH_UPDATE;
}

static int build_frame(route_op *op, route_part *p, uint8_t **buf, size_t *len)
{
	cluster *cl = op->cl;
	cluster_req *req = op->req;
	uint16_t nop = node_op_of(req);
	proto_node_msg m = { .hdr = cluster__hdr(cl, nop, req->table, false) };
	uint64_t handle = req->ticket ? req->ticket->part[p->rank].handle : 0;
	bool bags = op->bag_of != NULL;
	uint32_t rows = 0;
	switch (req->op) {
	case CLUSTER_PREFETCH:
	case CLUSTER_PULL:
	case CLUSTER_LOOKUP:
	case CLUSTER_READ_STATE:
		m.u.sel = (proto_node_sel){ .ticket = handle, .n = p->n };
		if (req->op == CLUSTER_PULL || req->op == CLUSTER_LOOKUP)
			m.u.sel.dim = req->dim;
		if (req->op == CLUSTER_LOOKUP && req->found)
			m.u.sel.flags = PROTO_NODE_SEL_FOUND;
		break;
	case CLUSTER_PUSH:
	case CLUSTER_PUSH_UPDATE:
		rows = req->op == CLUSTER_PUSH && bags ? bag_rows(op, p) : p->n;
		m.u.grads = (proto_node_grads){ .ticket = handle, .n = p->n, .dim = req->dim, .n_rows = rows,
						.flags = req->op == CLUSTER_PUSH && bags ? PROTO_NODE_GRADS_MAPPED : 0,
						.rank = nop == PROTO_NODE_PUSH_RANKED ? req->rank : 0 };
		if (req->op == CLUSTER_PUSH && bags && req->weights)
			m.u.grads.flags |= PROTO_NODE_GRADS_WEIGHTED;
		break;
	case CLUSTER_LOAD:
		m.u.load = (proto_node_load){ .n = p->n, .dim = req->dim, .per_row = op->width };
		break;
	default:
		break;
	}
	proto_node_where at;
	int rc = cluster__encode(&m, buf, len, &at);
	if (rc)
		return rc;
	if (at.ids)
		gather_ids(at.ids, req->ids, p->pos, p->n);
	if (m.u.grads.flags & PROTO_NODE_GRADS_MAPPED && req->op == CLUSTER_PUSH)
		bag_fill(op, p, at.row_of, at.scale, at.floats);
	else if ((req->op == CLUSTER_PUSH || req->op == CLUSTER_PUSH_UPDATE) && at.floats)
		gather_rows(at.floats, req->grads, p->pos, p->n, req->dim);
	if (req->op == CLUSTER_LOAD && at.floats)
		gather_rows(at.floats, req->vecs, p->pos, p->n, req->dim);
	if (req->op == CLUSTER_LOAD && at.state)
		gather_rows(at.state, req->state, p->pos, p->n, op->width);
	return EMDB_OK;
}

/* Apply an owner's answer to the request's outputs. */
static int apply_reply(route_op *op, route_part *p, const proto_node_msg *m)
{
	cluster_req *req = op->req;
	const proto_node_vecs *v = &m->u.vecs;
	switch (req->op) {
	case CLUSTER_PREFETCH:
		if (m->u.ticket.count != p->n)
			return emdb__seterr(EMDB_ERR_PROTOCOL, "its ticket has %u IDs, %u were sent", m->u.ticket.count, p->n);
		op->tk->part[p->rank].handle = m->u.ticket.handle;
		return EMDB_OK;
	case CLUSTER_PULL:
	case CLUSTER_LOOKUP:
	case CLUSTER_READ_STATE:
		if (v->n != p->n || v->width != op->width ||
		    (req->found && req->op != CLUSTER_PULL && !v->found))
			return emdb__seterr(EMDB_ERR_PROTOCOL, "answered %u rows of %u floats for %u rows of %u",
					    v->n, v->width, p->n, op->width);
		scatter_rows(op->assembled ? op->assembled : req->out, v->vecs, p->pos, p->n, op->width);
		if (req->found && v->found)
			scatter_bytes(req->found, v->found, p->pos, p->n);
		return EMDB_OK;
	case CLUSTER_PUSH_UPDATE:
	case CLUSTER_UPDATE:
		atomic_fetch_add(&op->rows, m->u.rows.rows);
		return EMDB_OK;
	default:
		return EMDB_OK;
	}
}

static void part_reply(cluster_call *call, int rc, const uint8_t *frame, size_t len)
{
	route_part *p = call->arg;
	route_op *op = p->op;
	cluster *cl = op->cl;
	if (rc < 0) {
		part_fail(op, p->rank, rc, "%s", emdb_last_error());
		part_end(op);
		return;
	}
	proto_node_msg m;
	uint8_t *copy = NULL;
	uint16_t want = node_op_of(op->req);
	rc = cluster__decode(frame, len, &m, &copy);
	if (rc == EMDB_OK && (m.hdr.opcode != want || !(m.hdr.flags & PROTO_NODE_FLAG_RESPONSE)))
		rc = emdb__seterr(EMDB_ERR_PROTOCOL, "answered node %s with a %s %s", proto_node_op_name(want),
				  proto_node_op_name(m.hdr.opcode),
				  m.hdr.flags & PROTO_NODE_FLAG_RESPONSE ? "response" : "request");
	if (rc == EMDB_OK && m.hdr.status < 0)
		part_fail(op, p->rank, m.hdr.status, "%.*s", (int)m.u.err.len, m.u.err.p ? m.u.err.p : "");
	else if (rc == EMDB_OK && m.hdr.epoch != cl->map.epoch)
		part_fail(op, p->rank, EMDB_ERR_PROTOCOL, "answered at partition map epoch %llu, this node's is %llu",
			  (unsigned long long)m.hdr.epoch, (unsigned long long)cl->map.epoch);
	else if (rc != EMDB_OK || (rc = apply_reply(op, p, &m)) != EMDB_OK)
		part_fail(op, p->rank, rc, "%s", emdb_last_error());
	emdb_free(copy);
	part_end(op);
}

static void send_part(route_op *op, route_part *p)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc = build_frame(op, p, &buf, &len);
	if (rc == EMDB_OK) {
		p->call.done = part_reply;
		p->call.arg = p;
		p->call.deadline_ns = 0;
		rc = cluster__call_owned(op->cl, p->rank, buf, len, &p->call);
	} else {
		emdb_free(buf);
	}
	if (rc) {
		part_fail(op, p->rank, rc, "%s", emdb_last_error());
		part_end(op);
	}
}

/* ---- submit ------------------------------------------------------------ */

/* Split ids by owner into pos[n] (invariant 2); parts point into it. */
static int split_ids(route_op *op, const uint64_t *ids, size_t n, uint32_t **pos_out)
{
	cluster *cl = op->cl;
	uint32_t *pos = emdb_malloc(n * sizeof(uint32_t) * 2);
	if (!pos)
		return emdb__seterr(EMDB_ERR_NOMEM, "cluster: splitting %zu IDs", n);
	uint32_t *owner = pos + n;
	for (uint32_t r = 0; r < cl->nodes; r++)
		op->part[r].n = 0;
	for (size_t i = 0; i < n; i++) {
		owner[i] = owner_of(&cl->map, ids[i]);
		op->part[owner[i]].n++;
	}
	uint32_t at = 0;
	uint32_t fill[cl->nodes];
	for (uint32_t r = 0; r < cl->nodes; r++) {
		op->part[r].pos = pos + at;
		fill[r] = at;
		at += op->part[r].n;
	}
	for (size_t i = 0; i < n; i++)
		pos[fill[owner[i]]++] = (uint32_t)i;
	*pos_out = pos;
	return EMDB_OK;
}

static cluster_ticket *ticket_new(cluster *cl, uint32_t table, const uint32_t *pos, route_op *op, size_t n)
{
	size_t head = sizeof(cluster_ticket) + cl->nodes * sizeof(struct ticket_part);
	cluster_ticket *tk = emdb_calloc(1, head + n * sizeof(uint32_t));
	if (!tk)
		return NULL;
	uint32_t *mine = (uint32_t *)((uint8_t *)tk + head);
	memcpy(mine, pos, n * sizeof(uint32_t));
	tk->table = table;
	tk->nodes = cl->nodes;
	tk->n = n;
	for (uint32_t r = 0; r < cl->nodes; r++) {
		tk->part[r].n = op->part[r].n;
		tk->part[r].pos = mine + (op->part[r].pos - pos);
		op->part[r].pos = tk->part[r].pos;
	}
	return tk;
}

static int route_start(cluster *cl, cluster_req *req);

int route_submit(cluster *cl, cluster_req *req)
{
	if (ckpt_gate_enter(cl, req)) /* a cluster checkpoint holds Updates */
		return EMDB_OK;
	int rc = route_start(cl, req);
	if (rc)
		ckpt_gate_cancel(cl, req);
	return rc;
}

static int route_start(cluster *cl, cluster_req *req)
{
	uint32_t width;
	int rc = check_req(cl, req, &width);
	if (rc) {
		cluster__set_msg(req, rc, NULL);
		return rc;
	}
	route_op *op = emdb_calloc(1, sizeof(*op) + cl->nodes * sizeof(route_part));
	if (!op)
		goto nomem;
	op->cl = cl;
	op->req = req;
	op->width = width;
	op->n = req->ticket ? req->ticket->n : req->n;
	uint32_t *pos = NULL; /* an ID split's, owned by op (or the ticket) */
	if (req->op == CLUSTER_UPDATE) {
		/* no positions: every node updates */
	} else if (req->ticket) {
		for (uint32_t r = 0; r < cl->nodes; r++) {
			op->part[r].n = req->ticket->part[r].n;
			op->part[r].pos = req->ticket->part[r].pos;
		}
	} else if ((rc = split_ids(op, req->ids, req->n, &pos))) {
		emdb_free(op);
		cluster__set_msg(req, rc, NULL);
		return rc;
	}
	if (req->op == CLUSTER_PREFETCH) {
		op->tk = ticket_new(cl, req->table, pos, op, req->n);
		emdb_free(pos);
		if (!op->tk)
			goto nomem_op;
	} else {
		op->pos = pos;
	}
	if (req->offsets) {
		op->bag_of = emdb_malloc(op->n * sizeof(uint32_t));
		if (!op->bag_of)
			goto nomem_op;
		for (size_t b = 0; b < req->n_bags; b++)
			for (uint64_t i = req->offsets[b]; i < req->offsets[b + 1]; i++)
				op->bag_of[i] = (uint32_t)b;
		if (req->op == CLUSTER_PULL && !(op->assembled = emdb_malloc(op->n * (size_t)req->dim * sizeof(float))))
			goto nomem_op;
	}
	req->priv = op;
	uint32_t needed = 0;
	for (uint32_t r = 0; r < cl->nodes; r++) {
		op->part[r].op = op;
		op->part[r].rank = r;
		needed += part_needed(op, &op->part[r]);
	}
	atomic_store(&op->pending, needed + 1);
	for (uint32_t k = 1; k < cl->nodes; k++) { /* invariant 3: the ring */
		route_part *p = &op->part[(cl->rank + k) % cl->nodes];
		if (part_needed(op, p))
			send_part(op, p);
	}
	route_part *self = &op->part[cl->rank];
	if (part_needed(op, self)) {
		if ((rc = run_local(op, self)))
			part_fail(op, cl->rank, rc, "%s", emdb_last_error());
		part_end(op);
	}
	part_end(op);
	return EMDB_OK;

nomem_op:
	if (op->tk)
		drop_ticket(cl, op->tk);
	op_free(op);
nomem:
	rc = emdb__seterr(EMDB_ERR_NOMEM, "cluster: no memory for a request of %zu IDs", req->n);
	cluster__set_msg(req, rc, NULL);
	return rc;
}
