/*
 * handle.c - the gate and dispatcher every request frame passes.
 *
 * Invariants:
 *   1. Each request gets exactly one reply, in arrival order, or the
 *      connection is marked closing (after an error reply when one could
 *      be buffered).
 *   2. Nothing but HELLO is run before HELLO, nothing but AUTH (and the
 *      HELLO already done) before a role is granted, and no opcode outside
 *      proto_op_allowed(role) ever reaches its handler.  Refusals before
 *      authentication close the connection; a refusal to an authenticated
 *      client is an AUTH error reply and the connection stays.
 *   3. Every request that reaches a handler is counted in the thread's
 *      op_stats with its latency, failed or not.
 *
 * State changes: the connection's output (replies) and closing flag; the
 * handlers change the rest.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <emdb/error.h>

#include "net/conn.h"
#include "net/handle.h"
#include "net/handle_int.h"
#include "net/loop.h"
#include "net/server.h"
#include "net/stats.h"

static _Thread_local char fail_msg[512];

int handle_fail(int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(fail_msg, sizeof(fail_msg), fmt, ap);
	va_end(ap);
	return status;
}

int handle_check_reply(conn *c, size_t len)
{
	uint64_t max = atomic_load_explicit(&c->srv->rt.max_frame, memory_order_relaxed);
	if (len - PROTO_HDR_SIZE > max)
		return handle_fail(EMDB_ERR_LIMIT,
				   "the reply would carry %zu bytes, more than max_frame (%llu): ask for fewer rows",
				   len - PROTO_HDR_SIZE, (unsigned long long)max);
	return EMDB_OK;
}

int handle_cstr(proto_str s, char *buf, size_t cap, const char *what)
{
	if (s.len >= cap)
		return handle_fail(EMDB_ERR_INVALID, "%s is %u bytes, at most %zu allowed", what, s.len,
				   cap - 1);
	if (s.len && memchr(s.p, '\0', s.len))
		return handle_fail(EMDB_ERR_INVALID, "%s contains a NUL byte", what);
	if (s.len)
		memcpy(buf, s.p, s.len);
	buf[s.len] = '\0';
	return EMDB_OK;
}

static op_handler handler_of(uint16_t op)
{
	switch (op) {
	case PROTO_OP_HELLO: return handle_hello;
	case PROTO_OP_AUTH: return handle_auth;
	case PROTO_OP_PING: return handle_ping;
	case PROTO_OP_INFO: return handle_info;
	case PROTO_OP_CONFIG_GET: return handle_config_get;
	case PROTO_OP_CONFIG_SET: return handle_config_set;
	case PROTO_OP_SHUTDOWN: return handle_shutdown;
	case PROTO_OP_TABLE_CREATE: return handle_table_create;
	case PROTO_OP_TABLE_DROP: return handle_table_drop;
	case PROTO_OP_TABLE_RESERVE: return handle_table_reserve;
	case PROTO_OP_TABLE_DESCRIBE: return handle_table_describe;
	case PROTO_OP_TABLE_LIST: return handle_table_list;
	case PROTO_OP_STATS: return handle_stats;
	case PROTO_OP_PREFETCH: return handle_prefetch;
	case PROTO_OP_TICKET_FREE: return handle_ticket_free;
	case PROTO_OP_PULL: return handle_pull;
	case PROTO_OP_PUSH: return handle_push;
	case PROTO_OP_UPDATE: return handle_update;
	case PROTO_OP_LOOKUP: return handle_lookup;
	case PROTO_OP_READ_STATE: return handle_read_state;
	case PROTO_OP_PUSH_UPDATE: return handle_push_update;
	case PROTO_OP_CHECKPOINT: return handle_checkpoint;
	case PROTO_OP_RESTORE: return handle_restore;
	case PROTO_OP_JOB_STATUS: return handle_job_status;
	case PROTO_OP_CHECKPOINT_LIST: return handle_checkpoint_list;
	case PROTO_OP_CHECKPOINT_DELETE: return handle_checkpoint_delete;
	}
	return NULL;
}

void handle_frame(conn *c, const proto_hdr *h, const uint8_t *body)
{
	uint16_t op = h->opcode;
	op_handler fn = handler_of(op);

	if (!fn) {
		/* proto_hdr_decode admits only known opcodes. */
		conn_fail(c, h->id, PROTO_OP_NONE, EMDB_ERR_PROTOCOL, "unknown opcode");
		return;
	}
	if (!c->version && op != PROTO_OP_HELLO) {
		conn_fail(c, h->id, op, EMDB_ERR_PROTOCOL,
			  "the first request of a connection must be HELLO");
		return;
	}
	if (!proto_op_allowed(c->role, op)) {
		char msg[160];
		snprintf(msg, sizeof(msg), "role %s may not send %s%s", proto_role_name(c->role),
			 proto_op_name(op), c->role == PROTO_ROLE_NONE ? ": AUTH first" : "");
		if (c->role == PROTO_ROLE_NONE) {
			conn_fail(c, h->id, op, EMDB_ERR_AUTH, msg);
			return;
		}
		stats_record(&c->t->stats, op, 0, 1);
		conn_reply_err(c, h->id, op, EMDB_ERR_AUTH, msg);
		return;
	}

	fail_msg[0] = '\0';
	uint64_t t0 = stats_now_ns();
	int rc = fn(c, h, body);
	if (rc < 0) {
		const char *msg = fail_msg[0] ? fail_msg : emdb_last_error();
		if (rc == EMDB_ERR_PROTOCOL)
			conn_fail(c, h->id, op, rc, msg);
		else
			conn_reply_err(c, h->id, op, rc, msg);
	}
	stats_record(&c->t->stats, op, stats_now_ns() - t0, rc != HANDLED_OK);
}

const conn_handler handle_requests = { handle_frame, handle_conn_gone };
