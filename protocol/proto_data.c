/*
 * protocol/proto_data.c - bodies of the data-plane opcodes: PREFETCH,
 * TICKET_FREE, PULL, PUSH, UPDATE, LOOKUP, READ_STATE, PUSH_UPDATE,
 * PULL_WEIGHTED, PUSH_WEIGHTED (docs/protocol.md, "Data plane").
 *
 * Invariants:
 *   1. Each body is a fixed part whose size is a multiple of 8, then its
 *      arrays: u64 arrays (ids, offsets) first, float arrays next, byte
 *      arrays (found) last, each followed by zero padding to 8.  So every
 *      u64 and float array starts 8-aligned and is used in place.
 *   2. A decoder turns each count into bytes with overflow checks and
 *      compares it with what is left of the body before it forms a
 *      pointer; it checks every count relation the frame itself can
 *      contradict (ticket xor ids, rows of gradients vs. ids or bags,
 *      pool only with bags, no bags in PUSH_UPDATE).  Relations that need
 *      the server's state (a ticket's count, the table's dim) are the
 *      server's to check.
 *   3. One body writer per request serves both the flat encoder and the
 *      scatter-gather one, so the two cannot disagree; the *_resp_begin
 *      functions share their layout with the matching encoder the same way.
 *      PUSH_UPDATE shares PUSH's writer and reader and UPDATE's response
 *      code, parameterized by opcode; PULL_WEIGHTED and PUSH_WEIGHTED
 *      share PULL's and PUSH's the same way (their weights after the
 *      offsets, their count in PULL's reserved word or after PUSH's
 *      n_rows).
 */
#include "base/error_int.h"
#include "protocol/proto_int.h"

/* ---- PREFETCH ------------------------------------------------------ */

static void prefetch_req_body(proto_wr *w, const proto_prefetch_req *m)
{
	wr_u32(w, m->table);
	wr_u32(w, m->n);
	wr_array(w, m->ids, m->n, 8, "ids");
}

int proto_prefetch_req_encode(uint8_t *buf, size_t cap, uint64_t id,
			      const proto_prefetch_req *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	prefetch_req_body(&w, m);
	return wr_end(&w, PROTO_OP_PREFETCH, false, 0, id, len);
}

int proto_prefetch_req_iov(proto_iov *v, uint64_t id, const proto_prefetch_req *m)
{
	proto_wr w;
	wr_begin_iov(&w, v);
	prefetch_req_body(&w, m);
	return wr_end(&w, PROTO_OP_PREFETCH, false, 0, id, NULL);
}

int proto_prefetch_req_decode(const proto_hdr *h, const uint8_t *body, proto_prefetch_req *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_PREFETCH, false);
	if (rc)
		return rc;
	m->table = rd_u32(&r, "table");
	m->n = rd_u32(&r, "n");
	m->ids = rd_array(&r, m->n, 8, "ids");
	return rd_end(&r);
}

int proto_prefetch_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
			       const proto_prefetch_resp *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	if (!m->ticket)
		proto__wr_fail(&w, "PREFETCH response with ticket handle 0");
	wr_u64(&w, m->ticket);
	wr_u32(&w, m->count);
	wr_u32(&w, m->table);
	return wr_end(&w, PROTO_OP_PREFETCH, true, 0, id, len);
}

int proto_prefetch_resp_decode(const proto_hdr *h, const uint8_t *body,
			       proto_prefetch_resp *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_PREFETCH, true);
	if (rc)
		return rc;
	m->ticket = rd_u64(&r, "ticket");
	m->count = rd_u32(&r, "count");
	m->table = rd_u32(&r, "table");
	if (!r.err && !m->ticket)
		proto__rd_fail(&r, "ticket handle 0");
	return rd_end(&r);
}

/* ---- TICKET_FREE --------------------------------------------------- */

int proto_ticket_free_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				 const proto_ticket_free_req *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	wr_u64(&w, m->ticket);
	return wr_end(&w, PROTO_OP_TICKET_FREE, false, 0, id, len);
}

