/*
 * cluster/scan.c - TABLE_SCAN across nodes: one cursor over the rows of
 * every node (CLUSTER_SCAN), and the owner's side of a page (node SCAN).
 *
 * A cluster cursor names a node and a row number there
 * (CLUSTER_SCAN_NODE_SHIFT): the scan walks node 0's rows, then node
 * 1's, and so on, each page from one node, by that node's own
 * emdb_table_scan cursor.
 *
 * Invariants:
 *   1. Every row lives on exactly one node (its owner) and each node's
 *      cursor returns each of its rows exactly once (emdb_table_scan's
 *      promise), so the cluster's cursor returns every row the table
 *      holds for the whole scan exactly once, whatever runs between
 *      pages.
 *   2. A page comes from one node's engine in one call, so it is
 *      consistent at one step, which it reports (that node's step).
 *   3. When a node's rows are done the cursor moves to the next node's
 *      row 0; the scan is over (next_cursor 0) after the last node.  A
 *      page may be empty while the scan is not over (a node without rows
 *      of the table), as on one node.
 *   4. The request is checked here (table, dim, page size, outputs, the
 *      cursor's node) before anything is sent; a cursor naming a node
 *      the cluster does not have is refused with INVALID.
 *
 * State changes: the caller's outputs; nothing on any engine (a scan
 * reads only).
 */
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/error_int.h"
#include "cluster/cluster_int.h"

/* The cluster cursor after a page of node `node` whose own next cursor
 * is `next` (invariant 3). */
static uint64_t next_of(const cluster *cl, uint32_t node, uint64_t next)
{
	if (next)
		return (uint64_t)node << CLUSTER_SCAN_NODE_SHIFT | next;
	return node + 1 < cl->nodes ? (uint64_t)(node + 1) << CLUSTER_SCAN_NODE_SHIFT : 0;
}

static int check_scan(cluster *cl, const cluster_req *req, uint32_t *state_floats)
{
	emdb_table_config cfg;
	int rc = emdb_table_get_config(cl->db, req->table, &cfg);
	if (rc)
		return rc;
	if (req->dim != cfg.dim)
		return emdb__seterr(EMDB_ERR_DIM, "table '%s': dim %u given, table has %u", cfg.name, req->dim, cfg.dim);
	if (req->max_rows == 0 || req->max_rows > cl->max_batch)
		return emdb__seterr(EMDB_ERR_BATCH, "table '%s': a page of %u rows, allowed 1..%u", cfg.name,
				    req->max_rows, cl->max_batch);
	if (!req->ids_out || !req->out)
		return emdb__seterr(EMDB_ERR_INVALID, "scan: NULL ids or vectors output");
	uint64_t node = req->cursor >> CLUSTER_SCAN_NODE_SHIFT;
	if (node >= cl->nodes)
		return emdb__seterr(EMDB_ERR_INVALID, "scan cursor %llu names node %llu of a %u-node cluster: scan again from 0",
				    (unsigned long long)req->cursor, (unsigned long long)node, cl->nodes);
	*state_floats = emdb_optimizer_state_floats(cfg.optimizer.kind, cfg.dim);
	return EMDB_OK;
}

/* A page asked of another node. */
typedef struct scan_call {
	cluster_call call;
	cluster *cl;
	cluster_req *req;
	uint32_t node;
	uint32_t want_state; /* state floats per row asked, or 0 */
} scan_call;

/* A remote node's page: copied into the caller's outputs. */
static void page_reply(cluster_call *call, int rc, const uint8_t *frame, size_t len)
{
	scan_call *sc = call->arg;
	cluster *cl = sc->cl;
	cluster_req *req = sc->req;
	uint32_t node = sc->node, want_state = sc->want_state;
	emdb_free(sc);
	if (rc < 0) {
		cluster__finish(req, rc, "%s", emdb_last_error());
		return;
	}
	proto_node_msg m;
	uint8_t *copy = NULL;
	rc = cluster__decode(frame, len, &m, &copy);
	if (rc == EMDB_OK && (m.hdr.opcode != PROTO_NODE_SCAN || !(m.hdr.flags & PROTO_NODE_FLAG_RESPONSE)))
		rc = emdb__seterr(EMDB_ERR_PROTOCOL, "answered node SCAN with a %s", proto_node_op_name(m.hdr.opcode));
	if (rc) {
		cluster__finish(req, rc, "node %u: %s", node, emdb_last_error());
	} else if (m.hdr.status < 0) {
		cluster__finish(req, m.hdr.status, "node %u: %.*s", node, (int)m.u.err.len, m.u.err.p ? m.u.err.p : "");
	} else {
		const proto_node_page *pg = &m.u.page;
		if (pg->n > req->max_rows || pg->dim != req->dim || pg->per_row != want_state ||
		    pg->next_cursor > CLUSTER_SCAN_ROW_MASK) {
			cluster__finish(req, EMDB_ERR_PROTOCOL,
					"node %u: a page of %u rows of dim %u and %u state floats, cursor %llu, for %u rows of dim %u and %u",
					node, pg->n, pg->dim, pg->per_row, (unsigned long long)pg->next_cursor, req->max_rows,
					req->dim, want_state);
		} else {
			if (pg->n) {
				memcpy(req->ids_out, pg->ids, (size_t)pg->n * 8);
				memcpy(req->out, pg->vecs, (size_t)pg->n * pg->dim * 4);
				if (want_state)
					memcpy(req->state, pg->state, (size_t)pg->n * want_state * 4);
			}
			req->rows = pg->n;
			req->step = pg->step;
			req->next_cursor = next_of(cl, node, pg->next_cursor);
			cluster__finish(req, EMDB_OK, NULL);
		}
	}
	emdb_free(copy);
}

