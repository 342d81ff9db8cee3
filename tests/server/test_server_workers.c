/*
 * test_server_workers.c - WORKER (protocol version 4): a connection
 * declares the worker whose pushes it carries.
 *
 * What is checked against a live server: WORKER is answered (version 4)
 * and can be changed and cleared; two connections declaring ranks 0 and
 * 1 that push the same IDs leave the same rows whichever pushes first,
 * while undeclared ones do not; a rank out of range is malformed (refused,
 * connection closed, nothing changed); WORKER on a version-3 connection
 * is refused and closes it; a reader may not send it.  A numbered
 * UPDATE of a step (seq, session) needs a declared rank; with one, a
 * resend of an applied step is answered with its rows at once.
 */
#include <criterion/criterion.h>
#include <string.h>

#include <emdb/db.h>

#include "tests/lib/server_util.h"

static srv S;

static void stop_server(void)
{
	srv_stop(&S);
}

TestSuite(workers, .fini = stop_server, .timeout = 120);

static void declare(cli *c, uint32_t rank)
{
	proto_worker_req w = { rank };
	uint64_t id = CLI_SEND(c, proto_worker_req_encode, &w);
	proto_frame *f = cli_ok(c, id);
	cr_assert_eq(f->hdr.opcode, PROTO_OP_WORKER);
	cr_assert_eq(f->hdr.version, 4);
	cr_assert_eq(f->hdr.body_len, 0);
	proto_frame_free(f);
}

static void push(cli *c, uint32_t t, const float *g)
{
	static const uint64_t ids[3] = { 9, 9, 4 };
	proto_push_req p = { .table = t, .dim = 1, .n_ids = 3, .ids = ids, .n_rows = 3, .grads = g };
	uint64_t id = CLI_SEND(c, proto_push_req_encode, &p);
	proto_frame_free(cli_ok(c, id));
}

/* Row 9 after one step of connections a and b pushing (a first), SGD
 * from zero: minus lr times the gradient's sum. */
static float step(cli *w, cli *a, cli *b, const float *ga, const float *gb)
{
	uint32_t t = cli_create_table(w, "t", 1); /* SGD, zeros */
	push(a, t, ga);
	push(b, t, gb);
	proto_update_req u = { .table = t };
	proto_frame_free(cli_ok(w, CLI_SEND(w, proto_update_req_encode, &u)));
	uint64_t id9 = 9;
	proto_lookup_req l = { .table = t, .dim = 1, .n = 1, .ids = &id9 };
	proto_frame *f = cli_ok(w, CLI_SEND(w, proto_lookup_req_encode, &l));
	proto_lookup_resp r;
	cr_assert_eq(proto_lookup_resp_decode(&f->hdr, f->body, &r), EMDB_OK);
	float v = r.vecs[0];
	proto_frame_free(f);
	proto_table_drop_req d = { t };
	proto_frame_free(cli_ok(w, CLI_SEND(w, proto_table_drop_req_encode, &d)));
	return v;
}

Test(workers, declared_ranks_sum_in_rank_order)
{
	srv_start(&S, NULL);
	cli w, c0, c1;
	cli_ready(&w, &S);
	cli_ready(&c0, &S);
	cli_ready(&c1, &S);
	/* To ID 9 worker 0 pushes 1 and 0, worker 1 1e8 and -1e8: in rank
	 * order 1 + (1e8 - 1e8) = 1 whoever comes first; in arrival order
	 * worker 0 first gives ((1 + 0) + 1e8) - 1e8 = 0 in float32. */
	float g0[3] = { 1.0f, 0.0f, 0.5f }, g1[3] = { 1e8f, -1e8f, 0.25f };
	declare(&c0, 0);
	declare(&c1, 1);
	float ranked_01 = step(&w, &c0, &c1, g0, g1);
	float ranked_10 = step(&w, &c1, &c0, g1, g0);
	cr_assert(ranked_01 == ranked_10, "rank order: %.9g against %.9g", ranked_01, ranked_10);
	cr_assert(ranked_01 != 0.0f, "row %.9g: 1 + (1e8 - 1e8) is not 0", ranked_01);
	/* Cleared: arrival order again, and the two orders differ. */
	declare(&c0, EMDB_WORKER_NONE);
	declare(&c1, EMDB_WORKER_NONE);
	float plain_01 = step(&w, &c0, &c1, g0, g1);
	float plain_10 = step(&w, &c1, &c0, g1, g0);
	cr_assert(plain_01 != plain_10, "arrival order: %.9g and %.9g", plain_01, plain_10);
	cr_assert(plain_10 == ranked_01);
	/* A rank can be changed: c1 as 0 and c0 as 1 puts c1's first. */
	declare(&c0, 1);
	declare(&c1, 0);
	cr_assert(step(&w, &c0, &c1, g0, g1) == plain_10);
	cli_close(&c0);
	cli_close(&c1);
	srv_shutdown_clean(&S, &w);
	cli_close(&w);
}

