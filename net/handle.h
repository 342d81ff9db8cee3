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

/* Run the request whose checked header is h and whose h->body_len bytes
 * lie, 8-aligned, at body (in the connection's input buffer, valid for the
 * duration of the call).  Appends exactly one reply to c's output, or
 * marks c closing after a malformed or forbidden request; an UPDATE that
 * waits in a synchronous step (net/barrier.h) gets its reply later, from
 * handle_step_answer. */
void handle_frame(conn *c, const proto_hdr *h, const uint8_t *body);

/* The answer of UPDATE req_id of c, which waited in a synchronous step:
 * its response (status 0, rows) or an error reply (status < 0, msg). */
void handle_step_answer(conn *c, uint64_t req_id, int status, uint64_t rows, const char *msg);

#endif
