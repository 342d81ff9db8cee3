/*
 * test_proto.c - the wire protocol module (protocol/proto.h): every message
 * survives a round trip bit for bit; every kind of malformed frame is
 * refused with a clean error naming what is wrong; thousands of random
 * and mutated frames go through the decoders without a crash; and
 * docs/protocol.md lists every opcode and status code the code has.  The
 * frame reader's tests are in test_proto_reader.c.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>

#include "protocol/proto.h"
#include "tests/lib/proto_util.h"

static uint64_t bufmem2[BUF_WORDS];

/* Decode a frame (header + body); returns the header. */
static proto_hdr dec(const uint8_t *buf, size_t len, proto_msg *m)
{
	proto_hdr h;
	cr_assert_eq(proto_hdr_decode(buf, len, &h, UINT32_MAX), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(PROTO_HDR_SIZE + (size_t)h.body_len, len);
	int rc = proto_msg_decode(&h, buf + PROTO_HDR_SIZE, m);
	cr_assert_eq(rc, EMDB_OK, "%s: %s", proto_op_name(h.opcode), emdb_last_error());
	return h;
}

/* Decode only the body of buf's frame, whose header is valid. */
static int body_rc(uint8_t *buf, size_t len)
{
	proto_hdr h;
	proto_msg m;
	int rc = proto_hdr_decode(buf, len, &h, UINT32_MAX);
	if (rc)
		return rc;
	if (len < PROTO_HDR_SIZE + (size_t)h.body_len)
		return 1; /* incomplete frame */
	return proto_msg_decode(&h, buf + PROTO_HDR_SIZE, &m);
}

static void put32(uint8_t *p, uint32_t x)
{
	memcpy(p, &x, 4);
}

static void put64(uint8_t *p, uint64_t x)
{
	memcpy(p, &x, 8);
}

static bool str_eq(proto_str a, proto_str b)
{
	return a.len == b.len && (a.len == 0 || !memcmp(a.p, b.p, a.len));
}

/* The version that added each opcode (docs/protocol.md, "Versions"). */
static uint8_t version_of(uint16_t op)
{
	if (op == PROTO_OP_PUSH_UPDATE || op == PROTO_OP_TABLE_RESERVE)
		return 2;
	if (op == PROTO_OP_PULL_WEIGHTED || op == PROTO_OP_PUSH_WEIGHTED || op == PROTO_OP_TABLE_ALTER ||
	    op == PROTO_OP_TABLE_SCAN || op == PROTO_OP_TABLE_LOAD)
		return 3;
	if (op == PROTO_OP_WORKER)
		return 4;
	if (op == PROTO_OP_LINKTEST)
		return 5;
	return 1;
}

/* ------------------------------------------------------------------ */
/* Round trips                                                          */
/* ------------------------------------------------------------------ */

/* A decoded key/value list (CONFIG_GET response, CONFIG_SET request)
 * holds samples.h's three pairs, in order. */
static void expect_sample_kv(const proto_kv_list *l)
{
	size_t pos = 0, k = 0;
	proto_kv kv;
	cr_assert_eq(l->n, 3);
	while (proto_kv_list_next(l, &pos, &kv)) {
		cr_assert(str_eq(kv.key, sample_kv[k].key));
		cr_assert(str_eq(kv.val, sample_kv[k].val));
		k++;
	}
	cr_assert_eq(k, 3);
}

Test(proto, every_sample_round_trips_bit_for_bit)
{
	SAMPLES();
	uint8_t *buf2 = (uint8_t *)bufmem2;
	bool seen_req[0x600] = { 0 }, seen_resp[0x600] = { 0 };
	for (size_t i = 0; i < n_all; i++) {
		const proto_sample *s = &all[i];
		size_t need = 0, len = enc(s, buf, sizeof(bufmem));
		/* Size query and too-small buffer: LIMIT with the size, no write. */
		cr_assert_eq(proto_msg_encode(NULL, 0, &s->h, &s->m, &need), EMDB_ERR_LIMIT);
		cr_assert_eq(need, len, "%s", s->name);
		memset(buf2, 0xA5, len);
		cr_assert_eq(proto_msg_encode(buf2, len - 1, &s->h, &s->m, &need), EMDB_ERR_LIMIT);
		cr_assert_eq(buf2[len - 1], 0xA5, "%s: wrote past cap", s->name);

		proto_msg m;
		proto_hdr h = dec(buf, len, &m);
		cr_assert_eq(h.opcode, s->h.opcode);
		cr_assert_eq(h.flags, s->h.flags);
		cr_assert_eq(h.status, s->h.status);
		cr_assert_eq(h.id, s->h.id);
		cr_assert_eq(h.version, version_of(s->h.opcode), "%s", s->name);
		/* Re-encoding the decoded message gives the same bytes. */
		size_t len2 = 0;
		cr_assert_eq(proto_msg_encode(buf2, sizeof(bufmem2), &h, &m, &len2), EMDB_OK,
			     "%s: %s", s->name, emdb_last_error());
		cr_assert_eq(len2, len, "%s", s->name);
		cr_assert_eq(memcmp(buf, buf2, len), 0, "%s: bytes differ", s->name);
		if (s->h.opcode < 0x600 && s->h.status == 0)
			(proto_hdr_is_response(&s->h) ? seen_resp : seen_req)[s->h.opcode] = true;
	}
#define CHECK_SEEN_(NAME, name, value, ver, role, rq, rs)                              \
	cr_assert(seen_req[value] && seen_resp[value], "no request and response sample of " #NAME);
	PROTO_OP_MAP(CHECK_SEEN_)
#undef CHECK_SEEN_
}

Test(proto, decoded_fields_match_what_was_encoded)
{
	SAMPLES();
	proto_msg m;
	size_t len;

	len = ENC("hello_req");
	dec(buf, len, &m);
	cr_assert_eq(m.hello_req.ver_min, 1);
	cr_assert(str_eq(m.hello_req.name, proto_cstr("test-client")));
	len = ENC("hello_resp");
	dec(buf, len, &m);
	cr_assert_eq(m.hello_resp.flags, PROTO_HELLO_AUTH_REQUIRED);
	cr_assert_eq(m.hello_resp.max_body, 1u << 30);
	cr_assert_eq(m.hello_resp.max_batch, 4u << 20);
	len = ENC("auth_resp");
	dec(buf, len, &m);
	cr_assert_eq(m.auth_resp.role, PROTO_ROLE_TRAINER);

	len = ENC("config_get_resp");
	dec(buf, len, &m);
	expect_sample_kv(&m.config_get_resp);

	len = ENC("config_set_req_3");
	dec(buf, len, &m);
	expect_sample_kv(&m.config_set_req);

	len = ENC("table_create_req");
	dec(buf, len, &m);
	emdb_table_config want = sample_cfg("ads.user_id");
	emdb_table_config *got = &m.table_create_req.cfg;
	cr_assert_eq(got->size, sizeof(emdb_table_config));
	cr_assert_str_eq(got->name, "ads.user_id");
	cr_assert_eq(got->dim, 64);
	cr_assert_eq(got->optimizer.kind, EMDB_OPT_ADAM);
	cr_assert_eq(memcmp(&got->optimizer, &want.optimizer, sizeof(want.optimizer)), 0);
	cr_assert_eq(got->init.kind, EMDB_INIT_NORMAL);
	cr_assert_eq(got->init.b, 0.01);
	cr_assert_eq(got->seed, 0x1234567890abcdefull);
	cr_assert_eq(got->lookup_default, EMDB_DEFAULT_INIT);

	len = ENC("table_describe_resp");
	dec(buf, len, &m);
	cr_assert_eq(m.table_describe_resp.info.id, 7);
	cr_assert_eq(m.table_describe_resp.info.stats.rows, 1000);
	cr_assert_eq(m.table_describe_resp.info.stats.index_resizes, 1019);
	cr_assert_str_eq(m.table_describe_resp.info.config.name, "ads.user_id");
	len = ENC("table_describe_req_name");
	dec(buf, len, &m);
	cr_assert_eq(m.table_describe_req.table, 0);
	cr_assert_str_eq(m.table_describe_req.name, "ads.user_id");

	len = ENC("table_list_resp");
	dec(buf, len, &m);
	cr_assert_eq(m.table_list_resp.n, 3);
	cr_assert_eq(m.table_list_resp.entries[1].id, 2);
	cr_assert_eq(m.table_list_resp.entries[1].name_len, 12);
	cr_assert_str_eq(m.table_list_resp.entries[1].name, "user.id-v2_x");
	cr_assert_eq((const uint8_t *)m.table_list_resp.entries, buf + PROTO_HDR_SIZE + 8,
		     "entries are used in place");

	len = ENC("stats_resp");
	dec(buf, len, &m);
	cr_assert_eq(m.stats_resp.stats.tables, 3);
	cr_assert_eq(m.stats_resp.stats.total.calls_pull, 7 * 9);
	cr_assert_eq(m.stats_resp.stats.alloc_peak, 1 << 21);

	len = ENC("push_req_bags");
	dec(buf, len, &m);
	proto_push_req *p = &m.push_req;
	cr_assert_eq(p->n_ids, 5);
	cr_assert_eq(p->n_bags, 2);
	cr_assert_eq(p->pool, EMDB_POOL_SUM);
	cr_assert_eq(p->n_rows, 2);
	cr_assert_eq(memcmp(p->ids, sample_ids, sizeof(sample_ids)), 0);
	cr_assert_eq(memcmp(p->offsets, sample_offsets, sizeof(sample_offsets)), 0);
	cr_assert_eq(memcmp(p->grads, sample_vecs, 6 * sizeof(float)), 0);
	/* In place and aligned: pointers into the body. */
	cr_assert_eq((const uint8_t *)p->ids, buf + PROTO_HDR_SIZE + 32);
	cr_assert_eq((uintptr_t)p->offsets % 8, 0);
	cr_assert_eq((uintptr_t)p->grads % 8, 0);

	/* PUSH_UPDATE: PUSH's layout under its own opcode, UPDATE's response. */
	len = ENC("push_update_req_ids");
	dec(buf, len, &m);
	p = &m.push_update_req;
	cr_assert_eq(p->table, 1);
	cr_assert_eq(p->dim, 3);
	cr_assert_eq(p->n_ids, 5);
	cr_assert_eq(p->n_rows, 5);
	cr_assert_eq(p->n_bags, 0);
	cr_assert_null(p->offsets);
	cr_assert_eq(memcmp(p->grads, sample_vecs, sizeof(sample_vecs)), 0);
	cr_assert_eq((const uint8_t *)p->ids, buf + PROTO_HDR_SIZE + 32);
	cr_assert_eq((const uint8_t *)p->grads, buf + PROTO_HDR_SIZE + 32 + 40);
	cr_assert_eq(len, PROTO_HDR_SIZE + 32 + 40 + 64, "60 bytes of grads and 4 of padding");
	{
		/* The same bytes as the PUSH of the same message but the opcode. */
		uint8_t *b2 = (uint8_t *)bufmem2;
		size_t len2 = 0;
		cr_assert_eq(proto_push_req_encode(b2, sizeof(bufmem2), 110, p, &len2), EMDB_OK);
		cr_assert_eq(len2, len);
		cr_assert_eq(memcmp(b2 + PROTO_HDR_SIZE, buf + PROTO_HDR_SIZE, len - PROTO_HDR_SIZE), 0);
	}
	len = ENC("push_update_req_ticket");
	dec(buf, len, &m);
	cr_assert_eq(m.push_update_req.ticket, 0xabcdef);
	cr_assert_null(m.push_update_req.ids);
	cr_assert_eq(m.push_update_req.n_rows, 5);
	len = ENC("push_update_resp");
	cr_assert_eq(len, PROTO_HDR_SIZE + 8);
	dec(buf, len, &m);
	cr_assert_eq(m.push_update_resp.rows, 5);

	len = ENC("pull_req_ticket_bags");
	dec(buf, len, &m);
	cr_assert_eq(m.pull_req.ticket, 0xabcdef);
	cr_assert_null(m.pull_req.ids);
	cr_assert_eq(m.pull_req.pool, EMDB_POOL_MEAN);
	cr_assert_eq(m.pull_req.offsets[2], 5);

	len = ENC("pull_resp");
	dec(buf, len, &m);
	cr_assert_eq((const uint8_t *)m.pull_resp.vecs,
		     buf + PROTO_HDR_SIZE + PROTO_PULL_RESP_VECS_OFF);
	cr_assert_eq(memcmp(m.pull_resp.vecs, sample_vecs, sizeof(sample_vecs)), 0);

	len = ENC("lookup_resp_found");
	dec(buf, len, &m);
	cr_assert_eq(memcmp(m.lookup_resp.found, sample_found, 5), 0);
	cr_assert_eq((const uint8_t *)m.lookup_resp.vecs,
		     buf + PROTO_HDR_SIZE + PROTO_LOOKUP_RESP_VECS_OFF);
	len = ENC("lookup_resp");
	dec(buf, len, &m);
	cr_assert_null(m.lookup_resp.found);
	len = ENC("lookup_req");
	dec(buf, len, &m);
	cr_assert(m.lookup_req.want_found);

	len = ENC("read_state_resp");
	dec(buf, len, &m);
	cr_assert_eq(m.read_state_resp.per_row, 3);
	cr_assert_eq(memcmp(m.read_state_resp.found, sample_found, 5), 0);

	len = ENC("error_pull");
	proto_hdr h = dec(buf, len, &m);
	cr_assert_eq(h.status, EMDB_ERR_DIM);
	cr_assert(str_eq(m.err, find_sample(all, n_all, "error_pull")->m.err));
}

Test(proto, header_layout_matches_the_spec)
{
	uint8_t b[PROTO_HDR_SIZE];
	proto_hdr h = { 1, PROTO_FLAG_RESPONSE, PROTO_OP_PULL, EMDB_ERR_DIM, 0x1122334455667788ull,
			0x40 };
	proto_hdr_encode(b, &h);
	const uint8_t want[PROTO_HDR_SIZE] = { 'E', 'M', 'D', 'B', 1, 1, 0x02, 0x02,
					       0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
					       0xfb, 0xff, 0xff, 0xff, 0x40, 0, 0, 0 };
	cr_assert_eq(memcmp(b, want, sizeof(want)), 0);
	proto_hdr g;
	cr_assert_eq(proto_hdr_decode(b, sizeof(b), &g, 0x40), EMDB_OK);
	cr_assert(g.version == h.version && g.flags == h.flags && g.opcode == h.opcode &&
		  g.status == h.status && g.id == h.id && g.body_len == h.body_len);
	cr_assert_eq(PROTO_MAGIC, 0x42444D45u);
}

/* Version 2 added PUSH_UPDATE and TABLE_RESERVE and nothing else: their
 * frames, in both directions and as errors, say 2; every other opcode's
 * say 1, so that a version-1 peer reads them all.  A header whose version
 * is not its opcode's is malformed, whichever way round. */
Test(proto, frames_carry_the_version_of_their_opcode)
{
	SAMPLES();
	cr_assert_eq(PROTO_VERSION_MIN, 1);
	cr_assert_eq(PROTO_VERSION_MAX, 5);
#define OP_VER_(NAME, name, value, ver, role, rq, rs) \
	cr_assert_eq(proto_op_version(value), version_of(value), #NAME);
	PROTO_OP_MAP(OP_VER_)
#undef OP_VER_
	cr_assert_eq(proto_op_version(PROTO_OP_NONE), 1);
	cr_assert_eq(proto_op_version(PROTO_OP_HELLO), 1, "HELLO must stay readable by any build");

	const char *v2[] = { "push_update_req_ids", "push_update_req_ticket", "push_update_resp",
			     "error_push_update",   "table_reserve_req",      "table_reserve_resp",
			     "error_table_reserve" };
	for (size_t i = 0; i < sizeof(v2) / sizeof(v2[0]); i++) {
		ENC(v2[i]);
		cr_assert_eq(buf[4], 2, "%s", v2[i]);
	}
	const char *v1[] = { "hello_req", "hello_resp", "ping_req", "push_req_ids", "update_resp",
			     "error_none" };
	for (size_t i = 0; i < sizeof(v1) / sizeof(v1[0]); i++) {
		ENC(v1[i]);
		cr_assert_eq(buf[4], 1, "%s", v1[i]);
	}
	/* The scatter-gather encoder writes the same header. */
	proto_iov v;
	const proto_sample *pu = find_sample(all, n_all, "push_update_req_ids");
	cr_assert_eq(proto_push_update_req_iov(&v, 9, &pu->m.push_update_req), EMDB_OK);
	cr_assert_eq(v.scratch[4], 2);
	/* And an error reply to a PUSH_UPDATE is one of its frames. */
	size_t len;
	cr_assert_eq(proto_err_encode(buf, sizeof(bufmem), 9, PROTO_OP_PUSH_UPDATE, EMDB_ERR_DIM, "x",
				      &len),
		     EMDB_OK);
	cr_assert_eq(buf[4], 2);

	/* PUSH_UPDATE under version 1: PROTOCOL, with the raw fields kept. */
	len = ENC("push_update_req_ids");
	buf[4] = 1;
	proto_hdr h;
	cr_assert_eq(proto_hdr_decode(buf, len, &h, UINT32_MAX), EMDB_ERR_PROTOCOL);
	cr_assert(strstr(emdb_last_error(), "PUSH_UPDATE frame of version 1: its layout is version 2"),
		  "%s", emdb_last_error());
	cr_assert_eq(h.version, 1);
	cr_assert_eq(h.opcode, PROTO_OP_PUSH_UPDATE);
	cr_assert_eq(h.id, pu->h.id);
	/* PING under version 2: PROTOCOL too (not UNSUPPORTED: 2 is spoken). */
	len = ENC("ping_req");
	buf[4] = 2;
	cr_assert_eq(proto_hdr_decode(buf, len, &h, UINT32_MAX), EMDB_ERR_PROTOCOL);
	cr_assert(strstr(emdb_last_error(), "PING frame of version 2"), "%s", emdb_last_error());
	cr_assert_eq(h.opcode, PROTO_OP_PING);
	/* An error response under the wrong version is refused the same way. */
	len = ENC("error_push_update");
	buf[4] = 1;
	cr_assert_eq(proto_hdr_decode(buf, len, &h, UINT32_MAX), EMDB_ERR_PROTOCOL);
}

Test(proto, error_encoder_truncates_at_a_character_boundary)
{
	char msg[PROTO_ERRMSG_MAX + 10];
	memset(msg, 'x', sizeof(msg));
	/* A 2-byte UTF-8 character straddling the limit. */
	msg[PROTO_ERRMSG_MAX - 1] = (char)0xC3;
	msg[PROTO_ERRMSG_MAX] = (char)0xA9;
	msg[sizeof(msg) - 1] = 0;
	uint8_t *buf = (uint8_t *)bufmem;
	size_t len;
	cr_assert_eq(proto_err_encode(buf, sizeof(bufmem), 9, PROTO_OP_PULL, EMDB_ERR_INTERNAL, msg,
				      &len), EMDB_OK);
	proto_hdr h;
	proto_str s;
	cr_assert_eq(proto_hdr_decode(buf, len, &h, UINT32_MAX), EMDB_OK);
	cr_assert_eq(proto_err_decode(&h, buf + PROTO_HDR_SIZE, &s), EMDB_OK);
	cr_assert_eq(s.len, PROTO_ERRMSG_MAX - 1);
	cr_assert_eq(proto_err_encode(buf, sizeof(bufmem), 9, PROTO_OP_PULL, 0, "x", &len),
		     EMDB_ERR_INVALID);
	cr_assert_eq(proto_err_encode(buf, sizeof(bufmem), 9, 0x0999, -1, "x", &len),
		     EMDB_ERR_INVALID);
	cr_assert_eq(proto_err_encode(buf, sizeof(bufmem), 9, PROTO_OP_NONE, -1, NULL, &len),
		     EMDB_OK);
	cr_assert_eq(len, PROTO_HDR_SIZE + 8);
}

/* ------------------------------------------------------------------ */
/* Scatter-gather and in-place responses                               */
/* ------------------------------------------------------------------ */

static size_t flatten(const proto_iov *v, uint8_t *out)
{
	size_t off = 0;
	for (int i = 0; i < v->n; i++) {
		memcpy(out + off, v->iov[i].iov_base, v->iov[i].iov_len);
		off += v->iov[i].iov_len;
	}
	return off;
}

Test(proto, iov_encoders_match_the_flat_ones_without_copying_arrays)
{
	SAMPLES();
	uint8_t *flat = (uint8_t *)bufmem2;
	const char *names[] = { "prefetch_req", "pull_req_ids", "pull_req_ticket_bags",
				"push_req_ids", "push_req_ticket", "push_req_bags",
				"lookup_req", "read_state_req", "push_update_req_ids",
				"push_update_req_ticket" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const proto_sample *s = find_sample(all, n_all, names[i]);
		size_t len = enc(s, buf, sizeof(bufmem));
		proto_iov v;
		int rc = -100;
		switch (s->h.opcode) {
		case PROTO_OP_PREFETCH:
			rc = proto_prefetch_req_iov(&v, s->h.id, &s->m.prefetch_req);
			break;
		case PROTO_OP_PULL:
			rc = proto_pull_req_iov(&v, s->h.id, &s->m.pull_req);
			break;
		case PROTO_OP_PUSH:
			rc = proto_push_req_iov(&v, s->h.id, &s->m.push_req);
			break;
		case PROTO_OP_PUSH_UPDATE:
			rc = proto_push_update_req_iov(&v, s->h.id, &s->m.push_update_req);
			break;
		case PROTO_OP_LOOKUP:
			rc = proto_lookup_req_iov(&v, s->h.id, &s->m.lookup_req);
			break;
		case PROTO_OP_READ_STATE:
			rc = proto_read_state_req_iov(&v, s->h.id, &s->m.read_state_req);
			break;
		}
		cr_assert_eq(rc, EMDB_OK, "%s: %s", names[i], emdb_last_error());
		cr_assert_eq(v.len, len);
		cr_assert_eq(flatten(&v, flat), len);
		cr_assert_eq(memcmp(flat, buf, len), 0, "%s", names[i]);
		bool refs_ids = false;
		for (int k = 0; k < v.n; k++)
			refs_ids |= v.iov[k].iov_base == (void *)sample_ids;
		cr_assert(refs_ids || s->h.opcode == PROTO_OP_PULL || s->h.opcode == PROTO_OP_PUSH ||
				  s->h.opcode == PROTO_OP_PUSH_UPDATE,
			  "%s: ids referenced, not copied", names[i]);

		/* Partial writes: advance by odd amounts, the rest is intact. */
		size_t sent = 0;
		while (v.len) {
			size_t step = 1 + rnd() % 13;
			size_t rest = proto_iov_advance(&v, step);
			sent += step < len - sent ? step : len - sent;
			cr_assert_eq(rest, len - sent);
			size_t got = flatten(&v, flat);
			cr_assert_eq(got, rest);
			cr_assert_eq(memcmp(flat, buf + sent, rest), 0);
		}
	}
	/* The push of a ticket references the caller's gradients. */
	proto_iov v;
	const proto_sample *s = find_sample(all, n_all, "push_req_ticket");
	cr_assert_eq(proto_push_req_iov(&v, 1, &s->m.push_req), EMDB_OK);
	bool refs = false;
	for (int k = 0; k < v.n; k++)
		refs |= v.iov[k].iov_base == (void *)sample_vecs;
	cr_assert(refs);
}

Test(proto, resp_begin_lets_the_server_write_floats_in_place)
{
	SAMPLES();
	uint8_t *b2 = (uint8_t *)bufmem2;
	size_t len, need;
	float *v;
	uint8_t *f;

	size_t want = ENC("pull_resp");
	cr_assert_eq(proto_pull_resp_begin(NULL, 0, 999, 5, 3, &v, &need), EMDB_ERR_LIMIT);
	cr_assert_eq(need, want);
	cr_assert_eq(proto_pull_resp_begin(b2, sizeof(bufmem2), find_sample(all, n_all, "pull_resp")->h.id,
					   5, 3, &v, &len), EMDB_OK);
	cr_assert_eq((uint8_t *)v, b2 + PROTO_HDR_SIZE + PROTO_PULL_RESP_VECS_OFF);
	memcpy(v, sample_vecs, sizeof(sample_vecs));
	cr_assert_eq(len, want);
	cr_assert_eq(memcmp(buf, b2, len), 0);
	/* Unaligned output buffer: refused. */
	cr_assert_eq(proto_pull_resp_begin(b2 + 4, 1000, 1, 1, 1, &v, &len), EMDB_ERR_INVALID);

	want = ENC("lookup_resp_found");
	memset(b2, 0xEE, want);
	cr_assert_eq(proto_lookup_resp_begin(b2, sizeof(bufmem2),
					     find_sample(all, n_all, "lookup_resp_found")->h.id, 5, 3,
					     true, &v, &f, &len), EMDB_OK);
	memcpy(v, sample_vecs, sizeof(sample_vecs));
	memcpy(f, sample_found, 5);
	cr_assert_eq(len, want);
	cr_assert_eq(memcmp(buf, b2, len), 0, "padding written as zeros");

	want = ENC("read_state_resp");
	cr_assert_eq(proto_read_state_resp_begin(b2, sizeof(bufmem2),
						 find_sample(all, n_all, "read_state_resp")->h.id, 5,
						 3, &v, &f, &len), EMDB_OK);
	memcpy(v, sample_vecs, sizeof(sample_vecs));
	memcpy(f, sample_found, 5);
	cr_assert_eq(len, want);
	cr_assert_eq(memcmp(buf, b2, len), 0);
}

/* ------------------------------------------------------------------ */
/* Malformed headers                                                    */
/* ------------------------------------------------------------------ */

static uint8_t hdr_buf[PROTO_HDR_SIZE];

static int hdr_with(uint32_t magic, uint8_t version, uint8_t flags, uint16_t op, int32_t status,
		    uint32_t body_len, uint32_t max)
{
	proto_hdr h = { version, flags, op, status, 77, body_len };
	proto_hdr_encode(hdr_buf, &h);
	memcpy(hdr_buf, &magic, 4);
	proto_hdr g;
	return proto_hdr_decode(hdr_buf, sizeof(hdr_buf), &g, max);
}

#define GOOD PROTO_MAGIC, 1

Test(proto, malformed_headers_are_refused_with_the_right_code)
{
	cr_assert_eq(hdr_with(GOOD, 0, PROTO_OP_PING, 0, 8, 64), EMDB_OK);
	cr_assert_eq(hdr_with(0x42444D46, 1, 0, PROTO_OP_PING, 0, 8, 64), EMDB_ERR_PROTOCOL);
	cr_assert(strstr(emdb_last_error(), "magic"), "%s", emdb_last_error());
	cr_assert_eq(hdr_with(PROTO_MAGIC, 0, 0, PROTO_OP_PING, 0, 8, 64), EMDB_ERR_UNSUPPORTED);
	cr_assert_eq(hdr_with(PROTO_MAGIC, 6, 0, PROTO_OP_PING, 0, 8, 64), EMDB_ERR_UNSUPPORTED);
	cr_assert(strstr(emdb_last_error(), "version 6, this build speaks 1..5"), "%s",
		  emdb_last_error());
	/* A version this build speaks, but not the opcode's. */
	cr_assert_eq(hdr_with(PROTO_MAGIC, 2, 0, PROTO_OP_PING, 0, 8, 64), EMDB_ERR_PROTOCOL);
	cr_assert(strstr(emdb_last_error(), "PING frame of version 2: its layout is version 1"), "%s",
		  emdb_last_error());
	cr_assert_eq(hdr_with(GOOD, 0x02, PROTO_OP_PING, 0, 8, 64), EMDB_ERR_PROTOCOL);
	cr_assert(strstr(emdb_last_error(), "flag"), "%s", emdb_last_error());
	cr_assert_eq(hdr_with(GOOD, 0x81, PROTO_OP_PING, 0, 8, 64), EMDB_ERR_PROTOCOL);
	uint16_t unknown[] = { 0x0000, 0x0008, 0x00FF, 0x0106, 0x0208, 0x0305, 0x0400,
			       0x0500, 0x0600, 0xF000, 0xFFFF };
	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		cr_assert_eq(hdr_with(GOOD, 0, unknown[i], 0, 0, 64), EMDB_ERR_PROTOCOL, "op %x",
			     unknown[i]);
		cr_assert_eq(hdr_with(GOOD, 1, unknown[i], 0, 0, 64), EMDB_ERR_PROTOCOL);
	}
	cr_assert(strstr(emdb_last_error(), "opcode 0xffff"), "%s", emdb_last_error());
	/* NONE only in an error response. */
	cr_assert_eq(hdr_with(GOOD, 1, PROTO_OP_NONE, -10, 8, 64), EMDB_OK);
	cr_assert_eq(hdr_with(GOOD, 0, PROTO_OP_NONE, -10, 8, 64), EMDB_ERR_PROTOCOL);
	/* Status: 0 in requests, <= 0 in responses. */
	cr_assert_eq(hdr_with(GOOD, 0, PROTO_OP_PING, -1, 8, 64), EMDB_ERR_PROTOCOL);
	cr_assert_eq(hdr_with(GOOD, 1, PROTO_OP_PING, 1, 8, 64), EMDB_ERR_PROTOCOL);
	cr_assert_eq(hdr_with(GOOD, 1, PROTO_OP_PING, -99, 8, 64), EMDB_OK,
		     "codes newer than this build still pass");
	/* Body length: multiple of 8, within the limit. */
	cr_assert_eq(hdr_with(GOOD, 0, PROTO_OP_PING, 0, 12, 64), EMDB_ERR_PROTOCOL);
	cr_assert_eq(hdr_with(GOOD, 0, PROTO_OP_PING, 0, 72, 64), EMDB_ERR_LIMIT);
	cr_assert(strstr(emdb_last_error(), "72"), "%s", emdb_last_error());
	cr_assert_eq(hdr_with(GOOD, 0, PROTO_OP_PING, 0, 0xFFFFFFF8u, UINT32_MAX), EMDB_OK);
}

Test(proto, truncated_header_says_how_many_bytes_are_missing)
{
	proto_hdr h = { 1, 0, PROTO_OP_PING, 0, 77, 8 }, g;
	proto_hdr_encode(hdr_buf, &h);
	for (size_t len = 0; len < PROTO_HDR_SIZE; len++)
		cr_assert_eq(proto_hdr_decode(hdr_buf, len, &g, 64), (int)(PROTO_HDR_SIZE - len));
	/* On an error after the magic, the raw id is there to echo. */
	hdr_buf[4] = 9;
	cr_assert_eq(proto_hdr_decode(hdr_buf, sizeof(hdr_buf), &g, 64), EMDB_ERR_UNSUPPORTED);
	cr_assert_eq(g.id, 77);
	hdr_buf[0] = 'X';
	cr_assert_eq(proto_hdr_decode(hdr_buf, sizeof(hdr_buf), &g, 64), EMDB_ERR_PROTOCOL);
	cr_assert_eq(g.id, 0);
}

/* ------------------------------------------------------------------ */
/* Malformed bodies                                                     */
/* ------------------------------------------------------------------ */

/* Decode body (with h's body_len forced to `body_len`). */
static int body_as(uint8_t *buf, uint32_t body_len)
{
	proto_hdr h;
	proto_msg m;
	cr_assert_eq(proto_hdr_decode(buf, PROTO_HDR_SIZE, &h, UINT32_MAX), EMDB_OK);
	h.body_len = body_len;
	return proto_msg_decode(&h, buf + PROTO_HDR_SIZE, &m);
}

#define BODY(len) (buf + PROTO_HDR_SIZE)
#define EXPECT_PROTOCOL(rc, needle)                                                        \
	do {                                                                               \
		int rc_ = (rc);                                                            \
		cr_assert_eq(rc_, EMDB_ERR_PROTOCOL, "rc %d (%s)", rc_, emdb_last_error()); \
		cr_assert(strstr(emdb_last_error(), needle), "message '%s' lacks '%s'",     \
			  emdb_last_error(), needle);                                      \
	} while (0)

Test(proto, truncated_body_or_trailing_bytes_are_refused)
{
	SAMPLES();
	for (size_t i = 0; i < n_all; i++) {
		size_t len = enc(&all[i], buf, sizeof(bufmem));
		uint32_t body = (uint32_t)(len - PROTO_HDR_SIZE);
		memset(buf + len, 0, 64);
		/* Every shorter body, and 8 or 16 zero bytes more. */
		for (uint32_t cut = 0; cut < body; cut += 8) {
			if (!strcmp(all[i].name, "update_req_numbered") && cut == 8)
				continue; /* an UPDATE without its (optional) step number */
			int rc = body_as(buf, cut);
			cr_assert_eq(rc, EMDB_ERR_PROTOCOL, "%s cut to %u: %d", all[i].name, cut, rc);
		}
		EXPECT_PROTOCOL(body_as(buf, body + 8), "trail");
		EXPECT_PROTOCOL(body_as(buf, body + 16), "trail");
	}
}

Test(proto, counts_that_disagree_with_the_body_are_refused)
{
	SAMPLES();
	size_t len = ENC("prefetch_req");
	uint8_t *b = BODY(len);
	put32(b + 4, 6); /* n = 6, 5 ids sent */
	EXPECT_PROTOCOL(body_rc(buf, len), "ids needs 48 bytes at offset 8");
	put32(b + 4, 4); /* n = 4: 8 bytes trail */
	EXPECT_PROTOCOL(body_rc(buf, len), "8 bytes trail");

	len = ENC("pull_resp");
	b = BODY(len);
	put32(b + 4, 4); /* dim 4: 20 floats claimed, 15 sent */
	EXPECT_PROTOCOL(body_rc(buf, len), "vecs needs 80 bytes");

	len = ENC("config_get_resp");
	b = BODY(len);
	put32(b, 4); /* 4 entries claimed, 3 sent */
	EXPECT_PROTOCOL(body_rc(buf, len), "key_len");
	put32(b, 3);
	put32(b + 8, 1000); /* key_len beyond the body */
	EXPECT_PROTOCOL(body_rc(buf, len), "more than 255");
	put32(b + 8, 200);
	EXPECT_PROTOCOL(body_rc(buf, len), "config key needs 200 bytes");

	len = ENC("hello_req");
	b = BODY(len);
	put32(b + 4, 16); /* name_len 16: the 11 sent and the padding */
	cr_assert_eq(body_rc(buf, len), EMDB_OK, "padding is zeros, name bytes may be");
	put32(b + 4, 17);
	EXPECT_PROTOCOL(body_rc(buf, len), "client name needs 17 bytes at offset 8, the body has 16");

	len = ENC("table_list_resp");
	b = BODY(len);
	put32(b, 2); /* 2 entries claimed, 3 sent */
	EXPECT_PROTOCOL(body_rc(buf, len), "trail");

	len = ENC("push_req_ids");
	b = BODY(len);
	put32(b + 28, 4); /* 4 rows of grads for 5 ids */
	EXPECT_PROTOCOL(body_rc(buf, len), "n_rows 4 for n_ids 5");

	len = ENC("push_req_bags");
	b = BODY(len);
	put32(b + 20, 3); /* 3 bags, 2 rows */
	EXPECT_PROTOCOL(body_rc(buf, len), "n_rows 2 for n_bags 3");
	put32(b + 20, 2);
	put32(b + 24, 0); /* bags but pool 0: the engine's to refuse */
	cr_assert_eq(body_rc(buf, len), EMDB_OK);
}

Test(proto, counts_that_overflow_are_refused)
{
	SAMPLES();
	size_t len = ENC("pull_resp");
	uint8_t *b = BODY(len);
	put32(b, 0xFFFFFFFFu);
	put32(b + 4, 0xFFFFFFFFu); /* (2^32-1)^2 * 4 overflows 64 bits */
	EXPECT_PROTOCOL(body_rc(buf, len), "overflows");
	put32(b + 4, 0x40000000u); /* no overflow, just far too big */
	EXPECT_PROTOCOL(body_rc(buf, len), "vecs needs");

	const char *grads_of_a_ticket[] = { "push_req_ticket", "push_update_req_ticket" };
	for (size_t i = 0; i < 2; i++) {
		len = ENC(grads_of_a_ticket[i]);
		b = BODY(len);
		put32(b + 4, 0xFFFFFFFFu);  /* dim */
		put32(b + 28, 0xFFFFFFFFu); /* n_rows */
		EXPECT_PROTOCOL(body_rc(buf, len), "overflows");
	}

	len = ENC("read_state_resp");
	b = BODY(len);
	put32(b, 0xFFFFFFFFu);
	put32(b + 4, 0xFFFFFFFFu);
	EXPECT_PROTOCOL(body_rc(buf, len), "overflows");

	len = ENC("pull_req_ticket_bags");
	b = BODY(len);
	put32(b + 20, 0xFFFFFFFFu); /* n_bags + 1 = 2^32 offsets */
	EXPECT_PROTOCOL(body_rc(buf, len), "offsets needs 34359738368 bytes");

	len = ENC("table_list_resp");
	b = BODY(len);
	put32(b, 0xFFFFFFFFu);
	EXPECT_PROTOCOL(body_rc(buf, len), "entries needs");
}

Test(proto, nonzero_padding_and_reserved_fields_are_refused)
{
	SAMPLES();
	size_t len = ENC("hello_req"); /* 8 + 11 bytes of name + 5 of padding */
	uint8_t *b = BODY(len);
	b[8 + 11] = 1;
	EXPECT_PROTOCOL(body_rc(buf, len), "padding");
	b[8 + 11] = 0;
	b[len - PROTO_HDR_SIZE - 1] = 0x80;
	EXPECT_PROTOCOL(body_rc(buf, len), "padding");

	len = ENC("pull_resp_odd"); /* 3 floats, 4 bytes of padding */
	b = BODY(len);
	b[8 + 12] = 1;
	EXPECT_PROTOCOL(body_rc(buf, len), "padding");

	len = ENC("pull_req_ids");
	b = BODY(len);
	b[29] = 1;
	EXPECT_PROTOCOL(body_rc(buf, len), "reserved");

	len = ENC("auth_resp");
	b = BODY(len);
	b[7] = 1;
	EXPECT_PROTOCOL(body_rc(buf, len), "reserved");

	len = ENC("table_list_resp");
	b = BODY(len);
	b[8 + 8 + 3 + 1] = 'x'; /* after "ads\0" of entry 0 */
	EXPECT_PROTOCOL(body_rc(buf, len), "not zero");
}

Test(proto, arrays_out_of_place_are_refused)
{
	SAMPLES();
	/* A LOOKUP response whose found[] was written right after 15 floats,
	 * without the 4 bytes of padding that put it on a multiple of 8. */
	size_t len = ENC("lookup_resp_found");
	uint8_t *b = BODY(len);
	size_t found_at = 16 + 60 + 4;
	memmove(b + found_at - 4, b + found_at, 5);
	EXPECT_PROTOCOL(body_rc(buf, len), "padding");

	/* A body that does not sit on an 8-aligned address cannot be used in
	 * place: a caller bug (proto_reader never does it). */
	len = ENC("push_req_ids");
	proto_hdr h;
	proto_push_req m;
	cr_assert_eq(proto_hdr_decode(buf, len, &h, UINT32_MAX), EMDB_OK);
	memmove(buf + PROTO_HDR_SIZE + 4, buf + PROTO_HDR_SIZE, h.body_len);
	cr_assert_eq(proto_push_req_decode(&h, buf + PROTO_HDR_SIZE + 4, &m), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_last_error(), "aligned"), "%s", emdb_last_error());
}

Test(proto, contradictory_fields_are_refused)
{
	SAMPLES();
	size_t len = ENC("pull_req_ids");
	uint8_t *b = BODY(len);
	put64(b + 8, 5); /* a ticket and ids */
	EXPECT_PROTOCOL(body_rc(buf, len), "one or the other");
	put64(b + 8, 0);
	put32(b + 24, 1); /* pool without bags */
	EXPECT_PROTOCOL(body_rc(buf, len), "pool 1 with n_bags 0");

	len = ENC("hello_req");
	b = BODY(len);
	b[0] = 2; /* min 2 > max 1 */
	EXPECT_PROTOCOL(body_rc(buf, len), "1 <= min <= max");
	b[0] = 0;
	b[2] = 0; /* 0..0 */
	EXPECT_PROTOCOL(body_rc(buf, len), "1 <= min <= max");

	len = ENC("auth_resp");
	put32(BODY(len), 4);
	EXPECT_PROTOCOL(body_rc(buf, len), "role 4");

	len = ENC("lookup_req");
	put32(BODY(len) + 12, 3);
	EXPECT_PROTOCOL(body_rc(buf, len), "undefined flags");

	len = ENC("prefetch_resp");
	put64(BODY(len), 0);
	EXPECT_PROTOCOL(body_rc(buf, len), "ticket handle 0");

	len = ENC("table_describe_req_id");
	b = BODY(len);
	put32(b + 4, 3); /* id and a 3-byte name that is not there */
	EXPECT_PROTOCOL(body_rc(buf, len), "table name needs 3 bytes");

	len = ENC("table_describe_req_name");
	b = BODY(len);
	put32(b, 7);
	EXPECT_PROTOCOL(body_rc(buf, len), "by id and by name");

	len = ENC("table_create_req");
	b = BODY(len);
	put32(b + 112, 0); /* empty name */
	EXPECT_PROTOCOL(body_rc(buf, len), "table name is 0 bytes");
	put32(b + 112, 64);
	EXPECT_PROTOCOL(body_rc(buf, len), "table name is 64 bytes");
	put32(b + 112, 11);
	b[116 + 3] = 0; /* "ads\0..." */
	EXPECT_PROTOCOL(body_rc(buf, len), "NUL");

	len = ENC("error_pull");
	put32(BODY(len), PROTO_ERRMSG_MAX + 1);
	EXPECT_PROTOCOL(body_rc(buf, len), "more than 1024");
}

Test(proto, decoders_refuse_the_wrong_frame_as_a_caller_bug)
{
	SAMPLES();
	proto_hdr h;
	size_t len = ENC("pull_req_ids");
	cr_assert_eq(proto_hdr_decode(buf, len, &h, UINT32_MAX), EMDB_OK);
	proto_push_req push;
	proto_pull_resp pr;
	cr_assert_eq(proto_push_req_decode(&h, buf + PROTO_HDR_SIZE, &push), EMDB_ERR_INVALID);
	cr_assert_eq(proto_pull_resp_decode(&h, buf + PROTO_HDR_SIZE, &pr), EMDB_ERR_INVALID);
	cr_assert_eq(proto_empty_decode(&h), EMDB_ERR_INVALID);

	len = ENC("error_pull");
	cr_assert_eq(proto_hdr_decode(buf, len, &h, UINT32_MAX), EMDB_OK);
	cr_assert_eq(proto_pull_resp_decode(&h, buf + PROTO_HDR_SIZE, &pr), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_last_error(), "proto_err_decode"), "%s", emdb_last_error());

	len = ENC("push_resp");
	cr_assert_eq(proto_hdr_decode(buf, len, &h, UINT32_MAX), EMDB_OK);
	cr_assert_eq(proto_empty_decode(&h), EMDB_OK);
	h.body_len = 8;
	EXPECT_PROTOCOL(proto_empty_decode(&h), "trail");
}

