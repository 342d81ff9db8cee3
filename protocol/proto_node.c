/*
 * protocol/proto_node.c - the node-to-node frames (proto_node.h,
 * docs/protocol.md "Node-to-node"): the header, the opcode table and the
 * fourteen body codecs.
 *
 * Invariants:
 *   1. Opcode names, values and codecs come only from PROTO_NODE_OP_MAP:
 *      the enum, proto_node_op_name and the choice of codec per direction
 *      cannot disagree.
 *   2. One writer and one reader per codec; the encoder and the decoder
 *      share the layout through them, and the generic proto_node_encode /
 *      proto_node_decode pick them from the table, so an encoded frame
 *      always decodes (encoders check what decoders refuse).
 *   3. The body cursors are protocol/proto_int.h's: every count becomes
 *      bytes with overflow checks and is compared with what is left before
 *      a pointer is formed; u64 arrays come first, then u32 and float
 *      arrays, then bytes, each padded to 8, so every array is 8-aligned
 *      in an 8-aligned frame.
 *   4. The header is decided first and whole (magic, version, flags,
 *      opcode, status against direction, body_len against what is there),
 *      so garbage gets the most basic complaint.
 */
#include <string.h>

#include "base/error_int.h"
#include "protocol/proto_int.h"
#include "protocol/proto_node.h"

#define GRADS_FLAGS (PROTO_NODE_GRADS_MAPPED | PROTO_NODE_GRADS_WEIGHTED)

enum node_codec { C_EMPTY, C_SEL, C_GRADS, C_STEP, C_ADMIN, C_TICKET, C_VECS, C_ROWS, C_SCAN, C_PAGE, C_LOAD, C_STATS, C_CKPT, C_ECHO };

bool proto_node_op_known(uint16_t op)
{
	switch (op) {
#define NODE_KNOWN_(NAME, name, value, rq, rs) \
	case (value):                          \
		return true;
		PROTO_NODE_OP_MAP(NODE_KNOWN_)
#undef NODE_KNOWN_
	}
	return false;
}

const char *proto_node_op_name(uint16_t op)
{
	switch (op) {
#define NODE_NAME_(NAME, name, value, rq, rs) \
	case (value):                         \
		return #NAME;
		PROTO_NODE_OP_MAP(NODE_NAME_)
#undef NODE_NAME_
	}
	return "UNKNOWN";
}

static enum node_codec codec_of(uint16_t op, bool response)
{
	switch (op) {
#define NODE_CODEC_(NAME, name, value, rq, rs) \
	case (value):                          \
		return response ? C_##rs : C_##rq;
		PROTO_NODE_OP_MAP(NODE_CODEC_)
#undef NODE_CODEC_
	}
	return C_EMPTY;
}

/* ---- header -------------------------------------------------------- */

static void hdr_write(uint8_t *out, const proto_node_hdr *h)
{
	uint32_t magic = PROTO_NODE_MAGIC, zero = 0;
	memcpy(out + 0, &magic, 4);
	out[4] = h->version;
	out[5] = h->flags;
	memcpy(out + 6, &h->opcode, 2);
	memcpy(out + 8, &h->status, 4);
	memcpy(out + 12, &h->table, 4);
	memcpy(out + 16, &h->epoch, 8);
	memcpy(out + 24, &h->body_len, 4);
	memcpy(out + 28, &zero, 4);
}

