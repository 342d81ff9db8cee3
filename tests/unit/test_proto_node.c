/*
 * test_proto_node.c - the node-to-node frames (protocol/proto_node.h) and
 * how an owner node answers bad ones (cluster_serve).
 *
 * What is checked: every sample frame decodes to what was encoded and
 * re-encodes to the same bytes; every shorter prefix of it, and frames
 * broken one way at a time (magic, version, flags, opcode, status,
 * body_len, reserved bytes, padding, trailing bytes, counts that do not
 * add up, per-opcode fields that must be zero, a gradient row past the
 * rows sent) are refused with PROTOCOL (UNSUPPORTED for the version);
 * the encoder refuses what the decoder would; an array left NULL is
 * reserved zeroed, or untouched for a caller that asked where it landed
 * and fills it.  Then, through a 2-node
 * in-process cluster: a node answers a malformed frame, a frame of
 * another epoch, a response where a request belongs, an unknown table and
 * another peer's ticket with an error reply, and none of them changes a
 * row.
 */
#include <criterion/criterion.h>
#include <string.h>

#include <emdb/db.h>
#include <emdb/error.h>

#include "protocol/proto_node.h"
#include "tests/lib/protocol_spec.h"
#include "tests/fuzz/node_samples.h"
#include "tests/lib/cluster_mem.h"

static _Alignas(8) uint8_t buf[8192];

static size_t encode(const proto_node_msg *m)
{
	size_t len = 0;
	int rc = proto_node_encode(buf, sizeof(buf), m, &len, NULL);
	cr_assert_eq(rc, EMDB_OK, "encode %s: %s", proto_node_op_name(m->hdr.opcode), emdb_last_error());
	return len;
}

Test(proto_node, samples_round_trip)
{
	for (int k = 0; k < NODE_SAMPLES; k++) {
		proto_node_msg m, d;
		cr_assert(node_sample(k, &m));
		size_t len = encode(&m);
		cr_assert_eq(len % 8, 0);
		cr_assert_eq(proto_node_decode(buf, len, &d), EMDB_OK, "sample %d: %s", k, emdb_last_error());
		cr_assert_eq(d.hdr.opcode, m.hdr.opcode);
		cr_assert_eq(d.hdr.flags, m.hdr.flags);
		cr_assert_eq(d.hdr.status, m.hdr.status);
		cr_assert_eq(d.hdr.table, m.hdr.table);
		cr_assert_eq(d.hdr.epoch, m.hdr.epoch);
		static _Alignas(8) uint8_t again[8192];
		size_t len2;
		cr_assert_eq(proto_node_encode(again, sizeof(again), &d, &len2, NULL), EMDB_OK);
		cr_assert_eq(len2, len);
		cr_assert(memcmp(again, buf, len) == 0, "sample %d re-encodes differently", k);
		/* Every prefix is refused. */
		for (size_t cut = 0; cut < len; cut++)
			cr_assert_eq(proto_node_decode(buf, cut, &d), EMDB_ERR_PROTOCOL, "sample %d cut at %zu", k, cut);
	}
}

Test(proto_node, samples_carry_their_fields)
{
	proto_node_msg m, d;
	cr_assert(node_sample(6, &m)); /* mapped PUSH by ticket */
	size_t len = encode(&m);
	cr_assert_eq(proto_node_decode(buf, len, &d), EMDB_OK);
	cr_assert_eq(d.u.grads.ticket, m.u.grads.ticket);
	cr_assert_eq(d.u.grads.n_rows, 3);
	cr_assert_null(d.u.grads.ids);
	cr_assert(memcmp(d.u.grads.row_of, node_sample_rows, sizeof(node_sample_rows)) == 0);
	cr_assert(memcmp(d.u.grads.scale, node_sample_scale, sizeof(node_sample_scale)) == 0);
	cr_assert(memcmp(d.u.grads.grads, node_sample_f, 12 * 4) == 0);
	cr_assert(node_sample(15, &m)); /* PREPARE of a create */
	len = encode(&m);
	cr_assert_eq(proto_node_decode(buf, len, &d), EMDB_OK);
	cr_assert_str_eq(d.u.admin.cfg.name, "ads");
	cr_assert_eq(d.u.admin.cfg.dim, 16);
	cr_assert_eq(d.u.admin.txn, 9);
	cr_assert(node_sample(19, &m)); /* an error */
	len = encode(&m);
	cr_assert_eq(proto_node_decode(buf, len, &d), EMDB_OK);
	cr_assert_eq(d.hdr.status, EMDB_ERR_NO_TABLE);
	cr_assert_eq(d.u.err.len, 16);
}

