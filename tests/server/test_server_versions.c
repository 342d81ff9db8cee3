/*
 * test_server_versions.c - protocol versions against a live emdb-server
 * (docs/protocol.md, "Versions"): HELLO settles on the highest version
 * both sides speak; every frame carries the version of its opcode's
 * layout, never above the connection's; a connection that settled on
 * version 1 has no PUSH_UPDATE and no TABLE_RESERVE (version 2's), so one
 * sent there, or before HELLO, is answered PROTOCOL with opcode NONE and
 * the connection is closed with nothing applied, while a version-2
 * connection is served; and the same one version up for the per-sample
 * weights of version 3 (PULL_WEIGHTED, PUSH_WEIGHTED) on a version-2
 * connection.
 */
#include "tests/lib/server_util.h"

static srv S;

static void stop_server(void)
{
	srv_stop(&S);
}

TestSuite(versions, .fini = stop_server, .timeout = 120);

Test(versions, hello_settles_on_the_highest_common_version)
{
	srv_start(&S, NULL);
	static const struct {
		uint16_t lo, hi, want;
	} cases[] = { { 1, 1, 1 }, { 1, 2, 2 }, { 2, 2, 2 }, { 1, 3, 3 }, { 1, 4, 4 },
		      { 1, 5, 5 }, { 1, 9, 5 }, { 2, 9, 5 } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cli c;
		cli_tcp(&c, &S);
		uint16_t v = cli_hello_versions(&c, cases[i].lo, cases[i].hi, NULL);
		cr_assert_eq(v, cases[i].want, "HELLO %u..%u: version %u", cases[i].lo, cases[i].hi, v);
		/* A PING is version 1's on any connection, and so is its answer. */
		proto_ping p = { proto_cstr("v") };
		uint64_t id = CLI_SEND(&c, proto_ping_req_encode, &p);
		proto_frame *f = cli_ok(&c, id);
		cr_assert_eq(f->hdr.version, 1);
		proto_frame_free(f);
		cli_close(&c);
	}
	cli w;
	cli_ready(&w, &S);
	char *info = cli_info(&w, "server");
	cr_assert(strstr(info, "protocol_versions: 1..5\n"), "%s", info);
	free(info);
	srv_shutdown_clean(&S, &w);
	cli_close(&w);
}

/* An error reply that must be PROTOCOL, id 0, opcode NONE, a version-1
 * frame, saying `why`; then the connection must close. */
static void expect_refused_and_closed(cli *c, const char *why)
{
	proto_frame *f = cli_resp(c);
	cr_assert_eq(f->hdr.status, EMDB_ERR_PROTOCOL, "status %s", emdb_err_name(f->hdr.status));
	cr_assert_eq(f->hdr.id, 0);
	cr_assert_eq(f->hdr.opcode, PROTO_OP_NONE, "an answer naming %s",
		     proto_op_name(f->hdr.opcode));
	cr_assert_eq(f->hdr.version, 1);
	proto_str m = { 0 };
	cr_assert_eq(proto_err_decode(&f->hdr, f->body, &m), EMDB_OK);
	char msg[PROTO_ERRMSG_MAX + 1];
	snprintf(msg, sizeof(msg), "%.*s", (int)m.len, m.p ? m.p : "");
	cr_assert(strstr(msg, why), "'%s' lacks '%s'", msg, why);
	proto_frame_free(f);
	cli_expect_closed(c);
	cli_close(c);
}

/* A well-formed version-2 frame of opcode `op` (frame[len], encoded as
 * version 2) is refused with its connection closed where HELLO chose
 * version 1: as it is (an opcode that connection lacks), and relabelled
 * version 1 (its layout is version 2's).  The frame is left as it came. */