int proto_ticket_free_req_decode(const proto_hdr *h, const uint8_t *body,
				 proto_ticket_free_req *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_TICKET_FREE, false);
	if (rc)
		return rc;
	m->ticket = rd_u64(&r, "ticket");
	return rd_end(&r);
}

/* ---- PULL and PUSH share their first 32 bytes and arrays ----------- */

/* The ids/bags part both share: checks, then ids[n_ids], offsets[n_bags+1]. */
static bool sel_check_wr(proto_wr *w, uint64_t ticket, uint32_t n_ids, uint32_t n_bags,
			 uint32_t pool)
{
	if (ticket && n_ids)
		proto__wr_fail(w, "a ticket and %u ids at once", n_ids);
	if (!n_bags && pool)
		proto__wr_fail(w, "pool mode %u without bags", pool);
	return !w->err;
}

static void sel_check_rd(proto_rd *r, uint64_t ticket, uint32_t n_ids, uint32_t n_bags,
			 uint32_t pool)
{
	if (!r->err && ticket && n_ids)
		proto__rd_fail(r, "ticket %llu and n_ids %u: one or the other",
			       (unsigned long long)ticket, n_ids);
	if (!r->err && !n_bags && pool)
		proto__rd_fail(r, "pool %u with n_bags 0: must be 0", pool);
}

/* The weights of PULL_WEIGHTED and PUSH_WEIGHTED (none elsewhere: wt
 * NULL): bags required, and one weight per ID where the frame knows the
 * IDs. */
typedef struct weights_in {
	uint32_t n;
	const float *w;
} weights_in;

static bool weights_check_wr(proto_wr *w, uint16_t op, const weights_in *wt, uint64_t ticket,
			     uint32_t n_ids, uint32_t n_bags)
{
	if (wt && !n_bags)
		proto__wr_fail(w, "%s without bags", proto_op_name(op));
	if (wt && !ticket && wt->n != n_ids)
		proto__wr_fail(w, "%u weights for %u ids", wt->n, n_ids);
	return !w->err;
}

static void weights_check_rd(proto_rd *r, uint64_t ticket, uint32_t n_ids, uint32_t n_bags,
			     uint32_t n_weights)
{
	if (!r->err && !n_bags)
		proto__rd_fail(r, "n_bags 0: per-sample weights need bags");
	if (!r->err && !ticket && n_weights != n_ids)
		proto__rd_fail(r, "n_weights %u for n_ids %u: must be equal", n_weights, n_ids);
}

/* PULL and PULL_WEIGHTED: the same body, PULL_WEIGHTED's reserved word
 * being n_weights and its weights following the offsets. */
static void pull_req_body(proto_wr *w, uint16_t op, const proto_pull_req *m, const weights_in *wt)
{
	if (!sel_check_wr(w, m->ticket, m->n_ids, m->n_bags, m->pool) ||
	    !weights_check_wr(w, op, wt, m->ticket, m->n_ids, m->n_bags))
		return;
	wr_u32(w, m->table);
	wr_u32(w, m->dim);
	wr_u64(w, m->ticket);
	wr_u32(w, m->n_ids);
	wr_u32(w, m->n_bags);
	wr_u32(w, m->pool);
	wr_u32(w, wt ? wt->n : 0);
	wr_array(w, m->ids, m->n_ids, 8, "ids");
	if (m->n_bags)
		wr_array(w, m->offsets, (uint64_t)m->n_bags + 1, 8, "offsets");
	if (wt) {
		wr_array(w, wt->w, wt->n, 4, "weights");
		wr_pad(w);
	}
}

static int pull_req_encode(uint16_t op, uint8_t *buf, size_t cap, uint64_t id, const proto_pull_req *m,
			   const weights_in *wt, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	pull_req_body(&w, op, m, wt);
	return wr_end(&w, op, false, 0, id, len);
}

