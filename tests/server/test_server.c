/*
 * test_server.c - emdb-server end to end, as a client sees it: HELLO,
 * PING, INFO, every data-plane and admin operation over TCP and the Unix
 * socket, pipelining answered by request id, CONFIG GET/SET, the port
 * file and log, and an orderly exit on SIGTERM and SHUTDOWN.
 */
#include <math.h>

#include "tests/lib/server_util.h"

static srv S;

static void stop_server(void)
{
	srv_stop(&S);
}

TestSuite(server, .fini = stop_server, .timeout = 120);

Test(server, hello_ping_info)
{
	srv_start(&S, NULL);
	cli c;
	cli_tcp(&c, &S);
	proto_hello_resp h;
	cli_hello(&c, &h);
	cr_assert_eq(h.flags & PROTO_HELLO_AUTH_REQUIRED, 0, "no token: no AUTH needed on loopback");
	cr_assert_eq(h.max_body, 256u << 20);
	cr_assert_eq(h.max_batch, 4u << 20);
	cli_ping(&c);

	char *info = cli_info(&c, "");
	cr_assert(strstr(info, "# Server\n"), "%s", info);
	cr_assert(strstr(info, "# Clients\n"));
	cr_assert(strstr(info, "# Memory\n"));
	cr_assert(strstr(info, "# Ops\n"));
	cr_assert(strstr(info, "# Tables\n"));
	cr_assert_geq(info_num(info, "uptime_seconds"), 0);
	cr_assert_eq(info_num(info, "connections"), 1);
	cr_assert_eq(info_num(info, "tcp_port"), S.port);
	cr_assert(strstr(info, "op_ping: calls=1 errors=0"), "%s", info);
	cr_assert(strstr(info, "p99_us="));
	free(info);

	/* One section only; an unknown one is an error, the connection stays. */
	info = cli_info(&c, "memory");
	cr_assert(strstr(info, "# Memory\n") && !strstr(info, "# Server"));
	cr_assert_gt(info_num(info, "used_bytes"), 0);
	cr_assert_gt(info_num(info, "connection_buffers_bytes"), 0);
	free(info);
	proto_info_req q = { proto_cstr("nope") };
	uint64_t id = CLI_SEND(&c, proto_info_req_encode, &q);
	cli_err(&c, id, EMDB_ERR_INVALID, NULL, 0);
	cli_ping(&c);
	cli_close(&c);

	/* The log has levels and timestamps and says where it listens. */
	const char *log = srv_log(&S);
	char want[64];
	snprintf(want, sizeof(want), "[info] listening on tcp 127.0.0.1:%u", S.port);
	cr_assert(strstr(log, want), "%s", log);
	cr_assert(strstr(log, "[warn] no auth token configured"), "%s", log);
	cr_assert_eq(log[4], '-');
	cr_assert_eq(log[10], 'T');
	cr_assert_eq(log[23], 'Z');
}

/* Every data-plane operation, pipelined: all requests are sent before any
 * reply is read, and the replies are matched by id. */
