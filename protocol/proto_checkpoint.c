/*
 * protocol/proto_checkpoint.c - bodies of the persistence opcodes:
 * CHECKPOINT, RESTORE, JOB_STATUS, CHECKPOINT_LIST, CHECKPOINT_DELETE
 * (docs/protocol.md, "Persistence").
 *
 * Invariants:
 *   1. A checkpoint's description is one 80-byte record with the layout of
 *      emdb_ckpt_info (the static asserts below tie the two), written and
 *      read field by field in JOB_STATUS and used in place in
 *      CHECKPOINT_LIST.  No field of it is reserved, so any 80 bytes are a
 *      record; kind is carried as sent.
 *   2. emdb_progress crosses as its phase, four reserved zero bytes and
 *      its eight counters, so it too has the struct's layout.
 *   3. Enum-valued fields (checkpoint kind, job kind and state, phase) are
 *      u32 on the wire and judged by their users, never by the decoder;
 *      every body is a fixed part plus, for JOB_STATUS, a message of at
 *      most PROTO_ERRMSG_MAX bytes and its padding.
 */
#include "base/error_int.h"
#include "protocol/proto_int.h"

_Static_assert(sizeof(emdb_ckpt_info) == PROTO_CKPT_INFO_SIZE &&
		       offsetof(emdb_ckpt_info, kind) == 8 &&
		       offsetof(emdb_ckpt_info, tables) == 12 &&
		       offsetof(emdb_ckpt_info, parent) == 16 &&
		       offsetof(emdb_ckpt_info, bytes) == 72 && sizeof(emdb_ckpt_kind) == 4,
	       "emdb_ckpt_info changed: update the checkpoint record and docs/protocol.md");
_Static_assert(sizeof(emdb_progress) == 72 && offsetof(emdb_progress, rows_done) == 8 &&
		       offsetof(emdb_progress, ckpt_id) == 64 && sizeof(emdb_job_phase) == 4,
	       "emdb_progress changed: update JOB_STATUS and docs/protocol.md");

/* ---- the checkpoint record and the progress block ------------------- */

static void info_encode(proto_wr *w, const emdb_ckpt_info *c)
{
	wr_u64(w, c->id);
	wr_u32(w, (uint32_t)c->kind);
	wr_u32(w, c->tables);
	wr_u64(w, c->parent);
	wr_u64(w, c->base);
	wr_u64(w, c->created_ms);
	wr_u64(w, c->duration_ms);
	wr_u64(w, c->max_step);
	wr_u64(w, c->rows);
	wr_u64(w, c->rows_total);
	wr_u64(w, c->bytes);
}

static void info_decode(proto_rd *r, emdb_ckpt_info *c)
{
	c->id = rd_u64(r, "result.id");
	c->kind = (emdb_ckpt_kind)rd_u32(r, "result.kind");
	c->tables = rd_u32(r, "result.tables");
	c->parent = rd_u64(r, "result.parent");
	c->base = rd_u64(r, "result.base");
	c->created_ms = rd_u64(r, "result.created_ms");
	c->duration_ms = rd_u64(r, "result.duration_ms");
	c->max_step = rd_u64(r, "result.max_step");
	c->rows = rd_u64(r, "result.rows");
	c->rows_total = rd_u64(r, "result.rows_total");
	c->bytes = rd_u64(r, "result.bytes");
}

static void progress_encode(proto_wr *w, const emdb_progress *p)
{
	wr_u32(w, (uint32_t)p->phase);
	wr_zero(w, 4);
	wr_u64(w, p->rows_done);
	wr_u64(w, p->rows_total);
	wr_u64(w, p->bytes_done);
	wr_u64(w, p->bytes_total);
	wr_u64(w, p->elapsed_ns);
	wr_u64(w, p->switch_ns);
	wr_u64(w, p->cow_rows);
	wr_u64(w, p->ckpt_id);
}

static void progress_decode(proto_rd *r, emdb_progress *p)
{
	p->phase = (emdb_job_phase)rd_u32(r, "phase");
	rd_zero(r, 4, "reserved");
	p->rows_done = rd_u64(r, "rows_done");
	p->rows_total = rd_u64(r, "rows_total");
	p->bytes_done = rd_u64(r, "bytes_done");
	p->bytes_total = rd_u64(r, "bytes_total");
	p->elapsed_ns = rd_u64(r, "elapsed_ns");
	p->switch_ns = rd_u64(r, "switch_ns");
	p->cow_rows = rd_u64(r, "cow_rows");
	p->ckpt_id = rd_u64(r, "ckpt_id");
}

/* ---- bodies that are one u64 ---------------------------------------- */

static int u64_encode(uint8_t *buf, size_t cap, uint64_t id, uint16_t op, bool response,
		      uint64_t x, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	wr_u64(&w, x);
	return wr_end(&w, op, response, 0, id, len);
}

static int u64_decode(const proto_hdr *h, const uint8_t *body, uint16_t op, bool response,
		      const char *field, uint64_t *x)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, op, response);
	if (rc)
		return rc;
	*x = rd_u64(&r, field);
	return rd_end(&r);
}

/* ---- CHECKPOINT: u32 kind, u32 reserved -> u64 job ------------------- */

