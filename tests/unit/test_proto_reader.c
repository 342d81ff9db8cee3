/*
 * test_proto_reader.c - the wire protocol's frame reader (proto_reader,
 * protocol/proto.h): any chunking of a stream of every message comes back
 * as the same frames, big bodies land in place with preallocation capped
 * by what has arrived, a malformed stream fails once and says what to
 * answer (id, opcode, status; a frame above the pinned version as an
 * opcode the connection does not have), and allocation failure is
 * reported, not crashed on.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>

#include "base/alloc_fault.h"
#include "protocol/proto.h"
#include "tests/lib/proto_util.h"

/* A stream of every sample, `reps` times, as requests or responses. */
static size_t stream_of(proto_sample *all, size_t n_all, bool responses, int reps, uint8_t *out,
			size_t cap, size_t *n_frames)
{
	size_t off = 0;
	*n_frames = 0;
	for (int r = 0; r < reps; r++)
		for (size_t i = 0; i < n_all; i++) {
			if (proto_hdr_is_response(&all[i].h) != responses)
				continue;
			off += enc(&all[i], out + off, cap - off);
			(*n_frames)++;
		}
	return off;
}

/* Check that frame f equals the frame at stream[*pos]. */
static void expect_frame(const proto_frame *f, const uint8_t *stream, size_t *pos)
{
	proto_hdr h;
	cr_assert_eq(proto_hdr_decode(stream + *pos, PROTO_HDR_SIZE, &h, UINT32_MAX), EMDB_OK);
	cr_assert(f->hdr.opcode == h.opcode && f->hdr.id == h.id && f->hdr.flags == h.flags &&
		  f->hdr.status == h.status && f->hdr.body_len == h.body_len);
	cr_assert_eq((uintptr_t)f->body % 8, 0);
	cr_assert_eq(memcmp(f->body, stream + *pos + PROTO_HDR_SIZE, h.body_len), 0);
	proto_msg m;
	cr_assert_eq(proto_msg_decode(&f->hdr, f->body, &m), EMDB_OK, "%s", emdb_last_error());
	*pos += PROTO_HDR_SIZE + h.body_len;
}

Test(proto, reader_reassembles_any_chunking)
{
	SAMPLES();
	size_t before = emdb_alloc_bytes();
	for (int dir = 0; dir < 2; dir++) {
		size_t n_frames;
		size_t total = stream_of(all, n_all, dir, 40, buf, sizeof(bufmem), &n_frames);
		for (int trial = 0; trial < 20; trial++) {
			proto_reader r;
			cr_assert_eq(proto_reader_init(&r, dir, UINT32_MAX), EMDB_OK);
			size_t fed = 0, pos = 0, got = 0;
			size_t max_chunk = trial < 5 ? (size_t)trial + 1 : 1 + rnd() % 5000;
			while (fed < total) {
				size_t chunk = 1 + rnd() % max_chunk;
				if (chunk > total - fed)
					chunk = total - fed;
				long k = proto_reader_feed(&r, buf + fed, chunk);
				cr_assert(k >= 0);
				fed += (size_t)k;
				proto_frame *f;
				int rc;
				while ((rc = proto_reader_next(&r, &f)) == 1) {
					expect_frame(f, buf, &pos);
					proto_frame_free(f);
					got++;
				}
				cr_assert_eq(rc, 0);
			}
			cr_assert_eq(got, n_frames);
			cr_assert_eq(pos, total);
			proto_reader_destroy(&r);
		}
	}
	cr_assert_eq(emdb_alloc_bytes(), before, "reader leaked");
}