Test(proto, push_update_refuses_bags_and_what_push_refuses)
{
	SAMPLES();
	proto_hdr h;
	proto_push_update_req m;
	size_t len = ENC("push_update_req_ids");
	uint8_t *b = BODY(len);
	put32(b + 20, 1); /* n_bags */
	EXPECT_PROTOCOL(body_rc(buf, len), "PUSH_UPDATE request: n_bags 1, pool 0: no bags");
	put32(b + 20, 0);
	put32(b + 24, EMDB_POOL_SUM); /* pool without bags */
	EXPECT_PROTOCOL(body_rc(buf, len), "n_bags 0, pool 1: no bags in a PUSH_UPDATE");
	put32(b + 24, 0);
	cr_assert_eq(body_rc(buf, len), EMDB_OK);
	put32(b + 28, 4); /* 4 rows of grads for 5 ids */
	EXPECT_PROTOCOL(body_rc(buf, len), "n_rows 4 for n_ids 5");
	put32(b + 28, 5);
	put64(b + 8, 7); /* a ticket and ids */
	EXPECT_PROTOCOL(body_rc(buf, len), "one or the other");
	put64(b + 8, 0);
	put32(b + 4, 4); /* dim 4: 20 floats claimed, 15 sent */
	EXPECT_PROTOCOL(body_rc(buf, len), "grads needs 80 bytes");

	/* A valid PUSH with bags, relabelled PUSH_UPDATE (with its version),
	 * is malformed. */
	len = ENC("push_req_bags");
	buf[4] = proto_op_version(PROTO_OP_PUSH_UPDATE);
	buf[6] = PROTO_OP_PUSH_UPDATE & 0xFF;
	buf[7] = PROTO_OP_PUSH_UPDATE >> 8;
	EXPECT_PROTOCOL(body_rc(buf, len), "n_bags 2, pool 1");

	/* The response is UPDATE's: 8 bytes, no more, no less. */
	len = ENC("push_update_resp");
	memset(buf + len, 0, 8);
	EXPECT_PROTOCOL(body_as(buf, 16), "trail");
	EXPECT_PROTOCOL(body_as(buf, 0), "rows needs 8 bytes");

	/* Each decoder takes only its own opcode: a caller bug otherwise. */
	len = ENC("push_req_ids");
	cr_assert_eq(proto_hdr_decode(buf, len, &h, UINT32_MAX), EMDB_OK);
	cr_assert_eq(proto_push_update_req_decode(&h, buf + PROTO_HDR_SIZE, &m), EMDB_ERR_INVALID);
	len = ENC("push_update_req_ids");
	cr_assert_eq(proto_hdr_decode(buf, len, &h, UINT32_MAX), EMDB_OK);
	cr_assert_eq(proto_push_req_decode(&h, buf + PROTO_HDR_SIZE, &m), EMDB_ERR_INVALID);
	cr_assert_eq(proto_push_update_req_decode(&h, buf + PROTO_HDR_SIZE, &m), EMDB_OK);
	proto_update_resp ur;
	len = ENC("push_update_resp");
	cr_assert_eq(proto_hdr_decode(buf, len, &h, UINT32_MAX), EMDB_OK);
	cr_assert_eq(proto_update_resp_decode(&h, buf + PROTO_HDR_SIZE, &ur), EMDB_ERR_INVALID);
	cr_assert_eq(proto_push_update_resp_decode(&h, buf + PROTO_HDR_SIZE, &ur), EMDB_OK);
	cr_assert_eq(ur.rows, 5);

	/* Encoders refuse bags, flat and gathered, and what PUSH's refuse. */
	proto_push_update_req bad = { 1, 3, 0, 5, sample_ids, 2, EMDB_POOL_SUM, sample_offsets, 2,
				      sample_vecs };
	proto_iov v;
	len = 123;
	cr_assert_eq(proto_push_update_req_encode(buf, sizeof(bufmem), 1, &bad, &len),
		     EMDB_ERR_INVALID);
	cr_assert_eq(len, 0);
	cr_assert(strstr(emdb_last_error(), "no bags"), "%s", emdb_last_error());
	cr_assert_eq(proto_push_update_req_iov(&v, 1, &bad), EMDB_ERR_INVALID);
	bad = (proto_push_update_req){ 1, 3, 0, 0, NULL, 0, EMDB_POOL_MEAN, NULL, 0, NULL };
	cr_assert_eq(proto_push_update_req_encode(NULL, 0, 1, &bad, &len), EMDB_ERR_INVALID);
	bad = (proto_push_update_req){ 1, 3, 0, 5, sample_ids, 0, 0, NULL, 4, sample_vecs };
	cr_assert_eq(proto_push_update_req_encode(buf, sizeof(bufmem), 1, &bad, &len),
		     EMDB_ERR_INVALID);
	cr_assert_eq(proto_push_update_req_iov(&v, 1, &bad), EMDB_ERR_INVALID);
	/* The same message with bags is a fine PUSH. */
	bad = (proto_push_update_req){ 1, 3, 0, 5, sample_ids, 2, EMDB_POOL_SUM, sample_offsets, 2,
				       sample_vecs };
	cr_assert_eq(proto_push_req_encode(buf, sizeof(bufmem), 1, &bad, &len), EMDB_OK);
}

