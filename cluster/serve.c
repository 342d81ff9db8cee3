/*
 * cluster/serve.c - the owner's side: a peer's node-to-node request run on
 * this node's engine and answered (cluster_serve, the link's serve hook).
 *
 * Invariants:
 *   1. A frame is decoded and checked whole (proto_node_decode: layout,
 *      counts, flags), then its epoch against this node's partition map,
 *      before anything runs: a malformed frame, a response where a request
 *      belongs, a frame of another epoch, is answered with an error and
 *      changes nothing.  The engine refuses an unknown table or dim, a
 *      ticket count that does not match, with its own error, as it does
 *      for clients, and changes nothing either.
 *   2. Each opcode has its handler serve_<name>, found through its row of
 *      PROTO_NODE_OP_MAP; a new opcode is a row, its codec and a handler.
 *   3. Every request gets exactly one reply() (the link frees the
 *      responder in it).  Replies that carry rows are laid out first and
 *      the engine writes the floats straight into the frame.
 *   4. An owner ticket is used and freed only by the peer it was made for
 *      (otickets.c).
 *
 * Runs on the link's thread, or, with a pool of serve threads (strand.c),
 * the data-plane handlers (strand.c's serve_on_pool: engine and owner
 * tickets only) on a pool thread, a peer's requests one at a time in
 * arrival order; steps and table changes, which wait on other nodes,
 * answer later from their own callbacks (steps.c, admin.c).
 *
 * State changes: the engine (rows, gradients, steps), the owner tickets.
 */
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/error_int.h"
#include "cluster/cluster_int.h"
#include "db/db_cluster.h"

typedef void (*serve_fn)(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r);

/* Encode reply rep; on error answer with it instead.  Returns the frame
 * (to be filled and sent with send_reply) or NULL when answered. */
static uint8_t *reply_begin(cluster *cl, cluster_responder *r, const proto_node_msg *req,
			    const proto_node_msg *rep, size_t *len, proto_node_where *at)
{
	uint8_t *buf;
	int rc = cluster__encode(rep, &buf, len, at);
	if (rc) {
		cluster__reply(cl, r, req->hdr.opcode, req->hdr.table, NULL, 0, rc);
		return NULL;
	}
	return buf;
}

/* Send buf (rc OK) or an error reply of rc (buf freed). */
static void reply_end(cluster *cl, cluster_responder *r, const proto_node_msg *req, uint8_t *buf, size_t len,
		      int rc)
{
	if (rc) {
		emdb_free(buf);
		buf = NULL;
	}
	cluster__reply(cl, r, req->hdr.opcode, req->hdr.table, buf, len, rc);
}

/* An empty or ROWS reply, or the engine's error. */
static void reply_simple(cluster *cl, cluster_responder *r, const proto_node_msg *req, int rc, uint64_t rows)
{
	cluster__reply_rows(cl, r, req->hdr.opcode, req->hdr.table, rc, rows, NULL);
}

/* A decoder gives NULL for an empty array; the engine takes NULL for a
 * caller bug (INVALID) where an empty batch deserves BATCH. */
static const uint64_t no_ids[1];
static const float no_floats[1];
#define OR_EMPTY(p, empty) ((p) ? (p) : (empty))

/* ---- engine calls on an owner ticket (run under the tickets' lock) ---- */

typedef struct on_ticket {
	emdb_db *db;
	uint32_t table, dim, n;
	float *out;
	const proto_node_grads *g;
	uint64_t rows;
	uint32_t rank;  /* push_on: the pushing worker, or EMDB_WORKER_NONE */
} on_ticket;

static int count_ok(const emdb_ticket *t, uint32_t n)
{
	if (emdb_ticket_count(t) != n)
		return emdb__seterr(EMDB_ERR_BATCH, "%u positions for an owner ticket of %zu IDs", n,
				    emdb_ticket_count(t));
	return EMDB_OK;
}

static int pull_on(const emdb_ticket *t, void *arg)
{
	on_ticket *a = arg;
	int rc = count_ok(t, a->n);
	return rc ? rc : emdb_pull_ticket(a->db, a->table, t, a->dim, a->out);
}