static int hdr_read(const uint8_t *p, size_t len, proto_node_hdr *h)
{
	uint32_t magic, reserved;
	memset(h, 0, sizeof(*h));
	if (len < PROTO_NODE_HDR_SIZE)
		return emdb__seterr(EMDB_ERR_PROTOCOL, "node frame of %zu bytes, shorter than its %d-byte header",
				    len, PROTO_NODE_HDR_SIZE);
	memcpy(&magic, p, 4);
	if (magic != PROTO_NODE_MAGIC)
		return emdb__seterr(EMDB_ERR_PROTOCOL, "node frame: bad magic %02x %02x %02x %02x, expected \"EMDN\"",
				    p[0], p[1], p[2], p[3]);
	h->version = p[4];
	h->flags = p[5];
	memcpy(&h->opcode, p + 6, 2);
	memcpy(&h->status, p + 8, 4);
	memcpy(&h->table, p + 12, 4);
	memcpy(&h->epoch, p + 16, 8);
	memcpy(&h->body_len, p + 24, 4);
	memcpy(&reserved, p + 28, 4);
	if (h->version != PROTO_NODE_VERSION)
		return emdb__seterr(EMDB_ERR_UNSUPPORTED, "node frame: version %u, this node speaks %d",
				    h->version, PROTO_NODE_VERSION);
	if (h->flags & ~PROTO_NODE_FLAG_RESPONSE)
		return emdb__seterr(EMDB_ERR_PROTOCOL, "node frame: unknown flags 0x%02x", h->flags);
	bool resp = h->flags & PROTO_NODE_FLAG_RESPONSE;
	if (!proto_node_op_known(h->opcode) && !(h->opcode == PROTO_NODE_NONE && resp && h->status < 0))
		return emdb__seterr(EMDB_ERR_PROTOCOL, "node frame: unknown opcode 0x%04x", h->opcode);
	if (!resp && h->status != 0)
		return emdb__seterr(EMDB_ERR_PROTOCOL, "node %s request with status %d",
				    proto_node_op_name(h->opcode), (int)h->status);
	if (resp && h->status > 0)
		return emdb__seterr(EMDB_ERR_PROTOCOL, "node %s response with status %d",
				    proto_node_op_name(h->opcode), (int)h->status);
	if (reserved)
		return emdb__seterr(EMDB_ERR_PROTOCOL, "node %s: reserved header bytes must be zero",
				    proto_node_op_name(h->opcode));
	if (h->body_len % PROTO_ALIGN)
		return emdb__seterr(EMDB_ERR_PROTOCOL, "node %s: body_len %u is not a multiple of 8",
				    proto_node_op_name(h->opcode), h->body_len);
	if (h->body_len != len - PROTO_NODE_HDR_SIZE)
		return emdb__seterr(EMDB_ERR_PROTOCOL, "node %s: body_len %u, the frame holds %zu body bytes",
				    proto_node_op_name(h->opcode), h->body_len, len - PROTO_NODE_HDR_SIZE);
	return EMDB_OK;
}

/* ---- writers --------------------------------------------------------- */

/* An array copied from p, or reserved (zeroed) where p is NULL; *at gets
 * where it landed (NULL when count is 0 or it does not fit). */
static void wr_arr(proto_wr *w, const void *p, uint64_t count, size_t elsize, const char *field,
		   void **at)
{
	void *dst = NULL;
	size_t before = w->off;
	if (p)
		wr_array(w, p, count, elsize, field);
	else if ((dst = wr_reserve(w, count, elsize, field)) != NULL && !w->caller_fills)
		memset(dst, 0, (size_t)(w->off - before));
	if (at)
		*at = count && w->off <= w->cap && !w->err ? w->buf + before : NULL;
	wr_pad(w);
}

static void sel_write(proto_wr *w, uint16_t op, const proto_node_sel *m, proto_node_where *at)
{
	bool ids_only = op == PROTO_NODE_PREFETCH || op == PROTO_NODE_LOOKUP || op == PROTO_NODE_READ_STATE;
	if ((ids_only && m->ticket) || (op == PROTO_NODE_TICKET_FREE && (!m->ticket || m->n)))
		proto__wr_fail(w, "node %s with ticket %llu and n %u", proto_node_op_name(op),
			       (unsigned long long)m->ticket, m->n);
	if (m->flags & ~(uint32_t)(op == PROTO_NODE_LOOKUP ? PROTO_NODE_SEL_FOUND : 0))
		proto__wr_fail(w, "node %s with flags 0x%x", proto_node_op_name(op), m->flags);
	if ((op == PROTO_NODE_PULL || op == PROTO_NODE_LOOKUP) != (m->dim != 0))
		proto__wr_fail(w, "node %s with dim %u", proto_node_op_name(op), m->dim);
	wr_u64(w, m->ticket);
	wr_u32(w, m->n);
	wr_u32(w, m->dim);
	wr_u32(w, m->flags);
	wr_zero(w, 4);
	if (!m->ticket)
		wr_arr(w, m->ids, m->n, 8, "ids", (void **)&at->ids);
}

static void grads_write(proto_wr *w, uint16_t op, const proto_node_grads *m, proto_node_where *at)
{
	bool mapped = m->flags & PROTO_NODE_GRADS_MAPPED;
	bool weighted = m->flags & PROTO_NODE_GRADS_WEIGHTED;
	if ((m->flags & ~(uint32_t)GRADS_FLAGS) || (mapped && op == PROTO_NODE_PUSH_UPDATE) || (weighted && !mapped) ||
	    !m->dim)
		proto__wr_fail(w, "node %s with flags 0x%x, dim %u", proto_node_op_name(op), m->flags, m->dim);
	if (!mapped && m->n_rows != m->n)
		proto__wr_fail(w, "%u gradient rows for %u positions", m->n_rows, m->n);
	if (mapped && m->row_of)
		for (uint32_t i = 0; i < m->n && !w->err; i++)
			if (m->row_of[i] >= m->n_rows)
				proto__wr_fail(w, "row_of[%u] = %u, only %u rows", i, m->row_of[i], m->n_rows);
	wr_u64(w, m->ticket);
	wr_u32(w, m->n);
	wr_u32(w, m->dim);
	wr_u32(w, m->n_rows);
	wr_u32(w, m->flags);
	if (op == PROTO_NODE_PUSH_RANKED) {
		if (m->rank >= EMDB_WORKERS_MAX)
			proto__wr_fail(w, "node %s: worker rank %u", proto_node_op_name(op), m->rank);
		wr_u32(w, m->rank);
		wr_zero(w, 4);
	} else if (m->rank) {
		proto__wr_fail(w, "node %s with a worker rank", proto_node_op_name(op));
	}
	if (!m->ticket)
		wr_arr(w, m->ids, m->n, 8, "ids", (void **)&at->ids);
	if (mapped) {
		wr_arr(w, m->row_of, m->n, 4, "row_of", (void **)&at->row_of);
		wr_arr(w, m->scale, weighted ? m->n : m->n_rows, 4, "scale", (void **)&at->scale);
	}
	wr_arr(w, m->grads, (uint64_t)m->n_rows * m->dim, 4, "grads", (void **)&at->floats);
}

