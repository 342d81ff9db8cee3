/*
 * handle_scan.c - a table's rows out and in: TABLE_SCAN (one page of
 * emdb_table_scan) and TABLE_LOAD (emdb_table_load).
 *
 * Invariants:
 *   1. TABLE_SCAN checks the table, its dim and the size of a full page's
 *      reply against max_frame before it allocates anything, so a page
 *      too large for a frame is refused (LIMIT, "ask for fewer rows") and
 *      no request makes the server set aside more than max_frame.  The
 *      engine copies the page into scratch memory, and the reply is
 *      encoded from it (a page's size is known only once it is copied).
 *   2. TABLE_LOAD hands the engine the arrays where they lie in the input
 *      buffer, after checking that per_row, when given, is the table's
 *      state width (DIM otherwise); its empty reply is reserved first, so
 *      rows are never written without the client being told.
 *
 * State changes: TABLE_LOAD writes rows (the engine's).
 */
#include <stdlib.h>

#include <emdb/alloc.h>
#include <emdb/db.h>
#include <emdb/error.h>

#include "net/conn.h"
#include "net/handle_int.h"
#include "net/server.h"

/* The table's state floats per row, after checking it exists and has dim. */
static int table_widths(conn *c, uint32_t table, uint32_t dim, uint32_t *state_floats)
{
	emdb_table_config cfg;
	int rc = emdb_table_get_config(c->srv->db, table, &cfg);
	if (rc)
		return rc;
	if (dim != cfg.dim)
		return handle_fail(EMDB_ERR_DIM, "table '%s': dim %u given, table has %u", cfg.name, dim,
				   cfg.dim);
	*state_floats = emdb_optimizer_state_floats(cfg.optimizer.kind, cfg.dim);
	return EMDB_OK;
}

int handle_table_scan(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_table_scan_req m;
	int rc = proto_table_scan_req_decode(h, body, &m);
	if (rc)
		return rc;
	uint32_t sf = 0;
	if ((rc = table_widths(c, m.table, m.dim, &sf)))
		return rc;
	proto_table_scan_resp r = { .dim = m.dim, .per_row = (m.flags & PROTO_SCAN_STATE) ? sf : 0 };
	uint64_t row_bytes = 8 + 4ull * m.dim + 4ull * r.per_row;
	size_t full = PROTO_HDR_SIZE + 32 + (size_t)m.max_rows * row_bytes + 16;
	if (m.max_rows && (rc = handle_check_reply(c, full)))
		return handle_fail(EMDB_ERR_LIMIT,
				   "a page of %u rows of %llu bytes would pass the largest frame: ask for fewer rows per page",
				   m.max_rows, (unsigned long long)row_bytes);
	size_t cap = m.max_rows ? m.max_rows : 1;
	uint64_t *ids = emdb_malloc(cap * sizeof(uint64_t));
	float *vecs = emdb_malloc(cap * m.dim * sizeof(float));
	float *state = r.per_row ? emdb_malloc(cap * r.per_row * sizeof(float)) : NULL;
	if (!ids || !vecs || (r.per_row && !state)) {
		rc = handle_fail(EMDB_ERR_NOMEM, "no memory for a page of %u rows", m.max_rows);
	} else {
		size_t n = 0;
		rc = emdb_table_scan(c->srv->db, m.table, m.cursor, m.max_rows, m.dim, ids, vecs, state, &n,
				     &r.next_cursor, &r.step);
		r.n = (uint32_t)n;
		r.ids = ids;
		r.vecs = vecs;
		r.state = state;
		if (rc == EMDB_OK)
			rc = HANDLE_REPLY(c, h->id, proto_table_scan_resp_encode, &r);
	}
	emdb_free(ids);
	emdb_free(vecs);
	emdb_free(state);
	return rc ? rc : HANDLED_OK;
}

int handle_table_load(conn *c, const proto_hdr *h, const uint8_t *body)
{
	static const uint64_t no_u64[1];
	static const float no_f32[1];
	proto_table_load_req m;
	int rc = proto_table_load_req_decode(h, body, &m);
	if (rc)
		return rc;
	uint32_t sf = 0;
	if ((rc = table_widths(c, m.table, m.dim, &sf)))
		return rc;
	if (m.per_row && m.per_row != sf)
		return handle_fail(EMDB_ERR_DIM, "table %u keeps %u state floats per row, not %u", m.table, sf,
				   m.per_row);
	uint8_t *p = conn_reply_reserve(c, PROTO_HDR_SIZE);
	if (!p)
		return EMDB_ERR_NOMEM;
	/* Empty arrays as the data plane's handlers pass them: the engine
	 * answers an empty batch BATCH, not INVALID. */
	rc = emdb_table_load(c->srv->db, m.table, m.ids ? m.ids : no_u64, m.n, m.dim,
			     m.vecs ? m.vecs : no_f32, m.per_row ? (m.state ? m.state : no_f32) : NULL);
	if (rc) {
		obuf_cancel(&c->out);
		return rc;
	}
	size_t len;
	proto_empty_encode(p, PROTO_HDR_SIZE, h->id, h->opcode, true, &len);
	obuf_commit(&c->out, len);
	return HANDLED_OK;
}