/* What a GRADS body gives emdb__push_mapped_as: row_of NULL when plain;
 * with MAPPED a scale per row, or with WEIGHTED too a weight per
 * position. */
static const uint32_t *node_row_of(const proto_node_grads *g)
{
	return g->flags & PROTO_NODE_GRADS_MAPPED ? OR_EMPTY(g->row_of, (const uint32_t *)no_ids) : NULL;
}

static const float *node_scale(const proto_node_grads *g)
{
	return g->flags & PROTO_NODE_GRADS_WEIGHTED ? NULL : OR_EMPTY(g->scale, no_floats);
}

static const float *node_weights(const proto_node_grads *g)
{
	return g->flags & PROTO_NODE_GRADS_WEIGHTED ? OR_EMPTY(g->scale, no_floats) : NULL;
}

static int push_on(const emdb_ticket *t, void *arg)
{
	on_ticket *a = arg;
	const proto_node_grads *g = a->g;
	int rc = count_ok(t, g->n);
	if (rc)
		return rc;
	return emdb__push_mapped_as(a->db, a->table, a->rank, NULL, g->n, t, node_row_of(g), node_scale(g),
				    node_weights(g), g->n_rows, g->dim, g->grads);
}

static int push_update_on(const emdb_ticket *t, void *arg)
{
	on_ticket *a = arg;
	int rc = count_ok(t, a->g->n);
	return rc ? rc : emdb_push_update_ticket(a->db, a->table, t, a->g->dim, a->g->grads, &a->rows);
}

/* ---- handlers (invariant 2) ------------------------------------------ */

static void serve_prefetch(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	emdb_ticket *t;
	proto_node_msg rep = { .hdr = cluster__hdr(cl, m->hdr.opcode, m->hdr.table, true) };
	int rc = emdb_prefetch(cl->db, m->hdr.table, OR_EMPTY(m->u.sel.ids, no_ids), m->u.sel.n, &t);
	if (rc == EMDB_OK) {
		rep.u.ticket.count = (uint32_t)emdb_ticket_count(t);
		if ((rc = otickets_add(&cl->tickets, from, t, &rep.u.ticket.handle)))
			emdb_ticket_free(t);
	}
	size_t len = 0;
	uint8_t *buf = NULL;
	if (rc == EMDB_OK && !(buf = reply_begin(cl, r, m, &rep, &len, NULL))) {
		otickets_free(&cl->tickets, from, rep.u.ticket.handle);
		return;
	}
	reply_end(cl, r, m, buf, len, rc);
}

static void serve_pull(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	const proto_node_sel *s = &m->u.sel;
	proto_node_msg rep = { .hdr = cluster__hdr(cl, m->hdr.opcode, m->hdr.table, true) };
	rep.u.vecs = (proto_node_vecs){ .n = s->n, .width = s->dim };
	proto_node_where at;
	size_t len;
	uint8_t *buf = reply_begin(cl, r, m, &rep, &len, &at);
	if (!buf)
		return;
	float *out = at.floats ? at.floats : (float *)no_floats;
	int rc;
	if (s->ticket) {
		on_ticket a = { .db = cl->db, .table = m->hdr.table, .dim = s->dim, .n = s->n, .out = out };
		rc = otickets_use(&cl->tickets, from, s->ticket, pull_on, &a);
	} else {
		rc = emdb_pull(cl->db, m->hdr.table, OR_EMPTY(s->ids, no_ids), s->n, s->dim, out);
	}
	reply_end(cl, r, m, buf, len, rc);
}

/* PUSH and PUSH_RANKED (the pushing worker's rank: db/gradrank.h). */
static void serve_push(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	const proto_node_grads *g = &m->u.grads;
	const float *grads = OR_EMPTY(g->grads, no_floats);
	const uint64_t *ids = OR_EMPTY(g->ids, no_ids);
	uint32_t rank = m->hdr.opcode == PROTO_NODE_PUSH_RANKED ? g->rank : EMDB_WORKER_NONE;
	int rc;
	if (g->ticket) {
		on_ticket a = { .db = cl->db, .table = m->hdr.table, .g = g, .rank = rank };
		rc = otickets_use(&cl->tickets, from, g->ticket, push_on, &a);
	} else {
		rc = emdb__push_mapped_as(cl->db, m->hdr.table, rank, ids, g->n, NULL, node_row_of(g), node_scale(g),
					  node_weights(g), g->n_rows, g->dim, grads);
	}
	reply_simple(cl, r, m, rc, 0);
}