Test(server, data_plane_pipelined)
{
	srv_start(&S, NULL);
	cli c;
	cli_ready(&c, &S);
	const uint32_t dim = 8;
	uint32_t t = cli_create_table(&c, "emb", dim);
	cr_assert_eq(t, 1);

	uint64_t ids[5] = { 10, 20, 30, 40, 10 };
	float grads[5 * 8];
	for (int i = 0; i < 5 * 8; i++)
		grads[i] = 1.0f;

	proto_prefetch_req pf = { t, 5, ids };
	uint64_t id_pf = CLI_SEND(&c, proto_prefetch_req_encode, &pf);
	proto_frame *f = cli_ok(&c, id_pf);
	proto_prefetch_resp pr;
	cr_assert_eq(proto_prefetch_resp_decode(&f->hdr, f->body, &pr), 0);
	proto_frame_free(f);
	cr_assert_eq(pr.count, 5);
	cr_assert_neq(pr.ticket, 0);

	/* pipeline: pull(ticket) push(ticket) update pull(ids) lookup
	 * read_state pull(bags) ticket_free stats list */
	proto_pull_req pl1 = { .table = t, .dim = dim, .ticket = pr.ticket };
	uint64_t a = CLI_SEND(&c, proto_pull_req_encode, &pl1);
	proto_push_req ps = { .table = t, .dim = dim, .ticket = pr.ticket, .n_rows = 5, .grads = grads };
	uint64_t b = CLI_SEND(&c, proto_push_req_encode, &ps);
	proto_update_req up = { t, 0, 0, 0 };
	uint64_t u = CLI_SEND(&c, proto_update_req_encode, &up);
	proto_pull_req pl2 = { .table = t, .dim = dim, .n_ids = 4, .ids = ids };
	uint64_t d = CLI_SEND(&c, proto_pull_req_encode, &pl2);
	uint64_t lids[3] = { 20, 999, 10 };
	proto_lookup_req lk = { .table = t, .dim = dim, .n = 3, .want_found = true, .ids = lids };
	uint64_t e = CLI_SEND(&c, proto_lookup_req_encode, &lk);
	proto_read_state_req rs = { t, 2, ids };
	uint64_t g = CLI_SEND(&c, proto_read_state_req_encode, &rs);
	uint64_t offs[3] = { 0, 2, 4 };
	proto_pull_req pl3 = { .table = t, .dim = dim, .n_ids = 4, .ids = ids, .n_bags = 2,
			       .pool = EMDB_POOL_SUM, .offsets = offs };
	uint64_t k = CLI_SEND(&c, proto_pull_req_encode, &pl3);
	proto_ticket_free_req tf = { pr.ticket };
	uint64_t l = CLI_SEND(&c, proto_ticket_free_req_encode, &tf);
	uint64_t m = cli_send_empty(&c, PROTO_OP_STATS);
	uint64_t n = cli_send_empty(&c, PROTO_OP_TABLE_LIST);
	uint64_t o = CLI_SEND(&c, proto_pull_req_encode, &pl1); /* freed ticket */

	proto_pull_resp pv;
	f = cli_ok(&c, a);
	cr_assert_eq(proto_pull_resp_decode(&f->hdr, f->body, &pv), 0);
	cr_assert_eq(pv.n_rows, 5);
	for (int i = 0; i < 5 * 8; i++)
		cr_assert_eq(pv.vecs[i], 0.0f, "zero init");
	proto_frame_free(f);
	proto_frame_free(cli_ok(&c, b));
	f = cli_ok(&c, u);
	proto_update_resp ur;
	cr_assert_eq(proto_update_resp_decode(&f->hdr, f->body, &ur), 0);
	cr_assert_eq(ur.rows, 4, "four distinct ids had gradients");
	proto_frame_free(f);
	f = cli_ok(&c, d);
	cr_assert_eq(proto_pull_resp_decode(&f->hdr, f->body, &pv), 0);
	/* SGD lr 0.5: id 10 got two gradients of 1 (summed), the others one. */
	for (int j = 0; j < 8; j++) {
		cr_assert_float_eq(pv.vecs[0 * 8 + j], -1.0f, 1e-6);
		cr_assert_float_eq(pv.vecs[1 * 8 + j], -0.5f, 1e-6);
		cr_assert_float_eq(pv.vecs[3 * 8 + j], -0.5f, 1e-6);
	}
	proto_frame_free(f);
	f = cli_ok(&c, e);
	proto_lookup_resp lr;
	cr_assert_eq(proto_lookup_resp_decode(&f->hdr, f->body, &lr), 0);
	cr_assert_not_null(lr.found);
	cr_assert_eq(lr.found[0], 1);
	cr_assert_eq(lr.found[1], 0);
	cr_assert_eq(lr.found[2], 1);
	cr_assert_float_eq(lr.vecs[0], -0.5f, 1e-6);
	cr_assert_float_eq(lr.vecs[8], 0.0f, 1e-6);
	cr_assert_float_eq(lr.vecs[16], -1.0f, 1e-6);
	proto_frame_free(f);
	f = cli_ok(&c, g);
	proto_read_state_resp rr;
	cr_assert_eq(proto_read_state_resp_decode(&f->hdr, f->body, &rr), 0);
	cr_assert_eq(rr.n, 2);
	cr_assert_eq(rr.per_row, 0, "SGD keeps no state");
	proto_frame_free(f);
	f = cli_ok(&c, k);
	cr_assert_eq(proto_pull_resp_decode(&f->hdr, f->body, &pv), 0);
	cr_assert_eq(pv.n_rows, 2);
	cr_assert_float_eq(pv.vecs[0], -1.5f, 1e-6);  /* 10 + 20 */
	cr_assert_float_eq(pv.vecs[8], -1.0f, 1e-6);  /* 30 + 40 */
	proto_frame_free(f);
	proto_frame_free(cli_ok(&c, l));
	f = cli_ok(&c, m);
	proto_stats_resp st;
	cr_assert_eq(proto_stats_resp_decode(&f->hdr, f->body, &st), 0);
	cr_assert_eq(st.stats.tables, 1);
	cr_assert_eq(st.stats.total.rows, 4);
	proto_frame_free(f);
	f = cli_ok(&c, n);
	proto_table_list_resp tl;
	cr_assert_eq(proto_table_list_resp_decode(&f->hdr, f->body, &tl), 0);
	cr_assert_eq(tl.n, 1);
	cr_assert_str_eq(tl.entries[0].name, "emb");
	proto_frame_free(f);
	cli_err(&c, o, EMDB_ERR_TICKET, NULL, 0);

	/* Engine errors are replies; the connection stays. */
	proto_pull_req bad = { .table = t, .dim = 7, .n_ids = 1, .ids = ids };
	uint64_t x = CLI_SEND(&c, proto_pull_req_encode, &bad);
	cli_err(&c, x, EMDB_ERR_DIM, NULL, 0);
	/* A synchronous step over more workers than the server takes. */
	proto_update_req many = { t, PROTO_UPDATE_WORKERS_MAX + 1, 0, 0 };
	x = CLI_SEND(&c, proto_update_req_encode, &many);
	char why[256];
	cli_err(&c, x, EMDB_ERR_INVALID, why, sizeof(why));
	cr_assert(strstr(why, "workers"), "%s", why);
	proto_pull_req nt = { .table = 77, .dim = 8, .n_ids = 1, .ids = ids };
	x = CLI_SEND(&c, proto_pull_req_encode, &nt);
	cli_err(&c, x, EMDB_ERR_NO_TABLE, NULL, 0);

	emdb_table_info ti = cli_describe(&c, t);
	cr_assert_str_eq(ti.config.name, "emb");
	cr_assert_eq(ti.stats.step, 1);
	proto_table_describe_req dn = { .table = 0 };
	strcpy(dn.name, "emb");
	x = CLI_SEND(&c, proto_table_describe_req_encode, &dn);
	proto_frame_free(cli_ok(&c, x));

	proto_table_drop_req dr = { t };
	x = CLI_SEND(&c, proto_table_drop_req_encode, &dr);
	proto_frame_free(cli_ok(&c, x));
	x = CLI_SEND(&c, proto_table_drop_req_encode, &dr);
	cli_err(&c, x, EMDB_ERR_NO_TABLE, NULL, 0);

	char *info = cli_info(&c, "ops");
	cr_assert(strstr(info, "op_pull: calls=6 errors=3"), "%s", info);
	cr_assert(strstr(info, "op_push: calls=1 errors=0"), "%s", info);
	free(info);
	srv_shutdown_clean(&S, &c);
	cli_close(&c);
}

