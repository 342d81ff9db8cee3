/*
 * test_cli.c - emdb-cli as a script uses it: one-shot mode for every
 * command (output, exit status 0 / 1 / 2, --json parsed back and its
 * fields checked), errors as "(error) NAME: message", roles and tokens,
 * a server that is gone, commands piped on stdin, and a server on TLS.
 * The checkpoint commands are test_cli_ckpt.c's.
 *
 * Each test starts its own emdb-server on loopback with an ephemeral port
 * (tests/lib/client_server.h) and kills it in .fini, which Criterion runs
 * after a failed assertion too; emdb-cli runs as in tests/lib/cli_run.h.
 */
#define _GNU_SOURCE /* tests/lib/tmpdir.h: nftw */
#include "tests/lib/cli_run.h"
#include "tests/lib/tls_pki.h"

/* ---- flags, help, usage ---------------------------------------------- */

Test(cli, flags_help_version_without_a_server)
{
	/* A dead port: none of these may need a connection. */
	const char *dead = "tcp://127.0.0.1:1";
	cli_run r = run_cli_env(NULL, NULL, ARGS("--version"));
	EXPECT(r, 0);
	expect_has(r.out, "emdb-cli 0.");
	run_free(&r);

	r = run_cli_env(NULL, NULL, ARGS("--help"));
	EXPECT(r, 0);
	expect_has(r.out, "usage: emdb-cli");
	expect_has(r.out, "table create NAME DIM");
	run_free(&r);

	r = run_cli_env(NULL, NULL, ARGS("-u", dead, "help"));
	EXPECT(r, 0);
	expect_has(r.out, "lookup TABLE ID...");
	expect_has(r.out, "config set KEY VALUE [KEY VALUE...]");
	run_free(&r);

	r = run_cli_env(NULL, NULL, ARGS("--uri", dead, "help", "table"));
	EXPECT(r, 0);
	expect_has(r.out, "table create NAME DIM [KEY=VALUE...]");
	expect_has(r.out, "table drop NAME|ID");
	expect_has(r.out, "table reserve NAME|ID ROWS");
	expect_has(r.out, "optimizer=sgd|adagrad|rowwise_adagrad|adam|ftrl");
	cr_assert_null(strstr(r.out, "lookup TABLE"), "help table shows only table commands");
	run_free(&r);

	r = run_cli_env(NULL, NULL, ARGS("--uri=tcp://127.0.0.1:1", "--json", "help", "lookup"));
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert(jbool(v, "ok"));
	cr_assert_str_eq(jstr(v, "commands.0.name"), "lookup");
	cr_assert_str_eq(jstr(v, "commands.0.role"), "reader");
	cr_assert_eq(jget(v, "commands")->n, 1);
	run_free(&r);

	r = run_cli_env(NULL, NULL, ARGS("-u", dead, "--json", "help"));
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_geq(jget(v, "commands")->n, 12);
	run_free(&r);

	r = run_cli_env(NULL, NULL, ARGS("-u", dead, "quit"));
	EXPECT(r, 0);
	run_free(&r);
}

Test(cli, usage_errors_exit_2)
{
	const char *dead = "tcp://127.0.0.1:1";
	const char *const *cases[] = {
		ARGS("--frobnicate"),
		ARGS("--timeout", "soon", "ping"),
		ARGS("-u"),
		ARGS("-u", "tcp://127.0.0.1:1", "frob"),
		ARGS("-u", "tcp://127.0.0.1:1", "table"),
		ARGS("-u", "tcp://127.0.0.1:1", "table", "frob"),
		ARGS("-u", "tcp://127.0.0.1:1", "help", "frob"),
		ARGS("-u", "tcp://127.0.0.1:1", "ping", "extra"),
	};
	(void)dead;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cli_run r = run_cli_env(NULL, NULL, cases[i]);
		EXPECT(r, 2);
		cr_assert_gt(strlen(r.err), 0);
		cr_assert_eq(strlen(r.out), 0, "case %zu: %s", i, r.out);
		run_free(&r);
	}
	cli_run r = run_cli_env(NULL, NULL, ARGS("-u", dead, "table", "frob"));
	expect_has(r.err, "(error) USAGE: unknown command 'table frob'");
	expect_has(r.err, "create, describe, list, drop, reserve");
	run_free(&r);
}

