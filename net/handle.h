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
 * marks c closing after a malformed or forbidden request. */
void handle_frame(conn *c, const proto_hdr *h, const uint8_t *body);

#endif