/* TABLE_RESERVE: u32 table, u32 reserved, u64 rows; an empty response;
 * both frames of version 2. */
Test(proto, table_reserve_carries_a_table_and_a_row_count)
{
	SAMPLES();
	proto_msg m;
	proto_hdr h;
	size_t len = ENC("table_reserve_req");
	cr_assert_eq(len, PROTO_HDR_SIZE + 16);
	cr_assert_eq(buf[4], 2, "TABLE_RESERVE is version 2's");
	uint8_t *b = BODY(len);
	const uint8_t want[16] = { 7, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x90, 0x2f, 0x50, 0x09, 0, 0, 0 };
	cr_assert_eq(memcmp(b, want, 16), 0, "table 7, reserved 0, rows 40000000000 little-endian");
	dec(buf, len, &m);
	cr_assert_eq(m.table_reserve_req.table, 7);
	cr_assert_eq(m.table_reserve_req.rows, 40000000000ull, "rows above 2^32 cross intact");

	/* Any u64 is a count the engine judges; every table id too. */
	proto_table_reserve_req r = { 0xFFFFFFFFu, UINT64_MAX };
	cr_assert_eq(proto_table_reserve_req_encode(buf, sizeof(bufmem), 5, &r, &len), EMDB_OK);
	dec(buf, len, &m);
	cr_assert_eq(m.table_reserve_req.table, 0xFFFFFFFFu);
	cr_assert_eq(m.table_reserve_req.rows, UINT64_MAX);
	r = (proto_table_reserve_req){ 1, 0 };
	cr_assert_eq(proto_table_reserve_req_encode(buf, sizeof(bufmem), 5, &r, &len), EMDB_OK);
	dec(buf, len, &m);
	cr_assert_eq(m.table_reserve_req.rows, 0);

	/* The reserved field must be zero, every byte of it. */
	len = ENC("table_reserve_req");
	b = BODY(len);
	for (int k = 4; k < 8; k++) {
		b[k] = 0x80;
		EXPECT_PROTOCOL(body_rc(buf, len), "reserved");
		b[k] = 0;
	}
	cr_assert_eq(body_rc(buf, len), EMDB_OK);

	/* Exactly 16 bytes: shorter and longer bodies are malformed. */
	memset(buf + len, 0, 16);
	EXPECT_PROTOCOL(body_as(buf, 0), "table needs 4 bytes");
	EXPECT_PROTOCOL(body_as(buf, 8), "rows needs 8 bytes at offset 8");
	EXPECT_PROTOCOL(body_as(buf, 24), "8 bytes trail");
	/* The response is empty: a body of 8 bytes is malformed. */
	len = ENC("table_reserve_resp");
	cr_assert_eq(len, PROTO_HDR_SIZE);
	cr_assert_eq(buf[4], 2);
	memset(buf + len, 0, 8);
	EXPECT_PROTOCOL(body_as(buf, 8), "trail");

	/* Its decoder takes only its own request: a caller bug otherwise. */
	proto_table_reserve_req got;
	len = ENC("table_drop_req");
	cr_assert_eq(proto_hdr_decode(buf, len, &h, UINT32_MAX), EMDB_OK);
	cr_assert_eq(proto_table_reserve_req_decode(&h, buf + PROTO_HDR_SIZE, &got), EMDB_ERR_INVALID);
	len = ENC("table_reserve_req");
	cr_assert_eq(proto_hdr_decode(buf, len, &h, UINT32_MAX), EMDB_OK);
	proto_table_drop_req drop;
	cr_assert_eq(proto_table_drop_req_decode(&h, buf + PROTO_HDR_SIZE, &drop), EMDB_ERR_INVALID);
	cr_assert_eq(proto_table_reserve_req_decode(&h, buf + PROTO_HDR_SIZE, &got), EMDB_OK);

	/* Version 1 lacks it: a TABLE_RESERVE frame saying 1 is malformed
	 * from its header, and its error reply is a version-2 frame. */
	buf[4] = 1;
	cr_assert_eq(proto_hdr_decode(buf, len, &h, UINT32_MAX), EMDB_ERR_PROTOCOL);
	cr_assert(strstr(emdb_last_error(), "TABLE_RESERVE frame of version 1: its layout is version 2"),
		  "%s", emdb_last_error());
	cr_assert_eq(proto_op_version(PROTO_OP_TABLE_RESERVE), 2);
	cr_assert(!proto_op_known_at(PROTO_OP_TABLE_RESERVE, 1));
	cr_assert(proto_op_known_at(PROTO_OP_TABLE_RESERVE, 2));
	cr_assert_eq(proto_err_encode(buf, sizeof(bufmem), 9, PROTO_OP_TABLE_RESERVE, EMDB_ERR_NO_TABLE,
				      "no such table", &len),
		     EMDB_OK);
	cr_assert_eq(buf[4], 2);
}

