/*
 * test_server_malformed.c - emdb-server against input that is not the
 * protocol: each malformed case gets an error reply where one is possible
 * and its connection closed, while another client, connected all along,
 * keeps being served.  Then a few thousand random and mutated frames, on
 * both I/O backends, after which the server still serves and its memory
 * is back where it was.
 */
#include <pthread.h>

#include "tests/lib/server_util.h"

static srv S;

static void stop_server(void)
{
	srv_stop(&S);
}

TestSuite(malformed, .fini = stop_server, .timeout = 300);

/* A header written by hand (docs/protocol.md): magic, version, flags,
 * opcode, id, status, body_len. */
static void put_hdr(uint8_t *p, uint32_t magic, uint8_t ver, uint8_t flags, uint16_t op,
		    int32_t status, uint64_t id, uint32_t body_len)
{
	memcpy(p, &magic, 4);
	p[4] = ver;
	p[5] = flags;
	memcpy(p + 6, &op, 2);
	memcpy(p + 8, &id, 8);
	memcpy(p + 16, &status, 4);
	memcpy(p + 20, &body_len, 4);
}

/* The header layout the tests rely on, checked against the encoder. */
static void check_layout(void)
{
	uint8_t a[PROTO_HDR_SIZE], b[PROTO_HDR_SIZE];
	proto_hdr h = { 1, 0, PROTO_OP_PING, 0, 0x1122334455667788ull, 16 };
	proto_hdr_encode(a, &h);
	put_hdr(b, PROTO_MAGIC, 1, 0, PROTO_OP_PING, 0, 0x1122334455667788ull, 16);
	cr_assert_eq(memcmp(a, b, PROTO_HDR_SIZE), 0, "docs/protocol.md header layout changed");
}

typedef struct bad_case {
	const char *what;
	bool hello_first;    /* send HELLO before the bad bytes */
	int status;          /* expected error status; 0: no reply needed */
	uint64_t id;         /* expected id of the error reply */
	bool half_close;     /* shutdown(SHUT_WR) after sending */
	uint8_t bytes[256];
	size_t len;
} bad_case;

static void run_case(const bad_case *k, cli *witness)
{
	cli c;
	cli_tcp(&c, &S);
	if (k->hello_first)
		cli_hello(&c, NULL);
	cr_assert_eq(cli_send_raw(&c, k->bytes, k->len), 0, "%s", k->what);
	if (k->half_close)
		shutdown(c.fd, SHUT_WR);
	if (k->status) {
		proto_frame *f = NULL;
		int rc = cli_recv(&c, &f, 5000);
		cr_assert_eq(rc, 1, "%s: no error reply (rc %d)", k->what, rc);
		cr_assert_eq(f->hdr.status, k->status, "%s: status %s, expected %s", k->what,
			     emdb_err_name(f->hdr.status), emdb_err_name(k->status));
		cr_assert_eq(f->hdr.id, k->id, "%s: reply id %llu", k->what,
			     (unsigned long long)f->hdr.id);
		if (k->id == 0)
			cr_assert_eq(f->hdr.opcode, PROTO_OP_NONE, "%s: opcode 0x%x", k->what,
				     f->hdr.opcode);
		else
			cr_assert(proto_op_known(f->hdr.opcode), "%s", k->what);
		proto_str m;
		cr_assert_eq(proto_err_decode(&f->hdr, f->body, &m), 0, "%s", k->what);
		cr_assert_gt(m.len, 0, "%s: the error says why", k->what);
		proto_frame_free(f);
	}
	cli_expect_closed(&c);
	cli_close(&c);
	cli_ping(witness);
}