static void admin_write(proto_wr *w, uint16_t op, const proto_node_admin *m)
{
	if (m->action < PROTO_NODE_ADMIN_CREATE || m->action > PROTO_NODE_ADMIN_ALTER ||
	    (m->action != PROTO_NODE_ADMIN_RESERVE && m->rows) || (op != PROTO_NODE_TABLE_ADMIN && !m->txn))
		proto__wr_fail(w, "node %s: action %u, rows %llu, txn %llu", proto_node_op_name(op), m->action,
			       (unsigned long long)m->rows, (unsigned long long)m->txn);
	wr_u32(w, m->action);
	wr_u32(w, m->id);
	wr_u64(w, m->txn);
	wr_u64(w, m->rows);
	if (m->action == PROTO_NODE_ADMIN_CREATE)
		proto__cfg_encode(w, &m->cfg);
	else if (m->action == PROTO_NODE_ADMIN_ALTER)
		proto__opt_encode(w, &m->opt);
}

/* What a CKPT body of op may hold (response: CKPT_WRITE's answer); the
 * writer and the reader share it.  NULL when it is right, else why not. */
static const char *ckpt_wrong(uint16_t op, bool resp, const proto_node_ckpt *m)
{
	if (m->kind != 1 && m->kind != 2)
		return "kind (1 full, 2 incremental)";
	if (m->flags & ~(uint32_t)PROTO_NODE_CKPT_COMMIT)
		return "flags";
	if (op != PROTO_NODE_CKPT_END && m->flags)
		return "flags outside CKPT_END";
	if (op == PROTO_NODE_CKPT_ASK ? m->id != 0 : op != PROTO_NODE_CKPT_RESTORE && m->id == 0)
		return "id (0 in CKPT_ASK and CKPT_RESTORE only)";
	if (resp != (m->part != 0))
		return "part (in CKPT_WRITE's response only)";
	if (!resp && m->rows)
		return "rows (in CKPT_WRITE's response only)";
	if ((op == PROTO_NODE_CKPT_HOLD && !resp) != (m->timeout_ms != 0))
		return "timeout_ms (in CKPT_HOLD only)";
	return NULL;
}

static void ckpt_write(proto_wr *w, uint16_t op, bool resp, const proto_node_ckpt *m)
{
	const char *bad = ckpt_wrong(op, resp, m);
	if (bad)
		proto__wr_fail(w, "node %s: bad %s", proto_node_op_name(op), bad);
	wr_u32(w, m->kind);
	wr_u32(w, m->flags);
	wr_u64(w, m->id);
	wr_u64(w, m->part);
	wr_u64(w, m->rows);
	wr_u32(w, m->timeout_ms);
	wr_zero(w, 4);
}

static void vecs_write(proto_wr *w, const proto_node_vecs *m, proto_node_where *at)
{
	if (m->flags & ~(uint32_t)PROTO_NODE_VECS_FOUND)
		proto__wr_fail(w, "node vectors with flags 0x%x", m->flags);
	for (uint32_t i = 0; m->found && (m->flags & PROTO_NODE_VECS_FOUND) && i < m->n; i++)
		if (m->found[i] > 1)
			proto__wr_fail(w, "found[%u] = %u", i, m->found[i]);
	wr_u32(w, m->n);
	wr_u32(w, m->width);
	wr_u32(w, m->flags);
	wr_zero(w, 4);
	wr_arr(w, m->vecs, (uint64_t)m->n * m->width, 4, "vecs", (void **)&at->floats);
	if (m->flags & PROTO_NODE_VECS_FOUND)
		wr_arr(w, m->found, m->n, 1, "found", (void **)&at->found);
}