static void expect_v2_frame_refused_on_v1(uint8_t *frame, size_t len, const char *op)
{
	char why[160];
	cli c;
	cr_assert_eq(frame[4], 2);
	cli_tcp(&c, &S);
	cr_assert_eq(cli_hello_versions(&c, 1, 1, NULL), 1);
	cli_ping(&c);
	cr_assert_eq(cli_send_raw(&c, frame, len), 0);
	snprintf(why, sizeof(why), "%s frame of version 2 on a version 1 connection", op);
	expect_refused_and_closed(&c, why);

	frame[4] = 1;
	cli_tcp(&c, &S);
	cr_assert_eq(cli_hello_versions(&c, 1, 1, NULL), 1);
	cr_assert_eq(cli_send_raw(&c, frame, len), 0);
	snprintf(why, sizeof(why), "%s frame of version 1: its layout is version 2", op);
	expect_refused_and_closed(&c, why);
	frame[4] = 2;
}

/* The rows of ids as a LOOKUP through c sees them, with found[]. */
static void lookup_rows(cli *c, uint32_t t, const uint64_t *ids, uint32_t n, float *vecs,
			uint8_t *found)
{
	proto_lookup_req q = { .table = t, .dim = 4, .n = n, .want_found = true, .ids = ids };
	uint64_t id = CLI_SEND(c, proto_lookup_req_encode, &q);
	proto_frame *f = cli_ok(c, id);
	proto_lookup_resp r;
	cr_assert_eq(proto_lookup_resp_decode(&f->hdr, f->body, &r), EMDB_OK);
	memcpy(vecs, r.vecs, (size_t)n * 4 * sizeof(float));
	memcpy(found, r.found, n);
	proto_frame_free(f);
}

Test(versions, push_update_on_a_version_1_connection_is_refused_and_closed)
{
	srv_start(&S, NULL);
	cli w;
	cli_ready(&w, &S); /* version 2: the witness */
	uint32_t t = cli_create_table(&w, "v", 4);
	uint64_t ids[3] = { 5, 6, 5 };
	float g[12], before[12], after[12];
	uint8_t found[3];
	for (int i = 0; i < 12; i++)
		g[i] = (float)(i + 1) / 8.0f;
	proto_push_update_req pu = { .table = t, .dim = 4, .n_ids = 3, .ids = ids, .n_rows = 3,
				     .grads = g };
	lookup_rows(&w, t, ids, 3, before, found);
	cr_assert_eq(found[0] | found[1] | found[2], 0);

	/* HELLO chose 1: a well-formed PUSH_UPDATE is refused, as it is and
	 * dressed as a version-1 frame. */
	uint8_t frame[256] __attribute__((aligned(8)));
	size_t len;
	cr_assert_eq(proto_push_update_req_encode(frame, sizeof(frame), 7, &pu, &len), EMDB_OK);
	expect_v2_frame_refused_on_v1(frame, len, "PUSH_UPDATE");

	/* Before HELLO a connection takes version-1 frames only. */
	cli c;
	cli_tcp(&c, &S);
	cr_assert_eq(cli_send_raw(&c, frame, len), 0);
	expect_refused_and_closed(&c, "on a version 1 connection (before HELLO)");

	/* Nothing was applied: no row, no step, nothing pending. */
	emdb_table_info ti = cli_describe(&w, t);
	cr_assert_eq(ti.stats.rows, 0);
	cr_assert_eq(ti.stats.step, 0);
	cr_assert_eq(ti.stats.pending_rows, 0);
	cr_assert_eq(ti.stats.calls_push, 0);
	lookup_rows(&w, t, ids, 3, after, found);
	cr_assert_eq(found[0] | found[1] | found[2], 0);
	cr_assert_eq(memcmp(before, after, sizeof(before)), 0);
	cr_assert_geq(cli_info_num(&w, "clients", "protocol_errors"), 3);

	/* On a version-2 connection the same request is served, and its
	 * answer is a version-2 frame. */
	cli d;
	cli_tcp(&d, &S);
	cr_assert_eq(cli_hello_versions(&d, 1, 2, NULL), 2);
	uint64_t id = CLI_SEND(&d, proto_push_update_req_encode, &pu);
	proto_frame *f = cli_ok(&d, id);
	cr_assert_eq(f->hdr.opcode, PROTO_OP_PUSH_UPDATE);
	cr_assert_eq(f->hdr.version, 2);
	proto_push_update_resp r;
	cr_assert_eq(proto_push_update_resp_decode(&f->hdr, f->body, &r), EMDB_OK);
	cr_assert_eq(r.rows, 2, "two distinct rows updated");
	proto_frame_free(f);
	cli_ping(&d);
	cli_close(&d);
	ti = cli_describe(&w, t);
	cr_assert_eq(ti.stats.step, 1);
	cr_assert_eq(ti.stats.rows, 2);

	srv_shutdown_clean(&S, &w);
	cli_close(&w);
}

