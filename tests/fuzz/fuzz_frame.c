/*
 * tests/fuzz/fuzz_frame.c - libFuzzer target for the wire protocol's
 * decoders (protocol/proto.h).
 *
 * One input is used three ways:
 *   1. as one frame: proto_hdr_decode, then proto_msg_decode of the body
 *      as sent and again with the direction flipped (request <-> response,
 *      status 0), so every body decoder sees every byte pattern;
 *   2. as a stream of requests and as a stream of responses, fed to a
 *      proto_reader in chunks whose sizes come from the input itself;
 *      every frame it yields is decoded the same way;
 *   3. each body that decodes is re-encoded with proto_msg_encode and must
 *      give back exactly the same bytes (the encoding is canonical); the
 *      decoders that hand out pointers into the body (CHECKPOINT_LIST's
 *      records, JOB_STATUS's message) must point inside it; where
 *      the message has a scatter-gather encoder (*_req_iov) or an in-place
 *      one (*_resp_begin), that one must give the same bytes too, and a
 *      CONFIG_GET response is walked with its iterator.
 * Besides sanitizer findings, the target aborts when a decoder returns a
 * code it must not (INVALID for a header it accepted, anything but
 * PROTOCOL/UNSUPPORTED/LIMIT for a header) or a round trip differs.
 *
 * Built with clang -fsanitize=fuzzer,address,undefined when EMDB_FUZZ=ON
 * (tests/fuzz/CMakeLists.txt); built with the normal compiler into
 * fuzz_replay_frame, which replays tests/fuzz/corpus in every test run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>

#include "protocol/proto.h"
#include "tests/fuzz/fuzz.h"

static void die(const char *what, const proto_hdr *h, int rc)
{
	fprintf(stderr, "fuzz_frame: %s: %s %s rc %d: %s\n", what, proto_op_name(h->opcode),
		proto_hdr_is_response(h) ? "response" : "request", rc, emdb_last_error());
	abort();
}

/* memcpy that allows NULL with n 0 (decoders return NULL for empty arrays). */
static void copy(void *dst, const void *src, size_t n)
{
	if (n)
		memcpy(dst, src, n);
}

/* The gathered frame must equal the flat one. */
static void iov_check(const proto_hdr *h, const proto_iov *v, int rc, const uint8_t *flat,
		      size_t len)
{
	if (rc != EMDB_OK || v->len != len)
		die("iov encoder", h, rc);
	size_t off = 0;
	for (int i = 0; i < v->n; i++) {
		if (off + v->iov[i].iov_len > len || memcmp(flat + off, v->iov[i].iov_base, v->iov[i].iov_len))
			die("iov encoding differs", h, 0);
		off += v->iov[i].iov_len;
	}
	if (off != len)
		die("iov length", h, 0);
}

