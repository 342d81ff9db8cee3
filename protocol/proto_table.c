/*
 * protocol/proto_table.c - bodies of the table and statistics opcodes:
 * TABLE_CREATE, TABLE_DROP, TABLE_RESERVE, TABLE_ALTER, TABLE_SCAN,
 * TABLE_LOAD, TABLE_DESCRIBE, TABLE_LIST, STATS (docs/protocol.md,
 * "Tables and statistics").  TABLE_SCAN's response and TABLE_LOAD's
 * request carry arrays, laid out as the data plane's (proto_data.c,
 * invariant 1): u64 first, then f32 arrays each padded to 8.
 *
 * Invariants:
 *   1. A table configuration crosses the wire as one "config block" (the
 *      same bytes in TABLE_CREATE and TABLE_DESCRIBE): the numeric fields
 *      of emdb_table_config at fixed offsets, hyperparameters as f64, then
 *      the name.  Enum values are carried as u32 and judged by the engine.
 *   2. Names arrive as 1..63 bytes without NUL and leave as C strings in
 *      char[EMDB_NAME_MAX]; TABLE_LIST entries are checked to be exactly
 *      that in place (zeros after the name), so no copy is needed.
 *   3. Statistics go field by field in PROTO_TABLE_STATS_FIELDS order; the
 *      static asserts of proto_int.h tie that list to the engine's struct.
 */
#include "base/error_int.h"
#include "protocol/proto_int.h"

/* The optimizer's hyperparameters in the config block's order (TABLE_ALTER
 * sends them alone). */
static void hyper_encode(proto_wr *w, const emdb_optimizer *o)
{
	wr_f64(w, o->lr);
	wr_f64(w, o->eps);
	wr_f64(w, o->beta1);
	wr_f64(w, o->beta2);
	wr_f64(w, o->lr_decay);
	wr_f64(w, o->initial_accumulator);
	wr_f64(w, o->beta);
	wr_f64(w, o->l1);
	wr_f64(w, o->l2);
}

static void hyper_decode(proto_rd *r, emdb_optimizer *o)
{
	o->lr = rd_f64(r, "lr");
	o->eps = rd_f64(r, "eps");
	o->beta1 = rd_f64(r, "beta1");
	o->beta2 = rd_f64(r, "beta2");
	o->lr_decay = rd_f64(r, "lr_decay");
	o->initial_accumulator = rd_f64(r, "initial_accumulator");
	o->beta = rd_f64(r, "beta");
	o->l1 = rd_f64(r, "l1");
	o->l2 = rd_f64(r, "l2");
}

void proto__opt_encode(proto_wr *w, const emdb_optimizer *o)
{
	wr_u32(w, (uint32_t)o->kind);
	wr_zero(w, 4);
	hyper_encode(w, o);
}

void proto__opt_decode(proto_rd *r, emdb_optimizer *o)
{
	memset(o, 0, sizeof(*o));
	o->kind = (emdb_opt_kind)rd_u32(r, "optimizer kind");
	rd_zero(r, 4, "reserved");
	hyper_decode(r, o);
}

/* ---- config block: 116 bytes, name, padding ------------------------ */

void proto__cfg_encode(proto_wr *w, const emdb_table_config *c)
{
	uint32_t n = wr_name_len(w, c->name, 1, "table name");
	wr_u32(w, c->dim);
	wr_u32(w, (uint32_t)c->optimizer.kind);
	wr_u32(w, (uint32_t)c->init.kind);
	wr_u32(w, (uint32_t)c->lookup_default);
	wr_u64(w, c->seed);
	hyper_encode(w, &c->optimizer);
	wr_f64(w, c->init.a);
	wr_f64(w, c->init.b);
	wr_u32(w, n);
	wr_bytes(w, c->name, n);
	wr_pad(w);
}

void proto__cfg_decode(proto_rd *r, emdb_table_config *c)
{
	memset(c, 0, sizeof(*c));
	c->size = sizeof(*c);
	c->dim = rd_u32(r, "dim");
	c->optimizer.kind = (emdb_opt_kind)rd_u32(r, "optimizer kind");
	c->init.kind = (emdb_init_kind)rd_u32(r, "init kind");
	c->lookup_default = (emdb_default_kind)rd_u32(r, "lookup_default");
	c->seed = rd_u64(r, "seed");
	hyper_decode(r, &c->optimizer);
	c->init.a = rd_f64(r, "init a");
	c->init.b = rd_f64(r, "init b");
	uint32_t n = rd_u32(r, "name_len");
	rd_name(r, n, 1, c->name, "table name");
	rd_pad(r);
}