Test(proto, encoders_refuse_what_decoders_would)
{
	uint8_t *buf = (uint8_t *)bufmem;
	size_t len = 123;
	proto_pull_req pull = { 1, 4, 9, 2, sample_ids, 0, 0, NULL };
	cr_assert_eq(proto_pull_req_encode(buf, sizeof(bufmem), 1, &pull, &len), EMDB_ERR_INVALID);
	cr_assert_eq(len, 0);
	pull.ticket = 0;
	pull.ids = NULL;
	cr_assert_eq(proto_pull_req_encode(buf, sizeof(bufmem), 1, &pull, &len), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_last_error(), "ids is NULL"), "%s", emdb_last_error());
	pull.ids = sample_ids;
	pull.pool = EMDB_POOL_SUM;
	cr_assert_eq(proto_pull_req_encode(buf, sizeof(bufmem), 1, &pull, &len), EMDB_ERR_INVALID);

	proto_push_req push = { 1, 3, 0, 5, sample_ids, 0, 0, NULL, 4, sample_vecs };
	cr_assert_eq(proto_push_req_encode(buf, sizeof(bufmem), 1, &push, &len), EMDB_ERR_INVALID);
	proto_iov v;
	cr_assert_eq(proto_push_req_iov(&v, 1, &push), EMDB_ERR_INVALID);
	/* A frame beyond 4 GiB of body. */
	push = (proto_push_req){ 1, 65536, 7, 0, NULL, 0, 0, NULL, 1u << 16, sample_vecs };
	cr_assert_eq(proto_push_req_encode(NULL, 0, 1, &push, &len), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_last_error(), "do not fit"), "%s", emdb_last_error());

	proto_table_create_req tc = { sample_cfg("x") };
	memset(tc.cfg.name, 'n', sizeof(tc.cfg.name)); /* no NUL */
	cr_assert_eq(proto_table_create_req_encode(buf, sizeof(bufmem), 1, &tc, &len),
		     EMDB_ERR_INVALID);
	tc.cfg.name[0] = 0;
	cr_assert_eq(proto_table_create_req_encode(buf, sizeof(bufmem), 1, &tc, &len),
		     EMDB_ERR_INVALID);

	proto_hello_req hello = { 0, 1, { NULL, 0 } };
	cr_assert_eq(proto_hello_req_encode(buf, sizeof(bufmem), 1, &hello, &len), EMDB_ERR_INVALID);
	hello.ver_min = 1;
	hello.name.len = 3; /* NULL with a length */
	cr_assert_eq(proto_hello_req_encode(buf, sizeof(bufmem), 1, &hello, &len), EMDB_ERR_INVALID);
	char big[PROTO_TOKEN_MAX + 2];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	proto_auth_req auth = { proto_cstr(big) };
	cr_assert_eq(proto_auth_req_encode(buf, sizeof(bufmem), 1, &auth, &len), EMDB_ERR_INVALID);
	proto_auth_resp ar = { PROTO_ROLE_NONE };
	cr_assert_eq(proto_auth_resp_encode(buf, sizeof(bufmem), 1, &ar, &len), EMDB_ERR_INVALID);
	cr_assert_eq(proto_empty_encode(buf, sizeof(bufmem), 1, PROTO_OP_PULL, false, &len),
		     EMDB_ERR_INVALID);
	proto_prefetch_resp pr = { 0, 1, 1 };
	cr_assert_eq(proto_prefetch_resp_encode(buf, sizeof(bufmem), 1, &pr, &len),
		     EMDB_ERR_INVALID);
}