Test(malformed, each_case_replies_and_closes)
{
	check_layout();
	const char *extra[] = { "--max-frame", "1m", NULL };
	srv_start(&S, extra);
	cli w;
	cli_ready(&w, &S);
	uint32_t t = cli_create_table(&w, "m", 4);

	bad_case k;
	uint8_t *p;

	/* wrong magic: nothing can be trusted, id 0 */
	memset(&k, 0, sizeof(k));
	k.what = "wrong magic";
	k.hello_first = true;
	k.status = EMDB_ERR_PROTOCOL;
	put_hdr(k.bytes, 0x58585858, 1, 0, PROTO_OP_PING, 0, 5, 0);
	k.len = 24;
	run_case(&k, &w);

	/* unknown version, on the very first frame */
	memset(&k, 0, sizeof(k));
	k.what = "unknown version";
	k.status = EMDB_ERR_UNSUPPORTED;
	k.id = 9;
	put_hdr(k.bytes, PROTO_MAGIC, 9, 0, PROTO_OP_HELLO, 0, 9, 0);
	k.len = 24;
	run_case(&k, &w);

	/* unknown opcode: the request cannot be attributed, id 0 */
	memset(&k, 0, sizeof(k));
	k.what = "unknown opcode";
	k.hello_first = true;
	k.status = EMDB_ERR_PROTOCOL;
	k.id = 0;
	put_hdr(k.bytes, PROTO_MAGIC, 1, 0, 0x0999, 0, 77, 0);
	k.len = 24;
	run_case(&k, &w);

	/* truncated frame: the header promises 64 bytes, 16 come, then EOF */
	memset(&k, 0, sizeof(k));
	k.what = "truncated frame";
	k.hello_first = true;
	k.status = EMDB_ERR_PROTOCOL;
	k.id = 12;
	k.half_close = true;
	put_hdr(k.bytes, PROTO_MAGIC, 1, 0, PROTO_OP_PING, 0, 12, 64);
	k.len = 24 + 16;
	run_case(&k, &w);

	/* truncated header */
	memset(&k, 0, sizeof(k));
	k.what = "truncated header";
	k.hello_first = true;
	k.status = EMDB_ERR_PROTOCOL;
	k.half_close = true;
	put_hdr(k.bytes, PROTO_MAGIC, 1, 0, PROTO_OP_PING, 0, 13, 0);
	k.len = 11;
	run_case(&k, &w);

	/* a count that disagrees with the body: PREFETCH of 100 ids, 10 sent */
	memset(&k, 0, sizeof(k));
	k.what = "count disagrees with body";
	k.hello_first = true;
	k.status = EMDB_ERR_PROTOCOL;
	k.id = 14;
	put_hdr(k.bytes, PROTO_MAGIC, 1, 0, PROTO_OP_PREFETCH, 0, 14, 8 + 80);
	p = k.bytes + 24;
	memcpy(p, &t, 4);
	uint32_t n = 100;
	memcpy(p + 4, &n, 4);
	k.len = 24 + 8 + 80;
	run_case(&k, &w);

	/* oversized count: 2^32-1 ids in a 16-byte body */
	memset(&k, 0, sizeof(k));
	k.what = "oversized count";
	k.hello_first = true;
	k.status = EMDB_ERR_PROTOCOL;
	k.id = 15;
	put_hdr(k.bytes, PROTO_MAGIC, 1, 0, PROTO_OP_PREFETCH, 0, 15, 16);
	n = UINT32_MAX;
	memcpy(k.bytes + 24, &t, 4);
	memcpy(k.bytes + 28, &n, 4);
	k.len = 24 + 16;
	run_case(&k, &w);

	/* PUSH_UPDATE takes no bags: a PUSH body with bags under its opcode
	 * is malformed, refused by the decoder; nothing is applied */
	memset(&k, 0, sizeof(k));
	k.what = "PUSH_UPDATE with bags";
	k.hello_first = true;
	k.status = EMDB_ERR_PROTOCOL;
	k.id = 25;
	{
		uint64_t ids[5] = { 1, 2, 3, 4, 5 }, offsets[3] = { 0, 2, 5 };
		float g[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
		proto_push_req bags = { t, 4, 0, 5, ids, 2, EMDB_POOL_SUM, offsets, 2, g };
		cr_assert_eq(proto_push_req_encode(k.bytes, sizeof(k.bytes), 25, &bags, &k.len), 0);
		uint16_t op = PROTO_OP_PUSH_UPDATE;
		memcpy(k.bytes + 6, &op, 2);
		k.bytes[4] = proto_op_version(op); /* so that the body is what fails */
	}
	run_case(&k, &w);
	emdb_table_info ti = cli_describe(&w, t);
	cr_assert_eq(ti.stats.rows, 0, "a malformed PUSH_UPDATE inserted rows");
	cr_assert_eq(ti.stats.step, 0, "a malformed PUSH_UPDATE advanced the step");

	/* TABLE_RESERVE with its reserved field set: the decoder refuses it,
	 * and no room is made */
	memset(&k, 0, sizeof(k));
	k.what = "TABLE_RESERVE with reserved bytes";
	k.hello_first = true;
	k.status = EMDB_ERR_PROTOCOL;
	k.id = 26;
	{
		proto_table_reserve_req q = { t, 100000 };
		cr_assert_eq(proto_table_reserve_req_encode(k.bytes, sizeof(k.bytes), 26, &q, &k.len), 0);
		k.bytes[PROTO_HDR_SIZE + 5] = 1;
	}
	run_case(&k, &w);
	emdb_table_info tr = cli_describe(&w, t);
	cr_assert_eq(tr.stats.bytes_index, ti.stats.bytes_index, "a malformed TABLE_RESERVE made room");
	cr_assert_eq(tr.stats.index_resizes, ti.stats.index_resizes);

	/* oversized lookup: n * dim floats far beyond max_frame */
	memset(&k, 0, sizeof(k));
	k.what = "oversized reply";
	k.hello_first = true;
	{
		cli c;
		cli_ready(&c, &S);
		uint64_t ids[4] = { 1, 2, 3, 4 };
		proto_lookup_req q = { .table = t, .dim = 65536, .n = 4, .ids = ids };
		uint64_t id = CLI_SEND(&c, proto_lookup_req_encode, &q);
		char msg[256];
		cli_err(&c, id, EMDB_ERR_LIMIT, msg, sizeof(msg));
		cr_assert(strstr(msg, "max_frame"), "%s", msg);
		cli_ping(&c); /* a limit is not a protocol error: still open */
		cli_close(&c);
	}

	/* body over max_frame (1 MiB): refused before it is read */
	memset(&k, 0, sizeof(k));
	k.what = "body over max_frame";
	k.hello_first = true;
	k.status = EMDB_ERR_LIMIT;
	k.id = 16;
	put_hdr(k.bytes, PROTO_MAGIC, 1, 0, PROTO_OP_PING, 0, 16, 2u << 20);
	k.len = 24;
	run_case(&k, &w);

	/* body length not a multiple of 8 */
	memset(&k, 0, sizeof(k));
	k.what = "unaligned body length";
	k.hello_first = true;
	k.status = EMDB_ERR_PROTOCOL;
	put_hdr(k.bytes, PROTO_MAGIC, 1, 0, PROTO_OP_PING, 0, 17, 13);
	k.len = 24 + 13;
	/* the id may or may not be echoed for this one: accept either */
	{
		cli c;
		cli_ready(&c, &S);
		cr_assert_eq(cli_send_raw(&c, k.bytes, k.len), 0);
		cli_err(&c, UINT64_MAX, EMDB_ERR_PROTOCOL, NULL, 0);
		cli_expect_closed(&c);
		cli_close(&c);
		cli_ping(&w);
	}

	/* garbage bytes */
	memset(&k, 0, sizeof(k));
	k.what = "garbage";
	k.hello_first = true;
	k.status = EMDB_ERR_PROTOCOL;
	for (size_t i = 0; i < 200; i++)
		k.bytes[i] = (uint8_t)(i * 37 + 11);
	k.len = 200;
	run_case(&k, &w);

	/* garbage before HELLO, too */
	k.what = "garbage before HELLO";
	k.hello_first = false;
	run_case(&k, &w);

	/* a response sent to the server */
	memset(&k, 0, sizeof(k));
	k.what = "response flag";
	k.hello_first = true;
	k.status = EMDB_ERR_PROTOCOL;
	k.id = 18;
	put_hdr(k.bytes, PROTO_MAGIC, 1, PROTO_FLAG_RESPONSE, PROTO_OP_SHUTDOWN, 0, 18, 0);
	k.len = 24;
	run_case(&k, &w);

	/* a request carrying a status */
	memset(&k, 0, sizeof(k));
	k.what = "status in a request";
	k.hello_first = true;
	k.status = EMDB_ERR_PROTOCOL;
	k.id = 19;
	put_hdr(k.bytes, PROTO_MAGIC, 1, 0, PROTO_OP_SHUTDOWN, -3, 19, 0);
	k.len = 24;
	run_case(&k, &w);

	/* trailing bytes after a valid PING body */
	memset(&k, 0, sizeof(k));
	k.what = "trailing bytes";
	k.hello_first = true;
	k.status = EMDB_ERR_PROTOCOL;
	k.id = 20;
	{
		proto_ping pg = { proto_cstr("abc") };
		size_t len;
		cr_assert_eq(proto_ping_req_encode(k.bytes, sizeof(k.bytes), 20, &pg, &len), 0);
		uint32_t bl;
		memcpy(&bl, k.bytes + 20, 4);
		bl += 8;
		memcpy(k.bytes + 20, &bl, 4);
		k.len = len + 8;
	}
	run_case(&k, &w);

	/* anything but HELLO first */
	memset(&k, 0, sizeof(k));
	k.what = "PING before HELLO";
	k.status = EMDB_ERR_PROTOCOL;
	k.id = 21;
	{
		proto_ping pg = { proto_cstr("x") };
		cr_assert_eq(proto_ping_req_encode(k.bytes, sizeof(k.bytes), 21, &pg, &k.len), 0);
	}
	run_case(&k, &w);

	/* HELLO twice */
	memset(&k, 0, sizeof(k));
	k.what = "second HELLO";
	k.hello_first = true;
	k.status = EMDB_ERR_PROTOCOL;
	k.id = 22;
	{
		proto_hello_req hq = { 1, 1, proto_cstr("again") };
		cr_assert_eq(proto_hello_req_encode(k.bytes, sizeof(k.bytes), 22, &hq, &k.len), 0);
	}
	run_case(&k, &w);

	/* HELLO with no common version */
	memset(&k, 0, sizeof(k));
	k.what = "no common version";
	k.status = EMDB_ERR_UNSUPPORTED;
	k.id = 23;
	{
		proto_hello_req hq = { PROTO_VERSION_MAX + 1, PROTO_VERSION_MAX + 3, proto_cstr("future") };
		cr_assert_eq(proto_hello_req_encode(k.bytes, sizeof(k.bytes), 23, &hq, &k.len), 0);
	}
	run_case(&k, &w);

	/* Before authentication bodies are small: an 8 KiB HELLO is refused
	 * from its header. */
	memset(&k, 0, sizeof(k));
	k.what = "big body before HELLO";
	k.status = EMDB_ERR_LIMIT;
	k.id = 24;
	put_hdr(k.bytes, PROTO_MAGIC, 1, 0, PROTO_OP_HELLO, 0, 24, 8192);
	k.len = 24;
	run_case(&k, &w);

	/* The server counts a connection gone once its I/O thread has freed
	 * it, which may be a moment after the client saw the close. */
	char *info = NULL;
	for (int i = 0; i < 300; i++) {
		free(info);
		info = cli_info(&w, "clients");
		if (info_num(info, "connections") == 1)
			break;
		t_sleep_ms(20);
	}
	cr_assert_geq(info_num(info, "protocol_errors"), 19, "%s", info);
	cr_assert_eq(info_num(info, "connections"), 1, "%s", info);
	free(info);
	cr_assert(srv_alive(&S));
	srv_shutdown_clean(&S, &w);
	cli_close(&w);
}

/* ---- random frames -------------------------------------------------- */

typedef struct fuzz_arg {
	uint16_t port;
	unsigned seed;
	int conns;
	int frames;     /* frames sent in all */
	int replies;
} fuzz_arg;

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static const uint16_t ops[] = { PROTO_OP_HELLO,     PROTO_OP_AUTH,          PROTO_OP_PING,
				PROTO_OP_INFO,      PROTO_OP_CONFIG_GET,    PROTO_OP_TABLE_DESCRIBE,
				PROTO_OP_STATS,     PROTO_OP_PREFETCH,      PROTO_OP_TICKET_FREE,
				PROTO_OP_PULL,      PROTO_OP_PUSH,          PROTO_OP_LOOKUP,
				PROTO_OP_READ_STATE, PROTO_OP_TABLE_LIST,   PROTO_OP_PUSH_UPDATE,
				0x0777 };

/* One random or mutated frame into buf; returns its length. */
static size_t make_frame(uint64_t *s, uint8_t *buf, size_t cap)
{
	size_t len;
	switch (rnd(s) % 4) {
	case 0: /* bytes */
		len = 1 + rnd(s) % 300;
		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)rnd(s);
		return len;
	case 1: { /* a plausible header, random body */
		uint32_t body = (uint32_t)(rnd(s) % 64) * 8;
		if (rnd(s) % 16 == 0)
			body = (uint32_t)rnd(s); /* claims a huge body */
		uint16_t op = ops[rnd(s) % (sizeof(ops) / sizeof(ops[0]))];
		put_hdr(buf, PROTO_MAGIC, proto_op_version(op), 0, op, 0, rnd(s), body);
		size_t have = body < cap - 24 ? body : (size_t)(rnd(s) % 512);
		for (size_t i = 0; i < have; i++)
			buf[24 + i] = (uint8_t)(rnd(s) % 4 ? rnd(s) % 4 : rnd(s));
		return 24 + have;
	}
	default: { /* a valid request with a few bytes flipped */
		uint64_t ids[8];
		for (int i = 0; i < 8; i++)
			ids[i] = rnd(s) % 100;
		int r = (int)(rnd(s) % 5);
		if (r == 0) {
			proto_ping pg = { proto_cstr("fuzz") };
			proto_ping_req_encode(buf, cap, rnd(s), &pg, &len);
		} else if (r == 1) {
			/* table 99 does not exist: nothing gets inserted */
			proto_pull_req q = { .table = 99, .dim = 4, .n_ids = 8, .ids = ids };
			proto_pull_req_encode(buf, cap, rnd(s), &q, &len);
		} else if (r == 2) {
			proto_lookup_req q = { .table = 99, .dim = 4, .n = 8, .want_found = true,
					       .ids = ids };
			proto_lookup_req_encode(buf, cap, rnd(s), &q, &len);
		} else if (r == 3) {
			static const float g[32];
			proto_push_update_req q = { .table = 99, .dim = 4, .n_ids = 8, .ids = ids,
						    .n_rows = 8, .grads = g };
			proto_push_update_req_encode(buf, cap, rnd(s), &q, &len);
		} else {
			proto_info_req q = { proto_cstr("memory") };
			proto_info_req_encode(buf, cap, rnd(s), &q, &len);
		}
		int flips = 1 + (int)(rnd(s) % 3);
		for (int i = 0; i < flips; i++)
			buf[rnd(s) % len] ^= (uint8_t)(1u << (rnd(s) % 8));
		return len;
	}
	}
}