Test(workers, bad_worker_frames_are_refused)
{
	srv_start(&S, NULL);
	cli w;
	cli_ready(&w, &S);
	/* A rank past the range: malformed, the connection closes. */
	uint8_t frame[64] __attribute__((aligned(8)));
	size_t len;
	proto_worker_req ok = { 3 };
	cr_assert_eq(proto_worker_req_encode(frame, sizeof(frame), 5, &ok, &len), EMDB_OK);
	uint32_t bad = EMDB_WORKERS_MAX;
	memcpy(frame + PROTO_HDR_SIZE, &bad, 4);
	cli c;
	cli_ready(&c, &S);
	cr_assert_eq(cli_send_raw(&c, frame, len), 0);
	proto_frame *f = cli_resp(&c);
	cr_assert_eq(f->hdr.status, EMDB_ERR_PROTOCOL);
	proto_frame_free(f);
	cli_expect_closed(&c);
	cli_close(&c);
	/* Version 3: WORKER does not exist there. */
	cr_assert_eq(proto_worker_req_encode(frame, sizeof(frame), 6, &ok, &len), EMDB_OK);
	cr_assert_eq(frame[4], 4);
	cli d;
	cli_tcp(&d, &S);
	cr_assert_eq(cli_hello_versions(&d, 1, 3, NULL), 3);
	cr_assert_eq(cli_send_raw(&d, frame, len), 0);
	f = cli_resp(&d);
	cr_assert_eq(f->hdr.status, EMDB_ERR_PROTOCOL);
	proto_frame_free(f);
	cli_expect_closed(&d);
	cli_close(&d);
	srv_shutdown_clean(&S, &w);
	cli_close(&w);
}

/* The rows of an UPDATE's response. */
static uint64_t rows_of(proto_frame *f)
{
	proto_update_resp r;
	cr_assert_eq(proto_update_resp_decode(&f->hdr, f->body, &r), EMDB_OK);
	proto_frame_free(f);
	return r.rows;
}

Test(workers, numbered_steps_need_a_rank_and_a_resend_is_answered_from_memory)
{
	srv_start(&S, NULL);
	cli w, c0, c1;
	cli_ready(&w, &S);
	cli_ready(&c0, &S);
	cli_ready(&c1, &S);
	uint32_t t = cli_create_table(&w, "n", 1);
	float g[3] = { 1.0f, 2.0f, 3.0f };
	push(&c0, t, g);
	proto_update_req u = { t, 2, 1, 0x5eed };
	char msg[256];
	cli_err(&c0, CLI_SEND(&c0, proto_update_req_encode, &u), EMDB_ERR_INVALID, msg, sizeof(msg));
	cr_assert(strstr(msg, "worker rank"), "%s", msg);
	declare(&c0, 0);
	declare(&c1, 1);
	uint64_t a = CLI_SEND(&c0, proto_update_req_encode, &u);
	proto_update_req u1 = { t, 2, 1, 0xb0b };
	uint64_t b = CLI_SEND(&c1, proto_update_req_encode, &u1);
	uint64_t rows = rows_of(cli_ok(&c1, b));
	cr_assert_eq(rows, 2);
	cr_assert_eq(rows_of(cli_ok(&c0, a)), rows);
	/* c0 resends its step 1: the same answer, and step 2 still needs c1. */
	cr_assert_eq(rows_of(cli_ok(&c0, CLI_SEND(&c0, proto_update_req_encode, &u))), rows);
	push(&c0, t, g);
	u.seq = 2;
	a = CLI_SEND(&c0, proto_update_req_encode, &u);
	u1.seq = 2;
	b = CLI_SEND(&c1, proto_update_req_encode, &u1);
	cr_assert_eq(rows_of(cli_ok(&c1, b)), 2);
	cr_assert_eq(rows_of(cli_ok(&c0, a)), 2);
	emdb_table_info info;
	proto_table_describe_req d = { .table = t };
	proto_frame *f = cli_ok(&w, CLI_SEND(&w, proto_table_describe_req_encode, &d));
	proto_table_describe_resp dr;
	cr_assert_eq(proto_table_describe_resp_decode(&f->hdr, f->body, &dr), EMDB_OK);
	info = dr.info;
	proto_frame_free(f);
	cr_assert_eq(info.stats.step, 2, "the resend was applied: step %llu", (unsigned long long)info.stats.step);
	/* Step 1 is forgotten now. */
	u.seq = 1;
	cli_err(&c0, CLI_SEND(&c0, proto_update_req_encode, &u), EMDB_ERR_INVALID, msg, sizeof(msg));
	cr_assert(strstr(msg, "from the past"), "%s", msg);
	cli_close(&c0);
	cli_close(&c1);
	srv_shutdown_clean(&S, &w);
	cli_close(&w);
}
