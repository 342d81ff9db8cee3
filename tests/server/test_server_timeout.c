/*
 * test_server_timeout.c - the server's connection deadlines, as a client
 * meets them: a connection that never finishes its handshake (no HELLO,
 * or HELLO without the AUTH a token requires) gets a TIMEOUT error and is
 * closed, so silent sockets cannot hold connection slots; with
 * idle_timeout_s set, a client that sends nothing is closed while a busy
 * one is not; both settings change at run time through CONFIG SET.
 *
 * The deadlines are short (hundreds of milliseconds, one second) and the
 * waits for their effect long (seconds), so the tests do not depend on
 * how fast the machine is, only on the deadline being enforced at all.
 */
#include "tests/lib/server_util.h"

static srv S;

static void stop_server(void)
{
	srv_stop(&S);
}

TestSuite(timeout, .fini = stop_server, .timeout = 120);

/* The next frame must be a TIMEOUT error with request id 0 whose
 * message mentions `what`, and then the connection must close. */
static void expect_timeout(cli *c, const char *what)
{
	proto_frame *f = NULL;
	int rc = cli_recv(c, &f, 15000);
	cr_assert_eq(rc, 1, "no TIMEOUT frame (rc %d); server log:\n%s", rc, srv_log_tail());
	cr_assert_eq(f->hdr.status, EMDB_ERR_TIMEOUT, "status %s", emdb_err_name(f->hdr.status));
	cr_assert_eq(f->hdr.id, 0);
	proto_str m = { 0 };
	cr_assert_eq(proto_err_decode(&f->hdr, f->body, &m), 0);
	char msg[256];
	snprintf(msg, sizeof(msg), "%.*s", (int)m.len, m.p);
	cr_assert(strstr(msg, what), "message: %s", msg);
	proto_frame_free(f);
	cli_expect_closed(c);
}

/* Connect and HELLO, retrying while the server still counts a connection
 * it has just closed: the slot is given back right after the socket is
 * closed, so a client can see the close a moment before (LIMIT then). */
static void ready_retrying(cli *c)
{
	for (int i = 0; i < 100; i++) {
		cli_tcp(c, &S);
		proto_hello_req h = { 1, 1, proto_cstr("test") };
		uint64_t id = CLI_SEND(c, proto_hello_req_encode, &h);
		proto_frame *f = cli_resp(c);
		int status = f->hdr.status;
		uint64_t got = f->hdr.id;
		proto_frame_free(f);
		if (status == 0 && got == id)
			return;
		cr_assert_eq(status, EMDB_ERR_LIMIT, "status %s", emdb_err_name(status));
		cli_close(c);
		t_sleep_ms(50);
	}
	cr_assert_fail("the closed connection's slot was not given back within 5 s");
}

Test(timeout, no_hello_is_closed_and_the_slot_freed)
{
	const char *extra[] = { "--handshake-timeout-ms", "300", "--max-connections", "2", NULL };
	srv_start(&S, extra);

	/* A client that completes its handshake at once stays. */
	cli good;
	cli_ready(&good, &S);

	/* One that connects and says nothing is told why and closed. */
	cli silent;
	cli_tcp(&silent, &S);
	expect_timeout(&silent, "HELLO did not come within handshake_timeout_ms");
	cli_close(&silent);

	/* Its slot is free again: with max_connections 2, a new client fits. */
	cli next;
	ready_retrying(&next);
	cli_ping(&next);

	/* Well past the deadline, the handshaken clients are still served. */
	t_sleep_ms(800);
	cli_ping(&good);
	cli_ping(&next);
	cr_assert(strstr(srv_log(&S), "HELLO did not come within handshake_timeout_ms"));
	cr_assert_eq(cli_info_num(&good, "clients", "handshake_timeouts"), 1);
	cr_assert_eq(cli_info_num(&good, "clients", "idle_timeouts"), 0);
	cr_assert_eq(cli_info_num(&good, "clients", "protocol_errors"), 0,
		     "a timeout is not a malformed frame");
	cli_close(&next);
	cli_close(&good);
}

