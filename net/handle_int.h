/*
 * net/handle_int.h - what the handler files (handle_conn.c,
 * handle_table.c, handle_data.c, handle_checkpoint.c) share with handle.c.
 *
 * A handler decodes its body in place, does its work and queues its reply.
 * It returns
 *   HANDLED_OK     the success reply is queued;
 *   HANDLED_DONE   the handler already queued an error reply itself (and
 *                  may have marked the connection closing);
 *   < 0            an emdb_err: handle.c replies with it and the message
 *                  of handle_fail, or else emdb_last_error().  PROTOCOL
 *                  (a body that does not decode) also closes the
 *                  connection; every other error leaves it open.
 * A handler that changes state (engine calls, tickets) reserves its reply
 * first, so that a reply that cannot be buffered never follows a change
 * the client would not hear about.
 */
#ifndef EMDB_NET_HANDLE_INT_H
#define EMDB_NET_HANDLE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/conn.h"
#include "net/obuf.h"
#include "protocol/proto.h"

#define HANDLED_OK 0
#define HANDLED_DONE 1

typedef int (*op_handler)(conn *c, const proto_hdr *h, const uint8_t *body);

/* handle_<name> for every row of PROTO_OP_MAP: the handler of an opcode
 * is found by its row (handle.c), so a new opcode needs its row, its codec
 * and this function, nothing else. */
#define HANDLER_(NAME, name, value, ver, role, rq, rs) \
	int handle_##name(conn *c, const proto_hdr *h, const uint8_t *body);
PROTO_OP_MAP(HANDLER_)
#undef HANDLER_

/* A node of a cluster (s->cluster set) runs these opcodes through the
 * cluster layer: handle_routed (net/handle_cluster.c) instead of their
 * handle_<name>.  Its connections' tickets are freed with
 * handle_cluster_ticket_free (ctx: the cluster). */
bool handle_is_routed(uint16_t op);
int handle_routed(conn *c, const proto_hdr *h, const uint8_t *body);
void handle_cluster_ticket_free(void *cl, void *t);

/* Record the message for the error reply and return status. */
int handle_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* EMDB_OK, or LIMIT (with handle_fail's message) when a reply frame of
 * `len` bytes would have a body over max_frame. */
int handle_check_reply(conn *c, size_t len);

/* Encode a reply with one of protocol/proto.h's encoders straight into the
 * output buffer: ask its size, reserve, encode, commit.  Evaluates to
 * EMDB_OK or an emdb_err. */
#define HANDLE_REPLY(c, id, encoder, m)                                                \
	__extension__({                                                                \
		size_t len_ = 0;                                                       \
		int rc_ = encoder(NULL, 0, (id), (m), &len_);                          \
		if (rc_ == EMDB_ERR_LIMIT) {                                           \
			rc_ = handle_check_reply((c), len_);                           \
			if (rc_ == EMDB_OK) {                                          \
				uint8_t *p_ = conn_reply_reserve((c), len_);           \
				rc_ = p_ ? encoder(p_, len_, (id), (m), &len_)         \
					 : EMDB_ERR_NOMEM;                             \
				if (rc_ == EMDB_OK)                                    \
					obuf_commit(&(c)->out, len_);                  \
				else                                                   \
					obuf_cancel(&(c)->out);                        \
			}                                                              \
		}                                                                      \
		rc_;                                                                   \
	})

/* A NUL-terminated copy of a wire string into buf[cap]; INVALID (with
 * message) when it is too long or holds a NUL. */
int handle_cstr(proto_str s, char *buf, size_t cap, const char *what);

#endif