Test(cli, usage_errors_of_commands, .init = srv_up, .fini = srv_down)
{
	const char *const *cases[] = {
		ARGS("lookup", "t"),
		ARGS("lookup", "t", "12x"),
		ARGS("lookup", "t", "-1"),
		ARGS("table", "create", "t"),
		ARGS("table", "create", "t", "four"),
		ARGS("table", "create", "t", "4", "colour=red"),
		ARGS("table", "create", "t", "4", "lr"),
		ARGS("table", "create", "t", "4", "optimizer=lion"),
		ARGS("table", "create", "t", "4", "beta1=0.5"), /* sgd has no beta1 */
		ARGS("table", "create", "t", "4", "lr=0.1", "lr=0.2"),
		ARGS("table", "create", "t", "4", "init=uniform:1"),
		ARGS("table", "create", "t", "4", "seed=-3"),
		ARGS("table", "create", "t", "4", "default=ones"),
		ARGS("table", "create", "a_name_that_is_much_longer_than_sixty_three_bytes_which_is_the_limit", "4"),
		ARGS("config", "set", "log_level"),
		ARGS("config", "get"),
		ARGS("table", "describe"),
		ARGS("table", "reserve", "t"),
		ARGS("table", "reserve", "t", "1k", "2k"),
		ARGS("table", "reserve", "t", "lots"),
		ARGS("table", "reserve", "t", "1.5M"),
		ARGS("table", "reserve", "t", "-1"),
		ARGS("table", "reserve", "t", "40m"),
		ARGS("table", "reserve", "t", "0x10k"),
		ARGS("table", "reserve", "t", "18446744073709552k"),
		ARGS("info", "server", "memory"),
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cli_run r = run_srv(true, cases[i]);
		expect_json_error(&r, 2, "USAGE");
		run_free(&r);
	}
	cli_run r = CLI("table", "create", "t", "4", "beta1=0.5");
	expect_has(r.err, "beta1 is not a parameter of sgd");
	expect_has(r.err, "usage: table create NAME DIM [KEY=VALUE...]");
	run_free(&r);
	/* Nothing was created by any of them. */
	r = CLI_JSON("table", "list");
	EXPECT(r, 0);
	cr_assert_eq(jget(json_out(&r), "tables")->n, 0);
	run_free(&r);
}

/* ---- the server's commands --------------------------------------------- */

Test(cli, ping, .init = srv_up, .fini = srv_down)
{
	cli_run r = CLI("ping");
	EXPECT(r, 0);
	expect_has(r.out, "PONG");
	cr_assert_eq(strlen(r.err), 0);
	run_free(&r);

	r = CLI_JSON("ping");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert(jbool(v, "ok"));
	cr_assert_str_eq(jstr(v, "reply"), "PONG");
	cr_assert_geq(jnum(v, "latency_ms"), 0);
	cr_assert_eq(strncmp(jstr(v, "server"), "emdb ", 5), 0);
	run_free(&r);

	/* Over the Unix socket too. */
	r = run_cli_env(NULL, NULL, ARGS("-u", srv.unix_uri, "ping"));
	EXPECT(r, 0);
	expect_has(r.out, "PONG");
	run_free(&r);
}

static char pki[64];

static void srv_up_tls(void)
{
	tls_pki_make(pki);
	const char *const flags[] = { "--tls-cert-file", tls_pki_path(pki, "srv.pem"), "--tls-key-file",
				      tls_pki_path(pki, "srv.key"), NULL };
	test_server_start(&srv, flags);
}

static void srv_down_tls(void)
{
	test_server_stop(&srv);
	tls_pki_remove(pki);
}

/* A server on TLS: the operator names the CA in the URI; without it the
 * certificate is not trusted, and the shell says so and exits 1. */
Test(cli, over_tls, .init = srv_up_tls, .fini = srv_down_tls)
{
	char uri[256];
	snprintf(uri, sizeof(uri), "tls://127.0.0.1:%u?ca=%s", srv.port, tls_pki_path(pki, "ca.pem"));
	cli_run r = run_cli_env(NULL, NULL, ARGS("-u", uri, "table", "create", "t", "4"));
	EXPECT(r, 0);
	run_free(&r);
	r = run_cli_env(NULL, NULL, ARGS("-u", uri, "--json", "lookup", "t", "1"));
	EXPECT(r, 0);
	run_free(&r);

	snprintf(uri, sizeof(uri), "tls://127.0.0.1:%u", srv.port);
	r = run_cli_env(NULL, NULL, ARGS("-u", uri, "ping"));
	EXPECT(r, 1);
	expect_has(r.err, "AUTH");
	expect_has(r.err, "certificate verify failed");
	run_free(&r);
}