/* Encode sample k, apply the patch, expect the decoder's refusal. */
static void refused(int k, size_t off, const void *bytes, size_t n, int want, const char *what)
{
	proto_node_msg m, d;
	cr_assert(node_sample(k, &m));
	size_t len = encode(&m);
	cr_assert_leq(off + n, len);
	memcpy(buf + off, bytes, n);
	int rc = proto_node_decode(buf, len, &d);
	cr_assert_eq(rc, want, "%s: decoder returned %d (%s)", what, rc, emdb_last_error());
}

Test(proto_node, broken_frames_are_refused)
{
	uint8_t one = 1, two = 2, ff = 0xff;
	uint32_t u;
	uint16_t op;
	refused(0, 0, "EMDB", 4, EMDB_ERR_PROTOCOL, "a client frame's magic");
	refused(0, 4, &two, 1, EMDB_ERR_UNSUPPORTED, "version 2");
	refused(0, 5, &two, 1, EMDB_ERR_PROTOCOL, "unknown flag");
	op = 0x06ff;
	refused(0, 6, &op, 2, EMDB_ERR_PROTOCOL, "unknown opcode");
	op = 0;
	refused(0, 6, &op, 2, EMDB_ERR_PROTOCOL, "opcode NONE in a request");
	u = (uint32_t)-3;
	refused(0, 8, &u, 4, EMDB_ERR_PROTOCOL, "status in a request");
	u = 8;
	refused(0, 24, &u, 4, EMDB_ERR_PROTOCOL, "body_len that is not the frame's");
	refused(0, 28, &one, 1, EMDB_ERR_PROTOCOL, "reserved header byte");
	/* SEL: n says 6 IDs, 5 are there */
	u = 6;
	refused(0, 32 + 8, &u, 4, EMDB_ERR_PROTOCOL, "more IDs than sent");
	u = 4;
	refused(0, 32 + 8, &u, 4, EMDB_ERR_PROTOCOL, "fewer IDs than sent (trailing bytes)");
	refused(0, 32 + 20, &one, 1, EMDB_ERR_PROTOCOL, "reserved SEL byte");
	refused(0, 32, &one, 1, EMDB_ERR_PROTOCOL, "PREFETCH by ticket");
	u = 4;
	refused(0, 32 + 12, &u, 4, EMDB_ERR_PROTOCOL, "PREFETCH with a dim");
	refused(3, 32 + 12, (uint32_t[]){ 0 }, 4, EMDB_ERR_PROTOCOL, "PULL without a dim");
	refused(3, 32 + 16, &one, 1, EMDB_ERR_PROTOCOL, "PULL asking for found");
	refused(13, 32 + 8, &one, 1, EMDB_ERR_PROTOCOL, "TICKET_FREE with IDs counted");
	/* GRADS: plain with n_rows != n, a row past those sent, mapped in
	 * PUSH_UPDATE, dim 0 */
	u = 4;
	refused(5, 32 + 16, &u, 4, EMDB_ERR_PROTOCOL, "plain gradients of another count");
	refused(6, 32 + 24 + 4, &ff, 1, EMDB_ERR_PROTOCOL, "a gradient row past the rows sent");
	refused(6, 32 + 20, &two, 1, EMDB_ERR_PROTOCOL, "unknown GRADS flag");
	refused(7, 32 + 12, (uint32_t[]){ 0 }, 4, EMDB_ERR_PROTOCOL, "gradients of dim 0");
	/* padding after row_of (5 u32 = 20 bytes, padded to 24) */
	refused(6, 32 + 24 + 20, &one, 1, EMDB_ERR_PROTOCOL, "padding");
	/* VECS: found of 2, an unknown flag */
	refused(11, 32 + 16 + 80, &two, 1, EMDB_ERR_PROTOCOL, "found byte of 2");
	refused(11, 32 + 8, &two, 1, EMDB_ERR_PROTOCOL, "unknown VECS flag");
	/* STEP of one worker; ADMIN of an unknown action, rows outside
	 * RESERVE, txn 0 in a phase */
	refused(14, 32, &one, 1, EMDB_ERR_PROTOCOL, "a step of 1 worker");
	refused(16, 32, (uint32_t[]){ 9 }, 4, EMDB_ERR_PROTOCOL, "unknown admin action");
	refused(17, 32 + 16, &one, 1, EMDB_ERR_PROTOCOL, "rows in a DROP");
	refused(16, 32 + 8, (uint64_t[]){ 0 }, 8, EMDB_ERR_PROTOCOL, "a phase of transaction 0");
	/* CKPT: an unknown kind, an id in an ASK, id 0 in a phase, no
	 * timeout in a HOLD, a part in a request, an unknown flag, COMMIT
	 * outside END, reserved bytes */
	refused(28, 32, (uint32_t[]){ 3 }, 4, EMDB_ERR_PROTOCOL, "checkpoint kind 3");
	refused(28, 32 + 8, &one, 1, EMDB_ERR_PROTOCOL, "an id in CKPT_ASK");
	refused(31, 32 + 8, (uint64_t[]){ 0 }, 8, EMDB_ERR_PROTOCOL, "CKPT_WRITE of checkpoint 0");
	refused(30, 32 + 32, (uint32_t[]){ 0 }, 4, EMDB_ERR_PROTOCOL, "CKPT_HOLD without a timeout");
	refused(31, 32 + 32, &one, 1, EMDB_ERR_PROTOCOL, "a timeout outside CKPT_HOLD");
	refused(31, 32 + 16, &one, 1, EMDB_ERR_PROTOCOL, "a part in a request");
	refused(32, 32 + 16, (uint64_t[]){ 0 }, 8, EMDB_ERR_PROTOCOL, "CKPT_WRITE answered without its part");
	refused(33, 32 + 4, &two, 1, EMDB_ERR_PROTOCOL, "unknown CKPT flag");
	refused(31, 32 + 4, &one, 1, EMDB_ERR_PROTOCOL, "COMMIT outside CKPT_END");
	refused(31, 32 + 36, &one, 1, EMDB_ERR_PROTOCOL, "reserved CKPT byte");
	refused(35, 32 + 8, (uint64_t[]){ 0 }, 8, EMDB_ERR_PROTOCOL, "CKPT_LOAD of checkpoint 0");
	refused(36, 32 + 24, &one, 1, EMDB_ERR_PROTOCOL, "rows in CKPT_SWAP");
	/* TICKET handle 0 */
	refused(1, 32, (uint64_t[]){ 0 }, 8, EMDB_ERR_PROTOCOL, "ticket handle 0");
	/* An unaligned frame is the caller's bug. */
	proto_node_msg d;
	cr_assert_eq(proto_node_decode(buf + 1, 40, &d), EMDB_ERR_INVALID);
}

