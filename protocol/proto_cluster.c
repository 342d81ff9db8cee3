/*
 * protocol/proto_cluster.c - bodies of the cluster range (0x0500,
 * docs/protocol.md "Cluster"): LINKTEST.
 *
 * Invariants:
 *   1. The decoder checks the layout only (counts against the bytes
 *      present, reserved words zero); what the numbers may be (depth,
 *      duration, ranks, sizes) is the cluster layer's to refuse with
 *      INVALID, on a connection that stays open.
 *   2. A LINKTEST record has proto_linktest_msg's layout, checked at
 *      compile time, so the records are read in place.
 */
#include <stddef.h>

#include "base/error_int.h"
#include "protocol/proto_int.h"

_Static_assert(sizeof(proto_linktest_msg) == PROTO_LINKTEST_MSG_SIZE &&
		       offsetof(proto_linktest_msg, request_bytes) == 8 &&
		       offsetof(proto_linktest_msg, reply_bytes) == 16,
	       "a LINKTEST record is used in place");

/* ---- LINKTEST: u32 duration_ms, u32 depth, u32 n, u32 reserved, n records */

int proto_linktest_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_linktest_req *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	if (m->n && !m->msgs)
		proto__wr_fail(&w, "LINKTEST of %u messages without them", m->n);
	for (uint32_t i = 0; !w.err && i < m->n; i++)
		if (m->msgs[i].reserved)
			proto__wr_fail(&w, "LINKTEST message %u: reserved word not zero", i);
	wr_u32(&w, m->duration_ms);
	wr_u32(&w, m->depth);
	wr_u32(&w, m->n);
	wr_zero(&w, 4);
	wr_array(&w, m->msgs, m->n, PROTO_LINKTEST_MSG_SIZE, "messages");
	return wr_end(&w, PROTO_OP_LINKTEST, false, 0, id, len);
}

int proto_linktest_req_decode(const proto_hdr *h, const uint8_t *body, proto_linktest_req *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_LINKTEST, false);
	if (rc)
		return rc;
	m->duration_ms = rd_u32(&r, "duration_ms");
	m->depth = rd_u32(&r, "depth");
	m->n = rd_u32(&r, "n");
	rd_zero(&r, 4, "reserved");
	m->msgs = rd_array(&r, m->n, PROTO_LINKTEST_MSG_SIZE, "messages");
	for (uint32_t i = 0; !r.err && i < m->n; i++)
		if (m->msgs[i].reserved)
			proto__rd_fail(&r, "message %u: reserved word %u, not 0", i, m->msgs[i].reserved);
	return rd_end(&r);
}

int proto_linktest_resp_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_linktest_resp *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	wr_u64(&w, m->rounds);
	wr_u64(&w, m->elapsed_ns);
	wr_u64(&w, m->bytes_sent);
	wr_u64(&w, m->bytes_received);
	return wr_end(&w, PROTO_OP_LINKTEST, true, 0, id, len);
}

int proto_linktest_resp_decode(const proto_hdr *h, const uint8_t *body, proto_linktest_resp *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_LINKTEST, true);
	if (rc)
		return rc;
	m->rounds = rd_u64(&r, "rounds");
	m->elapsed_ns = rd_u64(&r, "elapsed_ns");
	m->bytes_sent = rd_u64(&r, "bytes_sent");
	m->bytes_received = rd_u64(&r, "bytes_received");
	return rd_end(&r);
}