/* PAGE and LOAD: ids, vecs and state arrays after their counts. */
static void rows_write(proto_wr *w, uint32_t n, uint32_t dim, uint32_t per_row, const uint64_t *ids,
		       const float *vecs, const float *state, proto_node_where *at)
{
	wr_arr(w, ids, n, 8, "ids", (void **)&at->ids);
	wr_arr(w, vecs, (uint64_t)n * dim, 4, "vecs", (void **)&at->floats);
	if (per_row)
		wr_arr(w, state, (uint64_t)n * per_row, 4, "state", (void **)&at->state);
}

static void page_write(proto_wr *w, const proto_node_page *m, proto_node_where *at)
{
	if (!m->dim)
		proto__wr_fail(w, "node page of dim 0");
	wr_u32(w, m->n);
	wr_u32(w, m->dim);
	wr_u32(w, m->per_row);
	wr_zero(w, 4);
	wr_u64(w, m->next_cursor);
	wr_u64(w, m->step);
	rows_write(w, m->n, m->dim, m->per_row, m->ids, m->vecs, m->state, at);
}

static void load_write(proto_wr *w, const proto_node_load *m, proto_node_where *at)
{
	if (!m->dim || !m->n)
		proto__wr_fail(w, "node LOAD of %u rows of dim %u", m->n, m->dim);
	wr_u32(w, m->n);
	wr_u32(w, m->dim);
	wr_u32(w, m->per_row);
	wr_zero(w, 4);
	rows_write(w, m->n, m->dim, m->per_row, m->ids, m->vecs, m->state, at);
}

static void stats_write(proto_wr *w, const proto_node_stats *m)
{
#define NODE_STAT_WR_(f) wr_u64(w, m->stats.f);
	PROTO_TABLE_STATS_FIELDS(NODE_STAT_WR_)
#undef NODE_STAT_WR_
	wr_u64(w, m->alloc_bytes);
}

/* What an ECHO body may hold; the writer and the reader share it.  NULL
 * when it is right, else why not. */
static const char *echo_wrong(bool resp, const proto_node_echo *m, uint32_t table)
{
	if (table)
		return "table (0: an echo names none)";
	if (resp && m->reply_len)
		return "reply_len (in a request only)";
	if (m->reply_len % PROTO_ALIGN)
		return "reply_len (a multiple of 8)";
	if (m->reply_len > PROTO_NODE_FRAME_MAX - PROTO_NODE_HDR_SIZE)
		return "reply_len (a reply over the link's frame limit)";
	return NULL;
}

static void echo_write(proto_wr *w, bool resp, uint32_t table, const proto_node_echo *m)
{
	const char *bad = echo_wrong(resp, m, table);
	if (bad)
		proto__wr_fail(w, "node ECHO: bad %s", bad);
	if (m->len % PROTO_ALIGN)
		proto__wr_fail(w, "node ECHO: payload of %u bytes, not a multiple of 8", m->len);
	if (!resp) {
		wr_u32(w, m->reply_len);
		wr_zero(w, 4);
	}
	wr_arr(w, m->payload, m->len, 1, "payload", NULL);
}

static int node_wr_end(proto_wr *w, const proto_node_hdr *h, size_t *len)
{
	proto_node_hdr hh = *h;
	hh.version = PROTO_NODE_VERSION;
	*len = 0;
	if (w->err)
		return w->err;
	if (w->off - PROTO_NODE_HDR_SIZE > UINT32_MAX)
		return proto__wr_fail(w, "node %s body of %zu bytes exceeds 4 GiB",
				      proto_node_op_name(h->opcode), w->off - PROTO_NODE_HDR_SIZE);
	hh.body_len = (uint32_t)(w->off - PROTO_NODE_HDR_SIZE);
	*len = w->off;
	if (w->off > w->cap && !w->buf)
		return EMDB_ERR_LIMIT;
	if (w->off > w->cap)
		return emdb__seterr(EMDB_ERR_LIMIT, "node %s frame needs %zu bytes, the buffer has %zu",
				    proto_node_op_name(h->opcode), w->off, w->cap);
	hdr_write(w->buf, &hh);
	return EMDB_OK;
}

static void node_wr_begin(proto_wr *w, uint8_t *buf, size_t cap)
{
	wr_begin(w, buf, cap);
	w->off = PROTO_NODE_HDR_SIZE;
}

static void err_write(proto_wr *w, const char *msg, size_t n)
{
	wr_u32(w, (uint32_t)n);
	wr_zero(w, 4);
	wr_bytes(w, msg, n);
	wr_pad(w);
}