static int pull_req_iov(uint16_t op, proto_iov *v, uint64_t id, const proto_pull_req *m,
			const weights_in *wt)
{
	proto_wr w;
	wr_begin_iov(&w, v);
	pull_req_body(&w, op, m, wt);
	return wr_end(&w, op, false, 0, id, NULL);
}

/* wt NULL for PULL; PULL_WEIGHTED's weights into *wt. */
static int pull_req_decode(uint16_t op, const proto_hdr *h, const uint8_t *body, proto_pull_req *m,
			   weights_in *wt)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, op, false);
	if (rc)
		return rc;
	m->table = rd_u32(&r, "table");
	m->dim = rd_u32(&r, "dim");
	m->ticket = rd_u64(&r, "ticket");
	m->n_ids = rd_u32(&r, "n_ids");
	m->n_bags = rd_u32(&r, "n_bags");
	m->pool = rd_u32(&r, "pool");
	if (wt)
		wt->n = rd_u32(&r, "n_weights");
	else
		rd_zero(&r, 4, "reserved");
	sel_check_rd(&r, m->ticket, m->n_ids, m->n_bags, m->pool);
	if (wt)
		weights_check_rd(&r, m->ticket, m->n_ids, m->n_bags, wt->n);
	m->ids = rd_array(&r, m->n_ids, 8, "ids");
	m->offsets = m->n_bags ? rd_array(&r, (uint64_t)m->n_bags + 1, 8, "offsets") : NULL;
	if (wt) {
		wt->w = rd_array(&r, wt->n, 4, "weights");
		rd_pad(&r);
	}
	return rd_end(&r);
}

int proto_pull_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_pull_req *m,
			  size_t *len)
{
	return pull_req_encode(PROTO_OP_PULL, buf, cap, id, m, NULL, len);
}

int proto_pull_req_iov(proto_iov *v, uint64_t id, const proto_pull_req *m)
{
	return pull_req_iov(PROTO_OP_PULL, v, id, m, NULL);
}

int proto_pull_req_decode(const proto_hdr *h, const uint8_t *body, proto_pull_req *m)
{
	return pull_req_decode(PROTO_OP_PULL, h, body, m, NULL);
}

int proto_pull_weighted_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				   const proto_pull_weighted_req *m, size_t *len)
{
	weights_in wt = { m->n_weights, m->weights };
	return pull_req_encode(PROTO_OP_PULL_WEIGHTED, buf, cap, id, &m->pull, &wt, len);
}

int proto_pull_weighted_req_iov(proto_iov *v, uint64_t id, const proto_pull_weighted_req *m)
{
	weights_in wt = { m->n_weights, m->weights };
	return pull_req_iov(PROTO_OP_PULL_WEIGHTED, v, id, &m->pull, &wt);
}

int proto_pull_weighted_req_decode(const proto_hdr *h, const uint8_t *body,
				   proto_pull_weighted_req *m)
{
	weights_in wt = { 0, NULL };
	int rc = pull_req_decode(PROTO_OP_PULL_WEIGHTED, h, body, &m->pull, &wt);
	m->n_weights = wt.n;
	m->weights = wt.w;
	return rc;
}

/* PULL response: n_rows, dim, floats, padding. */
static float *pull_resp_body(proto_wr *w, uint32_t n_rows, uint32_t dim, const float *vecs,
			     bool reserve)
{
	wr_u32(w, n_rows);
	wr_u32(w, dim);
	float *out = NULL;
	if (reserve)
		out = wr_reserve(w, (uint64_t)n_rows * dim, 4, "vecs");
	else
		wr_array(w, vecs, (uint64_t)n_rows * dim, 4, "vecs");
	wr_pad(w);
	return out;
}

static bool begin_aligned(proto_wr *w, const uint8_t *buf)
{
	if ((uintptr_t)buf % PROTO_ALIGN) {
		proto__wr_fail(w, "response buffer %p is not 8-aligned", (const void *)buf);
		return false;
	}
	return true;
}

static int pull_resp_encode(uint16_t op, uint8_t *buf, size_t cap, uint64_t id, const proto_pull_resp *m,
			    size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	pull_resp_body(&w, m->n_rows, m->dim, m->vecs, false);
	return wr_end(&w, op, true, 0, id, len);
}

