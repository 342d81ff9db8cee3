/*
 * protocol/proto_msg.c - proto_msg_decode and proto_msg_encode: dispatch
 * on (opcode, direction, status) to the one decoder or encoder of that
 * body.  Used by generic code: tests, the fuzz target, tracing tools.
 *
 * Invariants:
 *   1. Every (opcode, direction) pair of PROTO_OP_MAP has exactly one case
 *      here or is empty per proto__body_empty; a status < 0 always means
 *      the error body.  A pair with neither is a bug (asserted).
 *   2. For every body the decoders accept, proto_msg_encode of the decoded
 *      message rebuilds the same bytes (the fuzz target checks this).
 */
#include "base/error_int.h"
#include "protocol/proto_int.h"

int proto_msg_decode(const proto_hdr *h, const uint8_t *body, proto_msg *m)
{
	bool resp = proto_hdr_is_response(h);
	if (resp && h->status < 0)
		return proto_err_decode(h, body, &m->err);
	if (proto__body_empty(h->opcode, resp))
		return proto_empty_decode(h);
#define CASE_(OP, name)                                               \
	case PROTO_OP_##OP:                                           \
		return resp ? proto_##name##_resp_decode(h, body, &m->name##_resp) \
			    : proto_##name##_req_decode(h, body, &m->name##_req);
	switch (h->opcode) {
		CASE_(HELLO, hello)
		CASE_(AUTH, auth)
		CASE_(PING, ping)
		CASE_(INFO, info)
		CASE_(CONFIG_GET, config_get)
		CASE_(TABLE_CREATE, table_create)
		CASE_(TABLE_DESCRIBE, table_describe)
		CASE_(PREFETCH, prefetch)
		CASE_(PULL, pull)
		CASE_(UPDATE, update)
		CASE_(LOOKUP, lookup)
		CASE_(READ_STATE, read_state)
		CASE_(PUSH_UPDATE, push_update)
		CASE_(CHECKPOINT, checkpoint)
		CASE_(RESTORE, restore)
		CASE_(JOB_STATUS, job_status)
	case PROTO_OP_CONFIG_SET:
		return proto_config_set_req_decode(h, body, &m->config_set_req);
	case PROTO_OP_TABLE_DROP:
		return proto_table_drop_req_decode(h, body, &m->table_drop_req);
	case PROTO_OP_TABLE_RESERVE:
		return proto_table_reserve_req_decode(h, body, &m->table_reserve_req);
	case PROTO_OP_TABLE_LIST:
		return proto_table_list_resp_decode(h, body, &m->table_list_resp);
	case PROTO_OP_STATS:
		return proto_stats_resp_decode(h, body, &m->stats_resp);
	case PROTO_OP_TICKET_FREE:
		return proto_ticket_free_req_decode(h, body, &m->ticket_free_req);
	case PROTO_OP_PUSH:
		return proto_push_req_decode(h, body, &m->push_req);
	case PROTO_OP_CHECKPOINT_LIST:
		return proto_checkpoint_list_resp_decode(h, body, &m->checkpoint_list_resp);
	case PROTO_OP_CHECKPOINT_DELETE:
		return proto_checkpoint_delete_req_decode(h, body, &m->checkpoint_delete_req);
	}
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
#define CASE_(OP, name)                                                               \
	case PROTO_OP_##OP:                                                           \
		return resp ? proto_##name##_resp_encode(buf, cap, id, &m->name##_resp, len) \
			    : proto_##name##_req_encode(buf, cap, id, &m->name##_req, len);
	switch (h->opcode) {
		CASE_(HELLO, hello)
		CASE_(AUTH, auth)
		CASE_(PING, ping)
		CASE_(INFO, info)
		CASE_(CONFIG_GET, config_get)
		CASE_(TABLE_CREATE, table_create)
		CASE_(TABLE_DESCRIBE, table_describe)
		CASE_(PREFETCH, prefetch)
		CASE_(PULL, pull)
		CASE_(UPDATE, update)
		CASE_(LOOKUP, lookup)
		CASE_(READ_STATE, read_state)
		CASE_(PUSH_UPDATE, push_update)
		CASE_(CHECKPOINT, checkpoint)
		CASE_(RESTORE, restore)
		CASE_(JOB_STATUS, job_status)
	case PROTO_OP_CONFIG_SET:
		return proto_config_set_req_encode(buf, cap, id, &m->config_set_req, len);
	case PROTO_OP_TABLE_DROP:
		return proto_table_drop_req_encode(buf, cap, id, &m->table_drop_req, len);
	case PROTO_OP_TABLE_RESERVE:
		return proto_table_reserve_req_encode(buf, cap, id, &m->table_reserve_req, len);
	case PROTO_OP_TABLE_LIST:
		return proto_table_list_resp_encode(buf, cap, id, &m->table_list_resp, len);
	case PROTO_OP_STATS:
		return proto_stats_resp_encode(buf, cap, id, &m->stats_resp, len);
	case PROTO_OP_TICKET_FREE:
		return proto_ticket_free_req_encode(buf, cap, id, &m->ticket_free_req, len);
	case PROTO_OP_PUSH:
		return proto_push_req_encode(buf, cap, id, &m->push_req, len);
	case PROTO_OP_CHECKPOINT_LIST:
		return proto_checkpoint_list_resp_encode(buf, cap, id, &m->checkpoint_list_resp, len);
	case PROTO_OP_CHECKPOINT_DELETE:
		return proto_checkpoint_delete_req_encode(buf, cap, id, &m->checkpoint_delete_req, len);
	}
#undef CASE_
	return emdb__seterr(EMDB_ERR_INVALID, "no encoder for opcode 0x%04x", h->opcode);
}
