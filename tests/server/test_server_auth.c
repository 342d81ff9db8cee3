/*
 * test_server_auth.c - HELLO and AUTH, and the roles: a reader may only
 * Lookup and read statistics (its Push and its Push-and-Update are refused
 * and change nothing), a trainer may not run admin commands (nor make room
 * in a table: TABLE_RESERVE), an admin may do everything; wrong tokens and
 * requests before AUTH close the connection; wrong tokens from one address
 * are throttled (auth_fail_burst, auth_fail_window_ms) without holding
 * back a correct client elsewhere, and forgotten after the window.
 */
#include "tests/lib/server_util.h"

static srv S;

static void stop_server(void)
{
	srv_stop(&S);
}

TestSuite(auth, .fini = stop_server, .timeout = 120);

static const char *const tokens[] = { "--admin-token",  "adm-1",  "--trainer-token", "trn-2",
				      "--reader-token", "rdr-3",  NULL };

/* One connection per role, each past HELLO and AUTH with its token. */
static void connect_roles(cli *adm, cli *trn, cli *rdr)
{
	cli_ready(adm, &S);
	cr_assert_eq(cli_auth(adm, "adm-1"), PROTO_ROLE_ADMIN);
	cli_ready(trn, &S);
	cr_assert_eq(cli_auth(trn, "trn-2"), PROTO_ROLE_TRAINER);
	cli_ready(rdr, &S);
	cr_assert_eq(cli_auth(rdr, "rdr-3"), PROTO_ROLE_READER);
}