Test(cli, info, .init = srv_up, .fini = srv_down)
{
	cli_run r = CLI("info");
	EXPECT(r, 0);
	expect_has(r.out, "# Server");
	expect_has(r.out, "version: emdb ");
	run_free(&r);

	r = CLI("info", "memory");
	EXPECT(r, 0);
	expect_has(r.out, "used_bytes: ");
	cr_assert_null(strstr(r.out, "# Server"));
	run_free(&r);

	r = CLI_JSON("info", "all");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert_eq(strncmp(jstr(v, "info.server.version"), "emdb ", 5), 0);
	char port[16];
	snprintf(port, sizeof(port), "%u", srv.port);
	cr_assert_str_eq(jstr(v, "info.server.tcp_port"), port);
	cr_assert_gt(atoll(jstr(v, "info.memory.used_bytes")), 0);
	cr_assert_str_eq(jstr(v, "info.tables.tables"), "0");
	run_free(&r);

	r = CLI_JSON("info", "nonsense");
	expect_json_error(&r, 1, "INVALID");
	run_free(&r);
}

/* A single node: cluster info says so (a cluster: tests/cluster/). */
Test(cli, cluster_info_of_a_single_node, .init = srv_up, .fini = srv_down)
{
	cli_run r = CLI("cluster", "info");
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "not part of a cluster (a single node)\n");
	run_free(&r);
	r = CLI_JSON("cluster", "info");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert_not(jbool(v, "cluster.enabled"));
	run_free(&r);
	r = CLI("info", "cluster");
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "# Cluster\nenabled: no\n");
	run_free(&r);
	/* A linktest has no link to test: the server's refusal. */
	r = CLI("cluster", "linktest", "--seconds", "0.1");
	EXPECT(r, 1);
	expect_has(r.err, "not part of a cluster");
	run_free(&r);
	r = CLI("cluster", "linktest", "--depth", "0");
	EXPECT(r, 2);
	run_free(&r);
}

/* `info tier`: each table's GPU replica; without gpu_memory, in host
 * memory with every figure 0 (docs/gpu.md "What an operator sees"). */
Test(cli, info_tier_of_a_host_table, .init = srv_up, .fini = srv_down)
{
	cli_run r = CLI("table", "create", "t", "4");
	EXPECT(r, 0);
	run_free(&r);
	r = CLI("info", "tier");
	EXPECT(r, 0);
	const char *head = "# Tier\ntier_t: tier=host devices=0 failed=0 hot_capacity=0 ";
	cr_assert(!strncmp(r.out, head, strlen(head)), "%s", r.out);
	cr_assert(strstr(r.out, " fallbacks=0\n"), "%s", r.out);
	run_free(&r);
	r = CLI_JSON("info", "tier");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert(!strncmp(jstr(v, "info.tier.tier_t"), "tier=host devices=0 ", strlen("tier=host devices=0 ")), "%s",
		  jstr(v, "info.tier.tier_t"));
	run_free(&r);
}

Test(cli, config_get_and_set, .init = srv_up, .fini = srv_down)
{
	cli_run r = CLI("config", "get", "max_*");
	EXPECT(r, 0);
	expect_has(r.out, "max_connections: 10000\n");
	expect_has(r.out, "max_tickets: 65536\n");
	cr_assert_null(strstr(r.out, "log_level"));
	run_free(&r);

	r = CLI("config", "set", "max_tickets", "1000");
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "OK\n");
	run_free(&r);

	r = CLI_JSON("config", "get", "*");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert_str_eq(jstr(v, "config.max_tickets"), "1000");
	cr_assert_str_eq(jstr(v, "config.log_level"), "info");
	cr_assert_str_eq(jstr(v, "config.bind"), "127.0.0.1");
	run_free(&r);

	r = CLI_JSON("config", "set", "log_level", "debug");
	EXPECT(r, 0);
	cr_assert(jbool(json_out(&r), "ok"));
	run_free(&r);

	r = CLI("config", "get", "nothing_like_this*");
	EXPECT(r, 0);
	expect_has(r.out, "(no setting matches");
	run_free(&r);

	r = CLI_JSON("config", "get", "nothing_like_this*");
	EXPECT(r, 0);
	cr_assert_eq(jget(json_out(&r), "config")->n, 0);
	run_free(&r);

	r = CLI("config", "set", "no_such_key", "1");
	EXPECT(r, 1);
	expect_has(r.err, "(error) INVALID: ");
	run_free(&r);

	r = CLI_JSON("config", "set", "port", "1234"); /* fixed at start */
	EXPECT(r, 1);
	cr_assert_eq(jbool(json_out(&r), "ok"), false);
	run_free(&r);

	/* Several pairs: together, or none of them. */
	r = CLI("config", "set", "max_tickets", "77", "log_level", "warn");
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "OK\n");
	run_free(&r);
	r = CLI("config", "set", "max_tickets", "5", "no_such_key", "1");
	EXPECT(r, 1);
	expect_has(r.err, "no_such_key");
	run_free(&r);
	r = CLI("config", "get", "max_tickets");
	EXPECT(r, 0);
	expect_has(r.out, "max_tickets: 77\n");
	run_free(&r);
	r = CLI("config", "set", "max_tickets", "5", "log_level");
	EXPECT(r, 2);
	expect_has(r.err, "(error) USAGE: config set takes KEY VALUE pairs");
	run_free(&r);
}