static void stats_encode(proto_wr *w, const emdb_table_stats *s)
{
#define PROTO_STAT_WR_(f) wr_u64(w, s->f);
	PROTO_TABLE_STATS_FIELDS(PROTO_STAT_WR_)
#undef PROTO_STAT_WR_
}

static void stats_decode(proto_rd *r, emdb_table_stats *s)
{
#define PROTO_STAT_RD_(f) s->f = rd_u64(r, "stats." #f);
	PROTO_TABLE_STATS_FIELDS(PROTO_STAT_RD_)
#undef PROTO_STAT_RD_
}

/* ---- TABLE_ALTER ---------------------------------------------------- */

int proto_table_alter_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				 const proto_table_alter_req *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	wr_u32(&w, m->table);
	wr_u32(&w, (uint32_t)m->opt.kind);
	hyper_encode(&w, &m->opt);
	return wr_end(&w, PROTO_OP_TABLE_ALTER, false, 0, id, len);
}

int proto_table_alter_req_decode(const proto_hdr *h, const uint8_t *body,
				 proto_table_alter_req *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_TABLE_ALTER, false);
	if (rc)
		return rc;
	memset(m, 0, sizeof(*m));
	m->table = rd_u32(&r, "table");
	m->opt.kind = (emdb_opt_kind)rd_u32(&r, "optimizer kind");
	hyper_decode(&r, &m->opt);
	return rd_end(&r);
}

/* ---- TABLE_SCAN and TABLE_LOAD ------------------------------------- */

int proto_table_scan_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				const proto_table_scan_req *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	if (m->flags & ~PROTO_SCAN_STATE)
		proto__wr_fail(&w, "undefined scan flags 0x%08x", m->flags);
	wr_u32(&w, m->table);
	wr_u32(&w, m->dim);
	wr_u64(&w, m->cursor);
	wr_u32(&w, m->max_rows);
	wr_u32(&w, m->flags);
	return wr_end(&w, PROTO_OP_TABLE_SCAN, false, 0, id, len);
}

int proto_table_scan_req_decode(const proto_hdr *h, const uint8_t *body,
				proto_table_scan_req *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_TABLE_SCAN, false);
	if (rc)
		return rc;
	m->table = rd_u32(&r, "table");
	m->dim = rd_u32(&r, "dim");
	m->cursor = rd_u64(&r, "cursor");
	m->max_rows = rd_u32(&r, "max_rows");
	m->flags = rd_u32(&r, "flags");
	if (!r.err && (m->flags & ~PROTO_SCAN_STATE))
		proto__rd_fail(&r, "undefined flags 0x%08x", m->flags);
	return rd_end(&r);
}

int proto_table_scan_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				 const proto_table_scan_resp *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	wr_u64(&w, m->next_cursor);
	wr_u64(&w, m->step);
	wr_u32(&w, m->n);
	wr_u32(&w, m->dim);
	wr_u32(&w, m->per_row);
	wr_zero(&w, 4);
	wr_array(&w, m->ids, m->n, 8, "ids");
	wr_array(&w, m->vecs, (uint64_t)m->n * m->dim, 4, "vecs");
	wr_pad(&w);
	wr_array(&w, m->state, (uint64_t)m->n * m->per_row, 4, "state");
	wr_pad(&w);
	return wr_end(&w, PROTO_OP_TABLE_SCAN, true, 0, id, len);
}

int proto_table_scan_resp_decode(const proto_hdr *h, const uint8_t *body,
				 proto_table_scan_resp *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_TABLE_SCAN, true);
	if (rc)
		return rc;
	m->next_cursor = rd_u64(&r, "next_cursor");
	m->step = rd_u64(&r, "step");
	m->n = rd_u32(&r, "n");
	m->dim = rd_u32(&r, "dim");
	m->per_row = rd_u32(&r, "per_row");
	rd_zero(&r, 4, "reserved");
	m->ids = rd_array(&r, m->n, 8, "ids");
	m->vecs = rd_array(&r, (uint64_t)m->n * m->dim, 4, "vecs");
	rd_pad(&r);
	m->state = rd_array(&r, (uint64_t)m->n * m->per_row, 4, "state");
	rd_pad(&r);
	return rd_end(&r);
}