/* The room a table has made (index and row chunks), as the engine counts
 * it: what a TABLE_RESERVE changes. */
static void same_room(const emdb_table_info *a, const emdb_table_info *b, const char *what)
{
	cr_assert_eq(a->stats.bytes_index, b->stats.bytes_index, "%s: index bytes changed", what);
	cr_assert_eq(a->stats.bytes_overhead, b->stats.bytes_overhead, "%s: chunk slack changed", what);
	cr_assert_eq(a->stats.index_resizes, b->stats.index_resizes, "%s: the index was resized", what);
	cr_assert_eq(a->stats.rows, b->stats.rows, "%s: rows changed", what);
}

Test(versions, table_reserve_on_a_version_1_connection_is_refused_and_closed)
{
	srv_start(&S, NULL);
	cli w;
	cli_ready(&w, &S); /* version 2: the witness */
	uint32_t t = cli_create_table(&w, "v", 4);
	emdb_table_info before = cli_describe(&w, t);
	proto_table_reserve_req rq = { .table = t, .rows = 100000 };

	/* HELLO chose 1: TABLE_RESERVE is refused, as it is and dressed as a
	 * version-1 frame. */
	uint8_t frame[64] __attribute__((aligned(8)));
	size_t len;
	cr_assert_eq(proto_table_reserve_req_encode(frame, sizeof(frame), 7, &rq, &len), EMDB_OK);
	expect_v2_frame_refused_on_v1(frame, len, "TABLE_RESERVE");
	emdb_table_info now = cli_describe(&w, t);
	same_room(&before, &now, "after refused TABLE_RESERVEs");

	/* On a version-2 connection it is served: an empty answer of
	 * version 2, and the table has room (and says so in the log). */
	cli d;
	cli_tcp(&d, &S);
	cr_assert_eq(cli_hello_versions(&d, 1, 2, NULL), 2);
	uint64_t id = CLI_SEND(&d, proto_table_reserve_req_encode, &rq);
	proto_frame *f = cli_ok(&d, id);
	cr_assert_eq(f->hdr.opcode, PROTO_OP_TABLE_RESERVE);
	cr_assert_eq(f->hdr.version, 2);
	cr_assert_eq(f->hdr.body_len, 0);
	cr_assert_eq(proto_empty_decode(&f->hdr), EMDB_OK);
	proto_frame_free(f);
	cli_ping(&d);
	cli_close(&d);
	now = cli_describe(&w, t);
	cr_assert_gt(now.stats.bytes_index, before.stats.bytes_index, "no index room was made");
	cr_assert_eq(now.stats.rows, 0, "a reservation inserts no row");
	cr_assert(strstr(srv_log(&S), "table 1 reserved room for 100000 rows in "), "%s", srv_log(&S));

	srv_shutdown_clean(&S, &w);
	cli_close(&w);
}

/* PULL_WEIGHTED and PUSH_WEIGHTED are version 3's: on a connection whose
 * HELLO chose 2 they are refused and the connection closed, nothing
 * applied; on a version-3 connection they are served with version-3
 * answers, and with a ticket the weights must be one per ID (BATCH). */