int proto_checkpoint_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				const proto_checkpoint_req *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	wr_u32(&w, m->kind);
	wr_zero(&w, 4);
	return wr_end(&w, PROTO_OP_CHECKPOINT, false, 0, id, len);
}

int proto_checkpoint_req_decode(const proto_hdr *h, const uint8_t *body,
				proto_checkpoint_req *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_CHECKPOINT, false);
	if (rc)
		return rc;
	m->kind = rd_u32(&r, "kind");
	rd_zero(&r, 4, "reserved");
	return rd_end(&r);
}

int proto_checkpoint_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				 const proto_checkpoint_resp *m, size_t *len)
{
	return u64_encode(buf, cap, id, PROTO_OP_CHECKPOINT, true, m->job, len);
}

int proto_checkpoint_resp_decode(const proto_hdr *h, const uint8_t *body,
				 proto_checkpoint_resp *m)
{
	return u64_decode(h, body, PROTO_OP_CHECKPOINT, true, "job", &m->job);
}

/* ---- RESTORE: u64 checkpoint -> u64 job ----------------------------- */

int proto_restore_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_restore_req *m,
			     size_t *len)
{
	return u64_encode(buf, cap, id, PROTO_OP_RESTORE, false, m->ckpt, len);
}

int proto_restore_req_decode(const proto_hdr *h, const uint8_t *body, proto_restore_req *m)
{
	return u64_decode(h, body, PROTO_OP_RESTORE, false, "checkpoint", &m->ckpt);
}

int proto_restore_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
			      const proto_restore_resp *m, size_t *len)
{
	return u64_encode(buf, cap, id, PROTO_OP_RESTORE, true, m->job, len);
}

int proto_restore_resp_decode(const proto_hdr *h, const uint8_t *body, proto_restore_resp *m)
{
	return u64_decode(h, body, PROTO_OP_RESTORE, true, "job", &m->job);
}

/* ---- JOB_STATUS: u64 job -> 176 bytes, message, padding -------------- */

int proto_job_status_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				const proto_job_status_req *m, size_t *len)
{
	return u64_encode(buf, cap, id, PROTO_OP_JOB_STATUS, false, m->job, len);
}

int proto_job_status_req_decode(const proto_hdr *h, const uint8_t *body,
				proto_job_status_req *m)
{
	return u64_decode(h, body, PROTO_OP_JOB_STATUS, false, "job", &m->job);
}

int proto_job_status_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				 const proto_job_status_resp *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	if (wr_str_ok(&w, m->message, PROTO_ERRMSG_MAX, "message")) {
		wr_u64(&w, m->job);
		wr_u32(&w, m->kind);
		wr_u32(&w, m->state);
		progress_encode(&w, &m->progress);
		info_encode(&w, &m->result);
		wr_u32(&w, (uint32_t)m->error);
		wr_u32(&w, m->message.len);
		wr_bytes(&w, m->message.p, m->message.len);
		wr_pad(&w);
	}
	return wr_end(&w, PROTO_OP_JOB_STATUS, true, 0, id, len);
}

int proto_job_status_resp_decode(const proto_hdr *h, const uint8_t *body,
				 proto_job_status_resp *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_JOB_STATUS, true);
	if (rc)
		return rc;
	m->job = rd_u64(&r, "job");
	m->kind = rd_u32(&r, "kind");
	m->state = rd_u32(&r, "state");
	progress_decode(&r, &m->progress);
	info_decode(&r, &m->result);
	m->error = (int32_t)rd_u32(&r, "error");
	uint32_t n = rd_u32(&r, "message length");
	m->message = rd_str(&r, n, PROTO_ERRMSG_MAX, "message");
	rd_pad(&r);
	return rd_end(&r);
}

/* ---- CHECKPOINT_LIST: u32 n, reserved, n records ---------------------- */

int proto_checkpoint_list_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				      const proto_checkpoint_list_resp *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	if (m->n && !m->ckpts)
		proto__wr_fail(&w, "CHECKPOINT_LIST ckpts is NULL with n %u", m->n);
	wr_u32(&w, m->n);
	wr_zero(&w, 4);
	for (uint32_t i = 0; i < m->n && !w.err; i++)
		info_encode(&w, &m->ckpts[i]);
	return wr_end(&w, PROTO_OP_CHECKPOINT_LIST, true, 0, id, len);
}

int proto_checkpoint_list_resp_decode(const proto_hdr *h, const uint8_t *body,
				      proto_checkpoint_list_resp *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_CHECKPOINT_LIST, true);
	if (rc)
		return rc;
	m->n = rd_u32(&r, "n");
	rd_zero(&r, 4, "reserved");
	m->ckpts = rd_array(&r, m->n, PROTO_CKPT_INFO_SIZE, "checkpoints");
	return rd_end(&r);
}

/* ---- CHECKPOINT_DELETE: u64 checkpoint -------------------------------- */

int proto_checkpoint_delete_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				       const proto_checkpoint_delete_req *m, size_t *len)
{
	return u64_encode(buf, cap, id, PROTO_OP_CHECKPOINT_DELETE, false, m->ckpt, len);
}

int proto_checkpoint_delete_req_decode(const proto_hdr *h, const uint8_t *body,
				       proto_checkpoint_delete_req *m)
{
	return u64_decode(h, body, PROTO_OP_CHECKPOINT_DELETE, false, "checkpoint", &m->ckpt);
}