Test(proto_node, encoder_refuses_what_the_decoder_would)
{
	proto_node_msg m;
	size_t len;
	cr_assert(node_sample(5, &m));
	m.u.grads.n_rows = 4; /* plain: one row per position */
	cr_assert_eq(proto_node_encode(buf, sizeof(buf), &m, &len, NULL), EMDB_ERR_INVALID);
	cr_assert(node_sample(6, &m));
	m.u.grads.n_rows = 2; /* row_of reaches 2 */
	cr_assert_eq(proto_node_encode(buf, sizeof(buf), &m, &len, NULL), EMDB_ERR_INVALID);
	cr_assert(node_sample(0, &m));
	m.u.sel.ticket = 5; /* PREFETCH takes IDs */
	cr_assert_eq(proto_node_encode(buf, sizeof(buf), &m, &len, NULL), EMDB_ERR_INVALID);
	cr_assert(node_sample(14, &m));
	m.u.step.workers = 1;
	cr_assert_eq(proto_node_encode(buf, sizeof(buf), &m, &len, NULL), EMDB_ERR_INVALID);
	cr_assert(node_sample(1, &m));
	m.u.ticket.handle = 0;
	cr_assert_eq(proto_node_encode(buf, sizeof(buf), &m, &len, NULL), EMDB_ERR_INVALID);
	/* The size query. */
	cr_assert(node_sample(3, &m));
	cr_assert_eq(proto_node_encode(NULL, 0, &m, &len, NULL), EMDB_ERR_LIMIT);
	cr_assert_eq(len, 32 + 24 + 40);
}