Test(server, unix_socket_and_tickets_are_per_connection)
{
	srv_start(&S, NULL);
	cli a, b;
	cli_ready(&a, &S);
	cli_unix(&b, &S);
	cli_hello(&b, NULL);
	uint32_t t = cli_create_table(&a, "u", 4);
	uint64_t ids[2] = { 1, 2 };
	proto_prefetch_req pf = { t, 2, ids };
	uint64_t id = CLI_SEND(&b, proto_prefetch_req_encode, &pf);
	proto_frame *f = cli_ok(&b, id);
	proto_prefetch_resp pr;
	cr_assert_eq(proto_prefetch_resp_decode(&f->hdr, f->body, &pr), 0);
	proto_frame_free(f);

	/* a does not own b's ticket */
	proto_pull_req pl = { .table = t, .dim = 4, .ticket = pr.ticket };
	id = CLI_SEND(&a, proto_pull_req_encode, &pl);
	cli_err(&a, id, EMDB_ERR_TICKET, NULL, 0);
	id = CLI_SEND(&b, proto_pull_req_encode, &pl);
	proto_frame_free(cli_ok(&b, id));
	cr_assert_eq(cli_info_num(&a, "clients", "tickets"), 1);

	/* closing b frees its tickets */
	cli_close(&b);
	long long left = 1;
	for (int i = 0; i < 200 && left; i++) {
		t_sleep_ms(10);
		left = cli_info_num(&a, "clients", "tickets");
	}
	cr_assert_eq(left, 0);
	cli_close(&a);
}