Test(cli, stats, .init = srv_up, .fini = srv_down)
{
	cli_ok(ARGS("table", "create", "s", "4"));
	emdb_client *c;
	cr_assert_eq(emdb_client_connect(srv.tcp_uri, NULL, &c), 0);
	uint32_t t;
	cr_assert_eq(emdb_client_table_find(c, "s", &t), 0);
	uint64_t ids[5] = { 1, 2, 3, 4, 5 };
	float out[20];
	cr_assert_eq(emdb_client_pull(c, t, ids, 5, 4, out), 0);
	emdb_client_close(c);

	cli_run r = CLI("stats");
	EXPECT(r, 0);
	expect_has(r.out, "tables: 1\n");
	expect_has(r.out, "rows: 5\n");
	expect_has(r.out, "calls_pull: 1\n");
	run_free(&r);

	r = CLI_JSON("stats");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert_eq(jnum(v, "tables"), 1);
	cr_assert_eq(jnum(v, "total.rows"), 5);
	cr_assert_eq(jnum(v, "total.ids_pull"), 5);
	cr_assert_gt(jnum(v, "alloc_bytes"), 0);
	cr_assert_geq(jnum(v, "alloc_peak"), jnum(v, "alloc_bytes"));
	run_free(&r);
}

Test(cli, shutdown_then_unreachable, .init = srv_up, .fini = srv_down)
{
	cli_run r = CLI("shutdown");
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "OK\n");
	run_free(&r);
	int exited = 0;
	for (int i = 0; i < 2000 && !exited; i++) {
		exited = !test_server_alive(&srv);
		if (!exited)
			test_sleep_ms(10);
	}
	cr_assert(exited, "the server still runs after shutdown");

	r = CLI("ping");
	EXPECT(r, 1);
	expect_has(r.err, "(error) IO: ");
	cr_assert_eq(strlen(r.out), 0);
	run_free(&r);

	r = CLI_JSON("table", "list");
	expect_json_error(&r, 1, "IO");
	run_free(&r);
}

Test(cli, stalled_server_times_out, .init = srv_up, .fini = srv_down)
{
	cli_ok(ARGS("ping"));
	test_server_pause(&srv);
	cli_run r = CLI("--timeout", "300", "ping");
	test_server_resume(&srv);
	EXPECT(r, 1);
	expect_has(r.err, "(error) TIMEOUT: ");
	run_free(&r);
}

/* ---- tables ------------------------------------------------------------ */