Test(auth, tokens_and_roles)
{
	srv_start(&S, tokens);
	cli adm, trn, rdr;

	cli_tcp(&adm, &S);
	proto_hello_resp h;
	cli_hello(&adm, &h);
	cr_assert(h.flags & PROTO_HELLO_AUTH_REQUIRED);
	cr_assert_eq(cli_auth(&adm, "adm-1"), PROTO_ROLE_ADMIN);
	uint32_t t = cli_create_table(&adm, "r", 4);

	cli_unix(&trn, &S);
	cli_hello(&trn, NULL);
	cr_assert_eq(cli_auth(&trn, "trn-2"), PROTO_ROLE_TRAINER);
	cli_tcp(&rdr, &S);
	cli_hello(&rdr, NULL);
	cr_assert_eq(cli_auth(&rdr, "rdr-3"), PROTO_ROLE_READER);

	uint64_t ids[3] = { 5, 6, 7 };
	float g[12];
	for (int i = 0; i < 12; i++)
		g[i] = 2.0f;

	/* reader: Push refused with AUTH, nothing applied, connection open */
	proto_push_req ps = { .table = t, .dim = 4, .n_ids = 3, .ids = ids, .n_rows = 3, .grads = g };
	uint64_t id = CLI_SEND(&rdr, proto_push_req_encode, &ps);
	char msg[256];
	cli_err(&rdr, id, EMDB_ERR_AUTH, msg, sizeof(msg));
	cr_assert(strstr(msg, "reader"), "%s", msg);
	emdb_table_info ti = cli_describe(&adm, t);
	cr_assert_eq(ti.stats.rows, 0, "a refused Push inserts nothing");
	cr_assert_eq(ti.stats.pending_rows, 0, "a refused Push accumulates nothing");
	cr_assert_eq(ti.stats.calls_push, 0);
	/* reader: Prefetch, Pull, Update, CONFIG GET refused too */
	proto_prefetch_req pf = { t, 3, ids };
	id = CLI_SEND(&rdr, proto_prefetch_req_encode, &pf);
	cli_err(&rdr, id, EMDB_ERR_AUTH, NULL, 0);
	proto_update_req up = { t, 0, 0, 0 };
	id = CLI_SEND(&rdr, proto_update_req_encode, &up);
	cli_err(&rdr, id, EMDB_ERR_AUTH, NULL, 0);
	proto_config_get_req cg = { proto_cstr("*") };
	id = CLI_SEND(&rdr, proto_config_get_req_encode, &cg);
	cli_err(&rdr, id, EMDB_ERR_AUTH, NULL, 0);
	/* reader: Lookup, stats, describe, list, info, ping allowed */
	proto_lookup_req lk = { .table = t, .dim = 4, .n = 3, .ids = ids };
	id = CLI_SEND(&rdr, proto_lookup_req_encode, &lk);
	proto_frame_free(cli_ok(&rdr, id));
	id = cli_send_empty(&rdr, PROTO_OP_STATS);
	proto_frame_free(cli_ok(&rdr, id));
	id = cli_send_empty(&rdr, PROTO_OP_TABLE_LIST);
	proto_frame_free(cli_ok(&rdr, id));
	ti = cli_describe(&rdr, t);
	cr_assert_eq(ti.stats.rows, 0, "Lookup never inserts");
	free(cli_info(&rdr, ""));
	cli_ping(&rdr);

	/* trainer: data plane yes, admin no */
	id = CLI_SEND(&trn, proto_push_req_encode, &ps);
	proto_frame_free(cli_ok(&trn, id));
	id = CLI_SEND(&trn, proto_update_req_encode, &up);
	proto_frame_free(cli_ok(&trn, id));
	id = CLI_SEND(&trn, proto_config_get_req_encode, &cg);
	proto_frame_free(cli_ok(&trn, id));
	proto_table_create_req tc;
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	strcpy(cfg.name, "nope");
	cfg.dim = 2;
	tc.cfg = cfg;
	id = CLI_SEND(&trn, proto_table_create_req_encode, &tc);
	cli_err(&trn, id, EMDB_ERR_AUTH, NULL, 0);
	proto_table_drop_req td = { t };
	id = CLI_SEND(&trn, proto_table_drop_req_encode, &td);
	cli_err(&trn, id, EMDB_ERR_AUTH, NULL, 0);
	proto_kv cs_kv = { proto_cstr("max_memory"), proto_cstr("1") };
	proto_config_set_req cs = { 1, &cs_kv, NULL, 0 };
	id = CLI_SEND(&trn, proto_config_set_req_encode, &cs);
	cli_err(&trn, id, EMDB_ERR_AUTH, NULL, 0);
	id = cli_send_empty(&trn, PROTO_OP_SHUTDOWN);
	cli_err(&trn, id, EMDB_ERR_AUTH, NULL, 0);
	cli_ping(&trn);

	ti = cli_describe(&adm, t);
	cr_assert_eq(ti.stats.rows, 3);
	cr_assert_eq(ti.stats.step, 1);
	cr_assert_eq(ti.stats.calls_push, 1);

	cli_close(&rdr);
	cli_close(&trn);
	cr_assert(srv_alive(&S));
	srv_shutdown_clean(&S, &adm);
	cli_close(&adm);
}

/* The rows of ids (dim 4) as a reader sees them. */
static void lookup_rows(cli *c, uint32_t t, const uint64_t *ids, uint32_t n, float *out)
{
	proto_lookup_req lk = { .table = t, .dim = 4, .n = n, .ids = ids };
	uint64_t id = CLI_SEND(c, proto_lookup_req_encode, &lk);
	proto_frame *f = cli_ok(c, id);
	proto_lookup_resp r;
	cr_assert_eq(proto_lookup_resp_decode(&f->hdr, f->body, &r), EMDB_OK);
	cr_assert_eq(r.n, n);
	memcpy(out, r.vecs, (size_t)n * 4 * sizeof(float));
	proto_frame_free(f);
}