int proto_node_encode(uint8_t *buf, size_t cap, const proto_node_msg *m, size_t *len,
		      proto_node_where *where)
{
	proto_node_where scratch;
	proto_node_where *at = where ? where : &scratch;
	proto_wr w;
	memset(at, 0, sizeof(*at));
	node_wr_begin(&w, buf, cap);
	w.caller_fills = where != NULL; /* it writes the arrays it reserves */
	const proto_node_hdr *h = &m->hdr;
	bool resp = h->flags & PROTO_NODE_FLAG_RESPONSE;
	if (!proto_node_op_known(h->opcode) && !(h->opcode == PROTO_NODE_NONE && resp && h->status < 0))
		proto__wr_fail(&w, "unknown node opcode 0x%04x", h->opcode);
	if (h->flags & ~PROTO_NODE_FLAG_RESPONSE)
		proto__wr_fail(&w, "node frame flags 0x%02x", h->flags);
	if (resp ? h->status > 0 : h->status != 0)
		proto__wr_fail(&w, "node frame status %d", (int)h->status);
	if (resp && h->status < 0) {
		size_t n = m->u.err.len;
		if ((n && !m->u.err.p) || n > PROTO_ERRMSG_MAX)
			proto__wr_fail(&w, "error message of %zu bytes", n);
		err_write(&w, m->u.err.p, n);
		return node_wr_end(&w, h, len);
	}
	switch (codec_of(h->opcode, resp)) {
	case C_EMPTY:
		break;
	case C_SEL:
		sel_write(&w, h->opcode, &m->u.sel, at);
		break;
	case C_GRADS:
		grads_write(&w, h->opcode, &m->u.grads, at);
		break;
	case C_STEP:
		if (h->opcode == PROTO_NODE_STEP_LEAVE ? m->u.step.workers || m->u.step.timeout_ms : m->u.step.workers < 2)
			proto__wr_fail(&w, "node %s of %u workers, timeout %u", proto_node_op_name(h->opcode),
				       m->u.step.workers, m->u.step.timeout_ms);
		wr_u32(&w, m->u.step.workers);
		wr_u32(&w, m->u.step.timeout_ms);
		wr_u64(&w, m->u.step.worker);
		if (h->opcode == PROTO_NODE_STEP_ARRIVE_SEQ) {
			if (!m->u.step.seq || m->u.step.rank >= EMDB_WORKERS_MAX)
				proto__wr_fail(&w, "node STEP_ARRIVE_SEQ of seq %llu, rank %u",
					       (unsigned long long)m->u.step.seq, m->u.step.rank);
			wr_u64(&w, m->u.step.seq);
			wr_u64(&w, m->u.step.session);
			wr_u32(&w, m->u.step.rank);
			wr_u32(&w, 0);
		}
		break;
	case C_ADMIN:
		admin_write(&w, h->opcode, &m->u.admin);
		break;
	case C_TICKET:
		if (!m->u.ticket.handle)
			proto__wr_fail(&w, "ticket handle 0");
		wr_u64(&w, m->u.ticket.handle);
		wr_u32(&w, m->u.ticket.count);
		wr_zero(&w, 4);
		break;
	case C_VECS:
		vecs_write(&w, &m->u.vecs, at);
		break;
	case C_ROWS:
		wr_u64(&w, m->u.rows.rows);
		break;
	case C_SCAN:
		if (!m->u.scan.max_rows || !m->u.scan.dim || (m->u.scan.flags & ~(uint32_t)PROTO_NODE_SCAN_STATE))
			proto__wr_fail(&w, "node SCAN of %u rows, dim %u, flags 0x%x", m->u.scan.max_rows, m->u.scan.dim,
				       m->u.scan.flags);
		wr_u64(&w, m->u.scan.cursor);
		wr_u32(&w, m->u.scan.max_rows);
		wr_u32(&w, m->u.scan.dim);
		wr_u32(&w, m->u.scan.flags);
		wr_zero(&w, 4);
		break;
	case C_PAGE:
		page_write(&w, &m->u.page, at);
		break;
	case C_LOAD:
		load_write(&w, &m->u.load, at);
		break;
	case C_STATS:
		stats_write(&w, &m->u.stats);
		break;
	case C_CKPT:
		ckpt_write(&w, h->opcode, resp, &m->u.ckpt);
		break;
	case C_ECHO:
		echo_write(&w, resp, h->table, &m->u.echo);
		break;
	}
	return node_wr_end(&w, h, len);
}

int proto_node_err_encode(uint8_t *buf, size_t cap, uint16_t op, uint32_t table, uint64_t epoch,
			  int status, const char *msg, size_t *len)
{
	proto_node_msg m = { .hdr = { PROTO_NODE_VERSION, PROTO_NODE_FLAG_RESPONSE, op, status, table, epoch, 0 } };
	size_t n = msg ? strnlen(msg, PROTO_ERRMSG_MAX + 1) : 0;
	if (n > PROTO_ERRMSG_MAX) { /* cut at a UTF-8 character boundary */
		n = PROTO_ERRMSG_MAX;
		while (n && ((unsigned char)msg[n] & 0xC0) == 0x80)
			n--;
	}
	if (status >= 0) {
		*len = 0;
		return emdb__seterr(EMDB_ERR_INVALID, "node error reply with status %d", status);
	}
	m.u.err = (proto_str){ msg, (uint32_t)n };
	return proto_node_encode(buf, cap, &m, len, NULL);
}