Test(cli, table_create_every_option, .init = srv_up, .fini = srv_down)
{
	cli_run r = CLI("table", "create", "ads", "8", "optimizer=adam", "lr=0.002", "eps=1e-6",
			"beta1=0.8", "beta2=0.99", "init=uniform:-0.1,0.1", "seed=42", "default=init");
	EXPECT(r, 0);
	expect_has(r.out, "created table ads (id 1)");
	run_free(&r);

	r = CLI_JSON("table", "describe", "ads");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert_eq(jnum(v, "id"), 1);
	cr_assert_str_eq(jstr(v, "name"), "ads");
	cr_assert_eq(jnum(v, "dim"), 8);
	cr_assert_str_eq(jstr(v, "optimizer.kind"), "adam");
	cr_assert_eq(jnum(v, "optimizer.lr"), 0.002);
	cr_assert_eq(jnum(v, "optimizer.eps"), 1e-6);
	cr_assert_eq(jnum(v, "optimizer.beta1"), 0.8);
	cr_assert_eq(jnum(v, "optimizer.beta2"), 0.99);
	cr_assert_str_eq(jstr(v, "init.kind"), "uniform");
	cr_assert_eq(jnum(v, "init.low"), -0.1);
	cr_assert_eq(jnum(v, "init.high"), 0.1);
	cr_assert_eq(jnum(v, "seed"), 42);
	cr_assert_str_eq(jstr(v, "default"), "init");
	cr_assert_eq(jnum(v, "stats.rows"), 0);
	run_free(&r);

	/* FTRL, with alpha for lr, and a normal initializer; hex seed. */
	cli_ok(ARGS("table", "create", "ctr", "3", "l2=0.02", "optimizer=ftrl", "alpha=0.1",
		    "beta=0.5", "l1=0.01", "initial_accumulator=0.2", "init=normal:0,0.01",
		    "seed=0x10"));
	r = CLI_JSON("table", "describe", "ctr");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_str_eq(jstr(v, "optimizer.kind"), "ftrl");
	cr_assert_eq(jnum(v, "optimizer.lr"), 0.1);
	cr_assert_eq(jnum(v, "optimizer.beta"), 0.5);
	cr_assert_eq(jnum(v, "optimizer.l1"), 0.01);
	cr_assert_eq(jnum(v, "optimizer.l2"), 0.02);
	cr_assert_eq(jnum(v, "optimizer.initial_accumulator"), 0.2);
	cr_assert_str_eq(jstr(v, "init.kind"), "normal");
	cr_assert_eq(jnum(v, "init.std"), 0.01);
	cr_assert_eq(jnum(v, "seed"), 16);
	cr_assert_str_eq(jstr(v, "default"), "zeros");
	run_free(&r);

	/* Adagrad and row-wise Adagrad: their own keys, their defaults. */
	cli_ok(ARGS("table", "create", "ag", "2", "optimizer=adagrad", "lr_decay=0.1",
		    "initial_accumulator=0.5", "eps=1e-9"));
	r = CLI("table", "describe", "ag");
	EXPECT(r, 0);
	expect_has(r.out, "optimizer: adagrad\nlr: 0.01\neps: 1e-09\nlr_decay: 0.1\n"
			  "initial_accumulator: 0.5\ninit: zeros\nseed: 0\ndefault: zeros\n");
	run_free(&r);
	cli_ok(ARGS("table", "create", "rw", "2", "optimizer=rowwise_adagrad"));
	r = CLI_JSON("table", "describe", "4");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_str_eq(jstr(v, "name"), "rw", "a number that names no table is an id");
	cr_assert_eq(jnum(v, "optimizer.eps"), 1e-8);
	run_free(&r);

	/* Text describe of the first. */
	r = CLI("table", "describe", "1");
	EXPECT(r, 0);
	expect_has(r.out, "name: ads\ndim: 8\noptimizer: adam\nlr: 0.002\n");
	expect_has(r.out, "init: uniform:-0.1,0.1\nseed: 42\ndefault: init\nrows: 0\n");
	run_free(&r);

	/* The list. */
	r = CLI("table", "list");
	EXPECT(r, 0);
	expect_has(r.out, "NAME");
	expect_has(r.out, "ads");
	expect_has(r.out, "ftrl");
	run_free(&r);
	r = CLI_JSON("table", "list");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_eq(jget(v, "tables")->n, 4);
	cr_assert_str_eq(jstr(v, "tables.0.name"), "ads");
	cr_assert_eq(jnum(v, "tables.1.dim"), 3);
	cr_assert_str_eq(jstr(v, "tables.2.optimizer"), "adagrad");
	cr_assert_eq(jnum(v, "tables.3.id"), 4);
	run_free(&r);
}

Test(cli, table_errors_from_the_server, .init = srv_up, .fini = srv_down)
{
	cli_ok(ARGS("table", "create", "ads", "4"));
	cli_run r = CLI("table", "create", "ads", "4");
	EXPECT(r, 1);
	expect_has(r.err, "(error) EXISTS: ");
	cr_assert_eq(strlen(r.out), 0);
	run_free(&r);

	r = CLI_JSON("table", "create", "ads", "4");
	expect_json_error(&r, 1, "EXISTS");
	run_free(&r);

	r = CLI_JSON("table", "create", "zero", "0");
	expect_json_error(&r, 1, "INVALID");
	run_free(&r);

	r = CLI_JSON("table", "create", "neg", "4", "lr=-1");
	expect_json_error(&r, 1, "INVALID");
	expect_has(r.err, "lr");
	run_free(&r);

	r = CLI_JSON("table", "create", "bad name", "4");
	expect_json_error(&r, 1, "INVALID");
	run_free(&r);

	r = CLI_JSON("table", "describe", "nope");
	expect_json_error(&r, 1, "NO_TABLE");
	run_free(&r);

	r = CLI("table", "describe", "99");
	EXPECT(r, 1);
	expect_has(r.err, "(error) NO_TABLE: no table named '99' and no table with id 99");
	run_free(&r);

	r = CLI_JSON("table", "drop", "nope");
	expect_json_error(&r, 1, "NO_TABLE");
	run_free(&r);

	/* A message with quotes and backslashes stays valid JSON. */
	r = CLI_JSON("table", "describe", "we\"ird\\name\t");
	EXPECT(r, 1);
	jv *v = json_out(&r);
	cr_assert_eq(jbool(v, "ok"), false);
	run_free(&r);
}