Test(server, config_get_set)
{
	const char *extra[] = { "--admin-token", "s3cret", "--max-frame", "1m", NULL };
	srv_start(&S, extra);
	cli c;
	cli_tcp(&c, &S);
	proto_hello_resp h;
	cli_hello(&c, &h);
	cr_assert_eq(h.max_body, 1u << 20);
	cr_assert_eq(cli_auth(&c, "s3cret"), PROTO_ROLE_ADMIN);

	proto_config_get_req g = { proto_cstr("*") };
	uint64_t id = CLI_SEND(&c, proto_config_get_req_encode, &g);
	proto_frame *f = cli_ok(&c, id);
	proto_config_get_resp r;
	cr_assert_eq(proto_config_get_resp_decode(&f->hdr, f->body, &r), 0);
	size_t pos = 0;
	proto_kv kv;
	int seen = 0;
	while (proto_kv_list_next(&r, &pos, &kv)) {
		if (kv.key.len == 11 && !memcmp(kv.key.p, "admin_token", 11)) {
			cr_assert_eq(kv.val.len, 8);
			cr_assert_eq(memcmp(kv.val.p, "<hidden>", 8), 0, "tokens are never shown");
			seen++;
		}
		if (kv.key.len == 9 && !memcmp(kv.key.p, "max_frame", 9)) {
			cr_assert_eq(kv.val.len, 7);
			cr_assert_eq(memcmp(kv.val.p, "1048576", 7), 0);
			seen++;
		}
	}
	cr_assert_eq(seen, 2);
	cr_assert_geq(r.n, 20);
	proto_frame_free(f);

	cli_config_set(&c, "max_connections", "77");
	g.pattern = proto_cstr("max_conn*");
	id = CLI_SEND(&c, proto_config_get_req_encode, &g);
	f = cli_ok(&c, id);
	cr_assert_eq(proto_config_get_resp_decode(&f->hdr, f->body, &r), 0);
	cr_assert_eq(r.n, 1);
	pos = 0;
	cr_assert(proto_kv_list_next(&r, &pos, &kv));
	cr_assert_eq(kv.val.len, 2);
	cr_assert_eq(memcmp(kv.val.p, "77", 2), 0);
	proto_frame_free(f);

	/* Not settable at run time, unknown, or a bad value: INVALID. */
	const char *bad[][2] = { { "port", "1234" }, { "nope", "1" }, { "max_frame", "abc" },
				 { "max_frame", "4097" }, { "log_level", "loud" } };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		proto_kv b_kv = { proto_cstr(bad[i][0]), proto_cstr(bad[i][1]) };
		proto_config_set_req b = { 1, &b_kv, NULL, 0 };
		id = CLI_SEND(&c, proto_config_set_req_encode, &b);
		cli_err(&c, id, EMDB_ERR_INVALID, NULL, 0);
	}
	cli_config_set(&c, "log_level", "debug");
	cli_ping(&c);
	cli_close(&c);
}