static int pull_resp_begin(uint16_t op, uint8_t *buf, size_t cap, uint64_t id, uint32_t n_rows,
			   uint32_t dim, float **vecs, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	begin_aligned(&w, buf);
	float *v = pull_resp_body(&w, n_rows, dim, NULL, true);
	int rc = wr_end(&w, op, true, 0, id, len);
	if (rc == EMDB_OK)
		*vecs = v;
	return rc;
}

static int pull_resp_decode(uint16_t op, const proto_hdr *h, const uint8_t *body, proto_pull_resp *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, op, true);
	if (rc)
		return rc;
	m->n_rows = rd_u32(&r, "n_rows");
	m->dim = rd_u32(&r, "dim");
	m->vecs = rd_array(&r, (uint64_t)m->n_rows * m->dim, 4, "vecs");
	rd_pad(&r);
	return rd_end(&r);
}

int proto_pull_resp_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_pull_resp *m,
			   size_t *len)
{
	return pull_resp_encode(PROTO_OP_PULL, buf, cap, id, m, len);
}

int proto_pull_resp_begin(uint8_t *buf, size_t cap, uint64_t id, uint32_t n_rows,
			  uint32_t dim, float **vecs, size_t *len)
{
	return pull_resp_begin(PROTO_OP_PULL, buf, cap, id, n_rows, dim, vecs, len);
}

int proto_pull_resp_decode(const proto_hdr *h, const uint8_t *body, proto_pull_resp *m)
{
	return pull_resp_decode(PROTO_OP_PULL, h, body, m);
}

int proto_pull_weighted_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				    const proto_pull_weighted_resp *m, size_t *len)
{
	return pull_resp_encode(PROTO_OP_PULL_WEIGHTED, buf, cap, id, m, len);
}

int proto_pull_weighted_resp_begin(uint8_t *buf, size_t cap, uint64_t id, uint32_t n_rows,
				   uint32_t dim, float **vecs, size_t *len)
{
	return pull_resp_begin(PROTO_OP_PULL_WEIGHTED, buf, cap, id, n_rows, dim, vecs, len);
}

int proto_pull_weighted_resp_decode(const proto_hdr *h, const uint8_t *body,
				    proto_pull_weighted_resp *m)
{
	return pull_resp_decode(PROTO_OP_PULL_WEIGHTED, h, body, m);
}

/* ---- PUSH, PUSH_UPDATE and UPDATE ---------------------------------- */

/* PUSH_UPDATE is PUSH's request and UPDATE's response under its own
 * opcode: one writer and one reader per body take the opcode, so the two
 * requests cannot drift apart.  PUSH_UPDATE has no bags. */

static bool push_no_bags_wr(proto_wr *w, uint16_t op, const proto_push_req *m)
{
	if (op == PROTO_OP_PUSH_UPDATE && (m->n_bags || m->pool))
		proto__wr_fail(w, "PUSH_UPDATE takes no bags: n_bags %u, pool %u", m->n_bags, m->pool);
	return !w->err;
}

static void push_req_body(proto_wr *w, uint16_t op, const proto_push_req *m, const weights_in *wt)
{
	if (!push_no_bags_wr(w, op, m) || !sel_check_wr(w, m->ticket, m->n_ids, m->n_bags, m->pool) ||
	    !weights_check_wr(w, op, wt, m->ticket, m->n_ids, m->n_bags))
		return;
	if (m->n_bags && m->n_rows != m->n_bags)
		proto__wr_fail(w, "%u gradient rows for %u bags", m->n_rows, m->n_bags);
	if (!m->n_bags && !m->ticket && m->n_rows != m->n_ids)
		proto__wr_fail(w, "%u gradient rows for %u ids", m->n_rows, m->n_ids);
	wr_u32(w, m->table);
	wr_u32(w, m->dim);
	wr_u64(w, m->ticket);
	wr_u32(w, m->n_ids);
	wr_u32(w, m->n_bags);
	wr_u32(w, m->pool);
	wr_u32(w, m->n_rows);
	if (wt) {
		wr_u32(w, wt->n);
		wr_zero(w, 4);
	}
	wr_array(w, m->ids, m->n_ids, 8, "ids");
	if (m->n_bags)
		wr_array(w, m->offsets, (uint64_t)m->n_bags + 1, 8, "offsets");
	if (wt) {
		wr_array(w, wt->w, wt->n, 4, "weights");
		wr_pad(w);
	}
	wr_array(w, m->grads, (uint64_t)m->n_rows * m->dim, 4, "grads");
	wr_pad(w);
}