Test(cli, table_drop, .init = srv_up, .fini = srv_down)
{
	cli_ok(ARGS("table", "create", "a", "4"));
	cli_ok(ARGS("table", "create", "b", "4"));
	cli_ok(ARGS("table", "create", "c", "4"));
	cli_run r = CLI("table", "drop", "a");
	EXPECT(r, 0);
	expect_has(r.out, "dropped table a (id 1)");
	run_free(&r);

	r = CLI_JSON("table", "drop", "2");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert_str_eq(jstr(v, "name"), "b");
	cr_assert_eq(jnum(v, "id"), 2);
	run_free(&r);

	r = CLI_JSON("table", "list");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_eq(jget(v, "tables")->n, 1);
	cr_assert_str_eq(jstr(v, "tables.0.name"), "c");
	run_free(&r);

	r = CLI("table", "describe", "a");
	EXPECT(r, 1);
	expect_has(r.err, "(error) NO_TABLE");
	run_free(&r);

	cli_ok(ARGS("table", "drop", "c"));
	r = CLI("table", "list");
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "(no tables)\n");
	run_free(&r);
}

/* The room a table has made: its index bytes, as table describe --json
 * reports them. */
static double index_bytes(const char *table)
{
	cli_run r = CLI_JSON("table", "describe", table);
	EXPECT(r, 0);
	double b = jnum(json_out(&r), "stats.bytes_index");
	run_free(&r);
	return b;
}

Test(cli, table_reserve, .init = srv_up, .fini = srv_down)
{
	cli_ok(ARGS("table", "create", "emb", "4"));
	double before = index_bytes("emb");
	cli_run r = CLI("table", "reserve", "emb", "100k");
	EXPECT(r, 0);
	expect_has(r.out, "reserved room for 100000 rows in table 'emb' (");
	expect_has(r.out, " s)\n");
	cr_assert_eq(strlen(r.err), 0, "%s", r.err);
	run_free(&r);
	cr_assert_gt(index_bytes("emb"), before, "no index room was made");

	/* By id, in JSON; a count without a suffix, and M. */
	r = CLI_JSON("table", "reserve", "1", "150000");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert(jbool(v, "ok"));
	cr_assert_eq(jnum(v, "id"), 1);
	cr_assert_str_eq(jstr(v, "name"), "emb");
	cr_assert_eq(jnum(v, "rows"), 150000);
	cr_assert_geq(jnum(v, "seconds"), 0);
	run_free(&r);
	r = CLI("table", "reserve", "emb", "1M");
	EXPECT(r, 0);
	expect_has(r.out, "reserved room for 1000000 rows in table 'emb' (");
	run_free(&r);

	/* Backing 40M rows (1.4 GB of rows and index) takes longer than a
	 * 100 ms request timeout even where memory is fast (0.15 s at 10 GB/s);
	 * the command waits for it all the same.  (100 ms, not less: connecting
	 * gets the same timeout.) */
	r = CLI("--timeout", "100", "table", "reserve", "emb", "40M");
	EXPECT(r, 0);
	expect_has(r.out, "reserved room for 40000000 rows in table 'emb' (");
	run_free(&r);

	/* No rows appear: room is not rows. */
	r = CLI_JSON("table", "describe", "emb");
	EXPECT(r, 0);
	cr_assert_eq(jnum(json_out(&r), "stats.rows"), 0);
	run_free(&r);

	/* Refusals: the server's, exit 1. */
	r = CLI("table", "reserve", "nope", "10");
	EXPECT(r, 1);
	expect_has(r.err, "(error) NO_TABLE: ");
	cr_assert_eq(strlen(r.out), 0, "%s", r.out);
	run_free(&r);
	r = CLI_JSON("table", "reserve", "nope", "10k");
	expect_json_error(&r, 1, "NO_TABLE");
	run_free(&r);
	r = CLI("table", "reserve", "emb", "18446744073709551615");
	EXPECT(r, 1);
	expect_has(r.err, "(error) LIMIT: ");
	run_free(&r);
}

