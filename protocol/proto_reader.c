/*
 * protocol/proto_reader.c - the per-connection frame parser: bytes in,
 * complete frames (each in its own block) out.
 *
 * States: WAIT (parsing headers out of the staging buffer) and BODY (cur
 * set: a frame whose body had not fully arrived; further bytes go straight
 * into cur's body).  An error moves to the sticky FAILED state (err != 0).
 *
 * Invariants:
 *   1. buf[head .. tail) holds received bytes not yet turned into frames;
 *      while cur is set that range is empty, because a frame only becomes
 *      cur after every staged byte was copied into it.
 *   2. A header is fully checked (proto_hdr_decode with max_body, the
 *      direction, a version not above the pin) before a body block is
 *      allocated, and a body block is preallocated to at most PREALLOC
 *      bytes beyond what has arrived, growing by doubling as bytes arrive:
 *      a peer cannot make us reserve memory it does not send.
 *   3. proto_reader_space never offers room past the current frame's body
 *      in cur, so the bytes of the next frame always land in staging.
 *   4. After a failure nothing changes except proto_reader_destroy.
 *
 * State changes: head/tail in commit, next and space (compaction); cur,
 * cur_have, cur_alloc in next, space (growth) and commit.
 */
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "protocol/proto_int.h"

#define STAGING (64u << 10)
#define PREALLOC ((size_t)1 << 20)
/* The body follows the struct in the same block, 16-aligned. */
#define BODY_OFF ((sizeof(proto_frame) + 15) & ~(size_t)15)

static proto_frame *frame_alloc(const proto_hdr *h, size_t body_alloc)
{
	proto_frame *f = emdb_malloc(BODY_OFF + body_alloc);
	if (!f)
		return NULL;
	f->hdr = *h;
	f->body = (uint8_t *)f + BODY_OFF;
	return f;
}

void proto_frame_free(proto_frame *f)
{
	emdb_free(f);
}

static int fail(proto_reader *r, int err, uint64_t id, uint16_t op)
{
	r->err = err;
	r->err_id = id;
	r->err_op = op;
	snprintf(r->errmsg, sizeof(r->errmsg), "%s", emdb_last_error());
	return err;
}

int proto_reader_init(proto_reader *r, bool responses, uint32_t max_body)
{
	memset(r, 0, sizeof(*r));
	r->buf = emdb_malloc(STAGING);
	if (!r->buf)
		return EMDB_ERR_NOMEM;
	r->cap = STAGING;
	r->max_body = max_body;
	r->responses = responses;
	return EMDB_OK;
}

void proto_reader_destroy(proto_reader *r)
{
	emdb_free(r->buf);
	emdb_free(r->cur);
	r->buf = NULL;
	r->cur = NULL;
}

void proto_reader_set_max_body(proto_reader *r, uint32_t max_body)
{
	r->max_body = max_body;
}

void proto_reader_set_version(proto_reader *r, uint8_t version)
{
	r->version = version;
}

int proto_reader_space(proto_reader *r, uint8_t **p, size_t *n)
{
	if (r->err)
		return r->err;
	if (r->cur) {
		size_t body = r->cur->hdr.body_len;
		if (r->cur_have == r->cur_alloc) {
			/* Grow: double what has arrived, capped by the body. */
			size_t want = r->cur_alloc * 2 > body ? body : r->cur_alloc * 2;
			proto_frame *f = emdb_realloc(r->cur, BODY_OFF + want);
			if (!f)
				return EMDB_ERR_NOMEM;
			f->body = (uint8_t *)f + BODY_OFF;
			r->cur = f;
			r->cur_alloc = want;
		}
		*p = r->cur->body + r->cur_have;
		*n = r->cur_alloc - r->cur_have;
		return EMDB_OK;
	}
	/* Compact when little room is left behind the unparsed bytes. */
	if (r->head && r->cap - r->tail < STAGING / 4) {
		memmove(r->buf, r->buf + r->head, r->tail - r->head);
		r->tail -= r->head;
		r->head = 0;
	}
	*p = r->buf + r->tail;
	*n = r->cap - r->tail;
	return EMDB_OK;
}