/* ---- an owner answering bad frames --------------------------------------- */

static int answer_of(memnet *net, const uint8_t *frame, size_t len, char *msg, size_t cap)
{
	uint8_t *reply;
	size_t rlen;
	int rc = memnet_send_raw(net, 0, 1, frame, len, &reply, &rlen);
	cr_assert_eq(rc, EMDB_OK, "the link: %s", emdb_last_error());
	proto_node_msg m;
	cr_assert_eq(proto_node_decode(reply, rlen, &m), EMDB_OK, "the reply: %s", emdb_last_error());
	cr_assert(m.hdr.flags & PROTO_NODE_FLAG_RESPONSE);
	msg[0] = 0;
	if (m.hdr.status < 0)
		snprintf(msg, cap, "%.*s", (int)m.u.err.len, m.u.err.p ? m.u.err.p : "");
	emdb_free(reply);
	return m.hdr.status;
}

static uint64_t rows_of(memnet *net, uint32_t table)
{
	emdb_table_info info;
	cr_assert_eq(emdb_table_describe(memnet_db(net, 1), table, &info), 0);
	return info.stats.rows;
}

Test(proto_node, an_owner_refuses_bad_frames_and_changes_nothing)
{
	memnet *net = memnet_open(2, 0);
	cr_assert_not_null(net);
	emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
	strcpy(c.name, "t");
	c.dim = 4;
	cluster_req cr = { .op = CLUSTER_TABLE_CREATE, .cfg = &c };
	cr_assert_eq(cluster_run(memnet_cl(net, 0), &cr), EMDB_OK, "%s", cr.msg);
	uint32_t t = cr.table_out;
	char msg[1100];

	/* A good PREFETCH works: the baseline. */
	proto_node_msg m;
	cr_assert(node_sample(0, &m));
	m.hdr.table = t;
	size_t len = encode(&m);
	cr_assert_eq(answer_of(net, buf, len, msg, sizeof(msg)), EMDB_OK, "%s", msg);
	cr_assert_eq(rows_of(net, t), 5);

	/* Another epoch: refused. */
	cr_assert(node_sample(5, &m)); /* a PUSH of new IDs */
	m.hdr.table = t;
	m.u.grads.ids = (const uint64_t[]){ 100, 101, 102, 103, 104 };
	m.hdr.epoch = 2;
	len = encode(&m);
	cr_assert_eq(answer_of(net, buf, len, msg, sizeof(msg)), EMDB_ERR_PROTOCOL);
	cr_assert(strstr(msg, "epoch"), "%s", msg);
	/* Truncated (a body the header does not account for). */
	m.hdr.epoch = 1;
	len = encode(&m);
	cr_assert_eq(answer_of(net, buf, len - 8, msg, sizeof(msg)), EMDB_ERR_PROTOCOL);
	/* Unknown table. */
	m.hdr.table = 99;
	len = encode(&m);
	cr_assert_eq(answer_of(net, buf, len, msg, sizeof(msg)), EMDB_ERR_NO_TABLE);
	/* A response where a request belongs. */
	m.hdr.table = t;
	len = encode(&m);
	buf[5] |= PROTO_NODE_FLAG_RESPONSE;
	cr_assert_eq(answer_of(net, buf, len, msg, sizeof(msg)), EMDB_ERR_PROTOCOL);
	/* Garbage. */
	memset(buf, 0xA5, 64);
	cr_assert_eq(answer_of(net, buf, 64, msg, sizeof(msg)), EMDB_ERR_PROTOCOL);
	cr_assert_eq(rows_of(net, t), 5, "a refused frame inserted rows");

	/* A ticket node 1 never gave node 0. */
	cr_assert(node_sample(2, &m));
	m.hdr.table = t;
	m.u.sel.ticket = 0x700000009ull;
	len = encode(&m);
	cr_assert_eq(answer_of(net, buf, len, msg, sizeof(msg)), EMDB_ERR_TICKET);
	memnet_close(net);
}