Test(proto, reader_receives_big_bodies_in_place_and_caps_preallocation)
{
	/* A 12 MiB PUSH: beyond staging and beyond the 1 MiB preallocation. */
	size_t before = emdb_alloc_bytes();
	uint32_t rows = 3 << 20;
	float *grads = emdb_malloc((size_t)rows * 4);
	for (uint32_t i = 0; i < rows; i++)
		grads[i] = (float)i;
	proto_push_req push = { 1, 1, 77, 0, NULL, 0, 0, NULL, rows, grads };
	proto_iov v;
	cr_assert_eq(proto_push_req_iov(&v, 5, &push), EMDB_OK);
	size_t base = emdb_alloc_bytes();

	proto_reader r;
	cr_assert_eq(proto_reader_init(&r, false, UINT32_MAX), EMDB_OK);
	size_t staging = emdb_alloc_bytes() - base;
	size_t peak_extra = 0, sent = 0, n_space = 0;
	proto_frame *f = NULL;
	int rc = 0;
	while (v.len) {
		uint8_t *p;
		size_t room;
		cr_assert_eq(proto_reader_space(&r, &p, &room), EMDB_OK);
		cr_assert(room > 0);
		n_space++;
		/* "read()" from the iov into the reader's space. */
		size_t k = 0;
		while (k < room && v.n) {
			size_t c = v.iov[0].iov_len < room - k ? v.iov[0].iov_len : room - k;
			memcpy(p + k, v.iov[0].iov_base, c);
			k += c;
			proto_iov_advance(&v, c);
		}
		proto_reader_commit(&r, k);
		sent += k;
		size_t extra = emdb_alloc_bytes() - base - staging;
		if (extra > peak_extra)
			peak_extra = extra;
		/* Allocation follows what arrived: never 2 MiB + 2x beyond it. */
		cr_assert(extra <= 2 * sent + (2u << 20), "extra %zu after %zu bytes", extra, sent);
		rc = proto_reader_next(&r, &f);
		cr_assert(rc >= 0);
		if (rc == 1)
			break;
	}
	cr_assert_eq(rc, 1);
	cr_assert_eq(f->hdr.body_len, 32 + (size_t)rows * 4);
	proto_push_req got;
	cr_assert_eq(proto_push_req_decode(&f->hdr, f->body, &got), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(got.n_rows, rows);
	cr_assert_eq(memcmp(got.grads, grads, (size_t)rows * 4), 0);
	proto_frame_free(f);
	proto_reader_destroy(&r);
	emdb_free(grads);
	cr_assert_eq(emdb_alloc_bytes(), before, "reader leaked");
}

Test(proto, reader_errors_are_sticky_and_say_what_to_answer)
{
	SAMPLES();
	proto_reader r;
	uint64_t id;
	uint16_t op;
	const char *msg;
	size_t before = emdb_alloc_bytes();

	/* Garbage: bad magic, answered with id 0 and opcode NONE. */
	cr_assert_eq(proto_reader_init(&r, false, PROTO_PREAUTH_BODY_MAX), EMDB_OK);
	proto_frame *f;
	cr_assert_eq(proto_reader_feed(&r, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27), 27);
	cr_assert_eq(proto_reader_next(&r, &f), EMDB_ERR_PROTOCOL);
	cr_assert_null(f);
	cr_assert_eq(proto_reader_error(&r, &id, &op, &msg), EMDB_ERR_PROTOCOL);
	cr_assert_eq(id, 0);
	cr_assert_eq(op, PROTO_OP_NONE);
	cr_assert(strstr(msg, "magic"), "%s", msg);
	cr_assert_eq(proto_reader_next(&r, &f), EMDB_ERR_PROTOCOL, "sticky");
	uint8_t *p;
	size_t room;
	cr_assert_eq(proto_reader_space(&r, &p, &room), EMDB_ERR_PROTOCOL);
	proto_reader_destroy(&r);

	/* Too big before AUTH: LIMIT, answered with the request's id and op. */
	size_t len = ENC("push_req_ids");
	cr_assert_eq(proto_reader_init(&r, false, 64), EMDB_OK);
	cr_assert_eq(proto_reader_feed(&r, buf, len), (long)len);
	cr_assert_eq(proto_reader_next(&r, &f), EMDB_ERR_LIMIT);
	proto_reader_error(&r, &id, &op, &msg);
	cr_assert_eq(id, find_sample(all, n_all, "push_req_ids")->h.id);
	cr_assert_eq(op, PROTO_OP_PUSH);
	proto_reader_destroy(&r);

	/* A response sent to a server. */
	len = ENC("pull_resp");
	cr_assert_eq(proto_reader_init(&r, false, UINT32_MAX), EMDB_OK);
	proto_reader_feed(&r, buf, len);
	cr_assert_eq(proto_reader_next(&r, &f), EMDB_ERR_PROTOCOL);
	proto_reader_error(&r, NULL, NULL, &msg);
	cr_assert(strstr(msg, "requests are expected"), "%s", msg);
	proto_reader_destroy(&r);

	/* A version this build does not speak. */
	len = ENC("ping_req");
	buf[4] = PROTO_VERSION_MAX + 1;
	cr_assert_eq(proto_reader_init(&r, false, UINT32_MAX), EMDB_OK);
	proto_reader_feed(&r, buf, len);
	cr_assert_eq(proto_reader_next(&r, &f), EMDB_ERR_UNSUPPORTED);
	proto_reader_destroy(&r);

	/* Pinned at 1, a PUSH_UPDATE (version 2) is an opcode the connection
	 * does not have: PROTOCOL, answered with id 0 and NONE. */
	len = ENC("push_update_req_ids");
	cr_assert_eq(proto_reader_init(&r, false, UINT32_MAX), EMDB_OK);
	proto_reader_set_version(&r, 1);
	proto_reader_feed(&r, buf, len);
	cr_assert_eq(proto_reader_next(&r, &f), EMDB_ERR_PROTOCOL);
	cr_assert_null(f);
	proto_reader_error(&r, &id, &op, &msg);
	cr_assert(strstr(msg, "PUSH_UPDATE frame of version 2 on a version 1 connection"), "%s", msg);
	cr_assert_eq(id, 0);
	cr_assert_eq(op, PROTO_OP_NONE);
	proto_reader_destroy(&r);
	/* Nor does a PUSH_UPDATE dressed as version 1 pass. */
	buf[4] = 1;
	cr_assert_eq(proto_reader_init(&r, false, UINT32_MAX), EMDB_OK);
	proto_reader_set_version(&r, 1);
	proto_reader_feed(&r, buf, len);
	cr_assert_eq(proto_reader_next(&r, &f), EMDB_ERR_PROTOCOL);
	proto_reader_error(&r, NULL, &op, &msg);
	cr_assert(strstr(msg, "its layout is version 2"), "%s", msg);
	cr_assert_eq(op, PROTO_OP_NONE, "an answer naming PUSH_UPDATE would be a version-2 frame");
	proto_reader_destroy(&r);

	/* Pinned at 2, frames of both versions pass, in any order. */
	cr_assert_eq(proto_reader_init(&r, false, UINT32_MAX), EMDB_OK);
	proto_reader_set_version(&r, 2);
	const char *mixed[] = { "ping_req", "push_update_req_ids", "push_req_ids",
				"push_update_req_ticket", "update_req" };
	for (size_t i = 0; i < sizeof(mixed) / sizeof(mixed[0]); i++) {
		const proto_sample *s = find_sample(all, n_all, mixed[i]);
		len = ENC(mixed[i]);
		cr_assert_eq(proto_reader_feed(&r, buf, len), (long)len);
		cr_assert_eq(proto_reader_next(&r, &f), 1, "%s: %s", mixed[i], emdb_last_error());
		cr_assert_eq(f->hdr.opcode, s->h.opcode);
		cr_assert_eq(f->hdr.version, proto_op_version(s->h.opcode));
		proto_frame_free(f);
	}
	proto_reader_destroy(&r);

	/* A good frame, then a truncated one, then destroy: nothing leaks. */
	len = ENC("push_req_ids");
	cr_assert_eq(proto_reader_init(&r, false, UINT32_MAX), EMDB_OK);
	proto_reader_feed(&r, buf, len);
	proto_reader_feed(&r, buf, len - 16);
	cr_assert_eq(proto_reader_next(&r, &f), 1);
	proto_frame_free(f);
	cr_assert_eq(proto_reader_next(&r, &f), 0);
	proto_reader_destroy(&r);

	cr_assert_eq(emdb_alloc_bytes(), before, "reader leaked");
}

Test(proto, reader_refuses_nothing_it_should_take_and_survives_nomem)
{
	SAMPLES();
	size_t len = ENC("push_req_ids");
	proto_reader r;
	proto_frame *f;
	cr_assert_eq(proto_reader_init(&r, false, UINT32_MAX), EMDB_OK);
	proto_reader_set_version(&r, 1);
	emdb_alloc_fail_after(0);
	proto_reader_feed(&r, buf, len);
	int rc = proto_reader_next(&r, &f);
	emdb_alloc_fail_reset();
	cr_assert_eq(rc, EMDB_ERR_NOMEM);
	proto_reader_destroy(&r);
	emdb_alloc_fail_after(0);
	cr_assert_eq(proto_reader_init(&r, false, UINT32_MAX), EMDB_ERR_NOMEM);
	emdb_alloc_fail_reset();
}