void proto_reader_commit(proto_reader *r, size_t n)
{
	if (r->err)
		return;
	if (r->cur) {
		assert(n <= r->cur_alloc - r->cur_have);
		r->cur_have += n;
	} else {
		assert(n <= r->cap - r->tail);
		r->tail += n;
	}
}

long proto_reader_feed(proto_reader *r, const void *data, size_t n)
{
	size_t done = 0;
	while (done < n) {
		uint8_t *p;
		size_t room;
		int rc = proto_reader_space(r, &p, &room);
		if (rc)
			return rc;
		if (room == 0)
			break;
		size_t k = n - done < room ? n - done : room;
		memcpy(p, (const uint8_t *)data + done, k);
		proto_reader_commit(r, k);
		done += k;
		/* A completed body or a staged header must be taken out first. */
		if (!r->cur || r->cur_have == r->cur->hdr.body_len)
			break;
	}
	return (long)done;
}

int proto_reader_next(proto_reader *r, proto_frame **out)
{
	proto_hdr h;
	*out = NULL;
	if (r->err)
		return r->err;
	if (r->cur) {
		if (r->cur_have < r->cur->hdr.body_len)
			return 0;
		*out = r->cur;
		r->cur = NULL;
		return 1;
	}
	size_t avail = r->tail - r->head;
	const uint8_t *p = r->buf + r->head;
	int rc = proto_hdr_decode(p, avail, &h, r->max_body);
	if (rc > 0)
		return 0;
	if (rc < 0) {
		/* Echo the id only if the magic was right, the opcode if known
		 * at the pinned version: an answer must not carry a version
		 * above the pin. */
		return fail(r, rc, h.id, proto_op_known_at(h.opcode, r->version) ? h.opcode : PROTO_OP_NONE);
	}
	if (r->version && h.version > r->version) {
		/* proto_hdr_decode checked that h.version is the opcode's:
		 * an opcode this connection does not have. */
		emdb__seterr(EMDB_ERR_PROTOCOL, "%s frame of version %u on a version %u connection",
			     proto_op_name(h.opcode), h.version, r->version);
		return fail(r, EMDB_ERR_PROTOCOL, 0, PROTO_OP_NONE);
	}
	if (proto_hdr_is_response(&h) != r->responses) {
		emdb__seterr(EMDB_ERR_PROTOCOL, "%s %s where %s are expected",
			     proto_op_name(h.opcode), r->responses ? "request" : "response",
			     r->responses ? "responses" : "requests");
		return fail(r, EMDB_ERR_PROTOCOL, h.id, h.opcode);
	}
	size_t staged = avail - PROTO_HDR_SIZE;
	if (staged >= h.body_len) {
		proto_frame *f = frame_alloc(&h, h.body_len);
		if (!f)
			return fail(r, EMDB_ERR_NOMEM, h.id, h.opcode);
		memcpy(f->body, p + PROTO_HDR_SIZE, h.body_len);
		r->head += PROTO_HDR_SIZE + h.body_len;
		if (r->head == r->tail)
			r->head = r->tail = 0;
		*out = f;
		return 1;
	}
	/* Invariant 2: allocate what arrived plus at most PREALLOC. */
	size_t alloc = staged + PREALLOC < h.body_len ? staged + PREALLOC : h.body_len;
	proto_frame *f = frame_alloc(&h, alloc);
	if (!f)
		return fail(r, EMDB_ERR_NOMEM, h.id, h.opcode);
	memcpy(f->body, p + PROTO_HDR_SIZE, staged);
	r->head = r->tail = 0;
	r->cur = f;
	r->cur_have = staged;
	r->cur_alloc = alloc;
	return 0;
}

int proto_reader_error(const proto_reader *r, uint64_t *id, uint16_t *op, const char **msg)
{
	if (id)
		*id = r->err_id;
	if (op)
		*op = r->err_op;
	if (msg)
		*msg = r->errmsg;
	return r->err;
}
