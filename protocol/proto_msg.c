/*
 * protocol/proto_msg.c - proto_msg_decode and proto_msg_encode: dispatch
 * on (opcode, direction, status) to the one decoder or encoder of that
 * body.  Used by generic code: tests, the fuzz target, tracing tools.
 *
 * Invariants:
 *   1. Both switches are PROTO_OP_MAP expanded: a BODY column is its
 *      codec's case, an EMPTY one is proto__body_empty's, so every
 *      (opcode, direction) pair has exactly one way to be read and
 *      written; a status < 0 always means the error body.
 *   2. For every body the decoders accept, proto_msg_encode of the decoded
 *      message rebuilds the same bytes (the fuzz target checks this).
 */
#include "base/error_int.h"
#include "protocol/proto_int.h"

#define DIR_IS_RESP_req false
#define DIR_IS_RESP_resp true

int proto_msg_decode(const proto_hdr *h, const uint8_t *body, proto_msg *m)
{
	bool resp = proto_hdr_is_response(h);
	if (resp && h->status < 0)
		return proto_err_decode(h, body, &m->err);
	if (proto__body_empty(h->opcode, resp))
		return proto_empty_decode(h);
	/* Only the BODY columns of PROTO_OP_MAP get here: empty bodies
	 * returned above. */
#define DEC_EMPTY(name, dir)
#define DEC_BODY(name, dir) \
	if (resp == DIR_IS_RESP_##dir) \
		return proto_##name##_##dir##_decode(h, body, &m->name##_##dir);
#define CASE_(NAME, name, value, ver, role, rq, rs) \
	case (value):                              \
		DEC_##rq(name, req) DEC_##rs(name, resp) break;
	switch (h->opcode) {
		PROTO_OP_MAP(CASE_)
	}
#undef DEC_BODY
#undef DEC_EMPTY
#undef CASE_
	assert(!proto_op_known(h->opcode));
	return emdb__seterr(EMDB_ERR_INVALID, "no decoder for opcode 0x%04x", h->opcode);
}

int proto_msg_encode(uint8_t *buf, size_t cap, const proto_hdr *h, const proto_msg *m,
		     size_t *len)
{
	bool resp = proto_hdr_is_response(h);
	uint64_t id = h->id;
	if (resp && h->status < 0) {
		/* The error body's message is a proto_str; re-encode it verbatim. */
		proto_wr w;
		wr_begin(&w, buf, cap);
		if (wr_str_ok(&w, m->err, PROTO_ERRMSG_MAX, "message")) {
			wr_u32(&w, m->err.len);
			wr_bytes(&w, m->err.p, m->err.len);
			wr_pad(&w);
		}
		if (h->opcode != PROTO_OP_NONE && !proto_op_known(h->opcode))
			proto__wr_fail(&w, "unknown opcode 0x%04x", h->opcode);
		return wr_end(&w, h->opcode, true, h->status, id, len);
	}
	if (len)
		*len = 0;
	if (h->status != 0)
		return emdb__seterr(EMDB_ERR_INVALID, "status %d in a %s", (int)h->status,
				    resp ? "response" : "request");
	if (proto__body_empty(h->opcode, resp))
		return proto_empty_encode(buf, cap, id, h->opcode, resp, len);
#define ENC_EMPTY(name, dir)
#define ENC_BODY(name, dir) \
	if (resp == DIR_IS_RESP_##dir) \
		return proto_##name##_##dir##_encode(buf, cap, id, &m->name##_##dir, len);
#define CASE_(NAME, name, value, ver, role, rq, rs) \
	case (value):                              \
		ENC_##rq(name, req) ENC_##rs(name, resp) break;
	switch (h->opcode) {
		PROTO_OP_MAP(CASE_)
	}
#undef ENC_BODY
#undef ENC_EMPTY
#undef CASE_
	return emdb__seterr(EMDB_ERR_INVALID, "no encoder for opcode 0x%04x", h->opcode);
}