/* The frames of the version-3 operations: weighted gradients, ALTER,
 * SCAN and its page, LOAD, TABLE_STATS. */
Test(proto_node, v3_frames_carry_their_fields_and_are_checked)
{
	proto_node_msg m, d;
	cr_assert(node_sample(21, &m)); /* weighted PUSH */
	size_t len = encode(&m);
	cr_assert_eq(proto_node_decode(buf, len, &d), EMDB_OK);
	cr_assert(memcmp(d.u.grads.scale, node_sample_w, sizeof(node_sample_w)) == 0, "a weight per position");
	cr_assert_eq(d.u.grads.n_rows, 3);
	cr_assert(node_sample(22, &m)); /* ALTER */
	len = encode(&m);
	cr_assert_eq(proto_node_decode(buf, len, &d), EMDB_OK);
	cr_assert_eq(d.u.admin.action, PROTO_NODE_ADMIN_ALTER);
	cr_assert_eq(d.u.admin.opt.kind, EMDB_OPT_ADAM);
	cr_assert_eq(d.u.admin.opt.lr, 0.01);
	cr_assert_eq(d.u.admin.opt.beta2, 0.999);
	cr_assert(node_sample(24, &m)); /* a page */
	len = encode(&m);
	cr_assert_eq(proto_node_decode(buf, len, &d), EMDB_OK);
	cr_assert_eq(d.u.page.next_cursor, 19);
	cr_assert_eq(d.u.page.step, 7);
	cr_assert(memcmp(d.u.page.state, node_sample_f + 8, 4 * 4) == 0);
	cr_assert(node_sample(27, &m)); /* statistics */
	len = encode(&m);
	cr_assert_eq(proto_node_decode(buf, len, &d), EMDB_OK);
	cr_assert_eq(d.u.stats.stats.rows, 5);
	cr_assert_eq(d.u.stats.stats.bytes_index, 4096);
	cr_assert_eq(d.u.stats.alloc_bytes, 1 << 20);

	uint8_t one = 1, two = 2;
	/* weights without MAPPED */
	refused(21, 32 + 20, &two, 1, EMDB_ERR_PROTOCOL, "WEIGHTED without MAPPED");
	/* an ALTER of action 5, reserved bytes after the kind */
	refused(22, 32, (uint32_t[]){ 5 }, 4, EMDB_ERR_PROTOCOL, "unknown admin action");
	refused(22, 32 + 24 + 4, &one, 1, EMDB_ERR_PROTOCOL, "reserved ALTER byte");
	/* SCAN: no rows, dim 0, unknown flag, reserved byte */
	refused(23, 32 + 8, (uint32_t[]){ 0 }, 4, EMDB_ERR_PROTOCOL, "a page of 0 rows");
	refused(23, 32 + 12, (uint32_t[]){ 0 }, 4, EMDB_ERR_PROTOCOL, "a scan of dim 0");
	refused(23, 32 + 16, &two, 1, EMDB_ERR_PROTOCOL, "unknown SCAN flag");
	refused(23, 32 + 20, &one, 1, EMDB_ERR_PROTOCOL, "reserved SCAN byte");
	/* PAGE: more rows than sent, dim 0 */
	refused(24, 32, (uint32_t[]){ 3 }, 4, EMDB_ERR_PROTOCOL, "more page rows than sent");
	refused(24, 32 + 4, (uint32_t[]){ 0 }, 4, EMDB_ERR_PROTOCOL, "a page of dim 0");
	/* LOAD: no rows, state announced and absent */
	refused(25, 32, (uint32_t[]){ 0 }, 4, EMDB_ERR_PROTOCOL, "a load of 0 rows");
	refused(25, 32 + 8, (uint32_t[]){ 2 }, 4, EMDB_ERR_PROTOCOL, "state floats that are not there");
	/* TABLE_STATS: a request with a body */
	cr_assert(node_sample(26, &m));
	len = encode(&m);
	cr_assert_eq(len, 32);

	/* The encoder refuses what the decoder would. */
	cr_assert(node_sample(21, &m));
	m.u.grads.flags = PROTO_NODE_GRADS_WEIGHTED;
	m.u.grads.n_rows = 5;
	cr_assert_eq(proto_node_encode(buf, sizeof(buf), &m, &len, NULL), EMDB_ERR_INVALID);
	cr_assert(node_sample(23, &m));
	m.u.scan.max_rows = 0;
	cr_assert_eq(proto_node_encode(buf, sizeof(buf), &m, &len, NULL), EMDB_ERR_INVALID);
	cr_assert(node_sample(25, &m));
	m.u.load.n = 0;
	cr_assert_eq(proto_node_encode(buf, sizeof(buf), &m, &len, NULL), EMDB_ERR_INVALID);
}