Test(server, config_file_and_flags)
{
#ifdef EMDB_SERVER_BIN
	char path[] = "/tmp/emdb-srv-conf-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	const char *text = "# a comment\n"
			   "max_batch 1000   # trailing comment\n"
			   "max_frame 2M\n"
			   "\n"
			   "max_tickets 3\n";
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	/* the flag wins over the file, wherever it stands */
	const char *extra[] = { "--max-frame", "4m", "--config", path, NULL };
	srv_start(&S, extra);
	unlink(path);
	cli c;
	cli_tcp(&c, &S);
	proto_hello_resp h;
	cli_hello(&c, &h);
	cr_assert_eq(h.max_batch, 1000);
	cr_assert_eq(h.max_body, 4u << 20);

	uint32_t t = cli_create_table(&c, "cf", 2);
	uint64_t ids[1001];
	for (int i = 0; i < 1001; i++)
		ids[i] = (uint64_t)i;
	proto_prefetch_req pf = { t, 1001, ids };
	uint64_t id = CLI_SEND(&c, proto_prefetch_req_encode, &pf);
	cli_err(&c, id, EMDB_ERR_BATCH, NULL, 0);
	pf.n = 10;
	for (int i = 0; i < 3; i++) {
		id = CLI_SEND(&c, proto_prefetch_req_encode, &pf);
		proto_frame_free(cli_ok(&c, id));
	}
	id = CLI_SEND(&c, proto_prefetch_req_encode, &pf);
	cli_err(&c, id, EMDB_ERR_LIMIT, NULL, 0);
	cli_close(&c);
#else
	cr_skip_test("emdb-server is not part of this build");
#endif
}

Test(server, bad_config_exits_with_usage_error)
{
#ifdef EMDB_SERVER_BIN
	const char *cases[][3] = { { "--max-frame", "12q", NULL }, { "--no-such-key", "1", NULL },
				   { "--io-backend", "kqueue", NULL } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pid_t pid = fork();
		if (pid == 0) {
			int devnull = open("/dev/null", O_RDWR);
			dup2(devnull, 2);
			execl(EMDB_SERVER_BIN, EMDB_SERVER_BIN, "--port", "0", cases[i][0], cases[i][1],
			      (char *)NULL);
			_exit(127);
		}
		int st;
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "%s %s: status 0x%x", cases[i][0],
			  cases[i][1], st);
	}
#else
	cr_skip_test("emdb-server is not part of this build");
#endif
}

/* SIGTERM: requests the server has received are answered and flushed,
 * then a clean exit 0.  The tiny output limit makes the server stop
 * running requests after the first replies, so at the signal most of them
 * are received but not yet run. */
Test(server, sigterm_drains)
{
	const char *extra[] = { "--output-buffer-limit", "4096", NULL };
	srv_start(&S, extra);
	cli c;
	cli_ready(&c, &S);
	uint32_t t = cli_create_table(&c, "d", 64);
	static uint64_t ids[1000];
	for (int i = 0; i < 1000; i++)
		ids[i] = (uint64_t)i;
	proto_prefetch_req pf = { t, 1000, ids };
	uint64_t pid = CLI_SEND(&c, proto_prefetch_req_encode, &pf);
	proto_frame *pff = cli_ok(&c, pid);
	proto_prefetch_resp pr;
	cr_assert_eq(proto_prefetch_resp_decode(&pff->hdr, pff->body, &pr), 0);
	proto_frame_free(pff);
	/* each request ~60 bytes, each reply 256 KB */
	proto_pull_req pl = { .table = t, .dim = 64, .ticket = pr.ticket };
	enum { N = 100 };
	size_t one = 0;
	proto_pull_req_encode(NULL, 0, 0, &pl, &one);
	uint8_t *all = malloc(one * N);
	for (int i = 0; i < N; i++) {
		size_t len;
		cr_assert_eq(proto_pull_req_encode(all + i * one, one, c.next_id++, &pl, &len), 0);
	}
	uint64_t first = c.next_id - N;
	cr_assert_eq(cli_send_raw(&c, all, one * N), 0);
	free(all);
	/* the server pauses the connection once its replies fill the limit;
	 * a slow build (TSan) takes longer, so poll, within a bound */
	long long paused = 0;
	for (int waited = 0; waited < 10000 && paused < 1; waited += 20) {
		paused = cli_info_num_other(&S, "clients", "connections_paused");
		if (paused < 1)
			t_sleep_ms(20);
	}
	cr_assert_geq(paused, 1, "no connection paused within 10 s");
	kill(S.pid, SIGTERM);
	t_sleep_ms(100);
	for (uint64_t id = first; id < first + N; id++) {
		proto_frame *f = cli_ok(&c, id);
		proto_pull_resp r;
		cr_assert_eq(proto_pull_resp_decode(&f->hdr, f->body, &r), 0);
		cr_assert_eq(r.n_rows, 1000);
		proto_frame_free(f);
	}
	cli_expect_closed(&c);
	int st = srv_wait_exit(&S, 10000);
	cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x: %s", st,
		  srv_log(&S));
	const char *log = srv_log(&S);
	cr_assert(strstr(log, "shutting down (SIGTERM)"), "%s", log);
	cr_assert(strstr(log, "exit 0"), "%s", log);
	struct stat sb;
	cr_assert_neq(stat(S.sock, &sb), 0, "the Unix socket file is removed");
	cli_close(&c);
}