/* ------------------------------------------------------------------ */
/* Persistence bodies                                                   */
/* ------------------------------------------------------------------ */

Test(proto, persistence_bodies_carry_their_fields)
{
	SAMPLES();
	proto_msg m;
	size_t len = ENC("checkpoint_req_incremental");
	cr_assert_eq(len, PROTO_HDR_SIZE + 8);
	dec(buf, len, &m);
	cr_assert_eq(m.checkpoint_req.kind, EMDB_CKPT_INCREMENTAL);
	len = ENC("checkpoint_resp");
	dec(buf, len, &m);
	cr_assert_eq(m.checkpoint_resp.job, 3);
	len = ENC("restore_req");
	cr_assert_eq(len, PROTO_HDR_SIZE + 8);
	dec(buf, len, &m);
	cr_assert_eq(m.restore_req.ckpt, 0);
	len = ENC("checkpoint_delete_req");
	dec(buf, len, &m);
	cr_assert_eq(m.checkpoint_delete_req.ckpt, 4);

	len = ENC("job_status_resp_idle");
	cr_assert_eq(len, PROTO_HDR_SIZE + 176, "the fixed part is 176 bytes");
	len = ENC("job_status_resp_failed");
	cr_assert_eq(len, PROTO_HDR_SIZE + 176 + 40, "a 33-byte message and 7 of padding");
	dec(buf, len, &m);
	const proto_job_status_resp *js = &m.job_status_resp;
	cr_assert_eq(js->job, 5);
	cr_assert_eq(js->kind, PROTO_JOB_CHECKPOINT_INCREMENTAL);
	cr_assert_eq(js->state, PROTO_JOB_FAILED);
	cr_assert_eq(js->progress.phase, EMDB_PHASE_FAILED);
	cr_assert_eq(js->progress.elapsed_ns, 1000);
	cr_assert_eq(js->error, EMDB_ERR_IO);
	cr_assert(str_eq(js->message, proto_cstr("IO error: No space left on device")));
	cr_assert_eq((const uint8_t *)js->message.p, buf + PROTO_HDR_SIZE + 176);
	len = ENC("job_status_resp_done");
	dec(buf, len, &m);
	cr_assert_eq(memcmp(&js->result, &sample_ckpts[1], sizeof(emdb_ckpt_info)), 0);
	cr_assert_eq(js->progress.bytes_total, 1ull << 33);
	cr_assert_eq(js->progress.ckpt_id, 5);
	cr_assert_eq(js->message.len, 0);
	/* The record sits at body offset 88 with emdb_ckpt_info's layout. */
	cr_assert_eq(memcmp(BODY(len) + 88, &sample_ckpts[1], PROTO_CKPT_INFO_SIZE), 0);

	len = ENC("checkpoint_list_resp");
	cr_assert_eq(len, PROTO_HDR_SIZE + 8 + 2 * 80);
	dec(buf, len, &m);
	cr_assert_eq(m.checkpoint_list_resp.n, 2);
	cr_assert_eq((const uint8_t *)m.checkpoint_list_resp.ckpts, buf + PROTO_HDR_SIZE + 8,
		     "records are used in place");
	cr_assert_eq(memcmp(m.checkpoint_list_resp.ckpts, sample_ckpts, sizeof(sample_ckpts)), 0);
	len = ENC("checkpoint_list_resp_empty");
	dec(buf, len, &m);
	cr_assert_eq(m.checkpoint_list_resp.n, 0);
	cr_assert_null(m.checkpoint_list_resp.ckpts);
}