#define serve_push_ranked serve_push

static void serve_push_update(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	const proto_node_grads *g = &m->u.grads;
	uint64_t rows = 0;
	int rc;
	if (g->ticket) {
		on_ticket a = { .db = cl->db, .table = m->hdr.table, .g = g };
		rc = otickets_use(&cl->tickets, from, g->ticket, push_update_on, &a);
		rows = a.rows;
	} else if (!g->n) { /* none of the batch is ours: the step still advances here */
		rc = emdb_update(cl->db, m->hdr.table, &rows);
	} else {
		rc = emdb_push_update(cl->db, m->hdr.table, OR_EMPTY(g->ids, no_ids), g->n, g->dim,
				      OR_EMPTY(g->grads, no_floats), &rows);
	}
	reply_simple(cl, r, m, rc, rows);
}

static void serve_update(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	uint64_t rows = 0;
	int rc = m->hdr.table ? emdb_update(cl->db, m->hdr.table, &rows) : emdb_update_all(cl->db, &rows);
	reply_simple(cl, r, m, rc, rows);
}

static void serve_lookup(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	const proto_node_sel *s = &m->u.sel;
	bool want = s->flags & PROTO_NODE_SEL_FOUND;
	proto_node_msg rep = { .hdr = cluster__hdr(cl, m->hdr.opcode, m->hdr.table, true) };
	rep.u.vecs = (proto_node_vecs){ .n = s->n, .width = s->dim, .flags = want ? PROTO_NODE_VECS_FOUND : 0 };
	proto_node_where at;
	size_t len;
	uint8_t *buf = reply_begin(cl, r, m, &rep, &len, &at);
	if (!buf)
		return;
	uint8_t scratch[1];
	int rc = emdb_lookup(cl->db, m->hdr.table, OR_EMPTY(s->ids, no_ids), s->n, s->dim,
			     at.floats ? at.floats : (float *)no_floats, want ? (at.found ? at.found : scratch) : NULL);
	reply_end(cl, r, m, buf, len, rc);
}

static void serve_read_state(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	const proto_node_sel *s = &m->u.sel;
	emdb_table_config cfg;
	int rc = emdb_table_get_config(cl->db, m->hdr.table, &cfg);
	if (rc) {
		reply_simple(cl, r, m, rc, 0);
		return;
	}
	proto_node_msg rep = { .hdr = cluster__hdr(cl, m->hdr.opcode, m->hdr.table, true) };
	rep.u.vecs = (proto_node_vecs){ .n = s->n, .width = emdb_optimizer_state_floats(cfg.optimizer.kind, cfg.dim),
					.flags = PROTO_NODE_VECS_FOUND };
	proto_node_where at;
	size_t len;
	uint8_t *buf = reply_begin(cl, r, m, &rep, &len, &at);
	if (!buf)
		return;
	float one[1];
	uint8_t f1[1];
	rc = emdb_read_state(cl->db, m->hdr.table, OR_EMPTY(s->ids, no_ids), s->n, at.floats ? at.floats : one,
			     at.found ? at.found : f1);
	reply_end(cl, r, m, buf, len, rc);
}

static void serve_ticket_free(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	reply_simple(cl, r, m, otickets_free(&cl->tickets, from, m->u.sel.ticket), 0);
}

static void serve_step_arrive(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	steps_serve(cl, from, m, r);
}

static void serve_step_leave(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	steps_serve(cl, from, m, r);
}

#define serve_step_arrive_seq serve_step_arrive

static void serve_table_admin(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	admin_serve(cl, from, m, r);
}

static void serve_scan(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	scan_serve(cl, from, m, r);
}