Test(server, shutdown_request)
{
	srv_start(&S, NULL);
	cli c, other;
	cli_ready(&c, &S);
	cli_ready(&other, &S);
	uint64_t id = cli_send_empty(&c, PROTO_OP_SHUTDOWN);
	proto_frame_free(cli_ok(&c, id));
	cli_expect_closed(&c);
	cli_expect_closed(&other);
	int st = srv_wait_exit(&S, 10000);
	cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
	cr_assert(strstr(srv_log(&S), "SHUTDOWN from conn"), "%s", srv_log(&S));
	cli_close(&c);
	cli_close(&other);
}

/* TABLE_RESERVE runs on a thread of its own: while it backs half a
 * gigabyte, the one I/O thread answers a PING sent after it on the same
 * connection, and another connection's, before the reserve's own answer;
 * an unknown table still gets NO_TABLE.  A SHUTDOWN while a reserve runs
 * waits for its answer, and the server exits 0. */
Test(server, table_reserve_leaves_the_io_thread_free)
{
	const char *extra[] = { "--io_threads", "1", NULL };
	srv_start(&S, extra);
	cli c, other;
	cli_ready(&c, &S);
	cli_ready(&other, &S);
	uint32_t t = cli_create_table(&c, "room", 64);

	proto_table_reserve_req rq = { .table = t, .rows = 2000000 };
	uint64_t rid = CLI_SEND(&c, proto_table_reserve_req_encode, &rq);
	proto_ping ping = { proto_cstr("while reserving") };
	uint64_t pid = CLI_SEND(&c, proto_ping_req_encode, &ping);
	proto_frame *f = cli_resp(&c);
	cr_assert_eq(f->hdr.id, pid, "response %llu (%s) came before the PING's",
		     (unsigned long long)f->hdr.id, proto_op_name(f->hdr.opcode));
	cr_assert_eq(f->hdr.opcode, PROTO_OP_PING);
	proto_frame_free(f);
	cli_ping(&other);
	proto_frame_free(cli_ok(&c, rid));
	emdb_table_info info = cli_describe(&other, t);
	cr_assert_gt(info.stats.index_resizes, 0, "the index was not grown");
	cr_assert_geq(info.stats.bytes_overhead, 2000000ull * 256, "overhead %llu bytes",
		      (unsigned long long)info.stats.bytes_overhead);

	char msg[256];
	proto_table_reserve_req bad = { .table = t + 100, .rows = 10 };
	uint64_t bid = CLI_SEND(&c, proto_table_reserve_req_encode, &bad);
	cli_err(&c, bid, EMDB_ERR_NO_TABLE, msg, sizeof(msg));

	uint32_t t2 = cli_create_table(&c, "room2", 64);
	proto_table_reserve_req rq2 = { .table = t2, .rows = 2000000 };
	rid = CLI_SEND(&c, proto_table_reserve_req_encode, &rq2);
	uint64_t sid = cli_send_empty(&other, PROTO_OP_SHUTDOWN);
	proto_frame_free(cli_ok(&other, sid));
	proto_frame_free(cli_ok(&c, rid));
	cli_expect_closed(&c);
	int st = srv_wait_exit(&S, 60000);
	cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x: %s", st,
		  srv_log(&S));
	cr_assert(strstr(srv_log(&S), "reserved room for 2000000 rows"), "%s", srv_log(&S));
	cli_close(&c);
	cli_close(&other);
}