/* ---- readers --------------------------------------------------------- */

static const void *rd_arr(proto_rd *r, uint64_t count, size_t elsize, const char *field)
{
	const void *p = rd_array(r, count, elsize, field);
	rd_pad(r);
	return p;
}

static void sel_read(proto_rd *r, uint16_t op, proto_node_sel *m)
{
	m->ticket = rd_u64(r, "ticket");
	m->n = rd_u32(r, "n");
	m->dim = rd_u32(r, "dim");
	m->flags = rd_u32(r, "flags");
	rd_zero(r, 4, "reserved");
	m->ids = m->ticket ? NULL : rd_arr(r, m->n, 8, "ids");
	if (r->err)
		return;
	bool ids_only = op == PROTO_NODE_PREFETCH || op == PROTO_NODE_LOOKUP || op == PROTO_NODE_READ_STATE;
	if (ids_only && m->ticket)
		proto__rd_fail(r, "ticket %llu where only IDs are taken", (unsigned long long)m->ticket);
	else if (op == PROTO_NODE_TICKET_FREE && (!m->ticket || m->n))
		proto__rd_fail(r, "ticket %llu and n %u: a ticket and no IDs", (unsigned long long)m->ticket, m->n);
	else if (m->flags & ~(uint32_t)(op == PROTO_NODE_LOOKUP ? PROTO_NODE_SEL_FOUND : 0))
		proto__rd_fail(r, "flags 0x%x", m->flags);
	else if ((op == PROTO_NODE_PULL || op == PROTO_NODE_LOOKUP) != (m->dim != 0))
		proto__rd_fail(r, "dim %u", m->dim);
}

static void grads_read(proto_rd *r, uint16_t op, proto_node_grads *m)
{
	m->ticket = rd_u64(r, "ticket");
	m->n = rd_u32(r, "n");
	m->dim = rd_u32(r, "dim");
	m->n_rows = rd_u32(r, "n_rows");
	m->flags = rd_u32(r, "flags");
	m->rank = 0;
	if (op == PROTO_NODE_PUSH_RANKED) {
		m->rank = rd_u32(r, "rank");
		rd_zero(r, 4, "reserved");
		if (!r->err && m->rank >= EMDB_WORKERS_MAX)
			proto__rd_fail(r, "worker rank %u, not below %u", m->rank, EMDB_WORKERS_MAX);
	}
	bool mapped = m->flags & PROTO_NODE_GRADS_MAPPED;
	bool weighted = m->flags & PROTO_NODE_GRADS_WEIGHTED;
	if (!r->err && ((m->flags & ~(uint32_t)GRADS_FLAGS) || (weighted && !mapped)))
		proto__rd_fail(r, "flags 0x%x", m->flags);
	if (!r->err && mapped && op == PROTO_NODE_PUSH_UPDATE)
		proto__rd_fail(r, "gradient rows mapped to positions: PUSH_UPDATE takes one row per position");
	if (!r->err && !mapped && m->n_rows != m->n)
		proto__rd_fail(r, "n_rows %u for n %u positions", m->n_rows, m->n);
	m->ids = m->ticket ? NULL : rd_arr(r, m->n, 8, "ids");
	m->row_of = mapped ? rd_arr(r, m->n, 4, "row_of") : NULL;
	m->scale = mapped ? rd_arr(r, weighted ? m->n : m->n_rows, 4, "scale") : NULL;
	m->grads = rd_arr(r, (uint64_t)m->n_rows * m->dim, 4, "grads");
	for (uint32_t i = 0; mapped && !r->err && i < m->n; i++)
		if (m->row_of[i] >= m->n_rows)
			proto__rd_fail(r, "row_of[%u] = %u, past the %u rows sent", i, m->row_of[i], m->n_rows);
	if (!r->err && !m->dim)
		proto__rd_fail(r, "dim 0");
}

