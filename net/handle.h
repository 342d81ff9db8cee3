/*
 * net/handle.h - running one request frame: gatekeeping (HELLO first, then
 * AUTH, then the role table), dispatch to the opcode's handler, the error
 * reply when it fails, and the per-op statistics.
 */
#ifndef EMDB_NET_HANDLE_H
#define EMDB_NET_HANDLE_H

#include <stdint.h>

#include "protocol/proto.h"

typedef struct conn conn;
typedef struct conn_handler conn_handler;
typedef struct server server;

/* handle_frame and handle_conn_gone, as the server gives them to its
 * connections (net/conn.h). */
extern const conn_handler handle_requests;

/* Run the request whose checked header is h and whose h->body_len bytes
 * lie, 8-aligned, at body (in the connection's input buffer, valid for the
 * duration of the call).  Appends exactly one reply to c's output, or
 * marks c closing after a malformed or forbidden request, or (an UPDATE
 * that waits in a synchronous step, a TABLE_RESERVE) counts one in
 * c->answers_owed and is answered later by an io_completion (net/loop.h)
 * that the handler set up. */
void handle_frame(conn *c, const proto_hdr *h, const uint8_t *body);

/* c is being destroyed with answers owed: withdraw its requests that wait
 * on others (synchronous steps); their completions then find it gone. */
void handle_conn_gone(conn *c);

/* Wait until no TABLE_RESERVE thread of s runs any more: before the I/O
 * threads they post to are freed, and before the engine is closed. */
void handle_reserve_wait_all(server *s);

#endif
