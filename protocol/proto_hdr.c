/*
 * protocol/proto_hdr.c - the frame header, the opcode table with its roles,
 * and the two bodies every opcode shares: the error body and the empty one.
 *
 * Invariants:
 *   1. Opcode names, values, versions, least roles and which bodies are
 *      empty come only from PROTO_OP_MAP, so the enum, proto_op_name,
 *      proto_op_version, proto_op_allowed and proto__body_empty cannot
 *      disagree.
 *   2. proto_hdr_decode reads exactly 24 bytes and decides everything a
 *      frame's header can get wrong before anyone allocates or reads a
 *      body: magic, version, flags, opcode against direction and status,
 *      the version against the opcode's, body length alignment and limit.
 *      Checks go in that order, so the error reported for garbage is the
 *      most basic one ("bad magic").
 *   3. An error frame carries status < 0 and the error body, whatever its
 *      opcode; opcode NONE exists only in such frames.
 *   4. A frame's header version is the version that defined its opcode's
 *      layout (proto_op_version), never the connection's: encoders write
 *      it, proto_hdr_decode requires it.  Which versions a connection
 *      admits is its owner's check (proto_reader's pin, net/conn.c).
 */
#include <string.h>

#include "base/error_int.h"
#include "protocol/proto_int.h"

bool proto_op_known(uint16_t op)
{
	switch (op) {
#define PROTO_OP_KNOWN_(NAME, name, value, ver, role, rq, rs) \
	case (value):                      \
		return true;
		PROTO_OP_MAP(PROTO_OP_KNOWN_)
#undef PROTO_OP_KNOWN_
	}
	return false;
}

const char *proto_op_name(uint16_t op)
{
	switch (op) {
	case PROTO_OP_NONE:
		return "NONE";
#define PROTO_OP_NAME_(NAME, name, value, ver, role, rq, rs) \
	case (value):                     \
		return #NAME;
		PROTO_OP_MAP(PROTO_OP_NAME_)
#undef PROTO_OP_NAME_
	}
	return "UNKNOWN";
}

bool proto_op_allowed(proto_role role, uint16_t op)
{
	switch (op) {
#define PROTO_OP_ROLE_(NAME, name, value, ver, least, rq, rs) \
	case (value):                      \
		return role >= (least) && role <= PROTO_ROLE_ADMIN;
		PROTO_OP_MAP(PROTO_OP_ROLE_)
#undef PROTO_OP_ROLE_
	}
	return false;
}

bool proto_op_known_at(uint16_t op, uint8_t version)
{
	return proto_op_known(op) && (!version || proto_op_version(op) <= version);
}

uint8_t proto_op_version(uint16_t op)
{
	switch (op) {
#define PROTO_OP_VERSION_(NAME, name, value, ver, role, rq, rs) \
	case (value):                                          \
		return (ver);
		PROTO_OP_MAP(PROTO_OP_VERSION_)
#undef PROTO_OP_VERSION_
	}
	return 1; /* NONE and unknown opcodes: what any build reads */
}

const char *proto_role_name(proto_role role)
{
	switch (role) {
	case PROTO_ROLE_NONE:
		return "none";
	case PROTO_ROLE_READER:
		return "reader";
	case PROTO_ROLE_TRAINER:
		return "trainer";
	case PROTO_ROLE_ADMIN:
		return "admin";
	}
	return "unknown";
}

void proto_hdr_encode(uint8_t out[PROTO_HDR_SIZE], const proto_hdr *h)
{
	uint32_t magic = PROTO_MAGIC;
	memcpy(out + 0, &magic, 4);
	out[4] = h->version;
	out[5] = h->flags;
	memcpy(out + 6, &h->opcode, 2);
	memcpy(out + 8, &h->id, 8);
	memcpy(out + 16, &h->status, 4);
	memcpy(out + 20, &h->body_len, 4);
}