Test(proto, config_set_carries_1_to_64_pairs)
{
	SAMPLES();
	size_t len = ENC("config_set_req_3");
	uint8_t *b = BODY(len);
	put32(b, 0);
	EXPECT_PROTOCOL(body_rc(buf, len), "no pair");
	put32(b, 65);
	EXPECT_PROTOCOL(body_rc(buf, len), "at most 64 allowed");
	put32(b, 4); /* one pair more than the body holds */
	EXPECT_PROTOCOL(body_rc(buf, len), "key_len needs");
	put32(b, 2); /* one pair fewer: the third is trailing bytes */
	EXPECT_PROTOCOL(body_rc(buf, len), "");
	put32(b, 3);
	b[4] = 1;
	EXPECT_PROTOCOL(body_rc(buf, len), "reserved");

	proto_kv many[PROTO_CONFIG_SET_MAX + 1];
	for (size_t i = 0; i <= PROTO_CONFIG_SET_MAX; i++)
		many[i] = (proto_kv){ proto_cstr("log_level"), proto_cstr("info") };
	proto_config_set_req m = { PROTO_CONFIG_SET_MAX + 1, many, NULL, 0 };
	cr_assert_eq(proto_config_set_req_encode(buf, sizeof(bufmem), 1, &m, &len), EMDB_ERR_INVALID);
	m.n = 0;
	cr_assert_eq(proto_config_set_req_encode(buf, sizeof(bufmem), 1, &m, &len), EMDB_ERR_INVALID);
	m.n = PROTO_CONFIG_SET_MAX;
	cr_assert_eq(proto_config_set_req_encode(buf, sizeof(bufmem), 1, &m, &len), EMDB_OK);
	proto_msg d;
	dec(buf, len, &d);
	cr_assert_eq(d.config_set_req.n, PROTO_CONFIG_SET_MAX);
}

