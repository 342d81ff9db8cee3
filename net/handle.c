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
 *   4. An opcode's handler is handle_<name> of its PROTO_OP_MAP row and
 *      nothing else: handler_of is the table expanded, so every opcode
 *      the header decoder admits has exactly one handler; on a node of a
 *      cluster, the opcodes the cluster layer routes go to handle_routed
 *      instead (net/handle_cluster.c).
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
#define HANDLER_OF_(NAME, name, value, ver, role, rq, rs) \
	case (value):                                    \
		return handle_##name;
		PROTO_OP_MAP(HANDLER_OF_)
#undef HANDLER_OF_
	}
	return NULL;
}

void handle_frame(conn *c, const proto_hdr *h, const uint8_t *body)
{
	uint16_t op = h->opcode;
	op_handler fn = handler_of(op);
	if (c->srv->cluster && handle_is_routed(op))
		fn = handle_routed;

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