static int push_req_encode(uint16_t op, uint8_t *buf, size_t cap, uint64_t id,
			   const proto_push_req *m, const weights_in *wt, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	push_req_body(&w, op, m, wt);
	return wr_end(&w, op, false, 0, id, len);
}

static int push_req_iov(uint16_t op, proto_iov *v, uint64_t id, const proto_push_req *m,
			const weights_in *wt)
{
	proto_wr w;
	wr_begin_iov(&w, v);
	push_req_body(&w, op, m, wt);
	return wr_end(&w, op, false, 0, id, NULL);
}

/* wt NULL for PUSH and PUSH_UPDATE; PUSH_WEIGHTED's weights into *wt. */
static int push_req_decode(uint16_t op, const proto_hdr *h, const uint8_t *body,
			   proto_push_req *m, weights_in *wt)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, op, false);
	if (rc)
		return rc;
	m->table = rd_u32(&r, "table");
	m->dim = rd_u32(&r, "dim");
	m->ticket = rd_u64(&r, "ticket");
	m->n_ids = rd_u32(&r, "n_ids");
	m->n_bags = rd_u32(&r, "n_bags");
	m->pool = rd_u32(&r, "pool");
	m->n_rows = rd_u32(&r, "n_rows");
	if (wt) {
		wt->n = rd_u32(&r, "n_weights");
		rd_zero(&r, 4, "reserved");
	}
	if (!r.err && op == PROTO_OP_PUSH_UPDATE && (m->n_bags || m->pool))
		proto__rd_fail(&r, "n_bags %u, pool %u: no bags in a PUSH_UPDATE, both must be 0",
			       m->n_bags, m->pool);
	sel_check_rd(&r, m->ticket, m->n_ids, m->n_bags, m->pool);
	if (wt)
		weights_check_rd(&r, m->ticket, m->n_ids, m->n_bags, wt->n);
	if (!r.err && m->n_bags && m->n_rows != m->n_bags)
		proto__rd_fail(&r, "n_rows %u for n_bags %u: must be equal", m->n_rows, m->n_bags);
	if (!r.err && !m->n_bags && !m->ticket && m->n_rows != m->n_ids)
		proto__rd_fail(&r, "n_rows %u for n_ids %u: must be equal", m->n_rows, m->n_ids);
	m->ids = rd_array(&r, m->n_ids, 8, "ids");
	m->offsets = m->n_bags ? rd_array(&r, (uint64_t)m->n_bags + 1, 8, "offsets") : NULL;
	if (wt) {
		wt->w = rd_array(&r, wt->n, 4, "weights");
		rd_pad(&r);
	}
	m->grads = rd_array(&r, (uint64_t)m->n_rows * m->dim, 4, "grads");
	rd_pad(&r);
	return rd_end(&r);
}

int proto_push_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_push_req *m,
			  size_t *len)
{
	return push_req_encode(PROTO_OP_PUSH, buf, cap, id, m, NULL, len);
}

int proto_push_req_iov(proto_iov *v, uint64_t id, const proto_push_req *m)
{
	return push_req_iov(PROTO_OP_PUSH, v, id, m, NULL);
}

int proto_push_req_decode(const proto_hdr *h, const uint8_t *body, proto_push_req *m)
{
	return push_req_decode(PROTO_OP_PUSH, h, body, m, NULL);
}