/* PUSH_UPDATE answered with its rows; returns them. */
static uint64_t push_update_ok(cli *c, const proto_push_update_req *m)
{
	uint64_t id = CLI_SEND(c, proto_push_update_req_encode, m);
	proto_frame *f = cli_ok(c, id);
	cr_assert_eq(f->hdr.opcode, PROTO_OP_PUSH_UPDATE);
	proto_push_update_resp r;
	cr_assert_eq(proto_push_update_resp_decode(&f->hdr, f->body, &r), EMDB_OK);
	proto_frame_free(f);
	return r.rows;
}

/* PUSH_UPDATE is a trainer's: a reader's is refused with nothing applied
 * and its connection open; a trainer's applies one step, by IDs or by a
 * ticket of its own connection whose count its gradients match. */
Test(auth, push_update_needs_a_trainer)
{
	srv_start(&S, tokens);
	cli adm, trn, rdr;
	connect_roles(&adm, &trn, &rdr);
	uint32_t t = cli_create_table(&adm, "pu", 4);

	uint64_t ids[3] = { 5, 6, 5 }; /* 5 twice */
	float g[12], before[12], after[12];
	for (int i = 0; i < 12; i++)
		g[i] = (float)(i + 1) / 8.0f;
	proto_push_update_req pu = { .table = t, .dim = 4, .n_ids = 3, .ids = ids, .n_rows = 3,
				     .grads = g };
	cr_assert_eq(push_update_ok(&trn, &pu), 2, "two distinct rows updated");
	emdb_table_info ti = cli_describe(&adm, t);
	cr_assert_eq(ti.stats.step, 1);
	cr_assert_eq(ti.stats.rows, 2);
	cr_assert_eq(ti.stats.pending_rows, 0);

	/* reader: refused with AUTH, nothing pushed or applied, still open */
	lookup_rows(&rdr, t, ids, 3, before);
	uint64_t id = CLI_SEND(&rdr, proto_push_update_req_encode, &pu);
	char msg[256];
	cli_err(&rdr, id, EMDB_ERR_AUTH, msg, sizeof(msg));
	cr_assert(strstr(msg, "reader") && strstr(msg, "PUSH_UPDATE"), "%s", msg);
	ti = cli_describe(&adm, t);
	cr_assert_eq(ti.stats.step, 1, "a refused PUSH_UPDATE advances no step");
	cr_assert_eq(ti.stats.pending_rows, 0, "a refused PUSH_UPDATE accumulates nothing");
	cr_assert_eq(ti.stats.calls_push, 1);
	lookup_rows(&rdr, t, ids, 3, after);
	cr_assert_eq(memcmp(before, after, sizeof(before)), 0, "a refused PUSH_UPDATE changed rows");

	/* trainer, by ticket: n_rows must be the ticket's count */
	proto_prefetch_req pf = { t, 3, ids };
	id = CLI_SEND(&trn, proto_prefetch_req_encode, &pf);
	proto_frame *f = cli_ok(&trn, id);
	proto_prefetch_resp tk;
	cr_assert_eq(proto_prefetch_resp_decode(&f->hdr, f->body, &tk), EMDB_OK);
	proto_frame_free(f);
	proto_push_update_req pt = { .table = t, .dim = 4, .ticket = tk.ticket, .n_rows = 2,
				     .grads = g };
	id = CLI_SEND(&trn, proto_push_update_req_encode, &pt);
	cli_err(&trn, id, EMDB_ERR_BATCH, msg, sizeof(msg));
	cr_assert(strstr(msg, "2 gradient rows for a ticket of 3 IDs"), "%s", msg);
	id = CLI_SEND(&adm, proto_push_update_req_encode, &pt); /* not adm's ticket */
	cli_err(&adm, id, EMDB_ERR_TICKET, NULL, 0);
	pt.n_rows = 3;
	pt.dim = 3;
	id = CLI_SEND(&trn, proto_push_update_req_encode, &pt);
	cli_err(&trn, id, EMDB_ERR_DIM, NULL, 0);
	ti = cli_describe(&adm, t);
	cr_assert_eq(ti.stats.step, 1, "refused requests advance no step");
	cr_assert_eq(ti.stats.pending_rows, 0);
	pt.dim = 4;
	cr_assert_eq(push_update_ok(&trn, &pt), 2);
	ti = cli_describe(&adm, t);
	cr_assert_eq(ti.stats.step, 2);
	lookup_rows(&rdr, t, ids, 3, after);
	cr_assert_neq(memcmp(before, after, sizeof(before)), 0, "the trainer's step changed nothing");

	/* Every PUSH_UPDATE, refused or not, on its own line of INFO. */
	char *info = cli_info(&adm, "ops");
	cr_assert(strstr(info, "op_push_update: calls=6 errors=4"), "%s", info);
	free(info);

	cli_close(&rdr);
	cli_close(&trn);
	srv_shutdown_clean(&S, &adm);
	cli_close(&adm);
}