static void serve_load(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	const proto_node_load *l = &m->u.load;
	emdb_table_config cfg;
	int rc = emdb_table_get_config(cl->db, m->hdr.table, &cfg);
	if (rc == EMDB_OK && l->per_row && l->per_row != emdb_optimizer_state_floats(cfg.optimizer.kind, cfg.dim))
		rc = emdb__seterr(EMDB_ERR_DIM, "table %u keeps %u state floats per row, not %u", m->hdr.table,
				  emdb_optimizer_state_floats(cfg.optimizer.kind, cfg.dim), l->per_row);
	if (rc == EMDB_OK)
		rc = emdb_table_load(cl->db, m->hdr.table, l->ids, l->n, l->dim, l->vecs,
				     l->per_row ? OR_EMPTY(l->state, no_floats) : NULL);
	reply_simple(cl, r, m, rc, 0);
}

static void serve_table_stats(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	stats_serve(cl, from, m, r);
}

static void serve_ckpt_ask(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	ckpt_serve(cl, from, m, r);
}

/* A linktest's message: answered by linktest.c, which owns ECHO. */
static void serve_echo(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	linktest_echo(cl, r, m);
}

#define serve_ckpt_hold serve_ckpt_ask
#define serve_ckpt_write serve_ckpt_ask
#define serve_ckpt_end serve_ckpt_ask
#define serve_ckpt_restore serve_ckpt_ask
#define serve_ckpt_load serve_ckpt_ask
#define serve_ckpt_swap serve_ckpt_ask
#define serve_table_prepare serve_table_admin
#define serve_table_commit serve_table_admin
#define serve_table_abort serve_table_admin

static serve_fn handler_of(uint16_t op)
{
	switch (op) {
#define NODE_SERVE_(NAME, name, value, rq, rs) \
	case (value):                          \
		return serve_##name;
		PROTO_NODE_OP_MAP(NODE_SERVE_)
#undef NODE_SERVE_
	}
	return NULL;
}

void cluster_serve(void *ctx, uint32_t from, const uint8_t *frame, size_t len, cluster_responder *r)
{
	cluster *cl = ctx;
	if (from < cl->nodes) {
		atomic_fetch_add_explicit(&cl->count[from].msgs_from, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&cl->count[from].bytes_from, len, memory_order_relaxed);
		/* A linktest's ECHO changes nothing and keeps no order: it is
		 * answered at once, as without a pool (the link measured). */
		if (cl->pool && proto_node_peek_op(frame, len) != PROTO_NODE_ECHO) {
			serve_pool_take(cl, from, frame, len, r);
			return;
		}
	}
	cluster__serve_frame(cl, from, frame, len, r);
}

void cluster__serve_frame(cluster *cl, uint32_t from, const uint8_t *frame, size_t len, cluster_responder *r)
{
	proto_node_msg m;
	uint8_t *copy = NULL;
	int rc = cluster__decode(frame, len, &m, &copy);
	if (rc == EMDB_OK && (m.hdr.flags & PROTO_NODE_FLAG_RESPONSE))
		rc = emdb__seterr(EMDB_ERR_PROTOCOL, "node %u sent a %s response where a request belongs", from,
				  proto_node_op_name(m.hdr.opcode));
	else if (rc == EMDB_OK && m.hdr.epoch != cl->map.epoch)
		rc = emdb__seterr(EMDB_ERR_PROTOCOL, "node %u sent node %s at partition map epoch %llu, this node's is %llu",
				  from, proto_node_op_name(m.hdr.opcode), (unsigned long long)m.hdr.epoch,
				  (unsigned long long)cl->map.epoch);
	else if (rc == EMDB_OK && from >= cl->nodes)
		rc = emdb__seterr(EMDB_ERR_PROTOCOL, "a frame from rank %u of a %u-node cluster", from, cl->nodes);
	if (rc)
		cluster__reply(cl, r, m.hdr.opcode, m.hdr.table, NULL, 0, rc);
	else
		handler_of(m.hdr.opcode)(cl, from, &m, r);
	emdb_free(copy);
}