/* An owner refuses SCAN and LOAD it cannot serve, and writes nothing. */
Test(proto_node, an_owner_refuses_bad_scans_and_loads)
{
	memnet *net = memnet_open(2, 0);
	cr_assert_not_null(net);
	emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
	strcpy(c.name, "t");
	c.dim = 4;
	cluster_req cr = { .op = CLUSTER_TABLE_CREATE, .cfg = &c };
	cr_assert_eq(cluster_run(memnet_cl(net, 0), &cr), EMDB_OK, "%s", cr.msg);
	uint32_t t = cr.table_out;
	char msg[1100];
	proto_node_msg m;

	cr_assert(node_sample(25, &m)); /* a good LOAD: the baseline */
	m.hdr.table = t;
	size_t len = encode(&m);
	cr_assert_eq(answer_of(net, buf, len, msg, sizeof(msg)), EMDB_OK, "%s", msg);
	cr_assert_eq(rows_of(net, t), 5);
	m.u.load.ids = (const uint64_t[]){ 100, 101, 102, 103, 104 };
	m.u.load.dim = 2; /* another dim */
	len = encode(&m);
	cr_assert_eq(answer_of(net, buf, len, msg, sizeof(msg)), EMDB_ERR_DIM);
	m.u.load.dim = 4, m.u.load.per_row = 1, m.u.load.state = node_sample_f; /* SGD keeps no state */
	len = encode(&m);
	cr_assert_eq(answer_of(net, buf, len, msg, sizeof(msg)), EMDB_ERR_DIM, "%s", msg);
	m.u.load.per_row = 0, m.hdr.table = 77;
	len = encode(&m);
	cr_assert_eq(answer_of(net, buf, len, msg, sizeof(msg)), EMDB_ERR_NO_TABLE);
	cr_assert_eq(rows_of(net, t), 5, "a refused LOAD wrote rows");

	cr_assert(node_sample(23, &m)); /* SCAN: a cursor past the rows, another dim */
	m.hdr.table = t;
	m.u.scan.flags = 0;
	len = encode(&m);
	cr_assert_eq(answer_of(net, buf, len, msg, sizeof(msg)), EMDB_ERR_INVALID, "%s", msg);
	m.u.scan.cursor = 0, m.u.scan.dim = 8;
	len = encode(&m);
	cr_assert_eq(answer_of(net, buf, len, msg, sizeof(msg)), EMDB_ERR_DIM);
	m.u.scan.dim = 4, m.u.scan.max_rows = 1u << 30;
	len = encode(&m);
	cr_assert_eq(answer_of(net, buf, len, msg, sizeof(msg)), EMDB_ERR_BATCH);
	cr_assert(node_sample(26, &m)); /* statistics of a table it lacks */
	m.hdr.table = 77;
	len = encode(&m);
	cr_assert_eq(answer_of(net, buf, len, msg, sizeof(msg)), EMDB_ERR_NO_TABLE);
	memnet_close(net);
}