static void table_load_body(proto_wr *w, const proto_table_load_req *m)
{
	wr_u32(w, m->table);
	wr_u32(w, m->dim);
	wr_u32(w, m->n);
	wr_u32(w, m->per_row);
	wr_array(w, m->ids, m->n, 8, "ids");
	wr_array(w, m->vecs, (uint64_t)m->n * m->dim, 4, "vecs");
	wr_pad(w);
	wr_array(w, m->state, (uint64_t)m->n * m->per_row, 4, "state");
	wr_pad(w);
}

int proto_table_load_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				const proto_table_load_req *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	table_load_body(&w, m);
	return wr_end(&w, PROTO_OP_TABLE_LOAD, false, 0, id, len);
}

int proto_table_load_req_iov(proto_iov *v, uint64_t id, const proto_table_load_req *m)
{
	proto_wr w;
	wr_begin_iov(&w, v);
	table_load_body(&w, m);
	return wr_end(&w, PROTO_OP_TABLE_LOAD, false, 0, id, NULL);
}

int proto_table_load_req_decode(const proto_hdr *h, const uint8_t *body,
				proto_table_load_req *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_TABLE_LOAD, false);
	if (rc)
		return rc;
	m->table = rd_u32(&r, "table");
	m->dim = rd_u32(&r, "dim");
	m->n = rd_u32(&r, "n");
	m->per_row = rd_u32(&r, "per_row");
	m->ids = rd_array(&r, m->n, 8, "ids");
	m->vecs = rd_array(&r, (uint64_t)m->n * m->dim, 4, "vecs");
	rd_pad(&r);
	m->state = rd_array(&r, (uint64_t)m->n * m->per_row, 4, "state");
	rd_pad(&r);
	return rd_end(&r);
}

/* ---- TABLE_CREATE -------------------------------------------------- */

int proto_table_create_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				  const proto_table_create_req *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	proto__cfg_encode(&w, &m->cfg);
	return wr_end(&w, PROTO_OP_TABLE_CREATE, false, 0, id, len);
}

int proto_table_create_req_decode(const proto_hdr *h, const uint8_t *body,
				  proto_table_create_req *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_TABLE_CREATE, false);
	if (rc)
		return rc;
	proto__cfg_decode(&r, &m->cfg);
	return rd_end(&r);
}

/* A body that is one table id and 4 reserved bytes. */
static int table_id_encode(uint8_t *buf, size_t cap, uint64_t id, uint16_t op, bool response,
			   uint32_t table, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	wr_u32(&w, table);
	wr_zero(&w, 4);
	return wr_end(&w, op, response, 0, id, len);
}

static int table_id_decode(const proto_hdr *h, const uint8_t *body, uint16_t op, bool response,
			   uint32_t *table)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, op, response);
	if (rc)
		return rc;
	*table = rd_u32(&r, "table");
	rd_zero(&r, 4, "reserved");
	return rd_end(&r);
}

int proto_table_create_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				   const proto_table_create_resp *m, size_t *len)
{
	return table_id_encode(buf, cap, id, PROTO_OP_TABLE_CREATE, true, m->table, len);
}

int proto_table_create_resp_decode(const proto_hdr *h, const uint8_t *body,
				   proto_table_create_resp *m)
{
	return table_id_decode(h, body, PROTO_OP_TABLE_CREATE, true, &m->table);
}

/* ---- TABLE_DROP ---------------------------------------------------- */

int proto_table_drop_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				const proto_table_drop_req *m, size_t *len)
{
	return table_id_encode(buf, cap, id, PROTO_OP_TABLE_DROP, false, m->table, len);
}

int proto_table_drop_req_decode(const proto_hdr *h, const uint8_t *body,
				proto_table_drop_req *m)
{
	return table_id_decode(h, body, PROTO_OP_TABLE_DROP, false, &m->table);
}

/* ---- TABLE_RESERVE: table id, reserved, u64 rows ------------------- */

int proto_table_reserve_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				   const proto_table_reserve_req *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	wr_u32(&w, m->table);
	wr_zero(&w, 4);
	wr_u64(&w, m->rows);
	return wr_end(&w, PROTO_OP_TABLE_RESERVE, false, 0, id, len);
}

int proto_table_reserve_req_decode(const proto_hdr *h, const uint8_t *body,
				   proto_table_reserve_req *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_TABLE_RESERVE, false);
	if (rc)
		return rc;
	m->table = rd_u32(&r, "table");
	rd_zero(&r, 4, "reserved");
	m->rows = rd_u64(&r, "rows");
	return rd_end(&r);
}

/* ---- TABLE_DESCRIBE ------------------------------------------------ */

