/*
 * protocol/proto_int.h - the protocol module's private layout helpers: a
 * bounds-checked read cursor over a body and a write cursor that either
 * fills a flat buffer or gathers a proto_iov.  Private to the protocol
 * module's own .c files.
 */
#ifndef EMDB_PROTO_INT_H
#define EMDB_PROTO_INT_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "protocol/proto.h"

/* Arrays are used in place, so wire order must be host order. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "emdb's wire protocol needs a little-endian host");
_Static_assert(sizeof(float) == 4 && sizeof(double) == 8, "IEEE 754 binary32/64 expected");

/* emdb_table_stats crosses the wire field by field in this order; the
 * assert fails when the engine grows the struct, so that the protocol
 * grows with it (and bumps its version). */
#define PROTO_TABLE_STATS_FIELDS(X)                                                      \
	X(rows) X(step) X(pending_rows) X(bytes_vectors) X(bytes_optimizer) X(bytes_index) \
	X(bytes_grads) X(bytes_overhead) X(calls_prefetch) X(calls_pull) X(calls_push)     \
	X(calls_update) X(calls_lookup) X(ids_prefetch) X(ids_pull) X(ids_push)            \
	X(ids_lookup) X(lookup_misses) X(rows_updated) X(index_resizes)
#define PROTO_TABLE_STATS_N 20
_Static_assert(sizeof(emdb_table_stats) == PROTO_TABLE_STATS_N * 8,
	       "emdb_table_stats changed: update PROTO_TABLE_STATS_FIELDS and docs/protocol.md");
_Static_assert(sizeof(emdb_db_stats) == (PROTO_TABLE_STATS_N + 3) * 8,
	       "emdb_db_stats changed: update the STATS body and docs/protocol.md");
_Static_assert(sizeof(proto_table_entry) == 72 && offsetof(proto_table_entry, name) == 8,
	       "proto_table_entry must match its wire layout");

/* ---- read cursor --------------------------------------------------- */

/* Reads a body front to back.  The first violation records an
 * EMDB_ERR_PROTOCOL message naming the message, field and offset; after
 * it every read returns zeros/NULL and rd_end returns the error, so a
 * decoder reads straight through and checks once. */
typedef struct proto_rd {
	const uint8_t *p;
	size_t len;
	size_t off;
	int err;
	uint16_t op;
	bool response;
} proto_rd;

/* Check h against the decoder's (op, response) and set up the cursor.
 * Returns EMDB_OK or EMDB_ERR_INVALID (caller bug: see proto.h). */
int proto__rd_begin(proto_rd *r, const proto_hdr *h, const uint8_t *body, uint16_t op,
		    bool response);
/* Record EMDB_ERR_PROTOCOL "<OP> request|response: <fmt>" unless an error
 * is recorded already; returns r->err. */