int proto_push_weighted_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				   const proto_push_weighted_req *m, size_t *len)
{
	weights_in wt = { m->n_weights, m->weights };
	return push_req_encode(PROTO_OP_PUSH_WEIGHTED, buf, cap, id, &m->push, &wt, len);
}

int proto_push_weighted_req_iov(proto_iov *v, uint64_t id, const proto_push_weighted_req *m)
{
	weights_in wt = { m->n_weights, m->weights };
	return push_req_iov(PROTO_OP_PUSH_WEIGHTED, v, id, &m->push, &wt);
}

int proto_push_weighted_req_decode(const proto_hdr *h, const uint8_t *body,
				   proto_push_weighted_req *m)
{
	weights_in wt = { 0, NULL };
	int rc = push_req_decode(PROTO_OP_PUSH_WEIGHTED, h, body, &m->push, &wt);
	m->n_weights = wt.n;
	m->weights = wt.w;
	return rc;
}

int proto_push_update_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				 const proto_push_update_req *m, size_t *len)
{
	return push_req_encode(PROTO_OP_PUSH_UPDATE, buf, cap, id, m, NULL, len);
}

int proto_push_update_req_iov(proto_iov *v, uint64_t id, const proto_push_update_req *m)
{
	return push_req_iov(PROTO_OP_PUSH_UPDATE, v, id, m, NULL);
}

int proto_push_update_req_decode(const proto_hdr *h, const uint8_t *body,
				 proto_push_update_req *m)
{
	return push_req_decode(PROTO_OP_PUSH_UPDATE, h, body, m, NULL);
}

int proto_update_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_update_req *m,
			    size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	wr_u32(&w, m->table);
	wr_u32(&w, m->workers);
	if (m->seq) {
		if (m->workers < 2)
			proto__wr_fail(&w, "UPDATE of %u workers with a step number (only steps have one)", m->workers);
		wr_u64(&w, m->seq);
		wr_u64(&w, m->session);
	}
	return wr_end(&w, PROTO_OP_UPDATE, false, 0, id, len);
}

int proto_update_req_decode(const proto_hdr *h, const uint8_t *body, proto_update_req *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_UPDATE, false);
	if (rc)
		return rc;
	m->table = rd_u32(&r, "table");
	m->workers = rd_u32(&r, "workers");
	m->seq = m->session = 0;
	/* 8 bytes, or 24 with a step number; anything else trails. */
	if (!r.err && r.len == r.off + 16) {
		m->seq = rd_u64(&r, "seq");
		m->session = rd_u64(&r, "session");
		if (m->seq == 0)
			return proto__rd_fail(&r, "16 bytes trail the body at offset 8: a step number of 0");
		if (m->workers < 2)
			return proto__rd_fail(&r, "16 bytes trail the body at offset 8: a step number in an UPDATE "
						  "of %u workers (only steps have one)",
					      m->workers);
	}
	return rd_end(&r);
}

/* The response of UPDATE and PUSH_UPDATE: rows updated. */
static int rows_resp_encode(uint16_t op, uint8_t *buf, size_t cap, uint64_t id,
			    const proto_update_resp *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	wr_u64(&w, m->rows);
	return wr_end(&w, op, true, 0, id, len);
}

static int rows_resp_decode(uint16_t op, const proto_hdr *h, const uint8_t *body,
			    proto_update_resp *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, op, true);
	if (rc)
		return rc;
	m->rows = rd_u64(&r, "rows");
	return rd_end(&r);
}

int proto_update_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
			     const proto_update_resp *m, size_t *len)
{
	return rows_resp_encode(PROTO_OP_UPDATE, buf, cap, id, m, len);
}

int proto_update_resp_decode(const proto_hdr *h, const uint8_t *body, proto_update_resp *m)
{
	return rows_resp_decode(PROTO_OP_UPDATE, h, body, m);
}

int proto_push_update_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				  const proto_push_update_resp *m, size_t *len)
{
	return rows_resp_encode(PROTO_OP_PUSH_UPDATE, buf, cap, id, m, len);
}