/* TABLE_RESERVE is an admin's: a reader's and a trainer's are refused
 * with AUTH, make no room and leave their connections open; an admin's is
 * served. */
Test(auth, table_reserve_needs_an_admin)
{
	srv_start(&S, tokens);
	cli adm, trn, rdr;
	connect_roles(&adm, &trn, &rdr);
	uint32_t t = cli_create_table(&adm, "room", 4);
	emdb_table_info before = cli_describe(&adm, t);

	proto_table_reserve_req rq = { .table = t, .rows = 100000 };
	cli *refused[] = { &rdr, &trn };
	const char *role[] = { "role reader may not send TABLE_RESERVE",
			       "role trainer may not send TABLE_RESERVE" };
	for (int i = 0; i < 2; i++) {
		char msg[256];
		uint64_t id = CLI_SEND(refused[i], proto_table_reserve_req_encode, &rq);
		cli_err(refused[i], id, EMDB_ERR_AUTH, msg, sizeof(msg));
		cr_assert(strstr(msg, role[i]), "%s", msg);
		cli_ping(refused[i]); /* still open */
	}
	emdb_table_info now = cli_describe(&rdr, t);
	cr_assert_eq(now.stats.bytes_index, before.stats.bytes_index, "a refused TABLE_RESERVE made room");
	cr_assert_eq(now.stats.bytes_overhead, before.stats.bytes_overhead);
	cr_assert_eq(now.stats.index_resizes, before.stats.index_resizes);

	uint64_t id = CLI_SEND(&adm, proto_table_reserve_req_encode, &rq);
	proto_frame *f = cli_ok(&adm, id);
	cr_assert_eq(f->hdr.opcode, PROTO_OP_TABLE_RESERVE);
	cr_assert_eq(proto_empty_decode(&f->hdr), EMDB_OK);
	proto_frame_free(f);
	now = cli_describe(&rdr, t);
	cr_assert_gt(now.stats.bytes_index, before.stats.bytes_index, "the admin's made no room");
	cr_assert_eq(now.stats.rows, 0);

	char *info = cli_info(&adm, "ops");
	cr_assert(strstr(info, "op_table_reserve: calls=3 errors=2"), "%s", info);
	free(info);

	cli_close(&rdr);
	cli_close(&trn);
	srv_shutdown_clean(&S, &adm);
	cli_close(&adm);
}