/* Encode m again with the other encoders it has; compare with flat. */
static void alt_encoders_check(const proto_hdr *h, const proto_msg *m, const uint8_t *flat,
			       size_t len)
{
	proto_iov v;
	uint8_t *out = NULL;
	float *vecs = NULL;
	uint8_t *found = NULL;
	size_t got = 0;
	int rc = EMDB_OK;
	bool resp = proto_hdr_is_response(h);
	if (!resp) {
		switch (h->opcode) {
		case PROTO_OP_PREFETCH:
			iov_check(h, &v, proto_prefetch_req_iov(&v, h->id, &m->prefetch_req), flat, len);
			break;
		case PROTO_OP_PULL:
			iov_check(h, &v, proto_pull_req_iov(&v, h->id, &m->pull_req), flat, len);
			break;
		case PROTO_OP_PUSH:
			iov_check(h, &v, proto_push_req_iov(&v, h->id, &m->push_req), flat, len);
			break;
		case PROTO_OP_PUSH_UPDATE:
			iov_check(h, &v, proto_push_update_req_iov(&v, h->id, &m->push_update_req), flat,
				  len);
			break;
		case PROTO_OP_LOOKUP:
			iov_check(h, &v, proto_lookup_req_iov(&v, h->id, &m->lookup_req), flat, len);
			break;
		case PROTO_OP_READ_STATE:
			iov_check(h, &v, proto_read_state_req_iov(&v, h->id, &m->read_state_req), flat, len);
			break;
		}
		return;
	}
	if (h->status < 0)
		return;
	if (h->opcode == PROTO_OP_CONFIG_GET) {
		size_t pos = 0;
		uint32_t n = 0;
		proto_kv kv;
		while (proto_kv_list_next(&m->config_get_resp, &pos, &kv))
			n++;
		if (n != m->config_get_resp.n)
			die("config iterator count", h, (int)n);
		return;
	}
	if (h->opcode != PROTO_OP_PULL && h->opcode != PROTO_OP_LOOKUP &&
	    h->opcode != PROTO_OP_READ_STATE)
		return;
	out = malloc(len);
	if (!out)
		abort();
	memset(out, 0xA5, len);
	if (h->opcode == PROTO_OP_PULL) {
		const proto_pull_resp *r = &m->pull_resp;
		rc = proto_pull_resp_begin(out, len, h->id, r->n_rows, r->dim, &vecs, &got);
		if (rc == EMDB_OK)
			copy(vecs, r->vecs, (size_t)r->n_rows * r->dim * 4);
	} else if (h->opcode == PROTO_OP_LOOKUP) {
		const proto_lookup_resp *r = &m->lookup_resp;
		rc = proto_lookup_resp_begin(out, len, h->id, r->n, r->dim, r->found != NULL, &vecs,
					     &found, &got);
		if (rc == EMDB_OK) {
			copy(vecs, r->vecs, (size_t)r->n * r->dim * 4);
			if (r->found)
				copy(found, r->found, r->n);
		}
	} else {
		const proto_read_state_resp *r = &m->read_state_resp;
		rc = proto_read_state_resp_begin(out, len, h->id, r->n, r->per_row, &vecs, &found,
						 &got);
		if (rc == EMDB_OK) {
			copy(vecs, r->state, (size_t)r->n * r->per_row * 4);
			copy(found, r->found, r->n);
		}
	}
	if (rc != EMDB_OK || got != len || memcmp(out, flat, len))
		die("in-place response encoder", h, rc);
	free(out);
}

/* Pointers a decoder hands out must lie inside the body it was given. */
static void in_place_check(const proto_hdr *h, const uint8_t *body, const proto_msg *m)
{
	const uint8_t *p = NULL;
	size_t n = 0;
	if (!proto_hdr_is_response(h) || h->status < 0)
		return;
	if (h->opcode == PROTO_OP_CHECKPOINT_LIST) {
		p = (const uint8_t *)m->checkpoint_list_resp.ckpts;
		n = (size_t)m->checkpoint_list_resp.n * PROTO_CKPT_INFO_SIZE;
		if (n && p != body + 8)
			die("checkpoint records not in place", h, 0);
	} else if (h->opcode == PROTO_OP_JOB_STATUS) {
		p = (const uint8_t *)m->job_status_resp.message.p;
		n = m->job_status_resp.message.len;
	}
	if (n && (p < body || p + n > body + h->body_len))
		die("pointer outside the body", h, 0);
}

/* Decode body under h; if it decodes, it must re-encode to the same bytes. */
static void body_check(const proto_hdr *h, const uint8_t *body)
{
	proto_msg m;
	int rc = proto_msg_decode(h, body, &m);
	if (rc == EMDB_ERR_PROTOCOL)
		return;
	if (rc != EMDB_OK)
		die("body decoder", h, rc);
	in_place_check(h, body, &m);
	size_t len = PROTO_HDR_SIZE + (size_t)h->body_len, got = 0;
	uint8_t *out = malloc(len);
	if (!out)
		abort();
	rc = proto_msg_encode(out, len, h, &m, &got);
	if (rc != EMDB_OK || got != len)
		die("re-encoding", h, rc);
	if (memcmp(out + PROTO_HDR_SIZE, body, h->body_len))
		die("re-encoded body differs", h, 0);
	proto_hdr back;
	if (proto_hdr_decode(out, len, &back, UINT32_MAX) || back.id != h->id ||
	    back.opcode != h->opcode || back.flags != h->flags || back.status != h->status)
		die("re-encoded header differs", h, 0);
	alt_encoders_check(h, &m, out, len);
	free(out);
}