Test(timeout, hello_without_required_auth_is_closed)
{
	const char *extra[] = { "--handshake-timeout-ms", "300", "--trainer-token", "tt", NULL };
	srv_start(&S, extra);
	cli c;
	cli_tcp(&c, &S);
	proto_hello_resp h;
	cli_hello(&c, &h);
	cr_assert(h.flags & PROTO_HELLO_AUTH_REQUIRED);
	expect_timeout(&c, "AUTH did not come within handshake_timeout_ms");
	cli_close(&c);

	/* With AUTH in time the connection stays past the deadline. */
	cli_tcp(&c, &S);
	cli_hello(&c, &h);
	cr_assert_eq(cli_auth(&c, "tt"), PROTO_ROLE_TRAINER);
	t_sleep_ms(800);
	cli_ping(&c);
	cli_close(&c);
}

Test(timeout, idle_client_closed_busy_client_kept)
{
	const char *extra[] = { "--idle-timeout-s", "1", NULL };
	srv_start(&S, extra);
	cli idle, busy;
	cli_ready(&idle, &S);
	cli_ready(&busy, &S);
	cli_ping(&idle);

	/* busy pings every 200 ms for 2.4 s; idle says nothing. */
	for (int i = 0; i < 12; i++) {
		t_sleep_ms(200);
		cli_ping(&busy);
	}
	cli_expect_closed(&idle);
	cli_ping(&busy);
	cr_assert(strstr(srv_log(&S), "idle for idle_timeout_s"), "%s", srv_log_tail());
	cr_assert_eq(cli_info_num(&busy, "clients", "idle_timeouts"), 1);
	cli_close(&idle);
	cli_close(&busy);
}

Test(timeout, default_and_runtime_settings)
{
	srv_start(&S, NULL);
	cli admin;
	cli_ready(&admin, &S);

	/* The defaults: a handshake is due within 10 s, idle clients stay. */
	proto_config_get_req g = { proto_cstr("*_timeout_*") };
	uint64_t id = CLI_SEND(&admin, proto_config_get_req_encode, &g);
	proto_frame *f = cli_ok(&admin, id);
	proto_config_get_resp r;
	cr_assert_eq(proto_config_get_resp_decode(&f->hdr, f->body, &r), 0);
	size_t pos = 0;
	proto_kv kv;
	int seen = 0;
	while (proto_kv_list_next(&r, &pos, &kv)) {
		char k[64], v[64];
		snprintf(k, sizeof(k), "%.*s", (int)kv.key.len, kv.key.p);
		snprintf(v, sizeof(v), "%.*s", (int)kv.val.len, kv.val.p);
		if (!strcmp(k, "handshake_timeout_ms")) {
			cr_assert_str_eq(v, "10000");
			seen++;
		}
		if (!strcmp(k, "idle_timeout_s")) {
			cr_assert_str_eq(v, "0");
			seen++;
		}
	}
	cr_assert_eq(seen, 2);
	proto_frame_free(f);

	/* A value out of range is refused and changes nothing. */
	proto_kv bad_kv = { proto_cstr("handshake_timeout_ms"), proto_cstr("-5") };
	proto_config_set_req bad = { 1, &bad_kv, NULL, 0 };
	id = CLI_SEND(&admin, proto_config_set_req_encode, &bad);
	cli_err(&admin, id, EMDB_ERR_INVALID, NULL, 0);

	/* Set while running, both apply to connections already open. */
	cli silent;
	cli_tcp(&silent, &S);
	cli_config_set(&admin, "handshake_timeout_ms", "200");
	expect_timeout(&silent, "HELLO did not come");
	cli_close(&silent);

	cli idle;
	cli_ready(&idle, &S);
	cli_config_set(&admin, "idle_timeout_s", "1");
	for (int i = 0; i < 12; i++) {
		t_sleep_ms(200);
		cli_ping(&admin);
	}
	cli_expect_closed(&idle);
	cli_close(&idle);

	/* And off again: an idle client stays. */
	cli_config_set(&admin, "idle_timeout_s", "0");
	cli_ready(&idle, &S);
	t_sleep_ms(1500);
	cli_ping(&idle);
	cli_ping(&admin);
	cli_close(&idle);
	cli_close(&admin);
}