int proto_hdr_decode(const uint8_t *p, size_t len, proto_hdr *h, uint32_t max_body)
{
	uint32_t magic;
	memset(h, 0, sizeof(*h));
	if (len < PROTO_HDR_SIZE)
		return (int)(PROTO_HDR_SIZE - len);
	memcpy(&magic, p, 4);
	if (magic != PROTO_MAGIC)
		return emdb__seterr(EMDB_ERR_PROTOCOL,
				    "bad magic %02x %02x %02x %02x, expected \"EMDB\"", p[0], p[1],
				    p[2], p[3]);
	h->version = p[4];
	h->flags = p[5];
	memcpy(&h->opcode, p + 6, 2);
	memcpy(&h->id, p + 8, 8);
	memcpy(&h->status, p + 16, 4);
	memcpy(&h->body_len, p + 20, 4);

	bool resp = proto_hdr_is_response(h);
	const char *what = resp ? "response" : "request";
	if (h->version < PROTO_VERSION_MIN || h->version > PROTO_VERSION_MAX)
		return emdb__seterr(EMDB_ERR_UNSUPPORTED,
				    "protocol version %u, this build speaks %u..%u", h->version,
				    PROTO_VERSION_MIN, PROTO_VERSION_MAX);
	if (h->flags & ~PROTO_FLAG_RESPONSE)
		return emdb__seterr(EMDB_ERR_PROTOCOL, "undefined flag bits 0x%02x",
				    h->flags & ~PROTO_FLAG_RESPONSE);
	if (h->opcode == PROTO_OP_NONE ? !(resp && h->status < 0) : !proto_op_known(h->opcode))
		return emdb__seterr(EMDB_ERR_PROTOCOL, "%s opcode 0x%04x in a %s",
				    h->opcode ? "unknown" : "error-only", h->opcode, what);
	if (h->version != proto_op_version(h->opcode))
		return emdb__seterr(EMDB_ERR_PROTOCOL, "%s frame of version %u: its layout is version %u",
				    proto_op_name(h->opcode), h->version, proto_op_version(h->opcode));
	if (!resp && h->status != 0)
		return emdb__seterr(EMDB_ERR_PROTOCOL, "%s request with status %d, must be 0",
				    proto_op_name(h->opcode), (int)h->status);
	if (resp && h->status > 0)
		return emdb__seterr(EMDB_ERR_PROTOCOL, "%s response with positive status %d",
				    proto_op_name(h->opcode), (int)h->status);
	if (h->body_len % PROTO_ALIGN)
		return emdb__seterr(EMDB_ERR_PROTOCOL,
				    "%s %s body length %u is not a multiple of %d",
				    proto_op_name(h->opcode), what, h->body_len, PROTO_ALIGN);
	if (h->body_len > max_body)
		return emdb__seterr(EMDB_ERR_LIMIT, "%s %s body of %u bytes exceeds the limit of %u",
				    proto_op_name(h->opcode), what, h->body_len, max_body);
	return EMDB_OK;
}

/* ---- error body: u32 length, message, padding ---------------------- */

int proto_err_encode(uint8_t *buf, size_t cap, uint64_t id, uint16_t op, int status,
		     const char *msg, size_t *len)
{
	proto_wr w;
	size_t n = msg ? strnlen(msg, PROTO_ERRMSG_MAX + 1) : 0;
	wr_begin(&w, buf, cap);
	if (status >= 0)
		proto__wr_fail(&w, "error status must be negative, not %d", status);
	if (op != PROTO_OP_NONE && !proto_op_known(op))
		proto__wr_fail(&w, "unknown opcode 0x%04x", op);
	if (n > PROTO_ERRMSG_MAX) {
		/* Cut at a UTF-8 character boundary. */
		n = PROTO_ERRMSG_MAX;
		while (n && ((unsigned char)msg[n] & 0xC0) == 0x80)
			n--;
	}
	wr_u32(&w, (uint32_t)n);
	wr_bytes(&w, msg, n);
	wr_pad(&w);
	return wr_end(&w, op, true, status, id, len);
}

int proto_err_decode(const proto_hdr *h, const uint8_t *body, proto_str *msg)
{
	proto_rd r;
	if (!h || !proto_hdr_is_response(h) || h->status >= 0)
		return emdb__seterr(EMDB_ERR_INVALID,
				    "proto_err_decode needs a response with a negative status");
	proto_hdr hh = *h;
	hh.status = 0; /* proto__rd_begin's check is for the other decoders */
	int rc = proto__rd_begin(&r, &hh, body, h->opcode, true);
	if (rc)
		return rc;
	uint32_t n = rd_u32(&r, "message length");
	*msg = rd_str(&r, n, PROTO_ERRMSG_MAX, "message");
	rd_pad(&r);
	return rd_end(&r);
}

/* ---- empty bodies -------------------------------------------------- */

bool proto__body_empty(uint16_t op, bool response)
{
#define IS_EMPTY_BODY false
#define IS_EMPTY_EMPTY true
	switch (op) {
#define PROTO_OP_EMPTY_(NAME, name, value, ver, role, rq, rs) \
	case (value):                                        \
		return response ? IS_EMPTY_##rs : IS_EMPTY_##rq;
		PROTO_OP_MAP(PROTO_OP_EMPTY_)
#undef PROTO_OP_EMPTY_
	}
#undef IS_EMPTY_EMPTY
#undef IS_EMPTY_BODY
	return false;
}

int proto_empty_encode(uint8_t *buf, size_t cap, uint64_t id, uint16_t op, bool response,
		       size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	if (!proto__body_empty(op, response))
		proto__wr_fail(&w, "a %s %s has a body", proto_op_name(op),
			       response ? "response" : "request");
	return wr_end(&w, op, response, 0, id, len);
}

int proto_empty_decode(const proto_hdr *h)
{
	proto_rd r;
	if (!h)
		return emdb__seterr(EMDB_ERR_INVALID, "proto_empty_decode: NULL header");
	bool resp = proto_hdr_is_response(h);
	if (!proto__body_empty(h->opcode, resp))
		return emdb__seterr(EMDB_ERR_INVALID, "a %s %s has a body",
				    proto_op_name(h->opcode), resp ? "response" : "request");
	/* Any non-NULL aligned pointer: the body is not read. */
	static const uint64_t none;
	int rc = proto__rd_begin(&r, h, (const uint8_t *)&none, h->opcode, resp);
	if (rc)
		return rc;
	return rd_end(&r);
}