int proto__rd_fail(proto_rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* True when n more bytes are there; records the error otherwise. */
static inline bool rd_have(proto_rd *r, uint64_t n, const char *field)
{
	if (r->err)
		return false;
	if (n > r->len - r->off) {
		proto__rd_fail(r, "%s needs %llu bytes at offset %zu, the body has %zu left", field,
			       (unsigned long long)n, r->off, r->len - r->off);
		return false;
	}
	return true;
}

static inline uint16_t rd_u16(proto_rd *r, const char *field)
{
	uint16_t x = 0;
	if (rd_have(r, 2, field)) {
		memcpy(&x, r->p + r->off, 2);
		r->off += 2;
	}
	return x;
}

static inline uint32_t rd_u32(proto_rd *r, const char *field)
{
	uint32_t x = 0;
	if (rd_have(r, 4, field)) {
		memcpy(&x, r->p + r->off, 4);
		r->off += 4;
	}
	return x;
}

static inline uint64_t rd_u64(proto_rd *r, const char *field)
{
	uint64_t x = 0;
	if (rd_have(r, 8, field)) {
		memcpy(&x, r->p + r->off, 8);
		r->off += 8;
	}
	return x;
}

static inline double rd_f64(proto_rd *r, const char *field)
{
	double x = 0;
	if (rd_have(r, 8, field)) {
		memcpy(&x, r->p + r->off, 8);
		r->off += 8;
	}
	return x;
}

/* n reserved bytes that must be zero. */
static inline void rd_zero(proto_rd *r, size_t n, const char *field)
{
	if (!rd_have(r, n, field))
		return;
	for (size_t i = 0; i < n; i++)
		if (r->p[r->off + i]) {
			proto__rd_fail(r, "%s at offset %zu must be zero, not 0x%02x", field,
				       r->off + i, r->p[r->off + i]);
			return;
		}
	r->off += n;
}

/* Zero padding up to the next multiple of PROTO_ALIGN. */
static inline void rd_pad(proto_rd *r)
{
	rd_zero(r, (PROTO_ALIGN - r->off % PROTO_ALIGN) % PROTO_ALIGN, "padding");
}

/* count elements of elsize bytes, in place, after an overflow-safe check
 * against what is left of the body.  Arrays of 4- and 8-byte elements
 * start 8-aligned by construction of every layout.  NULL when count is 0
 * or on error. */
static inline const void *rd_array(proto_rd *r, uint64_t count, size_t elsize,
				   const char *field)
{
	uint64_t bytes;
	if (r->err)
		return NULL;
	assert(elsize == 1 || r->off % PROTO_ALIGN == 0);
	if (__builtin_mul_overflow(count, (uint64_t)elsize, &bytes)) {
		proto__rd_fail(r, "%s: count %llu overflows", field, (unsigned long long)count);
		return NULL;
	}
	if (!rd_have(r, bytes, field))
		return NULL;
	const void *p = r->p + r->off;
	r->off += bytes;
	return count ? p : NULL;
}

/* A string of len bytes, no more than max, in place (no padding after). */
static inline proto_str rd_str(proto_rd *r, uint32_t len, uint32_t max, const char *field)
{
	proto_str s = { NULL, 0 };
	if (r->err)
		return s;
	if (len > max) {
		proto__rd_fail(r, "%s is %u bytes, more than %u", field, len, max);
		return s;
	}
	s.p = rd_array(r, len, 1, field);
	s.len = s.p ? len : 0;
	return s;
}

/* len bytes into out[EMDB_NAME_MAX] as a C string: min_len..63 bytes,
 * no NUL inside. */
static inline void rd_name(proto_rd *r, uint32_t len, uint32_t min_len, char *out,
			   const char *field)
{
	memset(out, 0, EMDB_NAME_MAX);
	if (r->err)
		return;
	if (len < min_len || len > PROTO_TABLE_NAME_MAX) {
		proto__rd_fail(r, "%s is %u bytes, not %u..%u", field, len, min_len,
			       PROTO_TABLE_NAME_MAX);
		return;
	}
	const char *p = rd_array(r, len, 1, field);
	if (!p)
		return;
	if (memchr(p, 0, len)) {
		proto__rd_fail(r, "%s contains a NUL byte", field);
		return;
	}
	memcpy(out, p, len);
}

/* No bytes may trail; returns the cursor's status. */
static inline int rd_end(proto_rd *r)
{
	if (!r->err && r->off != r->len)
		proto__rd_fail(r, "%zu bytes trail the body at offset %zu", r->len - r->off, r->off);
	return r->err;
}

/* ---- write cursor -------------------------------------------------- */

/* Builds a frame.  Flat mode writes into buf[0..cap) and keeps counting
 * past cap, so the size needed is known when it does not fit.  Gather mode
 * (v set) copies scalars into v->scratch and references arrays.  The
 * header's 24 bytes are reserved first and written by wr_end. */
typedef struct proto_wr {
	uint8_t *buf;
	size_t cap;
	size_t off; /* frame bytes so far, header included */
	proto_iov *v;
	size_t scr; /* gather mode: scratch bytes used */
	int err;
	bool caller_fills; /* proto_node_encode: arrays reserved are not zeroed */
} proto_wr;

/* Record EMDB_ERR_INVALID unless an error is recorded; returns w->err. */
int proto__wr_fail(proto_wr *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Gather mode: copy n bytes into scratch, extending the scratch iovec. */
void proto__wr_scratch(proto_wr *w, const void *p, size_t n);
/* Write the header and finish, with the encoder return convention of
 * proto.h (gather mode: EMDB_OK or INVALID; sets v->n and v->len). */
int proto__wr_end(proto_wr *w, uint16_t op, bool response, int32_t status, uint64_t id,
		  size_t *len);

static inline void wr_begin(proto_wr *w, uint8_t *buf, size_t cap)
{
	w->buf = buf;
	w->cap = buf ? cap : 0;
	w->off = PROTO_HDR_SIZE;
	w->v = NULL;
	w->scr = 0;
	w->err = EMDB_OK;
	w->caller_fills = false;
}

static inline void wr_begin_iov(proto_wr *w, proto_iov *v)
{
	w->buf = NULL;
	w->cap = 0;
	w->off = 0;
	w->v = v;
	w->scr = 0;
	w->err = EMDB_OK;
	w->caller_fills = false;
	v->n = 0;
	v->len = 0;
	static const uint8_t hdr[PROTO_HDR_SIZE];
	proto__wr_scratch(w, hdr, sizeof(hdr));
}

static inline void wr_bytes(proto_wr *w, const void *p, size_t n)
{
	if (w->err || n == 0)
		return;
	if (w->v)
		proto__wr_scratch(w, p, n);
	else {
		if (w->off <= w->cap && n <= w->cap - w->off)
			memcpy(w->buf + w->off, p, n);
		w->off += n;
	}
}

static inline void wr_u16(proto_wr *w, uint16_t x)
{
	wr_bytes(w, &x, 2);
}

static inline void wr_u32(proto_wr *w, uint32_t x)
{
	wr_bytes(w, &x, 4);
}

static inline void wr_u64(proto_wr *w, uint64_t x)
{
	wr_bytes(w, &x, 8);
}

static inline void wr_f64(proto_wr *w, double x)
{
	wr_bytes(w, &x, 8);
}

static inline void wr_zero(proto_wr *w, size_t n)
{
	static const uint8_t zeros[64];
	for (size_t k; n; n -= k) {
		k = n < sizeof(zeros) ? n : sizeof(zeros);
		wr_bytes(w, zeros, k);
	}
}

static inline void wr_pad(proto_wr *w)
{
	wr_zero(w, (PROTO_ALIGN - w->off % PROTO_ALIGN) % PROTO_ALIGN);
}

/* Overflow-safe count * elsize; records INVALID on overflow. */
static inline bool wr_bytes_of(proto_wr *w, uint64_t count, size_t elsize, const char *field,
			       uint64_t *bytes)
{
	if (__builtin_mul_overflow(count, (uint64_t)elsize, bytes) || *bytes > UINT32_MAX) {
		proto__wr_fail(w, "%s: %llu elements do not fit in a frame", field,
			       (unsigned long long)count);
		return false;
	}
	return true;
}

/* count * elsize bytes at p (NULL only when count is 0): copied in flat
 * mode, referenced in gather mode. */
void proto__wr_array(proto_wr *w, const void *p, uint64_t count, size_t elsize,
		     const char *field);

static inline void wr_array(proto_wr *w, const void *p, uint64_t count, size_t elsize,
			    const char *field)
{
	proto__wr_array(w, p, count, elsize, field);
}

/* Flat mode: reserve count * elsize bytes and return where they are in
 * buf, or NULL when they do not fit (the size is still counted). */
static inline void *wr_reserve(proto_wr *w, uint64_t count, size_t elsize, const char *field)
{
	uint64_t bytes;
	void *p = NULL;
	if (w->err || !wr_bytes_of(w, count, elsize, field, &bytes))
		return NULL;
	if (w->off <= w->cap && bytes <= w->cap - w->off)
		p = w->buf + w->off;
	w->off += bytes;
	return p;
}

static inline int wr_end(proto_wr *w, uint16_t op, bool response, int32_t status, uint64_t id,
			 size_t *len)
{
	return proto__wr_end(w, op, response, status, id, len);
}

/* Encoder-side check of a proto_str: p set unless len is 0, len <= max. */
static inline bool wr_str_ok(proto_wr *w, proto_str s, uint32_t max, const char *field)
{
	if (s.len && !s.p) {
		proto__wr_fail(w, "%s is NULL with length %u", field, s.len);
		return false;
	}
	if (s.len > max) {
		proto__wr_fail(w, "%s is %u bytes, more than %u", field, s.len, max);
		return false;
	}
	return true;
}

/* Encoder-side table name: strnlen of out name, min_len..63. */
static inline uint32_t wr_name_len(proto_wr *w, const char *name, uint32_t min_len,
				   const char *field)
{
	size_t n = strnlen(name, EMDB_NAME_MAX);
	if (n < min_len || n > PROTO_TABLE_NAME_MAX) {
		proto__wr_fail(w, "%s must be %u..%u bytes", field, min_len, PROTO_TABLE_NAME_MAX);
		return 0;
	}
	return (uint32_t)n;
}

/* ---- shared between files ------------------------------------------ */

/* Which (opcode, direction) pairs have an empty body. */
bool proto__body_empty(uint16_t op, bool response);

/* A table configuration's "config block" (proto_table.c), shared by
 * TABLE_CREATE, TABLE_DESCRIBE and the node-to-node TABLE_* frames. */
void proto__cfg_encode(proto_wr *w, const emdb_table_config *c);
void proto__cfg_decode(proto_rd *r, emdb_table_config *c);
/* An optimizer alone: kind, 4 zero bytes, the hyperparameters (72 bytes;
 * the node-to-node TABLE_ALTER change). */
void proto__opt_encode(proto_wr *w, const emdb_optimizer *o);
void proto__opt_decode(proto_rd *r, emdb_optimizer *o);

#endif