Test(versions, weighted_frames_on_a_version_2_connection_are_refused_and_closed)
{
	srv_start(&S, NULL);
	cli w;
	cli_ready(&w, &S);
	uint32_t t = cli_create_table(&w, "v", 4);
	uint64_t ids[3] = { 5, 6, 5 }, offs[3] = { 0, 2, 3 };
	float wt[3] = { 0.5f, 2, -1 }, g[8];
	for (int i = 0; i < 8; i++)
		g[i] = (float)(i + 1) / 8.0f;
	proto_push_weighted_req pw = { .push = { .table = t, .dim = 4, .n_ids = 3, .ids = ids, .n_bags = 2,
						 .pool = EMDB_POOL_SUM, .offsets = offs, .n_rows = 2,
						 .grads = g },
				       .n_weights = 3, .weights = wt };
	uint8_t frame[512] __attribute__((aligned(8)));
	size_t len;
	cr_assert_eq(proto_push_weighted_req_encode(frame, sizeof(frame), 7, &pw, &len), EMDB_OK);
	cr_assert_eq(frame[4], 3);
	cli c;
	cli_tcp(&c, &S);
	cr_assert_eq(cli_hello_versions(&c, 1, 2, NULL), 2);
	cli_ping(&c);
	cr_assert_eq(cli_send_raw(&c, frame, len), 0);
	expect_refused_and_closed(&c, "PUSH_WEIGHTED frame of version 3 on a version 2 connection");
	emdb_table_info ti = cli_describe(&w, t);
	cr_assert_eq(ti.stats.rows, 0);
	cr_assert_eq(ti.stats.calls_push, 0);

	/* Version 3: served. */
	cli d;
	cli_tcp(&d, &S);
	cr_assert_eq(cli_hello_versions(&d, 1, 3, NULL), 3);
	uint64_t id = CLI_SEND(&d, proto_push_weighted_req_encode, &pw);
	proto_frame *f = cli_ok(&d, id);
	cr_assert_eq(f->hdr.opcode, PROTO_OP_PUSH_WEIGHTED);
	cr_assert_eq(f->hdr.version, 3);
	proto_frame_free(f);
	proto_pull_weighted_req pl = { .pull = { .table = t, .dim = 4, .n_ids = 3, .ids = ids, .n_bags = 2,
						 .pool = EMDB_POOL_SUM, .offsets = offs },
				       .n_weights = 3, .weights = wt };
	id = CLI_SEND(&d, proto_pull_weighted_req_encode, &pl);
	f = cli_ok(&d, id);
	cr_assert_eq(f->hdr.version, 3);
	proto_pull_weighted_resp r;
	cr_assert_eq(proto_pull_weighted_resp_decode(&f->hdr, f->body, &r), EMDB_OK);
	cr_assert_eq(r.n_rows, 2);
	cr_assert_eq(r.dim, 4);
	proto_frame_free(f);

	/* By ticket: the weights must be the ticket's count. */
	proto_prefetch_req pq = { t, 3, ids };
	id = CLI_SEND(&d, proto_prefetch_req_encode, &pq);
	f = cli_ok(&d, id);
	proto_prefetch_resp pr;
	cr_assert_eq(proto_prefetch_resp_decode(&f->hdr, f->body, &pr), EMDB_OK);
	proto_frame_free(f);
	pl.pull.ids = NULL;
	pl.pull.n_ids = 0;
	pl.pull.ticket = pr.ticket;
	pl.n_weights = 2;
	id = CLI_SEND(&d, proto_pull_weighted_req_encode, &pl);
	char msg[256];
	cli_err(&d, id, EMDB_ERR_BATCH, msg, sizeof(msg));
	cr_assert(strstr(msg, "2 weights for a ticket of 3 IDs"), "%s", msg);
	pl.n_weights = 3;
	id = CLI_SEND(&d, proto_pull_weighted_req_encode, &pl);
	f = cli_ok(&d, id);
	proto_frame_free(f);
	cli_ping(&d);
	cli_close(&d);
	ti = cli_describe(&w, t);
	cr_assert_eq(ti.stats.rows, 2);
	cr_assert_eq(ti.stats.pending_rows, 2);

	srv_shutdown_clean(&S, &w);
	cli_close(&w);
}