Test(cli, lookup_prints_vectors_and_found, .init = srv_up, .fini = srv_down)
{
	cli_ok(ARGS("table", "create", "emb", "3", "init=uniform:-1,1", "seed=9", "default=init"));
	cli_ok(ARGS("table", "create", "z", "2"));
	emdb_client *c;
	cr_assert_eq(emdb_client_connect(srv.tcp_uri, NULL, &c), 0);
	uint32_t t;
	cr_assert_eq(emdb_client_table_find(c, "emb", &t), 0);
	uint64_t held[2] = { 7, 18446744073709551615ull };
	float pulled[6];
	cr_assert_eq(emdb_client_pull(c, t, held, 2, 3, pulled), 0);
	uint64_t ids[3] = { 7, 8, 18446744073709551615ull };
	float want[9];
	uint8_t found[3];
	cr_assert_eq(emdb_client_lookup(c, t, ids, 3, 3, want, found), 0);
	emdb_client_close(c);
	cr_assert(found[0] && !found[1] && found[2]);

	cli_run r = CLI_JSON("lookup", "emb", "7", "0x8", "18446744073709551615");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert_str_eq(jstr(v, "table"), "emb");
	cr_assert_eq(jnum(v, "dim"), 3);
	cr_assert_eq(jget(v, "rows")->n, 3);
	cr_assert_eq(jnum(v, "rows.0.id"), 7);
	cr_assert_eq(jbool(v, "rows.0.found"), true);
	cr_assert_eq(jbool(v, "rows.1.found"), false);
	cr_assert_eq(jbool(v, "rows.2.found"), true);
	for (int i = 0; i < 3; i++) {
		const jv *vec = jget(v, i == 0 ? "rows.0.vector" : i == 1 ? "rows.1.vector" : "rows.2.vector");
		cr_assert_eq(vec->n, 3);
		for (int j = 0; j < 3; j++) {
			cr_assert_eq(vec->items[j]->t, J_NUM);
			/* Printed exactly: the float reads back bit for bit. */
			cr_assert_eq((float)vec->items[j]->num, want[i * 3 + j], "row %d col %d: %.9g vs %.9g",
				     i, j, vec->items[j]->num, (double)want[i * 3 + j]);
		}
	}
	cr_assert_neq(want[3], 0.0f, "default=init gives the initial value to a missing ID");
	run_free(&r);

	r = CLI("lookup", "emb", "7", "8");
	EXPECT(r, 0);
	expect_has(r.out, "7: found [");
	expect_has(r.out, "8: not found (default) [");
	run_free(&r);

	r = CLI("lookup", "z", "1");
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "1: not found (default) [0, 0]\n");
	run_free(&r);

	/* Lookup never inserts. */
	r = CLI_JSON("table", "describe", "z");
	EXPECT(r, 0);
	cr_assert_eq(jnum(json_out(&r), "stats.rows"), 0);
	run_free(&r);

	r = CLI_JSON("lookup", "nope", "1");
	expect_json_error(&r, 1, "NO_TABLE");
	run_free(&r);
}

/* ---- roles and tokens ----------------------------------------------------- */

Test(cli, roles_and_tokens, .init = srv_up_auth, .fini = srv_down)
{
	/* No token: the server requires one. */
	cli_run r = CLI("ping");
	EXPECT(r, 1);
	expect_has(r.err, "(error) AUTH: ");
	run_free(&r);

	r = CLI("--token", "wrong", "ping");
	EXPECT(r, 1);
	expect_has(r.err, "(error) AUTH: ");
	run_free(&r);

	/* A reader may look but not create; the CLI names the role needed. */
	r = CLI("--token", "r34d", "ping");
	EXPECT(r, 0);
	run_free(&r);
	r = CLI("--token", "r34d", "table", "create", "t", "4");
	EXPECT(r, 1);
	expect_has(r.err, "(error) AUTH: 'table create' needs the admin role; this connection has the reader role");
	run_free(&r);
	r = CLI_JSON("--token=r34d", "config", "get", "*");
	expect_json_error(&r, 1, "AUTH");
	run_free(&r);
	r = CLI("--token", "r34d", "table", "reserve", "t", "10");
	EXPECT(r, 1);
	expect_has(r.err, "(error) AUTH: 'table reserve' needs the admin role");
	run_free(&r);

	/* The admin token, by flag, in the URI, and from the environment. */
	r = CLI("--token", "adm1n", "table", "create", "t", "4");
	EXPECT(r, 0);
	run_free(&r);
	char uri[300];
	snprintf(uri, sizeof(uri), "%s?token=adm1n", srv.tcp_uri);
	r = run_cli_env(NULL, NULL, ARGS("-u", uri, "config", "get", "admin_token"));
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "admin_token: <hidden>\n");
	run_free(&r);
	r = run_cli_env(NULL, ARGS("EMDB_CLI_TOKEN=adm1n"), ARGS("-u", srv.tcp_uri, "table", "drop", "t"));
	EXPECT(r, 0);
	run_free(&r);
}