static void *fuzz_thread(void *p)
{
	fuzz_arg *a = p;
	uint64_t s = 0x9e3779b97f4a7c15ull ^ a->seed;
	static _Thread_local uint8_t buf[4096];
	for (int k = 0; k < a->conns; k++) {
		cli c;
		if (cli_try_tcp(&c, a->port) != 0)
			continue;
		/* half the connections get past HELLO and AUTH (as a
		 * trainer: the fuzz must not SHUTDOWN the server it tests),
		 * on version 1 or 2 */
		if (rnd(&s) % 2) {
			proto_hello_req h = { 1, (uint16_t)(1 + rnd(&s) % PROTO_VERSION_MAX),
					      proto_cstr("fuzz") };
			proto_auth_req au = { proto_cstr("trainer-token") };
			size_t len, len2;
			proto_hello_req_encode(buf, sizeof(buf), 1, &h, &len);
			proto_auth_req_encode(buf + len, sizeof(buf) - len, 2, &au, &len2);
			cli_send_raw(&c, buf, len + len2);
		}
		int n = 1 + (int)(rnd(&s) % 5);
		for (int i = 0; i < n; i++) {
			size_t len = make_frame(&s, buf, sizeof(buf));
			if (cli_send_raw(&c, buf, len) != 0)
				break;
			a->frames++;
		}
		shutdown(c.fd, SHUT_WR);
		/* read until the server closes: it must, after an error or
		 * once the stream ended and replies went out */
		uint64_t end = t_now_ms() + 10000;
		for (;;) {
			proto_frame *f = NULL;
			int rc = cli_recv(&c, &f, (long)(end - t_now_ms()));
			if (rc == 1) {
				a->replies++;
				proto_frame_free(f);
				continue;
			}
			if (rc == -2) {
				/* the reader refuses something: drain raw bytes */
				char junk[4096];
				while (recv(c.fd, junk, sizeof(junk), 0) > 0)
					;
				rc = 0;
			}
			if (rc != 0)
				a->replies = -1000000; /* the server kept it open */
			break;
		}
		cli_close(&c);
	}
	return NULL;
}