/* docs/protocol.md's node-to-node section lists every node opcode. */
Test(proto_node, spec_lists_every_node_opcode)
{
	const char *text = protocol_spec_text();
	const char *sec = strstr(text, "## Node-to-node");
	cr_assert_not_null(sec, "docs/protocol.md has no node-to-node section");
	char row[128];
#define NODE_ROW_(NAME, name, value, rq, rs)                                     \
	snprintf(row, sizeof(row), "| 0x%04X | %s |", value, #NAME);             \
	cr_assert_not_null(strstr(sec, row), "docs/protocol.md lacks the row %s", row);
	PROTO_NODE_OP_MAP(NODE_ROW_)
#undef NODE_ROW_
}

/* PUSH_RANKED carries its worker's rank; a rank out of range, a nonzero
 * reserved word, or a rank in another opcode are refused. */
Test(proto_node, push_ranked_carries_the_rank)
{
	proto_node_msg m, d;
	cr_assert(node_sample(37, &m));
	size_t len = encode(&m);
	cr_assert_eq(proto_node_decode(buf, len, &d), EMDB_OK);
	cr_assert_eq(d.u.grads.rank, 2);
	cr_assert(memcmp(d.u.grads.ids, node_sample_ids, 5 * 8) == 0);
	uint32_t big = EMDB_WORKERS_MAX, one = 1;
	refused(37, PROTO_NODE_HDR_SIZE + 24, &big, 4, EMDB_ERR_PROTOCOL, "rank 65536");
	refused(37, PROTO_NODE_HDR_SIZE + 28, &one, 4, EMDB_ERR_PROTOCOL, "reserved word after the rank");
	m.u.grads.rank = EMDB_WORKERS_MAX;
	cr_assert_eq(proto_node_encode(buf, sizeof(buf), &m, &len, NULL), EMDB_ERR_INVALID);
	cr_assert(node_sample(5, &m)); /* a PUSH */
	m.u.grads.rank = 1;
	cr_assert_eq(proto_node_encode(buf, sizeof(buf), &m, &len, NULL), EMDB_ERR_INVALID);
}

/* An array left NULL is reserved: zeroed when the caller asks nothing,
 * left for the caller to fill when it asks where it landed (an owner's
 * engine writes the rows there, a home node gathers IDs and gradients). */
Test(proto_node, reserved_arrays_zeroed_unless_the_caller_fills)
{
	proto_node_msg m = { .hdr = { PROTO_NODE_VERSION, PROTO_NODE_FLAG_RESPONSE, PROTO_NODE_LOOKUP, 0, 3, 9, 0 } };
	m.u.vecs = (proto_node_vecs){ .n = 4, .width = 2, .flags = PROTO_NODE_VECS_FOUND };
	size_t len = 0;
	proto_node_where at;

	memset(buf, 0xAA, sizeof(buf));
	cr_assert_eq(proto_node_encode(buf, sizeof(buf), &m, &len, NULL), EMDB_OK);
	proto_node_msg d;
	cr_assert_eq(proto_node_decode(buf, len, &d), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(d.u.vecs.n, 4);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(d.u.vecs.vecs[i], 0.0f);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(d.u.vecs.found[i], 0);

	memset(buf, 0xAA, sizeof(buf));
	cr_assert_eq(proto_node_encode(buf, sizeof(buf), &m, &len, &at), EMDB_OK);
	cr_assert_not_null(at.floats);
	cr_assert_not_null(at.found);
	for (int i = 0; i < 8 * 4; i++)
		cr_assert_eq(((uint8_t *)at.floats)[i], 0xAA, "byte %d of the rows was written", i);
	for (int i = 0; i < 8; i++)
		at.floats[i] = (float)i;
	for (int i = 0; i < 4; i++)
		at.found[i] = (uint8_t)(i & 1);
	cr_assert_eq(proto_node_decode(buf, len, &d), EMDB_OK, "%s", emdb_last_error());
	for (int i = 0; i < 8; i++)
		cr_assert_eq(d.u.vecs.vecs[i], (float)i);
	cr_assert_eq(d.u.vecs.found[3], 1);
}

/* ECHO (a linktest's message): the payload and the reply length travel;
 * a reply length off the 8-byte grid or over the frame limit, a nonzero
 * reserved word or table, a reply length in a response are refused by
 * the decoder and the encoder alike; an owner answers the length asked,
 * in zeros, and refuses an oversize ask with an error reply. */
Test(proto_node, echo_carries_payload_and_reply_length)
{
	proto_node_msg m, d;
	size_t len;
	cr_assert(node_sample(39, &m));
	len = encode(&m);
	cr_assert_eq(len, PROTO_NODE_HDR_SIZE + 8 + 16);
	cr_assert_eq(proto_node_decode(buf, len, &d), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(d.u.echo.reply_len, 64);
	cr_assert_eq(d.u.echo.len, 16);
	cr_assert(memcmp(d.u.echo.payload, node_sample_echo, 16) == 0);
	cr_assert(node_sample(41, &m));
	len = encode(&m);
	cr_assert_eq(len, PROTO_NODE_HDR_SIZE + 16);
	cr_assert_eq(proto_node_decode(buf, len, &d), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(d.u.echo.len, 16);

	uint32_t odd = 12, huge = 0x80000000u, one = 1;
	refused(39, PROTO_NODE_HDR_SIZE, &odd, 4, EMDB_ERR_PROTOCOL, "a reply length off the 8-byte grid");
	refused(39, PROTO_NODE_HDR_SIZE, &huge, 4, EMDB_ERR_PROTOCOL, "a reply over the frame limit");
	refused(39, PROTO_NODE_HDR_SIZE + 4, &one, 4, EMDB_ERR_PROTOCOL, "the reserved word");
	refused(39, 12, &one, 4, EMDB_ERR_PROTOCOL, "a table in an echo");

	cr_assert(node_sample(39, &m));
	m.u.echo.reply_len = 12;
	cr_assert_eq(proto_node_encode(buf, sizeof(buf), &m, &len, NULL), EMDB_ERR_INVALID);
	cr_assert(node_sample(39, &m));
	m.u.echo.len = 12;
	cr_assert_eq(proto_node_encode(buf, sizeof(buf), &m, &len, NULL), EMDB_ERR_INVALID);
	cr_assert(node_sample(41, &m));
	m.u.echo.reply_len = 8;
	cr_assert_eq(proto_node_encode(buf, sizeof(buf), &m, &len, NULL), EMDB_ERR_INVALID);
	/* A NULL payload is reserved zeroed. */
	cr_assert(node_sample(39, &m));
	m.u.echo.payload = NULL;
	memset(buf, 0xAA, sizeof(buf));
	len = encode(&m);
	cr_assert_eq(proto_node_decode(buf, len, &d), EMDB_OK);
	for (int i = 0; i < 16; i++)
		cr_assert_eq(d.u.echo.payload[i], 0);

	memnet *net = memnet_open(2, 0);
	cr_assert_not_null(net);
	char msg[1100];
	cr_assert(node_sample(39, &m));
	len = encode(&m);
	uint8_t *reply;
	size_t rlen;
	cr_assert_eq(memnet_send_raw(net, 0, 1, buf, len, &reply, &rlen), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(proto_node_decode(reply, rlen, &d), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(d.hdr.opcode, PROTO_NODE_ECHO);
	cr_assert_eq(d.hdr.status, EMDB_OK);
	cr_assert_eq(d.u.echo.len, 64);
	for (int i = 0; i < 64; i++)
		cr_assert_eq(d.u.echo.payload[i], 0, "byte %d of the reply", i);
	emdb_free(reply);
	memcpy(buf + PROTO_NODE_HDR_SIZE, &huge, 4);
	cr_assert_eq(answer_of(net, buf, len, msg, sizeof(msg)), EMDB_ERR_PROTOCOL);
	cr_assert_not_null(strstr(msg, "reply_len"), "%s", msg);
	memnet_close(net);
}
