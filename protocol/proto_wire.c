/*
 * protocol/proto_wire.c - the out-of-line half of the body cursors
 * (proto_int.h): error messages, gather-mode bookkeeping and the final
 * header write, plus proto_iov_advance.
 *
 * Invariants:
 *   1. A cursor records only its first error; everything after it is a
 *      no-op, so decoders and encoders read or write straight through and
 *      check once at the end.
 *   2. A read cursor never looks at p[off .. off+n) before rd_have has
 *      checked n against len - off (never len, off+n: no overflow), and
 *      every count is turned into bytes with __builtin_mul_overflow.
 *   3. A flat write cursor never writes at or past buf[cap] but keeps
 *      counting, so an encoder run with a small buffer reports the exact
 *      frame size; the header is written last, only when everything fit.
 *   4. In gather mode, scalars are copied into the proto_iov's scratch and
 *      arrays are referenced where they are; iov[] covers the frame in
 *      order, and the header's 24 bytes are scratch[0..24).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/error_int.h"
#include "protocol/proto_int.h"
#include "protocol/proto_node.h"

int proto__rd_begin(proto_rd *r, const proto_hdr *h, const uint8_t *body, uint16_t op,
		    bool response)
{
	const char *dir = response ? "response" : "request";
	r->p = body;
	r->len = 0;
	r->off = 0;
	r->err = EMDB_OK;
	r->op = op;
	r->response = response;
	if (!h || (!body && h->body_len))
		return emdb__seterr(EMDB_ERR_INVALID, "%s %s decoder: NULL header or body",
				    proto_op_name(op), dir);
	if (h->opcode != op || proto_hdr_is_response(h) != response)
		return emdb__seterr(EMDB_ERR_INVALID, "%s %s decoder given a %s %s",
				    proto_op_name(op), dir, proto_op_name(h->opcode),
				    proto_hdr_is_response(h) ? "response" : "request");
	if (response && h->status != EMDB_OK)
		return emdb__seterr(EMDB_ERR_INVALID,
				    "%s response has status %d: decode it with proto_err_decode",
				    proto_op_name(op), (int)h->status);
	if ((uintptr_t)body % PROTO_ALIGN)
		return emdb__seterr(EMDB_ERR_INVALID, "%s %s body at %p is not 8-aligned",
				    proto_op_name(op), dir, (const void *)body);
	r->len = h->body_len;
	return EMDB_OK;
}

int proto__rd_fail(proto_rd *r, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	if (r->err)
		return r->err;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	bool node = proto_node_op_known(r->op); /* node-to-node (proto_node.c) */
	r->err = emdb__seterr(EMDB_ERR_PROTOCOL, "%s%s %s: %s", node ? "node " : "",
			      node ? proto_node_op_name(r->op) : proto_op_name(r->op),
			      r->response ? "response" : "request", msg);
	return r->err;
}

int proto__wr_fail(proto_wr *w, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	if (w->err)
		return w->err;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	w->err = emdb__seterr(EMDB_ERR_INVALID, "encoding: %s", msg);
	return w->err;
}

void proto__wr_scratch(proto_wr *w, const void *p, size_t n)
{
	proto_iov *v = w->v;
	if (w->err || n == 0)
		return;
	/* Layouts are fixed: overflowing scratch or iov[] is a bug here. */
	assert(n <= PROTO_IOV_SCRATCH - w->scr);
	if (n > PROTO_IOV_SCRATCH - w->scr) {
		proto__wr_fail(w, "scratch overflow");
		return;
	}
	uint8_t *dst = v->scratch + w->scr;
	memcpy(dst, p, n);
	w->scr += n;
	w->off += n;
	if (v->n && (uint8_t *)v->iov[v->n - 1].iov_base + v->iov[v->n - 1].iov_len == dst) {
		v->iov[v->n - 1].iov_len += n;
		return;
	}
	assert(v->n < PROTO_IOV_MAX);
	if (v->n >= PROTO_IOV_MAX) {
		proto__wr_fail(w, "iovec overflow");
		return;
	}
	v->iov[v->n].iov_base = dst;
	v->iov[v->n].iov_len = n;
	v->n++;
}

void proto__wr_array(proto_wr *w, const void *p, uint64_t count, size_t elsize,
		     const char *field)
{
	uint64_t bytes;
	if (w->err || !wr_bytes_of(w, count, elsize, field, &bytes) || bytes == 0)
		return;
	if (!p) {
		proto__wr_fail(w, "%s is NULL with %llu elements", field, (unsigned long long)count);
		return;
	}
	if (!w->v) {
		if (w->off <= w->cap && bytes <= w->cap - w->off)
			memcpy(w->buf + w->off, p, bytes);
		w->off += bytes;
		return;
	}
	assert(w->v->n < PROTO_IOV_MAX);
	if (w->v->n >= PROTO_IOV_MAX) {
		proto__wr_fail(w, "iovec overflow");
		return;
	}
	w->v->iov[w->v->n].iov_base = (void *)p; /* writev reads it only */
	w->v->iov[w->v->n].iov_len = bytes;
	w->v->n++;
	w->off += bytes;
}

int proto__wr_end(proto_wr *w, uint16_t op, bool response, int32_t status, uint64_t id,
		  size_t *len)
{
	proto_hdr h = { proto_op_version(op), response ? PROTO_FLAG_RESPONSE : 0, op, status, id, 0 };
	if (len)
		*len = 0;
	if (w->err)
		return w->err;
	assert(w->off % PROTO_ALIGN == 0);
	if (w->off - PROTO_HDR_SIZE > UINT32_MAX)
		return proto__wr_fail(w, "%s body of %zu bytes exceeds the 4 GiB frame limit",
				      proto_op_name(op), w->off - PROTO_HDR_SIZE);
	h.body_len = (uint32_t)(w->off - PROTO_HDR_SIZE);
	if (w->v) {
		proto_hdr_encode(w->v->scratch, &h);
		w->v->len = w->off;
		if (len)
			*len = w->off;
		return EMDB_OK;
	}
	if (len)
		*len = w->off;
	if (w->off > w->cap && !w->buf)
		return EMDB_ERR_LIMIT; /* the size query: no message to format */
	if (w->off > w->cap)
		return emdb__seterr(EMDB_ERR_LIMIT, "%s frame needs %zu bytes, the buffer has %zu",
				    proto_op_name(op), w->off, w->cap);
	proto_hdr_encode(w->buf, &h);
	return EMDB_OK;
}

size_t proto_iov_advance(proto_iov *v, size_t sent)
{
	int i = 0;
	if (sent > v->len)
		sent = v->len;
	v->len -= sent;
	while (i < v->n && sent >= v->iov[i].iov_len) {
		sent -= v->iov[i].iov_len;
		i++;
	}
	if (i < v->n) {
		v->iov[i].iov_base = (uint8_t *)v->iov[i].iov_base + sent;
		v->iov[i].iov_len -= sent;
	}
	memmove(v->iov, v->iov + i, (size_t)(v->n - i) * sizeof(v->iov[0]));
	v->n -= i;
	return v->len;
}