static void random_frames(const char *backend, int threads, int conns_each)
{
	const char *extra[] = { "--io-backend", backend, "--max-frame", "16m", "--admin-token",
				"admin-token", "--trainer-token", "trainer-token", NULL };
	srv_start(&S, extra);
	cli w;
	cli_ready(&w, &S);
	cr_assert_eq(cli_auth(&w, "admin-token"), PROTO_ROLE_ADMIN);
	char *info = cli_info(&w, "server");
	if (!strcmp(backend, "uring") && !strstr(info, "io_backend: uring"))
		cr_assert(strstr(srv_log(&S), "using libevent"), "no fallback line: %s", srv_log(&S));
	cr_assert(strstr(info, "io_backend: "), "%s", info);
	free(info);
	info = cli_info(&w, "memory");
	long long base_used = info_num(info, "used_bytes");
	long long base_buf = info_num(info, "connection_buffers_bytes");
	free(info);

	pthread_t th[16];
	fuzz_arg args[16];
	for (int i = 0; i < threads; i++) {
		args[i] = (fuzz_arg){ S.port, (unsigned)i * 7919u + 1, conns_each, 0, 0 };
		pthread_create(&th[i], NULL, fuzz_thread, &args[i]);
	}
	/* the witness is served all along */
	for (int i = 0; i < 20; i++) {
		cli_ping(&w);
		t_sleep_ms(20);
	}
	int frames = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		cr_assert_geq(args[i].replies, 0, "a connection was not closed after bad input");
		frames += args[i].frames;
	}
	cr_assert_geq(frames, 2000, "only %d frames sent", frames);
	cr_assert(srv_alive(&S), "the server died: %s", srv_log_tail());
	cli_ping(&w);

	/* every fuzz connection goes away and its memory with it */
	long long conns = -1, used = -1, bufs = -1;
	for (int i = 0; i < 300; i++) {
		info = cli_info(&w, "all");
		conns = info_num(info, "connections");
		used = info_num(info, "used_bytes");
		bufs = info_num(info, "connection_buffers_bytes");
		free(info);
		if (conns == 1 && bufs <= base_buf && used <= base_used + (64 << 10))
			break;
		t_sleep_ms(20);
	}
	cr_assert_eq(conns, 1);
	cr_assert_leq(bufs, base_buf, "buffers %lld, %lld before", bufs, base_buf);
	cr_assert_leq(used, base_used + (64 << 10), "used %lld bytes, %lld before", used, base_used);
	cr_assert_gt(cli_info_num(&w, "clients", "protocol_errors"), 100);
	srv_shutdown_clean(&S, &w);
	cli_close(&w);
}

Test(malformed, random_frames_libevent)
{
	random_frames("libevent", 8, 150);
}

Test(malformed, random_frames_uring)
{
	random_frames("uring", 8, 150);
}