Test(auth, unauthenticated_is_refused_and_closed)
{
	srv_start(&S, tokens);
	cli w;
	cli_ready(&w, &S);
	cr_assert_eq(cli_auth(&w, "adm-1"), PROTO_ROLE_ADMIN);

	/* a request before AUTH */
	cli c;
	cli_tcp(&c, &S);
	cli_hello(&c, NULL);
	proto_ping pg = { proto_cstr("x") };
	uint64_t id = CLI_SEND(&c, proto_ping_req_encode, &pg);
	cli_err(&c, id, EMDB_ERR_AUTH, NULL, 0);
	cli_expect_closed(&c);
	cli_close(&c);

	/* a wrong token, an empty one, a prefix of a right one */
	const char *bad[] = { "wrong", "", "adm-", "adm-12" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cli_tcp(&c, &S);
		cli_hello(&c, NULL);
		proto_auth_req a = { proto_cstr(bad[i]) };
		id = CLI_SEND(&c, proto_auth_req_encode, &a);
		cli_err(&c, id, EMDB_ERR_AUTH, NULL, 0);
		cli_expect_closed(&c);
		cli_close(&c);
	}
	/* AUTH before HELLO */
	cli_tcp(&c, &S);
	proto_auth_req a = { proto_cstr("adm-1") };
	id = CLI_SEND(&c, proto_auth_req_encode, &a);
	cli_err(&c, id, EMDB_ERR_PROTOCOL, NULL, 0);
	cli_expect_closed(&c);
	cli_close(&c);

	cli_ping(&w);
	cli_close(&w);
	cr_assert(strstr(srv_log(&S), "AUTH refused"), "%s", srv_log(&S));
	cr_assert_null(strstr(srv_log(&S), "no auth token configured"));
}

/* Without tokens: loopback and Unix clients are admin without AUTH, and
 * the log says so (non-loopback refusal cannot be shown on a loopback-only
 * test machine; it is the same path with c->loopback false). */
Test(auth, no_token_loopback_admin)
{
	srv_start(&S, NULL);
	cli c;
	cli_unix(&c, &S);
	proto_hello_resp h;
	cli_hello(&c, &h);
	cr_assert_eq(h.flags & PROTO_HELLO_AUTH_REQUIRED, 0);
	uint32_t t = cli_create_table(&c, "x", 2);
	cr_assert_eq(t, 1);
	/* an AUTH anyway is harmless: admin stays admin */
	cr_assert_eq(cli_auth(&c, "whatever"), PROTO_ROLE_ADMIN);
	cli_close(&c);
	cr_assert(strstr(srv_log(&S), "no auth token configured"), "%s", srv_log(&S));
}

/* One AUTH over a fresh connection (Unix socket or TCP from 127.0.0.1):
 * its status, the message of a refusal in msg[cap]; a refusal must close
 * the connection. */
static int auth_once(bool over_unix, const char *token, char *msg, size_t cap)
{
	cli c;
	if (over_unix)
		cli_unix(&c, &S);
	else
		cli_tcp(&c, &S);
	cli_hello(&c, NULL);
	proto_auth_req a = { proto_cstr(token) };
	uint64_t id = CLI_SEND(&c, proto_auth_req_encode, &a);
	proto_frame *f = cli_resp(&c);
	cr_assert_eq(f->hdr.id, id);
	int status = f->hdr.status;
	msg[0] = '\0';
	if (status != 0) {
		proto_str m = { 0 };
		cr_assert_eq(proto_err_decode(&f->hdr, f->body, &m), 0);
		snprintf(msg, cap, "%.*s", (int)m.len, m.p);
	}
	proto_frame_free(f);
	if (status != 0)
		cli_expect_closed(&c);
	cli_close(&c);
	return status;
}