int proto_table_describe_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				    const proto_table_describe_req *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	uint32_t n = wr_name_len(&w, m->name, m->table ? 0 : 1, "table name");
	if (m->table && n)
		proto__wr_fail(&w, "TABLE_DESCRIBE by id %u and by name at once", m->table);
	wr_u32(&w, m->table);
	wr_u32(&w, n);
	wr_bytes(&w, m->name, n);
	wr_pad(&w);
	return wr_end(&w, PROTO_OP_TABLE_DESCRIBE, false, 0, id, len);
}

int proto_table_describe_req_decode(const proto_hdr *h, const uint8_t *body,
				    proto_table_describe_req *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_TABLE_DESCRIBE, false);
	if (rc)
		return rc;
	m->table = rd_u32(&r, "table");
	uint32_t n = rd_u32(&r, "name_len");
	rd_name(&r, n, m->table ? 0 : 1, m->name, "table name");
	rd_pad(&r);
	if (!r.err && m->table && n)
		proto__rd_fail(&r, "table %u given by id and by name at once", m->table);
	return rd_end(&r);
}

int proto_table_describe_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				     const proto_table_describe_resp *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	wr_u32(&w, m->info.id);
	wr_zero(&w, 4);
	stats_encode(&w, &m->info.stats);
	proto__cfg_encode(&w, &m->info.config);
	return wr_end(&w, PROTO_OP_TABLE_DESCRIBE, true, 0, id, len);
}

int proto_table_describe_resp_decode(const proto_hdr *h, const uint8_t *body,
				     proto_table_describe_resp *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_TABLE_DESCRIBE, true);
	if (rc)
		return rc;
	m->info.id = rd_u32(&r, "table");
	rd_zero(&r, 4, "reserved");
	stats_decode(&r, &m->info.stats);
	proto__cfg_decode(&r, &m->info.config);
	return rd_end(&r);
}

/* ---- TABLE_LIST: u32 n, reserved, n entries of 72 bytes ------------ */

int proto_table_list_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				 const proto_table_list_resp *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	if (m->n && !m->entries)
		proto__wr_fail(&w, "TABLE_LIST entries is NULL with n %u", m->n);
	wr_u32(&w, m->n);
	wr_zero(&w, 4);
	for (uint32_t i = 0; i < m->n && !w.err; i++) {
		const proto_table_entry *e = &m->entries[i];
		uint32_t n = wr_name_len(&w, e->name, 1, "table name");
		wr_u32(&w, e->id);
		wr_u32(&w, n);
		wr_bytes(&w, e->name, n);
		wr_zero(&w, EMDB_NAME_MAX - n);
	}
	return wr_end(&w, PROTO_OP_TABLE_LIST, true, 0, id, len);
}

int proto_table_list_resp_decode(const proto_hdr *h, const uint8_t *body,
				 proto_table_list_resp *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_TABLE_LIST, true);
	if (rc)
		return rc;
	m->n = rd_u32(&r, "n");
	rd_zero(&r, 4, "reserved");
	m->entries = rd_array(&r, m->n, sizeof(proto_table_entry), "entries");
	for (uint32_t i = 0; i < m->n && !r.err; i++) {
		const proto_table_entry *e = &m->entries[i];
		if (e->name_len < 1 || e->name_len > PROTO_TABLE_NAME_MAX ||
		    memchr(e->name, 0, e->name_len))
			proto__rd_fail(&r, "entry %u: name_len %u is not 1..%u or the name has a NUL",
				       i, e->name_len, PROTO_TABLE_NAME_MAX);
		for (uint32_t k = e->name_len; k < EMDB_NAME_MAX && !r.err; k++)
			if (e->name[k])
				proto__rd_fail(&r, "entry %u: name byte %u after name_len %u is not zero",
					       i, k, e->name_len);
	}
	return rd_end(&r);
}

/* ---- STATS --------------------------------------------------------- */

int proto_stats_resp_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_stats_resp *m,
			    size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	wr_u64(&w, m->stats.tables);
	stats_encode(&w, &m->stats.total);
	wr_u64(&w, m->stats.alloc_bytes);
	wr_u64(&w, m->stats.alloc_peak);
	return wr_end(&w, PROTO_OP_STATS, true, 0, id, len);
}

int proto_stats_resp_decode(const proto_hdr *h, const uint8_t *body, proto_stats_resp *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_STATS, true);
	if (rc)
		return rc;
	m->stats.tables = rd_u64(&r, "tables");
	stats_decode(&r, &m->stats.total);
	m->stats.alloc_bytes = rd_u64(&r, "alloc_bytes");
	m->stats.alloc_peak = rd_u64(&r, "alloc_peak");
	return rd_end(&r);
}