/* The body as sent, then in the other direction. */
static void frame_check(const proto_hdr *h, const uint8_t *body)
{
	body_check(h, body);
	proto_hdr flip = *h;
	flip.flags ^= PROTO_FLAG_RESPONSE;
	flip.status = 0;
	if (flip.opcode != PROTO_OP_NONE)
		body_check(&flip, body);
}

static void one_frame(const uint8_t *p, size_t size)
{
	proto_hdr h;
	int rc = proto_hdr_decode(p, size, &h, UINT32_MAX);
	if (rc > 0) {
		if (size >= PROTO_HDR_SIZE || (size_t)rc != PROTO_HDR_SIZE - size)
			die("header need", &h, rc);
		return;
	}
	if (rc == EMDB_ERR_PROTOCOL || rc == EMDB_ERR_UNSUPPORTED)
		return;
	if (rc != EMDB_OK)
		die("header decoder", &h, rc);
	if (size - PROTO_HDR_SIZE < h.body_len)
		return;
	frame_check(&h, p + PROTO_HDR_SIZE);
}

static void stream(const uint8_t *p, size_t size, bool responses)
{
	proto_reader r;
	uint32_t seed = (uint32_t)size * 2654435761u ^ (size ? p[size - 1] : 0);
	if (proto_reader_init(&r, responses, 1u << 20))
		abort();
	/* Pinned at the newest version, so that the frames of versions 2
	 * and 3 (PUSH_UPDATE, TABLE_RESERVE, the weighted and table
	 * opcodes) are decoded too, and frames of version 1 pass under it. */
	if (size && (p[0] & 1))
		proto_reader_set_version(&r, PROTO_VERSION_MAX);
	size_t off = 0;
	for (;;) {
		proto_frame *f;
		int rc;
		while ((rc = proto_reader_next(&r, &f)) == 1) {
			if (proto_hdr_is_response(&f->hdr) != responses || (uintptr_t)f->body % 8)
				die("reader frame", &f->hdr, rc);
			frame_check(&f->hdr, f->body);
			proto_frame_free(f);
		}
		if (rc < 0) {
			const char *msg;
			uint16_t op;
			if (proto_reader_error(&r, NULL, &op, &msg) != rc || !msg[0] ||
			    (op != PROTO_OP_NONE && !proto_op_known(op)))
				abort();
			break;
		}
		if (off == size)
			break;
		seed = seed * 1103515245u + 12345u;
		size_t chunk = 1 + (seed >> 16) % 97;
		if (chunk > size - off)
			chunk = size - off;
		long k = proto_reader_feed(&r, p + off, chunk);
		if (k < 0)
			break;
		off += (size_t)k;
	}
	proto_reader_destroy(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* An exactly-sized copy: malloc's alignment is the 8 bodies need,
	 * and the sanitizer still sees any read past the end. */
	uint8_t *p = malloc(size ? size : 1);
	if (!p)
		return 0;
	copy(p, data, size);
	size_t before = emdb_alloc_bytes();
	one_frame(p, size);
	stream(p, size, false);
	stream(p, size, true);
	if (emdb_alloc_bytes() != before) {
		fprintf(stderr, "fuzz_frame: %zu bytes leaked through emdb_malloc\n",
			emdb_alloc_bytes() - before);
		abort();
	}
	free(p);
	return 0;
}