static void admin_read(proto_rd *r, uint16_t op, proto_node_admin *m)
{
	m->action = rd_u32(r, "action");
	m->id = rd_u32(r, "id");
	m->txn = rd_u64(r, "txn");
	m->rows = rd_u64(r, "rows");
	memset(&m->cfg, 0, sizeof(m->cfg));
	memset(&m->opt, 0, sizeof(m->opt));
	if (r->err)
		return;
	if (m->action < PROTO_NODE_ADMIN_CREATE || m->action > PROTO_NODE_ADMIN_ALTER)
		proto__rd_fail(r, "unknown action %u", m->action);
	else if (m->action == PROTO_NODE_ADMIN_CREATE)
		proto__cfg_decode(r, &m->cfg);
	else if (m->action == PROTO_NODE_ADMIN_ALTER)
		proto__opt_decode(r, &m->opt);
	if (!r->err && m->action != PROTO_NODE_ADMIN_RESERVE && m->rows)
		proto__rd_fail(r, "rows %llu outside RESERVE", (unsigned long long)m->rows);
	if (!r->err && op != PROTO_NODE_TABLE_ADMIN && !m->txn)
		proto__rd_fail(r, "transaction number 0");
}

static void ckpt_read(proto_rd *r, uint16_t op, bool resp, proto_node_ckpt *m)
{
	m->kind = rd_u32(r, "kind");
	m->flags = rd_u32(r, "flags");
	m->id = rd_u64(r, "id");
	m->part = rd_u64(r, "part");
	m->rows = rd_u64(r, "rows");
	m->timeout_ms = rd_u32(r, "timeout_ms");
	rd_zero(r, 4, "reserved");
	const char *bad = r->err ? NULL : ckpt_wrong(op, resp, m);
	if (bad)
		proto__rd_fail(r, "bad %s", bad);
}

static void vecs_read(proto_rd *r, proto_node_vecs *m)
{
	m->n = rd_u32(r, "n");
	m->width = rd_u32(r, "width");
	m->flags = rd_u32(r, "flags");
	rd_zero(r, 4, "reserved");
	if (!r->err && (m->flags & ~(uint32_t)PROTO_NODE_VECS_FOUND))
		proto__rd_fail(r, "flags 0x%x", m->flags);
	m->vecs = rd_arr(r, (uint64_t)m->n * m->width, 4, "vecs");
	m->found = (m->flags & PROTO_NODE_VECS_FOUND) ? rd_arr(r, m->n, 1, "found") : NULL;
	for (uint32_t i = 0; m->found && !r->err && i < m->n; i++)
		if (m->found[i] > 1)
			proto__rd_fail(r, "found[%u] = %u, not 0 or 1", i, m->found[i]);
}

static void rows_read(proto_rd *r, uint32_t n, uint32_t dim, uint32_t per_row, const uint64_t **ids,
		      const float **vecs, const float **state)
{
	*ids = rd_arr(r, n, 8, "ids");
	*vecs = rd_arr(r, (uint64_t)n * dim, 4, "vecs");
	*state = per_row ? rd_arr(r, (uint64_t)n * per_row, 4, "state") : NULL;
}

static void page_read(proto_rd *r, proto_node_page *m)
{
	m->n = rd_u32(r, "n");
	m->dim = rd_u32(r, "dim");
	m->per_row = rd_u32(r, "per_row");
	rd_zero(r, 4, "reserved");
	m->next_cursor = rd_u64(r, "next_cursor");
	m->step = rd_u64(r, "step");
	if (!r->err && !m->dim)
		proto__rd_fail(r, "dim 0");
	if (!r->err)
		rows_read(r, m->n, m->dim, m->per_row, &m->ids, &m->vecs, &m->state);
}

static void load_read(proto_rd *r, proto_node_load *m)
{
	m->n = rd_u32(r, "n");
	m->dim = rd_u32(r, "dim");
	m->per_row = rd_u32(r, "per_row");
	rd_zero(r, 4, "reserved");
	if (!r->err && (!m->n || !m->dim))
		proto__rd_fail(r, "%u rows of dim %u: a load has rows and a dim", m->n, m->dim);
	if (!r->err)
		rows_read(r, m->n, m->dim, m->per_row, &m->ids, &m->vecs, &m->state);
}

/* The payload is the rest of the body, a multiple of 8 (hdr_read). */
static void echo_read(proto_rd *r, bool resp, uint32_t table, proto_node_echo *m)
{
	m->reply_len = 0;
	if (!resp) {
		m->reply_len = rd_u32(r, "reply_len");
		rd_zero(r, 4, "reserved");
	}
	m->len = r->err ? 0 : (uint32_t)(r->len - r->off);
	m->payload = rd_arr(r, m->len, 1, "payload");
	const char *bad = r->err ? NULL : echo_wrong(resp, m, table);
	if (bad)
		proto__rd_fail(r, "bad %s", bad);
}

uint16_t proto_node_peek_op(const uint8_t *frame, size_t len)
{
	uint16_t op = PROTO_NODE_NONE;
	if (len >= PROTO_NODE_HDR_SIZE)
		memcpy(&op, frame + 6, 2);
	return op;
}