int proto_push_update_resp_decode(const proto_hdr *h, const uint8_t *body,
				  proto_push_update_resp *m)
{
	return rows_resp_decode(PROTO_OP_PUSH_UPDATE, h, body, m);
}

/* ---- LOOKUP -------------------------------------------------------- */

static void lookup_req_body(proto_wr *w, const proto_lookup_req *m)
{
	wr_u32(w, m->table);
	wr_u32(w, m->dim);
	wr_u32(w, m->n);
	wr_u32(w, m->want_found ? PROTO_LOOKUP_FOUND : 0);
	wr_array(w, m->ids, m->n, 8, "ids");
}

int proto_lookup_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_lookup_req *m,
			    size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	lookup_req_body(&w, m);
	return wr_end(&w, PROTO_OP_LOOKUP, false, 0, id, len);
}

int proto_lookup_req_iov(proto_iov *v, uint64_t id, const proto_lookup_req *m)
{
	proto_wr w;
	wr_begin_iov(&w, v);
	lookup_req_body(&w, m);
	return wr_end(&w, PROTO_OP_LOOKUP, false, 0, id, NULL);
}

int proto_lookup_req_decode(const proto_hdr *h, const uint8_t *body, proto_lookup_req *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_LOOKUP, false);
	if (rc)
		return rc;
	m->table = rd_u32(&r, "table");
	m->dim = rd_u32(&r, "dim");
	m->n = rd_u32(&r, "n");
	uint32_t flags = rd_u32(&r, "flags");
	if (!r.err && (flags & ~PROTO_LOOKUP_FOUND))
		proto__rd_fail(&r, "undefined flags 0x%08x", flags);
	m->want_found = (flags & PROTO_LOOKUP_FOUND) != 0;
	m->ids = rd_array(&r, m->n, 8, "ids");
	return rd_end(&r);
}

/* LOOKUP response: n, dim, flags, reserved, floats, pad, [found, pad]. */
static void lookup_resp_body(proto_wr *w, uint32_t n, uint32_t dim, bool with_found,
			     const float *vecs, const uint8_t *found, float **vecs_out,
			     uint8_t **found_out)
{
	wr_u32(w, n);
	wr_u32(w, dim);
	wr_u32(w, with_found ? PROTO_LOOKUP_FOUND : 0);
	wr_zero(w, 4);
	if (vecs_out)
		*vecs_out = wr_reserve(w, (uint64_t)n * dim, 4, "vecs");
	else
		wr_array(w, vecs, (uint64_t)n * dim, 4, "vecs");
	wr_pad(w);
	if (with_found) {
		if (found_out)
			*found_out = wr_reserve(w, n, 1, "found");
		else
			wr_array(w, found, n, 1, "found");
		wr_pad(w);
	}
}

int proto_lookup_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
			     const proto_lookup_resp *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	lookup_resp_body(&w, m->n, m->dim, m->found != NULL, m->vecs, m->found, NULL, NULL);
	return wr_end(&w, PROTO_OP_LOOKUP, true, 0, id, len);
}

int proto_lookup_resp_begin(uint8_t *buf, size_t cap, uint64_t id, uint32_t n, uint32_t dim,
			    bool with_found, float **vecs, uint8_t **found, size_t *len)
{
	proto_wr w;
	float *v = NULL;
	uint8_t *f = NULL;
	wr_begin(&w, buf, cap);
	begin_aligned(&w, buf);
	lookup_resp_body(&w, n, dim, with_found, NULL, NULL, &v, &f);
	int rc = wr_end(&w, PROTO_OP_LOOKUP, true, 0, id, len);
	if (rc == EMDB_OK) {
		*vecs = v;
		if (found)
			*found = f;
	}
	return rc;
}