Test(proto, malformed_persistence_bodies_are_refused)
{
	SAMPLES();
	size_t len = ENC("checkpoint_req");
	uint8_t *b = BODY(len);
	b[5] = 1;
	EXPECT_PROTOCOL(body_rc(buf, len), "reserved");

	len = ENC("job_status_resp_running");
	b = BODY(len);
	b[20] = 1; /* the word after phase */
	EXPECT_PROTOCOL(body_rc(buf, len), "reserved");

	len = ENC("job_status_resp_failed");
	b = BODY(len);
	put32(b + 172, 41); /* 41 bytes of message claimed, 40 left */
	EXPECT_PROTOCOL(body_rc(buf, len), "message needs 41 bytes at offset 176");
	put32(b + 172, PROTO_ERRMSG_MAX + 1);
	EXPECT_PROTOCOL(body_rc(buf, len), "more than 1024");
	put32(b + 172, 33);
	b[176 + 33] = 'x';
	EXPECT_PROTOCOL(body_rc(buf, len), "padding");

	len = ENC("checkpoint_list_resp");
	b = BODY(len);
	put32(b, 3); /* 3 records claimed, 2 sent */
	EXPECT_PROTOCOL(body_rc(buf, len), "checkpoints needs 240 bytes at offset 8");
	put32(b, 1);
	EXPECT_PROTOCOL(body_rc(buf, len), "80 bytes trail");
	put32(b, 0xFFFFFFFFu);
	EXPECT_PROTOCOL(body_rc(buf, len), "checkpoints needs");
	put32(b, 2);
	b[6] = 1;
	EXPECT_PROTOCOL(body_rc(buf, len), "reserved");

	/* Empty bodies stay empty. */
	len = ENC("checkpoint_list_req");
	memset(buf + len, 0, 8);
	EXPECT_PROTOCOL(body_as(buf, 8), "trail");
	len = ENC("checkpoint_delete_resp");
	memset(buf + len, 0, 8);
	EXPECT_PROTOCOL(body_as(buf, 8), "trail");

	/* A JOB_STATUS request body read as its response is too short. */
	len = ENC("job_status_req");
	buf[5] = PROTO_FLAG_RESPONSE;
	EXPECT_PROTOCOL(body_rc(buf, len), "needs");

	/* Encoders refuse what the decoders would. */
	size_t got = 1;
	proto_job_status_resp js = { .job = 1, .message = { NULL, 3 } };
	cr_assert_eq(proto_job_status_resp_encode(buf, sizeof(bufmem), 1, &js, &got), EMDB_ERR_INVALID);
	cr_assert_eq(got, 0);
	char big[PROTO_ERRMSG_MAX + 1];
	memset(big, 'e', sizeof(big));
	js.message = (proto_str){ big, sizeof(big) };
	cr_assert_eq(proto_job_status_resp_encode(buf, sizeof(bufmem), 1, &js, &got), EMDB_ERR_INVALID);
	proto_checkpoint_list_resp cl = { 1, NULL };
	cr_assert_eq(proto_checkpoint_list_resp_encode(buf, sizeof(bufmem), 1, &cl, &got),
		     EMDB_ERR_INVALID);
	cr_assert_eq(proto_empty_encode(buf, sizeof(bufmem), 1, PROTO_OP_CHECKPOINT, true, &got),
		     EMDB_ERR_INVALID);
}

/* ------------------------------------------------------------------ */
/* Roles                                                                */
/* ------------------------------------------------------------------ */

Test(proto, roles_nest_as_the_issue_says)
{
	uint16_t reader_ops[] = { PROTO_OP_HELLO, PROTO_OP_AUTH, PROTO_OP_PING, PROTO_OP_INFO,
				  PROTO_OP_STATS, PROTO_OP_TABLE_LIST, PROTO_OP_TABLE_DESCRIBE,
				  PROTO_OP_LOOKUP, PROTO_OP_JOB_STATUS, PROTO_OP_CHECKPOINT_LIST };
	uint16_t admin_ops[] = { PROTO_OP_TABLE_CREATE, PROTO_OP_TABLE_DROP, PROTO_OP_CONFIG_SET,
				 PROTO_OP_SHUTDOWN, PROTO_OP_CHECKPOINT, PROTO_OP_RESTORE,
				 PROTO_OP_CHECKPOINT_DELETE, PROTO_OP_TABLE_RESERVE, PROTO_OP_LINKTEST };
	int n_reader = 0, n_trainer = 0, n_admin = 0, n_none = 0;
	for (uint32_t op = 0; op <= 0xFFFF; op++) {
		n_none += proto_op_allowed(PROTO_ROLE_NONE, (uint16_t)op);
		n_reader += proto_op_allowed(PROTO_ROLE_READER, (uint16_t)op);
		n_trainer += proto_op_allowed(PROTO_ROLE_TRAINER, (uint16_t)op);
		n_admin += proto_op_allowed(PROTO_ROLE_ADMIN, (uint16_t)op);
		if (!proto_op_known((uint16_t)op))
			cr_assert(!proto_op_allowed(PROTO_ROLE_ADMIN, (uint16_t)op));
	}
	cr_assert_eq(n_none, 2);
	cr_assert(proto_op_allowed(PROTO_ROLE_NONE, PROTO_OP_HELLO));
	cr_assert(proto_op_allowed(PROTO_ROLE_NONE, PROTO_OP_AUTH));
	cr_assert_eq(n_reader, 10);
	for (size_t i = 0; i < 10; i++)
		cr_assert(proto_op_allowed(PROTO_ROLE_READER, reader_ops[i]));
	int n_ops = 0;
#define COUNT_OP_(NAME, name, value, ver, role, rq, rs) n_ops++;
	PROTO_OP_MAP(COUNT_OP_)
#undef COUNT_OP_
	cr_assert_eq(n_admin, n_ops, "an admin may send every opcode");
	cr_assert_eq(n_trainer, n_ops - (int)(sizeof(admin_ops) / sizeof(admin_ops[0])),
		     "a trainer may send all but the admin's opcodes");
	for (size_t i = 0; i < sizeof(admin_ops) / sizeof(admin_ops[0]); i++) {
		cr_assert(!proto_op_allowed(PROTO_ROLE_TRAINER, admin_ops[i]));
		cr_assert(proto_op_allowed(PROTO_ROLE_ADMIN, admin_ops[i]));
	}
	cr_assert(!proto_op_allowed(PROTO_ROLE_READER, PROTO_OP_PULL));
	cr_assert(!proto_op_allowed(PROTO_ROLE_READER, PROTO_OP_PUSH_UPDATE));
	cr_assert(proto_op_allowed(PROTO_ROLE_TRAINER, PROTO_OP_PUSH_UPDATE));
	cr_assert_eq(PROTO_OP_PUSH_UPDATE, 0x0207);
	cr_assert_str_eq(proto_op_name(0x0207), "PUSH_UPDATE");
	cr_assert_eq(PROTO_OP_TABLE_RESERVE, 0x0105, "the first free value of the tables range");
	cr_assert_str_eq(proto_op_name(0x0105), "TABLE_RESERVE");
	cr_assert(!proto_op_allowed(PROTO_ROLE_READER, PROTO_OP_CONFIG_GET));
	cr_assert(proto_op_allowed(PROTO_ROLE_TRAINER, PROTO_OP_CONFIG_GET));
	cr_assert(!proto_op_allowed((proto_role)7, PROTO_OP_PING));
	cr_assert_str_eq(proto_op_name(PROTO_OP_READ_STATE), "READ_STATE");
	cr_assert_str_eq(proto_op_name(0), "NONE");
	cr_assert_str_eq(proto_op_name(0x0300), "CHECKPOINT");
	cr_assert_str_eq(proto_op_name(0x0305), "UNKNOWN");
	cr_assert_str_eq(proto_role_name(PROTO_ROLE_TRAINER), "trainer");
}

