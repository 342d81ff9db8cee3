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
typedef struct server server;

/* Run the request whose checked header is h and whose h->body_len bytes
 * lie, 8-aligned, at body (in the connection's input buffer, valid for the
 * duration of the call).  Appends exactly one reply to c's output, or
 * marks c closing after a malformed or forbidden request; an UPDATE that
 * waits in a synchronous step (net/barrier.h) gets its reply later, from
 * handle_step_answer, and a TABLE_RESERVE from handle_reserve_answer. */
void handle_frame(conn *c, const proto_hdr *h, const uint8_t *body);

/* The answer of UPDATE req_id of c, which waited in a synchronous step:
 * its response (status 0, rows) or an error reply (status < 0, msg). */
void handle_step_answer(conn *c, uint64_t req_id, int status, uint64_t rows, const char *msg);

/* The answer of TABLE_RESERVE req_id of c, which ran on a thread of its
 * own (net/handle_reserve.c): an empty response (status 0) or an error
 * reply (status < 0, msg). */
void handle_reserve_answer(conn *c, uint64_t req_id, int status, const char *msg);

/* Wait until no TABLE_RESERVE thread of s runs any more: before the I/O
 * threads they post to are freed, and before the engine is closed. */
void handle_reserve_wait_all(server *s);

#endif