static size_t count_of(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* Many wrong tokens from one address (the Unix socket): after
 * auth_fail_burst of them, AUTH from there is refused unchecked, even with
 * a right token, the counters say so and the log says it once; a correct
 * client on TCP (another address) authenticates meanwhile. */
Test(auth, wrong_tokens_are_throttled_per_address)
{
	enum { BURST = 5, WINDOW_MS = 60000, TRIES = 60 };
	const char *const args[] = { "--admin-token",	    "adm-1", "--auth-fail-burst", "5",
				     "--auth-fail-window-ms", "60000", NULL };
	srv_start(&S, args);
	uint64_t t0 = t_now_ms();
	int checked = 0, throttled = 0;
	char msg[256];
	for (int i = 0; i < TRIES; i++) {
		char tok[32];
		snprintf(tok, sizeof(tok), "guess-%d", i);
		cr_assert_eq(auth_once(true, tok, msg, sizeof(msg)), EMDB_ERR_AUTH);
		if (strstr(msg, "invalid token")) {
			checked++;
		} else {
			cr_assert(strstr(msg, "too many failed AUTH attempts from unix:uid=" ), "%s", msg);
			throttled++;
		}
	}
	/* The bucket refills BURST per WINDOW_MS: what the run's own length
	 * could have earned back, at most, beside the burst. */
	uint64_t elapsed = t_now_ms() - t0;
	int most = BURST + (int)(elapsed * BURST / WINDOW_MS) + 1;
	cr_assert_geq(checked, BURST, "the first %d wrong tokens are checked", BURST);
	cr_assert_leq(checked, most, "%d of %d guesses checked in %llu ms", checked, TRIES,
		      (unsigned long long)elapsed);
	cr_assert_eq(checked + throttled, TRIES);

	/* The right token from the throttled address: refused unchecked. */
	cr_assert_eq(auth_once(true, "adm-1", msg, sizeof(msg)), EMDB_ERR_AUTH);
	cr_assert(strstr(msg, "too many failed AUTH attempts"), "%s", msg);
	/* From another address: at once. */
	cli ok;
	cli_ready(&ok, &S);
	cr_assert_eq(cli_auth(&ok, "adm-1"), PROTO_ROLE_ADMIN);
	char *info = cli_info(&ok, "clients");
	cr_assert_eq(info_num(info, "auth_failures"), checked, "%s", info);
	cr_assert_eq(info_num(info, "auth_throttled"), throttled + 1, "%s", info);
	cr_assert_eq(info_num(info, "auth_throttled_addresses"), 1, "%s", info);
	free(info);
	cli_close(&ok);
	cr_assert_eq(count_of(srv_log(&S), "AUTH from unix:uid="), 1, "%s", srv_log(&S));
}

/* The throttle forgets: once an address has waited out its failures it
 * may AUTH again (bounded: 200 tries, 20 s), and the keys are run-time
 * settable, 0 turning the limit off. */
Test(auth, throttle_forgets_after_its_window)
{
	const char *const args[] = { "--admin-token",	    "adm-1", "--auth-fail-burst", "3",
				     "--auth-fail-window-ms", "300",	NULL };
	srv_start(&S, args);
	char msg[256] = "";
	int status = 0;
	for (int i = 0; i < 50 && !strstr(msg, "too many"); i++) {
		status = auth_once(true, "wrong", msg, sizeof(msg));
		cr_assert_eq(status, EMDB_ERR_AUTH);
	}
	cr_assert(strstr(msg, "too many failed AUTH attempts"), "never throttled: %s", msg);
	uint64_t t0 = t_now_ms();
	int tries = 0;
	do {
		status = auth_once(true, "adm-1", msg, sizeof(msg));
		if (status != 0)
			cr_assert(strstr(msg, "too many failed AUTH attempts"), "%s", msg);
		else
			break;
		t_sleep_ms(50);
	} while (++tries < 200 && t_now_ms() - t0 < 20000);
	cr_assert_eq(status, 0, "still refused after %d tries: %s", tries, msg);

	/* Off at run time: wrong tokens are then all checked. */
	cli adm;
	cli_ready(&adm, &S);
	cr_assert_eq(cli_auth(&adm, "adm-1"), PROTO_ROLE_ADMIN);
	cli_config_set(&adm, "auth_fail_burst", "0");
	long long before = cli_info_num(&adm, "clients", "auth_failures");
	for (int i = 0; i < 10; i++) {
		cr_assert_eq(auth_once(true, "wrong", msg, sizeof(msg)), EMDB_ERR_AUTH);
		cr_assert(strstr(msg, "invalid token"), "%s", msg);
	}
	cr_assert_eq(cli_info_num(&adm, "clients", "auth_failures"), before + 10);
	cli_close(&adm);
}