/* ------------------------------------------------------------------ */
/* Random and mutated frames                                            */
/* ------------------------------------------------------------------ */

static const uint16_t all_ops[] = {
#define OPS_(NAME, name, value, ver, role, rq, rs) value,
	PROTO_OP_MAP(OPS_)
#undef OPS_
	PROTO_OP_NONE,
};

/* Decode a frame the way a server or client would; if it decodes, it must
 * re-encode to the same bytes. */
static void decode_checked(const uint8_t *frame, size_t len)
{
	proto_hdr h;
	proto_msg m;
	int rc = proto_hdr_decode(frame, len, &h, UINT32_MAX);
	cr_assert(rc > 0 || rc == EMDB_OK || rc == EMDB_ERR_PROTOCOL || rc == EMDB_ERR_UNSUPPORTED,
		  "header rc %d", rc);
	if (rc || len < PROTO_HDR_SIZE + (size_t)h.body_len)
		return;
	rc = proto_msg_decode(&h, frame + PROTO_HDR_SIZE, &m);
	cr_assert(rc == EMDB_OK || rc == EMDB_ERR_PROTOCOL, "%s: rc %d: %s",
		  proto_op_name(h.opcode), rc, emdb_last_error());
	if (rc)
		return;
	uint8_t *out = (uint8_t *)bufmem2;
	size_t len2;
	rc = proto_msg_encode(out, sizeof(bufmem2), &h, &m, &len2);
	cr_assert_eq(rc, EMDB_OK, "%s: re-encode: %s", proto_op_name(h.opcode), emdb_last_error());
	cr_assert_eq(len2, PROTO_HDR_SIZE + (size_t)h.body_len);
	cr_assert_eq(memcmp(out, frame, len2), 0, "%s: re-encoding differs",
		     proto_op_name(h.opcode));
}

Test(proto, random_frames_get_a_clean_error)
{
	uint8_t *buf = (uint8_t *)bufmem;
	int ok = 0;
	for (int i = 0; i < 5000; i++) {
		uint32_t body = (uint32_t)(rnd() % 40) * 8;
		uint16_t op = all_ops[rnd() % (sizeof(all_ops) / 2)];
		proto_hdr h = { proto_op_version(op), (uint8_t)(rnd() & 1), op, 0, rnd(), body };
		if (h.flags && rnd() % 4 == 0)
			h.status = -(int32_t)(rnd() % 20);
		proto_hdr_encode(buf, &h);
		/* Small numbers make counts plausible, zeros make padding valid. */
		for (uint32_t k = 0; k < body; k++) {
			uint64_t x = rnd();
			uint8_t byte = (uint8_t)(x >> 8);
			buf[PROTO_HDR_SIZE + k] = x % 3 == 0 ? byte : x % 3 == 1 ? 0 : byte % 8;
		}
		decode_checked(buf, PROTO_HDR_SIZE + body);
		proto_msg m;
		ok += proto_msg_decode(&h, buf + PROTO_HDR_SIZE, &m) == EMDB_OK;
	}
	cr_log_info("%d of 5000 random frames decoded", ok);
}

Test(proto, mutated_frames_get_a_clean_error)
{
	SAMPLES();
	uint8_t *frame = (uint8_t *)bufmem + 8192; /* 8-aligned */
	int ok = 0, n = 0;
	for (size_t i = 0; i < n_all; i++) {
		size_t len = enc(&all[i], buf, 8192);
		for (int t = 0; t < 200; t++, n++) {
			memcpy(frame, buf, len);
			size_t flen = len;
			int muts = 1 + (int)(rnd() % 4);
			for (int k = 0; k < muts; k++) {
				switch (rnd() % 6) {
				case 0: /* flip a bit anywhere */
					frame[rnd() % flen] ^= (uint8_t)(1u << (rnd() % 8));
					break;
				case 1: /* a count-sized field set to something extreme */
				{
					size_t at = PROTO_HDR_SIZE + (rnd() % ((flen - PROTO_HDR_SIZE) / 4 + 1)) * 4;
					uint32_t vals[] = { 0, 1, 0xFFFFFFFFu, 0x80000000u, 0x7FFFFFFFu, 63, 64 };
					if (at + 4 <= flen)
						put32(frame + at, vals[rnd() % 7]);
					break;
				}
				case 2: /* truncate */
					flen = flen >= PROTO_HDR_SIZE + 16 ? flen - 8 * (1 + rnd() % 2) : flen;
					put32(frame + 20, (uint32_t)(flen - PROTO_HDR_SIZE));
					break;
				case 3: /* extend with garbage */
					for (int b = 0; b < 8; b++)
						frame[flen + (size_t)b] = (uint8_t)rnd();
					flen += 8;
					put32(frame + 20, (uint32_t)(flen - PROTO_HDR_SIZE));
					break;
				case 4: /* another opcode */
					memcpy(frame + 6, &all_ops[rnd() % (sizeof(all_ops) / 2)], 2);
					break;
				case 5: /* flip the direction */
					frame[5] ^= 1;
					put32(frame + 16, 0);
					break;
				}
			}
			decode_checked(frame, flen);
			ok += body_rc(frame, flen) == EMDB_OK;
		}
	}
	cr_log_info("%d of %d mutated frames still decoded", ok, n);
}

/* PULL_WEIGHTED and PUSH_WEIGHTED (version 3): the weights' count must be
 * the IDs' where the frame carries IDs, bags are required, PUSH_WEIGHTED's
 * reserved word is zero; and no encoder puts weights in a plain PULL or
 * PUSH, where a peer would not read them. */
Test(proto, weighted_bodies_are_checked)
{
	SAMPLES();
	uint8_t *b = buf + PROTO_HDR_SIZE;
	size_t len = ENC("pull_weighted_req_ids");
	cr_assert_eq(buf[4], 3);
	put32(b + 28, 4); /* n_weights */
	cr_assert_eq(body_rc(buf, len), EMDB_ERR_PROTOCOL);
	cr_assert(strstr(emdb_last_error(), "n_weights 4 for n_ids 5"), "%s", emdb_last_error());
	len = ENC("pull_weighted_req_ids");
	put32(b + 20, 0); /* n_bags */
	put32(b + 24, 0); /* pool */
	cr_assert_eq(body_rc(buf, len), EMDB_ERR_PROTOCOL);
	cr_assert(strstr(emdb_last_error(), "weights need bags"), "%s", emdb_last_error());

	len = ENC("push_weighted_req_ids");
	cr_assert_eq(buf[4], 3);
	put32(b + 36, 1); /* reserved */
	cr_assert_eq(body_rc(buf, len), EMDB_ERR_PROTOCOL);
	len = ENC("push_weighted_req_ids");
	put32(b + 32, 6); /* n_weights */
	cr_assert_eq(body_rc(buf, len), EMDB_ERR_PROTOCOL);
	cr_assert(strstr(emdb_last_error(), "n_weights 6 for n_ids 5"), "%s", emdb_last_error());
	len = ENC("push_weighted_req_ids");
	cr_assert_eq(body_rc(buf, len - 8), 1, "a truncated frame is incomplete");
	uint32_t body_len;
	memcpy(&body_len, buf + 20, 4);
	put32(buf + 20, body_len - 8); /* the grads' last bytes missing */
	cr_assert_eq(body_rc(buf, len - 8), EMDB_ERR_PROTOCOL);

	const proto_sample *pw = find_sample(all, n_all, "pull_weighted_req_ids");
	proto_pull_weighted_req p = pw->m.pull_weighted_req;
	p.pull.n_bags = 0;
	p.pull.pool = 0;
	p.pull.offsets = NULL;
	cr_assert_eq(proto_pull_weighted_req_encode(buf, sizeof(bufmem), 1, &p, &len), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_last_error(), "PULL_WEIGHTED without bags"), "%s", emdb_last_error());
	p = pw->m.pull_weighted_req;
	p.n_weights = 4;
	cr_assert_eq(proto_pull_weighted_req_encode(buf, sizeof(bufmem), 1, &p, &len), EMDB_ERR_INVALID);
	cr_assert(strstr(emdb_last_error(), "4 weights for 5 ids"), "%s", emdb_last_error());
	const proto_sample *sw = find_sample(all, n_all, "push_weighted_req_ids");
	proto_push_weighted_req q = sw->m.push_weighted_req;
	/* The scatter-gather form writes the flat form's bytes. */
	proto_iov v;
	cr_assert_eq(proto_push_weighted_req_iov(&v, 7, &q), EMDB_OK);
	uint8_t *flat = (uint8_t *)bufmem2;
	cr_assert_eq(proto_push_weighted_req_encode(flat, sizeof(bufmem2), 7, &q, &len), EMDB_OK);
	cr_assert_eq(v.len, len);
	size_t off = 0;
	for (int i = 0; i < v.n; i++) {
		cr_assert_eq(memcmp(flat + off, v.iov[i].iov_base, v.iov[i].iov_len), 0, "iov %d", i);
		off += v.iov[i].iov_len;
	}
	cr_assert_eq(off, len);
}