int proto_lookup_resp_decode(const proto_hdr *h, const uint8_t *body, proto_lookup_resp *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_LOOKUP, true);
	if (rc)
		return rc;
	m->n = rd_u32(&r, "n");
	m->dim = rd_u32(&r, "dim");
	uint32_t flags = rd_u32(&r, "flags");
	rd_zero(&r, 4, "reserved");
	if (!r.err && (flags & ~PROTO_LOOKUP_FOUND))
		proto__rd_fail(&r, "undefined flags 0x%08x", flags);
	m->vecs = rd_array(&r, (uint64_t)m->n * m->dim, 4, "vecs");
	rd_pad(&r);
	m->found = NULL;
	if (flags & PROTO_LOOKUP_FOUND) {
		/* Non-NULL even for n = 0: "found was sent" must survive. */
		m->found = r.p + r.off;
		rd_array(&r, m->n, 1, "found");
		rd_pad(&r);
	}
	return rd_end(&r);
}

/* ---- READ_STATE ---------------------------------------------------- */

static void read_state_req_body(proto_wr *w, const proto_read_state_req *m)
{
	wr_u32(w, m->table);
	wr_u32(w, m->n);
	wr_array(w, m->ids, m->n, 8, "ids");
}

int proto_read_state_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				const proto_read_state_req *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	read_state_req_body(&w, m);
	return wr_end(&w, PROTO_OP_READ_STATE, false, 0, id, len);
}

int proto_read_state_req_iov(proto_iov *v, uint64_t id, const proto_read_state_req *m)
{
	proto_wr w;
	wr_begin_iov(&w, v);
	read_state_req_body(&w, m);
	return wr_end(&w, PROTO_OP_READ_STATE, false, 0, id, NULL);
}

int proto_read_state_req_decode(const proto_hdr *h, const uint8_t *body,
				proto_read_state_req *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_READ_STATE, false);
	if (rc)
		return rc;
	m->table = rd_u32(&r, "table");
	m->n = rd_u32(&r, "n");
	m->ids = rd_array(&r, m->n, 8, "ids");
	return rd_end(&r);
}

/* READ_STATE response: n, per_row, floats, pad, found, pad. */
static void read_state_resp_body(proto_wr *w, uint32_t n, uint32_t per_row, const float *state,
				 const uint8_t *found, float **state_out, uint8_t **found_out)
{
	wr_u32(w, n);
	wr_u32(w, per_row);
	if (state_out)
		*state_out = wr_reserve(w, (uint64_t)n * per_row, 4, "state");
	else
		wr_array(w, state, (uint64_t)n * per_row, 4, "state");
	wr_pad(w);
	if (found_out)
		*found_out = wr_reserve(w, n, 1, "found");
	else
		wr_array(w, found, n, 1, "found");
	wr_pad(w);
}

int proto_read_state_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				 const proto_read_state_resp *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	read_state_resp_body(&w, m->n, m->per_row, m->state, m->found, NULL, NULL);
	return wr_end(&w, PROTO_OP_READ_STATE, true, 0, id, len);
}

int proto_read_state_resp_begin(uint8_t *buf, size_t cap, uint64_t id, uint32_t n,
				uint32_t per_row, float **state, uint8_t **found, size_t *len)
{
	proto_wr w;
	float *s = NULL;
	uint8_t *f = NULL;
	wr_begin(&w, buf, cap);
	begin_aligned(&w, buf);
	read_state_resp_body(&w, n, per_row, NULL, NULL, &s, &f);
	int rc = wr_end(&w, PROTO_OP_READ_STATE, true, 0, id, len);
	if (rc == EMDB_OK) {
		*state = s;
		*found = f;
	}
	return rc;
}

int proto_read_state_resp_decode(const proto_hdr *h, const uint8_t *body,
				 proto_read_state_resp *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_READ_STATE, true);
	if (rc)
		return rc;
	m->n = rd_u32(&r, "n");
	m->per_row = rd_u32(&r, "per_row");
	m->state = rd_array(&r, (uint64_t)m->n * m->per_row, 4, "state");
	rd_pad(&r);
	m->found = rd_array(&r, m->n, 1, "found");
	rd_pad(&r);
	return rd_end(&r);
}