int proto_node_decode(const uint8_t *frame, size_t len, proto_node_msg *m)
{
	memset(m, 0, sizeof(*m));
	if (!frame || (uintptr_t)frame % PROTO_ALIGN)
		return emdb__seterr(EMDB_ERR_INVALID, "node frame at %p: NULL or not 8-aligned",
				    (const void *)frame);
	int rc = hdr_read(frame, len, &m->hdr);
	if (rc)
		return rc;
	const proto_node_hdr *h = &m->hdr;
	bool resp = h->flags & PROTO_NODE_FLAG_RESPONSE;
	proto_rd r = { .p = frame + PROTO_NODE_HDR_SIZE, .len = h->body_len, .op = h->opcode, .response = resp };
	if (resp && h->status < 0) {
		uint32_t n = rd_u32(&r, "message length");
		rd_zero(&r, 4, "reserved");
		m->u.err = rd_str(&r, n, PROTO_ERRMSG_MAX, "message");
		rd_pad(&r);
		return rd_end(&r);
	}
	switch (codec_of(h->opcode, resp)) {
	case C_EMPTY:
		break;
	case C_SEL:
		sel_read(&r, h->opcode, &m->u.sel);
		break;
	case C_GRADS:
		grads_read(&r, h->opcode, &m->u.grads);
		break;
	case C_STEP:
		m->u.step.workers = rd_u32(&r, "workers");
		m->u.step.timeout_ms = rd_u32(&r, "timeout_ms");
		m->u.step.worker = rd_u64(&r, "worker");
		m->u.step.seq = m->u.step.session = 0;
		m->u.step.rank = 0;
		if (h->opcode == PROTO_NODE_STEP_ARRIVE_SEQ) {
			m->u.step.seq = rd_u64(&r, "seq");
			m->u.step.session = rd_u64(&r, "session");
			m->u.step.rank = rd_u32(&r, "rank");
			uint32_t zero = rd_u32(&r, "reserved");
			if (!r.err && (!m->u.step.seq || m->u.step.rank >= EMDB_WORKERS_MAX || zero))
				proto__rd_fail(&r, "seq %llu, rank %u, reserved %u: seq >= 1, rank < %u, reserved 0",
					       (unsigned long long)m->u.step.seq, m->u.step.rank, zero,
					       EMDB_WORKERS_MAX);
		}
		if (!r.err && h->opcode != PROTO_NODE_STEP_LEAVE && m->u.step.workers < 2)
			proto__rd_fail(&r, "%u workers: a synchronous step has 2 or more", m->u.step.workers);
		if (!r.err && h->opcode == PROTO_NODE_STEP_LEAVE && (m->u.step.workers || m->u.step.timeout_ms))
			proto__rd_fail(&r, "workers %u and timeout %u: both 0 in a leave", m->u.step.workers,
				       m->u.step.timeout_ms);
		break;
	case C_ADMIN:
		admin_read(&r, h->opcode, &m->u.admin);
		break;
	case C_TICKET:
		m->u.ticket.handle = rd_u64(&r, "ticket");
		m->u.ticket.count = rd_u32(&r, "count");
		rd_zero(&r, 4, "reserved");
		if (!r.err && !m->u.ticket.handle)
			proto__rd_fail(&r, "ticket handle 0");
		break;
	case C_VECS:
		vecs_read(&r, &m->u.vecs);
		break;
	case C_ROWS:
		m->u.rows.rows = rd_u64(&r, "rows");
		break;
	case C_SCAN:
		m->u.scan.cursor = rd_u64(&r, "cursor");
		m->u.scan.max_rows = rd_u32(&r, "max_rows");
		m->u.scan.dim = rd_u32(&r, "dim");
		m->u.scan.flags = rd_u32(&r, "flags");
		rd_zero(&r, 4, "reserved");
		if (!r.err && (!m->u.scan.max_rows || !m->u.scan.dim))
			proto__rd_fail(&r, "max_rows %u, dim %u: both at least 1", m->u.scan.max_rows, m->u.scan.dim);
		else if (!r.err && (m->u.scan.flags & ~(uint32_t)PROTO_NODE_SCAN_STATE))
			proto__rd_fail(&r, "flags 0x%x", m->u.scan.flags);
		break;
	case C_PAGE:
		page_read(&r, &m->u.page);
		break;
	case C_LOAD:
		load_read(&r, &m->u.load);
		break;
	case C_STATS:
#define NODE_STAT_RD_(f) m->u.stats.stats.f = rd_u64(&r, "stats." #f);
		PROTO_TABLE_STATS_FIELDS(NODE_STAT_RD_)
#undef NODE_STAT_RD_
		m->u.stats.alloc_bytes = rd_u64(&r, "alloc_bytes");
		break;
	case C_CKPT:
		ckpt_read(&r, h->opcode, resp, &m->u.ckpt);
		break;
	case C_ECHO:
		echo_read(&r, resp, h->table, &m->u.echo);
		break;
	}
	return rd_end(&r);
}