/* ---- mem:// ----------------------------------------------------------------- */

Test(cli, mem_uri_needs_no_server)
{
	cli_run r = run_cli_env(NULL, NULL, ARGS("-u", "mem://", "table", "create", "m", "2"));
	EXPECT(r, 0);
	run_free(&r);
	r = run_cli_env(NULL, NULL, ARGS("-u", "mem://", "--json", "shutdown"));
	expect_json_error(&r, 1, "UNSUPPORTED");
	run_free(&r);
	r = run_cli_env("table create m 2\ntable list\nlookup m 5\n", NULL, ARGS("-u", "mem://"));
	EXPECT(r, 0);
	expect_has(r.out, "5: not found (default) [0, 0]");
	run_free(&r);
}

/* ---- piped stdin ------------------------------------------------------------ */

Test(cli, piped_commands, .init = srv_up, .fini = srv_down)
{
	cli_run r = run_cli_env("ping\n"
				"# a comment, then a blank line\n"
				"\n"
				"table create p 2 init=uniform:-1,1\n"
				"  TABLE   LIST  \n"
				"config set log_level \"warn\"\n"
				"config get log_level\n"
				"lookup p 1 2\n",
				NULL, ARGS("-u", srv.tcp_uri));
	EXPECT(r, 0);
	expect_has(r.out, "PONG");
	expect_has(r.out, "created table p (id 1)\n");
	expect_has(r.out, "OPTIMIZER");
	expect_has(r.out, "log_level: warn\n");
	expect_has(r.out, "1: not found (default) [0, 0]\n");
	cr_assert_eq(strlen(r.err), 0, "%s", r.err);
	run_free(&r);

	/* Every line runs; the status is the worst; quit stops; the last
	 * line needs no newline. */
	r = run_cli_env("lookup nope 1\nping\nquit\nping", NULL, ARGS("-u", srv.tcp_uri));
	EXPECT(r, 1);
	expect_has(r.err, "(error) NO_TABLE: ");
	cr_assert_eq(strstr(r.out, "PONG") - r.out, 0);
	cr_assert_null(strstr(strstr(r.out, "PONG") + 4, "PONG"), "quit did not stop: %s", r.out);
	run_free(&r);

	r = run_cli_env("frob\nlookup nope 1\nping\n", NULL, ARGS("-u", srv.tcp_uri));
	EXPECT(r, 2);
	run_free(&r);

	r = run_cli_env("config set log_level \"unterminated\n", NULL, ARGS("-u", srv.tcp_uri));
	EXPECT(r, 2);
	expect_has(r.err, "(error) USAGE: unterminated quote");
	run_free(&r);

	r = run_cli_env("ping\ntable create j 2\nlookup j 3\nlookup nope 3\nfrob\n", NULL,
			ARGS("-u", srv.tcp_uri, "--json"));
	EXPECT(r, 2);
	/* One object per command, one per line. */
	const char *lines[5];
	int n = 0;
	for (const char *p = r.out; *p && n < 5; n++) {
		lines[n] = p;
		p = strchr(p, '\n');
		cr_assert_not_null(p);
		json_line(lines[n], (size_t)(p - lines[n]));
		p++;
	}
	cr_assert_eq(n, 5, "%s", r.out);
	cr_assert_null(strchr(strchr(lines[4], '\n') + 1, '\n'));
	jv *v = json_line(lines[2], (size_t)(strchr(lines[2], '\n') - lines[2]));
	cr_assert_eq(jnum(v, "rows.0.id"), 3);
	v = json_line(lines[3], (size_t)(strchr(lines[3], '\n') - lines[3]));
	cr_assert_str_eq(jstr(v, "error"), "NO_TABLE");
	v = json_line(lines[4], (size_t)(strchr(lines[4], '\n') - lines[4]));
	cr_assert_str_eq(jstr(v, "error"), "USAGE");
	run_free(&r);
}