int scan_submit(cluster *cl, cluster_req *req)
{
	uint32_t sf = 0;
	int rc = check_scan(cl, req, &sf);
	if (rc) {
		cluster__set_msg(req, rc, NULL);
		return rc;
	}
	uint32_t node = (uint32_t)(req->cursor >> CLUSTER_SCAN_NODE_SHIFT);
	uint64_t row = req->cursor & CLUSTER_SCAN_ROW_MASK;
	uint32_t want_state = req->state ? sf : 0;
	if (node == cl->rank) {
		size_t n = 0;
		uint64_t next = 0, step = 0;
		rc = emdb_table_scan(cl->db, req->table, row, req->max_rows, req->dim, req->ids_out, req->out,
				     want_state ? req->state : NULL, &n, &next, &step);
		if (rc == EMDB_OK && next > CLUSTER_SCAN_ROW_MASK)
			rc = emdb__seterr(EMDB_ERR_LIMIT, "node %u: row cursor %llu does not fit a cluster cursor", node,
					  (unsigned long long)next);
		if (rc) {
			cluster__set_msg(req, rc, NULL);
			return rc;
		}
		req->rows = n;
		req->step = step;
		req->next_cursor = next_of(cl, node, next);
		cluster__finish(req, EMDB_OK, NULL);
		return EMDB_OK;
	}
	proto_node_msg m = { .hdr = cluster__hdr(cl, PROTO_NODE_SCAN, req->table, false) };
	m.u.scan = (proto_node_scan){ .cursor = row, .max_rows = req->max_rows, .dim = req->dim,
				      .flags = want_state ? PROTO_NODE_SCAN_STATE : 0 };
	scan_call *sc = emdb_calloc(1, sizeof(*sc));
	uint8_t *buf = NULL;
	size_t len = 0;
	rc = sc ? cluster__encode(&m, &buf, &len, NULL) : emdb__seterr(EMDB_ERR_NOMEM, "a node call");
	if (rc == EMDB_OK) {
		*sc = (scan_call){ .cl = cl, .req = req, .node = node, .want_state = want_state };
		sc->call.done = page_reply;
		sc->call.arg = sc;
		rc = cluster__call(cl, node, buf, len, &sc->call);
	}
	emdb_free(buf);
	if (rc) {
		emdb_free(sc);
		cluster__set_msg(req, rc, NULL);
	}
	return rc;
}

void scan_serve(cluster *cl, uint32_t from, const proto_node_msg *m, cluster_responder *r)
{
	const proto_node_scan *s = &m->u.scan;
	emdb_table_config cfg;
	int rc = emdb_table_get_config(cl->db, m->hdr.table, &cfg);
	if (rc == EMDB_OK && s->dim != cfg.dim)
		rc = emdb__seterr(EMDB_ERR_DIM, "table '%s': dim %u given, table has %u", cfg.name, s->dim, cfg.dim);
	if (rc == EMDB_OK && s->max_rows > cl->max_batch)
		rc = emdb__seterr(EMDB_ERR_BATCH, "table '%s': a page of %u rows, allowed 1..%u", cfg.name, s->max_rows,
				  cl->max_batch);
	if (rc) {
		cluster__reply(cl, r, m->hdr.opcode, m->hdr.table, NULL, 0, rc);
		return;
	}
	uint32_t sf = (s->flags & PROTO_NODE_SCAN_STATE) ? emdb_optimizer_state_floats(cfg.optimizer.kind, cfg.dim) : 0;
	size_t cap = s->max_rows;
	uint8_t *mem = emdb_malloc(cap * (8 + 4 * (size_t)(s->dim + sf)));
	if (!mem) {
		rc = emdb__seterr(EMDB_ERR_NOMEM, "a page of %u rows", s->max_rows);
		cluster__reply(cl, r, m->hdr.opcode, m->hdr.table, NULL, 0, rc);
		return;
	}
	uint64_t *ids = (uint64_t *)mem;
	float *vecs = (float *)(ids + cap);
	float *state = vecs + cap * s->dim;
	size_t n = 0;
	proto_node_msg rep = { .hdr = cluster__hdr(cl, m->hdr.opcode, m->hdr.table, true) };
	rc = emdb_table_scan(cl->db, m->hdr.table, s->cursor, s->max_rows, s->dim, ids, vecs, sf ? state : NULL, &n,
			     &rep.u.page.next_cursor, &rep.u.page.step);
	uint8_t *buf = NULL;
	size_t len = 0;
	if (rc == EMDB_OK) {
		rep.u.page.n = (uint32_t)n;
		rep.u.page.dim = s->dim;
		rep.u.page.per_row = sf;
		rep.u.page.ids = ids;
		rep.u.page.vecs = vecs;
		rep.u.page.state = sf ? state : NULL;
		rc = cluster__encode(&rep, &buf, &len, NULL);
	}
	emdb_free(mem);
	cluster__reply(cl, r, m->hdr.opcode, m->hdr.table, rc ? NULL : buf, len, rc);
	if (rc)
		emdb_free(buf);
}
